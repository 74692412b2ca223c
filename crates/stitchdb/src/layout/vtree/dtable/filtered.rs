//! A filter in front of another dTable (the VT-tree keeps a quotient filter per run, in parts):
//! a point lookup for a key the filter rules out never reaches the dTable behind it.

use super::DTable;
use crate::entry::{RangeDeletes, Value};
use crate::merge_iter::{LazySource, Source};
use crate::Result;
use std::ops::Bound;
use std::sync::Arc;
use stitch_filter::{hash_key, QuotientFilter};

/// Rules keys out of a dTable.
pub trait KeyFilter: Send + Sync {
    /// False only when the filtered dTable certainly holds no version of `key`.
    fn may_contain(&self, key: &[u8]) -> bool;
}

impl KeyFilter for QuotientFilter {
    fn may_contain(&self, key: &[u8]) -> bool {
        self.contains(hash_key(key))
    }
}

pub struct Filtered<T> {
    filter: Arc<dyn KeyFilter>,
    inner: T,
}

impl<T: DTable> Filtered<T> {
    pub fn new(filter: Arc<dyn KeyFilter>, inner: T) -> Filtered<T> {
        Filtered { filter, inner }
    }
}

impl<T: DTable> DTable for Filtered<T> {
    /// The filter first; the dTable behind it rules the key out itself as well (a run by its
    /// key range), so neither is asked twice.
    fn get(&self, key: &[u8], snapshot: u64) -> Result<Option<(u64, Value)>> {
        if !self.filter.may_contain(key) {
            return Ok(None);
        }
        self.inner.get(key, snapshot)
    }

    fn cursor(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Source {
        self.inner.cursor(start, end)
    }

    fn lazy_cursor(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Box<dyn LazySource> {
        self.inner.lazy_cursor(start, end)
    }

    fn cursor_rev(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Source {
        self.inner.cursor_rev(start, end)
    }

    fn range_deletes(&self) -> RangeDeletes {
        self.inner.range_deletes()
    }

    fn covering_tombstone(&self, key: &[u8], snapshot: u64) -> Option<u64> {
        self.inner.covering_tombstone(key, snapshot)
    }
}
