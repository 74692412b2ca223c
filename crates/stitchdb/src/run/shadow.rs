//! Stitching over shadowed versions. A block of a newer input that overlaps an older input
//! is stitched all the same when everything the older inputs hold in its key range is an
//! older version of a key the block holds, one no reader can see any more: the merge drops
//! those versions, as copying would have, and leaves the newer block where it lies.
//!
//! This is what rewriting a range of keys leaves behind, and what a file system does all the
//! time: random 4 KiB writes flushed from a memtable scatter single keys over a file's range,
//! and a later sequential rewrite of that range (the kernel writing a file's dirty pages back
//! in order) arrives as a run of contiguous blocks that overlaps one of those keys every few
//! blocks. By the plain rule no span of it is long enough to stitch, and the merge copies the
//! whole rewrite to drop a few stale keys.

use super::block::Block;
use super::covered::Covered;
use super::stitch::Cursor;
use crate::options::Stitching;
use crate::Result;
use std::sync::Arc;

/// At most this many bytes of blocks form one shadowing span: the older inputs' blocks in the
/// span's range are held in memory until it is stitched. Longer rewrites are stitched span
/// after span, each continuing the last on disk.
const MAX_SHADOWING_SPAN: u64 = 1 << 20;

impl Cursor {
    /// Block `next_block + k`, read ahead if it is not yet (blocks read here are the ones the
    /// merge consumes next, whether it stitches or copies them).
    fn block_at(&mut self, k: usize) -> Result<Arc<Block>> {
        while self.ahead.len() <= k {
            let first = self.next_block + self.ahead.len();
            let read = self
                .run
                .blocks_ahead(first, usize::MAX, super::stitch::COPY_AHEAD)?;
            self.ahead.extend(read);
        }
        Ok(self.ahead[k].clone())
    }

    /// The keys and sequence numbers of the entries not consumed yet whose key lies in
    /// `(after, through]` (`after` unbounded when `None`), reading the blocks they lie in;
    /// except a block of one key, whose index handle names it: it stands for its versions
    /// with no sequence number, unread (see [`OlderEntry`]).
    fn entries_in(&mut self, after: Option<&[u8]>, through: &[u8]) -> Result<Vec<OlderEntry>> {
        let above = |key: &[u8]| after.is_none_or(|a| key > a);
        let mut found = Vec::new();
        let collect =
            |found: &mut Vec<OlderEntry>, block: &Block, from: usize, run: &super::Run| {
                for pos in from..block.len() {
                    let e = run.seen(block.entry(pos));
                    if e.key > through {
                        return false;
                    }
                    if above(e.key) {
                        found.push((e.key.to_vec(), Some(e.seq)));
                    }
                }
                true
            };
        if let Some((block, pos)) = &self.current {
            if !collect(&mut found, block, *pos, &self.run) {
                return Ok(found);
            }
        }
        // Blocks wholly at or below `after` were looked at by an earlier call.
        let blocks = &self.run.blocks[self.next_block..];
        let mut k = blocks.partition_point(|h| !above(&h.last_key));
        while self.next_block + k < self.run.blocks.len()
            && self.run.blocks[self.next_block + k].first_key.as_slice() <= through
        {
            let h = &self.run.blocks[self.next_block + k];
            if h.holds_one_key() {
                if above(&h.first_key) {
                    found.push((h.first_key.clone(), None));
                }
                k += 1;
                continue;
            }
            let block = self.block_at(k)?;
            if !collect(&mut found, &block, 0, &self.run) {
                break;
            }
            k += 1;
        }
        Ok(found)
    }

    /// Consumes every entry whose key is at or below `through`; blocks that hold nothing
    /// else are passed over without being read.
    pub(super) fn skip_through(&mut self, through: &[u8]) -> Result<()> {
        if let Some((block, pos)) = &mut self.current {
            while *pos < block.len() && block.entry(*pos).key <= through {
                *pos += 1;
            }
            if *pos < block.len() {
                return Ok(());
            }
            self.current = None;
        }
        while let Some(h) = self.run.blocks.get(self.next_block) {
            if h.first_key.as_slice() > through {
                break;
            }
            if h.last_key.as_slice() <= through {
                self.ahead.pop_front();
                self.next_block += 1;
                continue;
            }
            let block = self.block_at(0)?;
            self.ahead.pop_front();
            self.next_block += 1;
            let pos = (0..block.len())
                .find(|&p| block.entry(p).key > through)
                .expect("the block's last key is past `through`");
            self.current = Some((block, pos));
            break;
        }
        Ok(())
    }
}

