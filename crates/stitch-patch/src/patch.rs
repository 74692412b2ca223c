//! Patches: the id that names one ([`PatchId`]) and where it is on its way to the disk
//! ([`PatchState`]), which every other module of the crate speaks of; and the record of a live
//! (uncommitted) patch: what it changes and what it waits for.

use std::ops::{Range, RangeInclusive};
use stitch_io::SECTOR_SIZE;

/// Names a patch. Ids grow monotonically and are never reused. `PatchId::NONE` is a patch
/// that is always committed (a convenient "no dependency").
///
/// A write that the cache merges into an existing pending patch returns that patch's id, so
/// two writes may share one id; it commits when both writes are durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PatchId(pub u64);

impl PatchId {
    /// The patch that is always committed: depending on it is depending on nothing.
    pub const NONE: PatchId = PatchId(0);
}

/// Where a patch is on its way to the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchState {
    /// Created, not yet written. (Also what an id the cache never handed out reads as.)
    Pending,
    /// Written to the disk, not yet made durable by a sync.
    InFlight,
    /// Durable (or, for an empty patch, every dependency is durable).
    Committed,
}

/// A non-empty byte range inside one block, `start..end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ByteRange {
    pub start: u32,
    pub end: u32,
}

impl ByteRange {
    pub fn new(start: usize, end: usize) -> ByteRange {
        // Block sizes are capped well below u32::MAX (see `CacheConfig` normalisation).
        ByteRange {
            start: start as u32,
            end: end as u32,
        }
    }

    pub fn usize(self) -> Range<usize> {
        self.start as usize..self.end as usize
    }

    pub fn overlaps(self, other: ByteRange) -> bool {
        self.start < other.end && other.start < self.end
    }

    /// Overlapping or adjacent: the union is one contiguous range.
    pub fn touches(self, other: ByteRange) -> bool {
        self.start <= other.end && other.start <= self.end
    }

    pub fn hull(self, other: ByteRange) -> ByteRange {
        ByteRange {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }

    /// Whether both ranges of the block starting at disk byte `block_start` lie in one
    /// sector, the unit the disk writes atomically.
    pub fn one_sector_with(self, other: ByteRange, block_start: u64) -> bool {
        let hull = self.hull(other);
        let first = block_start + u64::from(hull.start);
        let last = block_start + u64::from(hull.end) - 1;
        first / SECTOR_SIZE == last / SECTOR_SIZE
    }
}

/// One block's share of a byte range of the disk.
pub(crate) struct Piece {
    /// Where in the block.
    pub in_block: Range<usize>,
    /// Where in the range.
    pub in_range: Range<usize>,
}

impl Piece {
    /// The share of `block` in the `len` bytes at disk byte `offset`.
    pub fn of(offset: u64, len: usize, block: u64, block_size: usize) -> Piece {
        let block_start = block * block_size as u64;
        let from = offset.max(block_start);
        let to = (offset + len as u64).min(block_start + block_size as u64);
        Piece {
            in_block: (from - block_start) as usize..(to - block_start) as usize,
            in_range: (from - offset) as usize..(to - offset) as usize,
        }
    }
}

/// One direct dependency, packed into a word (dependency lists are most of the bookkeeping).
///
/// An *ordered* dependency was asked for by the caller: its bytes must be durable before the
/// dependent's, so the two share a block write only inside one sector. An *overlap*
/// dependency is implicit (a later patch overwrote bytes of an earlier uncommitted one) and
/// exists only so reverting stays correct: any write that carries both is fine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Dep(u64);

const OVERLAP_BIT: u64 = 1 << 63;

impl Dep {
    pub fn ordered(id: u64) -> Dep {
        Dep(id)
    }

    pub fn overlap(id: u64) -> Dep {
        Dep(id | OVERLAP_BIT)
    }

    pub fn id(self) -> u64 {
        self.0 & !OVERLAP_BIT
    }

    pub fn is_overlap(self) -> bool {
        self.0 & OVERLAP_BIT != 0
    }
}

/// A live patch is pending or in flight; committed patches are forgotten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flight {
    Pending,
    /// Written in the current flush round, waiting for its sync.
    InFlight,
}

#[derive(Debug)]
pub(crate) enum PatchKind {
    /// No block: commits once its dependencies have.
    Empty {
        /// Dependencies (counted with repeats) not committed yet.
        waiting: u32,
    },
    Block {
        /// The first block the patch changes, and the last: the same block, or for a patch
        /// spanning several (always hard, see `PatchGraph::write_span`) a later one, every
        /// byte of the blocks between changed too.
        block: u64,
        last: u64,
        /// The bytes changed: from `range.start` in `block` to `range.end` in `last`. For a
        /// hard patch merged with non-adjacent writes this is their hull, which only makes
        /// later overlap checks conservative.
        range: ByteRange,
        /// The bytes under `range` before the patch, to revert it from a block image that
        /// must not carry it yet. `None`: a hard patch, which is never reverted.
        undo: Option<Box<[u8]>>,
    },
}

