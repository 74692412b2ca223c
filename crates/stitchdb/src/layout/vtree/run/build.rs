//! Writing runs: entries are copied into new blocks, or whole existing blocks are *stitched*
//! in (their index entry is taken over and the block gains a reference; nothing is rewritten).

use super::block::{BlockWriter, FinishedBlock};
use super::format::SpecialWriter;
use super::write_behind::WriteBehind;
use super::{index, BlockHandle, FilterChoice, FilterPart, Run, RunFilter, RunMeta, Storage};
use crate::entry::{EntryRef, RangeDeletes, RangeTombstone};
use crate::layout::{BlockFormat, FormatSpec, LayoutSpec};
use crate::Result;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use stitch_filter::hash_key;
use stitch_patch::PatchId;
use stitch_zone::{ExtentAddr, ExtentKind, FramedBatch, Stream};

/// Target payload size of a data block: one extent, header included, fills a 4 KiB block.
const BLOCK_TARGET: usize = 4096 - stitch_zone::EXTENT_HEADER_LEN;

/// How a run's blocks are written: their format and size (a table's layout says, see
/// `crate::layout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockLayout {
    pub format: BlockFormat,
    /// A block's extent, header included, fills about this many bytes.
    pub block_bytes: usize,
    /// `sliding-window`: the most values back a linear block's value may refer to.
    pub window: Option<u32>,
}

impl BlockLayout {
    /// The blocks a table of `layout` writes.
    pub fn of(layout: &LayoutSpec) -> BlockLayout {
        BlockLayout {
            format: layout.block_format(),
            block_bytes: layout.block_bytes(),
            window: layout.window,
        }
    }
}

impl Default for BlockLayout {
    fn default() -> Self {
        BlockLayout {
            format: BlockFormat::plain(FormatSpec::Linear),
            block_bytes: 4096,
            window: None,
        }
    }
}

/// The block being filled, in the run's format.
enum Writer {
    Linear(BlockWriter),
    Special(Box<SpecialWriter>),
}

impl Writer {
    /// Adds `e`; false, adding nothing, when the block must end first (a new one takes it).
    fn add(&mut self, e: EntryRef) -> bool {
        match self {
            Writer::Linear(w) => {
                w.add(e);
                true
            }
            Writer::Special(w) => w.add(e),
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            Writer::Linear(w) => w.is_empty(),
            Writer::Special(w) => w.is_empty(),
        }
    }

    fn size(&self) -> usize {
        match self {
            Writer::Linear(w) => w.size(),
            Writer::Special(w) => w.size(),
        }
    }

    fn finish(&mut self) -> FinishedBlock {
        match self {
            Writer::Linear(w) => w.finish(),
            Writer::Special(w) => w.finish(),
        }
    }

    fn recycle(&mut self, buf: Vec<u8>) {
        if let Writer::Linear(w) = self {
            w.recycle(buf);
        }
    }
}

/// A builder makes its blocks durable every this many bytes (on a helper thread, see
/// `write_behind`), so a large merge does not hold its whole output as dirty blocks in the
/// cache until its manifest is written.
const FLUSH_EVERY: u64 = 8 << 20;

/// Bytes of finished blocks a builder appends to its zone together.
const BATCH_BYTES: usize = 256 << 10;

pub struct RunBuilder {
    storage: Arc<Storage>,
    stream: Stream,
    writer: Writer,
    /// A block is closed once its payload reaches this many bytes.
    block_target: usize,
    /// The filter built from the keys added ([`key_filter`](Self::key_filter)), and their
    /// hashes, kept while it wants them.
    filter: FilterChoice,
    hashes: Vec<u64>,
    blocks: Vec<BlockHandle>,
    patches: Vec<PatchId>,
    meta: RunMeta,
    /// Bytes of blocks written anew and of blocks stitched in.
    pub copied_bytes: u64,
    pub stitched_bytes: u64,
    /// Bytes written since the blocks were last made durable.
    unflushed: u64,
    /// Makes the blocks durable every [`FLUSH_EVERY`] bytes.
    flusher: WriteBehind,
    /// Index extents and filter parts of other runs to list as this run's instead of writing
    /// its own (see [`reuse`](Self::reuse)).
    reused: Option<Reused>,
    /// Finished blocks not yet appended, and their handles but for the addresses: appended
    /// together once [`BATCH_BYTES`] are waiting, or before a block is stitched in after them
    /// (see `stitch_zone::FramedBatch`).
    pending: FramedBatch,
    pending_handles: Vec<BlockHandle>,
}

