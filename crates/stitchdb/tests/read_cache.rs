//! The read cache keeps what point reads and seeks touch, not what scans and merges stream
//! through: a scan over a whole table leaves at most a short scan's blocks per run (the block
//! it started in and 32 KiB after it), reads cache what they read while the cache has room
//! and, once it is full, a block they miss twice (not one read once), and merges leave the
//! blocks point reads cached where they were.

#![allow(clippy::unwrap_used)]

use std::ops::Bound;
use std::sync::Arc;
use stitch_io::CountingDisk;
use stitchdb::{Db, Disk, Durability, MemDisk, Options, TableId, WriteBatch};

fn store(read_cache_bytes: usize) -> Db {
    store_on(Arc::new(MemDisk::new(0)), read_cache_bytes)
}

fn store_on(disk: Arc<dyn Disk>, read_cache_bytes: usize) -> Db {
    let opts = Options {
        zone_size: 256 * 1024,
        memtable_size: 64 * 1024,
        read_cache_bytes,
        background: false,
        durability: Durability::Async,
        ..Options::default()
    };
    Db::create_on(disk, opts).unwrap()
}

/// Writes `n` scattered keys with 100-byte values, then flushes: several runs and merges.
fn fill(db: &Db, t: TableId, n: u32) -> Vec<Vec<u8>> {
    let keys: Vec<Vec<u8>> = (0..n)
        .map(|i| format!("key{:08}", i.wrapping_mul(2_654_435_761) % 1_000_000).into_bytes())
        .collect();
    for (i, k) in keys.iter().enumerate() {
        let mut b = WriteBatch::new();
        b.put(t, k.clone(), vec![i as u8; 100]);
        db.write(&b, Durability::Async).unwrap();
    }
    db.flush().unwrap();
    keys
}

#[test]
fn scans_do_not_fill_the_read_cache_but_point_reads_do() {
    let db = store(64 << 20);
    let t = db.default_table();
    let keys = fill(&db, t, 20_000);
    let stats = db.stats();
    let runs: usize = stats.tables[0].levels.iter().sum();
    assert!(stats.merges > 3, "{stats:?}");

    let scanned = db
        .range(t, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .count();
    assert_eq!(scanned, keys.len());
    let after_scan = db.stats().read_cache_blocks;
    // At most the first block and 32 KiB of blocks of about 4 KiB after it, in each run.
    let short_scan = 1 + (32 << 10) / 3000;
    assert!(
        after_scan <= runs * short_scan,
        "a scan over {runs} runs left {after_scan} blocks cached"
    );

    // With room in the cache, point reads cache the blocks they read.
    for k in keys.iter().step_by(50) {
        assert!(db.get(t, k).unwrap().is_some());
    }
    let read = db.stats().read_cache_blocks;
    assert!(
        read > after_scan + 200,
        "point reads left {read} blocks cached, a scan {after_scan}"
    );
}

/// Once the cache is full, a block read once is not cached (so reads over many more blocks
/// than the cache holds do not push out what is read often), and one read twice is.
#[test]
fn a_full_cache_admits_a_block_at_its_second_miss() {
    let disk = Arc::new(CountingDisk::new(Arc::new(MemDisk::new(0))));
    // A few hundred blocks at most (16 shards of 64 KiB); the table has about 600.
    let db = store_on(disk.clone(), 16 * 64 * 1024);
    let t = db.default_table();
    let mut keys = fill(&db, t, 20_000);
    keys.sort();
    // One key every 40 (a block holds about 33), each in a block of its own.
    let spread: Vec<&Vec<u8>> = keys.iter().step_by(40).collect();
    let (hot, cold) = spread.split_at(10);
    let disk_reads = |keys: &[&Vec<u8>]| {
        let before = disk.reads();
        for k in keys {
            assert!(db.get(t, k).unwrap().is_some());
        }
        disk.reads() - before
    };
    assert!(disk_reads(hot) >= 10, "the hot blocks were read");
    assert_eq!(disk_reads(hot), 0, "a cache with room keeps what it read");
    // More blocks than the cache holds, each read once: they fill the room left, then are
    // not admitted.
    assert!(disk_reads(cold) >= cold.len() as u64);
    let full = db.stats().read_cache_blocks;
    assert!(full < cold.len(), "{full} blocks cached of {}", cold.len());
    assert_eq!(
        disk_reads(hot),
        0,
        "blocks read once pushed out the hot ones"
    );
    // The last cold blocks, missed a second time lately, are admitted.
    let again = &cold[cold.len() - 10..];
    assert!(disk_reads(again) >= 10);
    assert_eq!(disk_reads(again), 0, "blocks missed twice are cached");
    let bytes = db.stats().read_cache_bytes;
    assert!(
        bytes <= 16 * 64 * 1024,
        "{bytes} bytes cached: over the budget"
    );
}

#[test]
fn merges_leave_what_point_reads_cached() {
    // A cache of a few blocks per shard: one merge's input would push everything out.
    let db = store(16 * 24 * 1024);
    let hot = db.default_table();
    let hot_keys = fill(&db, hot, 300);
    for k in &hot_keys {
        assert!(db.get(hot, k).unwrap().is_some());
    }
    let warm = db.stats().read_cache_blocks;
    assert!(warm >= 5, "only {warm} blocks cached");
    let cold = db.create_table("cold").unwrap();
    fill(&db, cold, 20_000);
    let stats = db.stats();
    assert!(stats.merges > 10, "{stats:?}");
    assert_eq!(
        stats.read_cache_blocks, warm,
        "merges evicted cached blocks"
    );
}
