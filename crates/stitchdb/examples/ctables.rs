//! Row and column cTables side by side, as Anvil's Figure 3.17 ("Time to select columns from
//! row and column stores"): a lineitem-like table of 16 columns (8-byte integers, small
//! integers, dates, repeated flags and strings, a comment) stored as a row cTable, as a
//! column cTable with a layout per column, and as a column cTable with the default layout
//! for every column; the bytes each takes, then `SELECT C1..Ck WHERE pred(C1)` (a predicate
//! keeping 10% of the rows) for k = 1, 2, 4 and all 16, each side read from the disk (`O_DIRECT`
//! reads, a small read cache).
//!
//! `cargo run --release -p stitchdb --example ctables -- [N] [--dir DIR] [--cache KIB]
//! [--repeat R]` (default N: 1,000,000 rows; read cache 256 KiB; each scan timed R = 3
//! times, the median shown). Keys are row numbers, 8-byte big-endian, as `array` stores them.

use std::ops::Bound;
use std::time::Instant;
use stitchdb::{CTable, Db, Durability, Isolation, Options};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// splitmix64: the same random numbers every run.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

const INSTRUCT: [&str; 4] = [
    "DELIVER IN PERSON",
    "COLLECT COD",
    "NONE",
    "TAKE BACK RETURN",
];
const MODES: [&str; 7] = ["REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB"];
const WORDS: [&str; 16] = [
    "furiously",
    "carefully",
    "quickly",
    "blithely",
    "slyly",
    "final",
    "pending",
    "regular",
    "express",
    "ironic",
    "deposits",
    "packages",
    "requests",
    "accounts",
    "theodolites",
    "foxes",
];

/// The columns in the order the query selects them (C1 is the predicate's), each with its
/// layout in the tuned column cTable: fixed-size values in `array` tables (the keys are
/// dense row numbers), repeated strings in a dictionary, the comment in `linear`.
const COLUMNS: [(&str, &str); 16] = [
    ("l_quantity", "managed -> btree -> array(1)"),
    ("l_extendedprice", "managed -> btree -> array(8)"),
    ("l_discount", "managed -> btree -> array(1)"),
    ("l_shipdate", "managed -> btree -> array(2)"),
    ("l_orderkey", "managed -> btree -> array(8)"),
    ("l_partkey", "managed -> btree -> array(4)"),
    ("l_suppkey", "managed -> btree -> array(4)"),
    ("l_linenumber", "managed -> btree -> array(1)"),
    ("l_tax", "managed -> btree -> array(1)"),
    ("l_returnflag", "managed -> btree -> array(1)"),
    ("l_linestatus", "managed -> btree -> array(1)"),
    ("l_commitdate", "managed -> btree -> array(2)"),
    ("l_receiptdate", "managed -> btree -> array(2)"),
    (
        "l_shipinstruct",
        "managed -> btree -> exception -> unique-string(len=20) -> linear",
    ),
    (
        "l_shipmode",
        "managed -> btree -> exception -> unique-string(len=8) -> linear",
    ),
    ("l_comment", "managed -> btree -> linear"),
];

/// Row `i`'s values, in `COLUMNS` order.
fn row(i: u64) -> Vec<Vec<u8>> {
    let r = |n: u64| mix(i.wrapping_mul(31).wrapping_add(n));
    let order = i / 4 + 1;
    let quantity = r(1) % 50 + 1;
    let ship = (r(2) % 2500) as u16;
    let comment: Vec<&str> = (0..2 + r(3) % 4)
        .map(|w| WORDS[(r(10 + w) % 16) as usize])
        .collect();
    vec![
        vec![quantity as u8],
        (quantity * (90_000 + r(4) % 10_000)).to_be_bytes().to_vec(),
        vec![(r(5) % 11) as u8],
        ship.to_be_bytes().to_vec(),
        order.to_be_bytes().to_vec(),
        ((r(6) % 200_000) as u32).to_be_bytes().to_vec(),
        ((r(7) % 10_000) as u32).to_be_bytes().to_vec(),
        vec![(i % 4 + 1) as u8],
        vec![(r(8) % 9) as u8],
        vec![b"RAN"[(r(9) % 3) as usize]],
        vec![b"OF"[(ship > 1250) as usize]],
        (ship + 30).to_be_bytes().to_vec(),
        (ship + (r(20) % 30) as u16).to_be_bytes().to_vec(),
        INSTRUCT[(r(21) % 4) as usize].as_bytes().to_vec(),
        MODES[(r(22) % 7) as usize].as_bytes().to_vec(),
        comment.join(" ").into_bytes(),
    ]
}

/// C1's predicate: quantity 1 to 5 of 1 to 50, a tenth of the rows.
fn pred(quantity: &[u8]) -> bool {
    quantity.first().is_some_and(|&q| q <= 5)
}

