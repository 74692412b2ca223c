//! Recovery semantics: analysis, redo (repeat history for undoable ops, winners only for
//! redo-only ops), undo of losers, idempotence, and errors.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use parking_lot::Mutex;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use stitch_io::Disk;
use stitch_wal::*;

const EPOCH: u64 = 5;

/// Builds the standard scenario log and returns the disk, the start position and the state
/// the toy db had in memory when it "crashed" (including a loser's stolen page write).
fn scenario() -> (Arc<dyn Disk>, LogPosition, ToyState) {
    let disk = mem_disk();
    let (_zones, wal) = new_log(disk.clone(), SMALL_ZONE, EPOCH);
    let mut live = ToyState::default();
    // txn 1: page write + put, committed by a bare COMMIT marker.
    log_page_write(&wal, &mut live, 1, Flags::NONE, 0, 0, b"AAAA");
    wal.append(1, OP_KV_PUT, Flags::NONE, &kv_put_payload(b"k1", b"v1"))
        .unwrap();
    // txn 2 starts (a loser: never commits), interleaved with others.
    log_page_write(&wal, &mut live, 2, Flags::NONE, 0, 4, b"BBBB");
    wal.append(1, OP_NOOP, Flags::COMMIT, b"").unwrap();
    // Two autocommits sharing txn id 0.
    wal.append(
        0,
        OP_KV_PUT,
        Flags::AUTOCOMMIT,
        &kv_put_payload(b"k2", b"v2"),
    )
    .unwrap();
    log_page_write(&wal, &mut live, 0, Flags::AUTOCOMMIT, 1, 0, b"CC");
    wal.append(2, OP_KV_PUT, Flags::NONE, &kv_put_payload(b"k3", b"v3"))
        .unwrap();
    // txn 3: aborted (a loser whose page write must be undone).
    log_page_write(&wal, &mut live, 3, Flags::NONE, 2, 10, b"DDDD");
    log_page_write(&wal, &mut live, 3, Flags::NONE, 2, 12, b"EE");
    wal.append(3, OP_NOOP, Flags::ABORT, b"").unwrap();
    // txn 4: its last data record commits it.
    log_page_write(&wal, &mut live, 4, Flags::NONE, 3, 0, b"FF");
    wal.append(4, OP_KV_PUT, Flags::COMMIT, &kv_put_payload(b"k4", b"v4"))
        .unwrap();
    // txn 5: a redo-only put that never commits.
    wal.append(5, OP_KV_PUT, Flags::NONE, &kv_put_payload(b"k5", b"v5"))
        .unwrap();
    wal.sync_to(wal.last_lsn()).unwrap();
    (disk, wal.start_position(), live)
}

fn expected_state() -> ToyState {
    let mut s = ToyState::default();
    let mut p0 = vec![0; PAGE_SIZE];
    p0[..4].copy_from_slice(b"AAAA");
    s.pages.insert(0, p0);
    let mut p1 = vec![0; PAGE_SIZE];
    p1[..2].copy_from_slice(b"CC");
    s.pages.insert(1, p1);
    s.pages.insert(2, vec![0; PAGE_SIZE]);
    let mut p3 = vec![0; PAGE_SIZE];
    p3[..2].copy_from_slice(b"FF");
    s.pages.insert(3, p3);
    for (k, v) in [("k1", "v1"), ("k2", "v2"), ("k4", "v4")] {
        s.kv.insert(k.as_bytes().to_vec(), v.as_bytes().to_vec());
    }
    s
}

fn recover_into(
    disk: &Arc<dyn Disk>,
    start: LogPosition,
    state: &Arc<Mutex<ToyState>>,
) -> Result<RecoveryReport> {
    let zones = reopen(disk.clone());
    Wal::recover(&zones, start, EPOCH, &toy_registry(state.clone(), None))
}

#[test]
fn winners_are_redone_and_losers_undone() {
    let (disk, start, _) = scenario();
    let state = Arc::new(Mutex::new(ToyState::default()));
    let report = recover_into(&disk, start, &state).unwrap();
    assert_eq!(*state.lock(), expected_state());
    assert_eq!(report.records, 13);
    assert_eq!(report.last_lsn, Some(13));
    assert_eq!(report.next_lsn, 14);
    // Winners: txn 1, txn 4 and two autocommits. Losers: 2 (open), 3 (aborted), 5 (open).
    assert_eq!((report.winners, report.losers), (4, 3));
    assert_eq!(report.loser_txns, vec![2, 3, 5]);
    // Redone: all 6 page writes (undoable: every txn) and the 3 winners' puts.
    assert_eq!(report.redone, 9);
    // Undone: txn 2's page write and txn 3's two.
    assert_eq!(report.undone, 3);
    assert!(report.end_reason.is_clean(), "{}", report.end_reason);
    assert_eq!(report.end.lsn, 14);
    assert_eq!(report.zones.len(), 2);
}

#[test]
fn stolen_loser_pages_are_restored() {
    // The toy db's pages reached the "disk" with the losers' writes in them (steal):
    // recovery repeats history and undoes them.
    let (disk, start, live) = scenario();
    let mut crashed = live.clone();
    crashed.kv.clear(); // redo-only effects were never persisted
    let state = Arc::new(Mutex::new(crashed));
    recover_into(&disk, start, &state).unwrap();
    assert_eq!(*state.lock(), expected_state());
}

#[test]
fn recovery_twice_gives_the_same_result() {
    let (disk, start, _) = scenario();
    let state = Arc::new(Mutex::new(ToyState::default()));
    let first = recover_into(&disk, start, &state).unwrap();
    let after_first = state.lock().clone();
    let second = recover_into(&disk, start, &state).unwrap();
    assert_eq!(first, second);
    assert_eq!(*state.lock(), after_first);
}

