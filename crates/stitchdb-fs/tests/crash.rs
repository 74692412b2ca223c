//! Crash test: random file operations on a simulated disk that captures crash images at
//! random writes and syncs (inside commits, flushes and merges). Every image must mount to
//! the tree as it was after some prefix of the completed operations, at least up to the last
//! `fsync` that returned, and pass the file system's check.
//!
//! STITCHDB_FS_CRASH_STATES sets how many crash states to verify (default 400).

#![allow(clippy::unwrap_used)]

mod support;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use stitch_io::{CrashImage as Image, CrashingDisk};
use stitchdb::Db;
use stitchdb_fs::{check_fs, Caller, FileTree, Fs, FsOptions, Kind, SetAttr, ROOT_INO};
use support::{dump, small_options, test_clock, Tree};

fn fs_options() -> FsOptions {
    FsOptions {
        clock: test_clock(),
        ..FsOptions::default()
    }
}

/// Inodes of kind `kind` reachable now, found by walking the tree.
fn reachable(fs: &Fs, kind: Kind) -> Vec<(u64, u64, Vec<u8>)> {
    let mut out = vec![];
    let mut todo = vec![ROOT_INO];
    while let Some(d) = todo.pop() {
        for e in fs.readdir(d, 2, usize::MAX).unwrap() {
            if e.kind == Kind::Dir {
                todo.push(e.ino);
            }
            if e.kind == kind {
                out.push((d, e.ino, e.name));
            }
        }
    }
    out
}

/// One seed in four runs on a disk with little room beyond what the store holds back.
fn small_disk(seed: u64) -> bool {
    seed % 4 == 3
}

/// Runs one seeded workload; returns the tree after each operation and the crash images.
fn workload(seed: u64, ops: u64) -> (Vec<Tree>, Vec<Image>) {
    let disk = CrashingDisk::new(seed);
    let db = Db::create_on(disk.clone(), small_options()).unwrap();
    let fs = Fs::mount(db, fs_options()).unwrap();
    // Writes are refused with ENOSPC there, and refused writers reclaim room, while images
    // are taken.
    if small_disk(seed) {
        disk.sim
            .set_capacity(Some(stitchdb::Disk::len(&*disk.sim) + (2 << 20)));
    }
    *disk.probability.lock() = 0.03;
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xf5);
    let root = Caller::root();
    let mut states = vec![dump(&fs)];
    let mut open: Vec<u64> = vec![];
    for n in 1..=ops {
        disk.issued.store(n, Ordering::SeqCst);
        let mut dirs: Vec<u64> = reachable(&fs, Kind::Dir)
            .into_iter()
            .map(|(_, i, _)| i)
            .collect();
        dirs.push(ROOT_INO);
        let dir = dirs[rng.gen_range(0..dirs.len())];
        let files = reachable(&fs, Kind::File);
        let name = format!("f{}", rng.gen_range(0..6)).into_bytes();
        let file = (!files.is_empty()).then(|| files[rng.gen_range(0..files.len())].clone());
        // Each call below is at most one commit; a failing one changes nothing.
        let done = match rng.gen_range(0..12) {
            0 => fs.mkdir(&root, dir, &name, 0o755).map(|_| ()),
            1 | 2 => fs
                .create(&root, dir, &name, 0o644)
                .map(|a| open.push(a.ino)),
            3..=5 => match &file {
                Some((_, ino, _)) => {
                    let size = fs.getattr(*ino).unwrap().size;
                    let off = if rng.gen_bool(0.6) {
                        size
                    } else {
                        rng.gen_range(0..size + 1)
                    };
                    let len = rng.gen_range(1..12_000);
                    let byte: u8 = rng.gen();
                    let data: Vec<u8> = (0..len).map(|i| byte ^ (i as u8)).collect();
                    fs.write(&root, *ino, off, &data).map(|_| ())
                }
                None => Ok(()),
            },
            6 => match &file {
                Some((_, ino, _)) => {
                    let s = SetAttr {
                        size: Some(rng.gen_range(0..20_000)),
                        ..SetAttr::default()
                    };
                    fs.setattr(&root, *ino, &s).map(|_| ())
                }
                None => Ok(()),
            },
            7 => match &file {
                Some((p, _, nm)) => fs.rename(&root, *p, nm, dir, &name, 0),
                None => Ok(()),
            },
            8 => fs.unlink(&root, dir, &name),
            9 => match &file {
                Some((_, ino, _)) => fs.link(&root, *ino, dir, &name).map(|_| ()),
                None => fs.rmdir(&root, dir, &name),
            },
            10 => match &file {
                Some((_, ino, _)) => fs.setxattr(&root, *ino, b"user.n", &n.to_be_bytes(), 0),
                None => Ok(()),
            },
            _ => {
                if open.is_empty() {
                    fs.symlink(&root, dir, &name, format!("t{n}").as_bytes())
                        .map(|_| ())
                } else {
                    let ino = open.swap_remove(rng.gen_range(0..open.len()));
                    fs.release(ino)
                }
            }
        };
        if let Err(e) = done {
            if e.errno() == libc::ENOSPC {
                REFUSED.fetch_add(1, Ordering::SeqCst);
            }
        }
        states.push(dump(&fs));
        if rng.gen_bool(0.08) {
            fs.fsync().unwrap();
            disk.acked.store(n, Ordering::SeqCst);
        }
    }
    for ino in open {
        fs.release(ino).unwrap();
    }
    INGESTED.fetch_add(fs.db().stats().ingested_runs, Ordering::SeqCst);
    fs.close().unwrap();
    let images = std::mem::take(&mut *disk.images.lock());
    (states, images)
}

