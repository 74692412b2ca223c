//! `demo`: the main job end to end on a store of generated user records: import with a
//! progress bar, read back and verify, scan a prefix, delete, then `stats` and `check`.
//!
//! Values are a pure function of the record number, so a second run over the same store
//! overwrites every record with the same value and every check still holds.

use super::inspect;
use crate::error::{CliError, CliResult};
use crate::format::tsv;
use crate::output;
use crate::progress::Progress;
use crate::store;
use clap::Args;
use indicatif::HumanBytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use stitchdb::{Db, Durability, Options, TableId, WriteBatch};

const TABLE: &str = "users";
const RECORDS: u64 = 200_000;
const BATCH: u64 = 1000;
/// Random records read back and compared with what was written.
const SAMPLES: usize = 1000;
/// Matches `user:001000` to `user:001999`.
const SCAN_PREFIX: &str = "user:001";
const SCAN_EXPECTED: usize = 1000;
/// Every this-many-th record is deleted.
const DELETE_EVERY: u64 = 100;

#[derive(Args)]
pub struct DemoArgs {
    /// Store to use: created if missing, reused if present
    #[arg(default_value = "./stitchdb-demo.store")]
    store: PathBuf,
}

pub fn run(args: DemoArgs) -> CliResult {
    let mut steps = Steps::default();
    let (db, users) = steps.time("open", || open_or_create(&args.store))?;
    steps.time("import", || import(&db, users))?;
    steps.time("verify", || verify_sample(&db, users))?;
    steps.time("scan", || scan_prefix(&db, users))?;
    steps.time("delete", || delete(&db, users))?;
    steps.time("stats", || {
        output::print(format_args!("stats:\n{}", db.stats()))
    })?;
    steps.time("check", || {
        let report = db.check()?;
        output::print(format_args!("check: ok: {}\n", inspect::describe(&report)))
    })?;
    steps.time("close", || Ok(db.close()?))?;
    output::print(steps)
}

/// The store at `path` (created if missing) and its demo table (created if missing).
fn open_or_create(path: &Path) -> CliResult<(Db, TableId)> {
    let db = if path.exists() {
        output::print(format_args!("reusing store {}\n", path.display()))?;
        store::open(path)?
    } else {
        output::print(format_args!("creating store {}\n", path.display()))?;
        Db::create(path, Options::default())?
    };
    let table = db.open_table(TABLE)?;
    Ok((db, table))
}

fn key(i: u64) -> String {
    format!("user:{i:06}")
}

/// A small JSON-ish record; the same for the same `i`, so reruns and checks agree.
fn value(i: u64) -> String {
    const CITIES: [&str; 6] = ["Lisbon", "Osaka", "Lagos", "Quito", "Tartu", "Perth"];
    let mut rng = StdRng::seed_from_u64(i);
    let city = CITIES[rng.gen_range(0..CITIES.len())];
    let score: u32 = rng.gen_range(0..1000);
    format!(r#"{{"id":{i},"name":"user {i}","city":"{city}","score":{score}}}"#)
}

/// Writes every record in `Async` batches with one sync at the end, like `import`.
fn import(db: &Db, table: TableId) -> CliResult {
    let started = Instant::now();
    let progress = Progress::items(RECORDS, "records imported");
    let mut batch = WriteBatch::new();
    let mut bytes = 0;
    for i in 0..RECORDS {
        let (k, v) = (key(i), value(i));
        bytes += (k.len() + v.len()) as u64;
        batch.put(table, k, v);
        if batch.len() as u64 == BATCH || i + 1 == RECORDS {
            db.write(&batch, Durability::Async)?;
            batch.clear();
            progress.set_position(i + 1);
        }
    }
    db.sync()?;
    progress.finish();
    let seconds = started.elapsed().as_secs_f64();
    output::print(format_args!(
        "imported {RECORDS} records ({}) in batches of {BATCH}: {seconds:.2} s, {:.0} records/s\n",
        HumanBytes(bytes),
        RECORDS as f64 / seconds.max(1e-9)
    ))
}

fn verify_sample(db: &Db, table: TableId) -> CliResult {
    let mut rng = rand::thread_rng();
    for _ in 0..SAMPLES {
        let i = rng.gen_range(0..RECORDS);
        let found = db.get(table, key(i))?;
        if found.as_deref() != Some(value(i).as_bytes()) {
            let found = found.map_or("nothing".into(), |v| format!("\"{}\"", tsv::escape(&v)));
            return Err(CliError::new(format!(
                "demo: {} read back as {found}, expected {}",
                key(i),
                value(i)
            )));
        }
    }
    output::print(format_args!("verified {SAMPLES} random records\n"))
}

fn scan_prefix(db: &Db, table: TableId) -> CliResult {
    let mut keys = Vec::new();
    for item in db.scan_prefix(table, SCAN_PREFIX.as_bytes())? {
        keys.push(item?.0);
    }
    let in_order = keys.windows(2).all(|w| w[0] < w[1]);
    let prefixed = keys.iter().all(|k| k.starts_with(SCAN_PREFIX.as_bytes()));
    if keys.len() != SCAN_EXPECTED || !in_order || !prefixed {
        return Err(CliError::new(format!(
            "demo: scanning prefix {SCAN_PREFIX:?} gave {} keys, expected {SCAN_EXPECTED} \
             (in key order: {in_order}, all with the prefix: {prefixed})",
            keys.len()
        )));
    }
    output::print(format_args!(
        "prefix scan {SCAN_PREFIX:?}: {} records, in key order\n",
        keys.len()
    ))
}

/// Deletes every `DELETE_EVERY`-th record in one durable batch and checks they are gone.
fn delete(db: &Db, table: TableId) -> CliResult {
    let doomed = (0..RECORDS).step_by(DELETE_EVERY as usize);
    let mut batch = WriteBatch::new();
    for i in doomed.clone() {
        batch.delete(table, key(i));
    }
    db.write(&batch, Durability::Sync)?;
    for i in doomed {
        if db.get(table, key(i))?.is_some() {
            return Err(CliError::new(format!(
                "demo: {} is still there after being deleted",
                key(i)
            )));
        }
    }
    output::print(format_args!(
        "deleted {} records (every {DELETE_EVERY}th) and verified they are gone\n",
        batch.len()
    ))
}

/// How long each step took, printed as the closing summary.
#[derive(Default)]
struct Steps(Vec<(&'static str, Duration)>);

impl Steps {
    /// Runs `step` and records how long it took.
    fn time<T>(&mut self, name: &'static str, step: impl FnOnce() -> CliResult<T>) -> CliResult<T> {
        let started = Instant::now();
        let result = step();
        self.0.push((name, started.elapsed()));
        result
    }
}

impl std::fmt::Display for Steps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "summary:")?;
        for (name, took) in &self.0 {
            writeln!(f, "  {name:<8} {:>9.3} s", took.as_secs_f64())?;
        }
        let total: Duration = self.0.iter().map(|(_, took)| *took).sum();
        writeln!(f, "  {:<8} {:>9.3} s", "total", total.as_secs_f64())
    }
}
