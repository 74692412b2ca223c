//! Reads the file `write_loop` wrote through [`Fs`] without FUSE, to separate the engine's
//! and the file system's cost of reads from the FUSE adapter's: `seq` reads it in order in
//! `BS` pieces, on `THREADS` threads taking turns at the pieces (as the kernel's readahead
//! keeps several reads in flight); `rand` reads 4 KiB at random block offsets. The page cache
//! is dropped first (as root), so the store is read cold.
//!
//! `cargo run --release -p stitchdb-fs --example read_loop -- STORE seq|rand SECONDS|0 [BS [THREADS]]`

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use stitchdb::{Db, Options};
use stitchdb_fs::{Caller, FileTree, Fs, FsOptions, ROOT_INO};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: read_loop STORE seq|rand SECONDS|0 [BS [THREADS]]");
        std::process::exit(2);
    }
    let mode = args[2].as_str();
    let limit = Duration::from_secs(args[3].parse().expect("SECONDS: a number"));
    let bs: u64 = args.get(4).map_or(1 << 20, |s| s.parse().expect("BS"));
    let threads: u64 = args.get(5).map_or(1, |s| s.parse().expect("THREADS"));
    let db = Db::open(std::path::Path::new(&args[1]), Options::default()).expect("open");
    let fs = Fs::mount(db, FsOptions::default()).expect("mount");
    let file = fs
        .lookup(&Caller::root(), ROOT_INO, b"f")
        .expect("lookup f");
    if std::fs::write("/proc/sys/vm/drop_caches", "3").is_err() {
        eprintln!("could not drop the page cache (not root?): reads may be warm");
    }
    let (size, ino) = (file.size, file.ino);
    let next = AtomicU64::new(0);
    let bytes = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let (fs, next, bytes) = (&fs, &next, &bytes);
            s.spawn(move || {
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ t;
                loop {
                    if !limit.is_zero() && start.elapsed() > limit {
                        return;
                    }
                    let (offset, len) = match mode {
                        "seq" => (next.fetch_add(bs, Ordering::Relaxed), bs),
                        _ => {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            ((x % (size / 4096)) * 4096, 4096)
                        }
                    };
                    if offset >= size {
                        return;
                    }
                    let got = fs.read(ino, offset, len as usize).expect("read");
                    bytes.fetch_add(got.len() as u64, Ordering::Relaxed);
                }
            });
        }
    });
    let secs = start.elapsed().as_secs_f64();
    let b = bytes.load(Ordering::Relaxed);
    println!(
        "{mode}: {} MiB in {secs:.2} s = {:.0} MiB/s, {:.0} reads/s",
        b >> 20,
        (b >> 20) as f64 / secs,
        b as f64 / if mode == "seq" { bs } else { 4096 } as f64 / secs
    );
}
