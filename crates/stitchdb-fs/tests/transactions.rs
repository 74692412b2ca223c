//! File system operations inside engine transactions (`Fs::begin`), read-only snapshot trees
//! (`Fs::snapshot_tree`), and the metadata cache and change notices when something other
//! than the mainline writes the file system's tables.
//!
//! STITCHDB_FS_TXN_CRASH_STATES sets how many crash states the crash test verifies
//! (default 150).

#![allow(clippy::unwrap_used)]

mod support;

use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use stitch_io::CrashingDisk;
use stitchdb::{Db, Durability, Isolation, Options, TableId};
use stitchdb_fs::{
    check_fs, Attr, Caller, Changed, FileTree, Fs, FsError, FsOptions, Kv, SetAttr, ROOT_INO,
};
use support::{dump, new_fs, small_options, test_clock, Tree};

fn root() -> Caller {
    Caller::root()
}

fn shared(seed: u64) -> Arc<Fs> {
    Arc::new(new_fs(seed))
}

/// The records of `table`, all of them.
fn records(db: &Db, table: TableId) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.scan_prefix(table, b"")
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

#[test]
fn files_and_records_commit_or_abort_together() {
    let fs = shared(1);
    let users = fs.db().create_table("users").unwrap();
    let r = root();
    for commit in [false, true] {
        let before = dump(&*fs);
        let t = fs.begin(Isolation::Snapshot).unwrap();
        let d = t.mkdir(&r, ROOT_INO, b"d", 0o755).unwrap();
        let f = t.create(&r, d.ino, b"f", 0o644).unwrap();
        t.write(&r, f.ino, 0, b"hello").unwrap();
        t.release(f.ino).unwrap();
        t.rename(&r, d.ino, b"f", ROOT_INO, b"g", 0).unwrap();
        t.records()
            .unwrap()
            .put(users, b"alice", b"1".to_vec())
            .unwrap();
        // The transaction sees its own view; the mainline does not.
        assert_eq!(t.read(f.ino, 0, 10).unwrap(), b"hello");
        assert_eq!(
            fs.lookup(&r, ROOT_INO, b"g").unwrap_err().errno(),
            libc::ENOENT
        );
        let changes = t.changes().unwrap();
        assert_eq!(changes.added, vec![b"/d".to_vec(), b"/g".to_vec()]);
        assert_eq!(changes.data_bytes, 5);
        if commit {
            t.commit(Durability::Sync).unwrap();
            let g = fs.lookup(&r, ROOT_INO, b"g").unwrap();
            assert_eq!(fs.read(g.ino, 0, 10).unwrap(), b"hello");
            assert_eq!(
                records(fs.db(), users),
                vec![(b"alice".to_vec(), b"1".to_vec())]
            );
        } else {
            t.abort();
            assert_eq!(dump(&*fs), before);
            assert!(records(fs.db(), users).is_empty());
        }
    }
    let report = check_fs(fs.db(), fs.tables()).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[test]
fn the_records_api_refuses_the_file_systems_tables() {
    let fs = shared(2);
    let t = fs.begin(Isolation::Snapshot).unwrap();
    let err = t
        .records()
        .unwrap()
        .put(fs.tables().inodes, b"x", vec![])
        .unwrap_err();
    assert_eq!(err.errno(), libc::EPERM);
}

#[test]
fn the_first_committer_wins_and_the_loser_is_told_the_path() {
    let fs = shared(3);
    let r = root();
    let f = fs.create(&r, ROOT_INO, b"file", 0o644).unwrap();
    fs.release(f.ino).unwrap();
    let d = fs.mkdir(&r, ROOT_INO, b"dir", 0o755).unwrap();
    // Two transactions write one file.
    let a = fs.begin(Isolation::Snapshot).unwrap();
    let b = fs.begin(Isolation::Snapshot).unwrap();
    a.write(&r, f.ino, 0, b"a").unwrap();
    b.write(&r, f.ino, 0, b"b").unwrap();
    a.commit(Durability::Sync).unwrap();
    match b.commit(Durability::Sync) {
        Err(FsError::Conflict { path, detail }) => {
            assert_eq!(path, "/file", "{detail}");
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(fs.read(f.ino, 0, 1).unwrap(), b"a");
    // A transaction creating in a directory against the mainline creating there: both write
    // the directory's inode record.
    let t = fs.begin(Isolation::Snapshot).unwrap();
    t.mknod(&r, d.ino, b"x", libc::S_IFREG | 0o644, 0).unwrap();
    fs.mknod(&r, d.ino, b"y", libc::S_IFREG | 0o644, 0).unwrap();
    let e = t.commit(Durability::Sync).unwrap_err();
    assert_eq!(e.errno(), libc::EBUSY);
    let FsError::Conflict { path, .. } = e else {
        panic!("{e}")
    };
    assert!(path == "/dir" || path == "/dir/x", "{path}");
    assert_eq!(
        fs.lookup(&r, d.ino, b"x").unwrap_err().errno(),
        libc::ENOENT
    );
}

/// Each transaction checks that the other's file does not exist and makes its own, in
/// separate directories (so no key is written by both).
fn write_skew(isolation: Isolation) -> (FsResult2, FsResult2) {
    let fs = shared(4);
    let r = root();
    let d1 = fs.mkdir(&r, ROOT_INO, b"d1", 0o755).unwrap();
    let d2 = fs.mkdir(&r, ROOT_INO, b"d2", 0o755).unwrap();
    let a = fs.begin(isolation).unwrap();
    let b = fs.begin(isolation).unwrap();
    assert!(a.lookup(&r, d2.ino, b"y").is_err());
    a.mknod(&r, d1.ino, b"x", libc::S_IFREG | 0o644, 0).unwrap();
    assert!(b.lookup(&r, d1.ino, b"x").is_err());
    b.mknod(&r, d2.ino, b"y", libc::S_IFREG | 0o644, 0).unwrap();
    (
        a.commit(Durability::Sync).map(|_| ()),
        b.commit(Durability::Sync).map(|_| ()),
    )
}

type FsResult2 = Result<(), FsError>;

#[test]
fn serializable_prevents_write_skew_on_files_and_snapshot_isolation_allows_it() {
    let (a, b) = write_skew(Isolation::Snapshot);
    assert!(a.is_ok() && b.is_ok(), "{a:?} {b:?}");
    let (a, b) = write_skew(Isolation::Serializable);
    assert!(a.is_ok());
    match b {
        Err(FsError::Conflict { path, .. }) => assert_eq!(path, "/d1/x"),
        other => panic!("expected a conflict, got {other:?}"),
    }
}

#[test]
fn a_snapshot_tree_reads_the_old_tree_and_refuses_writes() {
    let fs = shared(5);
    let r = root();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut files = vec![];
    for i in 0..40 {
        let f = fs
            .create(&r, ROOT_INO, format!("f{i}").as_bytes(), 0o644)
            .unwrap();
        let data: Vec<u8> = (0..rng.gen_range(0..20_000)).map(|_| rng.gen()).collect();
        fs.write(&r, f.ino, 0, &data).unwrap();
        fs.release(f.ino).unwrap();
        files.push(f.ino);
    }
    fs.mkdir(&r, ROOT_INO, b"dir", 0o700).unwrap();
    let old = dump(&*fs);
    fs.db().snapshot("before").unwrap();
    for (i, ino) in files.iter().enumerate() {
        match i % 3 {
            0 => fs.unlink(&r, ROOT_INO, format!("f{i}").as_bytes()).unwrap(),
            1 => {
                fs.write(&r, *ino, 100, b"changed").map(|_| ()).unwrap();
            }
            _ => fs
                .rename(
                    &r,
                    ROOT_INO,
                    format!("f{i}").as_bytes(),
                    ROOT_INO,
                    b"moved",
                    0,
                )
                .unwrap(),
        }
    }
    fs.rmdir(&r, ROOT_INO, b"dir").unwrap();
    fs.db().flush().unwrap();
    let snap = fs.snapshot_tree("before").unwrap();
    assert_eq!(dump(&snap), old);
    assert_ne!(dump(&*fs), old);
    let erofs = |e: FsError| assert_eq!(e.errno(), libc::EROFS);
    erofs(snap.mkdir(&r, ROOT_INO, b"x", 0o755).unwrap_err());
    erofs(snap.unlink(&r, ROOT_INO, b"f1").unwrap_err());
    erofs(snap.write(&r, files[1], 0, b"x").unwrap_err());
    erofs(snap.setattr(&r, files[1], &SetAttr::default()).unwrap_err());
    // Opening for reading works, through the same surface.
    let tree: &dyn FileTree = &snap;
    tree.open(&r, files[0], libc::O_RDONLY).unwrap();
    tree.release(files[0]).unwrap();
    assert_eq!(
        fs.snapshot_tree("nope").err().map(|e| e.errno()),
        Some(libc::ENOENT)
    );
}

#[test]
fn the_cache_follows_writes_made_around_the_mainline_and_they_are_told() {
    let fs = shared(6);
    let r = root();
    let told = Arc::new(Mutex::new(Vec::<Changed>::new()));
    let sink = told.clone();
    fs.on_outside_change(Box::new(move |c| sink.lock().extend_from_slice(c)));
    let f = fs.create(&r, ROOT_INO, b"f", 0o644).unwrap();
    fs.release(f.ino).unwrap();
    // Cached now (lookup and getattr read the name and the inode record).
    assert_eq!(fs.getattr(f.ino).unwrap().perm, 0o644);
    assert!(
        told.lock().is_empty(),
        "the mainline's own operations are not told"
    );
    // An inode record written through the plain API.
    let t = fs.tables();
    let key = f.ino.to_be_bytes();
    let mut a: Attr = fs.getattr(f.ino).unwrap();
    a.perm = 0o600;
    let encoded = {
        // Written by a transaction of the file system (the encoding is its own), then
        // copied through `db.put`.
        let tx = fs.begin(Isolation::Snapshot).unwrap();
        tx.setattr(
            &r,
            f.ino,
            &SetAttr {
                mode: Some(0o600),
                ..SetAttr::default()
            },
        )
        .unwrap();
        let v = tx.records().unwrap().get(t.inodes, &key).unwrap().unwrap();
        tx.abort();
        v
    };
    fs.db().put(t.inodes, key, &encoded).unwrap();
    assert_eq!(fs.getattr(f.ino).unwrap().perm, a.perm);
    assert!(told.lock().contains(&Changed::Inode(f.ino)));
    // A name made by a transaction.
    told.lock().clear();
    let tx = fs.begin(Isolation::Snapshot).unwrap();
    assert_eq!(
        fs.lookup(&r, ROOT_INO, b"new").unwrap_err().errno(),
        libc::ENOENT
    );
    tx.link(&r, f.ino, ROOT_INO, b"new").unwrap();
    tx.commit(Durability::Sync).unwrap();
    assert_eq!(fs.lookup(&r, ROOT_INO, b"new").unwrap().ino, f.ino);
    assert_eq!(fs.getattr(f.ino).unwrap().nlink, 2);
    let told = told.lock();
    assert!(told.contains(&Changed::Name(ROOT_INO, b"new".to_vec())));
    assert!(told.contains(&Changed::Inode(f.ino)));
}

#[test]
fn a_transaction_that_spills_keeps_the_cache_right() {
    let disk = Arc::new(stitchdb::SimDisk::new(stitchdb::SimConfig {
        seed: 7,
        len: 0,
        capacity: None,
    }));
    let opts = Options {
        txn_memory: 64 << 10,
        ..small_options()
    };
    let db = Db::create_on(disk, opts).unwrap();
    let fs = Arc::new(
        Fs::mount(
            db,
            FsOptions {
                clock: test_clock(),
                ..FsOptions::default()
            },
        )
        .unwrap(),
    );
    let r = root();
    let told = Arc::new(Mutex::new(Vec::<Changed>::new()));
    let sink = told.clone();
    fs.on_outside_change(Box::new(move |c| sink.lock().extend_from_slice(c)));
    let f = fs.create(&r, ROOT_INO, b"f", 0o644).unwrap();
    fs.release(f.ino).unwrap();
    assert_eq!(fs.getattr(f.ino).unwrap().size, 0);
    let t = fs.begin(Isolation::Snapshot).unwrap();
    for i in 0..64u64 {
        t.write(&r, f.ino, i * 4096, &[i as u8; 4096]).unwrap();
    }
    t.commit(Durability::Sync).unwrap();
    assert_eq!(fs.getattr(f.ino).unwrap().size, 64 * 4096);
    assert_eq!(fs.read(f.ino, 63 * 4096, 1).unwrap(), [63]);
    assert!(!told.lock().is_empty());
}

/// Random operations on a tree, returning what each answered, with times left out (a
/// transaction writes no access times).
fn random_ops(tree: &dyn FileTree, seed: u64, steps: usize) -> Vec<String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let r = root();
    let mut out = vec![];
    let mut open: Vec<u64> = vec![];
    let strip = |a: Attr| (a.ino, a.kind, a.perm, a.nlink, a.size, a.parent);
    for _ in 0..steps {
        let dirs = [ROOT_INO, 2, 3, 5, 8];
        let dir = dirs[rng.gen_range(0..dirs.len())];
        let name = format!("n{}", rng.gen_range(0..8)).into_bytes();
        let ino = rng.gen_range(2..30u64);
        let res = match rng.gen_range(0..13) {
            0 => format!("{:?}", tree.mkdir(&r, dir, &name, 0o755).map(strip)),
            1 => {
                let a = tree.create(&r, dir, &name, 0o644);
                if let Ok(a) = &a {
                    open.push(a.ino);
                }
                format!("{:?}", a.map(strip))
            }
            2 => format!("{:?}", tree.unlink(&r, dir, &name)),
            3 => format!("{:?}", tree.rmdir(&r, dir, &name)),
            4 => {
                let to = dirs[rng.gen_range(0..dirs.len())];
                let new = format!("n{}", rng.gen_range(0..8)).into_bytes();
                format!("{:?}", tree.rename(&r, dir, &name, to, &new, 0))
            }
            5 => {
                let len = rng.gen_range(1..10_000);
                let data = vec![rng.gen::<u8>(); len];
                format!("{:?}", tree.write(&r, ino, rng.gen_range(0..9000), &data))
            }
            6 => format!("{:?}", tree.read(ino, rng.gen_range(0..9000), 5000)),
            7 => format!("{:?}", tree.link(&r, ino, dir, &name).map(strip)),
            8 => format!(
                "{:?}",
                tree.setattr(
                    &r,
                    ino,
                    &SetAttr {
                        size: Some(rng.gen_range(0..12_000)),
                        ..SetAttr::default()
                    }
                )
                .map(strip)
            ),
            9 => format!("{:?}", tree.lookup(&r, dir, &name).map(strip)),
            10 => format!(
                "{:?}",
                tree.readdir(dir, 0, 100)
                    .map(|es| es.into_iter().map(|e| (e.ino, e.name)).collect::<Vec<_>>())
            ),
            11 => format!("{:?}", tree.setxattr(&r, ino, b"user.k", &name, 0)),
            _ => match open.pop() {
                Some(i) => format!("{:?}", tree.release(i)),
                None => format!("{:?}", tree.symlink(&r, dir, &name, b"target").map(strip)),
            },
        };
        out.push(res);
    }
    for i in open {
        tree.release(i).unwrap();
    }
    out
}

#[test]
fn operations_in_a_transaction_answer_as_on_the_mainline() {
    for seed in 0..4 {
        let main = shared(100 + seed);
        let other = shared(200 + seed);
        let want = random_ops(&*main, seed, 400);
        let t = other.begin(Isolation::Serializable).unwrap();
        let got = random_ops(&t, seed, 400);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "seed {seed} step {i}");
        }
        let in_txn = dump(&t);
        assert_eq!(in_txn, dump(&*main), "seed {seed}: the transaction's view");
        t.commit(Durability::Sync).unwrap();
        assert_eq!(dump(&*other), dump(&*main), "seed {seed}: committed");
        let report = check_fs(other.db(), other.tables()).unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
    }
}

