//! Range tombstones: `delete_range(start, end)` as one record, whatever the range holds.
//!
//! A tombstone `[start, end)` at sequence number `t` hides every version of a key in the range
//! with a sequence number below `t`, from readers whose snapshot is at or after `t`. Versions
//! with the same sequence number are not hidden (a batch's puts and its range deletes share
//! one; batches and transactions drop their own earlier writes a range delete covers, so
//! "later wins" holds inside them too). Each memtable and run carries its tombstones; a
//! table's view unions them. Merges drop versions that every reader sees hidden, and drop a
//! tombstone once it reaches the bottom level and every reader sees it.

use crate::codec::{put_bytes, put_varint, Reader};
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeTombstone {
    pub start: Vec<u8>,
    /// Exclusive.
    pub end: Vec<u8>,
    pub seq: u64,
}

impl RangeTombstone {
    pub fn covers(&self, key: &[u8]) -> bool {
        within(&self.start, &self.end, key)
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        put_bytes(out, &self.start);
        put_bytes(out, &self.end);
        put_varint(out, self.seq);
    }

    pub fn decode(r: &mut Reader) -> Result<RangeTombstone, String> {
        let t = RangeTombstone {
            start: r.bytes()?.to_vec(),
            end: r.bytes()?.to_vec(),
            seq: r.varint()?,
        };
        if t.start >= t.end {
            return Err("range tombstone with start not before end".into());
        }
        Ok(t)
    }
}

/// Whether `key` lies in `[start, end)`.
pub fn within(start: &[u8], end: &[u8], key: &[u8]) -> bool {
    start <= key && key < end
}

/// Whether `key` lies in any of the `[start, end)` ranges.
pub fn within_any(ranges: &[(Vec<u8>, Vec<u8>)], key: &[u8]) -> bool {
    ranges.iter().any(|(start, end)| within(start, end, key))
}

/// The range tombstones of a set of layers, as readers and merges ask about them.
#[derive(Debug, Clone, Default)]
pub struct RangeDeletes {
    list: Arc<Vec<RangeTombstone>>,
}

impl RangeDeletes {
    pub fn new(list: Vec<RangeTombstone>) -> RangeDeletes {
        RangeDeletes {
            list: Arc::new(list),
        }
    }

    /// The newest tombstone a reader at `snapshot` sees over `key`.
    pub fn covering(&self, key: &[u8], snapshot: u64) -> Option<u64> {
        covering(&self.list, key, snapshot)
    }

    /// Whether a reader at `snapshot` sees the version (`key`, `seq`) deleted by a range.
    pub fn hides(&self, key: &[u8], seq: u64, snapshot: u64) -> bool {
        self.covering(key, snapshot).is_some_and(|t| t > seq)
    }
}

/// The newest tombstone of `list` a reader at `snapshot` sees over `key`.
pub fn covering(list: &[RangeTombstone], key: &[u8], snapshot: u64) -> Option<u64> {
    list.iter()
        .filter(|t| t.seq <= snapshot && t.covers(key))
        .map(|t| t.seq)
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(start: &str, end: &str, seq: u64) -> RangeTombstone {
        RangeTombstone {
            start: start.into(),
            end: end.into(),
            seq,
        }
    }

    #[test]
    fn a_tombstone_hides_older_versions_in_its_range_from_readers_after_it() {
        let d = RangeDeletes::new(vec![t("b", "d", 10), t("c", "z", 5)]);
        assert!(d.hides(b"b", 9, 10));
        assert!(!d.hides(b"b", 10, 10), "same sequence number: not hidden");
        assert!(!d.hides(b"b", 9, 9), "the reader predates the tombstone");
        assert!(
            !d.hides(b"d", 6, 100),
            "end is exclusive: only [c, z) at 5 covers d"
        );
        assert!(d.hides(b"d", 4, 5));
        assert_eq!(d.covering(b"c", 100), Some(10));
        assert_eq!(d.covering(b"c", 7), Some(5));
        assert_eq!(d.covering(b"a", 100), None);
    }

    #[test]
    fn encoding_round_trips_and_rejects_empty_ranges() {
        let mut out = Vec::new();
        t("a", "b", 3).encode(&mut out);
        assert_eq!(
            RangeTombstone::decode(&mut Reader::new(&out)).unwrap(),
            t("a", "b", 3)
        );
        let mut bad = Vec::new();
        t("b", "a", 3).encode(&mut bad);
        assert!(RangeTombstone::decode(&mut Reader::new(&bad)).is_err());
    }
}