/// Runs the workloads' writes ingested (writes of two blocks or more), summed.
static INGESTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Operations refused with `ENOSPC` (on the small disks), summed.
static REFUSED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[test]
fn every_crash_mounts_to_a_prefix_of_the_operations_with_every_fsynced_one() {
    let target: usize = std::env::var("STITCHDB_FS_CRASH_STATES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(400);
    let (mut verified, mut seed) = (0usize, 0u64);
    let mut prefixes = std::collections::BTreeSet::new();
    // Crash states that lost completed operations not yet fsynced (what makes this a test of
    // ordering rather than of a disk that keeps everything).
    let mut lost_some = 0usize;
    while verified < target {
        seed += 1;
        let (states, images) = workload(seed, 120);
        for (i, (image, acked, issued)) in images.into_iter().enumerate() {
            let what = format!("seed {seed} image {i} (acked {acked}, issued {issued})");
            let db = Db::open_on(Arc::new(image), small_options())
                .unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
            let fs = Fs::mount(db, fs_options()).unwrap_or_else(|e| panic!("{what}: mount: {e}"));
            let got = dump(&fs);
            let found = (acked..=issued).rev().find(|&k| states[k as usize] == got);
            let Some(k) = found else {
                let nearest = (0..states.len()).find(|&k| states[k] == got);
                panic!("{what}: the tree is no prefix at or after the last fsync (matches state {nearest:?})");
            };
            prefixes.insert((seed, k));
            if k + 1 < issued {
                lost_some += 1;
            }
            let report = check_fs(fs.db(), fs.tables()).unwrap();
            assert!(report.problems.is_empty(), "{what}: {:?}", report.problems);
            // A full store keeps unlinked files still open at the crash until a mount finds
            // room to delete them.
            if !small_disk(seed) {
                assert_eq!(report.orphans, 0, "{what}: orphans survive a mount");
            }
            fs.close().unwrap();
            verified += 1;
        }
    }
    eprintln!(
        "verified {verified} crash states from {seed} workloads; {} distinct prefixes, \
         {lost_some} lost unsynced operations",
        prefixes.len()
    );
    assert!(lost_some > 0, "no crash lost an unsynced operation");
    let ingested = INGESTED.load(Ordering::SeqCst);
    let refused = REFUSED.load(Ordering::SeqCst);
    eprintln!("the workloads' writes ingested {ingested} runs; {refused} operations got ENOSPC");
    assert!(ingested > 0, "some writes were ingested");
    assert!(refused > 0, "the small disks filled");
    assert!(
        prefixes.len() > verified / 4,
        "crashes landed at many different points"
    );
}
