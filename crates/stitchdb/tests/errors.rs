//! Bad input and failures: each gets a clear error, nothing panics, committed data is kept,
//! and after a failed write the store is read-only and says why (a write refused for want
//! of space excepted: the store stays writable).

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use stitchdb::{
    max_large_value_len, max_value_len, Db, Disk, Durability, Error, Isolation, MemDisk, Options,
    SimConfig, SimDisk, Stitching, TableId, WriteBatch, MAX_KEY_LEN,
};

fn options() -> Options {
    Options {
        zone_size: 64 * 1024,
        memtable_size: 8 * 1024,
        background: false,
        ..Options::default()
    }
}

fn sim(seed: u64) -> Arc<SimDisk> {
    Arc::new(SimDisk::new(SimConfig {
        seed,
        len: 0,
        capacity: None,
    }))
}

fn fill(db: &Db, from: u32, to: u32) {
    let t = db.default_table();
    for i in from..to {
        db.put(t, format!("key{i:05}"), format!("value{i}"))
            .unwrap();
    }
}

fn count(db: &Db) -> usize {
    db.scan_prefix(db.default_table(), b"").unwrap().count()
}

#[test]
fn oversized_keys_and_values_are_refused_and_the_store_goes_on() {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap();
    let t = db.default_table();
    let err = db.put(t, vec![b'k'; MAX_KEY_LEN + 1], b"v").unwrap_err();
    assert!(matches!(err, Error::TooLarge { what: "key", .. }), "{err}");
    // A value longer than a record holds is a large value, up to its own limit.
    let limit = max_large_value_len(64 * 1024) as usize;
    assert!(limit > max_value_len(64 * 1024));
    let err = db.put(t, b"k", vec![0u8; limit + 1]).unwrap_err();
    assert!(err.to_string().contains("value of"), "{err}");
    assert_eq!(db.get(t, b"k").unwrap(), None);
    db.put(t, b"k", vec![1u8; limit]).unwrap();
    assert_eq!(db.get(t, b"k").unwrap().map(|v| v.len()), Some(limit));
    assert_eq!(db.failure(), None);
}

#[test]
fn unknown_tables_and_bad_names_are_errors() {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap();
    assert!(matches!(db.table("nope"), Err(Error::NoSuchTable(_))));
    assert!(matches!(db.create_table(""), Err(Error::BadTableName(..))));
    db.create_table("a").unwrap();
    assert!(matches!(db.create_table("a"), Err(Error::TableExists(_))));
    let mut b = WriteBatch::new();
    b.put(stitchdb::TableId(77), b"k".to_vec(), b"v".to_vec());
    assert!(matches!(
        db.write(&b, Durability::Sync),
        Err(Error::NoSuchTable(_))
    ));
}

#[test]
fn a_failed_write_turns_the_store_read_only_and_keeps_committed_data() {
    for nth in 1..30 {
        let disk = sim(nth);
        let db = Db::create_on(disk.clone(), options()).unwrap();
        fill(&db, 0, 50);
        db.sync().unwrap();
        disk.fail_nth_write(nth);
        let t = db.default_table();
        let mut failed = None;
        for i in 50..400u32 {
            if let Err(e) = db.put(t, format!("key{i:05}"), format!("value{i}")) {
                failed = Some((i, e));
                break;
            }
        }
        let (at, err) = failed.expect("the injected failure surfaced");
        assert!(err.to_string().contains("I/O error"), "{err}");
        let why = db.failure().expect("read-only after a failed write");
        assert!(why.contains("I/O error"), "{why}");
        assert!(matches!(db.put(t, b"more", b"x"), Err(Error::ReadOnly(_))));
        // Reads still work and see everything before the failure.
        for i in (0..at).step_by(7) {
            assert_eq!(
                db.get(t, format!("key{i:05}")).unwrap(),
                Some(format!("value{i}").into_bytes())
            );
        }
        drop(db);
        // After a restart the store holds at least every acknowledged (Sync) write.
        let db = Db::open_on(Arc::new(disk.crash(nth)), options()).unwrap();
        assert!(
            count(&db) >= at as usize,
            "nth {nth}: {} < {at}",
            count(&db)
        );
        db.check().unwrap();
    }
}

