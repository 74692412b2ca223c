//! Zone store: superblocks, extents, reference counts and zone reuse.

#![allow(clippy::unwrap_used)]

use parking_lot::Mutex;
use std::sync::Arc;
use stitch_io::{Disk, MemDisk, SimConfig, SimDisk};
use stitch_patch::{BlockCache, CacheConfig, PatchId};
use stitch_zone::{ExtentAddr, ExtentKind, Reserve, Stream, ZoneConfig, ZoneError, ZoneStore};

const ZONE: u64 = 64 * 1024;

fn config() -> ZoneConfig {
    ZoneConfig {
        zone_size: ZONE,
        max_size: None,
        ..ZoneConfig::default()
    }
}

fn cache(disk: Arc<dyn Disk>) -> Arc<BlockCache> {
    Arc::new(BlockCache::new(disk, CacheConfig::default()))
}

fn new_store() -> (Arc<dyn Disk>, ZoneStore) {
    let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    let store = ZoneStore::create(cache(disk.clone()), config()).unwrap();
    (disk, store)
}

#[test]
fn extents_round_trip_and_survive_reopen() {
    let (disk, store) = new_store();
    let (a, _) = store
        .append(ExtentKind::MANIFEST, b"hello zones", &[])
        .unwrap();
    let (b, _) = store
        .append(ExtentKind::RUN_BLOCK, &vec![7u8; 10_000], &[])
        .unwrap();
    store.write_superblock(Some(a), &[]).unwrap();
    store.cache().flush_all().unwrap();
    assert_eq!(store.read(a, ExtentKind::MANIFEST).unwrap(), b"hello zones");
    drop(store);

    let (store, superblock) = ZoneStore::open(cache(disk), config()).unwrap();
    assert_eq!(superblock.root, Some(a));
    assert_eq!(store.read(a, ExtentKind::MANIFEST).unwrap(), b"hello zones");
    assert_eq!(
        store.read(b, ExtentKind::RUN_BLOCK).unwrap(),
        vec![7u8; 10_000]
    );
}

#[test]
fn extents_read_back_through_the_cache_from_the_disk_and_after_reopening() {
    let (disk, store) = new_store();
    let payload: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
    let (first, _) = store.append(ExtentKind::RUN_BLOCK, &payload, &[]).unwrap();
    let (second, patch) = store.append(ExtentKind::RUN_BLOCK, &payload, &[]).unwrap();
    assert_eq!(second.len, first.len);
    assert!(second.follows(&first), "appended right after the first");
    // Through the cache before the flush, from the disk after it and after reopening.
    assert_eq!(store.read(second, ExtentKind::RUN_BLOCK).unwrap(), payload);
    store.cache().flush_patch(patch).unwrap();
    let read = store
        .read_durable_framed(second, ExtentKind::RUN_BLOCK)
        .unwrap();
    assert_eq!(&read[stitch_zone::EXTENT_HEADER_LEN..], &payload[..]);
    store.write_superblock(None, &[]).unwrap();
    store.cache().flush_all().unwrap();
    drop(store);
    let (store, _) = ZoneStore::open(cache(disk), config()).unwrap();
    assert_eq!(store.read(second, ExtentKind::RUN_BLOCK).unwrap(), payload);
    assert!(
        store.read(second, ExtentKind::RUN_INDEX).is_err(),
        "the header records the kind"
    );
}

/// Payloads of varied lengths (some not a multiple of the alignment), seeded by `seed`.
fn payloads(seed: usize, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let len = 1000 + (i * 7919 + seed * 31) % 4000;
            (0..len).map(|j| ((i + j + seed) % 253) as u8).collect()
        })
        .collect()
}

/// A batch lands where single appends would have put the same extents, across zone
/// boundaries too (each stretch in one zone), and its extents read back, are counted once
/// and live, and survive reopening.
#[test]
fn a_batch_lands_as_single_appends_would() {
    let (_, single) = new_store();
    let (disk, batched) = new_store();
    // 40 extents of 1-5 KB: several 64 KiB zones, so stretches break at zone ends.
    let all = payloads(1, 40);
    let one_by_one: Vec<ExtentAddr> = all
        .iter()
        .map(|p| {
            single
                .append_to(Stream::Merge, ExtentKind::RUN_BLOCK, p, &[])
                .unwrap()
                .0
        })
        .collect();
    let mut batch = stitch_zone::FramedBatch::new();
    for p in &all {
        batch.push(p);
    }
    let (addrs, patches) = batched
        .append_batch(Stream::Merge, ExtentKind::RUN_BLOCK, &mut batch, &[])
        .unwrap();
    assert!(batch.is_empty(), "the batch is emptied");
    assert_eq!(addrs, one_by_one);
    let zones: std::collections::BTreeSet<u32> = addrs.iter().map(|a| a.zone).collect();
    assert!(zones.len() > 2, "the batch crossed zones: {zones:?}");
    assert_eq!(patches.len(), zones.len(), "one write a zone");
    assert_eq!(
        batched.stats().live_bytes,
        single.stats().live_bytes,
        "live bytes as single appends count them"
    );
    for (a, p) in addrs.iter().zip(&all) {
        assert_eq!(&batched.read(*a, ExtentKind::RUN_BLOCK).unwrap(), p);
        assert_eq!(batched.refs(*a), 1);
    }
    batched.write_superblock(None, &[]).unwrap();
    batched.cache().flush_all().unwrap();
    drop(batched);
    let (store, _) = ZoneStore::open(cache(disk), config()).unwrap();
    for (a, p) in addrs.iter().zip(&all) {
        assert_eq!(&store.read(*a, ExtentKind::RUN_BLOCK).unwrap(), p);
    }
    // Found where they lie, as repair looks for them: the gaps between them hold nothing.
    let found: Vec<ExtentAddr> = zones
        .iter()
        .flat_map(|&z| store.extents_in(z).unwrap())
        .map(|(a, _)| a)
        .collect();
    assert_eq!(found, addrs);
}

