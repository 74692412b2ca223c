//! Test doubles and helpers shared by the integration tests.
// Each test file compiles this module on its own and uses only part of it.
#![allow(dead_code)]

use std::sync::Arc;
use stitch_io::{CountingDisk, Disk, SimConfig, SimDisk};
use stitch_patch::{BlockCache, CacheConfig};

pub const BLOCK: u64 = 4096;

pub fn sim_disk(blocks: u64, seed: u64) -> Arc<SimDisk> {
    Arc::new(SimDisk::new(SimConfig {
        seed,
        len: blocks * BLOCK,
        capacity: None,
    }))
}

pub fn cache_on(disk: Arc<dyn Disk>) -> Arc<BlockCache> {
    Arc::new(BlockCache::new(disk, CacheConfig::default()))
}

/// A cache keeping only `clean_blocks` clean blocks, so reads go to the disk often.
pub fn small_cache_on(disk: Arc<dyn Disk>, clean_blocks: usize) -> Arc<BlockCache> {
    Arc::new(BlockCache::new(
        disk,
        CacheConfig {
            block_size: BLOCK as usize,
            clean_blocks,
        },
    ))
}

/// A counting SimDisk of `blocks` blocks and a cache on it.
pub fn setup(blocks: u64) -> (Arc<SimDisk>, Arc<CountingDisk>, Arc<BlockCache>) {
    let sim = sim_disk(blocks, 7);
    let counting = Arc::new(CountingDisk::new(sim.clone()));
    let cache = cache_on(counting.clone());
    (sim, counting, cache)
}

pub fn read_disk(disk: &dyn Disk, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0; len];
    disk.read_at(offset, &mut buf).expect("read the disk");
    buf
}

pub fn read_cache(cache: &BlockCache, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0; len];
    cache
        .read(offset, &mut buf)
        .expect("read through the cache");
    buf
}