/// The file system and the records a crash test's store holds.
type State = (Tree, Vec<(Vec<u8>, Vec<u8>)>);

fn fs_options() -> FsOptions {
    FsOptions {
        clock: test_clock(),
        ..FsOptions::default()
    }
}

/// Builds a tree and records, then one transaction changing both; returns the states
/// before and after it and the crash images taken meanwhile.
fn crash_workload(seed: u64) -> (State, State, Vec<stitch_io::CrashImage>) {
    let disk = CrashingDisk::new(seed);
    let opts = Options {
        // Every other seed's transaction spills its writes into runs of its own.
        txn_memory: if seed % 2 == 0 { 32 << 10 } else { 64 << 20 },
        ..small_options()
    };
    let db = Db::create_on(disk.clone(), opts).unwrap();
    let fs = Arc::new(Fs::mount(db, fs_options()).unwrap());
    let users = fs.db().create_table("users").unwrap();
    let r = root();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let d = fs.mkdir(&r, ROOT_INO, b"d", 0o755).unwrap();
    for i in 0..8 {
        let f = fs
            .create(&r, d.ino, format!("f{i}").as_bytes(), 0o644)
            .unwrap();
        fs.write(&r, f.ino, 0, &vec![i as u8; rng.gen_range(1..20_000)])
            .unwrap();
        fs.release(f.ino).unwrap();
        fs.db()
            .put(users, format!("u{i}"), format!("v{i}"))
            .unwrap();
    }
    fs.fsync().unwrap();
    let before = (dump(&*fs), records(fs.db(), users));
    *disk.probability.lock() = 0.05;
    disk.issued.store(1, Ordering::SeqCst);
    let t = fs.begin(Isolation::Snapshot).unwrap();
    for i in 0..rng.gen_range(2..10) {
        let name = format!("new{i}");
        let f = t.create(&r, ROOT_INO, name.as_bytes(), 0o600).unwrap();
        let len = rng.gen_range(1..30_000);
        t.write(&r, f.ino, 0, &vec![0xa5; len]).unwrap();
        t.release(f.ino).unwrap();
        t.records()
            .unwrap()
            .put(users, name.as_bytes(), b"x".to_vec())
            .unwrap();
    }
    t.rename(&r, d.ino, b"f0", ROOT_INO, b"moved", 0).unwrap();
    t.unlink(&r, d.ino, b"f1").unwrap();
    t.write(&r, fs.lookup(&r, d.ino, b"f2").unwrap().ino, 5, b"inside")
        .unwrap();
    let mut recs = t.records().unwrap();
    recs.delete(users, b"u3").unwrap();
    recs.put(users, b"u4", b"changed".to_vec()).unwrap();
    drop(recs);
    let after = (dump(&t), {
        let mut recs = t.records().unwrap();
        recs.scan(users, b"", &[0xff], usize::MAX).unwrap()
    });
    t.commit(Durability::Sync).unwrap();
    disk.acked.store(1, Ordering::SeqCst);
    assert_eq!((dump(&*fs), records(fs.db(), users)), after);
    // Images after the commit too (flushes and merges of what it wrote).
    fs.db().flush().unwrap();
    drop(fs);
    let images = std::mem::take(&mut *disk.images.lock());
    (before, after, images)
}

