//! The dependency-aware block cache: the public face of the patch layer, the state behind its
//! lock, and the blocks one operation read from the disk for it ([`Loaded`]).
//!
//! One lock guards the patch graph and the cached blocks; disk I/O happens outside it (see
//! `load` and `flush`, which add the cache's methods that do it), so reads and new patches
//! proceed while a flush writes.

use crate::graph::{BlockBytes, Counters, PatchGraph};
use crate::lru::CleanBlocks;
use crate::patch::{PatchId, PatchState, Piece};
use crate::{PatchError, Result};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ops::{Range, RangeInclusive};
use std::sync::Arc;
use stitch_io::{Disk, IoError, IoErrorKind, IoOp};

/// How a [`BlockCache`] is sized.
#[derive(Debug, Clone)]
pub struct CacheConfig {
    /// Bytes per block (4096). Patches never span blocks. Taken as at least 1 and at most
    /// 1 GiB.
    pub block_size: usize,
    /// How many clean blocks the cache keeps for reads.
    pub clean_blocks: usize,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            block_size: 4096,
            clean_blocks: 1024,
        }
    }
}

const MAX_BLOCK_SIZE: usize = 1 << 30;

/// Spare block buffers the cache keeps (see `CacheState::spare`): 10 MiB of 4 KiB blocks,
/// more than a run builder's flush (8 MiB) commits at once.
const MAX_SPARE_BLOCKS: usize = 2560;

/// What the cache holds, for `stitchdb stats` and the patch-memory report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Patches not yet committed (empty ones included).
    pub live_patches: u64,
    /// Bytes of patch bookkeeping (the patch records and their dependency lists).
    pub patch_bytes: u64,
    /// Bytes of undo data kept to revert soft patches.
    pub undo_bytes: u64,
    /// Bytes of blocks with uncommitted patches.
    pub dirty_bytes: u64,
    /// Blocks with uncommitted patches.
    pub dirty_blocks: u64,
    /// Patch records made (a write merged into an existing patch makes none).
    pub patches_created: u64,
    /// Writes merged into an existing pending patch.
    pub patches_merged: u64,
    /// Patches made hard: created hard, or hardened once what they waited for was written.
    pub hard_patches: u64,
    /// Patches reverted from a block image because they could not be written with it.
    pub reverts: u64,
    /// Blocks written (adjacent blocks share one disk request).
    pub block_writes: u64,
    /// Barriers issued to the disk.
    pub syncs: u64,
    /// Patches dropped unwritten by [`BlockCache::discard`].
    pub patches_discarded: u64,
}

pub(crate) type Callback = Box<dyn FnOnce() + Send>;

/// Everything behind the cache's lock.
pub(crate) struct CacheState {
    pub graph: PatchGraph,
    pub clean: CleanBlocks,
    /// Buffers of written blocks not kept clean, for the next fresh dirty blocks: appends
    /// dirty a block per 4 KiB, and zeroing a new allocation for each would be paid on every
    /// block a merge writes.
    pub spare: Vec<Vec<u8>>,
    /// Bumped whenever the cache changes the disk (a flush round starts writing, a hole is
    /// punched): a block read from the disk meanwhile may be stale and is read again.
    pub disk_epoch: u64,
    /// Why flushes are refused, after a write or sync failed.
    pub failure: Option<String>,
    pub callbacks: HashMap<u64, Vec<Callback>>,
}

impl CacheState {
    pub fn is_cached(&self, block: u64) -> bool {
        self.graph.blocks.contains_key(&block) || self.clean.contains(block)
    }

    /// Keeps the buffers of `blocks` (written, not kept clean) for fresh dirty blocks, up to
    /// [`MAX_SPARE_BLOCKS`]; buffers still shared are dropped.
    pub fn keep_spares(&mut self, blocks: Vec<BlockBytes>) {
        for bytes in blocks {
            if self.spare.len() >= MAX_SPARE_BLOCKS {
                return;
            }
            if let Ok(bytes) = Arc::try_unwrap(bytes) {
                self.spare.push(bytes);
            }
        }
    }

