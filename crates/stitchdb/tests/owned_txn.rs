//! Transactions that do not borrow the store (`Db::begin_owned`): kept in a table next to the
//! store's owner, they commit, conflict, nest and scan as borrowed ones do, and after the
//! store is closed every call fails with `Error::Closed` instead of panicking.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;
use stitchdb::{Db, Error, Isolation, MemDisk, Options, TableId, Transaction};

fn options() -> Options {
    Options {
        zone_size: 256 * 1024,
        memtable_size: 32 * 1024,
        txn_memory: 16 * 1024,
        background: false,
        ..Options::default()
    }
}

/// What a file system daemon keeps: the store, and its open transactions by id.
struct Daemon {
    db: Arc<Db>,
    open: HashMap<u64, Transaction<'static>>,
}

impl Daemon {
    fn begin(&mut self, id: u64, isolation: Isolation) {
        let txn = self.db.begin_owned(isolation).unwrap();
        self.open.insert(id, txn);
    }

    fn txn(&mut self, id: u64) -> &mut Transaction<'static> {
        self.open.get_mut(&id).unwrap()
    }

    fn commit(&mut self, id: u64) -> stitchdb::Result<()> {
        self.open.remove(&id).unwrap().commit()
    }
}

fn daemon() -> (Daemon, TableId) {
    let db = Arc::new(Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap());
    let t = db.default_table();
    let open = HashMap::new();
    (Daemon { db, open }, t)
}

#[test]
fn an_owned_transaction_outlives_the_call_that_began_it() {
    let (mut d, t) = daemon();
    d.begin(1, Isolation::Serializable);
    d.txn(1).put(t, b"a", b"1").unwrap();
    {
        // Nested transactions and scans work on an owned transaction as on any.
        let mut nested = d.txn(1).begin_nested();
        nested.put(t, b"b", b"2").unwrap();
        nested.abort();
    }
    let scan = d
        .txn(1)
        .range(t, Bound::Unbounded, Bound::Unbounded)
        .unwrap();
    let pairs: Vec<_> = scan.map(Result::unwrap).collect();
    assert_eq!(pairs, vec![(b"a".to_vec(), b"1".to_vec())]);
    assert_eq!(d.db.get(t, b"a").unwrap(), None);
    d.commit(1).unwrap();
    assert_eq!(d.db.get(t, b"a").unwrap(), Some(b"1".to_vec()));
}

#[test]
fn owned_transactions_conflict_as_borrowed_ones_do() {
    let (mut d, t) = daemon();
    d.begin(1, Isolation::Snapshot);
    d.begin(2, Isolation::Snapshot);
    d.txn(1).put(t, b"k", b"first").unwrap();
    d.txn(2).put(t, b"k", b"second").unwrap();
    d.commit(1).unwrap();
    assert!(matches!(d.commit(2), Err(Error::Conflict { .. })));
    assert_eq!(d.db.get(t, b"k").unwrap(), Some(b"first".to_vec()));
}

#[test]
fn an_owned_transaction_that_spills_commits() {
    let (mut d, t) = daemon();
    d.begin(1, Isolation::Snapshot);
    for i in 0..1000u32 {
        let key = format!("key{i:05}");
        d.txn(1).put(t, key, [7u8; 100]).unwrap();
    }
    d.commit(1).unwrap();
    assert_eq!(d.db.stats().linked_commits, 1);
    assert_eq!(d.db.get(t, b"key00999").unwrap(), Some(vec![7u8; 100]));
}

#[test]
fn after_close_every_call_fails_and_nothing_panics() {
    let (mut d, t) = daemon();
    for (id, isolation) in [
        (1, Isolation::Snapshot),
        (2, Isolation::Serializable),
        (3, Isolation::Locking),
    ] {
        d.begin(id, isolation);
        d.txn(id).put(t, b"k", b"v").unwrap();
    }
    // One that spilled: it holds private runs.
    d.begin(4, Isolation::Snapshot);
    for i in 0..500u32 {
        d.txn(4).put(t, format!("key{i:05}"), [1u8; 100]).unwrap();
    }
    let Daemon { db, mut open } = d;
    // Closing does not wait for the open transactions.
    Arc::into_inner(db).unwrap().close().unwrap();
    for txn in open.values_mut() {
        assert!(matches!(txn.get(t, b"k"), Err(Error::Closed)));
        assert!(matches!(txn.get_for_update(t, b"x"), Err(Error::Closed)));
        assert!(matches!(txn.put(t, b"k", b"w"), Err(Error::Closed)));
        assert!(matches!(txn.delete(t, b"k"), Err(Error::Closed)));
        assert!(matches!(
            txn.delete_range(t, b"a", b"z"),
            Err(Error::Closed)
        ));
        let scan = txn.range(t, Bound::Unbounded, Bound::Unbounded);
        assert!(matches!(scan, Err(Error::Closed)));
        let mut nested = txn.begin_nested();
        assert!(matches!(nested.put(t, b"n", b"v"), Err(Error::Closed)));
        nested.commit();
    }
    let first = open.remove(&1).unwrap();
    assert!(matches!(first.commit(), Err(Error::Closed)));
    let spilled = open.remove(&4).unwrap();
    assert!(matches!(spilled.commit(), Err(Error::Closed)));
    // The rest are dropped (aborted).
    drop(open);
}

#[test]
fn a_store_reopened_after_a_close_with_open_transactions_has_none_of_their_writes() {
    let disk = Arc::new(MemDisk::new(0));
    let db = Db::create_on(disk.clone(), options()).unwrap();
    let t = db.default_table();
    db.put(t, b"kept", b"1").unwrap();
    let mut txn = db.begin_owned(Isolation::Snapshot).unwrap();
    for i in 0..500u32 {
        txn.put(t, format!("key{i:05}"), [1u8; 100]).unwrap();
    }
    db.close().unwrap();
    drop(txn);
    let db = Db::open_on(disk, options()).unwrap();
    let pairs: Vec<_> = db
        .range(t, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(pairs, vec![(b"kept".to_vec(), b"1".to_vec())]);
    db.check().unwrap();
}