/// A version an older input holds: its key, and its sequence number, or `None` for the
/// versions of a block of one key, which are not read to tell. File data is stored a block
/// (4 KiB) to a key, so every block of a file's data is such a block, and a rewrite of a
/// range shadows the older blocks in it without reading them (a merge after random writes
/// over a 1 GiB file read the file's older blocks whole, half of its CPU time, only to drop
/// them). No sequence number is needed: a version in an older input is older than any
/// version of its key in a newer one (readers take the first input holding a key).
type OlderEntry = (Vec<u8>, Option<u64>);

/// If cursor `i`'s next block starts a span that shadows what the other inputs hold in its
/// range, the block index where the span ends (see the module's comment). The span's blocks
/// each continue the one before on disk, no newer input (`j < i`) has a key in its range,
/// and every entry an older input (`j > i`) has in its range is a version of a key the span
/// holds at a newer version that every reader from `oldest_snapshot` on sees instead of it.
/// It is as long as it can be (up to [`MAX_SHADOWING_SPAN`]) and at least the stitching
/// threshold. The blocks read to tell are kept in the cursors for the merge to go on with;
/// `no_shadow_before` spares judging again blocks inside a span found too short.
pub(super) fn shadowing_span(
    cursors: &mut [Cursor],
    i: usize,
    stitching: Stitching,
    zone_size: u64,
    oldest_snapshot: u64,
    covered: &Covered,
) -> Result<Option<usize>> {
    let Stitching::Threshold(threshold) = stitching else {
        return Ok(None);
    };
    let start = cursors[i].next_block;
    if cursors[i].run.meta.seq_override.is_some() || start < cursors[i].no_shadow_before {
        return Ok(None);
    }
    let newer_next: Option<Vec<u8>> = cursors[..i]
        .iter()
        .filter_map(|c| c.peek().map(|(k, _)| k.to_vec()))
        .min();
    let run = cursors[i].run.clone();
    let blocks = &run.blocks;
    let (mut end, mut bytes) = (start, 0u64);
    while end < blocks.len() && bytes < MAX_SHADOWING_SPAN {
        let h = &blocks[end];
        if newer_next
            .as_deref()
            .is_some_and(|n| n <= h.last_key.as_slice())
            || (end > start && !h.addr.continues(&blocks[end - 1].addr, zone_size))
            || covered.touches(&h.first_key, &h.last_key)
        {
            break;
        }
        let after = (end > start).then(|| blocks[end - 1].last_key.as_slice());
        let mut older = Vec::new();
        for c in &mut cursors[i + 1..] {
            older.extend(c.entries_in(after, &h.last_key)?);
        }
        if !older.is_empty() && !shadows(cursors, i, end - start, &older, oldest_snapshot)? {
            break;
        }
        bytes += u64::from(h.addr.len);
        end += 1;
    }
    if end > start && bytes >= threshold {
        return Ok(Some(end));
    }
    // Any span starting inside this one ends where it does, shorter.
    cursors[i].no_shadow_before = end.max(start + 1);
    Ok(None)
}

/// Whether block `k` past cursor `i`'s next holds, for every entry of `older`, a newer
/// version of its key that every reader from `oldest_snapshot` on sees. A block of one key,
/// in a run whose every version such readers see, is judged from its index handle unread.
fn shadows(
    cursors: &mut [Cursor],
    i: usize,
    k: usize,
    older: &[OlderEntry],
    oldest_snapshot: u64,
) -> Result<bool> {
    let run = cursors[i].run.clone();
    let h = &run.blocks[cursors[i].next_block + k];
    if h.holds_one_key() && run.meta.max_seq <= oldest_snapshot {
        return Ok(older.iter().all(|(key, _)| *key == h.first_key));
    }
    let block = cursors[i].block_at(k)?;
    let shadowed = |(key, seq): &OlderEntry| {
        let newer = (block.seek(key)..block.len())
            .map(|p| run.seen(block.entry(p)))
            .take_while(|e| e.key == key.as_slice());
        newer
            .map(|e| e.seq)
            .any(|s| seq.is_none_or(|q| s > q) && s <= oldest_snapshot)
    };
    Ok(older.iter().all(shadowed))
}

#[cfg(test)]
mod tests {
    use super::super::testing::{counted_storage, entries_of, run_from};
    use super::super::{merge_runs, MergeSpec, MergeStats, Run, Storage};
    use crate::entry::Entry;
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
            filter_fp_rate: None,
            stream: Stream::Merge,
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
