//! Access times by the mount's policy: which reads write one (file data, directory listings,
//! symbolic links), that nothing else about the inode moves, and that a read-only file
//! system writes none.

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use stitchdb::{Db, SimConfig, SimDisk};
use stitchdb_fs::{
    AtimeMode, AtimePolicy, Attr, Caller, FileTree, Fs, FsOptions, SetAttr, TimeSet, Timespec,
    ROOT_INO,
};
use support::small_options;

/// A clock a test moves by hand (whole seconds).
#[derive(Clone, Default)]
struct HandClock(Arc<AtomicI64>);

impl HandClock {
    fn at(&self, secs: i64) {
        self.0.store(secs, Ordering::SeqCst);
    }

    fn clock(&self) -> stitchdb_fs::Clock {
        let now = self.0.clone();
        Arc::new(move || Timespec {
            secs: now.load(Ordering::SeqCst),
            nanos: 0,
        })
    }
}

/// A file system on a fresh simulated disk under `policy`, and its clock.
fn fs_with(policy: AtimePolicy) -> (Fs, HandClock, Arc<SimDisk>) {
    let disk = Arc::new(SimDisk::new(SimConfig {
        seed: 5,
        len: 0,
        capacity: None,
    }));
    let db = Db::create_on(disk.clone(), small_options()).unwrap();
    let (fs, clock) = mount(db, policy, false);
    (fs, clock, disk)
}

fn mount(db: Db, atime: AtimePolicy, read_only: bool) -> (Fs, HandClock) {
    let clock = HandClock::default();
    clock.at(1_000);
    let fs = Fs::mount(
        db,
        FsOptions {
            clock: clock.clock(),
            atime,
            read_only,
            ..FsOptions::default()
        },
    )
    .unwrap();
    (fs, clock)
}

fn policy(mode: AtimeMode) -> AtimePolicy {
    AtimePolicy { mode, dirs: true }
}

fn secs(a: &Attr) -> (i64, i64, i64) {
    (a.atime.secs, a.mtime.secs, a.ctime.secs)
}

/// A file made at 1,000 s holding a few bytes, written at 1,000 s.
fn file(fs: &Fs) -> u64 {
    let root = Caller::root();
    let ino = fs.create(&root, ROOT_INO, b"f", 0o644).unwrap().ino;
    fs.write(&root, ino, 0, b"hello").unwrap();
    ino
}

#[test]
fn relatime_writes_the_first_read_after_a_change_and_then_once_a_day() {
    let (fs, clock, _) = fs_with(AtimePolicy::default());
    let ino = file(&fs);
    clock.at(1_010);
    assert_eq!(fs.read(ino, 0, 10).unwrap(), b"hello");
    assert_eq!(secs(&fs.getattr(ino).unwrap()), (1_010, 1_000, 1_000));
    // Read since its last change: the next reads write nothing.
    clock.at(1_020);
    fs.read(ino, 0, 10).unwrap();
    assert_eq!(secs(&fs.getattr(ino).unwrap()), (1_010, 1_000, 1_000));
    // Written again: the next read writes.
    clock.at(1_030);
    fs.write(&Caller::root(), ino, 5, b"!").unwrap();
    clock.at(1_040);
    fs.read(ino, 0, 10).unwrap();
    assert_eq!(secs(&fs.getattr(ino).unwrap()), (1_040, 1_030, 1_030));
    // A day after the last access time written, a read writes it again.
    clock.at(1_040 + 86_399);
    fs.read(ino, 0, 10).unwrap();
    assert_eq!(fs.getattr(ino).unwrap().atime.secs, 1_040);
    clock.at(1_040 + 86_400);
    fs.read(ino, 0, 10).unwrap();
    assert_eq!(fs.getattr(ino).unwrap().atime.secs, 1_040 + 86_400);
}

