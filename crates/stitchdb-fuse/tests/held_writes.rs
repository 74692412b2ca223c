//! The kernel's write-back WRITEs held and committed together by the `/dev/fuse` session
//! (`session::HeldWrites`): large files written from several threads at once (1 MiB and
//! 256 KiB writes, one file from an unaligned offset, one with a hole and a stretch
//! overwritten after an fsync) while other threads create small files and stat, so that
//! holdings are joined by the WRITEs that continue them and committed by the requests that do
//! not. After a remount every byte must equal an in-memory model and the store must pass the
//! file system's check. That WRITEs were held at all depends on what the kernel has queued
//! when one comes; the session's counters (`KvFuse::held_counts`) tell.
//!
//! And a write-back stretch that crosses the largest file size: the WRITEs past it fail,
//! held or not, the FSYNC reports it, nothing waits for an answer, and what fits is kept.
//! (What each held WRITE is answered when their commit fails or stops short is
//! `session::held_answers`, unit-tested there.)

#![allow(clippy::unwrap_used)]

mod support;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use stitchdb::{Db, Options};
use stitchdb_fs::{check_fs, Tables, MAX_FILE_SIZE};
use support::Mounted;

/// Through `/dev/fuse` (where WRITEs are held), with the kernel's write-back cache.
const OPTIONS: &str = "writeback_cache,no_io_uring";

const MIB: usize = 1 << 20;

/// `len` bytes of pseudo-random data, different for each `seed`.
fn data(seed: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    ChaCha8Rng::seed_from_u64(seed).fill(&mut b[..]);
    b
}

/// One large file's writes: `(offset, length)` in order, each of fresh data; `fsync_after`
/// lists the writes after which the file is fsynced.
struct Plan {
    name: &'static str,
    writes: Vec<(usize, usize)>,
    fsync_after: Vec<usize>,
}

/// Writes `count` pieces of `len` bytes back to back from `start`.
fn run(start: usize, len: usize, count: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..count).map(move |i| (start + i * len, len))
}

fn plans() -> Vec<Plan> {
    // 32 MiB in 1 MiB writes, fsynced halfway and at the end.
    let a = Plan {
        name: "a",
        writes: run(0, MIB, 32).collect(),
        fsync_after: vec![15, 31],
    };
    // 24 MiB in 256 KiB writes from an offset that is not a multiple of a page; never
    // fsynced (written back at close and unmount).
    let b = Plan {
        name: "b",
        writes: run(3 * 4096 + 123, 256 << 10, 96).collect(),
        fsync_after: vec![],
    };
    // 40 MiB in 1 MiB writes with a 4 MiB hole at 8 MiB, fsynced, then 4 MiB at 16 MiB
    // written over in 256 KiB writes, and the first 2 MiB of the hole filled in, fsynced.
    let c = Plan {
        name: "c",
        writes: run(0, MIB, 8)
            .chain(run(12 * MIB, MIB, 28))
            .chain(run(16 * MIB, 256 << 10, 16))
            .chain(run(8 * MIB, 256 << 10, 8))
            .collect(),
        fsync_after: vec![35, 59],
    };
    vec![a, b, c]
}

/// Applies `plan` to the file `dir/name` and returns what the file should hold.
fn write_file(dir: &Path, plan: &Plan, file_seed: u64) -> Vec<u8> {
    let f = std::fs::File::create(dir.join(plan.name)).unwrap();
    let mut model = Vec::new();
    for (i, &(off, len)) in plan.writes.iter().enumerate() {
        let d = data(file_seed * 1000 + i as u64, len);
        f.write_all_at(&d, off as u64).unwrap();
        if model.len() < off + len {
            model.resize(off + len, 0);
        }
        model[off..off + len].copy_from_slice(&d);
        if plan.fsync_after.contains(&i) {
            f.sync_all().unwrap();
        }
    }
    model
}

/// Compares the file at `path` with `want`, whole, naming the first difference.
fn assert_holds(path: &Path, want: &[u8]) {
    let got = std::fs::read(path).unwrap();
    assert_eq!(
        got.len(),
        want.len(),
        "{} has the wrong size",
        path.display()
    );
    if let Some(at) = got.iter().zip(want).position(|(g, w)| g != w) {
        panic!("{} differs from the model at byte {at}", path.display());
    }
}

