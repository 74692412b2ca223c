//! What `stitchdb bench` prints: a header and result lines in db_bench's formats (so the same
//! scripts parse both), plus a `stitchdb:` line of engine and process counters.

use super::procfs;
use super::runner::{Outcome, Setup};
use super::workload::Benchmark;
use std::fmt::Write as _;
use std::path::Path;
use stitchdb::{AppendedBytes, Durability, Stitching};

/// db_bench's "MB" is a mebibyte.
const MB: f64 = 1_048_576.0;

/// What the header describes.
pub struct Header<'a> {
    pub setup: &'a Setup,
    pub durability: Durability,
    pub memtable_size: usize,
    pub cache_size: usize,
    pub stitching: Stitching,
    pub level_runs: usize,
    pub slowdown_runs: usize,
    pub db_path: &'a Path,
}

/// The lines printed before the first benchmark, in db_bench's layout.
pub fn header(h: &Header) -> String {
    let s = h.setup;
    let mut out = String::new();
    let mut line = |label: &str, value: String| {
        let _ = writeln!(out, "{:<12}{value}", format!("{label}:"));
    };
    line("StitchDB", format!("version {}", env!("CARGO_PKG_VERSION")));
    if let Some(cpu) = procfs::cpu_description() {
        line("CPU", cpu);
    }
    line(
        "Keys",
        format!(
            "{} bytes each (db_bench format: big-endian key number, '0' padding)",
            s.key_size
        ),
    );
    line(
        "Values",
        format!("{} bytes each (random bytes, no compression)", s.value_size),
    );
    line("Entries", s.num.to_string());
    line("Reads", s.reads.to_string());
    line("Threads", s.threads.to_string());
    let raw = s.num as f64 * (s.key_size + s.value_size) as f64 / MB;
    line("RawSize", format!("{raw:.1} MB (estimated)"));
    line("Memtable", format!("{:.1} MB", h.memtable_size as f64 / MB));
    line(
        "Cache",
        format!("{:.1} MB of parsed run blocks", h.cache_size as f64 / MB),
    );
    line("Stitching", stitching(h.stitching));
    line(
        "Levels",
        format!(
            "{} runs per level merge, carrying through the levels below they would fill",
            h.level_runs
        ),
    );
    line(
        "Pacing",
        format!(
            "writers slowed past {} runs waiting to be merged",
            h.slowdown_runs
        ),
    );
    line("Durability", durability(h.durability));
    line("Seed", format!("{} (splitmix64)", s.seed));
    out.push_str("------------------------------------------------\n");
    let _ = writeln!(out, "DB path: [{}]", h.db_path.display());
    out
}

fn stitching(s: Stitching) -> String {
    match s {
        Stitching::Threshold(bytes) => {
            format!("merges stitch contiguous spans of at least {bytes} bytes")
        }
        Stitching::Never => "never (merges copy everything)".into(),
    }
}

fn durability(durability: Durability) -> String {
    let text = match durability {
        Durability::Sync => "Sync (--sync=1): every write is durable when it returns",
        Durability::Written => {
            "Written (--sync=0): every write's log record is in the OS when it returns, no sync"
        }
        Durability::Ordered => "Ordered: durable within a few milliseconds",
        Durability::Async => "Async (--disable_wal=1): log records wait in memory until a sync",
    };
    text.into()
}

/// db_bench's result line, e.g.
/// `fillrandom   :      12.495 micros/op 80032 ops/sec 24.990 seconds 2000000 operations;    8.9 MB/s`.
pub fn result_line(bench: Benchmark, outcome: &Outcome) -> String {
    // db_bench pretends one op was done, so an empty benchmark still prints numbers.
    let done = outcome.ops.max(1);
    let elapsed = outcome.elapsed.as_secs_f64().max(1e-9);
    let micros_per_op = outcome.thread_time.as_secs_f64() * 1e6 / done as f64;
    let ops_per_sec = (done as f64 / elapsed) as i64;
    let mut extra = String::new();
    if outcome.bytes > 0 {
        extra = format!("{:6.1} MB/s", outcome.bytes as f64 / MB / elapsed);
    }
    if let Some((found, tried)) = outcome.found {
        if !extra.is_empty() {
            extra.push(' ');
        }
        let _ = write!(extra, "({found} of {tried} found)");
    }
    let space = if extra.is_empty() { "" } else { " " };
    format!(
        "{:<12} : {micros_per_op:11.3} micros/op {ops_per_sec} ops/sec {elapsed:.3} seconds \
         {done} operations;{space}{extra}\n",
        bench.name()
    )
}

/// db_bench's line for a benchmark that needs a fresh store under `--use_existing_db`.
pub fn skipped_line(bench: Benchmark) -> String {
    format!(
        "{:<12} : skipped (--use_existing_db is true)\n",
        bench.name()
    )
}

/// Engine and process counters after a benchmark.
pub struct Counters {
    /// Memtable flushes and merges completed during the benchmark.
    pub flushes: usize,
    pub merges: u64,
    /// Extent bytes the store appended during the benchmark, by kind.
    pub appended: AppendedBytes,
}

/// `stitchdb: ...`: the benchmark's flushes, merges and extent bytes appended (run blocks,
/// indexes, filters, manifests), then this process's device writes and peak memory so far.
pub fn counters_line(c: &Counters) -> String {
    let mib = |bytes: Option<u64>| match bytes {
        Some(b) => format!("{:.1} MB", b as f64 / MB),
        None => "n/a".into(),
    };
    format!(
        "stitchdb: {} memtable flushes, {} merges; appended {} (blocks {}, indexes {}, \
         filters {}, manifests {}); {} written to the device so far; peak RSS {}\n",
        c.flushes,
        c.merges,
        mib(Some(c.appended.total())),
        mib(Some(c.appended.run_blocks)),
        mib(Some(c.appended.run_indexes)),
        mib(Some(c.appended.run_filters)),
        mib(Some(c.appended.manifests)),
        mib(procfs::device_write_bytes()),
        mib(procfs::peak_rss_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn outcome(ops: u64, bytes: u64, found: Option<(u64, u64)>) -> Outcome {
        Outcome {
            ops,
            bytes,
            found,
            elapsed: Duration::from_millis(24_990),
            thread_time: Duration::from_millis(24_990),
        }
    }

    #[test]
    fn result_lines_match_db_bench_byte_for_byte() {
        let fill = outcome(2_000_000, 2_000_000 * 116, None);
        assert_eq!(
            result_line(Benchmark::FillRandom, &fill),
            "fillrandom   :      12.495 micros/op 80032 ops/sec 24.990 seconds 2000000 \
             operations;    8.9 MB/s\n"
        );
        let read = outcome(2_000_000, 1_000_000 * 116, Some((1_000_000, 2_000_000)));
        assert!(result_line(Benchmark::ReadRandom, &read)
            .ends_with("operations;    4.4 MB/s (1000000 of 2000000 found)\n"));
        let seek = outcome(10, 0, Some((3, 10)));
        assert!(
            result_line(Benchmark::SeekRandom, &seek).ends_with("operations; (3 of 10 found)\n")
        );
        let delete = outcome(10, 0, None);
        assert!(result_line(Benchmark::DeleteRandom, &delete).ends_with(" 10 operations;\n"));
    }
}
