//! The live patches and the dirty blocks they change: creating patches, adding dependencies,
//! committing. Committed patches are forgotten: an id below `next_id` that is not live is
//! committed.

use crate::ids::{IdMap, IdSet};
use crate::patch::{ByteRange, Dep, Flight, Patch, PatchKind, Piece};
use crate::{PatchError, PatchId, PatchState, Result};
use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use std::sync::Arc;

/// The bytes of one block. Shared between the cache and a write in flight; copied on the
/// next change (`Arc::make_mut`).
pub(crate) type BlockBytes = Arc<Vec<u8>>;

/// What a commit did.
#[derive(Debug, Default)]
pub(crate) struct Committed {
    /// The patches now committed, empty patches that had nothing more to wait for included.
    pub ids: Vec<u64>,
    /// Blocks left without live patches, now clean, worth keeping for reads.
    pub clean: Vec<(u64, BlockBytes)>,
    /// The bytes of blocks left clean that are not worth keeping (see `DirtyBlock::keep`).
    pub dropped: Vec<BlockBytes>,
}

/// A block with live patches. It stays in memory until they have all committed.
#[derive(Debug)]
pub(crate) struct DirtyBlock {
    /// The newest bytes of the block, every live patch applied.
    pub data: BlockBytes,
    /// Live patches on the block, oldest first (the order reverting undoes them backwards).
    pub patches: Vec<u64>,
    /// Whether the block is worth keeping among the clean blocks once written: not when its
    /// last write was an append that filled it to the end (a run's or a log's block: the
    /// next append starts in a later block, and runs are read from the disk).
    pub keep: bool,
}

/// Event counts since the cache was made.
#[derive(Debug, Default, Clone)]
pub(crate) struct Counters {
    pub created: u64,
    pub merged: u64,
    pub hard: u64,
    pub reverts: u64,
    pub block_writes: u64,
    pub syncs: u64,
    pub discarded: u64,
}

#[derive(Debug)]
pub(crate) struct PatchGraph {
    pub block_size: usize,
    next_id: u64,
    pub patches: IdMap<Patch>,
    pub blocks: BTreeMap<u64, DirtyBlock>,
    pub counters: Counters,
}

impl PatchGraph {
    pub fn new(block_size: usize) -> PatchGraph {
        PatchGraph {
            block_size,
            next_id: PatchId::NONE.0 + 1,
            patches: IdMap::default(),
            blocks: BTreeMap::new(),
            counters: Counters::default(),
        }
    }

    /// The newest id handed out so far.
    pub fn last_id(&self) -> u64 {
        self.next_id - 1
    }

    fn allocate_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    pub fn check_known(&self, ids: &[PatchId]) -> Result<()> {
        match ids.iter().find(|id| id.0 >= self.next_id) {
            Some(&unknown) => Err(PatchError::UnknownPatch(unknown)),
            None => Ok(()),
        }
    }

    /// An id handed out before that is no longer live (`PatchId::NONE` included).
    pub fn is_committed(&self, id: u64) -> bool {
        id < self.next_id && !self.patches.contains_key(&id)
    }

    pub fn is_pending(&self, id: u64) -> bool {
        self.patches.get(&id).is_some_and(Patch::is_pending)
    }

    /// Ids never handed out read as pending: they are certainly not durable.
    pub fn state(&self, id: u64) -> PatchState {
        match self.patches.get(&id) {
            Some(p) if p.flight == Flight::InFlight => PatchState::InFlight,
            Some(_) => PatchState::Pending,
            None if id < self.next_id => PatchState::Committed,
            None => PatchState::Pending,
        }
    }

    pub fn block_start(&self, block: u64) -> u64 {
        block * self.block_size as u64
    }

    /// An empty patch on `deps` (all known). Committed at once if they all are.
    pub fn create_empty(&mut self, deps: &[PatchId]) -> PatchId {
        let mut live: Vec<u64> = deps
            .iter()
            .map(|d| d.0)
            .filter(|&d| self.patches.contains_key(&d))
            .collect();
        live.sort_unstable();
        live.dedup();
        let id = self.allocate_id();
        self.counters.created += 1;
        if live.is_empty() {
            return PatchId(id);
        }
        for &d in &live {
            self.link_empty_dependent(d, id);
        }
        let waiting = live.len() as u32;
        let deps = live.into_iter().map(Dep::ordered).collect();
        self.patches
            .insert(id, Patch::new(PatchKind::Empty { waiting }, deps));
        PatchId(id)
    }