/// A batch the store has no room for fails whole: what it wrote before running out is
/// released, and the store takes smaller writes after.
#[test]
fn a_batch_that_runs_out_of_room_keeps_nothing() {
    let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    let cfg = ZoneConfig {
        zone_size: ZONE,
        max_size: Some(4 * ZONE),
        ..ZoneConfig::default()
    };
    let store = ZoneStore::create(cache(disk), cfg).unwrap();
    let live_before = store.stats().live_extents;
    let mut batch = stitch_zone::FramedBatch::new();
    for p in payloads(2, 200) {
        batch.push(&p);
    }
    let err = store
        .append_batch(Stream::Flush, ExtentKind::RUN_BLOCK, &mut batch, &[])
        .unwrap_err();
    assert!(matches!(err, ZoneError::NoSpace(_)), "{err}");
    assert_eq!(store.stats().live_extents, live_before, "nothing kept");
    store.cache().flush_all().unwrap();
    let mut small = stitch_zone::FramedBatch::new();
    small.push(b"after");
    let (addrs, _) = store
        .append_batch(Stream::Flush, ExtentKind::RUN_BLOCK, &mut small, &[])
        .unwrap();
    assert_eq!(
        store.read(addrs[0], ExtentKind::RUN_BLOCK).unwrap(),
        b"after"
    );
}

#[test]
fn a_span_of_extents_reads_back_in_one_request_like_one_at_a_time() {
    let sim = Arc::new(SimDisk::new(SimConfig {
        seed: 3,
        len: 0,
        capacity: None,
    }));
    let store = ZoneStore::create(cache(sim.clone()), config()).unwrap();
    let mut addrs = Vec::new();
    for i in 0..6u8 {
        // Lengths that leave alignment gaps between some of the extents.
        let payload = vec![i; 1000 + 7 * i as usize];
        let (addr, _) = store.append(ExtentKind::RUN_BLOCK, &payload, &[]).unwrap();
        addrs.push(addr);
    }
    store.cache().flush_all().unwrap();
    let reads = sim.stats().reads;
    let span = store
        .read_durable_framed_span(&addrs, ExtentKind::RUN_BLOCK)
        .unwrap();
    assert_eq!(sim.stats().reads, reads + 1, "one disk read for the span");
    for (addr, framed) in addrs.iter().zip(&span) {
        let alone = store
            .read_durable_framed(*addr, ExtentKind::RUN_BLOCK)
            .unwrap();
        assert_eq!(framed, &alone);
    }
    // Extents that are not back to back, or of another kind, are refused.
    let gapped = [addrs[0], addrs[2]];
    assert!(store
        .read_durable_framed_span(&gapped, ExtentKind::RUN_BLOCK)
        .is_err());
    assert!(store
        .read_durable_framed_span(&addrs, ExtentKind::RUN_INDEX)
        .is_err());
}

#[test]
fn damage_is_reported_with_its_place() {
    let (disk, store) = new_store();
    let (a, p) = store
        .append(ExtentKind::RUN_BLOCK, b"some payload bytes", &[])
        .unwrap();
    store.cache().flush_patch(p).unwrap();
    assert!(
        matches!(
            store.read(a, ExtentKind::MANIFEST),
            Err(ZoneError::Corrupt { .. })
        ),
        "wrong kind"
    );
    // Flip one payload byte on the disk, then read through a fresh cache.
    let at = store.zone_offset(a.zone) + a.offset as u64 + 20;
    let mut byte = [0u8];
    disk.read_at(at, &mut byte).unwrap();
    disk.write_at(at, &[byte[0] ^ 0x40]).unwrap();
    let sb = store.write_superblock(Some(a), &[]).unwrap();
    store.cache().flush_patch(sb).unwrap();
    drop(store);
    let (store, _) = ZoneStore::open(cache(disk), config()).unwrap();
    let err = store
        .read(a, ExtentKind::RUN_BLOCK)
        .unwrap_err()
        .to_string();
    assert!(err.contains("checksum mismatch"), "{err}");
    assert!(
        err.contains(&format!("zone {} offset {}", a.zone, a.offset)),
        "{err}"
    );
    // An address outside the store is an error, not a panic.
    let bogus = ExtentAddr {
        zone: 999,
        offset: 0,
        len: 64,
    };
    assert!(store.read(bogus, ExtentKind::RUN_BLOCK).is_err());
    let short = ExtentAddr {
        zone: 1,
        offset: 0,
        len: 3,
    };
    assert!(store.read(short, ExtentKind::RUN_BLOCK).is_err());
}

