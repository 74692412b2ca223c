//! Planning one flush round: which patches of which blocks may go to the disk now, and the
//! block images that carry exactly those.
//!
//! A round writes blocks, then syncs once, then commits what it wrote; rounds never overlap,
//! so when one is planned nothing is in flight. A patch may be written when each of its
//! dependencies is committed, or is written in the same block write and either is an overlap
//! dependency or lies in one sector with it (a crash tears writes only at sector boundaries).
//! Writing every block that has such patches in each round gives the fewest syncs: a sync is
//! spent only where a dependency chain crosses one.

use crate::graph::{BlockBytes, PatchGraph};
use crate::ids::IdSet;
use crate::patch::{Flight, PatchKind};
use std::collections::BTreeSet;
use std::sync::Arc;

/// What a flush round writes to one block.
#[derive(Debug)]
pub(crate) struct BlockWrite {
    pub block: u64,
    /// The block with every patch not being written reverted.
    pub image: BlockBytes,
    /// The patches the image carries, now in flight.
    pub patches: Vec<u64>,
}

/// Which patches a flush waits for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Goal {
    /// One patch (and so everything it depends on).
    Patch(u64),
    /// Every patch with an id up to this one.
    UpTo(u64),
}

impl PatchGraph {
    pub fn reached(&self, goal: Goal) -> bool {
        match goal {
            Goal::Patch(id) => !self.patches.contains_key(&id),
            Goal::UpTo(last) => !self.any_live_up_to(last),
        }
    }

    /// Plans the next round toward `goal`: marks the patches to write in flight and returns
    /// the block writes, in block order. For one patch, only blocks where something it needs
    /// can be written are written; for everything, every block with a writable patch.
    pub fn plan_round(&mut self, goal: Goal) -> Vec<BlockWrite> {
        match goal {
            Goal::UpTo(_) => {
                let blocks: Vec<u64> = self.blocks.keys().copied().collect();
                blocks
                    .into_iter()
                    .filter_map(|b| self.plan_block(b, None))
                    .collect()
            }
            Goal::Patch(id) => {
                let mut needed = self.closure(id);
                let mut blocks: BTreeSet<u64> = needed
                    .iter()
                    .filter_map(|q| self.patches[q].blocks())
                    .flatten()
                    .collect();
                // A patch spanning blocks that one of these blocks carries goes with all its
                // blocks: were it marked written on this block alone, its commit would drop
                // the others' bytes unwritten. (It waits for nothing, so adds no dependency.)
                let mut work: Vec<u64> = blocks.iter().copied().collect();
                while let Some(block) = work.pop() {
                    for &q in self.patches_on(block) {
                        let p = &self.patches[&q];
                        if p.spans_blocks() && p.is_pending() && needed.insert(q) {
                            for b in p.blocks().into_iter().flatten() {
                                if blocks.insert(b) {
                                    work.push(b);
                                }
                            }
                        }
                    }
                }
                blocks
                    .into_iter()
                    .filter_map(|b| self.plan_block(b, Some(&needed)))
                    .collect()
            }
        }
    }

    /// Marks the writable patches of `block` in flight and builds the image carrying them,
    /// unless none is writable (or, with `needed`, none of the writable ones is needed).
    fn plan_block(&mut self, block: u64, needed: Option<&IdSet>) -> Option<BlockWrite> {
        let block_start = self.block_start(block);
        let block_size = self.block_size;
        let PatchGraph {
            patches,
            blocks,
            counters,
            ..
        } = self;
        let b = blocks.get(&block)?;
        let mut written = Vec::new();
        // Oldest first: a patch's same-block dependencies are older, so they are decided first.
        for &q in &b.patches {
            let p = &patches[&q];
            let Some(range) = p.range_on(block, block_size) else {
                continue;
            };
            let writable = p.deps.iter().all(|d| match patches.get(&d.id()) {
                None => true,
                Some(dep) => {
                    // Written in this round on this block, and either only overlapped or in
                    // one sector with this patch (never a patch spanning blocks: a crash may
                    // keep this block's write and lose another of its blocks).
                    dep.flight == Flight::InFlight
                        && dep.range_on(block, block_size).is_some_and(|r| {
                            d.is_overlap()
                                || (!dep.spans_blocks() && range.one_sector_with(r, block_start))
                        })
                }
            });
            if writable {
                if let Some(p) = patches.get_mut(&q) {
                    p.flight = Flight::InFlight;
                }
                written.push(q);
            }
        }
        let useful = needed.is_none_or(|needed| written.iter().any(|q| needed.contains(q)));
        if !useful {
            for q in &written {
                if let Some(p) = patches.get_mut(q) {
                    p.flight = Flight::Pending;
                }
            }
            return None;
        }
        if written.is_empty() {
            return None;
        }
        // The image: the block with its still-pending patches reverted from their undo bytes,
        // newest first. Hard patches are never pending here: they wait for nothing, so they
        // are always written.
        let mut reverted: Option<Vec<u8>> = None;
        for q in b.patches.iter().rev() {
            let p = &patches[q];
            if let (
                Flight::Pending,
                PatchKind::Block {
                    range,
                    undo: Some(undo),
                    ..
                },
            ) = (p.flight, &p.kind)
            {
                let image = reverted.get_or_insert_with(|| b.data.to_vec());
                image[range.usize()].copy_from_slice(undo);
                counters.reverts += 1;
            }
        }
        let image = reverted.map_or_else(|| Arc::clone(&b.data), Arc::new);
        Some(BlockWrite {
            block,
            image,
            patches: written,
        })
    }
}