    /// The actions waiting for `committed` patches.
    pub fn take_callbacks(&mut self, committed: &[u64]) -> Vec<Callback> {
        if self.callbacks.is_empty() {
            return Vec::new();
        }
        committed
            .iter()
            .filter_map(|id| self.callbacks.remove(id))
            .flatten()
            .collect()
    }
}

/// Blocks read from the disk for one operation (by `lock_with_blocks`, in `load`), valid while
/// the disk epoch is unchanged.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    /// The `disk_epoch` they were read in.
    pub epoch: u64,
    /// The bytes of each block read.
    pub blocks: HashMap<u64, Vec<u8>>,
}

impl Loaded {
    pub fn take(&mut self, block: u64) -> Option<Vec<u8>> {
        self.blocks.remove(&block)
    }
}

/// The one block cache through which every write reaches the disk.
pub struct BlockCache {
    pub(crate) disk: Arc<dyn Disk>,
    pub(crate) block_size: usize,
    pub(crate) state: Mutex<CacheState>,
    /// Serialises flush rounds: a round's writes all commit before the next one is planned.
    pub(crate) flush_round: Mutex<()>,
}

impl BlockCache {
    /// A cache over `disk`, empty.
    pub fn new(disk: Arc<dyn Disk>, config: CacheConfig) -> Self {
        let block_size = config.block_size.clamp(1, MAX_BLOCK_SIZE);
        if block_size != config.block_size {
            tracing::warn!(
                asked = config.block_size,
                using = block_size,
                "block size out of range"
            );
        }
        let state = CacheState {
            graph: PatchGraph::new(block_size),
            clean: CleanBlocks::new(config.clean_blocks),
            spare: Vec::new(),
            disk_epoch: 0,
            failure: None,
            callbacks: HashMap::new(),
        };
        BlockCache {
            disk,
            block_size,
            state: Mutex::new(state),
            flush_round: Mutex::new(()),
        }
    }

    /// The disk the cache writes to.
    pub fn disk(&self) -> &Arc<dyn Disk> {
        &self.disk
    }

    /// Bytes per block, as configured (clamped to 1 byte .. 1 GiB).
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// The blocks a byte range touches, after checking it lies on the disk.
    fn blocks_of(&self, op: IoOp, offset: u64, len: usize) -> Result<RangeInclusive<u64>> {
        let disk_len = self.disk.len();
        let end = offset
            .checked_add(len as u64)
            .filter(|&end| end <= disk_len);
        let Some(end) = end else {
            let kind = IoErrorKind::OutOfRange { len: disk_len };
            return Err(IoError::new(op, self.disk.describe(), offset, len as u64, kind).into());
        };
        let bs = self.block_size as u64;
        Ok(offset / bs..=(end - 1) / bs)
    }

    /// The share of `block` in the `len` bytes at `offset`.
    fn piece(&self, offset: u64, len: usize, block: u64) -> Piece {
        Piece::of(offset, len, block, self.block_size)
    }

    /// Records a write of `data` at byte `offset` of the disk that must reach the disk after
    /// every patch in `deps`. A write that waits for nothing (no dependency and no
    /// overwritten byte pending) is one patch however many blocks it touches; one that waits
    /// is a patch per block touched, and when it spans several blocks the returned id is an
    /// empty patch depending on all of them. Nothing is written until a flush. Reads through
    /// the cache see the new bytes at once.
    ///
    /// The range must lie on the disk (grow it first). A write may be merged into a pending
    /// patch of its block and return that patch's id (see [`PatchId`]).
    pub fn write(&self, offset: u64, data: &[u8], deps: &[PatchId]) -> Result<PatchId> {
        self.write_with(offset, data, deps, false)
    }

    /// [`write`](Self::write) for appends: the bytes after the write, to the end of its last
    /// block, hold nothing anyone reads (a log's or a zone's unwritten tail). A block is then
    /// loaded from the disk only for the bytes *before* the write in its first block, so
    /// appending into fresh blocks costs no read.
    pub fn write_append(&self, offset: u64, data: &[u8], deps: &[PatchId]) -> Result<PatchId> {
        self.write_with(offset, data, deps, true)
    }

