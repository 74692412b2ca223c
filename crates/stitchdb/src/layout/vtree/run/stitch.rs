//! The VT-tree merge: inputs are walked block by block in key order. A block whose key range
//! overlaps no other input is *stitched* into the output (its index entry moves, the block
//! stays where it is) when it starts a span of such blocks, contiguous on disk, at least as
//! long as the stitching threshold; everything else is decoded and copied, merged entry by
//! entry with the other inputs. A span that other inputs overlap only with versions it
//! shadows is stitched as well (see [`super::shadow`]). Threshold 0 stitches every block it
//! can (the log-structured end of the continuum); `Never` copies everything (a classic
//! LSM-tree merge). Each input is walked by a cursor (`cursor`).

use super::covered::Covered;
use super::cursor::{Cursor, COPY_AHEAD};
use super::shadow::shadowing_span;
use super::{BlockHandle, BlockLayout, FilterChoice, Reused, Run, RunBuilder, RunFilter, Storage};
use crate::entry::{EntryRef, RangeDeletes, RangeTombstone};
use crate::merge_iter::VersionFilter;
use crate::options::Stitching;
use crate::Result;
use std::collections::VecDeque;
use std::sync::Arc;
use stitch_filter::QuotientFilter;
use stitch_patch::PatchId;
use stitch_zone::Stream;