#[test]
fn a_crash_at_any_point_of_recovery_is_repaired_by_running_it_again() {
    let (disk, start, live) = scenario();
    let total_calls = 9 + 3;
    for budget in 0..total_calls {
        let mut crashed = live.clone();
        crashed.kv.clear();
        let state = Arc::new(Mutex::new(crashed));
        let zones = reopen(disk.clone());
        let budget = Arc::new(AtomicU64::new(budget));
        let err = Wal::recover(
            &zones,
            start,
            EPOCH,
            &toy_registry(state.clone(), Some(budget)),
        )
        .unwrap_err();
        assert!(
            matches!(err, WalError::Redo { .. } | WalError::Undo { .. }),
            "{err}"
        );
        assert!(err.to_string().contains("simulated crash"));
        // The process dies; a new one recovers from the same log over the half-recovered state.
        recover_into(&disk, start, &state).unwrap();
        assert_eq!(*state.lock(), expected_state());
    }
}

#[test]
fn recovery_claims_the_zones_of_the_log() {
    let (disk, start, _) = scenario();
    let zones = reopen(disk);
    let report = Wal::recover(
        &zones,
        start,
        EPOCH,
        &toy_registry(Default::default(), None),
    )
    .unwrap();
    assert_eq!(zones.stats().owned_zones, report.zones.len() as u64);
    zones.finish_open().unwrap();
    let fresh = zones.alloc_zone().unwrap();
    assert!(!report.zones.contains(&fresh));
}

#[test]
fn unknown_op_is_an_error_before_anything_is_redone() {
    let disk = mem_disk();
    let (_zones, wal) = new_log(disk.clone(), SMALL_ZONE, EPOCH);
    wal.append(1, OP_KV_PUT, Flags::AUTOCOMMIT, &kv_put_payload(b"a", b"1"))
        .unwrap();
    wal.append(7, 99, Flags::NONE, b"mystery").unwrap();
    wal.sync_to(2).unwrap();
    let state = Arc::new(Mutex::new(ToyState::default()));
    let err = recover_into(&disk, wal.start_position(), &state).unwrap_err();
    assert_eq!(
        err,
        WalError::UnknownOp {
            lsn: 2,
            txn: 7,
            op: 99
        }
    );
    assert!(err.to_string().contains("lsn 2") && err.to_string().contains("99"));
    assert_eq!(*state.lock(), ToyState::default());
}

#[test]
fn bad_payload_is_reported_not_panicked() {
    let disk = mem_disk();
    let (_zones, wal) = new_log(disk.clone(), SMALL_ZONE, EPOCH);
    wal.append(1, OP_PAGE_WRITE, Flags::AUTOCOMMIT, b"xx")
        .unwrap();
    wal.sync_to(1).unwrap();
    let err = recover_into(&disk, wal.start_position(), &Default::default()).unwrap_err();
    assert!(
        matches!(
            err,
            WalError::Redo {
                lsn: 1,
                op: OP_PAGE_WRITE,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn empty_log_recovers_to_nothing() {
    let disk = mem_disk();
    let (_zones, wal) = new_log(disk.clone(), SMALL_ZONE, EPOCH);
    let report = recover_into(&disk, wal.start_position(), &Default::default()).unwrap();
    assert_eq!(report.records, 0);
    assert_eq!(report.last_lsn, None);
    assert_eq!(report.next_lsn, 1);
    assert_eq!(report.end, wal.start_position());
    assert_eq!(report.end_reason.record, RecordError::Zeros);
    assert_eq!(report.zones, wal.zones());
}

#[test]
fn recovery_from_a_checkpoint_position_skips_earlier_records() {
    let disk = mem_disk();
    let (_zones, wal) = new_log(disk.clone(), SMALL_ZONE, EPOCH);
    for i in 0..400u64 {
        let key = format!("a{i}");
        wal.append(
            0,
            OP_KV_PUT,
            Flags::AUTOCOMMIT,
            &kv_put_payload(key.as_bytes(), &payload(i, 150)),
        )
        .unwrap();
    }
    let (checkpoint, _) = wal.position();
    wal.append(
        0,
        OP_KV_PUT,
        Flags::AUTOCOMMIT,
        &kv_put_payload(b"after", b"1"),
    )
    .unwrap();
    wal.sync_to(401).unwrap();
    let state = Arc::new(Mutex::new(ToyState::default()));
    let report = recover_into(&disk, checkpoint, &state).unwrap();
    assert_eq!(report.records, 1);
    assert_eq!(report.last_lsn, Some(401));
    assert_eq!(state.lock().kv.len(), 1);
    // The zones before the checkpoint's segment are not part of what recovery claims.
    assert_eq!(report.zones[0], checkpoint.zone);
}

#[test]
fn only_the_durable_prefix_is_recovered() {
    let disk = mem_disk();
    let (zones, wal) = new_log(disk.clone(), SMALL_ZONE, EPOCH);
    wal.append(
        0,
        OP_KV_PUT,
        Flags::AUTOCOMMIT,
        &kv_put_payload(b"synced", b"1"),
    )
    .unwrap();
    wal.sync_to(1).unwrap();
    // Appended into the cache, never flushed: MemDisk never sees it.
    wal.append(
        0,
        OP_KV_PUT,
        Flags::AUTOCOMMIT,
        &kv_put_payload(b"lost", b"1"),
    )
    .unwrap();
    let state = Arc::new(Mutex::new(ToyState::default()));
    let report = recover_into(&disk, wal.start_position(), &state).unwrap();
    assert_eq!(report.records, 1);
    assert_eq!(
        state.lock().kv.keys().cloned().collect::<Vec<_>>(),
        vec![b"synced".to_vec()]
    );
    drop(zones);
}
