//! Transactions beyond the anomaly schedules: nested transactions, many tables, reopen,
//! conflicts reported clearly, a concurrent bank whose totals must hold, and how locking
//! transactions and everything else wait for each other.

#![allow(clippy::unwrap_used)]

mod lock_wait;

use lock_wait::waits;
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
                    let transfer = || -> stitchdb::Result<()> {
                        let mut txn = db.begin(iso)?;
                        let a = balance(txn.get(t, from.to_be_bytes())?);
                        let b = balance(txn.get(t, to.to_be_bytes())?);
                        let amount = amount.min(a);
                        txn.put(t, from.to_be_bytes(), (a - amount).to_be_bytes())?;
                        txn.put(t, to.to_be_bytes(), (b + amount).to_be_bytes())?;
                        txn.commit_with(Durability::Async)
                    };
                    while retry(transfer()) {}
                    committed.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        // An auditor: every snapshot holds the whole sum.
        let db = &db;
        s.spawn(move || {
            for _ in 0..200 {
                let audit = || -> stitchdb::Result<()> {
                    let mut txn = db.begin(iso)?;
                    let mut total = 0;
                    for pair in txn.range(t, Bound::Unbounded, Bound::Unbounded)? {
                        total += balance(Some(pair?.1));
                    }
                    assert_eq!(total, START * ACCOUNTS as u64);
                    txn.commit()
                };
                while retry(audit()) {}
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

/// Whether a transaction's outcome asks for a retry (a conflict, a deadlock, a lock wait
/// that timed out); any other error fails the test.
fn retry(outcome: stitchdb::Result<()>) -> bool {
    match outcome {
        Ok(()) => false,
        Err(Error::Conflict { .. } | Error::Deadlock { .. } | Error::LockTimeout { .. }) => true,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn a_concurrent_bank_keeps_its_total_in_every_mode() {
    for iso in [
        Isolation::Snapshot,
        Isolation::Serializable,
        Isolation::Locking,
    ] {
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
                            let v = txn.get(t, key(p, s))?.unwrap();
                            Ok(i64::from_be_bytes(v.try_into().unwrap()))
                        };
                        let reads = read(&mut txn, side)
                            .and_then(|mine| Ok((mine, read(&mut txn, 1 - side)?)));
                        if first_try {
                            barrier.wait();
                        }
                        // Under locking the second writer waits for the first's read lock,
                        // and one of the two fails as a deadlock.
                        let committed = reads
                            .and_then(|(mine, other)| match mine + other >= 80 {
                                true => txn.put(t, key(p, side), (mine - 80).to_be_bytes()),
                                false => Ok(()),
                            })
                            .and_then(|()| txn.commit());
                        if first_try {
                            // Both have tried to commit before either retries.
                            barrier.wait();
                            first_try = false;
                        }
                        if !retry(committed) {
                            break;
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
    assert_eq!(concurrent_write_skew(Isolation::Locking, 50), 0);
}

#[test]
fn plain_writes_and_optimistic_commits_wait_for_a_locking_transactions_locks() {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap();
    let t = db.default_table();
    db.put(t, "b", "1").unwrap();
    db.put(t, "k", "1").unwrap();
    let mut locking = db.begin(Isolation::Locking).unwrap();
    assert_eq!(locking.get(t, "b").unwrap().unwrap(), b"1");
    assert_eq!(locking.get(t, "k").unwrap().unwrap(), b"1");
    let scanned = Bound::Included(&b"m"[..]);
    assert_eq!(
        locking.range(t, scanned, Bound::Unbounded).unwrap().count(),
        0
    );
    let (plain, optimistic, ranged) = waits(
        || {
            std::thread::scope(|s| {
                let plain = s.spawn(|| db.put(t, "k", "2"));
                let optimistic = s.spawn(|| {
                    let mut txn = db.begin(Isolation::Snapshot)?;
                    txn.put(t, "m", "new")?;
                    txn.commit()
                });
                let ranged = s.spawn(|| db.delete_range(t, "a", "c"));
                let join = |h: std::thread::ScopedJoinHandle<'_, _>| h.join().unwrap();
                (join(plain), join(optimistic), join(ranged))
            })
        },
        || {
            // Repeatable reads and no phantoms while the others wait.
            assert_eq!(locking.get(t, "b").unwrap().unwrap(), b"1");
            assert_eq!(locking.get(t, "k").unwrap().unwrap(), b"1");
            assert_eq!(
                locking.range(t, scanned, Bound::Unbounded).unwrap().count(),
                0
            );
            locking.commit().unwrap();
        },
    );
    plain.unwrap();
    optimistic.unwrap();
    ranged.unwrap();
    assert_eq!(db.get(t, "b").unwrap(), None);
    assert_eq!(db.get(t, "k").unwrap().unwrap(), b"2");
    assert_eq!(db.get(t, "m").unwrap().unwrap(), b"new");
}

#[test]
fn a_lock_timeout_ends_the_transaction_and_frees_its_locks() {
    let opts = Options {
        lock_timeout: std::time::Duration::from_millis(50),
        ..options()
    };
    let db = Db::create_on(Arc::new(MemDisk::new(0)), opts).unwrap();
    let t = db.default_table();
    let mut t1 = db.begin(Isolation::Locking).unwrap();
    let mut t2 = db.begin(Isolation::Locking).unwrap();
    t1.delete_range(t, "a", "m").unwrap();
    assert_eq!(t2.get(t, "z").unwrap(), None);
    let timed_out = t2.get(t, "c");
    match &timed_out {
        Err(Error::LockTimeout { key, waited_ms, .. }) => {
            assert_eq!(key, b"c");
            assert!(*waited_ms >= 50);
        }
        other => panic!("expected a lock timeout, got {other:?}"),
    }
    // Every later call gives the same answer, and nothing of t2 is applied.
    assert_eq!(
        t2.put(t, "y", "1").map_err(|e| e.to_string()),
        timed_out.as_ref().map(|_| ()).map_err(|e| e.to_string())
    );
    assert!(matches!(t2.commit(), Err(Error::LockTimeout { .. })));
    // t2's read lock on "z" went with the error: a write of it does not wait.
    let mut t3 = db.begin(Isolation::Locking).unwrap();
    t3.put(t, "z", "3").unwrap();
    t3.commit().unwrap();
    t1.commit().unwrap();
    assert_eq!(db.get(t, "y").unwrap(), None);
    assert_eq!(db.get(t, "z").unwrap().unwrap(), b"3");
}

#[test]
fn larger_than_memory_locking_and_optimistic_commits_respect_each_others_locks() {
    let opts = Options {
        txn_memory: 4096,
        ..options()
    };
    let db = Db::create_on(Arc::new(MemDisk::new(0)), opts).unwrap();
    let t = db.default_table();
    let key = |i: u32| format!("key{i:05}");
    // A locking transaction spills, reads its spilled writes back, and commits by linking.
    let mut big = db.begin(Isolation::Locking).unwrap();
    for i in 0..500 {
        big.put(t, key(i), [7u8; 40]).unwrap();
    }
    assert_eq!(big.get(t, key(3)).unwrap().unwrap(), [7u8; 40]);
    big.commit().unwrap();
    assert_eq!(db.get(t, key(499)).unwrap().unwrap(), [7u8; 40]);
    // An optimistic spilled commit waits for a locking reader inside its runs' key span.
    let mut reader = db.begin(Isolation::Locking).unwrap();
    assert_eq!(reader.get(t, key(250)).unwrap().unwrap(), [7u8; 40]);
    let mut writer = db.begin(Isolation::Snapshot).unwrap();
    for i in (0..500).step_by(2) {
        writer.put(t, key(i), [8u8; 40]).unwrap();
    }
    waits(
        || writer.commit().unwrap(),
        || {
            assert_eq!(reader.get(t, key(250)).unwrap().unwrap(), [7u8; 40]);
            reader.commit().unwrap();
        },
    );
    assert_eq!(db.get(t, key(250)).unwrap().unwrap(), [8u8; 40]);
}

#[test]
fn get_for_update_keeps_a_check_from_being_skewed_and_locks_exclusive() {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap();
    let t = db.default_table();
    db.put(t, "x", "50").unwrap();
    db.put(t, "y", "50").unwrap();
    // Write skew under snapshot isolation, unless the check reads for update.
    let mut t1 = db.begin(Isolation::Snapshot).unwrap();
    let mut t2 = db.begin(Isolation::Snapshot).unwrap();
    for txn in [&mut t1, &mut t2] {
        assert_eq!(txn.get_for_update(t, "x").unwrap().unwrap(), b"50");
        assert_eq!(txn.get_for_update(t, "y").unwrap().unwrap(), b"50");
    }
    t1.put(t, "x", "-30").unwrap();
    t2.put(t, "y", "-30").unwrap();
    t1.commit().unwrap();
    match t2.commit() {
        Err(Error::Conflict { key, what, .. }) => {
            assert_eq!(key, b"x");
            assert_eq!(what, "read");
        }
        other => panic!("expected a conflict on x, got {other:?}"),
    }
    // Under locking the second reader for update waits for the first, then sees its write:
    // no upgrade deadlock.
    let mut t1 = db.begin(Isolation::Locking).unwrap();
    let mut t2 = db.begin(Isolation::Locking).unwrap();
    assert_eq!(t1.get_for_update(t, "y").unwrap().unwrap(), b"50");
    let seen = waits(
        || t2.get_for_update(t, "y").unwrap(),
        || {
            t1.put(t, "y", "20").unwrap();
            t1.commit().unwrap();
        },
    );
    assert_eq!(seen.unwrap(), b"20");
    t2.put(t, "y", "10").unwrap();
    t2.commit().unwrap();
    assert_eq!(db.get(t, "y").unwrap().unwrap(), b"10");
}
