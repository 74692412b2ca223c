//! The background threads. The flusher writes `Ordered` log records every few milliseconds
//! and checkpoints full memtables; the compactor merges full levels; the zone allocator
//! keeps free zones allocated ahead of need (`ZoneStore::allocate_ahead`). Writers are slowed
//! gradually when merges fall behind (`pace`) and wait only when a second memtable fills
//! before the first is written out.

use super::checkpoint::{self, Trigger};
use super::stats::WriteStalls;
use super::{compact, log, Inner};
use crate::layout::TableData;
use crate::options::MERGE_STREAMS;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use stitch_zone::Stream;

#[derive(Debug, Default)]
pub(crate) struct Signal {
    checkpoint: bool,
    ordered: bool,
    compact: bool,
    stop: bool,
}

/// What a background thread runs.
type Body = Box<dyn FnOnce(&Arc<Inner>) + Send>;

pub(crate) fn spawn(inner: &Arc<Inner>) -> Vec<std::thread::JoinHandle<()>> {
    let start = |name: String, body: Body| {
        let inner = inner.clone();
        std::thread::Builder::new()
            .name(name)
            .spawn(move || body(&inner))
            .expect("spawning a background thread")
    };
    let compactors = MERGE_STREAMS
        .into_iter()
        .take(inner.opts.compaction_threads)
        .enumerate()
        .map(|(i, stream)| {
            start(
                format!("stitchdb-compact-{i}"),
                Box::new(move |inner| run_compactor(inner, stream)),
            )
        });
    let allocator = (inner.opts.ahead_zones > 0).then(|| {
        start(
            "stitchdb-zones".into(),
            Box::new(|inner| {
                while inner.zones.wait_for_shortage() {
                    inner.zones.allocate_ahead();
                }
            }),
        )
    });
    std::iter::once(start("stitchdb-flush".into(), Box::new(run_flusher)))
        .chain(compactors)
        .chain(allocator)
        .collect()
}

fn run_flusher(inner: &Arc<Inner>) {
    // This thread only writes and waits: it gains the saved copy and loses nothing waiting
    // for the device (see `stitch_io::write_direct`).
    stitch_io::write_direct(true);
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
        // The log's next zone, taken a segment ahead, gets its zeros here rather than from
        // the commit that moves the log into it (a whole zone written while it waits).
        inner.zones.zero_zones();
        if ckpt {
            match checkpoint::checkpoint(inner, Trigger::Background) {
                Ok(_) => request_compaction(inner),
                Err(e) => tracing::error!("background checkpoint failed: {e}"),
            }
        }
    }
}

/// Makes the calling thread `by` nicer (Linux keeps a nice value per thread; the helper
/// threads it spawns inherit it). Failing, it leaves the thread as it was.
#[cfg(target_os = "linux")]
fn lower_priority(by: u8) {
    use rustix::process::{getpriority_process, setpriority_process};
    if by == 0 {
        return;
    }
    // On Linux `PRIO_PROCESS` with a thread id names that one thread.
    let tid = Some(rustix::thread::gettid());
    let lowered = getpriority_process(tid)
        .and_then(|now| setpriority_process(tid, (now + i32::from(by)).min(19)));
    if let Err(e) = lowered {
        tracing::warn!("could not lower the compaction thread's priority: {e}");
    }
}

#[cfg(not(target_os = "linux"))]
fn lower_priority(_by: u8) {}

/// How long the compactor waits, out of work, before it writes a manifest listing the merges
/// installed since the last one: while writes go on, the next checkpoint lists them anyway.
const IDLE_MANIFEST_DELAY: Duration = Duration::from_millis(100);

