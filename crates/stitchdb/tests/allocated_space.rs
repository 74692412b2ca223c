//! The room a store takes on its device. A store on a file takes blocks as it writes them:
//! while the device has room to spare, zones are not allocated before use and the free zones
//! the store holds back (its reserve) take no blocks, so a small store is about as large as
//! what it holds. Once the device could run short (its free space under the watermark:
//! `ZoneStore::update_backing`), the reserve and every zone being written are allocated, so a
//! store that fills its device refuses writes cleanly and reopens read-write. The device here
//! is a simulated disk on a modelled file system (`SimDisk::set_file_system`), which counts
//! the blocks taken as `du` does.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};
use stitchdb::{Db, Disk, Durability, Options, SimConfig, SimDisk, WriteBatch};

const MIB: u64 = 1 << 20;

/// A simulated disk on a file system of `size` bytes.
fn disk_on_file_system(size: u64) -> Arc<SimDisk> {
    let disk = Arc::new(SimDisk::new(SimConfig {
        seed: 7,
        len: 0,
        capacity: None,
    }));
    disk.set_file_system(Some(size));
    disk
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Records of the engines benchmark's bulk load: 16-byte keys and 100-byte values, both
/// pseudo-random (so they land all over the key space and merges rewrite them).
const KEY_LEN: u64 = 16;
const VALUE_LEN: u64 = 100;

fn record(i: u64) -> (Vec<u8>, Vec<u8>) {
    let mut key = splitmix64(i).to_be_bytes().to_vec();
    key.extend_from_slice(&splitmix64(i ^ 0x5555_5555).to_be_bytes());
    let value = (0..VALUE_LEN / 8)
        .flat_map(|j| splitmix64(i.wrapping_mul(31).wrapping_add(j) ^ 0xabcd).to_le_bytes())
        .chain([0u8; (VALUE_LEN % 8) as usize])
        .collect();
    (key, value)
}

/// Loads `n` records in batches of 10,000, the last one synced (the benchmark's bulk load).
fn bulk_load(db: &Db, n: u64) {
    let t = db.default_table();
    let mut from = 0;
    while from < n {
        let to = (from + 10_000).min(n);
        let mut batch = WriteBatch::new();
        for i in from..to {
            let (k, v) = record(i);
            batch.put(t, k, v);
        }
        let durability = if to == n {
            Durability::Sync
        } else {
            Durability::Async
        };
        db.write(&batch, durability).unwrap();
        from = to;
    }
}

/// The most a store may take after loading `data` bytes of records: its runs, twice over (a
/// merge's output is written before its inputs are dropped, and freed zones are kept
/// allocated for reuse), the log's segments (the one being written, the next, and one the
/// next checkpoint gives back) and three zones partly written (flushes, merges, manifests),
/// each of `zone` bytes. Free zones allocated ahead or held back without need would add a
/// zone each: the reserve alone is eleven zones with the default options, and was allocated
/// whatever the device's room (a store of 248 MiB after this load).
fn bound(data: u64, zone: u64) -> u64 {
    2 * data + (3 + 3) * zone
}

fn small_load_allocates_about_its_data(background: bool) {
    let disk = disk_on_file_system(1 << 40);
    let opts = Options {
        background,
        ..Options::default()
    };
    let zone = opts.zone_size;
    let records = 200_000;
    let data = records * (KEY_LEN + VALUE_LEN);
    let db = Db::create_on(disk.clone(), opts.clone()).unwrap();
    bulk_load(&db, records);
    if background {
        // Let the background allocator reach its target, so the zones it keeps ahead are
        // counted (bounded, not timed: it gives up after a minute, and the bound holds
        // either way).
        let deadline = Instant::now() + Duration::from_secs(60);
        let ahead = |z: &stitchdb::ZoneStats| {
            // Those held back (eleven zones) and a quarter of those in use.
            let in_use = z.zones - z.free_zones - 1;
            z.free_zones >= 11 + (in_use / 4).clamp(1, 8)
        };
        while !ahead(&db.stats().zones) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let stats = db.stats().zones;
    let allocated = disk.allocated_bytes().unwrap();
    eprintln!(
        "{records} records ({data} bytes): {allocated} bytes allocated ({} MiB), file {} MiB, {stats:?}",
        allocated / MIB,
        disk.len() / MIB
    );
    assert!(!stats.backed, "the device has room to spare");
    assert!(
        allocated <= bound(data, zone),
        "{allocated} bytes allocated for {data} bytes of records (at most {})",
        bound(data, zone)
    );
    db.close().unwrap();
    // Reopening allocates nothing more: free zones found at open take no blocks.
    let db = Db::open_on(disk.clone(), opts).unwrap();
    let allocated = disk.allocated_bytes().unwrap();
    eprintln!("reopened: {allocated} bytes allocated");
    assert!(
        allocated <= bound(data, zone),
        "{allocated} after reopening"
    );
    assert!(db.get(db.default_table(), record(17).0).unwrap().is_some());
    db.close().unwrap();
}

#[test]
fn a_small_load_allocates_about_its_data() {
    small_load_allocates_about_its_data(false);
}

#[test]
fn a_small_load_allocates_about_its_data_with_background_threads() {
    small_load_allocates_about_its_data(true);
}

fn small_options() -> Options {
    Options {
        zone_size: 64 * 1024,
        memtable_size: 8 * 1024,
        background: false,
        ..Options::default()
    }
}

/// Puts values of 900 bytes from `from` until one is refused; returns how many went in.
fn fill_until_refused(db: &Db, from: u32) -> u32 {
    let t = db.default_table();
    let mut written = from;
    loop {
        match db.put(t, format!("key{written:06}"), vec![7u8; 900]) {
            Ok(()) => written += 1,
            Err(e) => {
                assert!(e.is_no_space(), "{e}");
                return written;
            }
        }
        assert!(written < 100_000, "the device never filled");
    }
}

fn count(db: &Db) -> u32 {
    db.scan_prefix(db.default_table(), b"").unwrap().count() as u32
}

/// After the device filled: the store reopens read-write on the full device, holds every
/// acknowledged write, takes a delete, and closes and reopens again holding what it should.
/// (Writing again after deletes is not asked: on a file system with no block left, the
/// merges of a reclaim have one zone above the tier a flush of deletes leaves, too few to
/// drop these deletes; a limit of the reserve's size, not of backing, as it is the same
/// with every zone backed from the start.)
fn reopens_read_write(disk: Arc<SimDisk>, written: u32) {
    let db = Db::open_on(disk.clone(), small_options()).unwrap();
    assert_eq!(count(&db), written, "every acknowledged write survived");
    let t = db.default_table();
    let deleted = written / 4;
    db.delete_range(t, b"key".as_slice(), format!("key{deleted:06}").as_bytes())
        .unwrap();
    db.close().unwrap();
    let db = Db::open_on(disk, small_options()).unwrap();
    assert_eq!(count(&db), written - deleted);
    db.check().unwrap();
    db.close().unwrap();
}

#[test]
fn a_store_filling_its_device_backs_its_reserve_and_reopens() {
    // Room for about 64 zones of 64 KiB: the store starts well above the watermark.
    let disk = disk_on_file_system(4 * MIB);
    let db = Db::create_on(disk.clone(), small_options()).unwrap();
    let written = 200;
    let t = db.default_table();
    for i in 0..written {
        db.put(t, format!("key{i:06}"), vec![7u8; 900]).unwrap();
    }
    let before = disk.allocated_bytes().unwrap();
    assert!(!db.stats().zones.backed, "room to spare at first");
    // The reserve (eleven zones) takes no blocks yet.
    assert!(before < 11 * 64 * 1024, "{before} bytes allocated");
    let written = fill_until_refused(&db, written);
    let stats = db.stats().zones;
    assert!(stats.backed, "the device ran short: {stats:?}");
    let left = disk.space().unwrap().available;
    assert!(
        left < 64 * 1024,
        "the store filled the device: {left} bytes left"
    );
    drop(db);
    reopens_read_write(disk, written);
}

#[test]
fn another_writer_filling_the_device_makes_the_store_back_its_reserve() {
    let disk = disk_on_file_system(64 * MIB);
    let db = Db::create_on(disk.clone(), small_options()).unwrap();
    let written = 200;
    let t = db.default_table();
    for i in 0..written {
        db.put(t, format!("key{i:06}"), vec![7u8; 900]).unwrap();
    }
    assert!(!db.stats().zones.backed);
    // Another writer leaves the store 2 MiB: under the watermark (the reserve's 704 KiB,
    // twice the zones being written, and 1 MiB for 1/64 of the device), above what backing
    // needs. The next zone the store takes backs the reserve and the zones being written.
    let others = 64 * MIB - disk.allocated_bytes().unwrap() - 2 * MIB;
    disk.set_others_on_file_system(others);
    let mut i = written;
    while !db.stats().zones.backed {
        db.put(t, format!("key{i:06}"), vec![7u8; 900]).unwrap();
        i += 1;
        assert!(i < written + 1000, "the store never backed its zones");
    }
    // Then it takes the rest: the store's next zone is refused, nothing is lost, and the
    // store reopens read-write on the full device.
    let left = disk.space().unwrap().available;
    disk.set_others_on_file_system(others + left);
    let written = fill_until_refused(&db, i);
    drop(db);
    reopens_read_write(disk, written);
}
