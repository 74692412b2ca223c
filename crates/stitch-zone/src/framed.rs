//! [`FramedBatch`]: extents laid out in memory as they will lie in their zone, so that many
//! are appended with one reservation, one cache write and one patch
//! ([`ZoneStore::append_batch`](crate::ZoneStore::append_batch)).
//!
//! A run's blocks are one extent each, about 4 KiB. Appended one at a time, each paid the
//! stream's appender lock, two turns of the zone state lock (which merges hold while they
//! change references), a cache write with its patch, and a freeing check: several
//! microseconds a block, more than copying its bytes. A batch pays them once for all its
//! extents; on disk nothing changes (every extent keeps its header, address and reference
//! count, back to back at aligned offsets as single appends put them).

use crate::extent::{EXTENT_ALIGN, EXTENT_HEADER_LEN};

/// Extents waiting to be appended together: each payload behind room for its header, each
/// extent starting at an aligned offset from the first, the gaps zeroed.
#[derive(Debug, Default)]
pub struct FramedBatch {
    pub(crate) buf: Vec<u8>,
    /// Each extent's start in `buf` and its length, header included.
    pub(crate) extents: Vec<(usize, usize)>,
}

impl FramedBatch {
    /// An empty batch.
    pub fn new() -> FramedBatch {
        FramedBatch::default()
    }

    /// An empty batch with room for `bytes` of extents before its buffer grows.
    pub fn with_capacity(bytes: usize) -> FramedBatch {
        FramedBatch {
            buf: Vec::with_capacity(bytes),
            extents: Vec::new(),
        }
    }

    /// Adds an extent holding `payload` (its header is written when it is appended).
    pub fn push(&mut self, payload: &[u8]) {
        let start = self.buf.len();
        debug_assert_eq!(start as u64 % EXTENT_ALIGN, 0);
        let len = EXTENT_HEADER_LEN + payload.len();
        self.buf.resize(start + EXTENT_HEADER_LEN, 0);
        self.buf.extend_from_slice(payload);
        self.buf
            .resize((start + len).next_multiple_of(EXTENT_ALIGN as usize), 0);
        self.extents.push((start, len));
    }

    /// How many extents the batch holds.
    pub fn len(&self) -> usize {
        self.extents.len()
    }

    /// Whether the batch holds no extent.
    pub fn is_empty(&self) -> bool {
        self.extents.is_empty()
    }

    /// Bytes the batch takes in its zone, gaps included.
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// Empties the batch, keeping its buffer for the next.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.extents.clear();
    }

    /// Where extents `from..to` lie in the buffer, from the first's start to the last's end.
    pub(crate) fn span(&self, from: usize, to: usize) -> std::ops::Range<usize> {
        let (start, _) = self.extents[from];
        let (last, len) = self.extents[to - 1];
        start..last + len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extents_lie_at_aligned_offsets_behind_room_for_their_headers() {
        let mut b = FramedBatch::new();
        b.push(&[1; 5]);
        b.push(&[2; 16]);
        b.push(&[]);
        assert_eq!(b.len(), 3);
        let h = EXTENT_HEADER_LEN;
        assert_eq!(b.extents, vec![(0, h + 5), (32, h + 16), (64, h)]);
        assert_eq!(b.bytes(), 80);
        assert_eq!(&b.buf[h..h + 5], &[1; 5]);
        // The gap after the first extent is zeros.
        assert!(b.buf[h + 5..32].iter().all(|&x| x == 0));
        assert_eq!(b.span(1, 3), 32..64 + h);
        b.clear();
        assert!(b.is_empty());
        assert_eq!(b.bytes(), 0);
    }
}