/// `SELECT` the first `k` columns `WHERE pred(C1)`: rows kept and the bytes of their values
/// (both sides must agree), and the seconds taken.
fn select(db: &Db, t: &CTable, k: usize) -> (u64, u64, f64) {
    let names: Vec<&str> = COLUMNS[..k].iter().map(|c| c.0).collect();
    let start = Instant::now();
    let (mut rows, mut bytes) = (0u64, 0u64);
    for item in t
        .scan(db, Bound::Unbounded, Bound::Unbounded, &names)
        .expect("scan")
    {
        let (_, values) = item.expect("row");
        if values[0].as_deref().is_some_and(pred) {
            rows += 1;
            bytes += values.iter().flatten().map(|v| v.len() as u64).sum::<u64>();
        }
    }
    (rows, bytes, start.elapsed().as_secs_f64())
}

fn run_bytes(db: &Db, t: &CTable) -> u64 {
    let stats = db.stats();
    t.info()
        .tables
        .iter()
        .map(|(name, _)| {
            let s = stats.tables.iter().find(|s| &s.name == name);
            s.map_or(0, |s| s.run_bytes)
        })
        .sum()
}

fn main() {
    let mut n = 1_000_000u64;
    let mut repeat = 3;
    let mut dir = std::env::temp_dir();
    let mut opts = Options {
        durability: Durability::Async,
        read_cache_bytes: 256 << 10,
        cache_blocks: 64,
        ..Options::default()
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--dir" => dir = args.next().expect("--dir DIR").into(),
            "--cache" => {
                let kib: usize = args
                    .next()
                    .and_then(|m| m.parse().ok())
                    .expect("--cache KIB");
                opts.read_cache_bytes = kib << 10;
            }
            "--repeat" => {
                repeat = args
                    .next()
                    .and_then(|r| r.parse().ok())
                    .expect("--repeat R")
            }
            count => n = count.parse().expect("N"),
        }
    }
    let path = dir.join(format!("ctables-{}.store", std::process::id()));
    let db = Db::create(&path, opts.clone()).expect("create");
    let names: Vec<&str> = COLUMNS.iter().map(|c| c.0).collect();
    let linear: Vec<(&str, &str)> = COLUMNS.iter().map(|c| (c.0, "")).collect();
    let sides = [
        (
            "row",
            db.create_row_ctable("rows", &names, "").expect("row"),
        ),
        (
            "column",
            db.create_column_ctable("columns", &COLUMNS)
                .expect("column"),
        ),
        (
            "column, default layouts",
            db.create_column_ctable("linear", &linear).expect("linear"),
        ),
    ];
    let start = Instant::now();
    // A transaction every 10,000 rows, each side loaded with the same rows.
    for chunk in (0..n).collect::<Vec<_>>().chunks(10_000) {
        let mut txn = db.begin(Isolation::Snapshot).expect("begin");
        for &i in chunk {
            let values = row(i);
            let values: Vec<Option<&[u8]>> = values.iter().map(|v| Some(&v[..])).collect();
            for (_, t) in &sides {
                t.insert(&mut txn, i.to_be_bytes(), &values)
                    .expect("insert");
            }
        }
        txn.commit().expect("commit");
    }
    db.compact().expect("compact");
    let load_s = start.elapsed().as_secs_f64();
    println!(
        "{n} rows of 16 columns, loaded and compacted in {load_s:.1} s; {} KiB read cache, O_DIRECT reads",
        opts.read_cache_bytes >> 10
    );
    let bytes: Vec<u64> = sides.iter().map(|(_, t)| run_bytes(&db, t)).collect();
    for ((what, _), b) in sides.iter().zip(&bytes) {
        println!(
            "{what:<24} {b:>13} run bytes  {:>6.1} bytes a row  row/this {:.2}x",
            *b as f64 / n as f64,
            bytes[0] as f64 / *b as f64
        );
    }
    // Every read below bypasses the page cache: the disk, not memory, serves the scans.
    stitchdb::read_direct(true);
    println!(
        "{:>7} {:>9} {:>10} {:>10} {:>10} {:>8} {:>8}",
        "columns", "rows kept", "row s", "column s", "default s", "row/col", "row/def"
    );
    for k in [1, 2, 4, 16] {
        let mut times = vec![Vec::new(); sides.len()];
        let mut kept = None;
        for _ in 0..repeat {
            for (side, (what, t)) in sides.iter().enumerate() {
                let (rows, bytes, s) = select(&db, t, k);
                let agreed = *kept.get_or_insert((rows, bytes));
                assert_eq!(
                    agreed,
                    (rows, bytes),
                    "{what} selects what the row cTable does"
                );
                times[side].push(s);
            }
        }
        let median: Vec<f64> = times
            .iter_mut()
            .map(|t| {
                t.sort_by(f64::total_cmp);
                t[t.len() / 2]
            })
            .collect();
        println!(
            "{k:>7} {:>9} {:>10.3} {:>10.3} {:>10.3} {:>7.2}x {:>7.2}x",
            kept.map_or(0, |k| k.0),
            median[0],
            median[1],
            median[2],
            median[0] / median[1],
            median[0] / median[2]
        );
    }
    db.close().expect("close");
    let _ = std::fs::remove_file(&path);
}
