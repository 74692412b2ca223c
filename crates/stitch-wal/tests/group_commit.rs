//! Group commit, concurrent appends, background flushing and write failures.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use std::sync::Arc;
use std::time::{Duration, Instant};
use stitch_io::{CountingDisk, Disk, SimConfig, SimDisk};
use stitch_wal::*;

/// `threads` threads each append and `sync_to` `per_thread` autocommit records; returns
/// (commits, syncs the disk saw).
fn commit_loop(threads: usize, per_thread: usize) -> (u64, u64) {
    let disk = Arc::new(CountingDisk::new(mem_disk()).with_sync_delay(Duration::from_micros(300)));
    let (_zones, wal) = new_log(disk.clone(), SMALL_ZONE, 1);
    let wal = Arc::new(wal);
    let before = disk.syncs();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let wal = wal.clone();
            std::thread::spawn(move || {
                for i in 0..per_thread {
                    let (lsn, _) = wal
                        .append(t as u64, 1, Flags::AUTOCOMMIT, &payload(i as u64, 100))
                        .unwrap();
                    wal.sync_to(lsn).unwrap();
                    assert!(wal.durable_lsn() >= lsn);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    ((threads * per_thread) as u64, disk.syncs() - before)
}

#[test]
fn group_commit_shares_syncs() {
    let (commits1, syncs1) = commit_loop(1, 200);
    let (commits16, syncs16) = commit_loop(16, 200);
    println!("1 thread: {commits1} commits, {syncs1} syncs; 16 threads: {commits16} commits, {syncs16} syncs");
    // Alone, every commit pays its own sync.
    assert!(syncs1 >= commits1, "{syncs1} syncs for {commits1} commits");
    // Together, commits share them.
    assert!(
        syncs16 * 4 < commits16,
        "{syncs16} syncs for {commits16} commits"
    );
}

#[test]
fn concurrent_appends_get_consecutive_lsns_and_all_recover() {
    let disk = mem_disk();
    let (_zones, wal) = new_log(disk.clone(), SMALL_ZONE, 2);
    let wal = Arc::new(wal);
    let handles: Vec<_> = (0..8u64)
        .map(|t| {
            let wal = wal.clone();
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                for i in 0..500u64 {
                    let data = payload(t * 1000 + i, (i % 700) as usize);
                    let (lsn, _) = wal.append(t, 1, Flags::NONE, &data).unwrap();
                    mine.push((lsn, data));
                    if i % 50 == 0 {
                        wal.sync_to(lsn).unwrap();
                    }
                }
                mine
            })
        })
        .collect();
    let mut all: Vec<(u64, Vec<u8>)> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    all.sort_by_key(|(lsn, _)| *lsn);
    assert_eq!(
        all.iter().map(|(l, _)| *l).collect::<Vec<_>>(),
        (1..=4000).collect::<Vec<_>>()
    );
    wal.sync_to(4000).unwrap();
    let zones = reopen(disk);
    let mut reader = LogReader::open(&zones, wal.start_position(), 2).unwrap();
    let mut n = 0;
    while let Some((_, rec)) = reader.next_record().unwrap() {
        assert_eq!(rec.payload, all[n].1);
        n += 1;
    }
    assert_eq!(n, 4000);
}

#[test]
fn flush_async_makes_records_durable_without_sync_to() {
    let disk = Arc::new(CountingDisk::new(mem_disk()));
    let (_zones, wal) = new_log(disk.clone(), SMALL_ZONE, 1);
    let wal = Arc::new(wal);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flusher = {
        let (wal, stop) = (wal.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                wal.flush_async().unwrap();
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    for i in 0..2000u64 {
        wal.append(1, 1, Flags::AUTOCOMMIT, &payload(i, 64))
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while wal.durable_lsn() < 2000 {
        assert!(
            Instant::now() < deadline,
            "background flushing never caught up"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    flusher.join().unwrap();
    assert!(disk.syncs() > 0);
    // Nothing left to do: flush_async returns at once.
    let syncs = disk.syncs();
    wal.flush_async().unwrap();
    assert_eq!(disk.syncs(), syncs);
}

fn sim_log() -> (Arc<SimDisk>, Wal) {
    let sim = Arc::new(SimDisk::new(SimConfig {
        seed: 1,
        len: 0,
        capacity: None,
    }));
    let (_zones, wal) = new_log(sim.clone() as Arc<dyn Disk>, SMALL_ZONE, 1);
    (sim, wal)
}

fn assert_failed_for_good(wal: &Wal) {
    assert!(wal.failure().is_some());
    assert!(matches!(
        wal.append(1, 1, Flags::AUTOCOMMIT, b"more"),
        Err(WalError::Failed(_))
    ));
    assert!(matches!(wal.sync_to(1), Err(WalError::Failed(_))));
    assert!(matches!(wal.flush_async(), Err(WalError::Failed(_))));
}

#[test]
fn a_failed_sync_fails_the_log_for_good() {
    let (sim, wal) = sim_log();
    wal.append(1, 1, Flags::AUTOCOMMIT, b"one").unwrap();
    sim.fail_nth_sync(1);
    let err = wal.sync_to(1).unwrap_err();
    assert!(err.to_string().contains("sync"), "{err}");
    assert_eq!(wal.durable_lsn(), 0);
    assert_failed_for_good(&wal);
}

#[test]
fn a_failed_write_fails_the_log_for_good() {
    let (sim, wal) = sim_log();
    wal.append(1, 1, Flags::AUTOCOMMIT, b"one").unwrap();
    sim.fail_nth_write(1);
    let err = wal.sync_to(1).unwrap_err();
    assert!(err.to_string().contains("write"), "{err}");
    assert_failed_for_good(&wal);
}

#[test]
fn waiters_see_the_leaders_failure() {
    let (sim, wal) = sim_log();
    let wal = Arc::new(wal);
    sim.fail_nth_sync(1);
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let wal = wal.clone();
            std::thread::spawn(move || {
                let (lsn, _) = wal.append(t, 1, Flags::AUTOCOMMIT, b"x")?;
                wal.sync_to(lsn)
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    // The very first sync fails, so no commit can have been acknowledged: whoever led the
    // failing flush, every committer gets an error (the original one or `Failed`).
    assert!(results.iter().all(|r| r.is_err()), "{results:?}");
    assert_failed_for_good(&wal);
}

/// Bytes the background's `zero_zones` writes once the log has filled `segments` segments of
/// 1 MiB with records of `record` bytes, synced every `per_sync` records.
fn zeros_written_ahead(record: usize, per_sync: usize, segments: u64) -> u64 {
    const ZONE: u64 = 1 << 20;
    let counting = Arc::new(CountingDisk::new(mem_disk()));
    let (zones, wal) = new_log(counting.clone(), ZONE, 1);
    let first_zone = wal.zones()[0];
    let mut i = 0u64;
    while wal.zones().iter().filter(|&&z| z != first_zone).count() < segments as usize + 1 {
        let (lsn, _) = wal
            .append(1, 1, Flags::AUTOCOMMIT, &payload(i, record))
            .unwrap();
        i += 1;
        if i % per_sync as u64 == 0 {
            wal.sync_to(lsn).unwrap();
        }
    }
    let written = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let seen = written.clone();
    counting.set_hook(move |r| {
        if let stitch_io::DiskRequest::Write { len, .. } = r {
            seen.fetch_add(len, std::sync::atomic::Ordering::Relaxed);
        }
    });
    for _ in 0..64 {
        zones.zero_zones();
    }
    written.load(std::sync::atomic::Ordering::Relaxed)
}

#[test]
fn zeros_go_ahead_of_a_log_synced_a_few_records_at_a_time_and_not_of_one_synced_in_bulk() {
    // A sync per 200-byte record: thousands of syncs a segment, each of which the zeros spare
    // a change of the file's block map. The zone after next is zeroed whole.
    let small = zeros_written_ahead(200, 1, 2);
    assert!(small >= 1 << 20, "{small} bytes of zeros");
    // A sync per 64 records of 4,000 bytes (256 KB): four a segment, so zeros would double
    // the log's writes for next to nothing. None are written.
    assert_eq!(zeros_written_ahead(4000, 64, 2), 0);
}