/// What a run lists of other runs' instead of writing its own: index extents and their
/// mirrors, filter parts (each with its filter, already read).
pub struct Reused {
    pub index: Vec<ExtentAddr>,
    pub index_mirror: Vec<ExtentAddr>,
    pub filters: Vec<(FilterPart, Arc<RunFilter>)>,
}

impl RunBuilder {
    /// A builder for run `id` at `level`, appending to the zones of `stream` (flushes and
    /// merges write to different streams, so a run's blocks stay contiguous on disk and can be
    /// stitched later as long spans).
    pub fn new(storage: &Arc<Storage>, id: u64, level: u32, stream: Stream) -> RunBuilder {
        RunBuilder {
            storage: storage.clone(),
            stream,
            writer: Writer::Linear(BlockWriter::default()),
            block_target: BLOCK_TARGET,
            filter: FilterChoice::None,
            hashes: Vec::new(),
            blocks: Vec::new(),
            patches: Vec::new(),
            meta: RunMeta::empty(id, level),
            copied_bytes: 0,
            stitched_bytes: 0,
            unflushed: 0,
            flusher: WriteBehind::new(storage.zones.cache().clone(), storage.write_behind),
            reused: None,
            // A batch is appended once it reaches `BATCH_BYTES`: one block more never grows it.
            pending: FramedBatch::with_capacity(BATCH_BYTES + 2 * BLOCK_TARGET),
            pending_handles: Vec::new(),
        }
    }

    /// Makes room for about `bytes` of entries in the block list up front: a merge's or a
    /// flush's list grew by doubling, copying itself (a large merge's is megabytes) and
    /// faulting in fresh pages at every step.
    pub fn expect_bytes(&mut self, bytes: u64) {
        self.blocks
            .reserve((bytes / self.block_target as u64).min(1 << 20) as usize);
    }

    /// Writes the run's blocks in `layout` (before any entry is added). A specialized format
    /// stores without sequence numbers the versions at or below `horizon` (the oldest
    /// snapshot a reader holds) that no range tombstone in `ranges` (the run's) hides: see
    /// `format`.
    pub fn set_layout(&mut self, layout: BlockLayout, horizon: u64, ranges: RangeDeletes) {
        // A block (and the entry that takes it past its target) must fit a zone: stores of
        // small zones (tests) get smaller blocks than a layout asks for.
        let most = self.storage.zones.max_payload() / 4;
        self.block_target = layout
            .block_bytes
            .saturating_sub(stitch_zone::EXTENT_HEADER_LEN)
            .clamp(64, most.max(64));
        self.writer = match layout.format.format {
            FormatSpec::Linear => Writer::Linear(BlockWriter::with_window(layout.window)),
            _ => Writer::Special(Box::new(SpecialWriter::new(layout.format, horizon, ranges))),
        };
    }

    /// Writes linear blocks under `sliding-window` of `window` values (none: version 4), for
    /// a run written in no layout's format (an ingest's).
    pub fn set_window(&mut self, window: Option<u32>) {
        self.writer = Writer::Linear(BlockWriter::with_window(window));
    }

    /// Keeps the hashes of the keys added from now on, for [`key_filter`](Self::key_filter)
    /// to build a filter of `choice` from (a merge that stitches blocks unread combines its
    /// inputs' quotient filters instead).
    pub fn filter_keys(&mut self, choice: FilterChoice) {
        self.filter = choice;
    }

    /// The filter [`filter_keys`](Self::filter_keys) chose, over every key added (`None`
    /// without one, or if it cannot be built).
    pub fn key_filter(&self) -> Option<RunFilter> {
        self.filter.build(&self.hashes)
    }

    pub fn add(&mut self, e: EntryRef) -> Result<()> {
        if self.filter.wants_hashes() {
            self.hashes.push(hash_key(e.key));
        }
        self.meta.entries += 1;
        self.meta.min_seq = self.meta.min_seq.min(e.seq);
        self.meta.max_seq = self.meta.max_seq.max(e.seq);
        if !self.writer.add(e) {
            self.finish_block()?;
            self.writer.add(e);
        }
        if self.writer.size() >= self.block_target {
            self.finish_block()?;
        }
        Ok(())
    }

