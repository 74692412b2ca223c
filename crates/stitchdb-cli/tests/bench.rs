//! `stitchdb bench`: db_bench's flags in, db_bench's result lines out.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stitchdb"))
        .arg("bench")
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("start stitchdb")
}

fn ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "stitchdb bench {args:?}: {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn db_flag(dir: &Path) -> String {
    format!("--db={}", dir.join("bench.store").display())
}

/// A parsed db_bench result line:
/// `name : 1.234 micros/op 5678 ops/sec 0.352 seconds 2000 operations; 1.2 MB/s (N of M found)`.
#[derive(Debug)]
struct ResultLine {
    name: String,
    ops: u64,
    /// What follows `operations;`.
    extra: String,
}

fn parse_result(line: &str) -> Option<ResultLine> {
    let (name, rest) = line.split_once(" : ")?;
    let (numbers, extra) = rest.split_once(" operations;")?;
    let words: Vec<&str> = numbers.split_whitespace().collect();
    let [micros, "micros/op", per_sec, "ops/sec", seconds, "seconds", ops] = words[..] else {
        return None;
    };
    let micros = micros.split_once('.').map(|(_, frac)| frac.len());
    let seconds = seconds.split_once('.').map(|(_, frac)| frac.len());
    // db_bench prints %11.3f micros/op, whole ops/sec and %.3f seconds.
    if micros != Some(3) || seconds != Some(3) || per_sec.parse::<u64>().is_err() {
        return None;
    }
    if name.len() < 12 || name.trim_end().contains(' ') {
        return None;
    }
    Some(ResultLine {
        name: name.trim_end().to_string(),
        ops: ops.parse().ok()?,
        extra: extra.to_string(),
    })
}

#[test]
fn prints_a_header_and_db_bench_result_lines() {
    let dir = tempfile::tempdir().unwrap();
    let stdout = ok(&[
        "--benchmarks=fillseq,readrandom,readseq",
        "--num=2000",
        &db_flag(dir.path()),
    ]);
    assert!(stdout.contains("Keys:       16 bytes each"), "{stdout}");
    assert!(stdout.contains("Values:     100 bytes each"), "{stdout}");
    assert!(stdout.contains("Entries:    2000\n"), "{stdout}");

    let lines: Vec<&str> = stdout.lines().collect();
    let results: Vec<(usize, ResultLine)> = lines
        .iter()
        .enumerate()
        .filter_map(|(i, line)| parse_result(line).map(|r| (i, r)))
        .collect();
    let names: Vec<&str> = results.iter().map(|(_, r)| r.name.as_str()).collect();
    assert_eq!(names, ["fillseq", "readrandom", "readseq"], "{stdout}");

    let (_, fill) = &results[0];
    assert_eq!(fill.ops, 2000);
    assert!(fill.extra.ends_with(" MB/s"), "{fill:?}");
    // fillseq wrote every key in [0, 2000), so every random read finds its key.
    let (_, read) = &results[1];
    assert_eq!(read.ops, 2000);
    assert!(
        read.extra.ends_with(" MB/s (2000 of 2000 found)"),
        "{read:?}"
    );
    let (_, scan) = &results[2];
    assert_eq!(scan.ops, 2000);

    // Each result line is followed by the engine's and the process's counters.
    for (i, r) in &results {
        let next = lines[i + 1];
        assert!(
            next.starts_with("stitchdb: ") && next.contains("memtable flushes"),
            "after {}: {next}",
            r.name
        );
        assert!(next.contains("written to the device") && next.contains("peak RSS"));
    }
    // A store given with --db is kept.
    assert!(dir.path().join("bench.store").exists());
}

#[test]
fn vt_tree_workloads_run_and_draw_the_flush_plot() {
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("flushes.svg");
    let stdout = ok(&[
        "--benchmarks=randomappend,seqinsert,readreverse",
        "--num=20000",
        "--memtable_size=65536",
        "--stitch_threshold=0",
        &db_flag(dir.path()),
        &format!("--plot={}", plot.display()),
    ]);
    let names: Vec<String> = stdout
        .lines()
        .filter_map(parse_result)
        .map(|r| r.name)
        .collect();
    assert_eq!(
        names,
        ["randomappend", "seqinsert", "readreverse"],
        "{stdout}"
    );
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains(">randomappend</text>"),
        "{svg}"
    );
}

#[test]
fn takes_db_bench_flag_syntax_and_existing_stores() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_flag(dir.path());
    ok(&["--benchmarks=fillrandom", "--num=500", "--sync=1", &db]);
    // The store exists now: refused unless --use_existing_db, which skips fresh-store fills.
    let out = run(&["--benchmarks=fillrandom", "--num=500", &db]);
    assert_eq!(out.status.code(), Some(3), "any other failure");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--use_existing_db"));
    let stdout = ok(&[
        "--benchmarks=fillseq,overwrite",
        "--num=500",
        "--use_existing_db",
        "--disable_wal=1",
        &db,
    ]);
    assert!(stdout.contains("fillseq      : skipped (--use_existing_db is true)"));
    assert!(stdout.contains("Async (--disable_wal=1)"), "{stdout}");
    assert!(stdout
        .lines()
        .filter_map(parse_result)
        .any(|r| r.name == "overwrite"));
}

#[test]
fn rejects_bad_flags_with_usage_errors() {
    for bad in [
        "--benchmarks=fillseq,compact",
        "--sync=maybe",
        "--num=-5",
        "--value_size=lots",
    ] {
        let out = run(&[bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
    }
    // A sync needs the log: db_bench refuses the pair too.
    let out = run(&["--sync=1", "--disable_wal=1", "--num=1"]);
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--disable_wal=1"));
    let out = run(&["--key_size=0", "--num=1"]);
    assert_eq!(out.status.code(), Some(2), "a usage error the tool finds");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--key_size"));
}
