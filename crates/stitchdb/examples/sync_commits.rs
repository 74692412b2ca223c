//! Measures `Sync` commits per second with 1 and with 16 writer threads on a store file, to
//! show group commit: concurrent `Sync` writers share one log flush and one `sync`.
//!
//! `cargo run --release -p stitchdb --example sync_commits [SECONDS] [DIR]`

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use stitchdb::{Db, Durability, Options, WriteBatch};

fn run(dir: &std::path::Path, threads: usize, seconds: f64) -> (f64, f64) {
    let path = dir.join(format!("group-commit-{threads}.store"));
    let _ = std::fs::remove_file(&path);
    let db = Arc::new(Db::create(&path, Options::default()).expect("create store"));
    let syncs_before = db.stats().cache.syncs;
    let stop = Arc::new(AtomicBool::new(false));
    let commits = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (db, stop, commits) = (db.clone(), stop.clone(), commits.clone());
            std::thread::spawn(move || {
                let table = db.default_table();
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let mut b = WriteBatch::new();
                    b.put(table, format!("t{t:02}-{i:010}"), [7u8; 100]);
                    db.write(&b, Durability::Sync).expect("commit");
                    commits.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().expect("a writer thread panicked");
    }
    let elapsed = start.elapsed().as_secs_f64();
    let n = commits.load(Ordering::Relaxed) as f64;
    let syncs = (db.stats().cache.syncs - syncs_before) as f64;
    drop(db);
    let _ = std::fs::remove_file(&path);
    (n / elapsed, n / syncs.max(1.0))
}

fn main() {
    let mut args = std::env::args().skip(1);
    let seconds: f64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(3.0);
    let dir = args
        .next()
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    println!(
        "Sync commits of one 100-byte value, {seconds} s per run, store in {}",
        dir.display()
    );
    for threads in [1, 16] {
        let (rate, per_sync) = run(&dir, threads, seconds);
        println!(
            "{threads:>2} writer threads: {rate:>9.0} commits/s, {per_sync:>5.1} commits per sync"
        );
    }
}
