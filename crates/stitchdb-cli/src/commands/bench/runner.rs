//! Running one benchmark: `--threads` threads, each doing the whole operation count against
//! the shared store (as db_bench's threads do), timed per thread.

use super::keys::{self, KeySequence, RandomAppend, SeqInsert, SplitMix64, Values};
use super::workload::Benchmark;
use crate::error::{CliError, CliResult};
use std::ops::Bound;
use std::sync::Arc;
use std::time::{Duration, Instant};
use stitchdb::{Db, TableId};

/// What a benchmark's operations are.
enum Op {
    Put(Pattern),
    Delete,
    Get,
    Seek,
    /// A full scan, forward or (true) backward.
    Scan(bool),
}

/// Which key numbers a put writes.
enum Pattern {
    Sequential,
    Uniform,
    RandomAppend,
    SeqInsert,
}

/// The operation `bench` performs.
fn plan(bench: Benchmark) -> Op {
    match bench {
        Benchmark::FillSeq => Op::Put(Pattern::Sequential),
        Benchmark::FillRandom | Benchmark::Overwrite => Op::Put(Pattern::Uniform),
        Benchmark::RandomAppend => Op::Put(Pattern::RandomAppend),
        Benchmark::SeqInsert => Op::Put(Pattern::SeqInsert),
        Benchmark::DeleteRandom => Op::Delete,
        Benchmark::ReadRandom => Op::Get,
        Benchmark::SeekRandom => Op::Seek,
        Benchmark::ReadSeq => Op::Scan(false),
        Benchmark::ReadReverse => Op::Scan(true),
    }
}

/// What every benchmark of a run shares.
pub struct Setup {
    pub num: u64,
    pub reads: u64,
    pub key_size: usize,
    pub value_size: usize,
    pub threads: usize,
    pub seed: u64,
    pub value_pool: Arc<[u8]>,
}

/// One benchmark's result, merged over its threads as db_bench merges them.
pub struct Outcome {
    pub ops: u64,
    /// Key and value bytes written or read (db_bench's MB/s).
    pub bytes: u64,
    /// For point reads and seeks: (found, looked up).
    pub found: Option<(u64, u64)>,
    /// From the first thread's start to the last thread's end.
    pub elapsed: Duration,
    /// The threads' running times added up (db_bench's micros/op divides this by the ops).
    pub thread_time: Duration,
}

/// Runs `bench`, the `index`-th benchmark of the run (0-based; it picks the random streams),
/// against `table`. `None` if StitchDB cannot run it.
pub fn run(
    bench: Benchmark,
    index: usize,
    setup: &Setup,
    db: &Db,
    table: TableId,
) -> CliResult<Outcome> {
    let op = plan(bench);
    let results: Vec<CliResult<Counts>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..setup.threads)
            .map(|t| {
                // Thread t of the i-th benchmark: stream seed + i * threads + t.
                let stream = (index * setup.threads + t) as u64;
                let rng = SplitMix64::new(setup.seed.wrapping_add(stream));
                let thread = Thread {
                    db,
                    table,
                    setup,
                    key: vec![0; setup.key_size],
                };
                let op = &op;
                scope.spawn(move || thread.run(op, rng))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(CliError::new("a benchmark thread panicked")))
            })
            .collect()
    });
    let counts = results.into_iter().collect::<CliResult<Vec<Counts>>>()?;
    Ok(merge(&counts, matches!(op, Op::Get | Op::Seek)))
}

fn merge(counts: &[Counts], reports_found: bool) -> Outcome {
    let first_start = counts.iter().map(|c| c.started).min();
    let last_end = counts.iter().map(|c| c.finished).max();
    let elapsed = match (first_start, last_end) {
        (Some(start), Some(end)) => end.duration_since(start),
        _ => Duration::ZERO,
    };
    let found = counts.iter().map(|c| c.found).sum();
    let ops = counts.iter().map(|c| c.ops).sum();
    Outcome {
        ops,
        bytes: counts.iter().map(|c| c.bytes).sum(),
        found: reports_found.then_some((found, ops)),
        elapsed,
        thread_time: counts
            .iter()
            .map(|c| c.finished.duration_since(c.started))
            .sum(),
    }
}

/// One thread's tallies.
struct Counts {
    ops: u64,
    bytes: u64,
    found: u64,
    started: Instant,
    finished: Instant,
}

