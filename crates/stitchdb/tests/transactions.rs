//! Transactions beyond the anomaly schedules: nested transactions, many tables, reopen,
//! conflicts reported clearly, and a concurrent bank whose totals must hold.

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use stitchdb::{Db, Durability, Error, Isolation, MemDisk, Options, TableId};

fn options() -> Options {
    Options {
        zone_size: 64 * 1024,
        memtable_size: 16 * 1024,
        background: false,
        ..Options::default()
    }
}

fn all(txn: &mut stitchdb::Transaction, t: TableId) -> Vec<(Vec<u8>, Vec<u8>)> {
    txn.range(t, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn a_childs_abort_undoes_only_the_child_and_its_commit_joins_the_parent() {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap();
    let t = db.default_table();
    db.put(t, "a", "0").unwrap();
    let mut txn = db.begin(Isolation::Serializable).unwrap();
    txn.put(t, "a", "1").unwrap();
    {
        let mut child = txn.begin_nested();
        child.put(t, "a", "2").unwrap();
        child.put(t, "b", "2").unwrap();
        assert_eq!(child.get(t, "a").unwrap().unwrap(), b"2");
        {
            let mut grandchild = child.begin_nested();
            grandchild.delete(t, "a").unwrap();
            assert_eq!(grandchild.get(t, "a").unwrap(), None);
            grandchild.commit();
        }
        assert_eq!(child.get(t, "a").unwrap(), None);
        child.abort();
    }
    // Only the parent's write is left.
    assert_eq!(txn.get(t, "a").unwrap().unwrap(), b"1");
    assert_eq!(txn.get(t, "b").unwrap(), None);
    {
        let mut child = txn.begin_nested();
        child.put(t, "c", "3").unwrap();
        child.commit();
    }
    {
        // Dropped without a verdict: aborted.
        let mut child = txn.begin_nested();
        child.put(t, "d", "4").unwrap();
    }
    assert_eq!(
        all(&mut txn, t),
        vec![
            (b"a".to_vec(), b"1".to_vec()),
            (b"c".to_vec(), b"3".to_vec())
        ]
    );
    // Nothing is visible outside before commit.
    assert_eq!(db.get(t, "a").unwrap().unwrap(), b"0");
    txn.commit().unwrap();
    assert_eq!(db.get(t, "a").unwrap().unwrap(), b"1");
    assert_eq!(db.get(t, "c").unwrap().unwrap(), b"3");
    assert_eq!(db.get(t, "b").unwrap(), None);
    assert_eq!(db.get(t, "d").unwrap(), None);
}

#[test]
fn a_transaction_spans_tables_and_survives_reopen_whole() {
    let disk = Arc::new(MemDisk::new(0));
    let db = Db::create_on(disk.clone(), options()).unwrap();
    let a = db.create_table("a").unwrap();
    let b = db.create_table("b").unwrap();
    let mut txn = db.begin(Isolation::Snapshot).unwrap();
    for i in 0..500u32 {
        txn.put(a, i.to_be_bytes(), [1u8; 40]).unwrap();
        txn.put(b, i.to_be_bytes(), [2u8; 40]).unwrap();
    }
    // Own writes are read back, in order, merged with the snapshot.
    assert_eq!(all(&mut txn, a).len(), 500);
    txn.commit_with(Durability::Sync).unwrap();
    db.close().unwrap();
    let db = Db::open_on(disk, options()).unwrap();
    let (a, b) = (db.table("a").unwrap(), db.table("b").unwrap());
    assert_eq!(
        db.range(a, Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .count(),
        500
    );
    assert_eq!(
        db.range(b, Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .count(),
        500
    );
}

#[test]
fn snapshots_hold_across_flushes_and_merges() {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap();
    let t = db.default_table();
    for i in 0..200u32 {
        db.put(t, i.to_be_bytes(), b"old").unwrap();
    }
    let mut txn = db.begin(Isolation::Snapshot).unwrap();
    // Enough writes to flush memtables and merge runs many times over.
    for round in 0..10u32 {
        for i in 0..200u32 {
            db.put(t, i.to_be_bytes(), format!("new{round}")).unwrap();
        }
        db.compact().unwrap();
    }
    let seen = all(&mut txn, t);
    assert_eq!(seen.len(), 200);
    assert!(seen.iter().all(|(_, v)| v == b"old"));
    assert_eq!(txn.get(t, 7u32.to_be_bytes()).unwrap().unwrap(), b"old");
}

#[test]
fn a_conflict_names_the_key_and_table_and_applies_nothing() {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap();
    let t = db.create_table("accounts").unwrap();
    let mut t1 = db.begin(Isolation::Snapshot).unwrap();
    t1.put(t, "alice", "1").unwrap();
    t1.put(t, "bob", "1").unwrap();
    // A plain write counts as a commit too.
    db.put(t, "bob", "2").unwrap();
    let err = t1.commit().unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }));
    let msg = err.to_string();
    assert!(msg.contains("bob") && msg.contains("accounts"), "{msg}");
    assert_eq!(db.get(t, "alice").unwrap(), None);
    assert_eq!(db.get(t, "bob").unwrap().unwrap(), b"2");
}

#[test]
fn bad_writes_in_a_transaction_are_refused_and_it_goes_on() {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap();
    let t = db.default_table();
    let mut txn = db.begin(Isolation::Snapshot).unwrap();
    let big = vec![0u8; stitchdb::MAX_KEY_LEN + 1];
    assert!(matches!(txn.put(t, &big, "v"), Err(Error::TooLarge { .. })));
    assert!(matches!(
        txn.put(TableId(999), "k", "v"),
        Err(Error::NoSuchTable(_))
    ));
    // Reversed and empty ranges are empty, not a panic.
    let none = txn
        .range(t, Bound::Included(b"z"), Bound::Excluded(b"a"))
        .unwrap();
    assert_eq!(none.count(), 0);
    let none = txn
        .range(t, Bound::Excluded(b"a"), Bound::Excluded(b"a"))
        .unwrap();
    assert_eq!(none.count(), 0);
    txn.put(t, "k", "v").unwrap();
    txn.commit().unwrap();
    assert_eq!(db.get(t, "k").unwrap().unwrap(), b"v");
}

const ACCOUNTS: u32 = 8;
const START: u64 = 1000;

fn balance(v: Option<Vec<u8>>) -> u64 {
    u64::from_be_bytes(v.unwrap().try_into().unwrap())
}

/// Threads move money between accounts in transactions, retrying on conflict, while others
/// audit the total in read-only transactions. Returns the committed transfers.
fn run_bank(iso: Isolation, threads: u64, transfers: u64) -> u64 {
    let opts = Options {
        background: true,
        memtable_size: 64 * 1024,
        ..options()
    };
    let db = Db::create_on(Arc::new(MemDisk::new(0)), opts).unwrap();
    let t = db.default_table();
    for a in 0..ACCOUNTS {
        db.put(t, a.to_be_bytes(), START.to_be_bytes()).unwrap();
    }
    let committed = AtomicU64::new(0);
    std::thread::scope(|s| {
        for th in 0..threads {
            let (db, committed) = (&db, &committed);
            s.spawn(move || {
                let mut rng = th.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                let mut next = move || {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng
                };
                for _ in 0..transfers {
                    let from = (next() % ACCOUNTS as u64) as u32;
                    let to = (from + 1 + (next() % (ACCOUNTS as u64 - 1)) as u32) % ACCOUNTS;
                    let amount = next() % 50;
                    loop {
                        let mut txn = db.begin(iso).unwrap();
                        let a = balance(txn.get(t, from.to_be_bytes()).unwrap());
                        let b = balance(txn.get(t, to.to_be_bytes()).unwrap());
                        let amount = amount.min(a);
                        txn.put(t, from.to_be_bytes(), (a - amount).to_be_bytes())
                            .unwrap();
                        txn.put(t, to.to_be_bytes(), (b + amount).to_be_bytes())
                            .unwrap();
                        match txn.commit_with(Durability::Async) {
                            Ok(()) => break,
                            Err(Error::Conflict { .. }) => continue,
                            Err(e) => panic!("{e}"),
                        }
                    }
                    committed.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        // An auditor: every snapshot holds the whole sum.
        let db = &db;
        s.spawn(move || {
            for _ in 0..200 {
                let mut txn = db.begin(iso).unwrap();
                let total: u64 = all(&mut txn, t)
                    .into_iter()
                    .map(|(_, v)| balance(Some(v)))
                    .sum();
                assert_eq!(total, START * ACCOUNTS as u64);
                txn.commit().unwrap();
            }
        });
    });
    let total: u64 = db
        .range(t, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|kv| balance(Some(kv.unwrap().1)))
        .sum();
    assert_eq!(total, START * ACCOUNTS as u64, "{iso:?}");
    committed.into_inner()
}

#[test]
fn a_concurrent_bank_keeps_its_total_in_both_modes() {
    for iso in [Isolation::Snapshot, Isolation::Serializable] {
        assert_eq!(run_bank(iso, 4, 300), 1200);
    }
}

/// Write skew on a bank: two accounts may each go negative as long as their sum stays at or
/// above zero. Each withdrawal checks the sum, then debits one account. Returns the lowest
/// sum seen after all withdrawals.
fn withdraw_concurrently(iso: Isolation, rounds: u32) -> i64 {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap();
    let t = db.default_table();
    let mut lowest = i64::MAX;
    for round in 0..rounds {
        let (x, y) = (format!("x{round}"), format!("y{round}"));
        db.put(t, &x, 50i64.to_be_bytes()).unwrap();
        db.put(t, &y, 50i64.to_be_bytes()).unwrap();
        let get = |txn: &mut stitchdb::Transaction, k: &str| {
            i64::from_be_bytes(txn.get(t, k).unwrap().unwrap().try_into().unwrap())
        };
        // Both withdrawals read before either commits: the interleaving that exposes skew.
        let mut t1 = db.begin(iso).unwrap();
        let mut t2 = db.begin(iso).unwrap();
        let (x1, y1) = (get(&mut t1, &x), get(&mut t1, &y));
        let (x2, y2) = (get(&mut t2, &x), get(&mut t2, &y));
        if x1 + y1 - 80 >= 0 {
            t1.put(t, &x, (x1 - 80).to_be_bytes()).unwrap();
        }
        if x2 + y2 - 80 >= 0 {
            t2.put(t, &y, (y2 - 80).to_be_bytes()).unwrap();
        }
        let _ = t1.commit();
        let _ = t2.commit();
        let sum: i64 = [&x, &y]
            .iter()
            .map(|k| i64::from_be_bytes(db.get(t, k).unwrap().unwrap().try_into().unwrap()))
            .sum();
        lowest = lowest.min(sum);
    }
    lowest
}

#[test]
fn write_skew_shows_under_snapshot_isolation_and_never_under_serializable() {
    assert!(withdraw_concurrently(Isolation::Snapshot, 20) < 0);
    assert!(withdraw_concurrently(Isolation::Serializable, 20) >= 0);
}

/// Write skew with real threads: pairs of accounts whose sum must stay at or above zero. For
/// every pair, two threads each begin a transaction, read both accounts, meet at a barrier
/// (so both read before either writes), withdraw from their own account if the sum allows,
/// and commit, retrying on conflict. Returns how many pairs ended below zero.
fn concurrent_write_skew(iso: Isolation, pairs: u32) -> u32 {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap();
    let t = db.default_table();
    let key = |p: u32, side: u32| format!("pair{p:03}-{side}");
    for p in 0..pairs {
        for side in 0..2 {
            db.put(t, key(p, side), 50i64.to_be_bytes()).unwrap();
        }
    }
    let barrier = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        for side in 0..2u32 {
            let (db, barrier) = (&db, &barrier);
            s.spawn(move || {
                for p in 0..pairs {
                    let mut first_try = true;
                    loop {
                        let mut txn = db.begin(iso).unwrap();
                        let read = |txn: &mut stitchdb::Transaction, s: u32| {
                            let v = txn.get(t, key(p, s)).unwrap().unwrap();
                            i64::from_be_bytes(v.try_into().unwrap())
                        };
                        let (mine, other) = (read(&mut txn, side), read(&mut txn, 1 - side));
                        if first_try {
                            barrier.wait();
                        }
                        if mine + other >= 80 {
                            txn.put(t, key(p, side), (mine - 80).to_be_bytes()).unwrap();
                        }
                        let committed = txn.commit();
                        if first_try {
                            // Both have tried to commit before either retries.
                            barrier.wait();
                            first_try = false;
                        }
                        match committed {
                            Ok(()) => break,
                            Err(Error::Conflict { .. }) => continue,
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
            });
        }
    });
    (0..pairs)
        .filter(|&p| {
            let sum: i64 = (0..2)
                .map(|s| {
                    let v = db.get(t, key(p, s)).unwrap().unwrap();
                    i64::from_be_bytes(v.try_into().unwrap())
                })
                .sum();
            sum < 0
        })
        .count() as u32
}

#[test]
fn concurrent_write_skew_breaks_the_constraint_only_under_snapshot_isolation() {
    assert_eq!(concurrent_write_skew(Isolation::Snapshot, 50), 50);
    assert_eq!(concurrent_write_skew(Isolation::Serializable, 50), 0);
}
