//! What transactions cost over plain writes, on the same workload in one process: `N` puts
//! of 100-byte values at uniform random 16-byte keys (`Async`), done as plain puts, as
//! one-put snapshot-isolation transactions and as one-put serializable transactions; then
//! the same for read-modify-write (a get and a put per operation, plain or in a transaction).
//! Each mode runs on a fresh store; the rounds alternate modes so drift hits all alike.
//!
//! `cargo run --release -p stitchdb --example txn_overhead [N] [ROUNDS] [DIR]`

use std::time::Instant;
use stitchdb::{Db, Durability, Isolation, Options};

#[derive(Clone, Copy, Debug)]
enum Mode {
    Plain,
    Txn(Isolation),
}

fn key(n: u64) -> [u8; 16] {
    let mut k = [b'0'; 16];
    k[..8].copy_from_slice(&n.to_be_bytes());
    k
}

fn run(dir: &std::path::Path, mode: Mode, rmw: bool, n: u64) -> f64 {
    let path = dir.join("txn-overhead.store");
    let _ = std::fs::remove_file(&path);
    let opts = Options {
        durability: Durability::Async,
        memtable_size: 8 << 20,
        ..Options::default()
    };
    let db = Db::create(&path, opts).expect("create store");
    let t = db.default_table();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let value = [7u8; 100];
    let start = Instant::now();
    for _ in 0..n {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let k = key(rng % n);
        match mode {
            Mode::Plain => {
                if rmw {
                    let _ = db.get(t, k).expect("get");
                }
                db.put(t, k, value).expect("put");
            }
            Mode::Txn(iso) => {
                let mut txn = db.begin(iso).expect("begin");
                if rmw {
                    let _ = txn.get(t, k).expect("get");
                }
                txn.put(t, k, value).expect("put");
                txn.commit().expect("commit");
            }
        }
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    db.close().expect("close");
    let _ = std::fs::remove_file(&path);
    rate
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(500_000);
    let rounds: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(3);
    let dir = args.next().map_or_else(std::env::temp_dir, Into::into);
    let modes = [
        Mode::Plain,
        Mode::Txn(Isolation::Snapshot),
        Mode::Txn(Isolation::Serializable),
    ];
    for rmw in [false, true] {
        let mut rates = vec![Vec::new(); modes.len()];
        for _ in 0..rounds {
            for (i, &mode) in modes.iter().enumerate() {
                rates[i].push(run(&dir, mode, rmw, n));
            }
        }
        let plain = median(rates[0].clone());
        let workload = if rmw { "get+put" } else { "put" };
        for (mode, r) in modes.iter().zip(rates) {
            let r = median(r);
            println!(
                "{workload:8} {:28} {r:>10.0} ops/s  {:+.1}% vs plain",
                format!("{mode:?}"),
                (r / plain - 1.0) * 100.0
            );
        }
    }
}
