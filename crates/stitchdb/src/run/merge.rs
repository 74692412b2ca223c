//! The VT-tree merge: inputs are walked block by block in key order. A block whose key range
//! overlaps no other input is *stitched* into the output (its index entry moves, the block
//! stays where it is) when it starts a span of such blocks, contiguous on disk, at least as
//! long as the stitching threshold; everything else is decoded and copied, merged entry by
//! entry with the other inputs. Threshold 0 stitches every block it can (the log-structured
//! end of the continuum); `Never` copies everything (a classic LSM-tree merge).

use super::block::Block;
use super::{BlockHandle, Reused, Run, RunBuilder, Storage};
use crate::memtable::EntryRef;
use crate::merge::VersionFilter;
use crate::range_del::{RangeDeletes, RangeTombstone};
use crate::Result;
use std::cmp::Reverse;
use std::collections::VecDeque;
use std::sync::Arc;
use stitch_filter::QuotientFilter;
use stitch_patch::PatchId;
use stitch_zone::Stream;

/// When a merge may stitch blocks instead of copying them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stitching {
    /// Stitch spans of non-overlapping, contiguous blocks of at least this many bytes.
    Threshold(u64),
    /// Copy everything.
    Never,
}

impl Default for Stitching {
    /// The paper's 64 KiB.
    fn default() -> Self {
        Stitching::Threshold(64 * 1024)
    }
}

/// What a merge did, for `stats` and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MergeStats {
    pub copied_bytes: u64,
    pub stitched_bytes: u64,
    /// The new run lists its inputs' index extents instead of writing its own.
    pub index_shared: bool,
}

/// One input's position: the next block not yet consumed, and a decoded block being copied.
struct Cursor {
    run: Arc<Run>,
    next_block: usize,
    current: Option<(Arc<Block>, usize)>,
    /// Blocks `next_block..`, read together with an earlier one (see [`copy_ahead`]).
    ahead: VecDeque<Arc<Block>>,
}

impl Cursor {
    /// The next key this input will produce (a block's first key when at a block boundary,
    /// where the sequence number is not known yet and counts as newest).
    fn peek(&self) -> Option<(&[u8], Reverse<u64>)> {
        match &self.current {
            Some((b, pos)) => {
                let e = self.run.seen(b.entry(*pos));
                Some((e.key, Reverse(e.seq)))
            }
            None => self
                .run
                .blocks
                .get(self.next_block)
                .map(|h| (h.first_key.as_slice(), Reverse(u64::MAX))),
        }
    }
}

/// What a merge makes and how.
#[derive(Debug, Clone, Copy)]
pub struct MergeSpec {
    /// The new run's id and level.
    pub id: u64,
    pub level: u32,
    pub stitching: Stitching,
    /// Copied entries may drop versions no reader at or after this can see (see
    /// [`VersionFilter`]); stitched blocks keep every version they hold.
    pub oldest_snapshot: u64,
    /// Nothing older than the inputs exists, so tombstones can go.
    pub bottom: bool,
    /// The output's filter rate; its filter is merged from the inputs' (no key is reread).
    pub filter_fp_rate: Option<f64>,
    /// Where the new blocks are appended: a stream no other merge appends to meanwhile.
    pub stream: Stream,
}

