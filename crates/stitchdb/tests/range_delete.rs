//! Range deletes: one tombstone however large the range, seen correctly by snapshots and
//! iterators both ways, dropped by compaction (with the data beneath) once every reader
//! sees it, and part of transactions, nested ones included.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use stitchdb::{Db, Error, Isolation, MemDisk, Options, TableId};

fn options() -> Options {
    Options {
        zone_size: 64 * 1024,
        memtable_size: 16 * 1024,
        background: false,
        ..Options::default()
    }
}

fn k(i: u32) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

fn keys(db: &Db, t: TableId) -> Vec<Vec<u8>> {
    db.range(t, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|kv| kv.unwrap().0)
        .collect()
}

#[test]
fn a_huge_range_costs_one_record_and_reads_see_it_both_ways() {
    let disk = Arc::new(MemDisk::new(0));
    let db = Db::create_on(disk.clone(), options()).unwrap();
    let t = db.default_table();
    for i in 0..20_000 {
        db.put(t, k(i), [7u8; 32]).unwrap();
    }
    db.flush().unwrap();
    let before = db.stats().cache.block_writes;
    db.delete_range(t, k(1_000), k(19_000)).unwrap();
    db.flush().unwrap();
    let written = db.stats().cache.block_writes - before;
    assert!(written < 20, "a range delete wrote {written} blocks");
    assert_eq!(db.get(t, k(999)).unwrap().unwrap(), [7u8; 32]);
    assert_eq!(db.get(t, k(1_000)).unwrap(), None);
    assert_eq!(db.get(t, k(18_999)).unwrap(), None);
    assert!(db.get(t, k(19_000)).unwrap().is_some());
    let want: Vec<_> = (0..1_000).chain(19_000..20_000).map(k).collect();
    assert_eq!(keys(&db, t), want);
    let rev: Vec<_> = db
        .range_rev(t, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|kv| kv.unwrap().0)
        .collect();
    assert_eq!(rev, want.iter().rev().cloned().collect::<Vec<_>>());
    // A key written after the range delete is there.
    db.put(t, k(5_000), b"back").unwrap();
    assert_eq!(db.get(t, k(5_000)).unwrap().unwrap(), b"back");
    db.close().unwrap();
    let db = Db::open_on(disk, options()).unwrap();
    assert_eq!(keys(&db, t).len(), 2_001);
    db.check().unwrap();
}

#[test]
fn readers_before_the_delete_keep_seeing_the_keys_across_compaction() {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap();
    let t = db.default_table();
    for i in 0..2_000 {
        db.put(t, k(i), b"v").unwrap();
    }
    let scan = db.range(t, Bound::Unbounded, Bound::Unbounded).unwrap();
    let mut txn = db.begin(Isolation::Snapshot).unwrap();
    db.delete_range(t, k(0), k(2_000)).unwrap();
    db.compact().unwrap();
    assert_eq!(keys(&db, t).len(), 0);
    assert_eq!(scan.count(), 2_000);
    assert_eq!(txn.get(t, k(10)).unwrap().unwrap(), b"v");
    assert_eq!(
        txn.range(t, Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .count(),
        2_000
    );
}

#[test]
fn compaction_drops_the_tombstone_and_the_data_beneath_it() {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap();
    let t = db.default_table();
    for i in 0..5_000 {
        db.put(t, k(i), [1u8; 100]).unwrap();
    }
    db.compact().unwrap();
    let full = db.stats().zones.live_bytes;
    db.delete_range(t, k(0), k(5_000)).unwrap();
    db.compact().unwrap();
    let stats = db.stats();
    let runs: usize = stats.tables.iter().map(|t| t.runs()).sum();
    assert_eq!(
        runs, 0,
        "the bottom merge left nothing: no entries, no tombstone"
    );
    assert!(
        stats.zones.live_bytes < full / 10,
        "{full} -> {}",
        stats.zones.live_bytes
    );
    assert!(keys(&db, t).is_empty());
}

#[test]
fn range_deletes_in_transactions_and_savepoints() {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap();
    let t = db.default_table();
    for i in 0..10 {
        db.put(t, k(i), b"old").unwrap();
    }
    let mut txn = db.begin(Isolation::Serializable).unwrap();
    txn.put(t, k(3), b"mine").unwrap();
    {
        let mut child = txn.begin_nested();
        child.delete_range(t, k(2), k(6)).unwrap();
        child.put(t, k(4), b"child").unwrap();
        assert_eq!(child.get(t, k(3)).unwrap(), None);
        assert_eq!(child.get(t, k(4)).unwrap().unwrap(), b"child");
        child.abort();
    }
    assert_eq!(txn.get(t, k(3)).unwrap().unwrap(), b"mine");
    assert_eq!(txn.get(t, k(2)).unwrap().unwrap(), b"old");
    txn.delete_range(t, k(5), k(8)).unwrap();
    txn.put(t, k(6), b"after").unwrap();
    let seen: BTreeMap<_, _> = txn
        .range(t, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let want: Vec<u32> = vec![0, 1, 2, 3, 4, 6, 8, 9];
    assert_eq!(
        seen.keys().cloned().collect::<Vec<_>>(),
        want.iter().map(|&i| k(i)).collect::<Vec<_>>()
    );
    txn.commit().unwrap();
    assert_eq!(keys(&db, t), want.iter().map(|&i| k(i)).collect::<Vec<_>>());
    assert_eq!(db.get(t, k(6)).unwrap().unwrap(), b"after");
    assert_eq!(db.get(t, k(3)).unwrap().unwrap(), b"mine");
}

#[test]
fn a_range_delete_conflicts_with_writes_in_its_range() {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap();
    let t = db.default_table();
    // A concurrent write inside the range: the range delete commits second and loses.
    let mut t1 = db.begin(Isolation::Snapshot).unwrap();
    t1.delete_range(t, k(0), k(100)).unwrap();
    db.put(t, k(50), b"x").unwrap();
    assert!(matches!(t1.commit(), Err(Error::Conflict { .. })));
    // A committed range delete conflicts with a later write of a key it covered, and with a
    // serializable reader of such a key.
    let mut t2 = db.begin(Isolation::Snapshot).unwrap();
    let mut t3 = db.begin(Isolation::Serializable).unwrap();
    assert!(t3.get(t, k(50)).unwrap().is_some());
    t3.put(t, b"elsewhere", b"y").unwrap();
    t2.put(t, k(50), b"z").unwrap();
    db.delete_range(t, k(0), k(100)).unwrap();
    assert!(matches!(t2.commit(), Err(Error::Conflict { .. })));
    assert!(matches!(t3.commit(), Err(Error::Conflict { .. })));
    assert_eq!(db.get(t, k(50)).unwrap(), None);
}