#[test]
fn a_crash_keeps_a_transactions_files_and_records_together() {
    let target: usize = std::env::var("STITCHDB_FS_TXN_CRASH_STATES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(150);
    let (mut verified, mut seed, mut saw) = (0usize, 0u64, [0usize; 2]);
    while verified < target {
        seed += 1;
        let (before, after, images) = crash_workload(seed);
        for (i, (image, acked, _)) in images.into_iter().enumerate() {
            let what = format!("seed {seed} image {i} (acked {acked})");
            let db = Db::open_on(Arc::new(image), small_options())
                .unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
            let fs = Fs::mount(db, fs_options()).unwrap_or_else(|e| panic!("{what}: mount: {e}"));
            let users = fs.db().table("users").unwrap();
            let got = (dump(&fs), records(fs.db(), users));
            if got == after {
                saw[1] += 1;
            } else if got == before && acked == 0 {
                saw[0] += 1;
            } else {
                panic!("{what}: neither the state before the transaction nor after it");
            }
            let report = check_fs(fs.db(), fs.tables()).unwrap();
            assert!(report.problems.is_empty(), "{what}: {:?}", report.problems);
            fs.close().unwrap();
            verified += 1;
        }
    }
    eprintln!(
        "verified {verified} crash states from {seed} workloads: {} before, {} after",
        saw[0], saw[1]
    );
    assert!(saw[0] > 0 && saw[1] > 0, "crashes landed on both sides");
}