/// Merges `inputs` (newest first) into a new run.
pub fn merge_runs(
    storage: &Arc<Storage>,
    inputs: &[Arc<Run>],
    spec: MergeSpec,
) -> Result<Option<(Arc<Run>, PatchId, MergeStats)>> {
    let MergeSpec {
        id,
        level,
        stitching,
        oldest_snapshot,
        bottom,
        filter_fp_rate,
        stream,
    } = spec;
    let mut out = RunBuilder::new(storage, id, level, stream);
    out.expect_bytes(inputs.iter().map(|r| r.meta.data_bytes).sum());
    let zone_size = storage.zones.zone_size();
    // Range tombstones hide versions in other inputs: those versions must be seen (copied) to
    // be dropped, so a merge carrying tombstones stitches nothing.
    let ranges: Vec<RangeTombstone> = inputs.iter().flat_map(|r| r.meta.ranges.clone()).collect();
    let stitching = if ranges.is_empty() {
        stitching
    } else {
        Stitching::Never
    };
    let mut filter = VersionFilter::new(oldest_snapshot, bottom, RangeDeletes::new(ranges.clone()));
    let mut cursors: Vec<Cursor> = inputs
        .iter()
        .map(|run| Cursor {
            run: run.clone(),
            next_block: 0,
            current: None,
            ahead: VecDeque::new(),
        })
        .collect();
    // Each round takes the input with the smallest next key (newest version first among
    // equal keys).
    while let Some(i) = (0..cursors.len())
        .filter(|&i| cursors[i].peek().is_some())
        .min_by(|&a, &b| cursors[a].peek().cmp(&cursors[b].peek()))
    {
        if cursors[i].current.is_none() {
            if let Some(end) = stitchable_span(&cursors, i, stitching, zone_size) {
                let c = &cursors[i];
                for h in &c.run.blocks[c.next_block..end] {
                    out.stitch(&c.run, h)?;
                }
                cursors[i].next_block = end;
                cursors[i].ahead.clear();
                filter.reset();
                continue;
            }
            let c = &mut cursors[i];
            let block = match c.ahead.pop_front() {
                Some(block) => block,
                None => {
                    let limit = copy_ahead(c, stitching, zone_size);
                    let mut read = VecDeque::from(c.run.blocks_ahead(c.next_block, limit)?);
                    let block = read.pop_front().expect("blocks_ahead reads at least one");
                    c.ahead = read;
                    block
                }
            };
            c.current = Some((block, 0));
            c.next_block += 1;
            // Its first entry's sequence number is known only now: choose again.
            continue;
        }
        let c = &mut cursors[i];
        let (block, pos) = c.current.as_mut().expect("loaded above");
        let e: EntryRef = c.run.seen(block.entry(*pos));
        if filter.keep(e.key, e.seq, e.value.is_none()) {
            out.add(e)?;
        }
        *pos += 1;
        if *pos == block.len() {
            c.current = None;
        }
    }
    // At the bottom, a tombstone every reader sees has hidden all it ever will: the versions
    // beneath it were just dropped, and nothing older exists.
    out.set_range_tombstones(
        ranges
            .into_iter()
            .filter(|t| !(bottom && t.seq <= oldest_snapshot))
            .collect(),
    );
    let shared = whole_inputs(inputs, out.blocks(), filter_fp_rate.is_some());
    let stats = MergeStats {
        copied_bytes: out.copied_bytes,
        stitched_bytes: out.stitched_bytes,
        index_shared: shared.is_some(),
    };
    // The union of the inputs' filters covers every key kept (and some dropped: only more
    // false positives). Without a filter on every input there is nothing to merge from.
    let merged_filter = match shared {
        Some(reused) => {
            out.reuse(reused);
            None
        }
        None => filter_fp_rate.and_then(|rate| {
            let inputs: Vec<&Arc<Run>> = inputs.iter().filter(|r| r.meta.entries > 0).collect();
            let parts: Vec<&QuotientFilter> = inputs.iter().flat_map(|r| r.filters()).collect();
            let all = inputs.iter().all(|r| r.has_filter());
            all.then(|| QuotientFilter::merge(&parts, rate).ok())?
        }),
    };
    Ok(out
        .finish(merged_filter)?
        .map(|(run, patch)| (run, patch, stats)))
}

