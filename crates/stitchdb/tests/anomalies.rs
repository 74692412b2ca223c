//! The standard isolation anomalies (Adya's G0 .. G2 as Hermitage runs them), each with the
//! answer snapshot isolation and serializable must give. Interleavings are written out step
//! by step, so every run tests the same schedule.
//!
//! Under locking (strict two-phase locking) a step that needs a lock another transaction
//! holds waits: each `*_locking` test runs such a step on a second thread, checks that it is
//! still waiting, lets the other transaction finish, and checks what the step then sees. A
//! wait that closes a cycle fails at once with `Deadlock` for the younger transaction.

#![allow(clippy::unwrap_used)]

mod lock_wait;

use lock_wait::waits;
use std::ops::Bound;
use std::sync::Arc;
use stitchdb::{Db, Error, Isolation, MemDisk, Options, TableId};

const SI: Isolation = Isolation::Snapshot;
const SER: Isolation = Isolation::Serializable;
const LOCKING: Isolation = Isolation::Locking;

/// A store holding keys 1 and 2 with values 10 and 20 (Hermitage's `test` table).
fn store() -> (Db, TableId) {
    let opts = Options {
        zone_size: 64 * 1024,
        memtable_size: 16 * 1024,
        background: false,
        // Long enough that a locking step fails by deadlock only, never on a slow machine.
        lock_timeout: std::time::Duration::from_secs(20),
        ..Options::default()
    };
    let db = Db::create_on(Arc::new(MemDisk::new(0)), opts).unwrap();
    let t = db.default_table();
    db.put(t, "1", "10").unwrap();
    db.put(t, "2", "20").unwrap();
    (db, t)
}

fn read(txn: &mut stitchdb::Transaction, t: TableId, key: &str) -> Option<String> {
    txn.get(t, key)
        .unwrap()
        .map(|v| String::from_utf8(v).unwrap())
}

fn value(db: &Db, t: TableId, key: &str) -> Option<String> {
    db.get(t, key)
        .unwrap()
        .map(|v| String::from_utf8(v).unwrap())
}

