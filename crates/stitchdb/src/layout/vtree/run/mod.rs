//! Sorted immutable runs: data blocks in zones plus an index (see `docs/format.md`), and the
//! merges that combine them, stitching blocks that need not be rewritten.

mod block;
mod build;
mod cache;
mod covered;
mod cursor;
mod filter;
mod format;
mod index;
mod rebuild;
mod search;
mod shadow;
mod special;
mod stitch;
#[cfg(test)]
mod testing;
mod window;
mod write_behind;

#[cfg(test)]
pub(crate) use block::tests::{counted_payload, elided_payload, whole_keys_payload};
pub use build::{BlockLayout, Reused, RunBuilder};
pub use cache::ReadCache;
pub use filter::{FilterChoice, RunFilter};
pub(crate) use index::decode_chunk;
pub use index::BlockHandle;
pub use stitch::{merge_runs, MergeSpec, MergeStats};
pub(crate) use {block::BlockWriter, format::SpecialWriter, index::encode_chunks};

use crate::bounds::past_end;
use crate::codec::{put_varint, Reader};
use crate::entry::{Entry, EntryRef, RangeDeletes, RangeTombstone, Value};
use crate::merge_iter::LazySource;
use crate::{Error, Result};
pub(crate) use block::{Block, Found, Framing, RawEntries, NOT_THE_INDEX};
use search::BlockSearch;
use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use stitch_filter::{hash_key, QuotientFilter};
use stitch_patch::PatchId;
use stitch_zone::{ExtentAddr, ExtentKind, ZoneStore};

/// What runs are stored in and read through.
pub struct Storage {
    pub zones: Arc<ZoneStore>,
    pub cache: ReadCache,
    /// Run builders flush their finished blocks on helper threads (off: in their own, so
    /// the order of writes is deterministic, as crash tests need).
    pub write_behind: bool,
}

impl Storage {
    /// Storage over `zones` with a read cache of `cache_bytes`. A run block's release handler
    /// (Goby's per-kind garbage handler) drops it from the read cache: its address may be
    /// reused, and a stale cached block must never be returned for the new extent there.
    pub fn new(zones: Arc<ZoneStore>, cache_bytes: usize, write_behind: bool) -> Arc<Storage> {
        let storage = Arc::new(Storage {
            zones,
            cache: ReadCache::new(cache_bytes),
            write_behind,
        });
        let weak = Arc::downgrade(&storage);
        storage.zones.set_release_handler(
            ExtentKind::RUN_BLOCK,
            Arc::new(move |addr| {
                if let Some(storage) = weak.upgrade() {
                    storage.cache.remove(&addr);
                }
            }),
        );
        storage
    }
}

/// What the manifest records of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunMeta {
    pub id: u64,
    /// 0 for runs written from a memtable; a merge of level `i` writes level `i + 1`.
    pub level: u32,
    pub entries: u64,
    /// Payload bytes of the run's blocks.
    pub data_bytes: u64,
    pub min_seq: u64,
    pub max_seq: u64,
    pub index: Vec<ExtentAddr>,
    /// A second copy of each index extent, in the same order (`index_mirror[i]` holds the
    /// handles `index[i]` does), written in another zone: repair reads it where the index
    /// extent is damaged (manifest version 5 on; empty for runs written before).
    pub index_mirror: Vec<ExtentAddr>,
    /// Its builder wrote every block of the run, one after another (none stitched from other
    /// runs), so repair may look for blocks whose index is lost where they lie (manifest
    /// version 5 on; false for runs written before).
    pub blocks_together: bool,
    /// The run's quotient filter in parts, in block order (none: the run has no filter).
    pub filters: Vec<FilterPart>,
    /// Range tombstones the run carries (manifest version 3 on).
    pub ranges: Vec<RangeTombstone>,
    /// Every entry (and range tombstone) of the run has this sequence number, whatever its
    /// blocks say: a transaction's private run, linked at its commit (manifest version 3 on).
    pub seq_override: Option<u64>,
}

impl RunMeta {
    /// A run with nothing in it yet, as a builder starts one.
    pub fn empty(id: u64, level: u32) -> RunMeta {
        RunMeta {
            id,
            level,
            entries: 0,
            data_bytes: 0,
            min_seq: u64::MAX,
            max_seq: 0,
            index: Vec::new(),
            index_mirror: Vec::new(),
            blocks_together: false,
            filters: Vec::new(),
            ranges: Vec::new(),
            seq_override: None,
        }
    }

    /// Encodes the run as the current manifest version writes it; without `mirror`, as
    /// version 4 did (no index mirror: how tests write stores of before the mirror).
    pub fn encode(&self, out: &mut Vec<u8>, mirror: bool) {
        let fields = [
            self.id,
            self.level as u64,
            self.entries,
            self.data_bytes,
            self.min_seq,
            self.max_seq,
        ];
        for v in fields.into_iter().chain([self.index.len() as u64]) {
            put_varint(out, v);
        }
        for a in &self.index {
            a.encode(out);
        }
        put_varint(out, self.filters.len() as u64);
        for part in &self.filters {
            put_varint(out, part.blocks);
            part.addr.encode(out);
        }
        put_varint(out, self.ranges.len() as u64);
        for t in &self.ranges {
            t.encode(out);
        }
        // 0: none; else the sequence number plus one.
        put_varint(out, self.seq_override.map_or(0, |s| s + 1));
        if mirror {
            put_varint(out, u64::from(self.blocks_together));
            put_varint(out, self.index_mirror.len() as u64);
            for a in &self.index_mirror {
                a.encode(out);
            }
        }
    }