#[test]
fn a_moved_extent_fails_its_checksum() {
    // The checksum covers the address: identical bytes at another place are not accepted.
    let (disk, store) = new_store();
    let (a, p) = store
        .append(ExtentKind::RUN_BLOCK, b"payload", &[])
        .unwrap();
    store.cache().flush_patch(p).unwrap();
    let mut bytes = vec![0u8; a.len as usize];
    disk.read_at(store.zone_offset(a.zone) + a.offset as u64, &mut bytes)
        .unwrap();
    let moved = ExtentAddr {
        offset: a.offset + 4096,
        ..a
    };
    disk.write_at(store.zone_offset(moved.zone) + moved.offset as u64, &bytes)
        .unwrap();
    drop(store);
    let (store, _) = ZoneStore::open(cache(disk), config()).unwrap();
    assert!(store.read(moved, ExtentKind::RUN_BLOCK).is_err());
}

#[test]
fn reference_counts_run_release_handlers_and_refuse_revival() {
    let (_disk, store) = new_store();
    let released = Arc::new(Mutex::new(Vec::new()));
    let sink = released.clone();
    store.set_release_handler(
        ExtentKind::RUN_INDEX,
        Arc::new(move |addr| sink.lock().push(addr)),
    );
    let (a, _) = store.append(ExtentKind::RUN_INDEX, b"index", &[]).unwrap();
    store.incref(a).unwrap();
    assert_eq!(store.refs(a), 2);
    store.decref(a).unwrap();
    assert!(released.lock().is_empty());
    store.decref(a).unwrap();
    assert_eq!(*released.lock(), vec![a]);
    assert_eq!(store.refs(a), 0);
    assert!(
        matches!(store.incref(a), Err(ZoneError::Dead(_))),
        "a dying extent cannot be revived"
    );
    assert!(matches!(store.decref(a), Err(ZoneError::Dead(_))));
    // Many at once: all or none.
    let (b, _) = store.append(ExtentKind::RUN_INDEX, b"b", &[]).unwrap();
    let (c, _) = store.append(ExtentKind::RUN_INDEX, b"c", &[]).unwrap();
    assert!(matches!(store.incref_all(&[b, a, c]), Err(ZoneError::Dead(d)) if d == a));
    assert_eq!((store.refs(b), store.refs(c)), (1, 1), "none added");
    store.incref_all(&[b, c, c]).unwrap();
    assert_eq!((store.refs(b), store.refs(c)), (2, 3));
}

#[test]
fn decref_all_releases_each_extent_and_reports_the_first_dead_one() {
    let (_disk, store) = new_store();
    let released = Arc::new(Mutex::new(Vec::new()));
    let sink = released.clone();
    store.set_release_handler(
        ExtentKind::RUN_BLOCK,
        Arc::new(move |addr| sink.lock().push(addr)),
    );
    let addrs: Vec<ExtentAddr> = (0..3u8)
        .map(|i| {
            store
                .append(ExtentKind::RUN_BLOCK, &[i; 100], &[])
                .unwrap()
                .0
        })
        .collect();
    store.incref(addrs[1]).unwrap();
    store.decref(addrs[2]).unwrap();
    // addrs[2] is dead already: the others are still processed.
    let err = store.decref_all(addrs.clone()).unwrap_err();
    assert!(matches!(err, ZoneError::Dead(a) if a == addrs[2]), "{err}");
    assert_eq!(*released.lock(), vec![addrs[2], addrs[0]]);
    assert_eq!(store.refs(addrs[1]), 1);
    assert_eq!(store.stats().live_extents, 1);
}

