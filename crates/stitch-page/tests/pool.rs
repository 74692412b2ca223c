//! The buffer pool on its own: LRU-2 keeps a page used twice over pages touched once, pinned
//! frames are never evicted, and a dirty page evicted is written back and read again intact.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use stitch_io::{Disk, MemDisk};
use stitch_page::file::PageFile;
use stitch_page::page::BODY_LEN;
use stitch_page::pool::{Load, Pool};
use stitch_page::PageError;
use stitch_patch::{BlockCache, CacheConfig};
use stitch_zone::{ZoneConfig, ZoneStore};

fn pool(frames: usize) -> Pool {
    let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    let cache = Arc::new(BlockCache::new(disk, CacheConfig::default()));
    let zones = Arc::new(
        ZoneStore::create(
            cache,
            ZoneConfig {
                zone_size: 256 * 1024,
                ..ZoneConfig::default()
            },
        )
        .unwrap(),
    );
    let mut file = PageFile::new(zones, Vec::new());
    file.grow().unwrap();
    let mut pool = Pool::new(file, frames);
    // Every page written once, so later pins read valid pages.
    for page in 0..64 {
        let f = pool.pin(page, Load::Fresh, None).unwrap();
        pool.write(f, 0, &[4, page as u8], 1);
        pool.unpin(f);
    }
    pool.flush_all().unwrap();
    pool
}

fn touch(pool: &mut Pool, page: u32) {
    let f = pool.pin(page, Load::Verify, None).unwrap();
    assert_eq!(pool.body(f)[1], page as u8, "page {page} read back");
    pool.unpin(f);
}

#[test]
fn a_page_used_twice_outlives_a_scan_of_pages_touched_once() {
    let mut pool = pool(8);
    touch(&mut pool, 40);
    touch(&mut pool, 40);
    for page in 0..30 {
        touch(&mut pool, page);
    }
    let hits = pool.stats().hits;
    touch(&mut pool, 40);
    assert_eq!(pool.stats().hits, hits + 1, "page 40 was evicted by a scan");
    // Plain LRU would have kept the scan's last 8 pages (22 among them) and evicted page 40.
    let reads = pool.stats().reads;
    touch(&mut pool, 22);
    assert_eq!(pool.stats().reads, reads + 1);
}

#[test]
fn pinned_frames_stay_and_a_full_pool_of_pins_is_an_error() {
    let mut pool = pool(4);
    let pinned: Vec<_> = (0..4)
        .map(|p| pool.pin(p, Load::Verify, None).unwrap())
        .collect();
    assert!(matches!(
        pool.pin(10, Load::Verify, None),
        Err(PageError::PoolExhausted(4))
    ));
    pool.unpin(pinned[2]);
    touch(&mut pool, 10);
    for (page, &f) in pinned.iter().enumerate() {
        if page != 2 {
            assert_eq!(pool.body(f)[1], page as u8);
        }
    }
}

#[test]
fn a_dirty_page_evicted_is_written_back() {
    let mut pool = pool(4);
    let f = pool.pin(5, Load::Verify, None).unwrap();
    let mut body = pool.body(f).to_vec();
    body[100..110].fill(9);
    pool.write(f, 0, &body, 7);
    pool.unpin(f);
    for page in 10..20 {
        touch(&mut pool, page);
    }
    assert!(pool.stats().evictions_written >= 1);
    let f = pool.pin(5, Load::Verify, None).unwrap();
    assert_eq!((pool.body(f)[100], pool.lsn(f)), (9, 7));
    assert_eq!(pool.body(f).len(), BODY_LEN);
    pool.unpin(f);
}
