//! The workloads, run against one engine in this process, and the keys and values they use.

use crate::engine::{Engine, Item, Result};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

/// Bytes per key and per value.
pub const KEY_LEN: usize = 16;
pub const VALUE_LEN: usize = 100;
/// Items per bulk-load batch, per batched write, per removal batch; entries per range scan.
const LOAD_BATCH: usize = 10_000;
const WRITE_BATCH: usize = 1_000;
const REMOVE_BATCH: usize = 1_000;
const SCAN_LEN: usize = 100;

/// How many operations each workload does (at `--scale 1`).
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    pub load: usize,
    pub single_writes: usize,
    pub batches: usize,
    pub reads: usize,
    pub scans: usize,
    pub removals: usize,
}

impl Sizes {
    pub fn scaled(scale: f64) -> Sizes {
        let n = |base: f64| ((base * scale) as usize).max(2);
        Sizes {
            load: n(200_000.0),
            single_writes: n(200.0),
            batches: n(20.0),
            reads: n(200_000.0),
            scans: n(10_000.0),
            removals: n(50_000.0),
        }
    }
}

/// One measured row: its name and operations per second.
pub struct Measured {
    pub name: String,
    pub ops_per_sec: f64,
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Key `i`: 16 pseudo-random bytes, so loads and writes land all over the key space.
pub fn key(i: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(KEY_LEN);
    k.extend_from_slice(&splitmix64(i).to_be_bytes());
    k.extend_from_slice(&splitmix64(i ^ 0x5555_5555).to_be_bytes());
    k
}

/// Value of key `i`: 100 pseudo-random bytes (incompressible, as no engine compresses here).
pub fn value(i: u64) -> Vec<u8> {
    (0..VALUE_LEN as u64 / 8)
        .flat_map(|j| splitmix64(i.wrapping_mul(31).wrapping_add(j) ^ 0xabcd).to_le_bytes())
        .chain([0u8; VALUE_LEN % 8])
        .collect()
}

fn items(range: std::ops::Range<u64>) -> Vec<Item> {
    range.map(|i| (key(i), value(i))).collect()
}

/// Runs `per_thread(thread index)` on `threads` threads at once; returns the seconds it took.
fn timed(threads: usize, per_thread: impl Fn(usize) -> Result<()> + Sync) -> Result<f64> {
    let started = Instant::now();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn({
                    let per_thread = &per_thread;
                    move || per_thread(t)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| "a worker thread panicked".to_string())?
            })
            .collect::<Result<Vec<()>>>()
    })?;
    Ok(started.elapsed().as_secs_f64())
}

