//! The write-heavy run behind the patch-memory report, shared by `examples/patch_memory` and
//! `tests/memory.rs`.
//!
//! It writes what the store above the cache writes: the log appends small records, with no
//! dependencies, at its tail; data extents are appended as whole blocks, with no
//! dependencies; each extent is followed by a log record that depends on it (the record
//! describes it); and now and then an extent is rewritten in place after the newest record
//! (a home write after its commit record), which makes soft patches with undo bytes.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use stitch_patch::{BlockCache, CacheStats, PatchId, Result};

pub struct Workload {
    pub appends: u64,
    pub record_len: usize,
    /// One data extent after this many appends.
    pub appends_per_extent: u64,
    /// Extents are 1 to this many blocks.
    pub max_extent_blocks: u64,
    /// One extent in this many is a rewrite of an earlier one after the newest record.
    pub extents_per_rewrite: u64,
    /// Statistics are taken this many times, evenly spaced.
    pub samples: u64,
    pub block_size: u64,
}

impl Workload {
    fn log_len(&self) -> u64 {
        (self.appends * self.record_len as u64).next_multiple_of(self.block_size)
    }

    fn extents(&self) -> u64 {
        self.appends / self.appends_per_extent
    }

    /// The disk the run needs: the log, then the data extents.
    pub fn disk_len(&self) -> u64 {
        self.log_len() + self.extents() * self.max_extent_blocks * self.block_size
    }

    /// Runs the workload without flushing, returning the cache's statistics after each
    /// sample's share of the appends.
    pub fn run(&self, cache: &BlockCache) -> Result<Vec<(u64, CacheStats)>> {
        let mut rng = StdRng::seed_from_u64(42);
        let mut samples = Vec::new();
        let mut extents: Vec<(u64, u64)> = Vec::new();
        let mut data_end = self.log_len();
        let mut pending_extent = None;
        let every = (self.appends / self.samples).max(1);
        for i in 0..self.appends {
            let record = vec![(i % 251) as u8 + 1; self.record_len];
            let deps: Vec<PatchId> = pending_extent.take().into_iter().collect();
            let last_record = cache.write(i * self.record_len as u64, &record, &deps)?;
            if i % self.appends_per_extent == self.appends_per_extent - 1 {
                let extent = i / self.appends_per_extent;
                let rewrite = extent % self.extents_per_rewrite == self.extents_per_rewrite - 1;
                let (at, blocks, deps) = if rewrite {
                    let (at, blocks) = extents[rng.gen_range(0..extents.len())];
                    (at, blocks, vec![last_record])
                } else {
                    let blocks = rng.gen_range(1..=self.max_extent_blocks);
                    let at = data_end;
                    data_end += blocks * self.block_size;
                    extents.push((at, blocks));
                    (at, blocks, vec![])
                };
                let data = vec![(i % 13) as u8; (blocks * self.block_size) as usize];
                pending_extent = Some(cache.write(at, &data, &deps)?);
            }
            if (i + 1) % every == 0 {
                samples.push((i + 1, cache.stats()));
            }
        }
        Ok(samples)
    }
}

/// Bytes as a percentage of the dirty data.
pub fn percent_of_dirty(bytes: u64, stats: &CacheStats) -> f64 {
    100.0 * bytes as f64 / stats.dirty_bytes.max(1) as f64
}