fn run_compactor(inner: &Arc<Inner>, stream: Stream) {
    lower_priority(inner.opts.compaction_nice);
    // A merge makes its input runs durable before stitching them, so while a mount absorbs a
    // sequential write this thread writes out most of the ingested file data; buffered, the
    // kernel's copy into the page cache would cost it as much CPU as the merge itself (see
    // `stitch_io::write_direct`).
    stitch_io::write_direct(true);
    let mut last_work = std::time::Instant::now();
    loop {
        let asked = {
            let mut s = inner.signal.lock();
            if !s.compact && !s.stop {
                inner.wake.wait_for(&mut s, IDLE_MANIFEST_DELAY);
            }
            if s.stop {
                return;
            }
            std::mem::take(&mut s.compact)
        };
        if !asked {
            if last_work.elapsed() >= IDLE_MANIFEST_DELAY {
                let r = checkpoint::write_deferred(inner);
                if let Err(e) = inner.guard(r) {
                    tracing::error!("writing a manifest after merges failed: {e}");
                }
            }
            continue;
        }
        loop {
            match compact::compact_once(inner, stream) {
                Ok(true) if !inner.signal.lock().stop => continue,
                Ok(_) => break,
                // The merge was given up and the store left as it was; the next request
                // tries again (a full store's writers reclaim room themselves: `space`).
                Err(e) if e.is_out_of_zones() => {
                    tracing::warn!("a background merge found no room: {e}");
                    break;
                }
                Err(e) => {
                    tracing::error!("background compaction failed: {e}");
                    break;
                }
            }
        }
        last_work = std::time::Instant::now();
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
    inner.zones.stop_ahead();
}

/// Runs waiting to be merged: in each level, the runs beyond what a level holds at rest.
fn merge_debt(inner: &Inner) -> usize {
    let v = inner.version.read().clone();
    let at_rest = inner.opts.level_runs - 1;
    v.tables
        .values()
        .map(|t| t.data.merge_debt(at_rest))
        .max()
        .unwrap_or(0)
}

/// The write rate (bytes per second) a writer is held to at one run of debt beyond
/// `Options::slowdown_runs`; at `n` runs, a `n`th of it.
const PACED_RATE: u64 = 64 << 20;

/// Sleeps shorter than this are saved up: the system cannot sleep for a few microseconds.
const MIN_SLEEP: Duration = Duration::from_millis(1);

thread_local! {
    /// Pacing delay this thread owes but has not slept yet.
    static OWED: std::cell::Cell<Duration> = const { std::cell::Cell::new(Duration::ZERO) };
}

/// Slows a writer that just wrote `bytes` in proportion to how far merges are behind: past
/// `Options::slowdown_runs`, each write costs time for its bytes at a rate that falls as the debt
/// grows, so the write rate eases off smoothly (by bytes, not writes: small and large values
/// are slowed alike) instead of stopping dead when memory runs out.
pub(crate) fn pace(inner: &Inner, bytes: usize) {
    let delay = pacing_delay(merge_debt(inner), inner.opts.slowdown_runs, bytes);
    if delay.is_zero() {
        OWED.set(Duration::ZERO);
        return;
    }
    let owed = OWED.get() + delay;
    if owed < MIN_SLEEP {
        OWED.set(owed);
        return;
    }
    OWED.set(Duration::ZERO);
    let start = Instant::now();
    std::thread::sleep(owed);
    inner.stalls.paced.add(start.elapsed());
}

/// What writing `bytes` costs a writer at `debt` runs waiting to be merged, `free` of which
/// cost nothing.
fn pacing_delay(debt: usize, free: usize, bytes: usize) -> Duration {
    let excess = debt.saturating_sub(free).min(64) as u64;
    if excess == 0 {
        return Duration::ZERO;
    }
    Duration::from_nanos(bytes as u64 * excess * 1_000_000_000 / PACED_RATE)
}

/// Holds a writer back while some table has a full memtable *and* another one still being
/// written out: memory stays bounded at about two memtables per table.
pub(crate) fn wait_while_backlogged(inner: &Inner) {
    let start = Instant::now();
    let mut waited = false;
    // Checked under the signal lock, which `checkpoint::notify_flushed` takes too: a flush
    // finishing between the check and the wait still wakes the writer.
    let mut s = inner.signal.lock();
    loop {
        let backlogged = {
            let v = inner.version.read();
            v.tables
                .values()
                .any(|t| t.data.is_freezing() && inner.memtable_is_full(t))
        };
        if !backlogged || inner.failure.lock().is_some() {
            if waited {
                inner.stalls.backlog.add(start.elapsed());
            }
            return;
        }
        waited = true;
        s.checkpoint = true;
        inner.wake.notify_all();
        inner.flushed.wait_for(&mut s, Duration::from_millis(10));
    }
}

/// How often, and for how long, one cause held writers back (counters: no lock).
#[derive(Debug, Default)]
pub(crate) struct StallCounter {
    times: AtomicU64,
    nanos: AtomicU64,
}

impl StallCounter {
    fn add(&self, held: Duration) {
        self.times.fetch_add(1, Ordering::Relaxed);
        self.nanos.fetch_add(
            u64::try_from(held.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    fn read(&self) -> (u64, Duration) {
        (
            self.times.load(Ordering::Relaxed),
            Duration::from_nanos(self.nanos.load(Ordering::Relaxed)),
        )
    }
}

/// Writers held back since the store was opened, by cause.
#[derive(Debug, Default)]
pub(crate) struct Stalls {
    /// Waits for a frozen memtable to be written out ([`wait_while_backlogged`]).
    backlog: StallCounter,
    /// Sleeps while merges are behind ([`pace`]).
    paced: StallCounter,
}

impl Stalls {
    pub(crate) fn read(&self) -> WriteStalls {
        let (backlog_waits, backlog) = self.backlog.read();
        let (paced_sleeps, paced) = self.paced.read();
        WriteStalls {
            backlog_waits,
            backlog,
            paced_sleeps,
            paced,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stalls_are_counted_by_cause_with_their_time() {
        let stalls = Stalls::default();
        stalls.paced.add(Duration::from_millis(3));
        stalls.paced.add(Duration::from_micros(1500));
        stalls.backlog.add(Duration::from_millis(10));
        assert_eq!(
            stalls.read(),
            WriteStalls {
                backlog_waits: 1,
                backlog: Duration::from_millis(10),
                paced_sleeps: 2,
                paced: Duration::from_micros(4500),
            }
        );
    }

    #[test]
    fn pacing_starts_past_the_free_debt_and_grows_with_debt_and_bytes() {
        let free = 16;
        assert_eq!(pacing_delay(0, free, 1 << 20), Duration::ZERO);
        assert_eq!(pacing_delay(free, free, 1 << 20), Duration::ZERO);
        let one = pacing_delay(free + 1, free, 1 << 20);
        // One run over: a mebibyte at PACED_RATE.
        assert_eq!(one, Duration::from_nanos(1_000_000_000 / 64));
        assert_eq!(pacing_delay(free + 4, free, 1 << 20), one * 4);
        assert_eq!(pacing_delay(free + 1, free, 2 << 20), one * 2);
        // The slope stops at 64 runs over.
        assert_eq!(pacing_delay(1000, free, 1 << 20), one * 64);
        // No free debt: the first run waiting slows writers.
        assert_eq!(pacing_delay(1, 0, 1 << 20), one);
    }
}