/// Keys of pairs whose value is divisible by 3 (Hermitage's predicate `value % 3 = 0`).
fn divisible_by_3(txn: &mut stitchdb::Transaction, t: TableId) -> Vec<String> {
    txn.range(t, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(Result::unwrap)
        .filter(|(_, v)| std::str::from_utf8(v).unwrap().parse::<u64>().unwrap() % 3 == 0)
        .map(|(k, _)| String::from_utf8(k).unwrap())
        .collect()
}

fn assert_conflict(r: stitchdb::Result<()>, key: &str) {
    match r {
        Err(Error::Conflict { key: k, .. }) => assert_eq!(k, key.as_bytes()),
        other => panic!("expected a conflict on {key}, got {other:?}"),
    }
}

#[test]
fn g0_dirty_write_second_writer_conflicts() {
    for iso in [SI, SER] {
        let (db, t) = store();
        let mut t1 = db.begin(iso).unwrap();
        let mut t2 = db.begin(iso).unwrap();
        t1.put(t, "1", "11").unwrap();
        t2.put(t, "1", "12").unwrap();
        t1.put(t, "2", "21").unwrap();
        t1.commit().unwrap();
        t2.put(t, "2", "22").unwrap();
        assert_conflict(t2.commit(), "1");
        assert_eq!(value(&db, t, "1").unwrap(), "11");
        assert_eq!(value(&db, t, "2").unwrap(), "21");
    }
}

#[test]
fn g1a_aborted_reads_are_never_seen() {
    for iso in [SI, SER] {
        let (db, t) = store();
        let mut t1 = db.begin(iso).unwrap();
        let mut t2 = db.begin(iso).unwrap();
        t1.put(t, "1", "101").unwrap();
        assert_eq!(read(&mut t2, t, "1").unwrap(), "10");
        t1.abort();
        assert_eq!(read(&mut t2, t, "1").unwrap(), "10");
        t2.commit().unwrap();
        assert_eq!(value(&db, t, "1").unwrap(), "10");
    }
}

#[test]
fn g1b_intermediate_reads_are_never_seen() {
    for iso in [SI, SER] {
        let (db, t) = store();
        let mut t1 = db.begin(iso).unwrap();
        let mut t2 = db.begin(iso).unwrap();
        t1.put(t, "1", "101").unwrap();
        assert_eq!(read(&mut t2, t, "1").unwrap(), "10");
        t1.put(t, "1", "11").unwrap();
        t1.commit().unwrap();
        assert_eq!(read(&mut t2, t, "1").unwrap(), "10");
        t2.commit().unwrap();
        assert_eq!(value(&db, t, "1").unwrap(), "11");
    }
}

#[test]
fn g1c_circular_information_flow_is_never_seen() {
    for iso in [SI, SER] {
        let (db, t) = store();
        let mut t1 = db.begin(iso).unwrap();
        let mut t2 = db.begin(iso).unwrap();
        t1.put(t, "1", "11").unwrap();
        t2.put(t, "2", "22").unwrap();
        // Neither sees the other's uncommitted write.
        assert_eq!(read(&mut t1, t, "2").unwrap(), "20");
        assert_eq!(read(&mut t2, t, "1").unwrap(), "10");
        t1.commit().unwrap();
        match iso {
            LOCKING => unreachable!("locking runs its own schedule"),
            // Each read the other's old value: no cycle through writes, both commit.
            SI => t2.commit().unwrap(),
            // t2 read key 1 before t1's write: t2 cannot come after t1 in a serial order.
            SER => assert_conflict(t2.commit(), "1"),
        }
    }
}

#[test]
fn otv_observed_transaction_vanishes_never_happens() {
    for iso in [SI, SER] {
        let (db, t) = store();
        let mut t1 = db.begin(iso).unwrap();
        let mut t2 = db.begin(iso).unwrap();
        let mut t3 = db.begin(iso).unwrap();
        t1.put(t, "1", "11").unwrap();
        t1.put(t, "2", "19").unwrap();
        t2.put(t, "1", "12").unwrap();
        t1.commit().unwrap();
        assert_eq!(read(&mut t3, t, "1").unwrap(), "10");
        t2.put(t, "2", "18").unwrap();
        assert_eq!(read(&mut t3, t, "2").unwrap(), "20");
        assert_conflict(t2.commit(), "1");
        assert_eq!(read(&mut t3, t, "2").unwrap(), "20");
        assert_eq!(read(&mut t3, t, "1").unwrap(), "10");
        t3.commit().unwrap();
    }
}

#[test]
fn pmp_predicate_many_preceders() {
    for iso in [SI, SER] {
        let (db, t) = store();
        let mut t1 = db.begin(iso).unwrap();
        let mut t2 = db.begin(iso).unwrap();
        assert!(divisible_by_3(&mut t1, t).is_empty());
        t2.put(t, "3", "30").unwrap();
        t2.commit().unwrap();
        // The new row stays invisible to t1's predicate.
        assert!(divisible_by_3(&mut t1, t).is_empty());
        t1.commit().unwrap();
    }
    // With a write depending on the predicate (PMP-write): t1 raises every value, t2 deletes
    // the row valued 20 meanwhile.
    for iso in [SI, SER] {
        let (db, t) = store();
        let mut t1 = db.begin(iso).unwrap();
        let mut t2 = db.begin(iso).unwrap();
        let rows: Vec<_> = t1
            .range(t, Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        for (k, v) in rows {
            let v: u64 = std::str::from_utf8(&v).unwrap().parse().unwrap();
            t1.put(t, k, (v + 10).to_string()).unwrap();
        }
        let twenty: Vec<_> = t2
            .range(t, Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .map(Result::unwrap)
            .filter(|(_, v)| v == b"20")
            .collect();
        assert_eq!(twenty.len(), 1);
        t2.delete(t, &twenty[0].0).unwrap();
        t1.commit().unwrap();
        // Both modes: t2 deletes a row t1 wrote after t2's snapshot.
        assert_conflict(t2.commit(), "2");
        assert_eq!(value(&db, t, "2").unwrap(), "30");
    }
}

#[test]
fn pmp_phantom_insert_into_a_scanned_range() {
    for iso in [SI, SER] {
        let (db, t) = store();
        let mut t1 = db.begin(iso).unwrap();
        let mut t2 = db.begin(iso).unwrap();
        let counted = t1
            .range(t, Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .count();
        t2.put(t, "3", "30").unwrap();
        t2.commit().unwrap();
        t1.put(t, "count", counted.to_string()).unwrap();
        match iso {
            LOCKING => unreachable!("locking runs its own schedule"),
            SI => t1.commit().unwrap(),
            // The scanned range gained a key after the snapshot: a phantom.
            SER => assert_conflict(t1.commit(), "3"),
        }
    }
}

#[test]
fn p4_lost_update_second_writer_conflicts() {
    for iso in [SI, SER] {
        let (db, t) = store();
        let mut t1 = db.begin(iso).unwrap();
        let mut t2 = db.begin(iso).unwrap();
        assert_eq!(read(&mut t1, t, "1").unwrap(), "10");
        assert_eq!(read(&mut t2, t, "1").unwrap(), "10");
        t1.put(t, "1", "11").unwrap();
        t2.put(t, "1", "11").unwrap();
        t1.commit().unwrap();
        assert_conflict(t2.commit(), "1");
    }
}

#[test]
fn g_single_read_skew_is_never_seen() {
    for iso in [SI, SER] {
        let (db, t) = store();
        let mut t1 = db.begin(iso).unwrap();
        let mut t2 = db.begin(iso).unwrap();
        assert_eq!(read(&mut t1, t, "1").unwrap(), "10");
        assert_eq!(read(&mut t2, t, "1").unwrap(), "10");
        assert_eq!(read(&mut t2, t, "2").unwrap(), "20");
        t2.put(t, "1", "12").unwrap();
        t2.put(t, "2", "18").unwrap();
        t2.commit().unwrap();
        // t1 sees the total of 30 it would have seen before t2.
        assert_eq!(read(&mut t1, t, "2").unwrap(), "20");
        t1.commit().unwrap();
    }
    // Read skew with a write that depends on it: t1 acts on the sum it saw.
    for iso in [SI, SER] {
        let (db, t) = store();
        let mut t1 = db.begin(iso).unwrap();
        let mut t2 = db.begin(iso).unwrap();
        assert_eq!(read(&mut t1, t, "1").unwrap(), "10");
        t2.put(t, "1", "12").unwrap();
        t2.put(t, "2", "18").unwrap();
        t2.commit().unwrap();
        assert_eq!(read(&mut t1, t, "2").unwrap(), "20");
        t1.put(t, "sum", "30").unwrap();
        match iso {
            LOCKING => unreachable!("locking runs its own schedule"),
            SI => t1.commit().unwrap(),
            SER => assert_conflict(t1.commit(), "1"),
        }
    }
}

#[test]
fn g2_item_write_skew_only_under_snapshot_isolation() {
    for iso in [SI, SER] {
        let (db, t) = store();
        let mut t1 = db.begin(iso).unwrap();
        let mut t2 = db.begin(iso).unwrap();
        for txn in [&mut t1, &mut t2] {
            assert_eq!(read(txn, t, "1").unwrap(), "10");
            assert_eq!(read(txn, t, "2").unwrap(), "20");
        }
        t1.put(t, "1", "11").unwrap();
        t2.put(t, "2", "21").unwrap();
        t1.commit().unwrap();
        match iso {
            LOCKING => unreachable!("locking runs its own schedule"),
            SI => {
                t2.commit().unwrap();
                // The anomaly: both writes landed, each based on a state the other changed.
                assert_eq!(value(&db, t, "1").unwrap(), "11");
                assert_eq!(value(&db, t, "2").unwrap(), "21");
            }
            SER => {
                assert_conflict(t2.commit(), "1");
                assert_eq!(value(&db, t, "2").unwrap(), "20");
            }
        }
    }
}

#[test]
fn g2_anti_dependency_cycles_only_under_snapshot_isolation() {
    for iso in [SI, SER] {
        let (db, t) = store();
        let mut t1 = db.begin(iso).unwrap();
        let mut t2 = db.begin(iso).unwrap();
        assert!(divisible_by_3(&mut t1, t).is_empty());
        assert!(divisible_by_3(&mut t2, t).is_empty());
        t1.put(t, "3", "30").unwrap();
        t2.put(t, "4", "42").unwrap();
        t1.commit().unwrap();
        match iso {
            LOCKING => unreachable!("locking runs its own schedule"),
            SI => t2.commit().unwrap(),
            SER => assert_conflict(t2.commit(), "3"),
        }
    }
}

fn assert_deadlock<T: std::fmt::Debug>(r: stitchdb::Result<T>) {
    match r {
        Err(Error::Deadlock { .. }) => {}
        other => panic!("expected a deadlock, got {other:?}"),
    }
}

#[test]
fn g0_dirty_write_locking_second_writer_waits() {
    let (db, t) = store();
    let mut t1 = db.begin(LOCKING).unwrap();
    let mut t2 = db.begin(LOCKING).unwrap();
    t1.put(t, "1", "11").unwrap();
    waits(
        || t2.put(t, "1", "12").unwrap(),
        || {
            t1.put(t, "2", "21").unwrap();
            t1.commit().unwrap();
        },
    );
    t2.put(t, "2", "22").unwrap();
    t2.commit().unwrap();
    // Serial: t1 then t2, no interleaving of their writes.
    assert_eq!(value(&db, t, "1").unwrap(), "12");
    assert_eq!(value(&db, t, "2").unwrap(), "22");
}

#[test]
fn g1a_aborted_reads_locking_reader_waits_for_the_abort() {
    let (db, t) = store();
    let t1 = {
        let mut t1 = db.begin(LOCKING).unwrap();
        t1.put(t, "1", "101").unwrap();
        t1
    };
    let mut t2 = db.begin(LOCKING).unwrap();
    let seen = waits(|| read(&mut t2, t, "1"), || t1.abort());
    assert_eq!(seen.unwrap(), "10");
    t2.commit().unwrap();
    assert_eq!(value(&db, t, "1").unwrap(), "10");
}

#[test]
fn g1b_intermediate_reads_locking_reader_sees_the_final_write() {
    let (db, t) = store();
    let mut t1 = db.begin(LOCKING).unwrap();
    let mut t2 = db.begin(LOCKING).unwrap();
    t1.put(t, "1", "101").unwrap();
    let seen = waits(
        || read(&mut t2, t, "1"),
        || {
            t1.put(t, "1", "11").unwrap();
            t1.commit().unwrap();
        },
    );
    assert_eq!(seen.unwrap(), "11");
    t2.commit().unwrap();
}

#[test]
fn g1c_circular_information_flow_locking_is_a_deadlock() {
    let (db, t) = store();
    let mut t1 = db.begin(LOCKING).unwrap();
    let mut t2 = db.begin(LOCKING).unwrap();
    t1.put(t, "1", "11").unwrap();
    t2.put(t, "2", "22").unwrap();
    // t1 waits for t2's write of 2; t2 reading 1 would wait for t1: the younger, t2, fails.
    let seen = waits(
        || read(&mut t1, t, "2"),
        || {
            assert_deadlock(t2.get(t, "1"));
            // Its locks are gone, and so is every later call.
            assert_deadlock(t2.put(t, "3", "3"));
        },
    );
    assert_eq!(seen.unwrap(), "20");
    assert_deadlock(t2.commit());
    t1.commit().unwrap();
    assert_eq!(value(&db, t, "1").unwrap(), "11");
    assert_eq!(value(&db, t, "2").unwrap(), "20");
}

#[test]
fn otv_observed_transaction_vanishes_locking_never_happens() {
    let (db, t) = store();
    let mut t1 = db.begin(LOCKING).unwrap();
    let mut t2 = db.begin(LOCKING).unwrap();
    let mut t3 = db.begin(LOCKING).unwrap();
    t1.put(t, "1", "11").unwrap();
    t1.put(t, "2", "19").unwrap();
    waits(|| t2.put(t, "1", "12").unwrap(), || t1.commit().unwrap());
    // t3 waits for t2, and then sees all of it.
    let seen = waits(
        || read(&mut t3, t, "1"),
        || {
            t2.put(t, "2", "18").unwrap();
            t2.commit().unwrap();
        },
    );
    assert_eq!(seen.unwrap(), "12");
    assert_eq!(read(&mut t3, t, "2").unwrap(), "18");
    t3.commit().unwrap();
}

#[test]
fn pmp_predicate_many_preceders_locking() {
    let (db, t) = store();
    let mut t1 = db.begin(LOCKING).unwrap();
    let mut t2 = db.begin(LOCKING).unwrap();
    assert!(divisible_by_3(&mut t1, t).is_empty());
    waits(
        || {
            t2.put(t, "3", "30").unwrap();
            t2.commit().unwrap();
        },
        || {
            // The insert waits for t1's scanned range: t1's predicate still matches nothing.
            assert!(divisible_by_3(&mut t1, t).is_empty());
            t1.commit().unwrap();
        },
    );
    assert_eq!(value(&db, t, "3").unwrap(), "30");

    // PMP-write: t1 raises every value; t2's scan for the row valued 20 waits, then finds
    // the row t1 raised to 20.
    let (db, t) = store();
    let mut t1 = db.begin(LOCKING).unwrap();
    let mut t2 = db.begin(LOCKING).unwrap();
    let rows: Vec<_> = t1
        .range(t, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for (k, v) in rows {
        let v: u64 = std::str::from_utf8(&v).unwrap().parse().unwrap();
        t1.put(t, k, (v + 10).to_string()).unwrap();
    }
    let twenty = waits(
        || {
            t2.range(t, Bound::Unbounded, Bound::Unbounded)
                .unwrap()
                .map(Result::unwrap)
                .filter(|(_, v)| v == b"20")
                .collect::<Vec<_>>()
        },
        || t1.commit().unwrap(),
    );
    assert_eq!(twenty.len(), 1);
    assert_eq!(twenty[0].0, b"1");
    t2.delete(t, &twenty[0].0).unwrap();
    t2.commit().unwrap();
    assert_eq!(value(&db, t, "1"), None);
    assert_eq!(value(&db, t, "2").unwrap(), "30");
}

#[test]
fn pmp_phantom_insert_into_a_scanned_range_locking_waits() {
    let (db, t) = store();
    let mut t1 = db.begin(LOCKING).unwrap();
    let mut t2 = db.begin(LOCKING).unwrap();
    let counted = t1
        .range(t, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .count();
    waits(
        // A key never written before: the range lock covers it.
        || {
            t2.put(t, "3", "30").unwrap();
            t2.commit().unwrap();
        },
        || {
            t1.put(t, "count", counted.to_string()).unwrap();
            t1.commit().unwrap();
        },
    );
    assert_eq!(value(&db, t, "count").unwrap(), "2");
    assert_eq!(value(&db, t, "3").unwrap(), "30");
}

#[test]
fn p4_lost_update_locking_is_a_deadlock() {
    let (db, t) = store();
    let mut t1 = db.begin(LOCKING).unwrap();
    let mut t2 = db.begin(LOCKING).unwrap();
    assert_eq!(read(&mut t1, t, "1").unwrap(), "10");
    assert_eq!(read(&mut t2, t, "1").unwrap(), "10");
    waits(
        || t1.put(t, "1", "11").unwrap(),
        || assert_deadlock(t2.put(t, "1", "11")),
    );
    t1.commit().unwrap();
    assert_deadlock(t2.commit());
    assert_eq!(value(&db, t, "1").unwrap(), "11");
}

#[test]
fn g_single_read_skew_locking_writer_waits_for_the_reader() {
    let (db, t) = store();
    let mut t1 = db.begin(LOCKING).unwrap();
    let mut t2 = db.begin(LOCKING).unwrap();
    assert_eq!(read(&mut t1, t, "1").unwrap(), "10");
    assert_eq!(read(&mut t2, t, "1").unwrap(), "10");
    assert_eq!(read(&mut t2, t, "2").unwrap(), "20");
    waits(
        || {
            t2.put(t, "1", "12").unwrap();
            t2.put(t, "2", "18").unwrap();
            t2.commit().unwrap();
        },
        || {
            // t1 sees the total of 30: t2's writes wait for it.
            assert_eq!(read(&mut t1, t, "2").unwrap(), "20");
            t1.put(t, "sum", "30").unwrap();
            t1.commit().unwrap();
        },
    );
    assert_eq!(value(&db, t, "1").unwrap(), "12");
    assert_eq!(value(&db, t, "2").unwrap(), "18");
}

#[test]
fn g2_item_write_skew_locking_is_a_deadlock() {
    let (db, t) = store();
    let mut t1 = db.begin(LOCKING).unwrap();
    let mut t2 = db.begin(LOCKING).unwrap();
    for txn in [&mut t1, &mut t2] {
        assert_eq!(read(txn, t, "1").unwrap(), "10");
        assert_eq!(read(txn, t, "2").unwrap(), "20");
    }
    waits(
        || t1.put(t, "1", "11").unwrap(),
        || assert_deadlock(t2.put(t, "2", "21")),
    );
    t1.commit().unwrap();
    assert_eq!(value(&db, t, "1").unwrap(), "11");
    assert_eq!(value(&db, t, "2").unwrap(), "20");
}

#[test]
fn g2_anti_dependency_cycles_locking_is_a_deadlock() {
    let (db, t) = store();
    let mut t1 = db.begin(LOCKING).unwrap();
    let mut t2 = db.begin(LOCKING).unwrap();
    assert!(divisible_by_3(&mut t1, t).is_empty());
    assert!(divisible_by_3(&mut t2, t).is_empty());
    waits(
        || t1.put(t, "3", "30").unwrap(),
        || assert_deadlock(t2.put(t, "4", "42")),
    );
    t1.commit().unwrap();
    assert_eq!(value(&db, t, "3").unwrap(), "30");
    assert_eq!(value(&db, t, "4"), None);
}
