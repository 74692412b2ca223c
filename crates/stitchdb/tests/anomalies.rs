//! The standard isolation anomalies (Adya's G0 .. G2 as Hermitage runs them), each with the
//! answer snapshot isolation and serializable must give. Interleavings are written out step
//! by step, so every run tests the same schedule.

use std::ops::Bound;
use std::sync::Arc;
use stitchdb::{Db, Error, Isolation, MemDisk, Options, TableId};

const SI: Isolation = Isolation::Snapshot;
const SER: Isolation = Isolation::Serializable;

/// A store holding keys 1 and 2 with values 10 and 20 (Hermitage's `test` table).
fn store() -> (Db, TableId) {
    let opts = Options {
        zone_size: 64 * 1024,
        memtable_size: 16 * 1024,
        background: false,
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
            SI => t2.commit().unwrap(),
            SER => assert_conflict(t2.commit(), "3"),
        }
    }
}