/// What a merge did, for `stats` and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MergeStats {
    /// Bytes of blocks decoded and written anew.
    pub copied_bytes: u64,
    /// Bytes of blocks stitched into the output where they lie.
    pub stitched_bytes: u64,
    /// The new run lists its inputs' index extents instead of writing its own.
    pub index_shared: bool,
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
    /// The output's filter: a quotient filter is merged from the inputs' (no key is reread),
    /// a Bloom filter built from the keys kept (its table's merges copy every block).
    pub filter: FilterChoice,
    /// Where the new blocks are appended: a stream no other merge appends to meanwhile.
    pub stream: Stream,
    /// The format and size of the blocks it writes (stitched blocks keep theirs).
    pub blocks: BlockLayout,
    /// Below every version in front of the inputs (`VTree::seq_bound_before`): with
    /// `oldest_snapshot`, what a specialized format may store without sequence numbers.
    pub seq_bound: u64,
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
        filter: filter_choice,
        stream,
        blocks,
        seq_bound,
    } = spec;
    // The new run is read from the disk, blocks stitched from the inputs included.
    for run in inputs {
        run.make_durable()?;
    }
    let mut out = RunBuilder::new(storage, id, level, stream);
    out.expect_bytes(inputs.iter().map(|r| r.meta.data_bytes).sum());
    let zone_size = storage.zones.zone_size();
    // Range tombstones hide versions in other inputs: those versions must be seen (copied) to
    // be dropped, so a block a tombstone touches is never stitched.
    let ranges: Vec<RangeTombstone> = inputs.iter().flat_map(|r| r.meta.ranges.clone()).collect();
    let covered = Covered::new(&ranges);
    let horizon = oldest_snapshot.min(seq_bound);
    out.set_layout(blocks, horizon, RangeDeletes::new(ranges.clone()));
    // A Bloom filter is built from the keys kept (its table's merges stitch nothing); a
    // quotient filter is merged from the inputs' below.
    if let FilterChoice::Bloom(_) = filter_choice {
        out.filter_keys(filter_choice);
    }
    let mut filter = VersionFilter::new(oldest_snapshot, bottom, RangeDeletes::new(ranges.clone()));
    let mut cursors: Vec<Cursor> = inputs
        .iter()
        .map(|run| Cursor {
            run: run.clone(),
            next_block: 0,
            current: None,
            ahead: VecDeque::new(),
            no_shadow_before: 0,
        })
        .collect();
    // Each round takes the input with the smallest next key (newest version first among
    // equal keys).
    while let Some(i) = (0..cursors.len())
        .filter(|&i| cursors[i].peek().is_some())
        .min_by(|&a, &b| cursors[a].peek().cmp(&cursors[b].peek()))
    {
        if cursors[i].current.is_none() {
            // A key's versions may straddle two blocks of a run (a flush keeps the versions
            // open readers need): a block going on with the key just filtered is copied.
            let c = &cursors[i];
            let straddles = filter.is_current(&c.run.blocks[c.next_block].first_key);
            let span = match straddles {
                true => None,
                false => match stitchable_span(&cursors, i, stitching, zone_size, &covered) {
                    Some(end) => Some(end),
                    None => shadowing_span(
                        &mut cursors,
                        i,
                        stitching,
                        zone_size,
                        oldest_snapshot,
                        &covered,
                    )?,
                },
            };
            if let Some(end) = span {
                let c = &cursors[i];
                out.stitch(&c.run, &c.run.blocks[c.next_block..end])?;
                let last = c.run.blocks[end - 1].last_key.clone();
                cursors[i].next_block = end;
                cursors[i].ahead.clear();
                // What the other inputs hold up to the span's end it shadows (nothing, for
                // a span no other input overlaps).
                for (j, c) in cursors.iter_mut().enumerate() {
                    if j != i {
                        c.skip_through(&last)?;
                    }
                }
                filter.reset();
                continue;
            }
            let block = match cursors[i].ahead.pop_front() {
                Some(block) => block,
                None => {
                    let limit = copy_ahead(&cursors, i, stitching, zone_size, &covered);
                    let c = &mut cursors[i];
                    let mut read =
                        VecDeque::from(c.run.blocks_ahead(c.next_block, usize::MAX, limit)?);
                    let block = read.pop_front().expect("blocks_ahead reads at least one");
                    c.ahead = read;
                    block
                }
            };
            let c = &mut cursors[i];
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
    let shared = whole_inputs(inputs, out.blocks()?, filter_choice.wants_hashes());
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
        None => match filter_choice {
            FilterChoice::None => None,
            FilterChoice::Bloom(_) => out.key_filter(),
            FilterChoice::Quotient(rate) => {
                let parts: Option<Vec<Vec<&QuotientFilter>>> = inputs
                    .iter()
                    .filter(|r| r.meta.entries > 0)
                    .map(|r| r.quotient_filters())
                    .collect();
                let parts: Vec<&QuotientFilter> = parts.into_iter().flatten().flatten().collect();
                match parts.is_empty() {
                    true => None,
                    false => QuotientFilter::merge(&parts, rate)
                        .ok()
                        .map(RunFilter::Quotient),
                }
            }
        },
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
/// none). `None` when any block was copied, dropped or stitched from elsewhere, or an input
/// has no index mirror (written before mirrors: the run writes its own index and mirror).
fn whole_inputs(inputs: &[Arc<Run>], blocks: &[BlockHandle], filters: bool) -> Option<Reused> {
    let mut whole: Vec<&Arc<Run>> = inputs.iter().filter(|r| !r.blocks.is_empty()).collect();
    whole.sort_by(|a, b| a.blocks[0].first_key.cmp(&b.blocks[0].first_key));
    let concatenated = whole.iter().flat_map(|r| r.blocks.iter().map(|b| b.addr));
    let same = blocks.len() == whole.iter().map(|r| r.blocks.len()).sum::<usize>()
        && concatenated.eq(blocks.iter().map(|b| b.addr));
    let mirrored = whole.iter().all(|r| !r.meta.index_mirror.is_empty());
    let with_filters = filters && whole.iter().all(|r| r.has_filter());
    (same && mirrored).then(|| Reused {
        index: whole
            .iter()
            .flat_map(|r| r.meta.index.iter().copied())
            .collect(),
        index_mirror: whole
            .iter()
            .flat_map(|r| r.meta.index_mirror.iter().copied())
            .collect(),
        filters: match with_filters {
            true => whole.iter().flat_map(|r| r.filter_parts()).collect(),
            false => Vec::new(),
        },
    })
}

/// Bytes of blocks cursor `i`, about to copy its next block, may read in the same request:
/// that block and the ones after it (back to back on disk) that the merge will copy too,
/// predicted from the indexes (see [`short_span_end`]); reading them one request at a time cost a
/// system call, a page-cache lookup and a checksum call per 4 KiB. A block predicted to be
/// copied that is stitched after all was read for nothing, never wrongly: blocks read ahead
/// are dropped when their cursor stitches.
fn copy_ahead(
    cursors: &[Cursor],
    i: usize,
    stitching: Stitching,
    zone_size: u64,
    covered: &Covered,
) -> u64 {
    let c = &cursors[i];
    let blocks = &c.run.blocks;
    let threshold = match stitching {
        Stitching::Threshold(t) if c.run.meta.seq_override.is_none() => Some(t),
        _ => None,
    };
    // Blocks up to `copied` are predicted copied; `b` is the next one to judge.
    let (mut copied, mut b) = (c.next_block + 1, c.next_block + 1);
    let mut bytes = u64::from(blocks[c.next_block].addr.len);
    while copied < blocks.len() {
        if copied == b {
            match threshold.map(|t| short_span_end(cursors, i, b, t, zone_size, covered)) {
                Some(None) => break,
                Some(Some(end)) => b = end,
                None => b = blocks.len(),
            }
        }
        let len = u64::from(blocks[copied].addr.len);
        if bytes + len > COPY_AHEAD || !blocks[copied].addr.follows(&blocks[copied - 1].addr) {
            break;
        }
        bytes += len;
        copied += 1;
    }
    bytes
}

/// Where the span of blocks that block `b` of cursor `i` starts when the merge reaches it
/// ends, if it is too short to stitch (see [`stitchable_span`]; at least `b + 1`); `None` if
/// it may be stitched. The other inputs will have consumed their keys below the block's
/// first key by then, and their next keys are read off their indexes; where an index cannot
/// tell (that key lies inside a block of another input), the block is taken to overlap it,
/// which a merge copies. The blocks of a short span are all taken as copied (a span starting
/// inside it may reach further, but judging each block again made the prediction quadratic).
fn short_span_end(
    cursors: &[Cursor],
    i: usize,
    b: usize,
    threshold: u64,
    zone_size: u64,
    covered: &Covered,
) -> Option<usize> {
    let blocks = &cursors[i].run.blocks;
    let from = blocks[b].first_key.as_slice();
    let others_next = (0..cursors.len())
        .filter(|&j| j != i)
        .filter_map(|j| cursors[j].next_key_from(from))
        .min();
    let (end, bytes) = clear_span(blocks, b, others_next, zone_size, covered, threshold);
    (bytes < threshold).then_some(end.max(b + 1))
}

/// The span of `blocks` from `start` that a merge could stitch as one: blocks wholly below
/// `others_next` (the smallest next key of the other inputs) that no range tombstone
/// touches, each continuing the one before on disk. Returns its end and its bytes, stopping
/// once it holds `enough` bytes.
fn clear_span(
    blocks: &[BlockHandle],
    start: usize,
    others_next: Option<&[u8]>,
    zone_size: u64,
    covered: &Covered,
    enough: u64,
) -> (usize, u64) {
    let clear = |b: &BlockHandle| {
        others_next.is_none_or(|next| next > b.last_key.as_slice())
            && !covered.touches(&b.first_key, &b.last_key)
    };
    let (mut end, mut bytes) = (start, 0u64);
    while end < blocks.len()
        && bytes < enough
        && clear(&blocks[end])
        && (end == start || blocks[end].addr.continues(&blocks[end - 1].addr, zone_size))
    {
        bytes += u64::from(blocks[end].addr.len);
        end += 1;
    }
    (end, bytes)
}

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
    covered: &Covered,
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
    let start = cursors[i].next_block;
    let (end, bytes) = clear_span(
        &cursors[i].run.blocks,
        start,
        others_next,
        zone_size,
        covered,
        u64::MAX,
    );
    (end > start && bytes >= threshold).then_some(end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::Value;
    use crate::layout::vtree::run::testing::{counted_storage, entries_of, run_of};

    #[test]
    fn interleaved_inputs_are_copied_from_reads_of_many_blocks() {
        // Like randomappend's first merges: each input holds one block per key range, and
        // the two alternate range by range, so no span is long enough to stitch and every
        // block is copied. The merge reads them in requests of up to 64 KiB, not 4 KiB.
        let (disk, storage) = counted_storage();
        let ranges = 300;
        let older = run_of(&storage, 1, 1, ranges);
        let newer = run_of(&storage, 2, 2, ranges);
        let before = disk.reads();
        let spec = MergeSpec {
            id: 3,
            level: 1,
            stitching: Stitching::default(),
            oldest_snapshot: 0,
            bottom: false,
            filter: FilterChoice::None,
            stream: Stream::Flush,
            blocks: BlockLayout::default(),
            seq_bound: u64::MAX,
        };
        let (merged, patch, stats) = merge_runs(&storage, &[newer, older], spec)
            .unwrap()
            .unwrap();
        let reads = disk.reads() - before;
        storage.zones.cache().flush_patch(patch).unwrap();
        assert_eq!(stats.stitched_bytes, 0);
        assert!(reads <= 2 * 40, "{reads} reads for {} blocks", 2 * ranges);
        let entries: Vec<(Vec<u8>, Value)> = entries_of(&merged)
            .into_iter()
            .map(|e| (e.key, e.value))
            .collect();
        let expected: Vec<(Vec<u8>, Value)> = (0..ranges)
            .flat_map(|r| {
                [1u8, 2].map(|s| {
                    let key = [r.to_be_bytes().as_slice(), &[s]].concat();
                    (key, Some(vec![s; 4090]))
                })
            })
            .collect();
        assert_eq!(entries.len(), expected.len());
        assert!(entries == expected);
    }

    /// Merges over versions a newer input shadows (see [`shadow`](crate::layout::vtree::run::shadow)).
    mod shadowing {
        use super::super::{merge_runs, MergeSpec, MergeStats};
        use crate::entry::Entry;
        use crate::layout::vtree::run::testing::{counted_storage, entries_of, run_from};
        use crate::layout::vtree::run::{BlockLayout, FilterChoice, Run, Storage};
        use crate::options::Stitching;
        use proptest::prelude::*;
        use std::collections::BTreeMap;
        use std::sync::Arc;
        use stitch_zone::Stream;

        /// File blocks as KVFS stores them: one 4,000-byte value per key, so about one per
        /// block.
        fn put(key: u32, seq: u64) -> Entry {
            Entry {
                key: key.to_be_bytes().to_vec(),
                seq,
                value: Some(vec![seq as u8; 4000]),
            }
        }

        /// The entries of both inputs in a run's order: by key, newest version first.
        fn every_version(newer: &[Entry], older: &[Entry]) -> Vec<Entry> {
            let mut all: Vec<Entry> = newer.iter().chain(older).cloned().collect();
            all.sort_by(|a, b| {
                (&a.key, std::cmp::Reverse(a.seq)).cmp(&(&b.key, std::cmp::Reverse(b.seq)))
            });
            all
        }

        fn merge(
            storage: &Arc<Storage>,
            inputs: &[Arc<Run>],
            stitching: Stitching,
            oldest_snapshot: u64,
        ) -> (Arc<Run>, MergeStats) {
            let spec = MergeSpec {
                id: 100,
                level: 1,
                stitching,
                oldest_snapshot,
                bottom: false,
                filter: FilterChoice::None,
                stream: Stream::Merge,
                blocks: BlockLayout::default(),
                seq_bound: u64::MAX,
            };
            let (run, patch, stats) = merge_runs(storage, inputs, spec).unwrap().unwrap();
            storage.zones.cache().flush_patch(patch).unwrap();
            (run, stats)
        }

        #[test]
        fn a_rewrite_is_stitched_over_the_stale_keys_it_shadows() {
            // Random writes left every fifth key of the range; then the range was rewritten
            // whole. No plain span reaches 64 KiB (a stale key every 20 KiB).
            let (_, storage) = counted_storage();
            let older: Vec<Entry> = (0..300).step_by(5).map(|k| put(k, 1)).collect();
            let newer: Vec<Entry> = (0..300).map(|k| put(k, 2)).collect();
            let older_run = run_from(&storage, 1, &older);
            let newer_run = run_from(&storage, 2, &newer);
            let (merged, stats) = merge(
                &storage,
                &[newer_run.clone(), older_run],
                Stitching::default(),
                2,
            );
            assert_eq!(stats.copied_bytes, 0);
            assert_eq!(stats.stitched_bytes, newer_run.meta.data_bytes);
            assert!(
                entries_of(&merged) == newer,
                "the stale versions are dropped"
            );
        }

        #[test]
        fn a_rewrite_of_one_key_blocks_shadows_them_unread() {
            // File data: a block per key. The rewrite (every key, newer) is stitched, and the
            // older input's blocks, each named by its index handle, are dropped unread, as are
            // the rewrite's own blocks, whose versions every reader sees.
            let (disk, storage) = counted_storage();
            let block = |k: u32, seq: u64| Entry {
                key: k.to_be_bytes().to_vec(),
                seq,
                value: Some(vec![seq as u8; 4096]),
            };
            let older: Vec<Entry> = (0..300).map(|k| block(k, 1)).collect();
            let newer: Vec<Entry> = (0..300).map(|k| block(k, 2)).collect();
            let older_run = run_from(&storage, 1, &older);
            let newer_run = run_from(&storage, 2, &newer);
            assert!(newer_run.blocks.iter().all(|h| h.holds_one_key()));
            let before = disk.reads();
            let (merged, stats) = merge(
                &storage,
                &[newer_run.clone(), older_run.clone()],
                Stitching::default(),
                2,
            );
            assert_eq!(disk.reads(), before, "no block read");
            assert_eq!(stats.copied_bytes, 0);
            assert_eq!(stats.stitched_bytes, newer_run.meta.data_bytes);
            assert!(entries_of(&merged) == newer);
            // A reader at 1 still sees the older blocks: they are read and kept.
            let (merged, stats) = merge(&storage, &[newer_run, older_run], Stitching::default(), 1);
            assert!(stats.copied_bytes > 0);
            assert!(entries_of(&merged) == every_version(&newer, &older));
        }

        #[test]
        fn versions_a_snapshot_sees_are_copied_not_shadowed() {
            let (_, storage) = counted_storage();
            let older: Vec<Entry> = (0..300).step_by(5).map(|k| put(k, 1)).collect();
            let newer: Vec<Entry> = (0..300).map(|k| put(k, 2)).collect();
            let inputs = [run_from(&storage, 2, &newer), run_from(&storage, 1, &older)];
            // A reader at sequence 1 still sees the older versions.
            let (merged, stats) = merge(&storage, &inputs, Stitching::default(), 1);
            assert!(stats.copied_bytes > 0);
            assert!(entries_of(&merged) == every_version(&newer, &older));
        }

        #[test]
        fn a_key_only_the_older_input_holds_ends_the_span() {
            // The rewrite skipped key 150, which the older input holds: blocks around it are
            // copied, the long stretches either side stitched.
            let (_, storage) = counted_storage();
            let older: Vec<Entry> = (0..300).step_by(5).map(|k| put(k, 1)).collect();
            let newer: Vec<Entry> = (0..300).filter(|&k| k != 150).map(|k| put(k, 2)).collect();
            let inputs = [run_from(&storage, 2, &newer), run_from(&storage, 1, &older)];
            let (merged, stats) = merge(&storage, &inputs, Stitching::default(), 2);
            assert!(stats.copied_bytes > 0);
            assert!(stats.stitched_bytes > 8 * stats.copied_bytes, "{stats:?}");
            let mut expected = newer.clone();
            expected.insert(150, put(150, 1));
            assert!(entries_of(&merged) == expected);
        }

        /// What a reader at `snapshot` sees: each key's newest version at or below it.
        fn visible(entries: &[Entry], snapshot: u64) -> BTreeMap<Vec<u8>, Option<Vec<u8>>> {
            let mut seen: BTreeMap<Vec<u8>, (u64, Option<Vec<u8>>)> = BTreeMap::new();
            for e in entries.iter().filter(|e| e.seq <= snapshot) {
                let newest = seen.get(&e.key).is_none_or(|(s, _)| *s < e.seq);
                if newest {
                    seen.insert(e.key.clone(), (e.seq, e.value.clone()));
                }
            }
            seen.into_iter().map(|(k, (_, v))| (k, v)).collect()
        }

        /// Up to four runs over keys 0..64, newest first, each key at most once per run, values
        /// of mixed sizes (several to a block, two, or one: a block of one key, as file data's
        /// are), tombstones among them.
        fn inputs() -> impl Strategy<Value = Vec<Vec<(u32, Option<usize>)>>> {
            let entry = (
                0u32..64,
                prop_oneof![
                    Just(None),
                    (1usize..3000).prop_map(Some),
                    (4090usize..4200).prop_map(Some)
                ],
            );
            prop::collection::vec(prop::collection::btree_map(entry.0, entry.1, 1..64), 1..5)
                .prop_map(|runs| runs.into_iter().map(|m| m.into_iter().collect()).collect())
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(128))]
            #[test]
            fn a_merge_keeps_what_every_reader_from_the_oldest_snapshot_sees(
                runs in inputs(),
                threshold in prop_oneof![Just(0u64), Just(4096), Just(64 * 1024)],
                oldest_back in 0u64..5,
            ) {
                let (_, storage) = counted_storage();
                // Run r (0 newest) holds sequence numbers above every older run's.
                let mut all = Vec::new();
                let mut inputs = Vec::new();
                let n = runs.len() as u64;
                for (r, keys) in runs.iter().enumerate() {
                    let seq = n - r as u64;
                    let entries: Vec<Entry> = keys
                        .iter()
                        .map(|&(k, len)| Entry {
                            key: k.to_be_bytes().to_vec(),
                            seq,
                            value: len.map(|l| vec![seq as u8; l]),
                        })
                        .collect();
                    all.extend(entries.clone());
                    inputs.push(run_from(&storage, 1 + r as u64, &entries));
                }
                let oldest = n.saturating_sub(oldest_back);
                let (merged, _) = merge(&storage, &inputs, Stitching::Threshold(threshold), oldest);
                let out = entries_of(&merged);
                let order = |e: &Entry| (e.key.clone(), std::cmp::Reverse(e.seq));
                let sorted = out.windows(2).all(|w| order(&w[0]) < order(&w[1]));
                prop_assert!(sorted, "sorted, no duplicates");
                for snapshot in oldest..=n {
                    prop_assert_eq!(visible(&out, snapshot), visible(&all, snapshot));
                }
            }
        }
    }
}
