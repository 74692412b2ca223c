//! The read cache: parsed run blocks by extent address, least recently used out first, bounded
//! in bytes. Blocks never change once written, so entries never go stale; a released extent's
//! entry is dropped by the run-block release handler (its address may be reused).
//!
//! Until it is full, the cache admits every block read. Once full, a block is admitted only
//! at its second miss within a while (the cache remembers the addresses of recent first
//! misses, a few per cached block, not their contents): a block read once is looked up in
//! its raw bytes instead of parsed (see `Block::find`), so random reads over far more blocks
//! than the cache holds parse none of them and do not churn it, and a hot block costs one
//! extra read from the disk before it is cached. A cache with room admits at the first miss
//! because admitting evicts nothing there: a working set the cache holds is cached after
//! one read of each block, not two.

use super::block::Block;
use lru::LruCache;
use parking_lot::Mutex;
use std::hash::BuildHasher;
use std::sync::Arc;
use stitch_zone::ExtentAddr;

const SHARDS: usize = 16;

struct Shard {
    map: LruCache<ExtentAddr, Arc<Block>>,
    bytes: usize,
    /// Addresses of blocks a point read missed once lately, not cached (see the module's
    /// comment), least recently missed out first.
    missed: LruCache<ExtentAddr, ()>,
}

/// Addresses [`Shard::missed`] remembers per 4 KiB of cache budget: a block missed again
/// within about this many cache-fulls of misses is admitted.
const MISSES_REMEMBERED_PER_BLOCK: usize = 2;

pub struct ReadCache {
    shards: Vec<Mutex<Shard>>,
    budget_per_shard: usize,
    hasher: std::collections::hash_map::RandomState,
}

impl ReadCache {
    pub fn new(bytes: usize) -> ReadCache {
        let shards = (0..SHARDS)
            .map(|_| {
                Mutex::new(Shard {
                    map: LruCache::unbounded(),
                    bytes: 0,
                    missed: LruCache::unbounded(),
                })
            })
            .collect();
        ReadCache {
            shards,
            budget_per_shard: bytes / SHARDS,
            hasher: Default::default(),
        }
    }

    fn shard(&self, addr: &ExtentAddr) -> &Mutex<Shard> {
        &self.shards[self.hasher.hash_one(addr) as usize % SHARDS]
    }

    pub fn get(&self, addr: &ExtentAddr) -> Option<Arc<Block>> {
        self.shard(addr).lock().map.get(addr).cloned()
    }

    /// For a read that missed `addr`: whether to parse and cache the block (its shard has
    /// room, so caching it evicts nothing, or it was missed lately already), else remembers
    /// the miss. Never with no budget to admit into.
    pub fn admit(&self, addr: ExtentAddr) -> bool {
        if self.budget_per_shard == 0 {
            return false;
        }
        let mut shard = self.shard(&addr).lock();
        // Room: the block parsed (about its extent's bytes, plus its keys and entry table)
        // fits without evicting anything.
        let room = shard.bytes + 2 * addr.len as usize <= self.budget_per_shard;
        if room || shard.missed.pop(&addr).is_some() {
            return true;
        }
        shard.missed.put(addr, ());
        let limit = (self.budget_per_shard / 4096).max(1) * MISSES_REMEMBERED_PER_BLOCK;
        while shard.missed.len() > limit {
            shard.missed.pop_lru();
        }
        false
    }

    pub fn insert(&self, addr: ExtentAddr, block: Arc<Block>) {
        if self.budget_per_shard == 0 {
            return;
        }
        let mut shard = self.shard(&addr).lock();
        shard.bytes += block.memory();
        if let Some(old) = shard.map.put(addr, block) {
            shard.bytes -= old.memory();
        }
        while shard.bytes > self.budget_per_shard {
            match shard.map.pop_lru() {
                Some((_, old)) => shard.bytes -= old.memory(),
                None => break,
            }
        }
    }

    /// Blocks held, and the bytes they take.
    pub fn usage(&self) -> (usize, usize) {
        self.shards.iter().fold((0, 0), |(blocks, bytes), s| {
            let s = s.lock();
            (blocks + s.map.len(), bytes + s.bytes)
        })
    }

    pub fn remove(&self, addr: &ExtentAddr) {
        let mut shard = self.shard(addr).lock();
        if let Some(old) = shard.map.pop(addr) {
            shard.bytes -= old.memory();
        }
        shard.missed.pop(addr);
    }
}
