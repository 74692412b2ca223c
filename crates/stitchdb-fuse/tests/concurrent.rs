//! Requests served concurrently: writers on their own files, readers of those files and a
//! lister of the directory run at once through one mount; every read must show what its file
//! held, and after unmounting the store must pass the file system's check.

#![allow(clippy::unwrap_used)]

mod support;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use stitchdb::{Db, Options};
use stitchdb_fs::{check_fs, Tables};
use support::Mounted;

#[test]
fn concurrent_writers_readers_and_listers_agree_with_each_file() {
    require_fuse!();
    let mounted = Mounted::new(true);
    let dir = mounted.dir.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let lister = {
        let (dir, stop) = (dir.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut listings = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for e in std::fs::read_dir(&dir).unwrap() {
                    let e = e.unwrap();
                    // A file may be renamed between the listing and the stat.
                    let _ = e.metadata();
                }
                listings += 1;
            }
            listings
        })
    };
    let workers: Vec<_> = (0..4u64)
        .map(|w| {
            let dir = dir.clone();
            std::thread::spawn(move || {
                let mut rng = ChaCha8Rng::seed_from_u64(w);
                let mut model: Vec<u8> = Vec::new();
                let mut name = dir.join(format!("w{w}-0"));
                let f = std::fs::File::options()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .open(&name)
                    .unwrap();
                for step in 0..400 {
                    let off = rng.gen_range(0..300_000usize);
                    let len = rng.gen_range(1..40_000usize);
                    let data: Vec<u8> = (0..len)
                        .map(|i| (w as u8) ^ (step as u8) ^ (i as u8))
                        .collect();
                    f.write_all_at(&data, off as u64).unwrap();
                    if model.len() < off + len {
                        model.resize(off + len, 0);
                    }
                    model[off..off + len].copy_from_slice(&data);
                    let (ro, rl) = (rng.gen_range(0..model.len()), rng.gen_range(1..50_000usize));
                    let mut buf = vec![0u8; rl];
                    let n = f.read_at(&mut buf, ro as u64).unwrap();
                    let end = (ro + rl).min(model.len());
                    assert_eq!(n, end - ro, "worker {w} step {step}: short read");
                    assert!(
                        buf[..n] == model[ro..end],
                        "worker {w} step {step}: read differs"
                    );
                    if step % 50 == 49 {
                        let next = dir.join(format!("w{w}-{step}"));
                        std::fs::rename(&name, &next).unwrap();
                        name = next;
                        f.sync_all().unwrap();
                    }
                }
                assert!(
                    std::fs::read(&name).unwrap() == model,
                    "worker {w}: final contents"
                );
                (name, model)
            })
        })
        .collect();
    let files: Vec<_> = workers.into_iter().map(|h| h.join().unwrap()).collect();
    stop.store(true, Ordering::Relaxed);
    let listings = lister.join().unwrap();
    assert!(listings > 0);
    let store = mounted.store.clone();
    let _kept = mounted.unmount();
    let db = Db::open(&store, Options::default()).unwrap();
    let tables = Tables::find(&db).unwrap().unwrap();
    let report = check_fs(&db, &tables).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.inodes, 1 + files.len() as u64);
    eprintln!("{listings} listings ran beside the writers; {report:?}");
}