    /// Decodes a run as manifest version `version` wrote it.
    pub fn decode(r: &mut Reader, version: u8) -> std::result::Result<RunMeta, String> {
        let id = r.varint()?;
        let level = u32::try_from(r.varint()?).map_err(|_| "level out of range")?;
        let (entries, data_bytes, min_seq, max_seq) =
            (r.varint()?, r.varint()?, r.varint()?, r.varint()?);
        let n = r.len()?;
        let mut index = Vec::with_capacity(n);
        for _ in 0..n {
            index
                .push(ExtentAddr::decode(r.take(ExtentAddr::ENCODED_LEN)?).ok_or("short address")?);
        }
        let address = |r: &mut Reader| -> std::result::Result<ExtentAddr, String> {
            Ok(ExtentAddr::decode(r.take(ExtentAddr::ENCODED_LEN)?).ok_or("short address")?)
        };
        let filters = if version >= 4 {
            (0..r.len()?)
                .map(|_| {
                    let blocks = r.varint()?;
                    Ok(FilterPart {
                        blocks,
                        addr: address(r)?,
                    })
                })
                .collect::<std::result::Result<_, String>>()?
        } else {
            match r.varint()? {
                0 => Vec::new(),
                1 => vec![FilterPart {
                    blocks: ALL_BLOCKS,
                    addr: address(r)?,
                }],
                n => return Err(format!("filter count {n}")),
            }
        };
        let (ranges, seq_override) = if version >= 3 {
            let ranges = (0..r.len()?)
                .map(|_| RangeTombstone::decode(r))
                .collect::<std::result::Result<_, _>>()?;
            (ranges, r.varint()?.checked_sub(1))
        } else {
            (Vec::new(), None)
        };
        let (blocks_together, index_mirror) = if version >= 5 {
            let together = match r.varint()? {
                0 => false,
                1 => true,
                v => return Err(format!("blocks-together flag {v}")),
            };
            let n = r.len()?;
            if n != 0 && n != index.len() {
                return Err(format!(
                    "{n} index mirror extents for {} index extents",
                    index.len()
                ));
            }
            let mirror = (0..n)
                .map(|_| address(r))
                .collect::<std::result::Result<_, _>>()?;
            (together, mirror)
        } else {
            (false, Vec::new())
        };
        Ok(RunMeta {
            id,
            level,
            entries,
            data_bytes,
            min_seq,
            max_seq,
            index,
            index_mirror,
            blocks_together,
            filters,
            ranges,
            seq_override,
        })
    }
}

/// Keys of a run that damage put out of reach (see [`Run::open_salvaging`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostRange {
    /// Where the lost keys start.
    pub start: Bound<Vec<u8>>,
    /// Where they end.
    pub end: Bound<Vec<u8>>,
    /// How many entries (versions) were lost, when the index says.
    pub entries: Option<u64>,
    /// Why ("its block 7 is damaged").
    pub why: String,
}

/// A quotient filter over the keys of some of a run's blocks: the next `blocks` of them after
/// the blocks of the parts before it. A run written from entries has one part; a merge that
/// stitched its inputs whole, one after another, lists their parts (no key is reread, no
/// filter rewritten). A lookup asks only the part of the block the key would be in, so the
/// false-positive rate does not grow with the number of parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilterPart {
    pub blocks: u64,
    pub addr: ExtentAddr,
}

/// Manifests before version 4 held at most one filter per run, over all its blocks.
const ALL_BLOCKS: u64 = u64::MAX;

/// An open run. When a merge replaces it and the checkpoint saying so is durable, it is marked
/// obsolete; its extents are released when the last reader lets go of it. Blocks it shares
/// with other runs (stitched) live on: each run holds its own reference.
pub struct Run {
    pub meta: RunMeta,
    blocks: Vec<BlockHandle>,
    search: BlockSearch,
    /// The filter's parts: each with the index of the block after the last it covers.
    filters: Vec<(usize, Arc<RunFilter>)>,
    storage: Arc<Storage>,
    obsolete: AtomicBool,
    /// The patch writing the run's blocks while they may not have reached the disk (an
    /// ingested run, installed before its blocks are written: read through the block cache
    /// until then).
    unwritten: parking_lot::Mutex<Option<PatchId>>,
    /// `meta.ranges` indexed, built at the first point read that asks.
    tombstones: std::sync::OnceLock<RangeDeletes>,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Run")
            .field("meta", &self.meta)
            .field("blocks", &self.blocks.len())
            .finish()
    }
}

impl Run {
    /// Opens a run the manifest names: reads its index and marks its extents live.
    pub fn open(storage: &Arc<Storage>, mut meta: RunMeta) -> Result<Arc<Run>> {
        let mut blocks = Vec::new();
        for &addr in &meta.index {
            let payload = storage
                .zones
                .read(addr, ExtentKind::RUN_INDEX)
                .map_err(|e| Error::from(e).within("run index", format!("run {}", meta.id)))?;
            index::decode_chunk(&payload, &mut blocks)
                .map_err(|d| Error::corrupt("run index", format!("run {} {addr}", meta.id), d))?;
        }
        let filters = Self::read_filters(storage, &mut meta, blocks.len())?;
        let entries: u64 = blocks.iter().map(|b| b.entries).sum();
        if entries != meta.entries {
            return Err(Error::corrupt(
                "run index",
                format!("run {}", meta.id),
                format!(
                    "blocks hold {entries} entries, the manifest says {}",
                    meta.entries
                ),
            ));
        }
        for (addr, kind) in Self::extents_of(&meta, &blocks) {
            storage.zones.mark_live(addr, kind)?;
        }
        let storage = storage.clone();
        Ok(Arc::new(Run {
            meta,
            search: BlockSearch::new(&blocks),
            blocks,
            filters,
            storage,
            obsolete: AtomicBool::new(false),
            unwritten: Default::default(),
            tombstones: Default::default(),
        }))
    }

    /// The zones of every extent the run `meta` describes (its index is read), without
    /// opening it or marking anything live: for keeping the older checkpoint's runs at open.
    pub fn zones_of(storage: &Storage, meta: &RunMeta) -> Result<Vec<stitch_zone::ZoneId>> {
        let mut blocks = Vec::new();
        for &addr in &meta.index {
            let payload = storage.zones.read(addr, ExtentKind::RUN_INDEX)?;
            index::decode_chunk(&payload, &mut blocks)
                .map_err(|d| Error::corrupt("run index", format!("run {} {addr}", meta.id), d))?;
        }
        let mut zones: Vec<stitch_zone::ZoneId> = Self::extents_of(meta, &blocks)
            .map(|(a, _)| a.zone)
            .collect();
        zones.sort_unstable();
        zones.dedup();
        Ok(zones)
    }

