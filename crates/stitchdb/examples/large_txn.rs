//! Measures a 1 GiB transaction (262,144 puts of 4 KiB) against the default 64 MiB memory
//! budget: how long writing it takes (it spills to private runs), how many bytes the commit
//! writes to the device (from /proc/self/io: the data must not be written again), and how
//! long abort takes for a second one (its runs are freed in the background).
//!
//! `cargo run --release -p stitchdb --example large_txn [DIR] [MiB]`

use std::time::Instant;
use stitchdb::{Db, Durability, Isolation, Options};

/// Bytes this process has caused to be written to the device so far.
fn device_bytes() -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    let field = |name: &str| {
        io.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    field("write_bytes:").saturating_sub(field("cancelled_write_bytes:"))
}

fn fill(db: &Db, round: u64, bytes: u64) -> stitchdb::Transaction<'_> {
    let t = db.default_table();
    let mut txn = db.begin(Isolation::Snapshot).expect("begin");
    let value = vec![round as u8; 4096];
    for i in 0..bytes / 4096 {
        let key = format!("r{round}-{i:010}");
        txn.put(t, key, &value).expect("put");
    }
    txn
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().map_or_else(std::env::temp_dir, Into::into);
    let mib: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1024);
    let bytes = mib << 20;
    let path = dir.join("large-txn.store");
    let _ = std::fs::remove_file(&path);
    let db = Db::create(&path, Options::default()).expect("create store");

    let started = Instant::now();
    let txn = fill(&db, 1, bytes);
    let filled = started.elapsed();
    // Make what was spilled so far reach the device, so the commit's own writes stand alone.
    db.sync().expect("sync");
    let before = device_bytes();
    let started = Instant::now();
    txn.commit_with(Durability::Sync).expect("commit");
    let committed = started.elapsed();
    db.sync().expect("sync");
    let written = device_bytes() - before;
    let stats = db.stats();
    println!(
        "commit of {mib} MiB: writing it took {:.1} s (spilled {} MiB in private runs); \
         commit {:.0} ms, wrote {:.1} MiB = {:.2}% of the transaction's bytes",
        filled.as_secs_f64(),
        stats.linked_bytes >> 20,
        committed.as_secs_f64() * 1000.0,
        written as f64 / (1 << 20) as f64,
        written as f64 * 100.0 / bytes as f64
    );

    let txn = fill(&db, 2, bytes);
    let live = db.stats().zones.live_bytes;
    let started = Instant::now();
    txn.abort();
    let aborted = started.elapsed();
    let freeing = Instant::now();
    while db.stats().zones.live_bytes + (bytes / 2) > live {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    println!(
        "abort of {mib} MiB: {:.2} ms (its runs were freed in the background within {:.0} ms)",
        aborted.as_secs_f64() * 1000.0,
        freeing.elapsed().as_secs_f64() * 1000.0
    );
    db.close().expect("close");
    let _ = std::fs::remove_file(&path);
}
