//! `bench`: RocksDB db_bench's workloads, flags and result lines on StitchDB, plus the VT-tree
//! paper's RANDOM-APPEND and SEQUENTIAL-INSERTION workloads, so both stores can be run side by
//! side (`bench/compare.sh`). See `docs/bench-tool.md`.

mod keys;
mod plot;
mod procfs;
mod report;
mod runner;
mod store;
mod workload;

use crate::error::{CliError, CliResult, IoContext};
use crate::output;
use clap::{ArgAction, Args};
use runner::Setup;
use std::path::PathBuf;
use stitchdb::{Durability, Options, Stitching, MAX_KEY_LEN};
use store::BenchStore;
use workload::{parse_benchmarks, parse_flag_bool, Benchmark, BenchmarkList};

/// More threads than this is a typo, not a benchmark.
const MAX_THREADS: usize = 1024;

/// Flags use db_bench's names and `--flag=value` syntax, so one command line runs both tools.
#[derive(Args)]
pub struct BenchArgs {
    /// Comma-separated benchmarks, run in order: fillseq, fillrandom, overwrite, readrandom,
    /// seekrandom, readseq, readreverse, deleterandom, randomappend, seqinsert
    #[arg(long, value_name = "LIST", value_parser = parse_benchmarks,
          default_value = workload::DEFAULT_BENCHMARKS)]
    benchmarks: BenchmarkList,
    /// Keys to write (per thread), and the key space [0, num) random keys are drawn from
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    num: u64,
    /// Reads per thread for the read benchmarks; negative: --num
    #[arg(long, value_name = "N", default_value_t = -1, allow_negative_numbers = true)]
    reads: i64,
    /// Bytes per value
    #[arg(long = "value_size", value_name = "BYTES", default_value_t = 100)]
    value_size: usize,
    /// Bytes per key (db_bench's format: big-endian key number, then '0' padding)
    #[arg(long = "key_size", value_name = "BYTES", default_value_t = 16)]
    key_size: usize,
    /// Threads per benchmark, each doing the whole operation count
    #[arg(long, value_name = "N", default_value_t = 1)]
    threads: usize,
    /// Store to use (must not exist unless --use_existing_db=1) [default: a temporary store,
    /// removed at the end]
    #[arg(long, value_name = "PATH")]
    db: Option<PathBuf>,
    /// 1: every write is durable when it returns (Durability::Sync, as db_bench --sync=1
    /// fsyncs its WAL); 0: every write's log record is written to the OS before it returns,
    /// no sync (Durability::Written: a process crash loses nothing, as db_bench's default)
    #[arg(long, value_name = "0|1", value_parser = parse_flag_bool, action = ArgAction::Set,
          num_args = 0..=1, default_value = "0", default_missing_value = "1")]
    sync: bool,
    /// 1: log records stay in memory until a checkpoint or sync (Durability::Async: a
    /// process crash may lose up to a memtable of writes, as db_bench --disable_wal=1 loses
    /// its memtables); not with --sync=1
    #[arg(long = "disable_wal", value_name = "0|1", value_parser = parse_flag_bool,
          action = ArgAction::Set, num_args = 0..=1, default_value = "0",
          default_missing_value = "1")]
    disable_wal: bool,
    /// 1: run on the existing store at --db; benchmarks that need an empty store are skipped
    #[arg(long = "use_existing_db", value_name = "0|1", value_parser = parse_flag_bool,
          action = ArgAction::Set, num_args = 0..=1, default_value = "0",
          default_missing_value = "1")]
    use_existing_db: bool,
    /// Memtable bytes before it is written out as a run (alias: db_bench's --write_buffer_size)
    #[arg(long = "memtable_size", alias = "write_buffer_size", value_name = "BYTES",
          default_value_t = Options::default().memtable_size)]
    memtable_size: usize,
    /// Bytes of parsed run blocks kept in memory for reads (db_bench's name: the size of its
    /// block cache)
    #[arg(long = "cache_size", value_name = "BYTES",
          default_value_t = Options::default().read_cache_bytes)]
    cache_size: usize,
    /// Merges stitch spans of disk-contiguous blocks at least this long instead of copying
    /// them (the VT-tree's threshold), or `never`; also applied to an existing store
    /// [default: StitchDB's default]
    #[arg(long = "stitch_threshold", value_name = "BYTES|never",
          value_parser = workload::parse_stitching)]
    stitch_threshold: Option<Stitching>,
    /// Runs a level holds before they are merged into one run of the next level: the fan-out
    /// (the VT-tree paper's 2; more merge less often and leave more runs for reads to visit)
    #[arg(long = "level_runs", value_name = "N", default_value_t = Options::default().level_runs)]
    level_runs: usize,
    /// Runs waiting to be merged that writers may run up before they are slowed (like
    /// db_bench's --level0_slowdown_writes_trigger, which counts level-0 files)
    #[arg(long = "slowdown_runs", value_name = "N",
          default_value_t = Options::default().slowdown_runs)]
    slowdown_runs: usize,
    /// Threads merging levels in the background, 1 or 2 (db_bench's name for it)
    #[arg(long = "max_background_compactions", value_name = "N",
          default_value_t = Options::default().compaction_threads)]
    max_background_compactions: usize,
    /// How much nicer than the writers compaction threads run, 0 to 19 (Linux)
    #[arg(long = "compaction_nice", value_name = "N",
          default_value_t = Options::default().compaction_nice)]
    compaction_nice: u8,
    /// Seed of the splitmix64 streams keys are drawn from (see docs/bench-tool.md)
    #[arg(long, value_name = "N", default_value_t = 42)]
    seed: u64,
    /// Draw memtable flushes over time, one line per benchmark, as an SVG file
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
}

