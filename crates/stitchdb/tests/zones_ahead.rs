//! The store's background zone allocator keeps free zones allocated ahead of need, so
//! writers moving to a new zone do not wait for the file system to allocate it
//! (`Options::ahead_zones`; the zone store's own tests check how the zones are taken).

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};
use stitchdb::{Db, MemDisk, Options};

fn write_some(db: &Db) {
    let t = db.default_table();
    let value = vec![0x33_u8; 1000];
    for i in 0..2000u32 {
        db.put(t, i.to_be_bytes(), &value).unwrap();
    }
    db.flush().unwrap();
}

fn options(ahead_zones: u64) -> Options {
    Options {
        zone_size: 64 << 10,
        memtable_size: 64 << 10,
        ahead_zones,
        // Zones merges free are punched, not kept allocated: the allocated free zones are
        // then the ready ones alone (recycled ones count towards the target too, and how
        // many there are depends on when the background merges ran).
        recycle_bytes: 0,
        ..Options::default()
    }
}

/// Free zones allocated in a store after `write_some`, once `wanted` of them are (waiting for
/// the background allocator, bounded, not timed).
fn ready_zones(ahead_zones: u64, wanted: u64) -> u64 {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options(ahead_zones)).unwrap();
    write_some(&db);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut ready = db.stats().zones.ready_zones;
    while ready < wanted && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
        ready = db.stats().zones.ready_zones;
    }
    let t = db.default_table();
    assert_eq!(
        db.get(t, 1999u32.to_be_bytes()).unwrap().unwrap().len(),
        1000
    );
    // Closing stops the allocator's thread (a close that hung would never return).
    db.close().unwrap();
    ready
}

#[test]
fn the_background_keeps_zones_allocated_beyond_the_reserve() {
    // Without allocating ahead, the only allocated free zones are the reserve's, which
    // writers allocate themselves when they take zones.
    let reserve = ready_zones(0, 0);
    assert!(reserve > 0);
    let ready = ready_zones(4, reserve + 4);
    assert!(
        ready >= reserve + 4,
        "{ready} ready, {reserve} without allocating ahead"
    );
}
