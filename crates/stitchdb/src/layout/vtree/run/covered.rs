//! The keys a merge's range tombstones cover, as sorted disjoint intervals: a block no
//! tombstone touches holds nothing one may hide, so the merge may stitch it; a block one
//! touches is copied, so that the versions it hides are seen and dropped.

use crate::entry::RangeTombstone;

/// The union of some range tombstones' `[start, end)` ranges.
#[derive(Debug, Default)]
pub(super) struct Covered {
    /// Sorted by start, disjoint and not adjacent.
    intervals: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Covered {
    pub(super) fn new(tombstones: &[RangeTombstone]) -> Covered {
        let mut ranges: Vec<(&[u8], &[u8])> = tombstones
            .iter()
            .filter(|t| t.start < t.end)
            .map(|t| (t.start.as_slice(), t.end.as_slice()))
            .collect();
        ranges.sort_unstable();
        let mut intervals: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for (start, end) in ranges {
            match intervals.last_mut() {
                Some((_, last_end)) if start <= last_end.as_slice() => {
                    if end > last_end.as_slice() {
                        *last_end = end.to_vec();
                    }
                }
                _ => intervals.push((start.to_vec(), end.to_vec())),
            }
        }
        Covered { intervals }
    }

    /// Whether some tombstone covers a key in `[first, last]`.
    pub(super) fn touches(&self, first: &[u8], last: &[u8]) -> bool {
        let i = self
            .intervals
            .partition_point(|(_, end)| end.as_slice() <= first);
        self.intervals
            .get(i)
            .is_some_and(|(start, _)| start.as_slice() <= last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::seq::SliceRandom;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn t(start: &str, end: &str) -> RangeTombstone {
        RangeTombstone {
            start: start.into(),
            end: end.into(),
            seq: 1,
        }
    }

    #[test]
    fn a_block_is_touched_when_a_covered_key_lies_in_its_range() {
        let c = Covered::new(&[t("m", "p"), t("c", "e"), t("d", "g"), t("g", "h")]);
        // [c, h) after merging the overlapping and adjacent ones, and [m, p).
        assert_eq!(c.intervals.len(), 2);
        assert!(!c.touches(b"a", b"b"));
        assert!(!c.touches(b"a", b"bz"));
        assert!(c.touches(b"a", b"c"), "the start is covered");
        assert!(c.touches(b"fa", b"fb"), "inside");
        assert!(c.touches(b"gz", b"k"));
        assert!(!c.touches(b"h", b"lz"), "the end is not covered");
        assert!(c.touches(b"a", b"z"), "a block around a whole interval");
        assert!(!c.touches(b"p", b"z"));
        assert!(!Covered::new(&[]).touches(b"", b"\xff"));
    }

    /// The union against each tombstone alone: `[first, last]` meets `[start, end)` when
    /// `start <= last` and `first < end` (the key `max(start, first)` lies in both).
    #[test]
    fn touches_agrees_with_asking_every_tombstone() {
        let keys: Vec<Vec<u8>> = (0u8..6)
            .flat_map(|a| (0u8..6).map(move |b| vec![a, b]))
            .chain((0u8..6).map(|a| vec![a]))
            .collect();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for _ in 0..2000 {
            let tombstones: Vec<RangeTombstone> = (0..rng.gen_range(0..5))
                .map(|_| {
                    let (a, b) = (
                        keys.choose(&mut rng).unwrap(),
                        keys.choose(&mut rng).unwrap(),
                    );
                    RangeTombstone {
                        start: a.min(b).clone(),
                        end: a.max(b).clone(),
                        seq: 1,
                    }
                })
                .collect();
            let c = Covered::new(&tombstones);
            let (a, b) = (
                keys.choose(&mut rng).unwrap(),
                keys.choose(&mut rng).unwrap(),
            );
            let (first, last) = (a.min(b), a.max(b));
            let expected = tombstones
                .iter()
                .any(|t| t.start < t.end && &t.start <= last && first < &t.end);
            assert_eq!(
                c.touches(first, last),
                expected,
                "{tombstones:?} {first:?}..={last:?}"
            );
        }
    }
}
