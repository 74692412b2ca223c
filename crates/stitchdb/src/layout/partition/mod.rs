//! Anvil's partition dTable: the key space cut at configured boundaries into regions, each
//! stored by a layout stack of its own, so each region is digested and combined on its own.
//!
//! This module is the layout's pure part: the spec ([`PartitionSpec`]: boundaries, a stack per
//! region), which region holds a key or which part of a range, and the read view that
//! concatenates the regions' views ([`PartitionView`]). The engine keeps each region as a
//! table of its own (`crate::version`), so flushes, merges, snapshots and recovery serve a
//! region as any table, and routes each write to its region in one place.

mod spec;
mod view;

pub use spec::TableLayout;
pub use view::PartitionView;

use crate::layout::LayoutSpec;

/// A partitioned table's layout: region `i` (from 0) holds the keys from `bounds[i - 1]`
/// (inclusive; the first region from the empty key) to `bounds[i]` (exclusive; the last region
/// to the end), stored as `regions[i]` says. Boundaries are not empty and strictly increase;
/// there is one region more than boundaries.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionSpec {
    /// Where regions end, increasing.
    pub bounds: Vec<Vec<u8>>,
    /// Each region's stack, in key order.
    pub regions: Vec<LayoutSpec>,
}

impl PartitionSpec {
    /// The region holding `key`.
    pub fn region_of(&self, key: &[u8]) -> usize {
        self.bounds.partition_point(|b| b.as_slice() <= key)
    }

    /// The keys of region `i`: its first key, and where it ends (`None`: at the end).
    pub fn region_range(&self, i: usize) -> (&[u8], Option<&[u8]>) {
        let start = match i {
            0 => &[][..],
            _ => &self.bounds[i - 1][..],
        };
        (start, self.bounds.get(i).map(Vec::as_slice))
    }

    /// The parts of `start..end` each region holds, in key order, none empty: a range delete
    /// of the table is one per region it reaches.
    pub fn split_range<'a>(
        &'a self,
        start: &'a [u8],
        end: &'a [u8],
    ) -> impl Iterator<Item = (usize, &'a [u8], &'a [u8])> + 'a {
        let first = self.region_of(start);
        let last = self.region_of(end);
        (first..=last)
            .map(move |i| {
                let (lo, hi) = self.region_range(i);
                let hi = hi.map_or(end, |hi| hi.min(end));
                (i, lo.max(start), hi)
            })
            .filter(|(_, s, e)| s < e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(bounds: &[&[u8]]) -> PartitionSpec {
        PartitionSpec {
            bounds: bounds.iter().map(|b| b.to_vec()).collect(),
            regions: vec![LayoutSpec::default(); bounds.len() + 1],
        }
    }

    #[test]
    fn a_key_is_in_the_region_its_boundaries_enclose() {
        let p = spec(&[b"g", b"p"]);
        for (key, region) in [(&b""[..], 0), (b"a", 0), (b"g", 1), (b"oz", 1), (b"p", 2)] {
            assert_eq!(p.region_of(key), region, "{key:?}");
        }
        assert_eq!(p.region_range(0), (&b""[..], Some(&b"g"[..])));
        assert_eq!(p.region_range(2), (&b"p"[..], None));
    }

    #[test]
    fn a_range_splits_at_the_boundaries_it_crosses() {
        let p = spec(&[b"g", b"p"]);
        let split = |s: &[u8], e: &[u8]| -> Vec<(usize, Vec<u8>, Vec<u8>)> {
            p.split_range(s, e)
                .map(|(i, s, e)| (i, s.to_vec(), e.to_vec()))
                .collect()
        };
        let part = |i, s: &[u8], e: &[u8]| (i, s.to_vec(), e.to_vec());
        assert_eq!(split(b"a", b"c"), vec![part(0, b"a", b"c")]);
        assert_eq!(
            split(b"a", b"z"),
            vec![
                part(0, b"a", b"g"),
                part(1, b"g", b"p"),
                part(2, b"p", b"z")
            ]
        );
        // Ending at a boundary reaches nothing of the region it starts.
        assert_eq!(split(b"h", b"p"), vec![part(1, b"h", b"p")]);
        assert_eq!(split(b"g", b"g"), vec![]);
        assert_eq!(split(b"z", b"a"), vec![]);
    }
}