/// Runs every workload on `engine`, calling `report` after each (and `loaded` once the bulk
/// load is durable, to measure the store's size).
pub fn run(
    engine: &dyn Engine,
    sizes: Sizes,
    report: &mut dyn FnMut(Measured),
    loaded: &mut dyn FnMut(),
) -> Result<()> {
    let load = sizes.load as u64;
    // Bulk load: batches of 10,000 not synced, the last synced (durable when it returns).
    let data = items(0..load);
    let secs = timed(1, |_| {
        let mut w = engine.writer()?;
        let chunks: Vec<&[Item]> = data.chunks(LOAD_BATCH).collect();
        for (i, chunk) in chunks.iter().enumerate() {
            w.insert(chunk, i + 1 == chunks.len())?;
        }
        Ok(())
    })?;
    drop(data);
    report(Measured {
        name: "bulk load".into(),
        ops_per_sec: load as f64 / secs,
    });
    loaded();

    // New keys for the writes below, so each one inserts.
    let mut next = load;
    for threads in [1, 2] {
        let per = sizes.single_writes / threads;
        let base = next;
        let secs = timed(threads, |t| {
            let mut w = engine.writer()?;
            let first = base + (t * per) as u64;
            for i in first..first + per as u64 {
                w.insert(&[(key(i), value(i))], true)?;
            }
            Ok(())
        })?;
        next += (per * threads) as u64;
        report(Measured {
            name: format!(
                "individual synced writes, {threads} thread{}",
                plural(threads)
            ),
            ops_per_sec: (per * threads) as f64 / secs,
        });
    }
    for threads in [1, 2] {
        let per = sizes.batches / threads;
        let base = next;
        let secs = timed(threads, |t| {
            let mut w = engine.writer()?;
            for b in 0..per {
                let first = base + ((t * per + b) * WRITE_BATCH) as u64;
                w.insert(&items(first..first + WRITE_BATCH as u64), true)?;
            }
            Ok(())
        })?;
        next += (per * threads * WRITE_BATCH) as u64;
        report(Measured {
            name: format!(
                "batched synced writes (1,000 per batch), {threads} thread{}",
                plural(threads)
            ),
            ops_per_sec: (per * threads * WRITE_BATCH) as f64 / secs,
        });
    }
    for threads in [1, 2] {
        let per = sizes.reads / threads;
        let secs = timed(threads, |t| {
            let mut r = engine.reader()?;
            for j in 0..per as u64 {
                let i = splitmix64(j ^ ((t as u64) << 40)) % load;
                if r.get(&key(i))? != Some(VALUE_LEN) {
                    return Err(format!("key {i} of the bulk load is missing"));
                }
            }
            Ok(())
        })?;
        report(Measured {
            name: format!("random reads, {threads} thread{}", plural(threads)),
            ops_per_sec: (per * threads) as f64 / secs,
        });
    }
    // Readers while a writer commits: the writer inserts new keys, each its own synced
    // commit, until the readers are done (the target: reads scale with reader threads).
    for threads in [1, 2] {
        let per = sizes.reads / threads;
        let done = AtomicBool::new(false);
        let finished = AtomicUsize::new(0);
        let written = AtomicU64::new(0);
        let base = next + 10_000_000 * threads as u64;
        let secs = timed(threads + 1, |t| {
            if t == threads {
                let mut w = engine.writer()?;
                let mut i = base;
                while !done.load(Ordering::Acquire) {
                    w.insert(&[(key(i), value(i))], true)?;
                    i += 1;
                }
                written.store(i - base, Ordering::Release);
                return Ok(());
            }
            let mut r = engine.reader()?;
            let read = (|| {
                for j in 0..per as u64 {
                    let i = splitmix64(j ^ ((t as u64) << 40) ^ 0x77) % load;
                    if r.get(&key(i))? != Some(VALUE_LEN) {
                        return Err(format!("key {i} of the bulk load is missing"));
                    }
                }
                Ok(())
            })();
            // The last reader to finish stops the writer (and a failed one at once).
            if finished.fetch_add(1, Ordering::AcqRel) + 1 == threads || read.is_err() {
                done.store(true, Ordering::Release);
            }
            read
        })?;
        report(Measured {
            name: format!(
                "random reads while a writer commits, {threads} reader{}",
                plural(threads)
            ),
            ops_per_sec: (per * threads) as f64 / secs,
        });
        eprintln!(
            "writer committed {} synced writes meanwhile",
            written.load(Ordering::Acquire)
        );
    }
    for threads in [1, 2] {
        let per = sizes.scans / threads;
        let secs = timed(threads, |t| {
            let mut r = engine.reader()?;
            for j in 0..per as u64 {
                let i = splitmix64(j ^ ((t as u64) << 40) ^ 0x5ca1) % load;
                r.scan(&key(i), SCAN_LEN)?;
            }
            Ok(())
        })?;
        report(Measured {
            name: format!(
                "range scans (100 entries), {threads} thread{}",
                plural(threads)
            ),
            ops_per_sec: (per * threads) as f64 / secs,
        });
    }
    // Removals: keys of the bulk load, in synced batches of 1,000.
    let removals = sizes.removals.min(sizes.load);
    let keys: Vec<Vec<u8>> = (0..removals as u64).map(key).collect();
    let secs = timed(1, |_| {
        let mut w = engine.writer()?;
        for chunk in keys.chunks(REMOVE_BATCH) {
            w.remove(chunk)?;
        }
        let mut r = engine.reader()?;
        if r.get(&key(0))?.is_some() {
            return Err("a removed key is still there".into());
        }
        Ok(())
    })?;
    report(Measured {
        name: "removals (synced batches of 1,000)".into(),
        ops_per_sec: removals as f64 / secs,
    });
    Ok(())
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
