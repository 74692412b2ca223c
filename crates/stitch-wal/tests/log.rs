//! Writing and reading logs: segments, positions, every way a log can end, releasing zones.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use stitch_io::{Disk, MemDisk};
use stitch_patch::{PatchId, PatchState};
use stitch_wal::*;
use stitch_zone::{ZoneConfig, ZoneStore};

/// Reads the whole log, returning its records with their positions, the end, and the zones.
fn read_all(
    zones: &ZoneStore,
    start: LogPosition,
    epoch: u64,
) -> (Vec<(LogPosition, LogRecord)>, LogEnd, Vec<u32>) {
    let mut reader = LogReader::open(zones, start, epoch).unwrap();
    let mut out = Vec::new();
    while let Some(r) = reader.next_record().unwrap() {
        out.push(r);
    }
    (out, reader.end().unwrap().clone(), reader.zones())
}

#[test]
fn many_segments_round_trip() {
    let disk = mem_disk();
    let (zones, wal) = new_log(disk.clone(), SMALL_ZONE, 7);
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut appended = Vec::new();
    for i in 0..3000u64 {
        let len = if rng.gen_bool(0.05) {
            rng.gen_range(4000..20000)
        } else {
            rng.gen_range(0..600)
        };
        let flags =
            [Flags::NONE, Flags::AUTOCOMMIT, Flags::COMMIT, Flags::ABORT][rng.gen_range(0..4)];
        let record = LogRecord {
            lsn: i + 1,
            txn: rng.gen_range(0..50),
            op: rng.gen_range(1..9),
            flags,
            payload: payload(i, len),
        };
        // Some records wait in the log's buffer, some go into the cache at once (and take the
        // buffered ones before them along), some are handed over in pieces, either way: the
        // order on disk is the same, and a record in pieces reads back whole.
        let (lsn, pos) = match rng.gen_range(0..4) {
            0 => wal.append_buffered(record.txn, record.op, record.flags, &record.payload),
            1 => wal.append(record.txn, record.op, record.flags, &record.payload),
            way => {
                let mut cuts: Vec<usize> = (0..rng.gen_range(0..4))
                    .map(|_| rng.gen_range(0..=len))
                    .collect();
                cuts.sort();
                let bounds: Vec<usize> = [0].into_iter().chain(cuts).chain([len]).collect();
                let pieces: Vec<&[u8]> = bounds
                    .windows(2)
                    .map(|w| &record.payload[w[0]..w[1]])
                    .collect();
                let deps: &[PatchId] = &[];
                let deps = (way == 3).then_some(deps);
                wal.append_parts(record.txn, record.op, record.flags, &pieces, deps)
                    .map(|(lsn, pos, _)| (lsn, pos))
            }
        }
        .unwrap();
        assert_eq!(lsn, i + 1);
        assert_eq!(pos.lsn, lsn);
        appended.push((pos, record));
    }
    assert_eq!(wal.last_lsn(), 3000);
    wal.sync_to(3000).unwrap();
    assert_eq!(wal.durable_lsn(), 3000);
    let log_zones = wal.zones();
    assert!(
        log_zones.len() > 40,
        "expected many segments, got {}",
        log_zones.len()
    );

    let reopened = reopen(disk);
    let (records, end, zones_read) = read_all(&reopened, wal.start_position(), 7);
    assert_eq!(records.len(), appended.len());
    for (got, want) in records.iter().zip(&appended) {
        assert_eq!(got, want);
    }
    assert_eq!(zones_read, log_zones);
    assert_eq!(end.at, wal.position().0);
    assert!(end.is_clean(), "{end}");
    drop(zones);
}

#[test]
fn reading_from_a_middle_position() {
    let disk = mem_disk();
    let (_zones, wal) = new_log(disk.clone(), SMALL_ZONE, 1);
    let mut positions = Vec::new();
    for i in 0..500u64 {
        positions.push(
            wal.append(1, 1, Flags::AUTOCOMMIT, &payload(i, 300))
                .unwrap()
                .1,
        );
    }
    wal.sync_to(500).unwrap();
    let reopened = reopen(disk);
    for &from in &[0usize, 1, 99, 250, 499] {
        let (records, _, _) = read_all(&reopened, positions[from], 1);
        assert_eq!(records.len(), 500 - from);
        assert_eq!(records[0].0, positions[from]);
    }
}