/// A transaction's spill (its private runs written out) that fails to write turns the store
/// read-only, as any failed write does, and keeps what was committed.
#[test]
fn a_failed_spill_turns_the_store_read_only() {
    for nth in 1..12 {
        let disk = sim(nth);
        let opts = Options {
            txn_memory: 8 * 1024,
            ..options()
        };
        let db = Db::create_on(disk.clone(), opts.clone()).unwrap();
        fill(&db, 0, 50);
        db.sync().unwrap();
        let t = db.default_table();
        let mut txn = db.begin(Isolation::Snapshot).unwrap();
        disk.fail_nth_write(nth);
        let err = (0..200u32)
            .find_map(|i| txn.put(t, format!("big{i:04}"), vec![5u8; 900]).err())
            .expect("the injected failure surfaced");
        assert!(err.to_string().contains("I/O error"), "nth {nth}: {err}");
        let why = db.failure().expect("read-only after a failed spill");
        assert!(why.contains("I/O error"), "{why}");
        drop(txn);
        assert!(matches!(db.put(t, b"more", b"x"), Err(Error::ReadOnly(_))));
        assert_eq!(count(&db), 50);
        drop(db);
        let db = Db::open_on(Arc::new(disk.crash(nth)), opts).unwrap();
        assert_eq!(
            count(&db),
            50,
            "nth {nth}: the synced writes, and nothing private"
        );
        db.check().unwrap();
    }
}

#[test]
fn a_failed_sync_turns_the_store_read_only() {
    let disk = sim(3);
    let db = Db::create_on(disk.clone(), options()).unwrap();
    fill(&db, 0, 20);
    disk.fail_nth_sync(1);
    let err = db.put(db.default_table(), b"x", b"y").unwrap_err();
    assert!(err.to_string().contains("sync"), "{err}");
    assert!(db.failure().is_some());
    // Closing a failed store does not claim success: the failure is its error.
    match db.close() {
        Err(Error::ReadOnly(why)) => assert!(why.contains("sync"), "{why}"),
        other => panic!("close of a failed store returned {other:?}"),
    }
    let db = Db::open_on(disk, options()).unwrap();
    assert!(count(&db) >= 20);
}

/// How a test writes one key: plainly, or in a transaction of its own.
/// A transaction of its own for one put.
fn in_txn(db: &Db, iso: Isolation, t: TableId, key: String, value: Vec<u8>) -> Result<(), Error> {
    let mut txn = db.begin(iso)?;
    txn.put(t, key, value)?;
    txn.commit()
}

#[test]
fn a_full_store_refuses_writes_and_takes_them_again_after_deletes() {
    full_store_takes_writes_again_after_deletes(|db, t, key, value| db.put(t, key, value));
}

/// The same through transactions: a commit refused for want of space reclaims and tries
/// again, as a plain write does.
#[test]
fn a_full_store_refuses_transactions_and_takes_them_again_after_deletes() {
    for iso in [
        Isolation::Snapshot,
        Isolation::Serializable,
        Isolation::Locking,
    ] {
        full_store_takes_writes_again_after_deletes(|db, t, key, value| {
            in_txn(db, iso, t, key, value)
        });
    }
}