    /// [`open`](Self::open) for `check` and `repair`: opens what can be read of a damaged
    /// run instead of failing at the first problem. If every index extent is lost, the index
    /// is rebuilt from the run's blocks where they can be found (`rebuild::blocks_back`);
    /// otherwise the blocks of unreadable index extents are left out (lost ranges),
    /// a damaged filter is dropped (a filter only saves reads), and every block is read and
    /// verified, the damaged ones left out. Returns the run (`None` if nothing of it is
    /// left), every problem found (naming the structure: run index, run filter, run block)
    /// and the key ranges lost. Nothing is marked live: the store is only read.
    pub fn open_salvaging(
        storage: &Arc<Storage>,
        mut meta: RunMeta,
    ) -> (Option<Arc<Run>>, Vec<Error>, Vec<LostRange>) {
        let mut problems = Vec::new();
        let mut lost = Vec::new();
        let mut blocks: Vec<BlockHandle> = Vec::new();
        // Where in `blocks` the handles of unreadable index extents would have been.
        let mut gaps: Vec<usize> = Vec::new();
        for (i, &addr) in meta.index.iter().enumerate() {
            let read = Self::read_index_chunk(storage, &meta, addr, "run index");
            let mirror = meta
                .index_mirror
                .get(i)
                .map(|&m| Self::read_index_chunk(storage, &meta, m, "run index mirror"));
            let chunk = match (read, mirror) {
                (Ok(chunk), None) => Some(chunk),
                (Ok(chunk), Some(Ok(copy))) => {
                    if copy != chunk {
                        problems.push(Error::corrupt(
                            "run index mirror",
                            format!("run {} {}", meta.id, meta.index_mirror[i]),
                            format!("holds other block handles than its index extent {addr}"),
                        ));
                    }
                    Some(chunk)
                }
                (Ok(chunk), Some(Err(e))) | (Err(e), Some(Ok(chunk))) => {
                    problems.push(e);
                    Some(chunk)
                }
                (Err(e), Some(Err(m))) => {
                    problems.extend([e, m]);
                    None
                }
                (Err(e), None) => {
                    problems.push(e);
                    None
                }
            };
            match chunk {
                Some(chunk) => blocks.extend(chunk),
                None if gaps.last() != Some(&blocks.len()) => gaps.push(blocks.len()),
                None => {}
            }
        }
        // Both copies of some index extents lost: their blocks are looked for where they
        // were written, one after another, and read without their handles (version 4).
        // Last gap first, so filling one leaves the places of those before it as they are.
        // Only a run whose builder wrote every block, one after another: a stitched run's
        // neighbours there are other runs' blocks (see `rebuild`). Runs of manifests before
        // version 5 do not say: theirs are looked for only when every index extent is lost.
        let together = meta.blocks_together || (meta.index_mirror.is_empty() && blocks.is_empty());
        let mut unfilled = 0usize;
        for &g in gaps.iter().rev() {
            let known: u64 = blocks.iter().map(|b| b.entries).sum();
            let (prev, next) = (g.checked_sub(1).map(|p| &blocks[p]), blocks.get(g));
            let found = match meta.entries.checked_sub(known) {
                Some(_) if !together => Err(
                    "its blocks were stitched from other runs' (they do not lie together)"
                        .to_string(),
                ),
                // The first blocks, with no block before them to stop at: only when every
                // other entry is accounted for, so their count is known.
                Some(_) if prev.is_none() && unfilled > 0 => {
                    Err("blocks after them are lost too".to_string())
                }
                // The last gap to fill must hold exactly the entries still missing.
                Some(left) => {
                    let exact = g == gaps[0] && unfilled == 0;
                    rebuild::blocks_back(storage, &meta, next, prev, left, exact)
                }
                None => Err(format!(
                    "blocks hold {known} entries, the manifest says {}",
                    meta.entries
                )),
            };
            match found {
                Ok(handles) => {
                    blocks.splice(g..g, handles);
                }
                Err(why) => {
                    unfilled += 1;
                    problems.push(Error::corrupt(
                        "run index",
                        format!("run {}", meta.id),
                        format!("not rebuilt from the run's blocks: {why}"),
                    ));
                    lost.push(LostRange {
                        start: prev
                            .map_or(Bound::Unbounded, |p| Bound::Excluded(p.last_key.clone())),
                        end: next
                            .map_or(Bound::Unbounded, |h| Bound::Excluded(h.first_key.clone())),
                        entries: None,
                        why: "its run index extent is damaged".into(),
                    });
                }
            }
        }
        if unfilled == 0 {
            gaps.clear();
        }
        let entries: u64 = blocks.iter().map(|b| b.entries).sum();
        if gaps.is_empty() && entries != meta.entries {
            problems.push(Error::corrupt(
                "run index",
                format!("run {}", meta.id),
                format!(
                    "blocks hold {entries} entries, the manifest says {}",
                    meta.entries
                ),
            ));
        }
        let filters = match Self::read_filters(storage, &mut meta, blocks.len()) {
            Ok(filters) if gaps.is_empty() => filters,
            Ok(_) => Vec::new(),
            Err(e) => {
                problems.push(e);
                Vec::new()
            }
        };
        let whole = Run {
            search: BlockSearch::new(&blocks),
            blocks,
            filters,
            storage: storage.clone(),
            obsolete: AtomicBool::new(false),
            unwritten: Default::default(),
            tombstones: Default::default(),
            meta,
        };
        let mut bad = Vec::new();
        for i in 0..whole.blocks.len() {
            if let Err(e) = whole.read_block(i) {
                let h = &whole.blocks[i];
                lost.push(LostRange {
                    start: Bound::Included(h.first_key.clone()),
                    end: Bound::Included(h.last_key.clone()),
                    entries: Some(h.entries),
                    why: format!("its block {i} is damaged"),
                });
                problems.push(e);
                bad.push(i);
            }
        }
        if !gaps.is_empty() || !bad.is_empty() {
            // Only the readable blocks stay; the filter's parts map blocks by position.
            // `whole` is never marked obsolete: dropping it releases nothing.
            let (mut meta, mut blocks) = (whole.meta.clone(), whole.blocks.clone());
            let storage = whole.storage.clone();
            for &i in bad.iter().rev() {
                blocks.remove(i);
            }
            meta.entries = blocks.iter().map(|b| b.entries).sum();
            meta.filters.clear();
            if blocks.is_empty() && meta.ranges.is_empty() {
                return (None, problems, lost);
            }
            let run = Run {
                search: BlockSearch::new(&blocks),
                blocks,
                filters: Vec::new(),
                storage,
                obsolete: AtomicBool::new(false),
                unwritten: Default::default(),
                tombstones: Default::default(),
                meta,
            };
            return (Some(Arc::new(run)), problems, lost);
        }
        (Some(Arc::new(whole)), problems, lost)
    }