#[test]
fn max_payload_fills_a_segment_and_larger_is_rejected() {
    let disk = mem_disk();
    let (_zones, wal) = new_log(disk.clone(), SMALL_ZONE, 1);
    let max = wal.max_payload();
    assert_eq!(
        max,
        SMALL_ZONE as usize - SEGMENT_HEADER_LEN - RECORD_HEADER_LEN
    );
    assert_eq!(
        wal.append(1, 1, Flags::NONE, &vec![1; max + 1]),
        Err(WalError::TooLarge { len: max + 1, max })
    );
    wal.append(1, 1, Flags::NONE, b"small").unwrap();
    wal.append(1, 1, Flags::NONE, &vec![2; max]).unwrap();
    wal.append(1, 1, Flags::COMMIT, b"after").unwrap();
    wal.sync_to(3).unwrap();
    let (records, _, zones) = read_all(&reopen(disk), wal.start_position(), 1);
    assert_eq!(records.len(), 3);
    assert_eq!(records[1].1.payload, vec![2; max]);
    assert_eq!(records[1].0.offset as usize, SEGMENT_HEADER_LEN);
    assert_eq!(
        zones.len(),
        4,
        "three segments and the preallocated next zone"
    );
    assert!(wal.failure().is_none());
}

#[test]
fn invalid_requests_are_errors() {
    let (_zones, wal) = new_log(mem_disk(), SMALL_ZONE, 1);
    assert!(matches!(
        wal.append(1, 1, Flags::COMMIT | Flags::ABORT, b""),
        Err(WalError::Invalid(_))
    ));
    assert!(matches!(
        wal.append(1, 1, Flags(0x80), b""),
        Err(WalError::Invalid(_))
    ));
    assert!(matches!(wal.sync_to(1), Err(WalError::Invalid(_))));
    wal.sync_to(0).unwrap(); // nothing to do
    let zones = create_store(mem_disk(), SMALL_ZONE);
    assert!(matches!(
        Wal::create(zones, 1, 0),
        Err(WalError::Invalid(_))
    ));
    assert!(wal.failure().is_none());
}

/// A log of `n` autocommit records of 200 bytes, synced; returns the disk and positions.
fn synced_log(n: u64, epoch: u64) -> (Arc<dyn Disk>, Vec<LogPosition>, LogPosition) {
    let disk = mem_disk();
    let (_zones, wal) = new_log(disk.clone(), SMALL_ZONE, epoch);
    let positions = (0..n)
        .map(|i| {
            wal.append(9, 1, Flags::AUTOCOMMIT, &payload(i, 200))
                .unwrap()
                .1
        })
        .collect();
    wal.sync_to(n).unwrap();
    (disk, positions, wal.start_position())
}

fn disk_offset(pos: LogPosition) -> u64 {
    pos.zone as u64 * SMALL_ZONE + pos.offset as u64
}

/// A log of `n` autocommit records of `len` bytes, each synced as it is appended (every
/// record vouches for the one before it).
fn log_synced_per_record(
    n: u64,
    len: usize,
    epoch: u64,
) -> (Arc<dyn Disk>, Vec<LogPosition>, LogPosition) {
    let disk = mem_disk();
    let (_zones, wal) = new_log(disk.clone(), SMALL_ZONE, epoch);
    let positions = (0..n)
        .map(|i| {
            let (lsn, pos) = wal
                .append(9, 1, Flags::AUTOCOMMIT, &payload(i, len))
                .unwrap();
            wal.sync_to(lsn).unwrap();
            pos
        })
        .collect();
    (disk, positions, wal.start_position())
}

/// Reads the log past damage; returns the LSNs read and the stretches skipped.
fn salvage_all(
    zones: &ZoneStore,
    start: LogPosition,
    epoch: u64,
) -> (Vec<u64>, Vec<SkippedDamage>) {
    let mut reader = LogReader::open_salvaging(zones, start, epoch).unwrap();
    let mut lsns = Vec::new();
    while let Some((_, r)) = reader.next_record().unwrap() {
        lsns.push(r.lsn);
    }
    (lsns, reader.skipped().to_vec())
}