/// Appenders of one stream, reference counting and flushes on other threads: every extent
/// lands whole where its address says, and live bytes add up.
#[test]
fn concurrent_appends_to_one_stream_stay_intact() {
    let (disk, store) = new_store();
    let store = Arc::new(store);
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let appenders: Vec<_> = (0..3u64)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                (0..300u64)
                    .map(|i| {
                        // Sizes that leave extents straddling blocks at every offset.
                        let len = 50 + ((t * 7919 + i * 104_729) % 3000) as usize;
                        let payload: Vec<u8> = (0..len)
                            .map(|j| (t * 31 + i * 7 + j as u64) as u8)
                            .collect();
                        let (addr, _) = store
                            .append_to(Stream::Flush, ExtentKind::RUN_BLOCK, &payload, &[])
                            .unwrap();
                        // Briefly shared, as a merge stitching the block would.
                        store.incref(addr).unwrap();
                        store.decref(addr).unwrap();
                        (addr, payload)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let flusher = {
        let (store, done) = (store.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                store.cache().flush_all().unwrap();
            }
        })
    };
    let extents: Vec<(ExtentAddr, Vec<u8>)> = appenders
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    done.store(true, std::sync::atomic::Ordering::Release);
    flusher.join().unwrap();
    for (addr, payload) in &extents {
        assert_eq!(&store.read(*addr, ExtentKind::RUN_BLOCK).unwrap(), payload);
    }
    let stats = store.stats();
    assert_eq!(stats.live_extents, extents.len() as u64);
    let live: u64 = extents.iter().map(|(a, _)| u64::from(a.len)).sum();
    assert_eq!(stats.live_bytes, live);
    store.cache().flush_all().unwrap();
    drop(store);
    let (store, _) = ZoneStore::open(cache(disk), config()).unwrap();
    for (addr, payload) in &extents {
        assert_eq!(&store.read(*addr, ExtentKind::RUN_BLOCK).unwrap(), payload);
    }
}

/// Appends extents of `fill` until one lands in zone `last` (closing the zones before it);
/// returns them.
fn fill_zones_until(store: &ZoneStore, fill: u8, last: u32) -> Vec<ExtentAddr> {
    let mut addrs = Vec::new();
    while addrs.last().is_none_or(|a: &ExtentAddr| a.zone < last) {
        let (addr, _) = store
            .append(ExtentKind::RUN_BLOCK, &[fill; 4000], &[])
            .unwrap();
        addrs.push(addr);
    }
    addrs
}

/// Releases every extent of `zone` and makes the release durable.
/// Drops every extent of `zone`, then writes a superblock (an emptied zone is held until the
/// superblock after the newest is durable) and makes everything durable.
fn empty_zone(store: &ZoneStore, addrs: &[ExtentAddr], zone: u32) {
    for a in addrs.iter().filter(|a| a.zone == zone) {
        store.decref(*a).unwrap();
    }
    store.write_superblock(None, &[]).unwrap();
    store.cache().flush_all().unwrap();
}

fn zone_bytes(disk: &dyn Disk, zone: u32) -> Vec<u8> {
    let mut bytes = vec![0; ZONE as usize];
    disk.read_at(zone as u64 * ZONE, &mut bytes).unwrap();
    bytes
}

#[test]
fn emptied_zones_are_recycled_unpunched_and_reused_once_their_writes_are_durable() {
    let (disk, store) = new_store();
    let addrs = fill_zones_until(&store, 1, 2);
    let first_zone = addrs[0].zone;
    let before = store.stats();
    for a in addrs.iter().filter(|a| a.zone == first_zone) {
        store.decref(*a).unwrap();
    }
    // Not free until the writes into it are committed.
    assert_eq!(
        store.stats().free_zones,
        before.free_zones + 1,
        "queued for freeing"
    );
    assert_eq!(store.stats().recycled_zones, 0, "not yet free");
    store.cache().flush_all().unwrap();
    // The older superblock slot may still reach it: held until the next superblock.
    assert_eq!(store.stats().recycled_zones, 0, "held");
    assert_eq!(store.stats().held_zones, 1);
    store.write_superblock(None, &[]).unwrap();
    assert_eq!(
        store.stats().recycled_zones,
        0,
        "the superblock is not durable yet"
    );
    store.cache().flush_all().unwrap();
    assert_eq!(store.stats().held_zones, 0);
    assert_eq!(store.stats().recycled_zones, 1);
    assert!(
        zone_bytes(&*disk, first_zone).contains(&1),
        "a recycled zone is not punched"
    );
    // The next zone opened is the freed one, not a new one at the end of the disk.
    let zones_before = store.stats().zones;
    let mut reused = false;
    // Zone 2 has room for 15 more; the next ones must go to the freed zone.
    for _ in 0..20 {
        let (a, _) = store
            .append(ExtentKind::RUN_BLOCK, &[2u8; 4000], &[])
            .unwrap();
        reused |= a.zone == first_zone;
    }
    assert!(reused, "the freed zone is reused");
    assert_eq!(store.stats().zones, zones_before, "the disk did not grow");
    assert_eq!(store.stats().recycled_zones, 0);
}

