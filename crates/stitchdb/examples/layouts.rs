//! Each table layout on data that suits it, side by side with the default VT-tree stack in
//! one store and one run: the bytes its runs take once compacted, and point reads (uniform,
//! and skewed: nine in ten to the hottest 1% of keys), absent-key reads and a full scan (docs/benchmarks.md, "Table layouts").
//!
//! Data sets (N rows each, keys 8-byte big-endian integers as `array` stores them):
//! * `u64`: 8-byte values, random, dense keys 0..N.
//! * `u32`: 4-byte values (an integer-keyed sequence of counters), dense keys.
//! * `counts`: 4-byte small counters (below 256), dense keys.
//! * `stamps`: 4-byte timestamps, each 0 to 15 seconds after the row before (an
//!   integer-keyed sequence), every 1000th row a leap (what `exception` keeps in `linear`).
//! * `states`: the US state of each row, one of 50 names (a column of repeated strings),
//!   every 500th row a longer place name (what `exception` keeps in `linear`).
//! * `codes`: the US postal code of each row (2 bytes), every 500th a foreign one.
//! * `set`: empty values (a set, a secondary index).
//! * `anvil`: Anvil's sliding-window benchmark: values of 75 to 85 bytes, 3 in 4 one of 10
//!   popular 80-byte values, the rest random.
//!
//! `cargo run --release -p stitchdb --example layouts [N] [--dir DIR] [--cache MIB] [--gets G]
//! [--set NAME]... [--only TEXT] [--cpu]` (default N: 1,000,000; the read cache:
//! `Options::read_cache_bytes`, 64 MiB; G point reads of each kind: the smaller of N and
//! 500,000; `--set`: only the data sets named, every one without it; `--only`: of each data
//! set, the default and the layouts whose text holds TEXT, for comparing a few rows quickly;
//! `--cpu`: reads and scans timed by the reading thread's CPU time, not the clock, so that on
//! a machine other work shares the rates still compare)

use std::time::Instant;
use stitchdb::{Db, Durability, Options, TableId};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const STATES: [&str; 50] = [
    "Alabama",
    "Alaska",
    "Arizona",
    "Arkansas",
    "California",
    "Colorado",
    "Connecticut",
    "Delaware",
    "Florida",
    "Georgia",
    "Hawaii",
    "Idaho",
    "Illinois",
    "Indiana",
    "Iowa",
    "Kansas",
    "Kentucky",
    "Louisiana",
    "Maine",
    "Maryland",
    "Massachusetts",
    "Michigan",
    "Minnesota",
    "Mississippi",
    "Missouri",
    "Montana",
    "Nebraska",
    "Nevada",
    "New Hampshire",
    "New Jersey",
    "New Mexico",
    "New York",
    "North Carolina",
    "North Dakota",
    "Ohio",
    "Oklahoma",
    "Oregon",
    "Pennsylvania",
    "Rhode Island",
    "South Carolina",
    "South Dakota",
    "Tennessee",
    "Texas",
    "Utah",
    "Vermont",
    "Virginia",
    "Washington",
    "West Virginia",
    "Wisconsin",
    "Wyoming",
];

/// splitmix64: the same random numbers every run.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The `codes` data set's codes: the states `STATES` names, as `state-dictionary` holds them.
const CODES: [&str; 50] = [
    "AL", "AK", "AZ", "AR", "CA", "CO", "CT", "DE", "FL", "GA", "HI", "ID", "IL", "IN", "IA", "KS",
    "KY", "LA", "ME", "MD", "MA", "MI", "MN", "MS", "MO", "MT", "NE", "NV", "NH", "NJ", "NM", "NY",
    "NC", "ND", "OH", "OK", "OR", "PA", "RI", "SC", "SD", "TN", "TX", "UT", "VT", "VA", "WA", "WV",
    "WI", "WY",
];

/// Row `k`'s timestamp: a clock that moves 0 to 15 seconds a row (its own sum, so rows are
/// made in any order), a leap of about a day every 1000th row.
fn stamp(k: u64) -> u32 {
    let steps = k * 15 / 2 + mix(k) % 8;
    let leap = match k % 1000 {
        999 => 86_400 + mix(k) % 1000,
        _ => 0,
    };
    (1_700_000_000 + steps + leap) as u32
}

