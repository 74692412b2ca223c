//! Writes one file through [`Fs`] without FUSE, to separate the engine's and the file
//! system's cost of writes from the FUSE adapter's: `seq` writes it in order in `--bs`
//! pieces, `rand` writes 4 KiB pieces at random block offsets, `sync` the same with an
//! `fsync` after each; every mode syncs once at the end. `INGEST` sets the store's
//! `ingest_min_bytes` (`max`: writes are never ingested, as before ingesting existed).
//!
//! `cargo run --release -p stitchdb-fs --example write_loop -- STORE seq|rand|sync MIB [BS [INGEST]]`

use std::time::Instant;
use stitchdb::{Db, Options};
use stitchdb_fs::{Caller, FileTree, Fs, FsOptions, ROOT_INO};

// The allocator of the `stitchdb` binary (and so of the mount daemon), with transparent huge
// pages off as there (see its `main.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let _ = rustix::thread::disable_transparent_huge_pages(true);
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: write_loop STORE seq|rand|sync MIB [BS [INGEST]]");
        std::process::exit(2);
    }
    let path = std::path::Path::new(&args[1]);
    let mode = args[2].as_str();
    let mib: u64 = args[3].parse().expect("MIB: a number");
    let bs: usize = args
        .get(4)
        .map_or(1 << 20, |s| s.parse().expect("BS: a number"));
    let _ = std::fs::remove_file(path);
    let mut opts = Options::default();
    match args.get(5).map(String::as_str) {
        None => {}
        Some("max") => opts.ingest_min_bytes = usize::MAX,
        Some(n) => opts.ingest_min_bytes = n.parse().expect("INGEST: a number or max"),
    }
    let db = Db::create(path, opts).expect("create the store");
    let fs = Fs::mount(db, FsOptions::default()).expect("mount");
    let root = Caller::root();
    let file = fs
        .create(&root, ROOT_INO, b"f", 0o100644)
        .expect("create")
        .ino;
    let size = mib << 20;
    let start = Instant::now();
    let mut written = 0u64;
    match mode {
        "seq" => {
            let buf = vec![0x5au8; bs];
            while written < size {
                fs.write(&root, file, written, &buf).expect("write");
                written += bs as u64;
            }
        }
        "rand" | "sync" => {
            let buf = vec![0xa5u8; 4096];
            let blocks = size / 4096;
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            while written < size {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                fs.write(&root, file, (x % blocks) * 4096, &buf)
                    .expect("write");
                if mode == "sync" {
                    fs.fsync().expect("fsync");
                }
                written += 4096;
            }
        }
        _ => {
            eprintln!("mode: seq, rand or sync");
            std::process::exit(2);
        }
    }
    fs.fsync().expect("fsync");
    let secs = start.elapsed().as_secs_f64();
    let s = fs.db().stats();
    println!(
        "{mode}: {} MiB in {secs:.2} s = {:.0} MiB/s, {:.0} writes/s; {s:?}",
        written >> 20,
        (written >> 20) as f64 / secs,
        written as f64 / bs.min(if mode == "seq" { bs } else { 4096 }) as f64 / secs,
    );
    fs.close().expect("close");
}