#[test]
fn zones_freed_beyond_the_recycle_limit_are_punched_and_reused_after_recycled_ones() {
    let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    let one_zone = ZoneConfig {
        recycle_bytes: ZONE,
        ..config()
    };
    let store = ZoneStore::create(cache(disk.clone()), one_zone).unwrap();
    // Zone 3 open, zones 1 and 2 closed.
    let addrs = fill_zones_until(&store, 1, 3);
    empty_zone(&store, &addrs, 2);
    empty_zone(&store, &addrs, 1);
    assert_eq!(store.stats().recycled_zones, 1, "room for one");
    assert!(
        zone_bytes(&*disk, 2).contains(&1),
        "zone 2, freed first, is kept"
    );
    assert!(
        zone_bytes(&*disk, 1).iter().all(|&b| b == 0),
        "zone 1, past the limit, is punched"
    );
    // Zone 3 has some room left; after it, the recycled zone 2 comes before zone 1.
    let mut order = Vec::new();
    while order.len() < 2 {
        let (a, _) = store
            .append(ExtentKind::RUN_BLOCK, &[2u8; 4000], &[])
            .unwrap();
        if a.zone != 3 && order.last() != Some(&a.zone) {
            order.push(a.zone);
        }
    }
    assert_eq!(order, vec![2, 1]);
}

#[test]
fn opening_recycles_free_zones_up_to_the_limit_and_punches_the_rest() {
    let (disk, store) = new_store();
    let addrs = fill_zones_until(&store, 1, 2);
    empty_zone(&store, &addrs, 1);
    store.write_superblock(None, &[]).unwrap();
    store.cache().flush_all().unwrap();
    drop(store);
    // Nothing claims zones 1 and 2 on opening (no manifest names their extents): both free.
    let (store, _) = ZoneStore::open(cache(disk.clone()), config()).unwrap();
    store.finish_open().unwrap();
    assert_eq!(store.stats().recycled_zones, 2, "within the default limit");
    assert!(zone_bytes(&*disk, 1).contains(&1));
    drop(store);
    let none = ZoneConfig {
        recycle_bytes: 0,
        ..config()
    };
    let (store, _) = ZoneStore::open(cache(disk.clone()), none).unwrap();
    store.finish_open().unwrap();
    assert_eq!(store.stats().recycled_zones, 0);
    assert!(zone_bytes(&*disk, 1).iter().all(|&b| b == 0));
}

#[test]
fn size_limit_gives_no_space() {
    let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    let cfg = ZoneConfig {
        zone_size: ZONE,
        max_size: Some(3 * ZONE),
        ..ZoneConfig::default()
    };
    let store = ZoneStore::create(cache(disk), cfg).unwrap();
    let err = loop {
        match store.append(ExtentKind::RUN_BLOCK, &[0u8; 8000], &[]) {
            Ok(_) => continue,
            Err(e) => break e,
        }
    };
    assert!(matches!(err, ZoneError::NoSpace(_)), "{err}");
    assert!(
        store
            .append(ExtentKind::RUN_BLOCK, &vec![0u8; ZONE as usize], &[])
            .is_err(),
        "too large"
    );
}

#[test]
fn a_torn_superblock_update_falls_back_to_the_previous_one() {
    let sim = Arc::new(SimDisk::new(SimConfig {
        seed: 7,
        len: 0,
        capacity: None,
    }));
    let disk: Arc<dyn Disk> = sim.clone();
    let store = ZoneStore::create(cache(disk), config()).unwrap();
    let (a, pa) = store.append(ExtentKind::MANIFEST, b"first", &[]).unwrap();
    let sb = store.write_superblock(Some(a), &[pa]).unwrap();
    store.cache().flush_patch(sb).unwrap();
    let (b, pb) = store.append(ExtentKind::MANIFEST, b"second", &[]).unwrap();
    let sb2 = store.write_superblock(Some(b), &[pb]).unwrap();
    // The manifest is durable; the new superblock reaches the disk but its sync fails.
    store.cache().flush_patch(pb).unwrap();
    sim.fail_nth_sync(1);
    assert!(store.cache().flush_patch(sb2).is_err());
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..64 {
        let crashed: Arc<dyn Disk> = Arc::new(sim.crash(seed));
        let (store, superblock) = ZoneStore::open(cache(crashed), config()).unwrap();
        let root = superblock.root.unwrap();
        seen.insert(store.read(root, ExtentKind::MANIFEST).unwrap());
    }
    assert!(
        seen.contains(b"second".as_slice()),
        "some crashes keep the new superblock"
    );
    assert!(seen.contains(b"first".as_slice()));
}

#[test]
fn opening_garbage_says_it_is_not_a_store() {
    let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(1 << 20));
    let err = ZoneStore::open(cache(disk), config()).err().unwrap();
    assert!(matches!(err, ZoneError::NotAStore(_)), "{err}");
}