    /// The block handles in the index extent (or mirror: `what`) at `addr`.
    fn read_index_chunk(
        storage: &Storage,
        meta: &RunMeta,
        addr: ExtentAddr,
        what: &'static str,
    ) -> Result<Vec<BlockHandle>> {
        let payload = storage
            .zones
            .read(addr, ExtentKind::RUN_INDEX)
            .map_err(|e| Error::from(e).within(what, format!("run {}", meta.id)))?;
        let mut chunk = Vec::new();
        index::decode_chunk(&payload, &mut chunk)
            .map_err(|d| Error::corrupt(what, format!("run {} {addr}", meta.id), d))?;
        Ok(chunk)
    }

    /// Reads and checks the filter parts of a run with `blocks` blocks; on any problem the
    /// run's filter is dropped from `meta` and the problem returned.
    fn read_filters(
        storage: &Arc<Storage>,
        meta: &mut RunMeta,
        blocks: usize,
    ) -> Result<Vec<(usize, Arc<RunFilter>)>> {
        if let [only] = meta.filters.as_mut_slice() {
            if only.blocks == ALL_BLOCKS {
                only.blocks = blocks as u64;
            }
        }
        let read = || -> Result<Vec<(usize, Arc<RunFilter>)>> {
            let covered: u64 = meta
                .filters
                .iter()
                .map(|p| p.blocks)
                .fold(0, u64::saturating_add);
            if !meta.filters.is_empty() && covered != blocks as u64 {
                return Err(Error::corrupt(
                    "run filter",
                    format!("run {}", meta.id),
                    format!("filter parts cover {covered} blocks of {blocks}"),
                ));
            }
            let mut filters = Vec::with_capacity(meta.filters.len());
            let mut end = 0;
            for part in &meta.filters {
                let addr = part.addr;
                let payload = storage
                    .zones
                    .read(addr, ExtentKind::RUN_FILTER)
                    .map_err(|e| Error::from(e).within("run filter", format!("run {}", meta.id)))?;
                let filter = RunFilter::decode(&payload).map_err(|e| {
                    Error::corrupt("run filter", format!("run {} {addr}", meta.id), e)
                })?;
                end += part.blocks as usize;
                filters.push((end, Arc::new(filter)));
            }
            Ok(filters)
        };
        let result = read();
        if result.is_err() {
            meta.filters.clear();
        }
        result
    }