    /// Records that empty patch `empty` counts live patch `before` among the ones it waits for.
    fn link_empty_dependent(&mut self, before: u64, empty: u64) {
        if let Some(p) = self.patches.get_mut(&before) {
            p.empty_dependents.push(PatchId(empty));
            p.depended_on = true;
        }
    }

    /// Makes pending empty patch `after` also wait for `before`.
    pub fn add_dependency(&mut self, after: PatchId, before: PatchId) -> Result<()> {
        self.check_known(&[after, before])?;
        match self.patches.get(&after.0) {
            Some(p) if matches!(p.kind, PatchKind::Empty { .. }) => {}
            _ => return Err(PatchError::Frozen(after)),
        }
        if after == before {
            return Err(PatchError::Cycle { after, before });
        }
        if self.is_committed(before.0) {
            return Ok(());
        }
        let p = &self.patches[&after.0];
        // Repeats are allowed (they are counted), but the common one, a patchgroup adopting
        // the same merged patch again and again, costs nothing.
        if p.deps.last().is_some_and(|d| d.id() == before.0) {
            return Ok(());
        }
        // Only a patch something depends on can close a cycle by gaining a dependency.
        if p.depended_on && self.reaches(before.0, after.0) {
            return Err(PatchError::Cycle { after, before });
        }
        self.prune_committed_deps(after.0);
        self.link_empty_dependent(before.0, after.0);
        if let Some(p) = self.patches.get_mut(&after.0) {
            p.deps.push(Dep::ordered(before.0));
            if let PatchKind::Empty { waiting } = &mut p.kind {
                *waiting += 1;
            }
        }
        Ok(())
    }

    /// Before an empty patch's dependency list grows its buffer, drops the entries that have
    /// committed, so a long-lived patchgroup head does not keep every write it ever adopted.
    fn prune_committed_deps(&mut self, id: u64) {
        let Some(p) = self.patches.get(&id) else {
            return;
        };
        if p.deps.len() < p.deps.capacity() {
            return;
        }
        let live: Vec<Dep> = p
            .deps
            .iter()
            .copied()
            .filter(|d| self.patches.contains_key(&d.id()))
            .collect();
        if let Some(p) = self.patches.get_mut(&id) {
            p.deps = live;
        }
    }

    /// Whether live patch `from` depends, directly or not, on `to`.
    fn reaches(&self, from: u64, to: u64) -> bool {
        let mut seen = IdSet::default();
        let mut stack = vec![from];
        while let Some(id) = stack.pop() {
            if id == to {
                return true;
            }
            let Some(p) = self.patches.get(&id) else {
                continue;
            };
            if seen.insert(id) {
                stack.extend(p.deps.iter().map(|d| d.id()));
            }
        }
        false
    }

    /// `target` and every live patch it depends on.
    pub fn closure(&self, target: u64) -> IdSet {
        let mut seen = IdSet::default();
        let mut stack = vec![target];
        while let Some(id) = stack.pop() {
            let Some(p) = self.patches.get(&id) else {
                continue;
            };
            if seen.insert(id) {
                stack.extend(p.deps.iter().map(|d| d.id()).filter(|d| !seen.contains(d)));
            }
        }
        seen
    }

    /// Whether a patch with an id up to `last` is still live.
    pub fn any_live_up_to(&self, last: u64) -> bool {
        self.patches.keys().any(|&id| id <= last)
    }

