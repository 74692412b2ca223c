//! A partitioned table's read view: its regions' views side by side. Each region holds only
//! its own keys (writes and range deletes are routed to it), so a key is asked of its region
//! alone and a scan is the regions' scans one after another.

use super::PartitionSpec;
use crate::entry::{RangeDeletes, Value};
use crate::layout::vtree::dtable::DTable;
use crate::merge_iter::Source;
use crate::Result;
use std::ops::Bound;
use std::sync::Arc;

/// The concatenation of a partition's regions' views, in key order.
pub struct PartitionView {
    spec: Arc<PartitionSpec>,
    /// Region `i`'s view.
    regions: Vec<Arc<dyn DTable>>,
}

impl PartitionView {
    /// The view of `spec`'s regions, one view each, in key order.
    pub fn new(spec: Arc<PartitionSpec>, regions: Vec<Arc<dyn DTable>>) -> PartitionView {
        debug_assert_eq!(regions.len(), spec.regions.len());
        PartitionView { spec, regions }
    }

    /// The views of the regions `start..end` reaches, in key order.
    fn reached(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Vec<Arc<dyn DTable>> {
        let first = match start {
            Bound::Included(k) | Bound::Excluded(k) => self.spec.region_of(k),
            Bound::Unbounded => 0,
        };
        let last = match end {
            Bound::Included(k) | Bound::Excluded(k) => self.spec.region_of(k),
            Bound::Unbounded => self.regions.len() - 1,
        };
        self.regions
            .get(first..=last)
            .map_or_else(Vec::new, <[_]>::to_vec)
    }
}

/// The regions' cursors one after another, each opened when the one before it ends.
fn chained(
    regions: Vec<Arc<dyn DTable>>,
    start: Bound<&[u8]>,
    end: Bound<&[u8]>,
    reverse: bool,
) -> Source {
    let (start, end) = (start.map(<[u8]>::to_vec), end.map(<[u8]>::to_vec));
    Box::new(regions.into_iter().flat_map(move |region| {
        let (start, end) = (
            start.as_ref().map(Vec::as_slice),
            end.as_ref().map(Vec::as_slice),
        );
        match reverse {
            false => region.cursor(start, end),
            true => region.cursor_rev(start, end),
        }
    }))
}

impl DTable for PartitionView {
    fn get(&self, key: &[u8], snapshot: u64) -> Result<Option<(u64, Value)>> {
        self.regions[self.spec.region_of(key)].get(key, snapshot)
    }

    fn cursor(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Source {
        chained(self.reached(start, end), start, end, false)
    }

    fn cursor_rev(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Source {
        let mut regions = self.reached(start, end);
        regions.reverse();
        chained(regions, start, end, true)
    }

    /// Each region's range deletes lie within it (a range delete is split at the
    /// boundaries), so together they are the table's.
    fn range_deletes(&self) -> RangeDeletes {
        self.regions.iter().map(|r| r.range_deletes()).collect()
    }

    fn covering_tombstone(&self, key: &[u8], snapshot: u64) -> Option<u64> {
        self.regions[self.spec.region_of(key)].covering_tombstone(key, snapshot)
    }
}