/// `len` random bytes, the same for the same `seed`.
fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .flat_map(|i| mix(seed ^ i << 48).to_le_bytes())
        .take(len)
        .collect()
}

fn value(set: &str, k: u64) -> Vec<u8> {
    match set {
        "anvil" if mix(k) % 4 == 0 => random_bytes(k, 75 + (mix(k) >> 8) as usize % 11),
        "anvil" => random_bytes(u64::MAX - (mix(k) >> 8) % 10, 80),
        "u64" => mix(k).to_le_bytes().to_vec(),
        "u32" => ((mix(k) % 100_000) as u32).to_le_bytes().to_vec(),
        "counts" => ((mix(k) % 256) as u32).to_le_bytes().to_vec(),
        "stamps" => stamp(k).to_le_bytes().to_vec(),
        "codes" if k % 500 == 0 => b"ON".to_vec(),
        "codes" => CODES[(mix(k) % 50) as usize].into(),
        "set" => Vec::new(),
        _ if k % 500 == 0 => format!("Saint Helena, Ascension and Tristan da Cunha {k}").into(),
        _ => STATES[(mix(k) % 50) as usize].into(),
    }
}

struct Row {
    set: &'static str,
    layout: &'static str,
    bytes: u64,
    load_s: f64,
    gets_per_s: f64,
    hot_per_s: f64,
    absent_per_s: f64,
    scan_per_s: f64,
}

/// Seconds on some clock: the calling thread's CPU time under `--cpu` (Linux's
/// `/proc/thread-self/schedstat`, whose first field is it in nanoseconds), else the wall's.
fn seconds(cpu: bool, since: Instant) -> f64 {
    if !cpu {
        return since.elapsed().as_secs_f64();
    }
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    let ns: u64 = stat
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("schedstat");
    ns as f64 / 1e9
}

fn measure(db: &Db, set: &'static str, layout: &'static str, n: u64, gets: u64, cpu: bool) -> Row {
    let name = format!("{set}: {layout}");
    let t: TableId = db.create_table_with_layout(&name, layout).expect("layout");
    let start = Instant::now();
    // Every key once, in a scattered order (a prime stride), a commit each.
    for i in 0..n {
        let k = (u128::from(i) * 2_654_435_761 % u128::from(n)) as u64;
        db.put(t, k.to_be_bytes(), value(set, k)).expect("put");
    }
    db.compact().expect("compact");
    let load_s = start.elapsed().as_secs_f64();
    let bytes = db
        .stats()
        .tables
        .iter()
        .find(|s| s.name == name)
        .map_or(0, |s| s.run_bytes);
    #[derive(PartialEq)]
    enum Keys {
        Uniform,
        Hot,
        Absent,
    }
    let timed = |keys: Keys| {
        let absent = keys == Keys::Absent;
        let hot = (n / 100).max(1);
        let start = Instant::now();
        let begun = seconds(cpu, start);
        let mut found = 0u64;
        for i in 0..gets {
            let r = mix(i ^ 0x5eed);
            let k = match keys {
                // The hottest 1% of keys, scattered over the table (every 100th).
                Keys::Hot if r % 10 != 0 => (r / 10 % hot) * 100 % n,
                Keys::Absent => r % n + n,
                _ => r % n,
            };
            found += u64::from(db.get(t, k.to_be_bytes()).expect("get").is_some());
        }
        assert_eq!(found, if absent { 0 } else { gets }, "{name}");
        gets as f64 / (seconds(cpu, start) - begun)
    };
    timed(Keys::Uniform); // warm the read cache
    let gets_per_s = timed(Keys::Uniform);
    let hot_per_s = timed(Keys::Hot);
    let absent_per_s = timed(Keys::Absent);
    let start = Instant::now();
    let begun = seconds(cpu, start);
    let rows = db.scan_prefix(t, b"").expect("scan").count() as u64;
    assert!(rows > 0, "{name}");
    let scan_per_s = rows as f64 / (seconds(cpu, start) - begun);
    Row {
        set,
        layout,
        bytes,
        load_s,
        gets_per_s,
        hot_per_s,
        absent_per_s,
        scan_per_s,
    }
}