#[test]
fn bad_record_that_later_records_vouch_for_is_damage() {
    let (disk, positions, start) = log_synced_per_record(100, 200, 3);
    // 16 bytes overwritten inside record 51 (index 50).
    disk.write_at(disk_offset(positions[50]) + 40, &[0xEE; 16])
        .unwrap();
    let zones = reopen(disk);
    let (records, end, _) = read_all(&zones, start, 3);
    assert_eq!(records.len(), 50, "a plain read stops at the damage");
    assert_eq!(end.at, positions[50]);
    let damage = end.damage.clone().expect("damage, not a torn tail");
    assert_eq!(damage.resume, positions[51]);
    assert_eq!(damage.last_lsn, 100);
    assert_eq!(end.out_of_reach(), 50);
    assert!(!end.is_clean());
    let text = end.to_string();
    assert!(
        text.contains("damaged") && text.contains("50 records"),
        "{text}"
    );
    // Recovery refuses it, naming the place.
    let mut registry = OpRegistry::new();
    let nothing = |_: &LogRecord| -> std::result::Result<(), String> { Ok(()) };
    registry
        .register(1, "test", Box::new(nothing), None)
        .unwrap();
    let err = Wal::recover(&zones, start, 3, &registry).unwrap_err();
    assert!(matches!(err, WalError::Damaged(_)), "{err}");
    assert!(
        err.to_string()
            .contains(&format!("offset {}", positions[50].offset)),
        "{err}"
    );
    // A salvaging read skips the damaged record and reads everything else.
    let (lsns, skipped) = salvage_all(&zones, start, 3);
    assert_eq!(lsns, (1..=100).filter(|&l| l != 51).collect::<Vec<_>>());
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].at, positions[50]);
    assert_eq!(skipped[0].resume, positions[51]);
}

#[test]
fn damage_at_a_segments_end_or_in_the_next_header_is_found_in_the_next_segment() {
    // Records of 3000 bytes: about 21 per 64 KiB segment, so the log spans several.
    let (disk, positions, start) = log_synced_per_record(60, 3000, 4);
    let last_of_first = positions
        .iter()
        .rposition(|p| p.zone == start.zone)
        .unwrap();
    let second_zone = positions[last_of_first + 1].zone;
    for (what, at) in [
        (
            "the last record of a segment",
            disk_offset(positions[last_of_first]) + 100,
        ),
        (
            "the next segment's header",
            second_zone as u64 * SMALL_ZONE + 20,
        ),
    ] {
        let mut saved = [0u8; 16];
        disk.read_at(at, &mut saved).unwrap();
        disk.write_at(at, &[0x55; 16]).unwrap();
        let zones = reopen(disk.clone());
        let (_, end, _) = read_all(&zones, start, 4);
        assert!(end.damage.is_some(), "{what}: {end}");
        let (lsns, skipped) = salvage_all(&zones, start, 4);
        assert_eq!(skipped.len(), 1, "{what}");
        assert_eq!(
            *lsns.last().unwrap(),
            60,
            "{what}: salvage reads to the end"
        );
        disk.write_at(at, &saved).unwrap();
        let (records, end, _) = read_all(&reopen(disk.clone()), start, 4);
        assert_eq!((records.len(), end.damage), (60, None), "{what}: restored");
    }
}

#[test]
fn unsynced_records_past_a_bad_one_are_a_torn_tail() {
    // Synced up to record 50; records 51..=100 appended after, never synced: none vouches
    // for record 51, so a bad record 51 is a torn tail, whatever follows it.
    let disk = mem_disk();
    let (zones, wal) = new_log(disk.clone(), SMALL_ZONE, 3);
    let mut positions = Vec::new();
    for i in 0..100 {
        let (lsn, pos) = wal
            .append(9, 1, Flags::AUTOCOMMIT, &payload(i, 200))
            .unwrap();
        positions.push(pos);
        if lsn == 50 {
            wal.sync_to(50).unwrap();
        }
    }
    zones.cache().flush_all().unwrap();
    disk.write_at(disk_offset(positions[50]) + 40, &[0xEE; 16])
        .unwrap();
    let (records, end, _) = read_all(&reopen(disk), wal.start_position(), 3);
    assert_eq!(records.len(), 50);
    assert_eq!(end.damage, None, "{end}");
}