    fn extents_of<'a>(
        meta: &'a RunMeta,
        blocks: &'a [BlockHandle],
    ) -> impl Iterator<Item = (ExtentAddr, ExtentKind)> + 'a {
        let index =
            (meta.index.iter().chain(&meta.index_mirror)).map(|&a| (a, ExtentKind::RUN_INDEX));
        let filter = meta
            .filters
            .iter()
            .map(|p| (p.addr, ExtentKind::RUN_FILTER));
        index
            .chain(filter)
            .chain(blocks.iter().map(|b| (b.addr, ExtentKind::RUN_BLOCK)))
    }

    /// The newest of the run's range tombstones a reader at `snapshot` sees over `key`.
    pub fn covering_tombstone(&self, key: &[u8], snapshot: u64) -> Option<u64> {
        if self.meta.ranges.is_empty() {
            return None;
        }
        self.tombstone_index().covering(key, snapshot)
    }

    /// The run's range tombstones, sharing their index.
    pub fn range_deletes(&self) -> RangeDeletes {
        self.tombstone_index().clone()
    }

    /// The run's range tombstones indexed, built at the first read that asks.
    fn tombstone_index(&self) -> &RangeDeletes {
        self.tombstones
            .get_or_init(|| RangeDeletes::new(self.meta.ranges.clone()))
    }

    /// Every extent the run references (a block once per reference).
    pub fn extents(&self) -> impl Iterator<Item = (ExtentAddr, ExtentKind)> + '_ {
        Self::extents_of(&self.meta, &self.blocks)
    }

    /// The parts of the run's filter, in block order, if it has one and every part is a
    /// quotient filter (what a merge can combine without rereading keys).
    pub fn quotient_filters(&self) -> Option<Vec<&QuotientFilter>> {
        let parts: Option<Vec<_>> = self.filters.iter().map(|(_, f)| f.quotient()).collect();
        parts.filter(|p| !p.is_empty())
    }

    /// The parts of the run's filter with their places, in block order.
    pub fn filter_parts(&self) -> impl Iterator<Item = (FilterPart, Arc<RunFilter>)> + '_ {
        let filters = self.filters.iter().map(|(_, f)| f.clone());
        self.meta.filters.iter().copied().zip(filters)
    }

    /// Whether the run has a filter.
    pub fn has_filter(&self) -> bool {
        !self.filters.is_empty()
    }

    /// False only when the run's filter rules `key` out: asked is the part over the block the
    /// key would be in (the first whose last key is not below it; no later block can hold the
    /// key unless that one does).
    pub fn filter_may_contain(&self, key: &[u8]) -> bool {
        // One part (every run not made by sharing) covers every block: no block to find,
        // which the lookup after this filter would do again.
        if let [(_, only)] = self.filters.as_slice() {
            return only.contains(hash_key(key));
        }
        let block = self.search.first_ending_at_or_after(&self.blocks, key);
        let part = self.filters.partition_point(|(end, _)| *end <= block);
        self.filters
            .get(part)
            .is_none_or(|(_, f)| f.contains(hash_key(key)))
    }

    pub fn blocks(&self) -> &[BlockHandle] {
        &self.blocks
    }

    /// Readers read the blocks through the block cache until `patch` (writing them) has
    /// reached the disk.
    pub(crate) fn set_unwritten(&self, patch: PatchId) {
        *self.unwritten.lock() = Some(patch);
    }

    /// Whether every block is on the disk (written, if not yet durable).
    fn blocks_on_disk(&self) -> bool {
        let mut unwritten = self.unwritten.lock();
        let Some(patch) = *unwritten else {
            return true;
        };
        let cache = self.storage.zones.cache();
        if cache.state(patch) == stitch_patch::PatchState::Pending {
            return false;
        }
        *unwritten = None;
        true
    }

    /// Makes the blocks durable if they may not be yet (before a merge stitches them into a
    /// run that reads them from the disk).
    pub(crate) fn make_durable(&self) -> Result<()> {
        // Readers go on through the cache until the flush has written the blocks.
        let patch = *self.unwritten.lock();
        if let Some(patch) = patch {
            self.storage.zones.cache().flush_patch(patch)?;
            *self.unwritten.lock() = None;
        }
        Ok(())
    }

    /// The run's extents may be released once nothing reads it any more.
    pub fn mark_obsolete(&self) {
        self.obsolete.store(true, Ordering::Release);
    }

    /// Undoes [`mark_obsolete`](Self::mark_obsolete): another run took over the references.
    pub fn keep(&self) {
        self.obsolete.store(false, Ordering::Release);
    }

    /// The same blocks, index and filter, read as if every entry had sequence number `seq`
    /// (a transaction's private run at its commit). The new run owns the references: call
    /// [`keep`](Self::keep) on this one.
    pub fn linked(&self, seq: u64) -> Arc<Run> {
        let mut meta = self.meta.clone();
        meta.seq_override = Some(seq);
        meta.min_seq = seq;
        meta.max_seq = seq;
        for t in &mut meta.ranges {
            t.seq = seq;
        }
        Arc::new(Run {
            meta,
            blocks: self.blocks.clone(),
            search: self.search.clone(),
            filters: self.filters.clone(),
            storage: self.storage.clone(),
            obsolete: AtomicBool::new(false),
            unwritten: Default::default(),
            tombstones: Default::default(),
        })
    }

    /// An entry of this run as readers see it (with the run's sequence number, if it has one).
    fn seen<'a>(&self, mut e: EntryRef<'a>) -> EntryRef<'a> {
        if let Some(seq) = self.meta.seq_override {
            e.seq = seq;
        }
        e
    }

    /// Block `i`, from the read cache or the disk (checked against the index); `fill` says
    /// whether a block read from the disk is kept in the cache.
    fn block_from(&self, i: usize, fill: Fill) -> Result<Arc<Block>> {
        let h = &self.blocks[i];
        if let Some(b) = self.storage.cache.get(&h.addr) {
            return Ok(b);
        }
        let block = Arc::new(self.decode_block(i, self.framed(i)?)?);
        if fill == Fill::Cache {
            self.storage.cache.insert(h.addr, block.clone());
        }
        Ok(block)
    }

    /// Block `i`'s extent as read, header in front, its checksum verified.
    fn framed(&self, i: usize) -> Result<Vec<u8>> {
        // Only installed runs are read, and a run is installed once the checkpoint naming it
        // (and so every block of it) is durable: its blocks can be read from the disk itself.
        // An ingested run is installed before: until its blocks are written, through the cache.
        let addr = self.blocks[i].addr;
        let zones = &self.storage.zones;
        match self.blocks_on_disk() {
            true => zones.read_durable_framed(addr, ExtentKind::RUN_BLOCK),
            false => zones.read_framed(addr, ExtentKind::RUN_BLOCK),
        }
        .map_err(|e| self.block_error(e, i))
    }

    /// Block `i` for a reader going through it once, from the read cache if it is there,
    /// else parsed and cached if the cache admits it (see `cache.rs`), else decoded as it is
    /// read ([`RawEntries`]).
    fn load_once(&self, i: usize) -> Result<Loaded> {
        let addr = self.blocks[i].addr;
        if let Some(b) = self.storage.cache.get(&addr) {
            return Ok(Loaded::Parsed(b, 0));
        }
        if self.storage.cache.admit(addr) {
            return Ok(Loaded::Parsed(self.block_from(i, Fill::Cache)?, 0));
        }
        self.raw(i, self.framed(i)?)
    }

    /// Block `i` read as `framed`, to be decoded entry by entry (parsed whole, for the
    /// versions that must be).
    fn raw(&self, i: usize, framed: Vec<u8>) -> Result<Loaded> {
        let start = stitch_zone::EXTENT_HEADER_LEN;
        if !RawEntries::reads(&framed, start) {
            return Ok(Loaded::Parsed(Arc::new(self.decode_block(i, framed)?), 0));
        }
        match RawEntries::new(framed, start, self.framing(i)) {
            Ok(Some(entries)) => Ok(Loaded::Raw {
                entries,
                block: i,
                ready: false,
            }),
            // Not met: `reads` said it reads this version.
            Ok(None) => Err(self.block_corrupt(i, "unsupported block version".into())),
            Err(d) => Err(self.block_corrupt(i, d)),
        }
    }

    fn block_corrupt(&self, i: usize, detail: String) -> Error {
        let h = &self.blocks[i];
        Error::corrupt(
            "run block",
            format!("run {} block {i} {}", self.meta.id, h.addr),
            detail,
        )
    }

    /// Blocks `i..until` for a reader that wants them all (a merge that copies them, a
    /// scan streaming through them): read in one disk request while each follows the one
    /// before on disk, up to `max_bytes` of extents (always block `i`; when it is the only
    /// one, as [`block_from`](Self::block_from) reads it). Not kept in the read cache, as
    /// [`Fill::Stream`] says.
    pub(crate) fn blocks_ahead(
        &self,
        i: usize,
        until: usize,
        max_bytes: u64,
    ) -> Result<Vec<Arc<Block>>> {
        let end = self.span_ahead(i, until, max_bytes);
        if end == i + 1 || !self.blocks_on_disk() {
            return (i..end).map(|b| self.block_from(b, Fill::Stream)).collect();
        }
        let framed = self.framed_span(i, end)?;
        framed
            .into_iter()
            .enumerate()
            .map(|(k, f)| Ok(Arc::new(self.decode_block(i + k, f)?)))
            .collect()
    }

    /// [`blocks_ahead`](Self::blocks_ahead)'s blocks as read (header in front, checked), not
    /// parsed, for a reader decoding their entries as it goes.
    fn framed_ahead(&self, i: usize, until: usize, max_bytes: u64) -> Result<Vec<Vec<u8>>> {
        let end = self.span_ahead(i, until, max_bytes);
        if end == i + 1 || !self.blocks_on_disk() {
            return (i..end).map(|b| self.framed(b)).collect();
        }
        self.framed_span(i, end)
    }

    /// Where the blocks from `i` that [`blocks_ahead`](Self::blocks_ahead) reads at once end:
    /// while each follows the one before on disk, before `until`, within `max_bytes` (block
    /// `i` always).
    fn span_ahead(&self, i: usize, until: usize, max_bytes: u64) -> usize {
        let mut end = i + 1;
        let mut bytes = u64::from(self.blocks[i].addr.len);
        while let Some(h) = self.blocks[..until.min(self.blocks.len())].get(end) {
            bytes += u64::from(h.addr.len);
            if bytes > max_bytes || !h.addr.follows(&self.blocks[end - 1].addr) {
                break;
            }
            end += 1;
        }
        end
    }

    /// Blocks `i..end`, which lie back to back on the disk, read in one request.
    fn framed_span(&self, i: usize, end: usize) -> Result<Vec<Vec<u8>>> {
        let addrs: Vec<_> = self.blocks[i..end].iter().map(|h| h.addr).collect();
        self.storage
            .zones
            .read_durable_framed_span(&addrs, ExtentKind::RUN_BLOCK)
            .map_err(|e| self.block_error(e, i))
    }

    fn block_error(&self, e: stitch_zone::ZoneError, i: usize) -> Error {
        Error::from(e).within("run block", format!("run {} block {i}", self.meta.id))
    }

    /// Parses block `i` read whole (extent header in front) and checks it against the index.
    fn decode_block(&self, i: usize, framed: Vec<u8>) -> Result<Block> {
        let h = &self.blocks[i];
        let block = Block::parse_at(framed, stitch_zone::EXTENT_HEADER_LEN, self.framing(i))
            .map_err(|d| self.block_corrupt(i, d))?;
        let agrees = block.len() as u64 == h.entries
            && block.len() > 0
            && block.entry(0).key == h.first_key.as_slice()
            && block.entry(block.len() - 1).key == h.last_key.as_slice();
        if !agrees {
            return Err(self.block_corrupt(i, NOT_THE_INDEX.into()));
        }
        Ok(block)
    }

    /// What the index says of block `i` that its decoding checks.
    fn framing(&self, i: usize) -> Framing<'_> {
        let h = &self.blocks[i];
        Framing {
            first_key: &h.first_key,
            entries: h.entries,
        }
    }

    /// Every entry of block `i` (for `check`, which reads every block once).
    pub fn read_block(&self, i: usize) -> Result<Vec<Entry>> {
        let b = self.block_from(i, Fill::Stream)?;
        Ok((0..b.len()).map(|j| b.entry(j).to_entry()).collect())
    }

    /// A key the run holds an entry or a range tombstone for (`None`: it holds neither).
    pub fn some_key(&self) -> Option<&[u8]> {
        let first = self.blocks.first().map(|b| b.first_key.as_slice());
        first.or_else(|| self.meta.ranges.first().map(|t| t.start.as_slice()))
    }

    /// Whether `key` lies within the run's key range.
    pub fn covers(&self, key: &[u8]) -> bool {
        match (self.blocks.first(), self.blocks.last()) {
            (Some(first), Some(last)) => {
                first.first_key.as_slice() <= key && key <= last.last_key.as_slice()
            }
            _ => false,
        }
    }

    /// The newest version of `key` at or below `snapshot`, if the run has one.
    pub fn get(&self, key: &[u8], snapshot: u64) -> Result<Option<(u64, Value)>> {
        // A linked run holds one version per key, all at its sequence number.
        let snapshot = match self.meta.seq_override {
            Some(seq) if seq > snapshot => return Ok(None),
            Some(_) => u64::MAX,
            None => snapshot,
        };
        let mut i = self.search.first_ending_at_or_after(&self.blocks, key);
        while i < self.blocks.len() && self.blocks[i].first_key.as_slice() <= key {
            let found = match self.storage.cache.get(&self.blocks[i].addr) {
                Some(block) => block.found(key, snapshot),
                None => self.find_uncached(i, key, snapshot)?,
            };
            match found {
                Found::Version(seq, value) => {
                    let seq = self.meta.seq_override.unwrap_or(seq);
                    return Ok(Some((seq, value)));
                }
                Found::Absent => return Ok(None),
                // Older versions of the key continue in the next block.
                Found::MaybeNext => i += 1,
            }
        }
        Ok(None)
    }

    /// [`get`](Self::get) in block `i`, not cached: parsed and cached if the read cache
    /// admits it (see `cache.rs`), else looked up in its raw bytes.
    fn find_uncached(&self, i: usize, key: &[u8], snapshot: u64) -> Result<Found> {
        let h = &self.blocks[i];
        if self.storage.cache.admit(h.addr) {
            let block = self.block_from(i, Fill::Cache)?;
            return Ok(block.found(key, snapshot));
        }
        let framed = self.framed(i)?;
        let start = stitch_zone::EXTENT_HEADER_LEN;
        match Block::find(&framed, start, self.framing(i), key, snapshot) {
            Ok(Some(found)) => Ok(found),
            // A version only parsing reads.
            Ok(None) => Ok(self.decode_block(i, framed)?.found(key, snapshot)),
            Err(d) => Err(self.block_corrupt(i, d)),
        }
    }

    /// All entries from the first whose key is at least `from`, in order.
    pub fn iter_from(self: &Arc<Self>, from: &[u8]) -> RunIter {
        self.iter_range(from, Bound::Unbounded)
    }

    /// The entries from the first whose key is at least `from`, in order, for a scan that
    /// stops at `end`: it may yield keys past `end` (the caller cuts them), but reads ahead
    /// no block that starts past it.
    pub fn iter_range(self: &Arc<Self>, from: &[u8], end: Bound<&[u8]>) -> RunIter {
        let block = self.search.first_ending_at_or_after(&self.blocks, from);
        RunIter {
            run: self.clone(),
            block,
            current: None,
            seek: Some(from.to_vec()),
            end: end.map(<[u8]>::to_vec),
            ahead: VecDeque::new(),
            short_left: SHORT_SCAN,
            read_ahead: FIRST_READ_AHEAD,
        }
    }

    /// The first block from `from` on that starts past `end`: no entry a scan stopping at
    /// `end` wants lies in it or after it.
    fn first_block_past(&self, from: usize, end: Bound<&[u8]>) -> usize {
        from + self.blocks[from..].partition_point(|h| !past_end(&h.first_key, end))
    }
}