    /// Closes the block being filled, if any, and queues it for appending.
    fn finish_block(&mut self) -> Result<()> {
        if self.writer.is_empty() {
            return Ok(());
        }
        let mut block = self.writer.finish();
        self.pending.push(block.payload());
        self.pending_handles.push(BlockHandle {
            first_key: std::mem::take(&mut block.first_key),
            last_key: std::mem::take(&mut block.last_key),
            entries: block.entries,
            // Set once appended.
            addr: ExtentAddr {
                zone: 0,
                offset: 0,
                len: 0,
            },
        });
        self.writer.recycle(block.into_buffer());
        if self.pending.bytes() >= BATCH_BYTES {
            self.write_pending()?;
        }
        Ok(())
    }

    /// Closes the block being filled and appends every queued one: before a block is
    /// stitched in after them, and before the block list is read or finished.
    fn append_all(&mut self) -> Result<()> {
        self.finish_block()?;
        self.write_pending()
    }

    /// Appends the queued blocks and lists them, with their addresses, after the blocks
    /// before them.
    fn write_pending(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        // Taken first: a failed append empties the batch and keeps none of its extents.
        let handles = std::mem::take(&mut self.pending_handles);
        let (addrs, patches) = self.storage.zones.append_batch(
            self.stream,
            ExtentKind::RUN_BLOCK,
            &mut self.pending,
            &[],
        )?;
        self.patches.extend(patches);
        for (mut handle, addr) in handles.into_iter().zip(addrs) {
            let payload_len = addr.payload_len() as u64;
            self.meta.data_bytes += payload_len;
            self.copied_bytes += payload_len;
            self.unflushed += payload_len;
            handle.addr = addr;
            self.blocks.push(handle);
        }
        if self.unflushed >= FLUSH_EVERY {
            // One patch stands for the blocks so far: the run's final patch depends on it,
            // whether or not its flush has finished by then.
            let written = self.storage.zones.cache().empty(&self.patches)?;
            self.flusher.start(written)?;
            self.patches = vec![written];
            self.unflushed = 0;
        }
        Ok(())
    }

    /// Takes over existing blocks of `from` as they are, each with a reference of its own.
    /// Sequence bounds widen to the source run's (the blocks are not read).
    pub fn stitch(&mut self, from: &Run, handles: &[BlockHandle]) -> Result<()> {
        let addrs: Vec<_> = handles.iter().map(|h| h.addr).collect();
        self.storage.zones.incref_all(&addrs)?;
        for h in handles {
            self.adopt(from, h)?;
        }
        Ok(())
    }

    /// Takes over a block whose reference the caller already holds for this run.
    pub fn adopt(&mut self, from: &Run, handle: &BlockHandle) -> Result<()> {
        self.append_all()?;
        self.meta.entries += handle.entries;
        self.meta.data_bytes += handle.addr.payload_len() as u64;
        self.meta.min_seq = self.meta.min_seq.min(from.meta.min_seq);
        self.meta.max_seq = self.meta.max_seq.max(from.meta.max_seq);
        self.stitched_bytes += handle.addr.payload_len() as u64;
        self.blocks.push(handle.clone());
        Ok(())
    }

    /// The blocks added so far, in order (the one being filled closed and every queued one
    /// appended first).
    pub fn blocks(&mut self) -> Result<&[BlockHandle]> {
        self.append_all()?;
        Ok(&self.blocks)
    }

    /// Lists `reused.index` (index extents of installed runs, which hold exactly this run's
    /// block handles in order) as this run's index and `reused.filters` (covering its blocks
    /// in order, or none) as its filter, with a reference of its own to each extent, instead
    /// of writing them again. [`finish`](Self::finish)'s filter is then ignored.
    pub fn reuse(&mut self, reused: Reused) {
        self.reused = Some(reused);
    }

    /// The range tombstones the run carries.
    pub fn set_range_tombstones(&mut self, ranges: Vec<RangeTombstone>) {
        self.meta.min_seq = ranges
            .iter()
            .map(|t| t.seq)
            .fold(self.meta.min_seq, u64::min);
        self.meta.max_seq = ranges
            .iter()
            .map(|t| t.seq)
            .fold(self.meta.max_seq, u64::max);
        self.meta.ranges = ranges;
    }