    fn write_with(
        &self,
        offset: u64,
        data: &[u8],
        deps: &[PatchId],
        append: bool,
    ) -> Result<PatchId> {
        if data.is_empty() {
            return self.empty(deps);
        }
        let blocks = self.blocks_of(IoOp::Write, offset, data.len())?;
        let bs = self.block_size as u64;
        let whole =
            |block: u64| self.piece(offset, data.len(), block).in_block.len() == self.block_size;
        // Whether the old bytes of `block` matter. For an append only those before the write
        // do, in its first block.
        let needs_old = |st: &CacheState, block: u64| {
            if append {
                block == offset / bs && offset % bs != 0
            } else {
                !whole(block) || deps.iter().any(|d| st.graph.is_pending(d.0))
            }
        };
        // A block must come from the disk unless the write covers it whole and, being hard,
        // keeps no undo bytes of what it replaces (or, for an append, its old bytes don't
        // matter).
        let (mut st, mut loaded) = self.lock_with_blocks(blocks.clone(), needs_old)?;
        st.graph.check_known(deps)?;
        // An append that fills its block to the end leaves nothing a later append needs.
        let keep = |block: u64| {
            let in_block = self.piece(offset, data.len(), block).in_block;
            !(append && in_block.end == self.block_size)
        };
        let CacheState {
            graph,
            clean,
            spare,
            ..
        } = &mut *st;
        let mut base = |block: u64, maybe_soft: bool| {
            let in_block = self.piece(offset, data.len(), block).in_block;
            self.starting_bytes(
                clean,
                &mut loaded,
                spare,
                block,
                in_block,
                append,
                maybe_soft,
            )
        };
        if blocks.start() != blocks.end() && graph.waits_for_nothing(offset, data.len(), deps) {
            return Ok(graph.write_span(offset, data, keep, |block| base(block, false)));
        }
        let mut ids = Vec::with_capacity(1);
        for block in blocks {
            let Piece { in_block, in_range } = self.piece(offset, data.len(), block);
            let maybe_soft = !deps.is_empty();
            ids.push(graph.write_block(
                block,
                in_block.start,
                &data[in_range],
                deps,
                keep(block),
                || base(block, maybe_soft),
            ));
        }
        // Blocks whose writes all joined one patch need no join.
        ids.dedup();
        Ok(match ids[..] {
            [one] => one,
            _ => graph.create_empty(&ids),
        })
    }

    /// The bytes a block not dirty yet starts from before a write of `written` (its bytes in
    /// the block): its clean copy, else what was loaded from the disk, else fresh bytes (a
    /// block neither cached nor loaded is one whose old bytes don't matter). Fresh bytes are
    /// zeros, which are then also what a revert of a soft patch puts back: never the new
    /// bytes, or reverting would write them ahead of their dependencies.
    #[allow(clippy::too_many_arguments)]
    fn starting_bytes(
        &self,
        clean: &mut CleanBlocks,
        loaded: &mut Loaded,
        spare: &mut Vec<Vec<u8>>,
        block: u64,
        written: Range<usize>,
        append: bool,
        maybe_soft: bool,
    ) -> BlockBytes {
        if let Some(bytes) = clean.take(block) {
            return bytes;
        }
        Arc::new(loaded.take(block).unwrap_or_else(|| {
            let Some(mut bytes) = spare.pop() else {
                return vec![0u8; self.block_size];
            };
            // A spare buffer holds an older block's bytes (never another store's). The
            // written piece is overwritten at once, unless the patch may be soft and keep its
            // old bytes to revert to; what follows an append holds nothing anyone reads.
            if maybe_soft {
                bytes.fill(0);
            } else {
                bytes[..written.start].fill(0);
                if !append {
                    bytes[written.end..].fill(0);
                }
            }
            bytes
        }))
    }