    /// Records a change of `bytes` at `start` of `block`, to follow `deps` (all known). A
    /// block that is not dirty yet starts from `base()`, its current bytes.
    /// Joins an existing patch when the merge rule allows (see `merge`), else makes a new one:
    /// hard when nothing it waits for is still pending, soft (with undo bytes) otherwise.
    pub fn write_block(
        &mut self,
        block: u64,
        start: usize,
        bytes: &[u8],
        deps: &[PatchId],
        keep: bool,
        base: impl FnOnce() -> BlockBytes,
    ) -> PatchId {
        let range = ByteRange::new(start, start + bytes.len());
        let pending = self.pending_deps(block, range, deps);
        if let Some(target) = self.merge_target(block, range, &pending) {
            self.merge_into(target, block, range, bytes);
            self.counters.merged += 1;
            if let Some(b) = self.blocks.get_mut(&block) {
                b.keep = keep;
            }
            return PatchId(target);
        }
        let id = self.allocate_id();
        let hard = pending.is_empty();
        self.counters.created += 1;
        self.counters.hard += u64::from(hard);
        for d in &pending {
            if let Some(p) = self.patches.get_mut(&d.id()) {
                p.depended_on = true;
            }
        }
        let b = self.blocks.entry(block).or_insert_with(|| DirtyBlock {
            data: base(),
            patches: Vec::new(),
            keep,
        });
        b.keep = keep;
        let data = Arc::make_mut(&mut b.data);
        let undo = (!hard).then(|| data[range.usize()].into());
        data[range.usize()].copy_from_slice(bytes);
        b.patches.push(id);
        self.patches.insert(
            id,
            Patch::new(
                PatchKind::Block {
                    block,
                    last: block,
                    range,
                    undo,
                },
                pending,
            ),
        );
        PatchId(id)
    }

    /// Whether a write of `len` bytes at disk byte `start` would wait for nothing: no
    /// dependency in `deps` and no patch whose bytes it overwrites is pending.
    pub fn waits_for_nothing(&self, start: u64, len: usize, deps: &[PatchId]) -> bool {
        let bs = self.block_size as u64;
        deps.iter().all(|d| !self.is_pending(d.0))
            && (start / bs..=(start + len as u64 - 1) / bs).all(|block| {
                let piece = Piece::of(start, len, block, self.block_size).in_block;
                let range = ByteRange::new(piece.start, piece.end);
                self.patches_on(block).iter().all(|q| {
                    let p = &self.patches[q];
                    !p.is_pending()
                        || !p
                            .range_on(block, self.block_size)
                            .is_some_and(|r| r.overlaps(range))
                })
            })
    }

    /// Records a write of `bytes` at disk byte `start` spanning several blocks that waits for
    /// nothing ([`waits_for_nothing`](Self::waits_for_nothing)) as *one* hard patch over all
    /// of them, where a patch per block and an empty patch joining them cost three records
    /// per 4 KiB of a run. It joins the newest hard pending patch of its first (or last)
    /// block if there is one, so a stream of appends stays one patch until a flush takes it.
    /// `keep(block)` says whether a block is worth keeping clean once written; a block not
    /// dirty yet starts from `base(block)`.
    pub fn write_span(
        &mut self,
        start: u64,
        bytes: &[u8],
        keep: impl Fn(u64) -> bool,
        mut base: impl FnMut(u64) -> BlockBytes,
    ) -> PatchId {
        let bs = self.block_size as u64;
        let end = start + bytes.len() as u64;
        let (first, last) = (start / bs, (end - 1) / bs);
        let joined = self
            .hard_pending_on(first)
            .or_else(|| self.hard_pending_on(last));
        let id = match joined {
            Some(id) => {
                self.counters.merged += 1;
                if let Some(p) = self.patches.get_mut(&id) {
                    // It shares a block with the write, so the hull is contiguous.
                    p.kind.widen(start, end, self.block_size);
                }
                id
            }
            None => {
                let id = self.allocate_id();
                self.counters.created += 1;
                self.counters.hard += 1;
                let kind = PatchKind::hard(start, end, self.block_size);
                self.patches.insert(id, Patch::new(kind, Vec::new()));
                id
            }
        };
        for block in first..=last {
            let b = self.blocks.entry(block).or_insert_with(|| DirtyBlock {
                data: base(block),
                patches: Vec::new(),
                keep: true,
            });
            b.keep = keep(block);
            let Piece { in_block, in_range } =
                Piece::of(start, bytes.len(), block, self.block_size);
            Arc::make_mut(&mut b.data)[in_block].copy_from_slice(&bytes[in_range]);
            if !b.patches.contains(&id) {
                b.patches.push(id);
            }
        }
        PatchId(id)
    }