/// Fills a store with `put` until refused, deletes three quarters, and puts half as many
/// again with no remount.
fn full_store_takes_writes_again_after_deletes(
    put: impl Fn(&Db, TableId, String, Vec<u8>) -> Result<(), Error>,
) {
    let disk = sim(5);
    disk.set_capacity(Some(64 * 64 * 1024));
    // A reclaim's merge needs room for what it copies: zones this small (64 KiB, the
    // default threshold's span) would have it copy everything, so blocks are stitched
    // however short their span, as 8 MiB zones would stitch these.
    let opts = Options {
        stitching: Stitching::Threshold(0),
        ..options()
    };
    let db = Db::create_on(disk.clone(), opts.clone()).unwrap();
    let t = db.default_table();
    let key = |i: u32| format!("key{i:06}");
    let mut written = 0u32;
    let err = loop {
        match put(&db, t, key(written), vec![7u8; 900]) {
            Ok(()) => written += 1,
            Err(e) => break e,
        }
        assert!(written < 100_000, "the disk never filled");
    };
    assert!(err.is_no_space(), "{err}");
    assert!(err.to_string().contains("no space"), "{err}");
    // Refused, not failed: the store stays writable, and a write that still does not fit
    // is refused again (with nothing new to drop, at once).
    assert_eq!(db.failure(), None);
    assert!(put(&db, t, key(written), vec![7u8; 900])
        .unwrap_err()
        .is_no_space());
    assert_eq!(db.failure(), None);
    assert_eq!(count(&db), written as usize);
    // Deleting needs no remount, no flush and no compaction by hand: the next refused
    // write reclaims the deleted values' room and goes in.
    db.delete_range(t, key(0).as_bytes(), key(written / 4 * 3).as_bytes())
        .unwrap();
    let mut more = 0u32;
    while more < written / 2 {
        if let Err(e) = put(&db, t, format!("new{more:06}"), vec![9u8; 900]) {
            panic!("{more} of {written}: {e} {:?}", db.stats());
        }
        more += 1;
    }
    assert_eq!(db.failure(), None);
    let expected = (written - written / 4 * 3 + more) as usize;
    assert_eq!(count(&db), expected);
    db.close().unwrap();
    let db = Db::open_on(disk, opts).unwrap();
    assert_eq!(count(&db), expected, "every acknowledged write survived");
    db.check().unwrap();
}

#[test]
fn reads_fail_cleanly_on_a_failed_read() {
    let disk = sim(9);
    let db = Db::create_on(disk.clone(), options()).unwrap();
    fill(&db, 0, 500);
    db.flush().unwrap();
    drop(db);
    let db = Db::open_on(
        disk.clone(),
        Options {
            cache_blocks: 0,
            ..options()
        },
    )
    .unwrap();
    disk.fail_nth_read(1);
    let t = db.default_table();
    let r = db.get(t, b"key00123");
    assert!(r.is_err(), "the injected read error surfaced");
    assert_eq!(
        db.get(t, b"key00123").unwrap(),
        Some(b"value123".to_vec()),
        "a later read works"
    );
}

#[test]
fn damaged_blocks_are_reported_by_reads_and_check() {
    let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    let db = Db::create_on(disk.clone(), options()).unwrap();
    fill(&db, 0, 2000);
    db.flush().unwrap();
    let extent_zones: Vec<u64> = db
        .stats()
        .zones
        .zone_live
        .iter()
        .map(|&(z, _)| z.into())
        .collect();
    db.close().unwrap();
    // Flip a byte in every 4 KiB block of the zones holding extents, past their first block:
    // some are run blocks, whatever else they hit, opening or checking must say what and where.
    let mut damaged = 0;
    for zone in extent_zones {
        for off in (zone * 64 * 1024 + 5000..(zone + 1) * 64 * 1024).step_by(4096) {
            let mut b = [0u8];
            disk.read_at(off, &mut b).unwrap();
            disk.write_at(off, &[b[0] ^ 0xff]).unwrap();
            damaged += 1;
        }
    }
    assert!(damaged > 10);
    let err = match Db::open_read_only_on(disk, options()) {
        Err(e) => e,
        Ok(db) => db.check().unwrap_err(),
    };
    let text = err.to_string();
    assert!(text.starts_with("corrupt "), "{text}");
    assert!(text.contains("zone"), "names the place: {text}");
}