/// Disk bytes `from..to` as a block patch holds them: first block, last block, and the range
/// from its start in the first block to its end in the last.
fn blocks_and_range(from: u64, to: u64, block_size: usize) -> (u64, u64, ByteRange) {
    let bs = block_size as u64;
    let (first, last) = (from / bs, (to - 1) / bs);
    let range = ByteRange {
        start: (from - first * bs) as u32,
        end: (to - last * bs) as u32,
    };
    (first, last, range)
}

impl PatchKind {
    /// A hard block patch changing disk bytes `from..to`.
    pub fn hard(from: u64, to: u64, block_size: usize) -> PatchKind {
        let (block, last, range) = blocks_and_range(from, to, block_size);
        PatchKind::Block {
            block,
            last,
            range,
            undo: None,
        }
    }

    /// Widens a block patch to also cover disk bytes `from..to` (which must touch or overlap
    /// its blocks, so the hull stays contiguous): the hull in disk bytes. Undo bytes are the
    /// caller's to keep in step.
    pub fn widen(&mut self, from: u64, to: u64, block_size: usize) {
        let PatchKind::Block {
            block, last, range, ..
        } = self
        else {
            return;
        };
        let bs = block_size as u64;
        let from = (*block * bs + u64::from(range.start)).min(from);
        let to = (*last * bs + u64::from(range.end)).max(to);
        (*block, *last, *range) = blocks_and_range(from, to, block_size);
    }
}

#[derive(Debug)]
pub(crate) struct Patch {
    pub flight: Flight,
    pub kind: PatchKind,
    /// Direct dependencies that were not committed when they were added (some may have
    /// committed since: a dependency that is no longer live is satisfied).
    pub deps: Vec<Dep>,
    /// Empty patches counting this one in their `waiting`.
    pub empty_dependents: Vec<PatchId>,
    /// Some patch depends on this one (if none does, no new dependency of it can close a cycle).
    pub depended_on: bool,
}

impl Patch {
    pub fn new(kind: PatchKind, deps: Vec<Dep>) -> Patch {
        Patch {
            flight: Flight::Pending,
            kind,
            deps,
            empty_dependents: Vec::new(),
            depended_on: false,
        }
    }

    pub fn is_pending(&self) -> bool {
        self.flight == Flight::Pending
    }

    /// The blocks a block patch changes.
    pub fn blocks(&self) -> Option<RangeInclusive<u64>> {
        match self.kind {
            PatchKind::Block { block, last, .. } => Some(block..=last),
            PatchKind::Empty { .. } => None,
        }
    }

    /// The bytes of `b` the patch changes (`None`: none, or not a block patch).
    pub fn range_on(&self, b: u64, block_size: usize) -> Option<ByteRange> {
        let PatchKind::Block {
            block, last, range, ..
        } = self.kind
        else {
            return None;
        };
        if b < block || b > last {
            return None;
        }
        Some(ByteRange {
            start: if b == block { range.start } else { 0 },
            end: if b == last {
                range.end
            } else {
                block_size as u32
            },
        })
    }

    /// Whether the patch changes more than one block. Such a patch reaches the disk in several
    /// block writes, which a crash may split.
    pub fn spans_blocks(&self) -> bool {
        matches!(self.kind, PatchKind::Block { block, last, .. } if block != last)
    }

    pub fn is_hard(&self) -> bool {
        matches!(self.kind, PatchKind::Block { undo: None, .. })
    }

    pub fn undo_len(&self) -> usize {
        match &self.kind {
            PatchKind::Block {
                undo: Some(undo), ..
            } => undo.len(),
            _ => 0,
        }
    }

    /// Heap and record bytes this patch costs, for the patch-memory statistics.
    pub fn bookkeeping_bytes(&self) -> usize {
        std::mem::size_of::<Patch>()
            + std::mem::size_of::<u64>() // its key in the patch table
            + self.deps.capacity() * std::mem::size_of::<Dep>()
            + self.empty_dependents.capacity() * std::mem::size_of::<PatchId>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_overlap_touch_and_share_sectors() {
        let a = ByteRange::new(0, 100);
        let b = ByteRange::new(100, 200);
        assert!(!a.overlaps(b));
        assert!(a.touches(b));
        assert!(a.one_sector_with(b, 0));
        assert!(!a.one_sector_with(ByteRange::new(500, 513), 0));
        // Sectors are counted on disk offsets, not block offsets.
        assert!(!a.one_sector_with(b, 400));
        assert_eq!(a.hull(ByteRange::new(300, 310)), ByteRange::new(0, 310));
    }

    #[test]
    fn deps_keep_their_kind() {
        assert_eq!(Dep::ordered(7).id(), 7);
        assert!(!Dep::ordered(7).is_overlap());
        assert_eq!(Dep::overlap(7).id(), 7);
        assert!(Dep::overlap(7).is_overlap());
    }
}