    /// Writes each index chunk a second time, in the mirrors' stream (another zone), so no
    /// one damaged place loses a block's handle. On a full device the run goes without a
    /// mirror (as runs of stores from before mirrors do) rather than failing the flush or
    /// merge that would free room: the mirrors' stream leaves one free zone more than other
    /// extents do (`ZoneStore`'s reserve), so it is the mirror that finds no room first. The
    /// next merge that rewrites the run's index gives it one.
    fn write_mirror(&mut self, chunks: &[Vec<u8>]) -> Result<()> {
        let mut written = Vec::with_capacity(chunks.len());
        for chunk in chunks {
            match self
                .storage
                .zones
                .append_to(Stream::Mirror, ExtentKind::RUN_INDEX, chunk, &[])
            {
                Ok((addr, patch)) => {
                    self.patches.push(patch);
                    written.push(addr);
                }
                Err(stitch_zone::ZoneError::NoSpace(why)) => {
                    tracing::warn!(
                        "run {} written without an index mirror: {why}",
                        self.meta.id
                    );
                    self.storage.zones.decref_all(written)?;
                    return Ok(());
                }
                Err(e) => return Err(e.into()),
            }
        }
        self.meta.index_mirror = written;
        Ok(())
    }

    /// Writes the index and `filter` (a filter too large for one extent is left out: the run
    /// then answers every lookup itself); returns the run and one patch standing for all its
    /// writes, or `None` if the run has neither entries nor range tombstones.
    pub fn finish(mut self, filter: Option<RunFilter>) -> Result<Option<(Arc<Run>, PatchId)>> {
        self.append_all()?;
        self.flusher.wait()?;
        if self.blocks.is_empty() && self.meta.ranges.is_empty() {
            return Ok(None);
        }
        self.meta.blocks_together = self.stitched_bytes == 0 && self.reused.is_none();
        let mut filters = Vec::new();
        match self.reused.take() {
            // Durable already: nothing to wait for.
            Some(Reused {
                index,
                index_mirror,
                filters: parts,
            }) => {
                let parts_at = parts.iter().map(|(p, _)| &p.addr);
                for &addr in index.iter().chain(&index_mirror).chain(parts_at) {
                    self.storage.zones.incref(addr)?;
                }
                self.meta.index = index;
                self.meta.index_mirror = index_mirror;
                let mut end = 0;
                for (part, filter) in parts {
                    end += part.blocks as usize;
                    filters.push((end, filter));
                    self.meta.filters.push(part);
                }
            }
            None => {
                let filter = filter.filter(|_| !self.blocks.is_empty());
                let max = self.storage.zones.max_payload() / 2;
                if let Some(f) = filter.filter(|f| f.memory_bytes() < max) {
                    let (addr, patch) = self.storage.zones.append_to(
                        self.stream,
                        ExtentKind::RUN_FILTER,
                        &f.encode(),
                        &[],
                    )?;
                    self.patches.push(patch);
                    let blocks = self.blocks.len();
                    self.meta.filters.push(FilterPart {
                        blocks: blocks as u64,
                        addr,
                    });
                    filters.push((blocks, Arc::new(f)));
                }
                let chunks =
                    index::encode_chunks(&self.blocks, self.storage.zones.max_payload() / 4);
                for chunk in &chunks {
                    let (addr, patch) = self.storage.zones.append_to(
                        self.stream,
                        ExtentKind::RUN_INDEX,
                        chunk,
                        &[],
                    )?;
                    self.patches.push(patch);
                    self.meta.index.push(addr);
                }
                self.write_mirror(&chunks)?;
            }
        }
        let done = self.storage.zones.cache().empty(&self.patches)?;
        // The run takes over the builder's references (its `Drop` no longer sees them).
        let (id, level) = (self.meta.id, self.meta.level);
        let blocks = std::mem::take(&mut self.blocks);
        let run = Run {
            meta: std::mem::replace(&mut self.meta, RunMeta::empty(id, level)),
            search: super::search::BlockSearch::new(&blocks),
            blocks,
            filters,
            storage: self.storage.clone(),
            obsolete: AtomicBool::new(false),
            unwritten: Default::default(),
            tombstones: Default::default(),
        };
        Ok(Some((Arc::new(run), done)))
    }
}

/// A builder dropped before [`finish`](RunBuilder::finish) handed its references to a run
/// (the flush, merge or ingest it served failed or gave up) gives them back: no root names
/// what it wrote or stitched in, and a store that goes on after the failure (a full one
/// refuses the write and stays writable) would otherwise keep those zones until reopened.
impl Drop for RunBuilder {
    fn drop(&mut self) {
        let held: Vec<_> = Run::extents_of(&self.meta, &self.blocks)
            .map(|(addr, _)| addr)
            .collect();
        if held.is_empty() {
            return;
        }
        if let Err(e) = self.storage.zones.decref_all(held) {
            tracing::warn!(
                "releasing the extents of unfinished run {}: {e}",
                self.meta.id
            );
        }
    }
}