fn main() {
    let mut n = 1_000_000u64;
    let mut gets = None;
    let mut sets_named: Vec<String> = Vec::new();
    let mut only: Option<String> = None;
    let mut cpu = false;
    let mut dir = std::env::temp_dir();
    let mut opts = Options {
        durability: Durability::Async,
        ..Options::default()
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--dir" => dir = args.next().expect("--dir DIR").into(),
            "--gets" => gets = args.next().and_then(|g| g.parse().ok()),
            "--set" => sets_named.push(args.next().expect("--set NAME")),
            "--cpu" => cpu = true,
            "--only" => only = Some(args.next().expect("--only TEXT")),
            "--cache" => {
                let mib: usize = args
                    .next()
                    .and_then(|m| m.parse().ok())
                    .expect("--cache MIB");
                opts.read_cache_bytes = mib << 20;
            }
            count => n = count.parse().expect("N"),
        }
    }
    let path = dir.join(format!("layouts-{}.store", std::process::id()));
    let cache_mib = opts.read_cache_bytes >> 20;
    let gets = gets.unwrap_or(n.min(500_000));
    let db = Db::create(&path, opts).expect("create");
    let default = "managed -> quotient -> btree -> linear";
    let sets: [(&str, &[&str]); 8] = [
        (
            "u64",
            &[
                default,
                "managed -> bloom -> btree -> linear",
                "managed -> quotient -> cache -> btree -> linear",
                "managed -> quotient -> btree -> fixed(8)",
                "managed -> quotient -> cache -> btree -> fixed(8)",
                "managed -> quotient -> btree -> array(8)",
                "managed -> quotient -> array(8)",
            ],
        ),
        (
            "u32",
            &[
                default,
                "managed -> quotient -> btree -> array(4)",
                "managed -> quotient -> btree -> small-integer(3) -> array(3)",
            ],
        ),
        (
            "counts",
            &[
                default,
                "managed -> quotient -> btree -> array(4)",
                "managed -> quotient -> btree -> small-integer(1) -> array(1)",
            ],
        ),
        (
            "stamps",
            &[
                default,
                "managed -> quotient -> btree -> array(4)",
                "managed -> quotient -> btree -> delta-integer -> array(4)",
                "managed -> quotient -> btree -> delta-integer -> exception -> small-integer(1) -> array(1) -> linear",
            ],
        ),
        (
            "states",
            &[
                default,
                "managed -> quotient -> btree -> exception -> unique-string(len=16) -> linear",
                "managed -> quotient -> exception -> unique-string(len=16) -> linear",
            ],
        ),
        (
            "codes",
            &[
                default,
                "managed -> quotient -> btree -> exception -> unique-string(len=2) -> linear",
                "managed -> quotient -> btree -> exception -> state-dictionary -> array(1) -> linear",
            ],
        ),
        (
            "set",
            &[default, "managed -> quotient -> btree -> empty"],
        ),
        (
            "anvil",
            &[
                default,
                "managed -> quotient -> btree -> sliding-window -> linear",
                "managed -> quotient -> sliding-window -> linear",
            ],
        ),
    ];
    println!(
        "{n} rows per table, one store, Async commits, compacted before reading, {cache_mib} MiB read cache{}",
        if cpu { ", reads timed by CPU time" } else { "" }
    );
    println!(
        "{:<7} {:<100} {:>11} {:>6} {:>7} {:>11} {:>11} {:>11} {:>11}",
        "data",
        "layout",
        "run bytes",
        "size",
        "load s",
        "gets/s",
        "hot gets/s",
        "absent/s",
        "scan rows/s"
    );
    for (set, layouts) in sets {
        if !sets_named.is_empty() && !sets_named.iter().any(|o| o == set) {
            continue;
        }
        let mut base = None;
        let chosen = |l: &str| l == default || only.as_ref().is_none_or(|t| l.contains(t.as_str()));
        if !layouts[1..].iter().any(|l| chosen(l)) {
            continue;
        }
        for &layout in layouts.iter().filter(|l| chosen(l)) {
            let r = measure(&db, set, layout, n, gets, cpu);
            let b = *base.get_or_insert(r.bytes);
            println!(
                "{:<7} {:<100} {:>11} {:>5.2}x {:>7.1} {:>11.0} {:>11.0} {:>11.0} {:>11.0}",
                r.set,
                r.layout,
                r.bytes,
                b as f64 / r.bytes.max(1) as f64,
                r.load_s,
                r.gets_per_s,
                r.hot_per_s,
                r.absent_per_s,
                r.scan_per_s
            );
        }
    }
    db.close().expect("close");
    let _ = std::fs::remove_file(&path);
}