/// Opens the store in `tmp` and runs the file system's check.
fn check(store: &Path) {
    let db = Db::open(store, Options::default()).unwrap();
    let tables = Tables::find(&db).unwrap().unwrap();
    let report = check_fs(&db, &tables).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[test]
fn concurrent_large_writes_are_held_together_and_read_back_whole_after_a_remount() {
    require_fuse!();
    let mounted = Mounted::with_options(OPTIONS);
    let dir = mounted.dir.clone();
    std::fs::create_dir(dir.join("small")).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let small: Arc<Mutex<BTreeMap<String, Vec<u8>>>> = Arc::default();
    // Small requests among the WRITEs: each commits what is held before it is served.
    let chatter = {
        let (dir, done, small) = (dir.clone(), done.clone(), small.clone());
        std::thread::spawn(move || {
            let mut rng = ChaCha8Rng::seed_from_u64(7);
            let mut i = 0u64;
            while !done.load(Ordering::Relaxed) && i < 5000 {
                let name = format!("s{i}");
                let d = data(1_000_000 + i, rng.gen_range(1..6000));
                std::fs::write(dir.join("small").join(&name), &d).unwrap();
                small.lock().unwrap().insert(name, d);
                for big in ["a", "b", "c"] {
                    let _ = std::fs::metadata(dir.join(big));
                }
                i += 1;
            }
        })
    };
    let writers: Vec<_> = plans()
        .into_iter()
        .enumerate()
        .map(|(n, plan)| {
            let dir = dir.clone();
            std::thread::spawn(move || (plan.name, write_file(&dir, &plan, n as u64 + 1)))
        })
        .collect();
    let models: Vec<(&str, Vec<u8>)> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    done.store(true, Ordering::Relaxed);
    chatter.join().unwrap();
    let small = std::mem::take(&mut *small.lock().unwrap());

    let ingested = mounted.fs.upgrade().unwrap().db().stats().ingested_runs;
    let held = mounted.held.clone();
    let store = mounted.store.clone();
    let tmp = mounted.unmount();
    let (commits, writes, failed) = (
        held.commits.load(Ordering::Relaxed),
        held.writes.load(Ordering::Relaxed),
        held.failed.load(Ordering::Relaxed),
    );
    let total: usize = models.iter().map(|(_, m)| m.len()).sum();
    eprintln!(
        "{} MiB of large files, {} small files: {commits} holdings committed {writes} WRITEs; \
         {ingested} runs ingested before the unmount",
        total / MIB,
        small.len()
    );
    // Some holding was joined by a WRITE continuing it: the path under test ran.
    assert!(
        writes > commits,
        "no WRITE joined a held one ({commits} holdings, {writes} WRITEs)"
    );
    assert_eq!(failed, 0, "held WRITEs failed");
    // And the engine saw it: a 1 MiB WRITE committed alone is a run of its own, a holding
    // one run for all its WRITEs.
    assert!(
        ingested < writes,
        "{ingested} runs ingested for {writes} held WRITEs"
    );

    // Read back through a new mount: nothing from the old one's page cache.
    let mounted = Mounted::remount(tmp, OPTIONS);
    for (name, want) in &models {
        assert_holds(&mounted.dir.join(name), want);
    }
    for (name, want) in &small {
        assert_holds(&mounted.dir.join("small").join(name), want);
    }
    let _kept = mounted.unmount();
    check(&store);
}

/// Attempts of [`write_back_past_the_largest_file_size_fails_every_write_beyond_it`], each
/// on a file of its own, until a failing WRITE was held.
const ATTEMPTS: usize = 5;

#[test]
fn write_back_past_the_largest_file_size_fails_every_write_beyond_it() {
    require_fuse!();
    let mounted = Mounted::with_options(OPTIONS);
    let max = MAX_FILE_SIZE as usize;
    // 2.5 MiB before the largest size and 5.5 MiB after it, 1 MiB at a time: written back
    // together at the FSYNC, as WRITEs that end before it, likely one that crosses it, and
    // WRITEs past it. Those past it fail, committed alone or held: with WRITEs before them
    // (the commit writes fewer bytes than held) or among themselves (the commit fails).
    // Each WRITE must be answered: one left waiting would leave the FSYNC waiting too.
    let start = max - 2 * MIB - MIB / 2;
    let d = data(99, 8 * MIB);
    let mut attempts = 0;
    while attempts < ATTEMPTS && mounted.held.failed.load(Ordering::Relaxed) == 0 {
        let f = std::fs::File::create(mounted.dir.join(format!("big{attempts}"))).unwrap();
        for (i, chunk) in d.chunks(MIB).enumerate() {
            f.write_all_at(chunk, (start + i * MIB) as u64).unwrap();
        }
        let synced = f.sync_all();
        let errno = synced.as_ref().map_err(|e| e.raw_os_error());
        assert_eq!(errno, Err(Some(libc::EFBIG)), "fsync: {synced:?}");
        attempts += 1;
    }
    let held = mounted.held.clone();
    let (commits, writes, failed) = (
        held.commits.load(Ordering::Relaxed),
        held.writes.load(Ordering::Relaxed),
        held.failed.load(Ordering::Relaxed),
    );
    eprintln!("{attempts} attempts: {commits} holdings committed {writes} WRITEs, {failed} failed");
    // A WRITE past the largest size was held, and was answered with the error.
    assert!(
        failed > 0,
        "no failing WRITE was held in {attempts} attempts"
    );
    let store = mounted.store.clone();
    let tmp = mounted.unmount();

    // What fits is kept; nothing beyond it.
    let mounted = Mounted::remount(tmp, OPTIONS);
    for n in 0..attempts {
        let f = std::fs::File::open(mounted.dir.join(format!("big{n}"))).unwrap();
        assert_eq!(f.metadata().unwrap().len(), MAX_FILE_SIZE);
        let mut got = vec![0u8; max - start];
        f.read_exact_at(&mut got, start as u64).unwrap();
        assert!(
            got == d[..max - start],
            "big{n}: the stretch below the largest size differs"
        );
    }
    let _kept = mounted.unmount();
    check(&store);
}
