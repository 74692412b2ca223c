//! The background thread: flushes `Ordered` writes every few milliseconds and runs
//! checkpoints when a memtable fills, so writers only wait when they get far ahead.

use super::checkpoint::{self, Trigger};
use super::{log, Inner};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Default)]
pub(crate) struct Signal {
    checkpoint: bool,
    ordered: bool,
    stop: bool,
}

pub(crate) fn spawn(inner: Arc<Inner>) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("stitchdb-background".into())
        .spawn(move || run(&inner))
        .expect("spawning the background thread")
}

fn run(inner: &Arc<Inner>) {
    let interval = Duration::from_millis(inner.opts.ordered_flush_interval_ms.max(1));
    loop {
        let (ckpt, ordered) = {
            let mut s = inner.signal.lock();
            if !s.checkpoint && !s.stop {
                inner.wake.wait_for(&mut s, interval);
            }
            if s.stop {
                return;
            }
            (
                std::mem::take(&mut s.checkpoint),
                std::mem::take(&mut s.ordered),
            )
        };
        if ordered {
            if let Ok(wal) = inner.wal() {
                let r = wal.flush_async().map_err(log::log_err);
                let _ = inner.guard(r);
            }
        }
        if ckpt {
            if let Err(e) = checkpoint::checkpoint(inner, Trigger::Background) {
                tracing::error!("background checkpoint failed: {e}");
            }
        }
    }
}

pub(crate) fn ordered_write(inner: &Inner) {
    inner.signal.lock().ordered = true;
}

pub(crate) fn request_checkpoint(inner: &Inner) {
    inner.signal.lock().checkpoint = true;
    inner.wake.notify_one();
}

pub(crate) fn stop(inner: &Inner) {
    inner.signal.lock().stop = true;
    inner.wake.notify_one();
}

/// Holds a writer back while some table has a full memtable *and* another one still being
/// written out: memory stays bounded at about two memtables per table.
pub(crate) fn wait_while_backlogged(inner: &Inner) {
    loop {
        let backlogged = {
            let v = inner.version.read();
            v.tables
                .values()
                .any(|t| t.imm.is_some() && t.mem.bytes() >= inner.opts.memtable_size)
        };
        if !backlogged || inner.failure.lock().is_some() {
            return;
        }
        let mut s = inner.signal.lock();
        s.checkpoint = true;
        inner.wake.notify_one();
        inner.flushed.wait_for(&mut s, Duration::from_millis(10));
    }
}
