//! Writes and reads one large value sequentially through the API, and counts the device reads
//! of a 4 KiB range read of it: the figures `bench/large/run.sh` sets beside `fio`'s.
//!
//! `cargo run --release -p stitchdb --example large_values -- write STORE BYTES`
//! `cargo run --release -p stitchdb --example large_values -- read STORE`
//! `cargo run --release -p stitchdb --example large_values -- range STORE`
//!
//! `write` creates STORE and puts BYTES bytes (from a 1 MiB buffer of random bytes, repeated)
//! with `Db::put_from`, durably; `read` copies the value to nowhere with `Db::value_reader`;
//! each prints `MiB/s`. `range` reopens the store over a counting disk and reads 4 KiB at a
//! random offset a few times, printing the device reads each took.

use std::io::Read;
use std::sync::Arc;
use std::time::Instant;
use stitch_io::CountingDisk;
use stitchdb::{Db, Disk, FileDisk, Options};

const KEY: &[u8] = b"large";

/// `len` bytes of a 1 MiB pattern, repeated: a source that costs next to nothing.
struct Pattern {
    buf: Vec<u8>,
    pos: usize,
    left: u64,
}

impl Read for Pattern {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = out
            .len()
            .min(self.buf.len() - self.pos)
            .min(self.left as usize);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos = (self.pos + n) % self.buf.len();
        self.left -= n as u64;
        Ok(n)
    }
}

fn mib_per_s(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / (1 << 20) as f64 / secs
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (what, path) = match args.as_slice() {
        [what, path, ..] => (what.as_str(), std::path::PathBuf::from(path)),
        _ => panic!("usage: large_values write|read|range STORE [BYTES]"),
    };
    let opts = Options::default;
    match what {
        "write" => {
            let len: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1 << 30);
            let _ = std::fs::remove_file(&path);
            let db = Db::create(&path, opts()).expect("create");
            let mut seed = 0x9e3779b97f4a7c15u64;
            let buf = (0..1 << 20)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect();
            let start = Instant::now();
            let src = Pattern {
                buf,
                pos: 0,
                left: len,
            };
            db.put_from(db.default_table(), KEY, src, len).expect("put");
            let secs = start.elapsed().as_secs_f64();
            println!(
                "write {len} bytes in {secs:.3} s: {:.1} MiB/s",
                mib_per_s(len, secs)
            );
            db.close().expect("close");
        }
        "read" => {
            let db = Db::open(&path, opts()).expect("open");
            let start = Instant::now();
            let mut reader = db
                .value_reader(db.default_table(), KEY)
                .expect("read")
                .expect("no value: run write first");
            let len = std::io::copy(&mut reader, &mut std::io::sink()).expect("copy");
            let secs = start.elapsed().as_secs_f64();
            println!(
                "read {len} bytes in {secs:.3} s: {:.1} MiB/s",
                mib_per_s(len, secs)
            );
        }
        "range" => {
            let file = FileDisk::open(&path, stitch_io::LockMode::Exclusive)
                .unwrap_or_else(|e| panic!("{e}"));
            let counting = Arc::new(CountingDisk::new(Arc::new(file) as Arc<dyn Disk>));
            let db = Db::open_on(counting.clone(), opts()).expect("open");
            let t = db.default_table();
            let len = db.value_len(t, KEY).expect("len").expect("no value");
            let mut seed = 12345u64;
            for _ in 0..5 {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let offset = (seed >> 11) % (len - 4096);
                let before = counting.reads();
                let got = db
                    .get_range(t, KEY, offset, 4096)
                    .expect("range")
                    .expect("value");
                assert_eq!(got.len(), 4096);
                let reads = counting.reads() - before;
                println!("4 KiB at offset {offset} of {len}: {reads} device read(s)");
            }
        }
        other => panic!("unknown {other:?}: write, read or range"),
    }
}
