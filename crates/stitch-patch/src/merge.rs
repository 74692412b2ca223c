//! The merge rule: when a new write joins an existing pending patch on its block instead of
//! becoming a patch of its own (Featherstitch §4.2-4.3). It keeps patch counts and undo bytes
//! small.
//!
//! A write may join pending patch `s` when that adds no ordering constraint: everything the
//! write must wait for (its pending dependencies, explicit or by overlap) is `s` itself or
//! something `s` already waits for in at least the same way. Then no new cycle can form and
//! the write reaches the disk with `s`, never before what it follows. Two more conditions:
//! - an explicit dependency on `s` itself is allowed only when both lie in one sector: the
//!   merged patch goes to disk in one write, which a crash may tear at sector boundaries;
//! - a soft `s` must touch the write's range, so its undo bytes stay one contiguous range
//!   (the bytes added to them are the ones the write replaces).
//!
//! A hard `s` has no undo bytes and is never reverted, so any write that waits for nothing
//! but `s` joins it: the paper's hard patch merging. The log's appends to its tail block and
//! rewrites of whole data blocks collapse this way into one patch per block. A soft `s` whose
//! own dependencies have all been sent is hardened on the way (the paper's soft-to-hard
//! merging), dropping its undo bytes.

use crate::graph::PatchGraph;
use crate::patch::{ByteRange, Dep, PatchKind};
use std::sync::Arc;

/// How many of a block's newest pending patches a write tries to join, bounding the work of
/// one write on a block crowded with unmergeable patches.
const MERGE_CANDIDATES: usize = 8;

impl PatchGraph {
    /// The pending patch on `block` that a write of `range` waiting for `pending` can join.
    pub(crate) fn merge_target(
        &mut self,
        block: u64,
        range: ByteRange,
        pending: &[Dep],
    ) -> Option<u64> {
        let block_start = self.block_start(block);
        let mut candidates: Vec<u64> = self
            .patches_on(block)
            .iter()
            .rev()
            .copied()
            .filter(|&q| self.is_pending(q))
            .take(MERGE_CANDIDATES)
            .collect();
        for &s in &candidates {
            if !self.patches[&s].is_hard() {
                self.harden_if_free(s);
            }
        }
        // Hard targets first: joining one costs no undo bytes. A write that waits for nothing
        // joins only a hard patch: in a soft one it would need undo bytes and could be held
        // back by the soft patch's dependencies.
        candidates.sort_by_key(|s| !self.patches[s].is_hard());
        if pending.is_empty() {
            candidates.retain(|s| self.patches[s].is_hard());
        }
        for s in candidates {
            let target = &self.patches[&s];
            let Some(s_range) = target.range_on(block, self.block_size) else {
                continue;
            };
            if !target.is_hard() && !s_range.touches(range) {
                continue;
            }
            let joins = pending.iter().all(|d| {
                if d.id() == s {
                    // Not into a patch spanning blocks: its other blocks' writes may be torn
                    // from this one's.
                    d.is_overlap()
                        || (!target.spans_blocks() && range.one_sector_with(s_range, block_start))
                } else {
                    target
                        .deps
                        .iter()
                        .any(|e| e.id() == d.id() && (d.is_overlap() || !e.is_overlap()))
                }
            });
            if joins {
                return Some(s);
            }
        }
        None
    }

    /// Drops the dependencies of soft patch `s` that have been sent; if none is left, `s`
    /// can be written any time from now on, so it becomes hard and forgets its undo bytes.
    fn harden_if_free(&mut self, s: u64) -> bool {
        let deps = &self.patches[&s].deps;
        let waiting = deps.iter().filter(|d| self.is_pending(d.id())).count();
        if waiting == deps.len() {
            return false;
        }
        let still: Vec<Dep> = deps
            .iter()
            .copied()
            .filter(|d| self.is_pending(d.id()))
            .collect();
        let Some(p) = self.patches.get_mut(&s) else {
            return false;
        };
        p.deps = still;
        if waiting > 0 {
            return false;
        }
        if let PatchKind::Block { undo, .. } = &mut p.kind {
            *undo = None;
        }
        self.counters.hard += 1;
        true
    }

    /// Applies a write of `bytes` over `range` to `block` as part of patch `target`.
    pub(crate) fn merge_into(&mut self, target: u64, block: u64, range: ByteRange, bytes: &[u8]) {
        let block_size = self.block_size;
        let Some(b) = self.blocks.get_mut(&block) else {
            return;
        };
        let data = Arc::make_mut(&mut b.data);
        if let Some(kind) = self.patches.get_mut(&target).map(|p| &mut p.kind) {
            if let PatchKind::Block {
                range: covered,
                undo: Some(old),
                ..
            } = kind
            {
                // A soft patch changes one block, which the write touches.
                let union = covered.hull(range);
                if union != *covered {
                    // The undo bytes grow by the bytes this write replaces.
                    let mut grown = data[union.usize()].to_vec();
                    let at = (covered.start - union.start) as usize;
                    grown[at..at + old.len()].copy_from_slice(old);
                    *old = grown.into_boxed_slice();
                }
            }
            let at = block * block_size as u64;
            kind.widen(
                at + u64::from(range.start),
                at + u64::from(range.end),
                block_size,
            );
        }
        data[range.usize()].copy_from_slice(bytes);
    }
}