#[test]
fn both_superblock_slots_are_read_and_a_damaged_one_named() {
    let (disk, store) = new_store();
    let (root, _) = store.append(ExtentKind::MANIFEST, b"m", &[]).unwrap();
    store.write_superblock(Some(root), &[]).unwrap();
    store.cache().flush_all().unwrap();
    drop(store);
    let slots = stitch_zone::read_slots(&cache(disk.clone())).unwrap();
    assert_eq!(slots.len(), 2);
    assert!(slots
        .iter()
        .all(|(_, s)| matches!(s, stitch_zone::SlotState::Valid(_))));
    // Either slot damaged is reported, though the other one opens the store.
    for offset in [0u64, 4096] {
        let mut saved = [0u8; 8];
        disk.read_at(offset + 12, &mut saved).unwrap();
        disk.write_at(offset + 12, &[0xFF; 8]).unwrap();
        let slots = stitch_zone::read_slots(&cache(disk.clone())).unwrap();
        let damaged: Vec<u64> = slots
            .iter()
            .filter(|(_, s)| matches!(s, stitch_zone::SlotState::Damaged(_)))
            .map(|(at, _)| *at)
            .collect();
        assert_eq!(damaged, vec![offset]);
        assert!(ZoneStore::open(cache(disk.clone()), config()).is_ok());
        disk.write_at(offset + 12, &saved).unwrap();
    }
}

#[test]
fn extents_in_a_zone_are_found_without_their_addresses_even_past_damage() {
    let (disk, store) = new_store();
    let mut written = Vec::new();
    for i in 0..20u8 {
        let kind = if i % 5 == 4 {
            ExtentKind::RUN_INDEX
        } else {
            ExtentKind::RUN_BLOCK
        };
        let (addr, _) = store
            .append(kind, &vec![i; 100 + 37 * i as usize], &[])
            .unwrap();
        written.push((addr, kind));
    }
    store.cache().flush_all().unwrap();
    let zone = written[0].0.zone;
    assert!(written.iter().all(|(a, _)| a.zone == zone));
    assert_eq!(store.extents_in(zone).unwrap(), written);
    // A damaged extent is left out; the ones after it are still found.
    let bad = written[7].0;
    let at = store.zone_offset(bad.zone) + u64::from(bad.offset) + 20;
    disk.write_at(at, &[0xAA; 4]).unwrap();
    let store = ZoneStore::open(cache(disk), config()).unwrap().0;
    let mut expected = written.clone();
    expected.remove(7);
    assert_eq!(store.extents_in(zone).unwrap(), expected);
    assert!(store.extents_in(0).unwrap().is_empty());
    assert!(store.extents_in(1_000).unwrap().is_empty());
}

#[test]
fn zones_the_older_checkpoint_names_are_held_at_open_until_the_next_superblock() {
    let (disk, store) = new_store();
    let addrs = fill_zones_until(&store, 1, 3);
    empty_zone(&store, &addrs, 1);
    empty_zone(&store, &addrs, 2);
    store.write_superblock(None, &[]).unwrap();
    store.cache().flush_all().unwrap();
    drop(store);
    // Nothing claims zones 1 to 3; the older checkpoint names zone 2.
    let (store, _) = ZoneStore::open(cache(disk.clone()), config()).unwrap();
    store.keep_for_older_checkpoint([2]);
    store.finish_open().unwrap();
    let stats = store.stats();
    assert_eq!((stats.held_zones, stats.recycled_zones), (1, 2));
    let taken = store.alloc_zone().unwrap();
    assert_ne!(taken, 2, "a held zone is not reused");
    store.write_superblock(None, &[]).unwrap();
    store.cache().flush_all().unwrap();
    assert_eq!(store.stats().held_zones, 0);
    assert_eq!(
        store.alloc_zone().unwrap(),
        2,
        "free once the next superblock is durable"
    );
}

/// A store on a memory disk that may grow to `zones` zones, holding `reserve` back.
fn limited_store(zones: u64, reserve: Reserve) -> (Arc<dyn Disk>, ZoneStore) {
    let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    let cfg = ZoneConfig {
        zone_size: ZONE,
        max_size: Some(zones * ZONE),
        ..ZoneConfig::default()
    };
    let store = ZoneStore::create(cache(disk.clone()), cfg).unwrap();
    store.set_reserve(reserve);
    (disk, store)
}

#[test]
fn a_reserve_is_held_back_until_lifted() {
    let (disk, store) = limited_store(
        10,
        Reserve {
            log: 5,
            merges: 3,
            extents: 3,
        },
    );
    // Zone 0 holds the superblocks; of the other 9, log segments leave 5.
    let mut log = Vec::new();
    let err = loop {
        match store.alloc_zone() {
            Ok(z) => log.push(z),
            Err(e) => break e,
        }
    };
    assert_eq!(log.len(), 4);
    assert!(
        matches!(&err, ZoneError::NoSpace(why) if why.contains("5 free zones are held back")),
        "{err}"
    );
    // The store grew to keep them.
    assert_eq!(disk.len(), 10 * ZONE);
    // Extent zones leave 3: two more zones' worth of appends fit.
    let mut extents = 0;
    while store
        .append(ExtentKind::RUN_BLOCK, &vec![1u8; (ZONE / 2) as usize], &[])
        .is_ok()
    {
        extents += 1;
    }
    assert_eq!(extents, 2);
    // Lifted (as opening does), the rest can be taken.
    store.set_reserve(Reserve::default());
    for _ in 0..3 {
        store.alloc_zone().unwrap();
    }
    assert!(matches!(store.alloc_zone(), Err(ZoneError::NoSpace(_))));
}

