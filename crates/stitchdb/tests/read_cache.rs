//! The read cache keeps what point reads and seeks touch, not what scans and merges stream
//! through: a scan over a whole table leaves at most a short scan's blocks per run (the block
//! it started in and 32 KiB after it), reads cache a block they miss twice, and merges leave
//! the blocks point reads cached where they were.

#![allow(clippy::unwrap_used)]

use std::ops::Bound;
use std::sync::Arc;
use stitchdb::{Db, Disk, Durability, MemDisk, Options, TableId, WriteBatch};

fn store(read_cache_bytes: usize) -> Db {
    let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
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
    // At most the first block and 32 KiB of blocks of about 4 KiB after it, in each run
    // (none read for the first time: the cache admits a block at its second miss).
    let short_scan = 1 + (32 << 10) / 3000;
    assert!(
        after_scan <= runs * short_scan,
        "a scan over {runs} runs left {after_scan} blocks cached"
    );

    // Blocks read once are not cached; read again, they are.
    for k in keys.iter().step_by(50) {
        assert!(db.get(t, k).unwrap().is_some());
    }
    let once = db.stats().read_cache_blocks;
    for k in keys.iter().step_by(50) {
        assert!(db.get(t, k).unwrap().is_some());
    }
    let twice = db.stats().read_cache_blocks;
    // (Once, a few blocks are read twice already: two of the keys share them.)
    assert!(
        once - after_scan < (twice - after_scan) / 3 && twice > after_scan + 200,
        "point reads cached {once} blocks once and {twice} twice, a scan {after_scan}"
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
