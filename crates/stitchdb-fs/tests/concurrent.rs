//! Operations from several threads at once. Reads take no lock and go through the metadata
//! cache while the writer commits: no reader may see a change undone, and once they stop,
//! every answer must be the one a fresh mount of the same store gives.

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use stitchdb::{Db, SimConfig, SimDisk};
use stitchdb_fs::{Attr, Caller, FileTree, Fs, FsOptions, SetAttr, TimeSet, Timespec, ROOT_INO};
use support::small_options;

const FILES: u64 = 4;
/// The writer's steps.
const STEPS: i64 = 3000;

/// Sets the flag when dropped, so readers stop however the writer ends (a panic included).
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

fn name(k: u64) -> Vec<u8> {
    format!("f{k}").into_bytes()
}

/// What the file system answers about the test's files: each one's attributes by name and by
/// inode, and whether the names the writer passes through exist.
fn answers(fs: &Fs, dir: u64, inos: &[u64]) -> Vec<String> {
    let root = Caller::root();
    let mut out = Vec::new();
    for (k, &ino) in inos.iter().enumerate() {
        out.push(format!("{:?}", fs.lookup(&root, dir, &name(k as u64))));
        out.push(format!("{:?}", fs.getattr(ino)));
    }
    for n in [&b"tmp"[..], b"churn"] {
        out.push(format!("{:?}", fs.lookup(&root, dir, n).map(|a| a.kind)));
    }
    out
}

#[test]
fn readers_racing_commits_never_see_a_change_undone() {
    // Each round meets a few races; three make missing one unlikely.
    for seed in 0..3 {
        race(seed);
    }
}

fn race(seed: u64) {
    let disk = Arc::new(SimDisk::new(SimConfig {
        seed,
        len: 0,
        capacity: None,
    }));
    let db = Db::create_on(disk.clone(), small_options()).unwrap();
    let fs = Fs::mount(db, FsOptions::default()).unwrap();
    let root = Caller::root();
    let dir = fs.mkdir(&root, ROOT_INO, b"d", 0o755).unwrap().ino;
    let inos: Vec<u64> = (0..FILES)
        .map(|k| {
            let a = fs.create(&root, dir, &name(k), 0o644).unwrap();
            fs.release(a.ino).unwrap();
            a.ino
        })
        .collect();
    let mtime = |secs: i64| SetAttr {
        mtime: Some(TimeSet::At(Timespec { secs, nanos: 0 })),
        ..SetAttr::default()
    };
    for &ino in &inos {
        fs.setattr(&root, ino, &mtime(0)).unwrap();
    }
    let done = AtomicBool::new(false);
    let reads = std::thread::scope(|s| {
        let readers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let mut last = vec![0i64; FILES as usize];
                    let mut seen = |k: usize, a: &Attr, how: &str| {
                        assert_eq!(a.ino, inos[k]);
                        assert!(
                            a.mtime.secs >= last[k],
                            "file {k} by {how}: mtime {} after {}",
                            a.mtime.secs,
                            last[k]
                        );
                        last[k] = a.mtime.secs;
                    };
                    let mut reads = 0u64;
                    while !done.load(Ordering::Acquire) {
                        for (k, &ino) in inos.iter().enumerate() {
                            match fs.lookup(&root, dir, &name(k as u64)) {
                                Ok(a) => seen(k, &a, "name"),
                                // Renamed away for a moment.
                                Err(e) => assert_eq!(e.errno(), libc::ENOENT),
                            }
                            seen(k, &fs.getattr(ino).unwrap(), "inode");
                            reads += 2;
                        }
                        let _ = fs.lookup(&root, dir, b"churn");
                    }
                    reads
                })
            })
            .collect();
        let stop = StopOnDrop(&done);
        for i in 1..=STEPS {
            let k = (i as u64) % FILES;
            fs.setattr(&root, inos[k as usize], &mtime(i)).unwrap();
            if i % 5 == 0 {
                fs.rename(&root, dir, &name(k), dir, b"tmp", 0).unwrap();
                fs.rename(&root, dir, b"tmp", dir, &name(k), 0).unwrap();
            }
            if i % 3 == 0 {
                let c = fs.create(&root, dir, b"churn", 0o600).unwrap();
                fs.release(c.ino).unwrap();
                fs.unlink(&root, dir, b"churn").unwrap();
            }
        }
        drop(stop);
        readers.into_iter().map(|r| r.join().unwrap()).sum::<u64>()
    });
    assert!(
        reads > 1000,
        "the readers ran alongside the writer ({reads} reads)"
    );
    for (k, &ino) in inos.iter().enumerate() {
        let last = STEPS - (STEPS - k as i64).rem_euclid(FILES as i64);
        assert_eq!(fs.getattr(ino).unwrap().mtime.secs, last, "file {k}");
    }
    let cached = answers(&fs, dir, &inos);
    fs.close().unwrap();
    let fs = Fs::mount(
        Db::open_on(disk, small_options()).unwrap(),
        FsOptions::default(),
    )
    .unwrap();
    assert_eq!(cached, answers(&fs, dir, &inos));
}