#[test]
fn merges_stop_between_the_log_and_the_flushes_and_room_is_asked_by_tier() {
    let (disk, store) = limited_store(
        12,
        Reserve {
            log: 6,
            merges: 4,
            extents: 2,
        },
    );
    // Of the 11 zones past the superblocks' one, 5 can be log segments.
    while store.alloc_zone().is_ok() {}
    assert!(!store.has_room_beyond(|r| r.log));
    assert!(store.has_room_beyond(|r| r.merges));
    // A merge's stream takes the zones down to 4 free (an extent of half a zone and its
    // header take a zone each) ...
    let half = vec![1u8; (ZONE / 2) as usize];
    let appends = |stream| {
        let mut n = 0;
        while store
            .append_to(stream, ExtentKind::RUN_BLOCK, &half, &[])
            .is_ok()
        {
            n += 1;
        }
        n
    };
    assert_eq!(appends(Stream::Merge), 2);
    assert!(!store.has_room_beyond(|r| r.merges));
    assert!(store.has_room_beyond(|r| r.extents));
    // ... a flush's down to 2.
    assert_eq!(appends(Stream::Flush), 2);
    assert!(!store.has_room_beyond(|r| r.extents));
    assert!(store.has_room_beyond(|r| r.extents - 1));
    assert_eq!(disk.len(), 12 * ZONE);
}

#[test]
fn a_log_zone_never_written_is_filled_with_zeros_and_a_recycled_one_is_not_rewritten() {
    let counting = Arc::new(stitch_io::CountingDisk::new(Arc::new(MemDisk::new(0))));
    let disk: Arc<dyn Disk> = counting.clone();
    let store = ZoneStore::create(cache(disk.clone()), config()).unwrap();
    let written = Arc::new(Mutex::new(Vec::new()));
    let seen = written.clone();
    counting.set_hook(move |r| {
        if let stitch_io::DiskRequest::Write { offset, len } = r {
            seen.lock().push((offset, len));
        }
    });
    let bytes_into = |zone: u32| -> u64 {
        let (start, end) = (u64::from(zone) * ZONE, u64::from(zone + 1) * ZONE);
        written
            .lock()
            .iter()
            .map(|&(o, l)| (o + l).min(end).saturating_sub(o.max(start)))
            .sum()
    };
    // A new zone: its blocks are written (with zeros) before its owner's first write, so the
    // log's appends overwrite them; not while it is taken (a commit waits for that), but by
    // a background thread's `zero_zones`.
    let fresh = store.alloc_zone().unwrap();
    assert_eq!(
        bytes_into(fresh),
        0,
        "nothing written while the zone is taken"
    );
    store.zero_zones();
    assert_eq!(
        bytes_into(fresh),
        ZONE,
        "every byte of the new zone written"
    );
    store.zone_ready(fresh);
    assert_eq!(bytes_into(fresh), ZONE, "and only once");
    assert!(zone_bytes(&*disk, fresh).iter().all(|&b| b == 0));
    // A recycled zone (emptied, its blocks written before) is taken as it is.
    let addrs = fill_zones_until(&store, 1, fresh + 2);
    empty_zone(&store, &addrs, fresh + 1);
    assert_eq!(store.stats().recycled_zones, 1);
    written.lock().clear();
    let reused = store.alloc_zone().unwrap();
    assert_eq!(reused, fresh + 1, "the recycled zone is taken first");
    assert_eq!(bytes_into(reused), 0, "not rewritten");
    assert!(
        zone_bytes(&*disk, reused).contains(&1),
        "its old contents stay"
    );
}