#[test]
fn strictatime_writes_every_read_and_noatime_none() {
    let (fs, clock, _) = fs_with(policy(AtimeMode::Always));
    let ino = file(&fs);
    for t in [1_001, 1_002, 1_003] {
        clock.at(t);
        fs.read(ino, 0, 1).unwrap();
        assert_eq!(secs(&fs.getattr(ino).unwrap()), (t, 1_000, 1_000));
    }
    // A read at the time already written commits nothing.
    let before = fs.db().stats().last_seq;
    fs.read(ino, 0, 1).unwrap();
    assert_eq!(fs.db().stats().last_seq, before);

    let (fs, clock, _) = fs_with(policy(AtimeMode::Never));
    let ino = file(&fs);
    clock.at(1_001);
    fs.read(ino, 0, 1).unwrap();
    fs.readdir(ROOT_INO, 0, 10).unwrap();
    assert_eq!(fs.getattr(ino).unwrap().atime.secs, 1_000);
    assert_eq!(fs.getattr(ROOT_INO).unwrap().atime.secs, 1_000);
}

#[test]
fn listing_a_directory_and_reading_a_link_write_their_access_times_unless_nodiratime() {
    let root = Caller::root();
    let (fs, clock, _) = fs_with(AtimePolicy::default());
    let dir = fs.mkdir(&root, ROOT_INO, b"d", 0o755).unwrap().ino;
    let link = fs.symlink(&root, ROOT_INO, b"l", b"d").unwrap().ino;
    clock.at(1_005);
    assert_eq!(fs.readlink(link).unwrap(), b"d");
    assert_eq!(fs.getattr(link).unwrap().atime.secs, 1_005);
    fs.readdir(dir, 0, 10).unwrap();
    assert_eq!(secs(&fs.getattr(dir).unwrap()), (1_005, 1_000, 1_000));

    let (fs, clock, _) = fs_with(AtimePolicy {
        mode: AtimeMode::Always,
        dirs: false,
    });
    let dir = fs.mkdir(&root, ROOT_INO, b"d", 0o755).unwrap().ino;
    let ino = file(&fs);
    clock.at(1_005);
    fs.readdir(dir, 0, 10).unwrap();
    fs.read(ino, 0, 1).unwrap();
    assert_eq!(fs.getattr(dir).unwrap().atime.secs, 1_000);
    assert_eq!(fs.getattr(ino).unwrap().atime.secs, 1_005);
}

#[test]
fn an_access_time_outlives_a_remount_and_a_read_only_mount_writes_none() {
    let (fs, clock, disk) = fs_with(AtimePolicy::default());
    let ino = file(&fs);
    // Set by hand to before its change: the next read-write read would write it.
    fs.setattr(
        &Caller::root(),
        ino,
        &SetAttr {
            atime: Some(TimeSet::At(Timespec {
                secs: 500,
                nanos: 0,
            })),
            ..SetAttr::default()
        },
    )
    .unwrap();
    clock.at(1_100);
    let ctime = fs.getattr(ino).unwrap().ctime;
    fs.close().unwrap();

    let db = Db::open_on(disk.clone(), small_options()).unwrap();
    let (fs, clock) = mount(db, AtimePolicy::default(), true);
    clock.at(2_000);
    assert_eq!(fs.read(ino, 0, 10).unwrap(), b"hello");
    assert_eq!(fs.getattr(ino).unwrap().atime.secs, 500);
    fs.close().unwrap();

    let db = Db::open_on(disk, small_options()).unwrap();
    let (fs, clock) = mount(db, AtimePolicy::default(), false);
    clock.at(3_000);
    fs.read(ino, 0, 10).unwrap();
    let a = fs.getattr(ino).unwrap();
    assert_eq!(
        (a.atime.secs, a.ctime),
        (3_000, ctime),
        "an access is no change"
    );
    fs.close().unwrap();
}

#[test]
fn an_access_time_is_durable_with_the_next_operation_made_durable() {
    let (fs, clock, disk) = fs_with(AtimePolicy::default());
    let ino = file(&fs);
    fs.fsync().unwrap();
    clock.at(1_010);
    fs.read(ino, 0, 10).unwrap();
    // A later change made durable carries the access time written before it.
    fs.mkdir(&Caller::root(), ROOT_INO, b"later", 0o755)
        .unwrap();
    fs.fsync().unwrap();
    for seed in 0..8 {
        let db = Db::open_on(Arc::new(disk.crash(seed)), small_options()).unwrap();
        let (after, _) = mount(db, AtimePolicy::default(), true);
        assert_eq!(
            after.getattr(ino).unwrap().atime.secs,
            1_010,
            "crash {seed}"
        );
        after.close().unwrap();
    }
    drop(fs);
}
