//! What transactions cost over plain writes, on the same workload: 100-byte values at uniform
//! random 16-byte keys (`Async`), as plain puts and as one-put transactions of each isolation
//! (snapshot, serializable by validation, serializable by locking); then the same for
//! read-modify-write (a get and a put per operation, plain or in a transaction). One thread:
//! the cost of the machinery, with nothing to conflict with (`txn_contention` measures
//! conflicts).
//!
//! All modes share one store and take turns in slices of 2,000 operations, many times over,
//! so the store's growth and the machine's drift fall on every mode alike; each mode's time is
//! the sum of its slices. The memtable holds the whole run: memtable flushes and merges (the
//! same work whichever mode wrote the data, and when they land, by far the largest source of
//! noise between slices) stay out of the measurement, which makes the transactions' share of
//! the remaining cost larger, not smaller.
//!
//! `cargo run --release -p stitchdb --example txn_overhead [OPS-PER-MODE] [DIR]`

use std::time::{Duration, Instant};
use stitchdb::{Db, Durability, Isolation, Options, TableId};

// The allocator the `stitchdb` binary uses.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SLICE: u64 = 2_000;

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

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn slice(db: &Db, t: TableId, mode: Mode, rmw: bool, rng: &mut Rng, space: u64) -> Duration {
    let value = [7u8; 100];
    let start = Instant::now();
    for _ in 0..SLICE {
        let k = key(rng.next() % space);
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
    start.elapsed()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let ops: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(600_000);
    let dir = args.next().map_or_else(std::env::temp_dir, Into::into);
    let modes = [
        Mode::Plain,
        Mode::Txn(Isolation::Snapshot),
        Mode::Txn(Isolation::Serializable),
        Mode::Txn(Isolation::Locking),
    ];
    for rmw in [false, true] {
        let path = dir.join("txn-overhead.store");
        let _ = std::fs::remove_file(&path);
        let opts = Options {
            durability: Durability::Async,
            memtable_size: 1 << 30,
            ..Options::default()
        };
        let db = Db::create(&path, opts).expect("create store");
        let t = db.default_table();
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let mut spent = [Duration::ZERO; 4];
        for _ in 0..ops / SLICE {
            for (i, &mode) in modes.iter().enumerate() {
                spent[i] += slice(&db, t, mode, rmw, &mut rng, ops * 3);
            }
        }
        let rate = |d: Duration| (ops / SLICE * SLICE) as f64 / d.as_secs_f64();
        let plain = rate(spent[0]);
        let workload = if rmw { "get+put" } else { "put" };
        for (mode, d) in modes.iter().zip(spent) {
            println!(
                "{workload:8} {:28} {:>10.0} ops/s  {:+.1}% vs plain",
                format!("{mode:?}"),
                rate(d),
                (rate(d) / plain - 1.0) * 100.0
            );
        }
        db.close().expect("close");
        let _ = std::fs::remove_file(&path);
    }
}
