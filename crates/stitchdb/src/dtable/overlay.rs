//! The overlay dTable: layers newest first; the first layer holding a version of a key (a
//! value or a tombstone) answers for it, unless a range tombstone of any layer, newer than
//! that version, hides it.

use super::DTable;
use crate::entry::{RangeTombstone, Value};
use crate::merge_iter::{MergeIter, Source};
use crate::Result;
use std::ops::Bound;
use std::sync::Arc;

#[derive(Clone, Default)]
pub struct Overlay {
    layers: Vec<Arc<dyn DTable>>,
}

impl Overlay {
    /// `layers` newest first; every version in a layer is newer than every version of the same
    /// key in the layers after it.
    pub fn new(layers: Vec<Arc<dyn DTable>>) -> Overlay {
        Overlay { layers }
    }
}

impl DTable for Overlay {
    fn get(&self, key: &[u8], snapshot: u64) -> Result<Option<(u64, Value)>> {
        let mut found = None;
        for layer in &self.layers {
            if !layer.may_contain(key) {
                continue;
            }
            if let Some(version) = layer.get(key, snapshot)? {
                found = Some(version);
                break;
            }
        }
        Ok(match (found, self.covering_tombstone(key, snapshot)) {
            (Some((seq, _)), Some(t)) if t > seq => Some((t, None)),
            (None, Some(t)) => Some((t, None)),
            (found, _) => found,
        })
    }

    fn may_contain(&self, key: &[u8]) -> bool {
        self.layers.iter().any(|l| l.may_contain(key))
    }

    fn cursor(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Source {
        Box::new(MergeIter::lazy(
            self.layers
                .iter()
                .map(|l| l.lazy_cursor(start, end))
                .collect(),
        ))
    }

    fn cursor_rev(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Source {
        let sources = self
            .layers
            .iter()
            .map(|l| l.cursor_rev(start, end))
            .collect();
        Box::new(MergeIter::new_reverse(sources))
    }

    fn range_tombstones(&self) -> Vec<RangeTombstone> {
        self.layers
            .iter()
            .flat_map(|l| l.range_tombstones())
            .collect()
    }

    fn covering_tombstone(&self, key: &[u8], snapshot: u64) -> Option<u64> {
        self.layers
            .iter()
            .filter_map(|l| l.covering_tombstone(key, snapshot))
            .max()
    }
}