#[test]
fn flipped_byte_ends_the_log_at_that_record() {
    let (disk, positions, start) = synced_log(100, 3);
    let mut byte = [0u8];
    let at = disk_offset(positions[50]) + 40;
    disk.read_at(at, &mut byte).unwrap();
    disk.write_at(at, &[byte[0] ^ 0xFF]).unwrap();
    let (records, end, _) = read_all(&reopen(disk), start, 3);
    assert_eq!(records.len(), 50);
    assert_eq!(end.at, positions[50]);
    assert!(matches!(end.record, RecordError::Checksum { .. }), "{end}");
    assert!(!end.is_clean());
}

#[test]
fn record_of_another_epoch_ends_the_log() {
    let (disk, _, start) = synced_log(10, 3);
    let reopened = reopen(disk.clone());
    let (_, end, _) = read_all(&reopened, start, 3);
    // The right next lsn, but written by a log of epoch 2 (an earlier life of the zone).
    let stale = LogRecord {
        lsn: 11,
        txn: 9,
        op: 1,
        flags: Flags::AUTOCOMMIT,
        payload: payload(11, 200),
    };
    disk.write_at(disk_offset(end.at), &encode_record(2, &stale))
        .unwrap();
    let (records, end2, _) = read_all(&reopen(disk.clone()), start, 3);
    assert_eq!(records.len(), 10);
    assert_eq!(end2.at, end.at);
    assert!(matches!(end2.record, RecordError::Checksum { .. }));
    // The same record under the right epoch continues the log.
    disk.write_at(disk_offset(end.at), &encode_record(3, &stale))
        .unwrap();
    assert_eq!(read_all(&reopen(disk), start, 3).0.len(), 11);
}

#[test]
fn lsn_gap_or_stale_lsn_ends_the_log() {
    let (disk, _, start) = synced_log(10, 3);
    let end = read_all(&reopen(disk.clone()), start, 3).1;
    for lsn in [12, 10, 1, u64::MAX] {
        let r = LogRecord {
            lsn,
            txn: 9,
            op: 1,
            flags: Flags::AUTOCOMMIT,
            payload: vec![],
        };
        disk.write_at(disk_offset(end.at), &encode_record(3, &r))
            .unwrap();
        let (records, end2, _) = read_all(&reopen(disk.clone()), start, 3);
        assert_eq!(records.len(), 10);
        assert_eq!(
            end2.record,
            RecordError::UnexpectedLsn {
                found: lsn,
                expected: 11
            }
        );
        assert!(end2.is_clean());
    }
}

#[test]
fn truncated_record_ends_the_log() {
    let (disk, positions, start) = synced_log(20, 3);
    // Zero the second half of record 19 (index 18) and everything after: a torn write.
    let from = disk_offset(positions[18]) + 100;
    disk.write_at(from, &vec![0; 4096]).unwrap();
    let (records, end, _) = read_all(&reopen(disk), start, 3);
    assert_eq!(records.len(), 18);
    assert_eq!(end.at, positions[18]);
    // Zeroing the whole record reads as "nothing written".
    let (disk, positions, start) = synced_log(20, 3);
    disk.write_at(disk_offset(positions[5]), &vec![0; 8192])
        .unwrap();
    let (records, end, _) = read_all(&reopen(disk), start, 3);
    assert_eq!(records.len(), 5);
    assert_eq!(end.record, RecordError::Zeros);
}

