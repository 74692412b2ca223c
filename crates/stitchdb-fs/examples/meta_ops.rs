//! Times file-system metadata operations at the library level (no FUSE): `N` empty files
//! created in directories of 1,000, each looked up, then unlinked, as `bench/fs`'s file
//! phases do through a mount; each unlink followed by what the kernel sends a mount with
//! the write-back cache after it (a SETATTR of the change time, then the FORGET).
//! `cargo run --release -p stitchdb-fs --example meta_ops -- DIR [N]`.

use std::time::Instant;
use stitchdb::{Db, Options};
use stitchdb_fs::{Caller, FileTree, Fs, FsOptions, SetAttr, Timespec, ROOT_INO};

// The allocator of the `stitchdb` binary (and so of the mount daemon), with transparent huge
// pages off as there (see its `main.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let _ = rustix::thread::disable_transparent_huge_pages(true);
    let mut args = std::env::args().skip(1);
    let dir = args.next().ok_or("usage: meta_ops DIR [N]")?;
    let n: u64 = args.next().map_or(Ok(100_000), |s| s.parse())?;
    let path = std::path::Path::new(&dir).join("meta_ops.store");
    let _ = std::fs::remove_file(&path);
    let opts = FsOptions {
        keep_deleted: true,
        ..FsOptions::default()
    };
    let fs = Fs::mount(Db::create(&path, Options::default())?, opts)?;
    let root = Caller::root();
    let dir_name = |d: u64| format!("d{d:04}").into_bytes();
    let file_name = |i: u64| format!("f{i:06}").into_bytes();
    let start = Instant::now();
    let top = fs.mkdir(&root, ROOT_INO, b"files", 0o755)?.ino;
    let mut dirs = Vec::new();
    for i in 0..n {
        if i % 1000 == 0 {
            dirs.push(fs.mkdir(&root, top, &dir_name(i / 1000), 0o755)?.ino);
        }
        let parent = dirs[(i / 1000) as usize];
        let ino = fs.create(&root, parent, &file_name(i), 0o644)?.ino;
        fs.release(ino)?;
    }
    report("create", n, start);
    let start = Instant::now();
    for i in 0..n {
        fs.lookup(&root, dirs[(i / 1000) as usize], &file_name(i))?;
    }
    report("lookup", n, start);
    let start = Instant::now();
    let ctime = SetAttr {
        ctime: Some(Timespec { secs: 1, nanos: 0 }),
        ..SetAttr::default()
    };
    for i in 0..n {
        let parent = dirs[(i / 1000) as usize];
        let ino = fs.lookup(&root, parent, &file_name(i))?.ino;
        fs.unlink(&root, parent, &file_name(i))?;
        fs.setattr(&root, ino, &ctime)?;
        fs.forget(ino);
    }
    for (d, _) in dirs.iter().enumerate() {
        fs.rmdir(&root, top, &dir_name(d as u64))?;
    }
    report("lookup, unlink, setattr", n, start);
    fs.close()?;
    std::fs::remove_file(&path)?;
    Ok(())
}

fn report(what: &str, n: u64, start: Instant) {
    let s = start.elapsed().as_secs_f64();
    println!("{what:>24}: {s:.2} s, {:.1} us each", s * 1e6 / n as f64);
}
