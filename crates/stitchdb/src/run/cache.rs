//! The read cache: parsed run blocks by extent address, least recently used out first, bounded
//! in bytes. Blocks never change once written, so entries never go stale; a released extent's
//! entry is dropped by the run-block release handler (its address may be reused).

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
}

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
    }
}
