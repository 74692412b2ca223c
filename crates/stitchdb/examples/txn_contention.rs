//! Serializable transactions under contention: optimistic validation (`Serializable`) against
//! strict two-phase locking (`Locking`, reading with `get` and with `get_for_update`), with
//! snapshot isolation for reference. Threads move money between random accounts (read two
//! balances, write both) for a fixed time per mode, retrying whatever fails (a conflict, a
//! deadlock, a lock timeout). Few accounts make nearly every pair of concurrent transfers
//! collide; many make collisions rare.
//!
//! Reports committed transfers per second and failed attempts per committed transfer.
//!
//! `cargo run --release -p stitchdb --example txn_contention [SECONDS-PER-RUN] [DIR]`

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use stitchdb::{Db, Durability, Error, Isolation, Options, TableId};

// The allocator the `stitchdb` binary uses.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const START: u64 = 1_000_000;

fn balance(v: Option<Vec<u8>>) -> u64 {
    v.and_then(|v| v.try_into().ok())
        .map_or(0, u64::from_be_bytes)
}

/// How transfers are isolated, and whether they read the balances for update.
type Mode = (Isolation, bool);

/// One transfer attempt.
fn transfer(db: &Db, t: TableId, mode: Mode, from: u64, to: u64) -> stitchdb::Result<()> {
    let (iso, for_update) = mode;
    let mut txn = db.begin(iso)?;
    let mut read = |k: u64| match for_update {
        true => txn.get_for_update(t, k.to_be_bytes()),
        false => txn.get(t, k.to_be_bytes()),
    };
    let (a, b) = (balance(read(from)?), balance(read(to)?));
    let amount = a.min(7);
    txn.put(t, from.to_be_bytes(), (a - amount).to_be_bytes())?;
    txn.put(t, to.to_be_bytes(), (b + amount).to_be_bytes())?;
    txn.commit_with(Durability::Async)
}

/// Runs `threads` transferring threads for `time`; returns (commits, failed attempts).
fn run(db: &Db, t: TableId, mode: Mode, threads: u64, accounts: u64, time: Duration) -> (u64, u64) {
    let (commits, failures) = (AtomicU64::new(0), AtomicU64::new(0));
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for th in 0..threads {
            let (commits, failures, stop) = (&commits, &failures, &stop);
            s.spawn(move || {
                let mut rng = (th + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                let mut next = move || {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng
                };
                while !stop.load(Ordering::Relaxed) {
                    let from = next() % accounts;
                    let to = (from + 1 + next() % (accounts - 1)) % accounts;
                    loop {
                        match transfer(db, t, mode, from, to) {
                            Ok(()) => break,
                            Err(
                                Error::Conflict { .. }
                                | Error::Deadlock { .. }
                                | Error::LockTimeout { .. },
                            ) => {
                                failures.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => panic!("{e}"),
                        }
                    }
                    commits.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        std::thread::sleep(time);
        stop.store(true, Ordering::Relaxed);
    });
    (commits.into_inner(), failures.into_inner())
}

fn main() {
    let mut args = std::env::args().skip(1);
    let secs: f64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(3.0);
    let dir = args.next().map_or_else(std::env::temp_dir, Into::into);
    let time = Duration::from_secs_f64(secs);
    let modes: [Mode; 4] = [
        (Isolation::Snapshot, false),
        (Isolation::Serializable, false),
        (Isolation::Locking, false),
        (Isolation::Locking, true),
    ];
    println!(
        "{:>8} {:>9} {:>14} {:>15} {:>11} {:>16}",
        "threads", "accounts", "isolation", "reads", "commits/s", "failures/commit"
    );
    for accounts in [16u64, 100_000] {
        for threads in [2u64, 4] {
            // The modes take turns, twice over, on one store per configuration.
            let path = dir.join("txn-contention.store");
            let _ = std::fs::remove_file(&path);
            let opts = Options {
                durability: Durability::Async,
                memtable_size: 256 << 20,
                ..Options::default()
            };
            let db = Db::create(&path, opts).expect("create store");
            let t = db.default_table();
            for a in 0..accounts {
                db.put(t, a.to_be_bytes(), START.to_be_bytes())
                    .expect("fill");
            }
            let mut totals = [(0u64, 0u64, Duration::ZERO); 4];
            for _ in 0..2 {
                for (i, &mode) in modes.iter().enumerate() {
                    let began = Instant::now();
                    let (c, f) = run(&db, t, mode, threads, accounts, time / 2);
                    totals[i].0 += c;
                    totals[i].1 += f;
                    totals[i].2 += began.elapsed();
                }
            }
            let total: u64 = (0..accounts)
                .map(|a| balance(db.get(t, a.to_be_bytes()).expect("get")))
                .sum();
            assert_eq!(total, START * accounts, "money appeared or vanished");
            for ((iso, for_update), (c, f, d)) in modes.iter().zip(totals) {
                let reads = if *for_update { "get_for_update" } else { "get" };
                println!(
                    "{threads:>8} {accounts:>9} {:>14} {reads:>15} {:>11.0} {:>16.3}",
                    format!("{iso:?}"),
                    c as f64 / d.as_secs_f64(),
                    f as f64 / c.max(1) as f64
                );
            }
            db.close().expect("close");
            let _ = std::fs::remove_file(&path);
        }
    }
}