#[test]
fn bad_next_segment_header_ends_the_log_at_the_segment_end() {
    // 64 KiB zones, 200-byte records: ~285 records per segment.
    let (disk, positions, start) = synced_log(1000, 3);
    let second = positions
        .iter()
        .position(|p| p.zone != positions[0].zone)
        .unwrap();
    let zone2 = positions[second].zone;
    for (field, value) in [(0usize, 0xFFu8), (16, 4), (24, 9), (32, 1)] {
        let (disk2, ..) = (disk.clone(),);
        let mut header = [0u8; SEGMENT_HEADER_LEN];
        disk2
            .read_at(zone2 as u64 * SMALL_ZONE, &mut header)
            .unwrap();
        let mut h = SegmentHeader::decode(&header).unwrap();
        let original = header;
        if field == 0 {
            header[0] ^= value; // bad magic
        } else {
            // A valid header, but not the continuation of this log.
            match field {
                16 => h.epoch = value as u64,
                24 => h.seq = value as u64,
                _ => h.first_lsn = value as u64,
            }
            header = h.encode();
        }
        disk2.write_at(zone2 as u64 * SMALL_ZONE, &header).unwrap();
        let (records, end, zones) = read_all(&reopen(disk2.clone()), start, 3);
        assert_eq!(records.len(), second, "field {field}");
        assert!(end.next_segment.contains(&format!("zone {zone2}")), "{end}");
        // The zone named as next is still part of the log (it was preallocated for it).
        assert_eq!(zones, vec![positions[0].zone, zone2]);
        disk2
            .write_at(zone2 as u64 * SMALL_ZONE, &original)
            .unwrap();
    }
    assert_eq!(read_all(&reopen(disk), start, 3).0.len(), 1000);
}