#[test]
fn zeros_go_in_steps_and_stop_at_the_owners_first_write_and_a_released_zone_gets_none() {
    const BIG: u64 = 4 << 20;
    let counting = Arc::new(stitch_io::CountingDisk::new(Arc::new(MemDisk::new(0))));
    let disk: Arc<dyn Disk> = counting.clone();
    let store = ZoneStore::create(
        cache(disk.clone()),
        ZoneConfig {
            zone_size: BIG,
            ..config()
        },
    )
    .unwrap();
    let written = Arc::new(Mutex::new(0u64));
    let seen = written.clone();
    counting.set_hook(move |r| {
        if let stitch_io::DiskRequest::Write { len, .. } = r {
            *seen.lock() += len;
        }
    });
    let zone = store.alloc_zone().unwrap();
    store.zero_zones();
    let step = *written.lock();
    assert!(
        step > 0 && step < BIG,
        "one step of a 4 MiB zone's zeros: {step} bytes"
    );
    store.zone_ready(zone);
    assert_eq!(*written.lock(), step, "no zeros once the owner writes");
    assert!(
        zone_bytes(&*disk, zone).iter().all(|&b| b == 0),
        "the zone reads as zeros all the same"
    );
    store.zero_zones();
    assert_eq!(*written.lock(), step, "nor later");

    let released = store.alloc_zone().unwrap();
    store.release_zone(released, PatchId::NONE).unwrap();
    store.zero_zones();
    store.zone_ready(released);
    assert_eq!(*written.lock(), step, "no zeros for a zone given back");
}

/// Bytes appended in 4,000-byte extents until the store is full.
fn append_until_full(store: &ZoneStore) -> u64 {
    let mut appended = 0;
    loop {
        match store.append(ExtentKind::RUN_BLOCK, &[5u8; 4000], &[]) {
            Ok(_) => appended += 4000,
            Err(ZoneError::NoSpace(_)) => return appended,
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
}

#[test]
fn zones_allocated_ahead_are_taken_before_the_store_grows() {
    let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    let cfg = ZoneConfig {
        ahead_zones: 3,
        recycle_bytes: 0,
        ..config()
    };
    let store = ZoneStore::create(cache(disk.clone()), cfg).unwrap();
    // The first append takes zone 1, allocating it on the spot: zones are short.
    store
        .append(ExtentKind::RUN_BLOCK, &[1u8; 4000], &[])
        .unwrap();
    assert_eq!(store.stats().zones, 2);
    assert!(store.wait_for_shortage(), "taking a zone asks for more");
    store.allocate_ahead();
    // One zone in use: one ahead (a quarter of the zones in use, at least one), and one
    // more for the mirror stream's reserve (one beyond the extents').
    let stats = store.stats();
    assert_eq!((stats.ready_zones, stats.zones), (2, 4));
    assert_eq!(disk.len(), 4 * ZONE, "the file grew for them");
    assert_eq!(store.stats().free_zones, 2, "ready zones are free");
    // Filling zone 1 and the next two takes the ready zones: the file does not grow.
    let addrs = fill_zones_until(&store, 2, 3);
    let taken: std::collections::BTreeSet<u32> = addrs.iter().map(|a| a.zone).collect();
    assert_eq!(taken, (1..=3).collect());
    let stats = store.stats();
    assert_eq!((stats.ready_zones, stats.zones), (0, 4));
    assert_eq!(disk.len(), 4 * ZONE);
    // Once they are gone, the next zone is allocated by the taker again.
    fill_zones_until(&store, 3, 8);
    assert_eq!(store.stats().zones, 9);
    // Eight zones in use: two ahead.
    store.allocate_ahead();
    assert_eq!(store.stats().ready_zones, 1 + 2);
    // Twenty in use: a quarter would be five, but `ahead_zones` is three.
    fill_zones_until(&store, 4, 20);
    store.allocate_ahead();
    assert_eq!(store.stats().ready_zones, 1 + 3);
}

#[test]
fn allocating_ahead_stops_at_the_size_limit_and_takes_no_room_from_writers() {
    let full = |ahead_zones: u64| {
        let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
        let cfg = ZoneConfig {
            max_size: Some(3 * ZONE),
            ahead_zones,
            ..config()
        };
        let store = ZoneStore::create(cache(disk.clone()), cfg).unwrap();
        store
            .append(ExtentKind::RUN_BLOCK, &[1u8; 4000], &[])
            .unwrap();
        store.allocate_ahead();
        let ready = store.stats().ready_zones;
        assert!(disk.len() <= 3 * ZONE, "never past the limit");
        (ready, 4000 + append_until_full(&store))
    };
    let (ready, with) = full(8);
    // It wants two (one ahead of the one zone in use, one for the reserve); one fits.
    assert_eq!(ready, 1, "every zone up to the limit, and no error");
    let (none, without) = full(0);
    assert_eq!(none, 0);
    assert_eq!(with, without, "writers fill the same room");
}

#[test]
fn a_stopped_store_neither_waits_for_a_shortage_nor_allocates_ahead() {
    let (_disk, store) = new_store();
    let store = Arc::new(store);
    let waiter = {
        let store = store.clone();
        std::thread::spawn(move || store.wait_for_shortage())
    };
    store.stop_ahead();
    assert!(!waiter.join().unwrap());
    assert!(!store.wait_for_shortage(), "stopped for good");
    // Zones run short, but a closing store allocates nothing more.
    store
        .append(ExtentKind::RUN_BLOCK, &[1u8; 4000], &[])
        .unwrap();
    store.allocate_ahead();
    assert_eq!(store.stats().ready_zones, 0);
}
