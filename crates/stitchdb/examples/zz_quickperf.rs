use std::time::Instant;
use stitchdb::{Db, Durability, Options, WriteBatch};
fn key(i: u64) -> Vec<u8> {
    let mut k = i.to_be_bytes().to_vec();
    k.extend_from_slice(b"00000000");
    k
}
fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000_000);
    let path = "/tmp/qp/q.store";
    let _ = std::fs::remove_file(path);
    let db = Db::create(
        path,
        Options {
            durability: Durability::Async,
            ..Options::default()
        },
    )
    .unwrap();
    let t = db.default_table();
    let t0 = Instant::now();
    let mut x: u64 = 12345;
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut b = WriteBatch::new();
        b.put(t, key(x % n), [1u8; 100]);
        db.write(&b, Durability::Async).unwrap();
    }
    let w = t0.elapsed().as_secs_f64();
    println!("fillrandom {n}: {:.0} ops/s", n as f64 / w);
    let t0 = Instant::now();
    let mut found = 0;
    for i in 0..200_000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let _ = i;
        if db.get(t, key(x % n)).unwrap().is_some() {
            found += 1;
        }
    }
    println!(
        "readrandom 200k: {:.0} ops/s ({found} found)",
        200_000.0 / t0.elapsed().as_secs_f64()
    );
    let t0 = Instant::now();
    let c = db.scan_prefix(t, b"").unwrap().take(1_000_000).count();
    println!(
        "readseq {c}: {:.0} ops/s",
        c as f64 / t0.elapsed().as_secs_f64()
    );
    println!("{}", db.stats());
    let io = std::fs::read_to_string("/proc/self/io").unwrap();
    println!(
        "{}",
        io.lines().find(|l| l.starts_with("write_bytes")).unwrap()
    );
}