#[test]
fn a_damaged_manifest_fails_open_with_its_place_and_garbage_is_not_a_store() {
    let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    Db::create_on(disk.clone(), options())
        .unwrap()
        .close()
        .unwrap();
    // Damage every zone's first bytes after zone 0: the manifest is in one of them.
    for zone in 1..disk.len() / (64 * 1024) {
        disk.write_at(zone * 64 * 1024 + 20, &[0xAB; 8]).unwrap();
    }
    let err = Db::open_on(disk, options()).err().expect("open must fail");
    assert!(
        err.to_string().contains("manifest") || err.to_string().contains("log"),
        "{err}"
    );

    let garbage: Arc<dyn Disk> = Arc::new(MemDisk::new(1 << 20));
    let err = Db::open_on(garbage, options()).err().unwrap();
    assert!(err.to_string().contains("not a StitchDB store"), "{err}");
}

#[test]
fn a_second_writer_gets_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.store");
    let db = Db::create(&path, Options::default()).unwrap();
    let err = Db::open(&path, Options::default()).err().unwrap();
    assert!(err.to_string().contains("locked"), "{err}");
    let err = Db::open_read_only(&path, Options::default()).err().unwrap();
    assert!(err.to_string().contains("locked"), "{err}");
    db.close().unwrap();
    Db::open(&path, Options::default()).unwrap();
    assert!(
        Db::create(&path, Options::default()).is_err(),
        "create refuses an existing store"
    );
}