    /// An empty patch: no block, just dependencies. Committed once all of them are (at once
    /// if they already are, so only an empty patch with an uncommitted dependency can gain
    /// more with [`add_dependency`](Self::add_dependency)).
    pub fn empty(&self, deps: &[PatchId]) -> Result<PatchId> {
        let mut st = self.state.lock();
        st.graph.check_known(deps)?;
        Ok(st.graph.create_empty(deps))
    }

    /// Makes `after` (an empty patch still pending) depend on `before` as well.
    pub fn add_dependency(&self, after: PatchId, before: PatchId) -> Result<()> {
        self.state.lock().graph.add_dependency(after, before)
    }

    /// Reads the newest bytes (including patches not yet written).
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let blocks = self.blocks_of(IoOp::Read, offset, buf.len())?;
        let (mut st, mut loaded) = self.lock_with_blocks(blocks.clone(), |_, _| true)?;
        let mut fresh = Vec::new();
        for block in blocks {
            let Piece { in_block, in_range } = self.piece(offset, buf.len(), block);
            let out = &mut buf[in_range];
            if let Some(b) = st.graph.blocks.get(&block) {
                out.copy_from_slice(&b.data[in_block]);
            } else if let Some(data) = st.clean.get(block) {
                out.copy_from_slice(&data[in_block]);
            } else if let Some(data) = loaded.take(block) {
                out.copy_from_slice(&data[in_block]);
                fresh.push((block, data));
            }
        }
        // Only now: inserting earlier could evict a block this read has yet to copy.
        for (block, data) in fresh {
            st.clean.insert(block, Arc::new(data));
        }
        Ok(())
    }

    /// Punches a hole in the disk through the cache, so cached copies of the range are
    /// forgotten rather than read back stale. The range should hold no uncommitted patches:
    /// their blocks would bring the old bytes back when written.
    pub fn punch_hole(&self, offset: u64, len: u64) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let bs = self.block_size as u64;
        let (first, last) = (offset / bs, offset.saturating_add(len - 1) / bs);
        {
            let mut st = self.state.lock();
            st.clean.forget(first, last);
            st.disk_epoch += 1;
        }
        let punched = self.disk.punch_hole(offset, len);
        // Also after: a block read from the disk while the hole was being punched is stale.
        self.state.lock().disk_epoch += 1;
        Ok(punched?)
    }

    /// Forgets the pending writes to the blocks wholly inside the `len` bytes at `offset`
    /// without writing them, as if they had committed: for bytes nobody will read back or
    /// needs on the disk any more, such as log records a durable checkpoint has made obsolete
    /// (a log that is discarded before writeback costs the device nothing). Patches depending
    /// on them are free to go to the disk. A block with a write already in flight is kept and
    /// committed by its flush as usual. Returns how many patches this committed (empty patches
    /// that were waiting only for dropped ones included).
    pub fn discard(&self, offset: u64, len: u64) -> usize {
        let bs = self.block_size as u64;
        let (first, end) = (offset.div_ceil(bs), offset.saturating_add(len) / bs);
        if first >= end {
            return 0;
        }
        let mut st = self.state.lock();
        let committed = st.graph.discard(first..=end - 1);
        // Their bytes never reached the disk: whatever is cached of these blocks is not what
        // a read from the disk would give.
        st.clean.forget(first, end - 1);
        let actions = st.take_callbacks(&committed.ids);
        drop(st);
        for action in actions {
            action();
        }
        committed.ids.len()
    }

    /// Where `patch` is on its way to the disk.
    pub fn state(&self, patch: PatchId) -> PatchState {
        self.state.lock().graph.state(patch.0)
    }

    /// Hands `data` to the disk at `offset` at once, without a sync and without changing any
    /// patch's state: for a caller that wants bytes it already wrote into the cache (as a
    /// patch that waits for nothing) to survive a crash of the process, though not power
    /// loss, before a flush makes them durable. It runs between flush rounds, so no round
    /// planned before the caller wrote `data` into the cache can land an older image of
    /// these blocks over it afterwards; every later round writes `data` again with the rest
    /// of its blocks.
    pub fn write_unsynced(&self, offset: u64, data: &[u8]) -> Result<()> {
        let _round = self.flush_round.lock();
        if let Some(reason) = &self.state.lock().failure {
            return Err(PatchError::Failed(reason.clone()));
        }
        self.disk.write_at(offset, data).map_err(PatchError::Io)
    }

    /// Writes and syncs until `patch` (and so everything it depends on) is committed, with as
    /// few syncs as the dependencies allow.
    pub fn flush_patch(&self, patch: PatchId) -> Result<()> {
        self.state.lock().graph.check_known(&[patch])?;
        self.flush_until(crate::plan::Goal::Patch(patch.0))
    }

    /// Writes and syncs until every patch created so far is committed.
    pub fn flush_all(&self) -> Result<()> {
        let last = self.state.lock().graph.last_id();
        self.flush_until(crate::plan::Goal::UpTo(last))
    }

    /// Runs `action` once `patch` is committed: right away if it already is, else after the
    /// sync that commits it (outside the cache's lock). An id the cache never handed out
    /// never commits; its action is dropped.
    pub fn when_committed(&self, patch: PatchId, action: Box<dyn FnOnce() + Send>) {
        let mut st = self.state.lock();
        if st.graph.check_known(&[patch]).is_err() {
            tracing::warn!(?patch, "when_committed on a patch the cache never made");
            return;
        }
        if st.graph.is_committed(patch.0) {
            drop(st);
            action();
        } else {
            st.callbacks.entry(patch.0).or_default().push(action);
        }
    }

    /// Runs `action` once `patch` and every patch now live on the bytes `offset..offset + len`
    /// are committed: for a region about to be reused, which no older write may land in
    /// afterwards (patch ids do not say which of two independent patches commits first).
    pub fn when_range_committed(
        &self,
        offset: u64,
        len: u64,
        patch: PatchId,
        action: Box<dyn FnOnce() + Send>,
    ) {
        let gate = {
            let mut st = self.state.lock();
            let bs = self.block_size as u64;
            let mut waits: Vec<PatchId> = if len == 0 {
                Vec::new()
            } else {
                st.graph
                    .blocks
                    .range(offset / bs..=(offset + len - 1) / bs)
                    .flat_map(|(_, b)| b.patches.iter().map(|&id| PatchId(id)))
                    .collect()
            };
            if st.graph.check_known(&[patch]).is_err() {
                tracing::warn!(
                    ?patch,
                    "when_range_committed on a patch the cache never made"
                );
                return;
            }
            waits.push(patch);
            st.graph.create_empty(&waits)
        };
        self.when_committed(gate, action);
    }

    /// Counts and sizes, computed by walking the live patches.
    pub fn stats(&self) -> CacheStats {
        let st = self.state.lock();
        let graph = &st.graph;
        let records: usize = graph.patches.values().map(|p| p.bookkeeping_bytes()).sum();
        let block_lists: usize = graph
            .blocks
            .values()
            .map(|b| b.patches.capacity() * std::mem::size_of::<u64>())
            .sum();
        let undo: usize = graph.patches.values().map(|p| p.undo_len()).sum();
        let Counters {
            created,
            merged,
            hard,
            reverts,
            block_writes,
            syncs,
            discarded,
        } = graph.counters.clone();
        CacheStats {
            live_patches: graph.patches.len() as u64,
            patch_bytes: (records + block_lists) as u64,
            undo_bytes: undo as u64,
            dirty_bytes: (graph.blocks.len() * self.block_size) as u64,
            dirty_blocks: graph.blocks.len() as u64,
            patches_created: created,
            patches_merged: merged,
            hard_patches: hard,
            reverts,
            block_writes,
            syncs,
            patches_discarded: discarded,
        }
    }

    /// The dependency graph of uncommitted patches in Graphviz `dot` format.
    pub fn dump_dot(&self) -> String {
        self.state.lock().graph.to_dot()
    }

    /// Why the cache refuses flushes, if an earlier write or sync failed.
    pub fn failure(&self) -> Option<String> {
        self.state.lock().failure.clone()
    }
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("disk", &self.disk)
            .field("block_size", &self.block_size)
            .finish()
    }
}