impl Run {
    /// All entries up to `end`, backwards: keys descending, a key's versions oldest first
    /// (wrap it in `merge_iter::NewestFirst`).
    pub fn iter_rev(self: &Arc<Self>, end: Bound<&[u8]>) -> RunRevIter {
        let block = match end {
            Bound::Included(k) | Bound::Excluded(k) => {
                self.search.starting_at_or_before(&self.blocks, k)
            }
            Bound::Unbounded => self.blocks.len(),
        };
        RunRevIter {
            run: self.clone(),
            block,
            current: None,
            end: end.map(<[u8]>::to_vec),
            started: false,
            short_left: SHORT_SCAN,
        }
    }
}

/// Iterates a run's entries backwards, block by block.
pub struct RunRevIter {
    run: Arc<Run>,
    /// Blocks before this one are still to be read.
    block: usize,
    /// The loaded block and how many of its entries are left (taken from the back).
    current: Option<(Arc<Block>, usize)>,
    end: Bound<Vec<u8>>,
    /// A block has been read.
    started: bool,
    /// Bytes of blocks still to be cached past the first (see [`SHORT_SCAN`]).
    short_left: u64,
}

impl Iterator for RunRevIter {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        loop {
            if let Some((block, left)) = &mut self.current {
                while *left > 0 {
                    *left -= 1;
                    let e = self.run.seen(block.entry(*left));
                    if !past_end(e.key, self.end.as_ref().map(Vec::as_slice)) {
                        return Some(Ok(e.to_entry()));
                    }
                }
                self.current = None;
            }
            if self.block == 0 {
                return None;
            }
            self.block -= 1;
            // Cached: the block the scan starts in and a short scan's, not those a long one
            // streams through.
            let fill = if !self.started {
                Fill::Cache
            } else if self.short_left > 0 {
                let len = u64::from(self.run.blocks[self.block].addr.len);
                self.short_left = self.short_left.saturating_sub(len);
                Fill::Cache
            } else {
                Fill::Stream
            };
            self.started = true;
            match self.run.block_from(self.block, fill) {
                Ok(b) => {
                    let len = b.len();
                    self.current = Some((b, len));
                }
                Err(e) => {
                    self.block = 0;
                    return Some(Err(e));
                }
            }
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if !self.obsolete.load(Ordering::Acquire) {
            return;
        }
        let extents = self.extents().map(|(addr, _)| addr).collect::<Vec<_>>();
        if let Err(e) = self.storage.zones.decref_all(extents) {
            tracing::error!("releasing the extents of run {}: {e}", self.meta.id);
        }
    }
}

