//! The background threads. The flusher writes `Ordered` log records every few milliseconds
//! and checkpoints full memtables; the compactor merges full levels. Writers are slowed
//! gradually when merges fall behind (`pace`) and wait only when a second memtable fills
//! before the first is written out.

use super::checkpoint::{self, Trigger};
use super::{compact, log, Inner};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Default)]
pub(crate) struct Signal {
    checkpoint: bool,
    ordered: bool,
    compact: bool,
    stop: bool,
}

pub(crate) fn spawn(inner: &Arc<Inner>) -> Vec<std::thread::JoinHandle<()>> {
    let start = |name: &str, body: fn(&Arc<Inner>)| {
        let inner = inner.clone();
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || body(&inner))
            .expect("spawning a background thread")
    };
    vec![
        start("stitchdb-flush", run_flusher),
        start("stitchdb-compact", run_compactor),
    ]
}

fn run_flusher(inner: &Arc<Inner>) {
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
            match checkpoint::checkpoint(inner, Trigger::Background) {
                Ok(_) => request_compaction(inner),
                Err(e) => tracing::error!("background checkpoint failed: {e}"),
            }
        }
    }
}

fn run_compactor(inner: &Arc<Inner>) {
    loop {
        {
            let mut s = inner.signal.lock();
            if !s.compact && !s.stop {
                inner.wake.wait_for(&mut s, Duration::from_millis(100));
            }
            if s.stop {
                return;
            }
            s.compact = false;
        }
        loop {
            match compact::compact_once(inner) {
                Ok(true) if !inner.signal.lock().stop => continue,
                Ok(_) => break,
                Err(e) => {
                    tracing::error!("background compaction failed: {e}");
                    break;
                }
            }
        }
    }
}

pub(crate) fn ordered_write(inner: &Inner) {
    inner.signal.lock().ordered = true;
}

pub(crate) fn request_checkpoint(inner: &Inner) {
    inner.signal.lock().checkpoint = true;
    inner.wake.notify_all();
}

pub(crate) fn request_compaction(inner: &Inner) {
    inner.signal.lock().compact = true;
    inner.wake.notify_all();
}

pub(crate) fn stop(inner: &Inner) {
    inner.signal.lock().stop = true;
    inner.wake.notify_all();
}

/// Runs waiting to be merged: in each level, the runs beyond what a level holds at rest.
fn merge_debt(inner: &Inner) -> usize {
    let v = inner.version.read().clone();
    let at_rest = inner.opts.level_runs - 1;
    v.tables
        .values()
        .map(|t| {
            t.levels
                .iter()
                .map(|l| l.len().saturating_sub(at_rest))
                .sum()
        })
        .max()
        .unwrap_or(0)
}

/// Slows a writer down in proportion to how far merges are behind, so the write rate eases
/// off smoothly instead of stopping dead when memory runs out.
pub(crate) fn pace(inner: &Inner) {
    const FREE_DEBT: usize = 2;
    let excess = merge_debt(inner).saturating_sub(FREE_DEBT);
    if excess > 0 {
        std::thread::sleep(Duration::from_micros(100 * excess.min(50) as u64));
    }
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
        inner.wake.notify_all();
        inner.flushed.wait_for(&mut s, Duration::from_millis(10));
    }
}