/// One benchmark thread and its key buffer.
struct Thread<'a> {
    db: &'a Db,
    table: TableId,
    setup: &'a Setup,
    key: Vec<u8>,
}

impl Thread<'_> {
    fn run(mut self, op: &Op, rng: SplitMix64) -> CliResult<Counts> {
        let num = self.setup.num;
        let uniform = |rng| KeySequence::Uniform { rng, n: num };
        let started = Instant::now();
        let (ops, bytes, found) = match op {
            Op::Put(Pattern::Sequential) => self.put(KeySequence::Sequential { next: 0 })?,
            Op::Put(Pattern::Uniform) => self.put(uniform(rng))?,
            Op::Put(Pattern::RandomAppend) => {
                self.put(KeySequence::RandomAppend(RandomAppend::new(rng, num)))?
            }
            Op::Put(Pattern::SeqInsert) => self.put(KeySequence::SeqInsert(SeqInsert::new(rng)))?,
            Op::Delete => self.delete(uniform(rng))?,
            Op::Get => self.get(uniform(rng))?,
            Op::Seek => self.seek(uniform(rng))?,
            Op::Scan(reverse) => self.scan(*reverse)?,
        };
        Ok(Counts {
            ops,
            bytes,
            found,
            started,
            finished: Instant::now(),
        })
    }

    /// Sets the key buffer to key number `n`.
    fn key(&mut self, keys: &mut KeySequence) -> &[u8] {
        keys::encode_key(keys.next_key(), &mut self.key);
        &self.key
    }

    fn put(&mut self, mut keys: KeySequence) -> CliResult<(u64, u64, u64)> {
        let setup = self.setup;
        let mut values = Values::new(setup.value_pool.clone(), setup.value_size);
        for _ in 0..setup.num {
            let (db, table) = (self.db, self.table);
            db.put(table, self.key(&mut keys), values.next_value())?;
        }
        let bytes = setup.num * (setup.key_size + setup.value_size) as u64;
        Ok((setup.num, bytes, 0))
    }

    fn delete(&mut self, mut keys: KeySequence) -> CliResult<(u64, u64, u64)> {
        for _ in 0..self.setup.num {
            let (db, table) = (self.db, self.table);
            db.delete(table, self.key(&mut keys))?;
        }
        Ok((self.setup.num, 0, 0))
    }

    /// Point reads of random keys; bytes count what was found (db_bench's readrandom).
    fn get(&mut self, mut keys: KeySequence) -> CliResult<(u64, u64, u64)> {
        let (mut bytes, mut found) = (0, 0);
        for _ in 0..self.setup.reads {
            let (db, table) = (self.db, self.table);
            if let Some(value) = db.get(table, self.key(&mut keys))? {
                found += 1;
                bytes += (self.key.len() + value.len()) as u64;
            }
        }
        Ok((self.setup.reads, bytes, found))
    }

    /// Positions a scan at a random key and reads the first entry; found when that entry is
    /// the key itself (db_bench's seekrandom with its default `--seek_nexts=0`: no bytes).
    fn seek(&mut self, mut keys: KeySequence) -> CliResult<(u64, u64, u64)> {
        let mut found = 0;
        for _ in 0..self.setup.reads {
            let (db, table) = (self.db, self.table);
            let key = self.key(&mut keys);
            let first = db
                .range(table, Bound::Included(key), Bound::Unbounded)?
                .next();
            if let Some((k, _)) = first.transpose()? {
                found += u64::from(k == key);
            }
        }
        Ok((self.setup.reads, 0, found))
    }

    /// Reads up to `--reads` entries in key order from the start (db_bench's readseq).
    fn scan(&mut self, reverse: bool) -> CliResult<(u64, u64, u64)> {
        let (mut ops, mut bytes) = (0, 0);
        let (all, table) = ((Bound::Unbounded, Bound::Unbounded), self.table);
        let scan = if reverse {
            self.db.range_rev(table, all.0, all.1)?
        } else {
            self.db.range(table, all.0, all.1)?
        };
        for item in scan.take(usize::try_from(self.setup.reads).unwrap_or(usize::MAX)) {
            let (k, v) = item?;
            ops += 1;
            bytes += (k.len() + v.len()) as u64;
        }
        Ok((ops, bytes, 0))
    }
}