impl LazySource for RunIter {
    /// Between blocks, the next block's first key (or the seek key, if larger: the first
    /// block is entered at the first key not below it).
    fn bound(&self) -> Option<&[u8]> {
        if self.current.as_ref().is_some_and(Loaded::has_more) {
            return None;
        }
        let first = self.run.blocks.get(self.block)?.first_key.as_slice();
        match &self.seek {
            Some(k) if k.as_slice() > first => Some(k),
            _ => Some(first),
        }
    }
}

/// Whether a block read from the disk is kept in the read cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fill {
    Cache,
    /// Streamed through once (a scan past its first block, a merge's input): caching it
    /// would only push out blocks that point reads will want again.
    Stream,
}

/// Bytes of blocks a [`RunIter`] reads one at a time through the read cache, past the block
/// it starts in, before it reads ahead: a short scan (100 entries of 100 B span three or four
/// 4 KiB blocks) costs what as many point reads cost, served from the cache when it holds
/// them, and reads nothing it will not use. Reading ahead from the first block made such a
/// scan read and check 64 KiB from the disk for the 8 KiB it wanted, every time.
const SHORT_SCAN: u64 = 32 << 10;
/// What a streaming [`RunIter`] (one past [`SHORT_SCAN`]) reads from the disk at once at
/// first: it doubles with each read up to [`MAX_READ_AHEAD`], so a long scan reads in large
/// requests.
const FIRST_READ_AHEAD: u64 = 64 << 10;
/// See [`FIRST_READ_AHEAD`].
const MAX_READ_AHEAD: u64 = 1 << 20;

/// Iterates a run's entries block by block. Past the block it starts in and [`SHORT_SCAN`]
/// bytes more, it reads blocks that lie back to back on the disk in one request
/// (read-ahead), up to the scan's end.
pub struct RunIter {
    run: Arc<Run>,
    /// The next block to load.
    block: usize,
    /// The loaded block, where it is at.
    current: Option<Loaded>,
    seek: Option<Vec<u8>>,
    /// Where the scan stops: blocks starting past it are not read ahead.
    end: Bound<Vec<u8>>,
    /// Blocks `block..` read ahead.
    ahead: VecDeque<Loaded>,
    /// Bytes of blocks still to be read one at a time, through the cache, before reading
    /// ahead (see [`SHORT_SCAN`]).
    short_left: u64,
    /// Bytes of the next read-ahead.
    read_ahead: u64,
}

/// A block a [`RunIter`] goes through.
enum Loaded {
    /// Parsed (from the read cache, or cached now), and the next entry in it.
    Parsed(Arc<Block>, usize),
    /// Block `block`'s entries, decoded as they are read; `ready` when the current one is
    /// still to be handed out (a seek stopped at it).
    Raw {
        entries: RawEntries<Vec<u8>>,
        block: usize,
        ready: bool,
    },
}

