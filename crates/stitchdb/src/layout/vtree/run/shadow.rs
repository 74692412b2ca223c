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
//!
//! The merge (`stitch`) asks [`shadowing_span`] through the inputs' cursors; merges over
//! shadowed versions are tested with the merge's own tests, there.

use super::block::Block;
use super::covered::Covered;
use super::cursor::{Cursor, COPY_AHEAD};
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
            let read = self.run.blocks_ahead(first, usize::MAX, COPY_AHEAD)?;
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
/// over a large file would otherwise read the file's older blocks whole, only to drop
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
