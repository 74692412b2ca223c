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

/// A set of range tombstones as readers and merges ask about them: one or more indexes,
/// shared (a scan takes a table's tombstones by cloning a few `Arc`s, not the tombstones).
///
/// Each index is sorted by start, each tombstone with the place of the widest reach (largest
/// end) among it and those before it. A question about a key reads the tombstones starting
/// at or before it, backwards, only until all that remain end at or before it: for the
/// disjoint ranges a file system deletes, one or two, where asking every tombstone would
/// cost each read time in proportion to the tombstones beside it.
///
/// A set grown a tombstone at a time (a memtable's, by [`push`](Self::push)) is indexed by
/// the logarithmic method: its indexes' sizes are distinct powers of two, as the bits of
/// the count. Adding one merges into it the smallest indexes while they are no larger, so
/// each tombstone is merged O(log n) times, and a question asks O(log n) indexes.
#[derive(Debug, Clone, Default)]
pub struct RangeDeletes {
    /// Largest first.
    parts: Vec<Arc<Index>>,
}

#[derive(Debug)]
struct Index {
    /// Sorted by start.
    by_start: Vec<RangeTombstone>,
    /// `widest[i]`: the place in `by_start[..=i]` of the tombstone reaching furthest.
    widest: Vec<usize>,
}

impl Index {
    fn new(mut list: Vec<RangeTombstone>) -> Index {
        // Stable: it finds the sorted stretches of its input, so merging two indexes' lists
        // costs a pass, not a sort.
        list.sort_by(|a, b| a.start.cmp(&b.start));
        let mut widest: Vec<usize> = Vec::with_capacity(list.len());
        for (i, t) in list.iter().enumerate() {
            let w = match widest.last() {
                Some(&w) if list[w].end >= t.end => w,
                _ => i,
            };
            widest.push(w);
        }
        Index {
            by_start: list,
            widest,
        }
    }

    /// The newest tombstone a reader at `snapshot` sees over `key`.
    fn covering(&self, key: &[u8], snapshot: u64) -> Option<u64> {
        let Index { by_start, widest } = self;
        let started = by_start.partition_point(|t| t.start.as_slice() <= key);
        (0..started)
            .rev()
            .take_while(|&i| by_start[widest[i]].end.as_slice() > key)
            .map(|i| &by_start[i])
            .filter(|t| t.seq <= snapshot && key < t.end.as_slice())
            .map(|t| t.seq)
            .max()
    }
}

/// Every tombstone of each set (sharing their indexes: the range deletes of a view of several
/// layers or regions).
impl FromIterator<RangeDeletes> for RangeDeletes {
    fn from_iter<I: IntoIterator<Item = RangeDeletes>>(sets: I) -> RangeDeletes {
        let mut all = RangeDeletes::default();
        for set in sets {
            all.union(&set);
        }
        all
    }
}

impl RangeDeletes {
    pub fn new(list: Vec<RangeTombstone>) -> RangeDeletes {
        if list.is_empty() {
            return RangeDeletes::default();
        }
        RangeDeletes {
            parts: vec![Arc::new(Index::new(list))],
        }
    }

    /// Adds `t`, merging the smallest indexes into its own while they are no larger.
    pub fn push(&mut self, t: RangeTombstone) {
        let mut list = vec![t];
        while self
            .parts
            .last()
            .is_some_and(|p| p.by_start.len() <= list.len())
        {
            let part = self.parts.pop().expect("checked above");
            // A scan holding this index keeps it; this set takes a copy.
            let mut merged =
                Arc::try_unwrap(part).map_or_else(|shared| shared.by_start.clone(), |i| i.by_start);
            merged.append(&mut list);
            list = merged;
        }
        self.parts.push(Arc::new(Index::new(list)));
    }

    /// Adds every tombstone of `other` (sharing its indexes: a view of several layers).
    pub fn union(&mut self, other: &RangeDeletes) {
        self.parts.extend(other.parts.iter().cloned());
    }

    /// Every tombstone.
    pub fn tombstones(&self) -> impl Iterator<Item = &RangeTombstone> {
        self.parts.iter().flat_map(|p| p.by_start.iter())
    }

    /// The newest tombstone a reader at `snapshot` sees over `key`.
    pub fn covering(&self, key: &[u8], snapshot: u64) -> Option<u64> {
        self.parts
            .iter()
            .filter_map(|p| p.covering(key, snapshot))
            .max()
    }

    /// Whether a reader at `snapshot` sees the version (`key`, `seq`) deleted by a range.
    pub fn hides(&self, key: &[u8], seq: u64, snapshot: u64) -> bool {
        self.covering(key, snapshot).is_some_and(|t| t > seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::seq::SliceRandom;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

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

    /// The newest of `list` a reader at `snapshot` sees over `key`, asking every one.
    fn covering(list: &[RangeTombstone], key: &[u8], snapshot: u64) -> Option<u64> {
        list.iter()
            .filter(|t| t.seq <= snapshot && within(&t.start, &t.end, key))
            .map(|t| t.seq)
            .max()
    }

    /// Sets built at once, grown one tombstone at a time, and the union of two halves,
    /// against asking every tombstone, over short keys.
    #[test]
    fn the_indexes_answer_as_every_tombstone_would() {
        let keys: Vec<Vec<u8>> = (0u8..8)
            .flat_map(|a| (0u8..4).map(move |b| vec![a, b]))
            .chain((0u8..8).map(|a| vec![a]))
            .collect();
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        for _ in 0..3000 {
            let list: Vec<RangeTombstone> = (0..rng.gen_range(0..40))
                .filter_map(|_| {
                    let (a, b) = (
                        keys.choose(&mut rng).unwrap(),
                        keys.choose(&mut rng).unwrap(),
                    );
                    (a != b).then(|| RangeTombstone {
                        start: a.min(b).clone(),
                        end: a.max(b).clone(),
                        seq: rng.gen_range(0..20),
                    })
                })
                .collect();
            let built = RangeDeletes::new(list.clone());
            let mut grown = RangeDeletes::default();
            let mut held = Vec::new();
            for t in &list {
                grown.push(t.clone());
                if rng.gen_bool(0.2) {
                    // A scan holding the indexes as they were while more arrive.
                    held.push((grown.clone(), grown.tombstones().count()));
                }
            }
            let half = rng.gen_range(0..=list.len());
            let mut union = RangeDeletes::new(list[..half].to_vec());
            union.union(&RangeDeletes::new(list[half..].to_vec()));
            for set in [&built, &grown, &union] {
                let mut all: Vec<_> = set.tombstones().cloned().collect();
                all.sort_by(|a, b| (&a.start, &a.end, a.seq).cmp(&(&b.start, &b.end, b.seq)));
                let mut want = list.clone();
                want.sort_by(|a, b| (&a.start, &a.end, a.seq).cmp(&(&b.start, &b.end, b.seq)));
                assert_eq!(all, want);
                for key in &keys {
                    let snapshot = rng.gen_range(0..25);
                    assert_eq!(
                        set.covering(key, snapshot),
                        covering(&list, key, snapshot),
                        "{list:?} {key:?} at {snapshot}"
                    );
                }
            }
            for (set, len) in held {
                let key = keys.choose(&mut rng).unwrap();
                assert_eq!(set.covering(key, 100), covering(&list[..len], key, 100));
            }
        }
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