#[test]
fn a_second_opener_asked_to_wait_gets_the_store_once_it_is_let_go() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.store");
    let db = Db::create(&path, Options::default()).unwrap();
    let t = db.default_table();
    db.put(t, b"k", b"v").unwrap();
    let waiting = Options {
        lock_wait_ms: 60_000,
        ..Options::default()
    };
    // Held throughout: a short wait still ends in the error.
    let short = Options {
        lock_wait_ms: 50,
        ..Options::default()
    };
    let err = Db::open_read_only(&path, short).err().unwrap();
    assert!(err.to_string().contains("locked"), "{err}");
    // Let go while the second opener waits (as a mount's daemon closes its store after
    // `umount` returns): the opener gets it, with what the first one wrote.
    let second = std::thread::scope(|s| {
        let opener = s.spawn(|| Db::open(&path, waiting.clone()));
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(
            !opener.is_finished(),
            "the second opener waits for the lock"
        );
        db.close().unwrap();
        opener.join().unwrap()
    })
    .unwrap();
    assert_eq!(second.get(t, b"k").unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn a_failed_create_leaves_no_file_and_never_removes_an_existing_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.store");
    let bad = Options {
        zone_size: 1000,
        ..Options::default()
    };
    let err = Db::create(&path, bad).err().unwrap();
    assert!(matches!(err, Error::Config(_)), "{err}");
    assert!(!path.exists(), "a refused create left a file");

    std::fs::write(&path, b"someone's data").unwrap();
    let err = Db::create(&path, Options::default()).err().unwrap();
    let io = err
        .io_error()
        .unwrap_or_else(|| panic!("not a disk error: {err}"));
    assert_eq!(io.op, stitchdb::IoOp::Open, "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), b"someone's data");

    let missing = dir.path().join("no-such-dir").join("a.store");
    let err = Db::open(&missing, Options::default()).err().unwrap();
    let kind = err.io_error().map(|io| io.kind.clone());
    assert_eq!(kind, Some(stitchdb::IoErrorKind::NotFound), "{err}");
}

#[test]
fn use_after_close_is_an_error() {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap();
    let t = db.default_table();
    db.put(t, b"a", b"b").unwrap();
    db.close().unwrap();
    // `close` consumes the handle; a read-only handle refuses writes.
    let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    Db::create_on(disk.clone(), options())
        .unwrap()
        .close()
        .unwrap();
    let ro = Db::open_read_only_on(disk, options()).unwrap();
    assert!(matches!(
        ro.put(ro.default_table(), b"a", b"b"),
        Err(Error::ReadOnly(_))
    ));
}

#[test]
fn a_store_that_filled_its_disk_reopens_and_frees_space() {
    let disk = sim(6);
    disk.set_capacity(Some(24 * 64 * 1024));
    let db = Db::create_on(disk.clone(), options()).unwrap();
    let t = db.default_table();
    let key = |i: u32| format!("key{i:06}");
    let mut written = 0u32;
    let err = loop {
        match db.put(t, key(written), vec![7u8; 900]) {
            Ok(()) => written += 1,
            Err(e) => break e,
        }
        assert!(written < 100_000, "the disk never filled");
    };
    assert!(err.is_no_space(), "{err}");
    drop(db);
    // The disk is still full: opening takes the zones the store held back.
    let db = Db::open_read_only_on(disk.clone(), options()).unwrap();
    assert_eq!(count(&db), written as usize);
    drop(db);
    let db = Db::open_on(disk.clone(), options()).unwrap();
    assert_eq!(
        count(&db),
        written as usize,
        "every acknowledged write survived"
    );
    // Deleting works, and once merged away the deleted values give their room back.
    let t = db.default_table();
    db.delete_range(t, key(0).as_bytes(), key(written / 4 * 3).as_bytes())
        .unwrap();
    db.flush().unwrap();
    db.compact().unwrap();
    let mut more = 0u32;
    while more < written / 4 {
        if let Err(e) = db.put(t, format!("new{more:06}"), vec![9u8; 900]) {
            panic!("{more} of {written}: {e} {:?}", db.stats());
        }
        more += 1;
    }
    db.close().unwrap();
    // And the store still reopens, holding what it should.
    let db = Db::open_on(disk, options()).unwrap();
    assert_eq!(count(&db), (written - written / 4 * 3 + more) as usize);
    db.check().unwrap();
}

/// A transaction larger than its memory (it spills private runs and commits by linking them)
/// on a store that filled while it was open: its commit is refused with a no-space error,
/// the store staying writable; once deletes free room, a spilling transaction reclaims it and
/// commits.
#[test]
fn a_full_store_refuses_a_spilled_transaction_and_takes_it_after_deletes() {
    let disk = sim(6);
    disk.set_capacity(Some(64 * 64 * 1024));
    let opts = Options {
        stitching: Stitching::Threshold(0),
        txn_memory: 16 * 1024,
        ..options()
    };
    let db = Db::create_on(disk.clone(), opts.clone()).unwrap();
    let t = db.default_table();
    // 90 KB of writes against 16 KiB of memory: the private runs spill, and the commit
    // links them.
    fn spilled<'a>(db: &'a Db, t: TableId, tag: &str) -> Result<stitchdb::Transaction<'a>, Error> {
        let mut txn = db.begin(Isolation::Snapshot)?;
        for i in 0..100u32 {
            txn.put(t, format!("{tag}{i:04}"), vec![5u8; 900])?;
        }
        Ok(txn)
    }
    let early = spilled(&db, t, "early").unwrap();
    let key = |i: u32| format!("key{i:06}");
    let mut written = 0u32;
    loop {
        match db.put(t, key(written), vec![7u8; 900]) {
            Ok(()) => written += 1,
            Err(e) => {
                assert!(e.is_no_space(), "{e}");
                break;
            }
        }
    }
    let refused = early.commit().unwrap_err();
    assert!(refused.is_no_space(), "{refused}");
    assert_eq!(
        db.failure(),
        None,
        "a refused transaction turned the store read-only"
    );
    assert_eq!(count(&db), written as usize);
    db.delete_range(t, key(0).as_bytes(), key(written / 4 * 3).as_bytes())
        .unwrap();
    // Its spills reclaim the deleted keys' room.
    spilled(&db, t, "late").unwrap().commit().unwrap();
    assert_eq!(db.failure(), None);
    let expected = (written - written / 4 * 3 + 100) as usize;
    assert_eq!(count(&db), expected);
    db.close().unwrap();
    let db = Db::open_on(disk, opts).unwrap();
    assert_eq!(count(&db), expected, "every acknowledged write survived");
    db.check().unwrap();
}