pub fn run(args: BenchArgs) -> CliResult {
    let setup = setup(&args)?;
    let durability = durability(args.sync, args.disable_wal)?;
    let stitching = args.stitch_threshold.unwrap_or_default();
    let options = Options {
        memtable_size: args.memtable_size,
        read_cache_bytes: args.cache_size,
        level_runs: args.level_runs,
        slowdown_runs: args.slowdown_runs,
        compaction_threads: args.max_background_compactions,
        compaction_nice: args.compaction_nice,
        stitching,
        durability,
        ..Options::default()
    };
    let mut store = BenchStore::open(args.db.clone(), args.use_existing_db, options)?;
    output::print(report::header(&report::Header {
        setup: &setup,
        durability,
        memtable_size: args.memtable_size,
        cache_size: args.cache_size,
        stitching,
        level_runs: args.level_runs,
        slowdown_runs: args.slowdown_runs,
        db_path: store.path(),
    }))?;
    let mut series = Vec::new();
    for (index, &bench) in args.benchmarks.0.iter().enumerate() {
        if bench.needs_fresh_db() && args.use_existing_db {
            output::print(report::skipped_line(bench))?;
            continue;
        }
        if bench.needs_fresh_db() {
            store.make_fresh()?;
        }
        if let Some(flushes) = run_one(bench, index, &setup, &mut store)? {
            series.push(flushes);
        }
    }
    store.close()?;
    if let Some(path) = &args.plot {
        std::fs::write(path, plot::svg(&series))
            .context(format_args!("writing {}", path.display()))?;
    }
    Ok(())
}

/// The durability matching db_bench's `--sync` and `--disable_wal`: what a crash of the
/// process or of the machine loses is the same on both sides.
fn durability(sync: bool, disable_wal: bool) -> CliResult<Durability> {
    match (sync, disable_wal) {
        (true, true) => Err(CliError::usage(
            "--sync=1 with --disable_wal=1: a sync needs the log (db_bench refuses it too)",
        )),
        (true, false) => Ok(Durability::Sync),
        (false, false) => Ok(Durability::Written),
        (false, true) => Ok(Durability::Async),
    }
}

/// Checks the flags and derives what the benchmarks share.
fn setup(args: &BenchArgs) -> CliResult<Setup> {
    if !(1..=MAX_KEY_LEN).contains(&args.key_size) {
        return Err(CliError::usage(format!(
            "--key_size={} must be between 1 and {MAX_KEY_LEN}",
            args.key_size
        )));
    }
    let max_value = stitchdb::max_value_len(Options::default().zone_size);
    if args.value_size > max_value {
        return Err(CliError::usage(format!(
            "--value_size={} is larger than StitchDB's largest value, {max_value} bytes",
            args.value_size
        )));
    }
    if !(1..=MAX_THREADS).contains(&args.threads) {
        return Err(CliError::usage(format!(
            "--threads={} must be between 1 and {MAX_THREADS}",
            args.threads
        )));
    }
    Ok(Setup {
        num: args.num,
        reads: u64::try_from(args.reads).unwrap_or(args.num),
        key_size: args.key_size,
        value_size: args.value_size,
        threads: args.threads,
        seed: args.seed,
        value_pool: keys::value_pool(args.seed, args.value_size),
    })
}

/// Runs one benchmark and prints its lines (or that StitchDB cannot run it); returns its flushes for the plot, if it flushed.
fn run_one(
    bench: Benchmark,
    index: usize,
    setup: &Setup,
    store: &mut BenchStore,
) -> CliResult<Option<plot::Series>> {
    let opened = store.opened();
    let db = store.db()?;
    let table = db.default_table();
    let flushes_before = db.flush_history().len();
    let before = db.stats();
    let started = opened.elapsed();
    let outcome = runner::run(bench, index, setup, db, table)?;
    let history = db.flush_history();
    let flushes: Vec<f64> = history
        .get(flushes_before..)
        .unwrap_or_default()
        .iter()
        .map(|t| t.saturating_sub(started).as_secs_f64())
        .collect();
    output::print(report::result_line(bench, &outcome))?;
    let after = db.stats();
    output::print(report::counters_line(&report::Counters {
        flushes: flushes.len(),
        merges: after.merges.saturating_sub(before.merges),
        appended: after.appended.since(&before.appended),
    }))?;
    Ok((!flushes.is_empty()).then(|| plot::Series {
        name: bench.name(),
        duration: outcome.elapsed.as_secs_f64(),
        flushes,
    }))
}