/// When the merge stitched its inputs whole, one after another (as sequential inserts leave
/// them: each input's keys all before the next one's), the output's index and filter are
/// theirs, part for part: their index extents and filter parts, in key order, to list instead
/// of writing the same handles and a merged filter again (RocksDB moves such files down a level;
/// here each run keeps a reference to what it lists). Filter parts only with `filters` and if
/// every input has them (else the run has no filter, as a merge of an unfiltered input has
/// none). `None` when any block was copied, dropped or stitched from elsewhere.
fn whole_inputs(inputs: &[Arc<Run>], blocks: &[BlockHandle], filters: bool) -> Option<Reused> {
    let mut whole: Vec<&Arc<Run>> = inputs.iter().filter(|r| !r.blocks.is_empty()).collect();
    whole.sort_by(|a, b| a.blocks[0].first_key.cmp(&b.blocks[0].first_key));
    let concatenated = whole.iter().flat_map(|r| r.blocks.iter().map(|b| b.addr));
    let same = blocks.len() == whole.iter().map(|r| r.blocks.len()).sum::<usize>()
        && concatenated.eq(blocks.iter().map(|b| b.addr));
    let with_filters = filters && whole.iter().all(|r| r.has_filter());
    same.then(|| Reused {
        index: whole
            .iter()
            .flat_map(|r| r.meta.index.iter().copied())
            .collect(),
        filters: match with_filters {
            true => whole.iter().flat_map(|r| r.filter_parts()).collect(),
            false => Vec::new(),
        },
    })
}

/// Bytes of blocks a cursor about to copy its next block may read in the same request: the
/// blocks after it are copied too if they can never start a stitchable span (their
/// contiguous run on disk is shorter than the threshold, or nothing is stitched), and reading
/// them one request at a time cost a system call and a page-cache lookup per 4 KiB.
/// Otherwise only the one block (reading a block that is then stitched would be wasted).
fn copy_ahead(c: &Cursor, stitching: Stitching, zone_size: u64) -> u64 {
    let threshold = match stitching {
        Stitching::Threshold(t) if c.run.meta.seq_override.is_none() => t,
        _ => return COPY_AHEAD,
    };
    let blocks = &c.run.blocks[c.next_block..];
    let mut bytes = 0u64;
    for (k, h) in blocks.iter().enumerate() {
        if k > 0 && !h.addr.continues(&blocks[k - 1].addr, zone_size) {
            break;
        }
        bytes += u64::from(h.addr.len);
        if bytes >= threshold {
            return 0;
        }
    }
    COPY_AHEAD
}

/// At most this many bytes of blocks are read in one request by [`copy_ahead`].
const COPY_AHEAD: u64 = 64 * 1024;

/// If input `i`'s next block starts a span that may be stitched, the block index where the
/// span ends. A block qualifies when every other input's next key sorts after its last key
/// (nothing else can fall inside its range); consecutive qualifying blocks form a span while
/// each continues the previous one on disk: right after it, or at the start of the next zone
/// its stream moved on to (else the few blocks a run leaves at the end of a zone would be
/// copied at every merge, alone, and never join a span long enough to stay).
fn stitchable_span(
    cursors: &[Cursor],
    i: usize,
    stitching: Stitching,
    zone_size: u64,
) -> Option<usize> {
    let Stitching::Threshold(threshold) = stitching else {
        return None;
    };
    // A linked run's blocks hold private sequence numbers only its own override corrects.
    if cursors[i].run.meta.seq_override.is_some() {
        return None;
    }
    let others_next: Option<&[u8]> = (0..cursors.len())
        .filter(|&j| j != i)
        .filter_map(|j| cursors[j].peek().map(|(k, _)| k))
        .min();
    let clear = |last_key: &[u8]| others_next.is_none_or(|next| next > last_key);
    let blocks = &cursors[i].run.blocks;
    let start = cursors[i].next_block;
    let mut end = start;
    let mut bytes = 0u64;
    while end < blocks.len()
        && clear(&blocks[end].last_key)
        && (end == start || blocks[end].addr.continues(&blocks[end - 1].addr, zone_size))
    {
        bytes += blocks[end].addr.len as u64;
        end += 1;
    }
    (end > start && bytes >= threshold).then_some(end)
}