    /// The newest pending hard patch on `block`: one a write waiting for nothing may join.
    fn hard_pending_on(&self, block: u64) -> Option<u64> {
        self.patches_on(block).iter().rev().copied().find(|q| {
            let p = &self.patches[q];
            p.is_pending() && p.is_hard()
        })
    }

    /// What a new write of `range` on `block` must wait for: its pending explicit
    /// dependencies and (as overlap dependencies) the pending patches whose bytes it
    /// overwrites. Dependencies in flight are left out: a flush round's writes all commit
    /// before the next round is planned, so they will be durable before this write is sent.
    fn pending_deps(&self, block: u64, range: ByteRange, deps: &[PatchId]) -> Vec<Dep> {
        let mut pending: Vec<Dep> = Vec::with_capacity(deps.len());
        for d in deps {
            if self.is_pending(d.0) && !pending.iter().any(|p| p.id() == d.0) {
                pending.push(Dep::ordered(d.0));
            }
        }
        for &q in self.patches_on(block) {
            let p = &self.patches[&q];
            let overlapping = p
                .range_on(block, self.block_size)
                .is_some_and(|r| r.overlaps(range));
            if overlapping && p.is_pending() && !pending.iter().any(|d| d.id() == q) {
                pending.push(Dep::overlap(q));
            }
        }
        pending
    }

    /// The live patches on `block`, oldest first (none if it is not dirty).
    pub fn patches_on(&self, block: u64) -> &[u64] {
        self.blocks.get(&block).map_or(&[], |b| &b.patches)
    }

    /// Forgets the patches `written` (now durable) and every empty patch that thereby has
    /// nothing left to wait for.
    pub fn commit(&mut self, written: &[u64]) -> Committed {
        let mut work = written.to_vec();
        let mut committed = Vec::with_capacity(written.len());
        let mut touched = Vec::new();
        while let Some(id) = work.pop() {
            let Some(p) = self.patches.remove(&id) else {
                continue;
            };
            if let Some(blocks) = p.blocks() {
                touched.extend(blocks);
            }
            for e in p.empty_dependents {
                if let Some(PatchKind::Empty { waiting }) =
                    self.patches.get_mut(&e.0).map(|e| &mut e.kind)
                {
                    *waiting -= 1;
                    if *waiting == 0 {
                        work.push(e.0);
                    }
                }
            }
            committed.push(id);
        }
        touched.sort_unstable();
        touched.dedup();
        let mut clean = Vec::new();
        let mut dropped = Vec::new();
        for block in touched {
            let Some(b) = self.blocks.get_mut(&block) else {
                continue;
            };
            b.patches.retain(|q| self.patches.contains_key(q));
            if b.patches.is_empty() {
                match self.blocks.remove(&block) {
                    Some(b) if b.keep => clean.push((block, b.data)),
                    Some(b) => dropped.push(b.data),
                    None => {}
                }
            }
        }
        Committed {
            ids: committed,
            clean,
            dropped,
        }
    }

    /// Drops the dirty blocks in `blocks` whose patches are all pending, with their patches,
    /// as if those had been written: what depends on them may go to the disk at once. Blocks
    /// with a patch in flight are kept (the round writing it will commit it). Returns what
    /// was dropped; the blocks' bytes in `clean` are *not* on the disk.
    pub fn discard(&mut self, blocks: RangeInclusive<u64>) -> Committed {
        // A patch spanning blocks outside the range keeps its blocks: dropping it would drop
        // bytes outside the range too.
        let inside = |p: &Patch| {
            p.blocks()
                .is_none_or(|b| blocks.contains(b.start()) && blocks.contains(b.end()))
        };
        let doomed: Vec<u64> = self
            .blocks
            .range(blocks.clone())
            .filter(|(_, b)| {
                b.patches.iter().all(|q| {
                    let p = &self.patches[q];
                    p.is_pending() && inside(p)
                })
            })
            .flat_map(|(_, b)| b.patches.iter().copied())
            .collect::<IdSet>()
            .into_iter()
            .collect();
        self.counters.discarded += doomed.len() as u64;
        self.commit(&doomed)
    }

    /// A flush round failed: its patches are not durable, so they are pending again.
    pub fn abort_flight(&mut self, ids: &[u64]) {
        for id in ids {
            if let Some(p) = self.patches.get_mut(id) {
                p.flight = Flight::Pending;
            }
        }
    }
}
