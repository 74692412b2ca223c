//! The overlay dTable: layers newest first; the first layer holding a version of a key (a
//! value or a tombstone) answers for it.

use super::DTable;
use crate::memtable::Value;
use crate::merge::{MergeIter, Source};
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
        for layer in &self.layers {
            if !layer.may_contain(key) {
                continue;
            }
            if let Some(found) = layer.get(key, snapshot)? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    fn may_contain(&self, key: &[u8]) -> bool {
        self.layers.iter().any(|l| l.may_contain(key))
    }

    fn cursor(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Source {
        Box::new(MergeIter::new(
            self.layers.iter().map(|l| l.cursor(start, end)).collect(),
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
}
