//! What range tombstones cost the reads that do not fall in them: a table of 100,000 keys,
//! then T disjoint range tombstones over keys between them (the shape a file system's deleted
//! files leave), then 100,000 point gets and 10,000 ten-key scans of live keys, with the
//! tombstones still in the memtable and again once flushed into a run.
//!
//! `cargo run --release -p stitchdb --example range_deletes [T...] [--dir DIR]`
//! (default T: 0 1000 10000 50000)

use std::time::{Duration, Instant};
use stitchdb::{Db, Durability, Options, WriteBatch};

// The allocator the `stitchdb` binary uses.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const KEYS: u64 = 100_000;
const GETS: u64 = 100_000;
const SCANS: u64 = 10_000;
const SCAN_LEN: usize = 10;

/// Live key `n`: even numbers, so the odd ones between them are free for tombstones.
fn live(n: u64) -> [u8; 9] {
    let mut k = [b'k'; 9];
    k[1..].copy_from_slice(&(2 * n).to_be_bytes());
    k
}

/// The key just after live key `n`, which no get or scan asks for.
fn between(n: u64) -> [u8; 9] {
    let mut k = [b'k'; 9];
    k[1..].copy_from_slice(&(2 * n + 1).to_be_bytes());
    k
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// (point gets, scans) timed on `db` as it stands.
fn reads(db: &Db) -> (Duration, Duration) {
    let t = db.default_table();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let start = Instant::now();
    for _ in 0..GETS {
        let k = live(rng.below(KEYS));
        assert!(
            db.get(t, k).expect("get").is_some(),
            "a live key is missing"
        );
    }
    let gets = start.elapsed();
    let start = Instant::now();
    for _ in 0..SCANS {
        let from = live(rng.below(KEYS - SCAN_LEN as u64));
        let n = db
            .range(
                t,
                std::ops::Bound::Included(&from[..]),
                std::ops::Bound::Unbounded,
            )
            .expect("range")
            .take(SCAN_LEN)
            .count();
        assert_eq!(n, SCAN_LEN, "a scan of live keys came up short");
    }
    (gets, start.elapsed())
}

fn main() {
    let mut counts: Vec<u64> = Vec::new();
    let mut dir = std::env::temp_dir();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--dir" {
            dir = args.next().expect("--dir DIR").into();
        } else {
            counts.push(a.parse().expect("a count of tombstones"));
        }
    }
    if counts.is_empty() {
        counts = vec![0, 1_000, 10_000, 50_000];
    }
    println!("| tombstones | where | 100,000 gets | 10,000 scans of 10 keys |");
    println!("| --- | --- | --- | --- |");
    for &tombstones in &counts {
        let path = dir.join(format!("range_deletes-{}.store", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let opts = Options {
            durability: Durability::Async,
            ..Options::default()
        };
        let db = Db::create(&path, opts).expect("create");
        let t = db.default_table();
        for chunk in (0..KEYS).collect::<Vec<_>>().chunks(1000) {
            let mut b = WriteBatch::new();
            for &n in chunk {
                b.put(t, &live(n)[..], &[7u8; 100][..]);
            }
            db.write_owned(b, Durability::Async).expect("write");
        }
        db.flush().expect("flush");
        // Spread over the key space, each over one key no read asks for.
        for i in 0..tombstones {
            let n = i * KEYS / tombstones.max(1);
            db.delete_range(t, between(n), live(n + 1))
                .expect("delete_range");
        }
        let (gets, scans) = reads(&db);
        println!("| {tombstones} | memtable | {gets:.2?} | {scans:.2?} |");
        db.flush().expect("flush");
        let (gets, scans) = reads(&db);
        println!("| {tombstones} | run | {gets:.2?} | {scans:.2?} |");
        db.close().expect("close");
        let _ = std::fs::remove_file(&path);
    }
}
