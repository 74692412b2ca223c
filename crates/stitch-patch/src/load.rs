//! Bringing blocks in from the disk without holding the cache's lock during the read.
//!
//! A block that is not cached has its newest bytes on the disk: blocks leave memory only
//! once their patches are durable. The read happens unlocked, so a flush round (or a punched
//! hole) may change the disk meanwhile; every such change bumps `disk_epoch`, and blocks read
//! across a bump are read again.

use crate::blockio;
use crate::cache::{BlockCache, CacheState, Loaded};
use crate::Result;
use parking_lot::MutexGuard;
use std::collections::HashMap;
use std::ops::RangeInclusive;

impl BlockCache {
    /// Locks the cache with every block of `blocks` for which `from_disk` says its bytes are
    /// needed either cached or in the returned [`Loaded`]. Cached blocks take precedence.
    pub(crate) fn lock_with_blocks(
        &self,
        blocks: RangeInclusive<u64>,
        from_disk: impl Fn(&CacheState, u64) -> bool,
    ) -> Result<(MutexGuard<'_, CacheState>, Loaded)> {
        let mut loaded = Loaded::default();
        loop {
            let st = self.state.lock();
            if st.disk_epoch != loaded.epoch {
                loaded = Loaded {
                    epoch: st.disk_epoch,
                    blocks: HashMap::new(),
                };
            }
            // `from_disk` first: for most writes it rules out every block at once (an append
            // needs at most its first block's old bytes), sparing a lookup of each.
            let missing: Vec<u64> = blocks
                .clone()
                .filter(|&b| {
                    from_disk(&st, b) && !st.is_cached(b) && !loaded.blocks.contains_key(&b)
                })
                .collect();
            if missing.is_empty() {
                return Ok((st, loaded));
            }
            drop(st);
            loaded.blocks.extend(blockio::read_blocks(
                &*self.disk,
                self.block_size,
                &missing,
            )?);
        }
    }
}