impl Loaded {
    /// Moves to the first entry whose key is at least `key`.
    fn seek(&mut self, run: &Run, key: &[u8]) -> Result<()> {
        match self {
            Loaded::Parsed(b, pos) => *pos = b.seek(key),
            Loaded::Raw {
                entries,
                block,
                ready,
            } => {
                while entries
                    .advance()
                    .map_err(|d| run.block_corrupt(*block, d))?
                {
                    if entries.current().key >= key {
                        *ready = true;
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    /// The next entry, as readers see it; `None` past the block's last.
    fn next(&mut self, run: &Run) -> Result<Option<Entry>> {
        match self {
            Loaded::Parsed(b, pos) => {
                if *pos == b.len() {
                    return Ok(None);
                }
                *pos += 1;
                Ok(Some(run.seen(b.entry(*pos - 1)).to_entry()))
            }
            Loaded::Raw {
                entries,
                block,
                ready,
            } => {
                if !std::mem::take(ready)
                    && !entries
                        .advance()
                        .map_err(|d| run.block_corrupt(*block, d))?
                {
                    // Every entry read: the last must be the one the index names.
                    if entries.current().key != run.blocks[*block].last_key.as_slice() {
                        return Err(run.block_corrupt(*block, NOT_THE_INDEX.into()));
                    }
                    return Ok(None);
                }
                Ok(Some(run.seen(entries.current()).to_entry()))
            }
        }
    }

    /// Whether entries are left to hand out.
    fn has_more(&self) -> bool {
        match self {
            Loaded::Parsed(b, pos) => *pos < b.len(),
            Loaded::Raw { entries, ready, .. } => *ready || entries.has_next(),
        }
    }
}

impl Iterator for RunIter {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        loop {
            if let Some(loaded) = &mut self.current {
                match loaded.next(&self.run) {
                    Ok(Some(e)) => return Some(Ok(e)),
                    Ok(None) => self.current = None,
                    Err(e) => return Some(Err(self.fail(e))),
                }
            }
            if self.block >= self.run.blocks.len() {
                return None;
            }
            let loaded = self.load().and_then(|mut loaded| {
                if let Some(k) = self.seek.take() {
                    loaded.seek(&self.run, &k)?;
                }
                Ok(loaded)
            });
            match loaded {
                Ok(loaded) => self.current = Some(loaded),
                Err(e) => return Some(Err(self.fail(e))),
            }
            self.block += 1;
        }
    }
}

impl RunIter {
    /// Ends the iteration at an error.
    fn fail(&mut self, e: Error) -> Error {
        self.block = self.run.blocks.len();
        self.current = None;
        self.ahead.clear();
        e
    }

    /// Block `self.block`: the block a scan starts in, and those of a short scan after it,
    /// are read alone and may be cached (a seek is much like a point read); the blocks a long
    /// scan streams through after that are read ahead and not cached. Blocks not cached are
    /// decoded as they are read, not parsed.
    fn load(&mut self) -> Result<Loaded> {
        if let Some(b) = self.ahead.pop_front() {
            return Ok(b);
        }
        if self.seek.is_some() {
            return self.run.load_once(self.block);
        }
        if self.short_left > 0 {
            let len = u64::from(self.run.blocks[self.block].addr.len);
            self.short_left = self.short_left.saturating_sub(len);
            return self.run.load_once(self.block);
        }
        let end = self.end.as_ref().map(Vec::as_slice);
        let until = self
            .run
            .first_block_past(self.block, end)
            .max(self.block + 1);
        let read = self.run.framed_ahead(self.block, until, self.read_ahead)?;
        self.read_ahead = (self.read_ahead * 2).min(MAX_READ_AHEAD);
        for (k, framed) in read.into_iter().enumerate() {
            let loaded = self.run.raw(self.block + k, framed)?;
            self.ahead.push_back(loaded);
        }
        self.ahead.pop_front().ok_or_else(|| {
            self.run
                .block_corrupt(self.block, "read ahead nothing".into())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{bytes_read, counted_storage, counted_storage_cached, run_of};
    use super::*;

    fn key(r: u32) -> Vec<u8> {
        [r.to_be_bytes().as_slice(), &[1]].concat()
    }

    /// The device bytes a short scan reads: the blocks it wants and none past them, and
    /// nothing at all once they are cached (at once in a cache with room, as point reads'
    /// are). Scans of 100 entries fell from 46K to 20K a second when every scan read 64 KiB
    /// ahead of its first block.
    #[test]
    fn a_short_scan_reads_only_its_blocks_and_the_cache_keeps_them() {
        let (disk, storage) = counted_storage_cached(1 << 20);
        let run = run_of(&storage, 1, 1, 600);
        let bytes = bytes_read(&disk);
        let block_bytes = 4096 + 64;
        for round in 0..3 {
            let (reads, read) = (disk.reads(), bytes.load(Ordering::Relaxed));
            // An unbounded scan that stops after 4 entries (4 blocks), as `take(n)` does.
            let got: Vec<Vec<u8>> = run
                .iter_range(&key(300), Bound::Unbounded)
                .take(4)
                .map(|e| e.unwrap().key)
                .collect();
            assert_eq!(got, (300..304).map(key).collect::<Vec<_>>());
            let (reads, read) = (disk.reads() - reads, bytes.load(Ordering::Relaxed) - read);
            match round {
                0 => {
                    assert_eq!(reads, 4, "one request per block");
                    assert!(read <= 4 * block_bytes, "read {read} bytes for 4 blocks");
                }
                _ => assert_eq!((reads, read), (0, 0), "a repeated scan hits the cache"),
            }
        }
    }

    #[test]
    fn a_scan_reads_ahead_in_large_requests_and_not_past_its_end() {
        let (disk, storage) = counted_storage();
        let blocks = 600;
        let run = run_of(&storage, 1, 1, blocks);
        let bytes = bytes_read(&disk);
        let block_bytes = 4096 + 64;
        // (first key, end): the keys from..to, each in a block of its own, back to back.
        for (from, to) in [
            (0, blocks),
            (10, 50),
            (100, 101),
            (299, blocks),
            (599, blocks),
        ] {
            let (reads, read) = (disk.reads(), bytes.load(Ordering::Relaxed));
            let end = key(to);
            let got: Vec<Vec<u8>> = run
                .iter_range(&key(from), Bound::Excluded(&end))
                .map(|e| e.unwrap().key)
                .take_while(|k| *k < end)
                .collect();
            assert_eq!(got, (from..to).map(key).collect::<Vec<_>>(), "{from}..{to}");
            let (reads, read) = (disk.reads() - reads, bytes.load(Ordering::Relaxed) - read);
            let wanted = u64::from(to - from);
            // The first block and a short scan's alone, then requests doubling from 64 KiB
            // to 1 MiB: a few requests where one per block was made before.
            let short = SHORT_SCAN.div_ceil(block_bytes);
            assert!(
                reads <= 1 + short + 5 + wanted / 200,
                "{from}..{to}: {reads} reads"
            );
            // Nothing past the block that tells where the range ends.
            assert!(
                read <= (wanted + 1) * block_bytes,
                "{from}..{to}: read {read} bytes for {wanted} blocks"
            );
        }
    }
}
