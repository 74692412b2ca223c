//! One input of a merge as the merge walks it ([`Cursor`]): the next block not yet consumed,
//! the block being copied, and the blocks read ahead; and how many bytes one request reads
//! ahead ([`COPY_AHEAD`]). The stitching merge (`stitch`) moves the cursors, and judges
//! shadowing spans through them (`shadow`).

use super::block::Block;
use super::{BlockHandle, Run};
use std::cmp::Reverse;
use std::collections::VecDeque;
use std::sync::Arc;

/// At most this many bytes of blocks are read in one request: blocks a merge predicts it
/// will copy (see `stitch::copy_ahead`), or reads to judge a shadowing span.
pub(super) const COPY_AHEAD: u64 = 64 * 1024;

/// One input's position: the next block not yet consumed, and a decoded block being copied.
pub(super) struct Cursor {
    pub(super) run: Arc<Run>,
    pub(super) next_block: usize,
    pub(super) current: Option<(Arc<Block>, usize)>,
    /// Blocks `next_block..`, read together with an earlier one (see `stitch::copy_ahead`)
    /// or to judge a shadowing span.
    pub(super) ahead: VecDeque<Arc<Block>>,
    /// No shadowing span starts before this block (see
    /// [`shadowing_span`](super::shadow::shadowing_span)).
    pub(super) no_shadow_before: usize,
}

impl Cursor {
    /// The next key this input will produce (a block's first key when at a block boundary,
    /// where the sequence number is not known yet and counts as newest).
    pub(super) fn peek(&self) -> Option<(&[u8], Reverse<u64>)> {
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

    /// A lower bound of this input's first key at or after `key` not yet consumed, as far as
    /// the block being copied and the index tell: `key` itself when that key lies inside a
    /// block not read yet. `None` if the input has no key left at or after `key`.
    pub(super) fn next_key_from<'a>(&'a self, key: &'a [u8]) -> Option<&'a [u8]> {
        if let Some((block, pos)) = &self.current {
            let len = block.len();
            if block.entry(len - 1).key >= key {
                // The first entry from `pos` on at or after `key` (there is one: the last).
                let (mut lo, mut hi) = (*pos, len - 1);
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    if block.entry(mid).key < key {
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                return Some(block.entry(lo).key);
            }
        }
        // The first block not wholly below `key`, galloping from the cursor: `key` is
        // usually a block or two ahead of it, and a binary search of the whole index per
        // block read ahead would be paid on every block a merge reads.
        let rest = &self.run.blocks[self.next_block..];
        let below = |h: &BlockHandle| h.last_key.as_slice() < key;
        let mut bound = 1;
        while bound <= rest.len() && below(&rest[bound - 1]) {
            bound *= 2;
        }
        let lo = bound / 2;
        let m = lo + rest[lo..bound.min(rest.len())].partition_point(below);
        rest.get(m).map(|h| h.first_key.as_slice().max(key))
    }
}