#[test]
fn bad_start_header_is_an_error_naming_the_zone() {
    let (disk, _, start) = synced_log(10, 3);
    // Wrong epoch: the checkpoint names another log.
    let err = LogReader::open(&reopen(disk.clone()), start, 4)
        .err()
        .unwrap();
    assert!(
        err.to_string().contains(&format!("zone {}", start.zone))
            && err.to_string().contains("epoch"),
        "{err}"
    );
    // Corrupt header.
    disk.write_at(start.zone as u64 * SMALL_ZONE + 20, &[0xEE])
        .unwrap();
    let err = LogReader::open(&reopen(disk.clone()), start, 3)
        .err()
        .unwrap();
    assert!(
        matches!(
            err,
            WalError::Corrupt {
                what: "log segment header",
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains(&format!("zone {}", start.zone)),
        "{err}"
    );
    // Positions that cannot be in the log.
    let zones = reopen(disk);
    for bad in [
        LogPosition { zone: 0, ..start },
        LogPosition {
            zone: 10_000,
            ..start
        },
        LogPosition { offset: 3, ..start },
        LogPosition {
            offset: SMALL_ZONE as u32 + 1,
            ..start
        },
    ] {
        assert!(LogReader::open(&zones, bad, 3).is_err(), "{bad}");
    }
}

#[test]
fn release_before_frees_zones_only_after_the_patch_commits() {
    let disk = mem_disk();
    let (zones, wal) = new_log(disk, SMALL_ZONE, 1);
    for i in 0..1000 {
        wal.append(1, 1, Flags::AUTOCOMMIT, &payload(i, 200))
            .unwrap();
    }
    wal.sync_to(1000).unwrap();
    let log_zones = wal.zones();
    assert_eq!(
        log_zones.len(),
        5,
        "four segments and the next zone: {log_zones:?}"
    );
    let (pos, header) = wal.position();
    assert_eq!(pos.zone, log_zones[3]);
    // The checkpoint's superblock, not yet durable.
    let superblock = zones.write_superblock(None, &[header]).unwrap();
    assert_ne!(zones.cache().state(superblock), PatchState::Committed);
    let owned = zones.stats().owned_zones;
    wal.release_before(pos, superblock).unwrap();
    assert_eq!(wal.zones(), log_zones[3..].to_vec());
    assert_eq!(zones.stats().owned_zones, owned - 3);
    // Not free yet: a new zone comes from growing the store, not from the released ones.
    let fresh = zones.alloc_zone().unwrap();
    assert!(!log_zones.contains(&fresh));
    zones.cache().flush_patch(superblock).unwrap();
    // Durable, but the older superblock slot may still name them: held until the next one is.
    assert_eq!(zones.stats().held_zones, 3);
    let next = zones.write_superblock(None, &[]).unwrap();
    zones.cache().flush_patch(next).unwrap();
    let mut reused = Vec::new();
    for _ in 0..3 {
        reused.push(zones.alloc_zone().unwrap());
    }
    reused.sort_unstable();
    assert_eq!(reused, log_zones[..3].to_vec());
    // Releasing from a zone that is not in the log is an error.
    let bogus = LogPosition { zone: fresh, ..pos };
    assert!(matches!(
        wal.release_before(bogus, PatchId::NONE),
        Err(WalError::Invalid(_))
    ));
}

#[test]
fn records_a_durable_checkpoint_overtook_are_never_written() {
    let disk = mem_disk();
    let (zones, wal) = new_log(disk.clone(), SMALL_ZONE, 1);
    // The header of the first segment is durable; the records after it are not.
    zones.cache().flush_all().unwrap();
    for i in 0..1000 {
        wal.append(1, 1, Flags::AUTOCOMMIT, &payload(i, 200))
            .unwrap();
    }
    let log_zones = wal.zones();
    let (pos, header) = wal.position();
    let superblock = zones.write_superblock(None, &[header]).unwrap();
    zones.cache().flush_patch(superblock).unwrap();
    wal.release_before(pos, superblock).unwrap();
    assert!(zones.cache().stats().patches_discarded > 0);
    zones.cache().flush_all().unwrap();
    // The first segment past its header holds nothing but zeros: no record reached the disk.
    let first = zones.zone_offset(log_zones[0]);
    let mut bytes = vec![0u8; (SMALL_ZONE - 4096) as usize];
    disk.read_at(first + 4096, &mut bytes).unwrap();
    assert!(bytes.iter().all(|&b| b == 0));
    // The log goes on from `pos`, and reads back from there.
    wal.append(1, 1, Flags::AUTOCOMMIT, &payload(1000, 200))
        .unwrap();
    wal.sync_to(1001).unwrap();
    let mut reader = LogReader::open(&zones, pos, 1).unwrap();
    let (_, record) = reader.next_record().unwrap().unwrap();
    assert_eq!(record.lsn, 1001);
}

#[test]
fn buffered_records_stay_out_of_the_cache_until_a_flush_needs_them() {
    let disk = mem_disk();
    let (zones, wal) = new_log(disk.clone(), SMALL_ZONE, 1);
    zones.cache().flush_all().unwrap();
    for i in 0..20 {
        wal.append_buffered(1, 1, Flags::AUTOCOMMIT, &payload(i, 100))
            .unwrap();
    }
    assert_eq!(zones.cache().stats().dirty_blocks, 0);
    // A record that needs its patch writes the buffer ahead of itself.
    let (lsn, _, patch) = wal
        .append_with_deps(1, 1, Flags::AUTOCOMMIT, &payload(20, 100), &[])
        .unwrap();
    assert_eq!(lsn, 21);
    assert!(zones.cache().stats().dirty_blocks > 0);
    zones.cache().flush_patch(patch).unwrap();
    for i in 21..40 {
        wal.append_buffered(1, 1, Flags::AUTOCOMMIT, &payload(i, 100))
            .unwrap();
    }
    assert_eq!(zones.cache().stats().dirty_blocks, 0);
    // A sync writes the rest.
    wal.sync_to(40).unwrap();
    let (records, end, _) = read_all(&reopen(disk), wal.start_position(), 1);
    let payloads: Vec<Vec<u8>> = records.into_iter().map(|(_, r)| r.payload).collect();
    assert_eq!(
        payloads,
        (0..40).map(|i| payload(i, 100)).collect::<Vec<_>>()
    );
    assert!(end.is_clean(), "{end}");
}

#[test]
fn buffered_records_a_durable_checkpoint_overtook_are_never_written() {
    let disk = mem_disk();
    let (zones, wal) = new_log(disk.clone(), SMALL_ZONE, 1);
    zones.cache().flush_all().unwrap();
    // Half a segment of records, all still in the log's buffer.
    for i in 0..150 {
        wal.append_buffered(1, 1, Flags::AUTOCOMMIT, &payload(i, 200))
            .unwrap();
    }
    let log_zone = wal.zones()[0];
    let (pos, header) = wal.position();
    let superblock = zones.write_superblock(None, &[header]).unwrap();
    zones.cache().flush_patch(superblock).unwrap();
    wal.release_before(pos, superblock).unwrap();
    // Two more records, after the checkpoint's position, in the block holding it.
    for i in 150..152 {
        wal.append_buffered(1, 1, Flags::AUTOCOMMIT, &payload(i, 200))
            .unwrap();
    }
    wal.sync_to(152).unwrap();
    // The blocks wholly before the one holding `pos` were never written: zeros past the
    // segment's header block.
    let first = zones.zone_offset(log_zone);
    let kept_from = u64::from(pos.offset) / 4096 * 4096;
    let mut bytes = vec![0u8; (kept_from - 4096) as usize];
    disk.read_at(first + 4096, &mut bytes).unwrap();
    assert!(bytes.iter().all(|&b| b == 0));
    // From `pos` the log reads on.
    let reopened = reopen(disk);
    let mut reader = LogReader::open(&reopened, pos, 1).unwrap();
    for lsn in 151..=152 {
        let (_, record) = reader.next_record().unwrap().unwrap();
        assert_eq!(record.lsn, lsn);
        assert_eq!(record.payload, payload(lsn - 1, 200));
    }
    assert!(reader.next_record().unwrap().is_none());
}

#[test]
fn records_appended_while_a_checkpoint_overtakes_older_ones_are_written_whole() {
    // The writer goes on appending while a checkpoint is written: what follows the
    // checkpoint's position in the same buffer must reach the disk, from the right place.
    let disk = mem_disk();
    let (zones, wal) = new_log(disk.clone(), SMALL_ZONE, 1);
    for i in 0..100 {
        wal.append_buffered(1, 1, Flags::AUTOCOMMIT, &payload(i, 300))
            .unwrap();
    }
    let (pos, header) = wal.position();
    for i in 100..160 {
        wal.append_buffered(1, 1, Flags::AUTOCOMMIT, &payload(i, 300))
            .unwrap();
    }
    let superblock = zones.write_superblock(None, &[header]).unwrap();
    zones.cache().flush_patch(superblock).unwrap();
    wal.release_before(pos, superblock).unwrap();
    for i in 160..170 {
        wal.append_buffered(1, 1, Flags::AUTOCOMMIT, &payload(i, 300))
            .unwrap();
    }
    wal.sync_to(170).unwrap();
    let reopened = reopen(disk);
    let mut reader = LogReader::open(&reopened, pos, 1).unwrap();
    for lsn in 101..=170 {
        let (_, record) = reader.next_record().unwrap().unwrap();
        assert_eq!(record.lsn, lsn);
        assert_eq!(record.payload, payload(lsn - 1, 300));
    }
    assert!(reader.next_record().unwrap().is_none());
}

#[test]
fn buffered_segments_a_durable_checkpoint_released_never_reach_the_cache() {
    let disk = mem_disk();
    let (zones, wal) = new_log(disk.clone(), SMALL_ZONE, 1);
    // Several segments' worth of records, all buffered.
    for i in 0..1000 {
        wal.append_buffered(1, 1, Flags::AUTOCOMMIT, &payload(i, 200))
            .unwrap();
    }
    assert!(wal.zones().len() > 4, "{:?}", wal.zones());
    let before = zones.cache().stats();
    let (pos, header) = wal.position();
    let superblock = zones.write_superblock(None, &[header]).unwrap();
    zones.cache().flush_patch(superblock).unwrap();
    wal.release_before(pos, superblock).unwrap();
    // Only segment headers ever went into the cache.
    let after = zones.cache().stats();
    assert_eq!(after.dirty_blocks, 0);
    assert_eq!(after.patches_discarded, before.patches_discarded);
    for i in 1000..1003 {
        wal.append_buffered(1, 1, Flags::AUTOCOMMIT, &payload(i, 200))
            .unwrap();
    }
    wal.sync_to(1003).unwrap();
    let reopened = reopen(disk);
    let mut reader = LogReader::open(&reopened, pos, 1).unwrap();
    for lsn in 1001..=1003 {
        let (_, record) = reader.next_record().unwrap().unwrap();
        assert_eq!(record.payload, payload(lsn - 1, 200));
    }
    assert!(reader.next_record().unwrap().is_none());
}

#[test]
fn segments_released_before_the_checkpoint_is_durable_keep_their_records() {
    let disk = mem_disk();
    let (zones, wal) = new_log(disk.clone(), SMALL_ZONE, 1);
    for i in 0..1000 {
        wal.append_buffered(1, 1, Flags::AUTOCOMMIT, &payload(i, 200))
            .unwrap();
    }
    let (pos, header) = wal.position();
    // The checkpoint's superblock is not durable yet when its segments are given back.
    let superblock = zones.write_superblock(None, &[header]).unwrap();
    wal.release_before(pos, superblock).unwrap();
    assert_eq!(zones.cache().state(superblock), PatchState::Pending);
    // The records reach the disk with a sync; the superblock never does (a crash now): the
    // log read from its old start still holds every record.
    wal.sync_to(1000).unwrap();
    assert_eq!(zones.cache().state(superblock), PatchState::Pending);
    let (records, end, _) = read_all(&reopen(disk), wal.start_position(), 1);
    assert_eq!(records.len(), 1000);
    for (i, (_, r)) in records.iter().enumerate() {
        assert_eq!(r.payload, payload(i as u64, 200));
    }
    assert!(end.is_clean(), "{end}");
}

#[test]
fn running_out_of_space_for_a_segment_is_not_fatal() {
    let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    let cache = Arc::new(stitch_patch::BlockCache::new(disk, Default::default()));
    // Zone 0 plus four zones: the log's two, then two more segments at most.
    let config = ZoneConfig {
        zone_size: SMALL_ZONE,
        max_size: Some(5 * SMALL_ZONE),
        ..ZoneConfig::default()
    };
    let zones = Arc::new(ZoneStore::create(cache, config).unwrap());
    let wal = Wal::create(zones.clone(), 1, 1).unwrap();
    let mut appended = 0;
    let err = loop {
        match wal.append(1, 1, Flags::AUTOCOMMIT, &payload(appended, 1000)) {
            Ok(_) => appended += 1,
            Err(e) => break e,
        }
    };
    assert!(
        matches!(err, WalError::Zone(stitch_zone::ZoneError::NoSpace(_))),
        "{err}"
    );
    assert!(wal.failure().is_none());
    wal.sync_to(appended).unwrap();
    // Once a checkpoint lets old segments go, the log goes on.
    let (pos, header) = wal.position();
    let sb = zones.write_superblock(None, &[header]).unwrap();
    wal.release_before(pos, sb).unwrap();
    // Freed once the superblock after it is durable too (the older slot may name them).
    let next = zones.write_superblock(None, &[]).unwrap();
    zones.cache().flush_patch(next).unwrap();
    wal.append(1, 1, Flags::AUTOCOMMIT, &payload(appended, 1000))
        .unwrap();
    wal.sync_to(appended + 1).unwrap();
}

#[test]
fn a_durable_checkpoint_frees_the_buffered_pieces_it_overtakes() {
    // The buffer holds the records no checkpoint has overtaken, in pieces of an eighth of a
    // segment, plus a piece and at most two spares: not whole segments.
    let disk = mem_disk();
    let (zones, wal) = new_log(disk.clone(), SMALL_ZONE, 1);
    let piece = SMALL_ZONE as usize / 8;
    let mut lsn = 0;
    for round in 0..6 {
        // A segment and a half of records (200-byte payloads), all buffered.
        for _ in 0..480 {
            lsn += 1;
            wal.append_buffered(1, 1, Flags::AUTOCOMMIT, &payload(lsn, 200))
                .unwrap();
        }
        assert!(wal.buffer_bytes() > SMALL_ZONE as usize, "round {round}");
        let (pos, header) = wal.position();
        let superblock = zones.write_superblock(None, &[header]).unwrap();
        zones.cache().flush_patch(superblock).unwrap();
        wal.release_before(pos, superblock).unwrap();
        // Every piece was overtaken but the one `pos` is in (kept for the records after it).
        assert!(
            wal.buffer_bytes() <= 3 * piece,
            "round {round}: {} bytes buffered",
            wal.buffer_bytes()
        );
    }
    // What follows the last checkpoint still reaches the disk, in order.
    let (pos, _) = wal.position();
    for _ in 0..3 {
        lsn += 1;
        wal.append_buffered(1, 1, Flags::AUTOCOMMIT, &payload(lsn, 200))
            .unwrap();
    }
    wal.sync_to(lsn).unwrap();
    let reopened = reopen(disk);
    let mut reader = LogReader::open(&reopened, pos, 1).unwrap();
    for want in lsn - 2..=lsn {
        let (_, record) = reader.next_record().unwrap().unwrap();
        assert_eq!(record.lsn, want);
        assert_eq!(record.payload, payload(want, 200));
    }
    assert!(reader.next_record().unwrap().is_none());
}
