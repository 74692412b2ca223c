//! Anvil's partition dTable microbenchmark (its Fig. 3.14), scaled: one table of the default
//! stack against a partition of four regions, each of the same stack, side by side in one
//! store and one run. Each gets N values of 75 to 85 bytes under 8-byte big-endian keys in a
//! scattered order (a commit each), is compacted, then read: G random point lookups, and three
//! full scans. Prints each task's time and the partition's against the single table's
//! (docs/layouts.md, "Measured").
//!
//! `cargo run --release -p stitchdb --example partition [N] [--gets G] [--dir DIR]`
//! (default N: 1,000,000; G: 1,000,000)

use std::time::Instant;
use stitchdb::{Db, Durability, Options, TableId};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const STACK: &str = "managed -> quotient -> btree -> linear";

/// splitmix64: the same random numbers every run.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Key `k`'s value: 75 to 85 bytes.
fn value(k: u64) -> Vec<u8> {
    let r = mix(k);
    let len = 75 + (r % 11) as usize;
    (0..len)
        .map(|i| (r >> (i % 8 * 8)) as u8 ^ i as u8)
        .collect()
}

/// Seconds each task took.
struct Times {
    populate: f64,
    compact: f64,
    lookup: f64,
    scan: f64,
}

fn run(db: &Db, name: &str, layout: &str, n: u64, gets: u64) -> Times {
    let t: TableId = db.create_table_with_layout(name, layout).expect("layout");
    let start = Instant::now();
    for i in 0..n {
        let k = (u128::from(i) * 2_654_435_761 % u128::from(n)) as u64;
        db.put(t, k.to_be_bytes(), value(k)).expect("put");
    }
    let populate = start.elapsed().as_secs_f64();
    let start = Instant::now();
    db.compact().expect("compact");
    let compact = start.elapsed().as_secs_f64();
    let start = Instant::now();
    for i in 0..gets {
        let k = mix(i ^ 0x5eed) % n;
        assert!(db.get(t, k.to_be_bytes()).expect("get").is_some());
    }
    let lookup = start.elapsed().as_secs_f64();
    let start = Instant::now();
    for _ in 0..3 {
        let rows = db.scan_prefix(t, b"").expect("scan").count() as u64;
        assert_eq!(rows, n, "{name}");
    }
    let scan = start.elapsed().as_secs_f64();
    Times {
        populate,
        compact,
        lookup,
        scan,
    }
}

fn main() {
    let mut n = 1_000_000u64;
    let mut gets = 1_000_000u64;
    let mut dir = std::env::temp_dir();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--dir" => dir = args.next().expect("--dir DIR").into(),
            "--gets" => gets = args.next().and_then(|g| g.parse().ok()).expect("--gets G"),
            count => n = count.parse().expect("N"),
        }
    }
    let path = dir.join(format!("partition-{}.store", std::process::id()));
    let opts = Options {
        durability: Durability::Async,
        ..Options::default()
    };
    let db = Db::create(&path, opts).expect("create");
    // Four regions of a quarter of the keys each, cut at hex boundaries.
    let at: Vec<String> = (1..4).map(|q| format!("at=0x{:016x}", n * q / 4)).collect();
    let partition = format!("partition({}) -> {STACK}", at.join(", "));
    let single = run(&db, "single", STACK, n, gets);
    let parts = run(&db, "partition", &partition, n, gets);
    println!("{n} values of 75-85 bytes, {gets} lookups, 3 scans; {partition}");
    println!(
        "{:<10} {:>12} {:>12} {:>12} {:>12}",
        "", "populate s", "compact s", "lookup s", "3 scans s"
    );
    for (name, t) in [("single", &single), ("partition", &parts)] {
        println!(
            "{name:<10} {:>12.2} {:>12.2} {:>12.2} {:>12.2}",
            t.populate, t.compact, t.lookup, t.scan
        );
    }
    let ratio = |a: f64, b: f64| b / a;
    println!(
        "{:<10} {:>11.2}x {:>11.2}x {:>11.2}x {:>11.2}x",
        "part/single",
        ratio(single.populate, parts.populate),
        ratio(single.compact, parts.compact),
        ratio(single.lookup, parts.lookup),
        ratio(single.scan, parts.scan)
    );
    db.close().expect("close");
    let _ = std::fs::remove_file(&path);
}
