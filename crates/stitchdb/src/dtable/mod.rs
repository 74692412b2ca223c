//! Anvil's dTables: one interface for every table format, and the modules that stack them.
//!
//! * [`Memtable`] — writable, in memory.
//! * [`Run`] — read-only, linear: sorted blocks in zones with an index.
//! * [`Filtered`] — a quotient filter in front of another dTable: answers "certainly not
//!   here" without touching it.
//! * [`Overlay`] — unifies dTables, newest first: the newest version of a key wins, and a
//!   tombstone is an authoritative *nonexistent* value that hides older layers.
//!
//! A table's read view is `Overlay[memtable, frozen memtable, Filtered(run)...]`.

mod filtered;
mod overlay;

pub use filtered::{Filtered, KeyFilter};
pub use overlay::Overlay;

use crate::entry::{RangeDeletes, Value};
use crate::memtable::{MemIter, MemRevIter, Memtable};
use crate::merge_iter::{eager, LazySource, NewestFirst, Source};
use crate::run::Run;
use crate::Result;
use std::ops::Bound;
use std::sync::Arc;

/// One table format. Versions are (key, sequence number); a reader at a snapshot sees the
/// newest version at or below it.
pub trait DTable: Send + Sync {
    /// The newest version of `key` at or below `snapshot`, if this dTable holds one
    /// (`Some((seq, None))` is a tombstone).
    fn get(&self, key: &[u8], snapshot: u64) -> Result<Option<(u64, Value)>>;

    /// False only when the dTable certainly holds no version of `key`.
    fn may_contain(&self, _key: &[u8]) -> bool {
        true
    }

    /// Every version with a key in `start..end`, in (key, newest first) order.
    fn cursor(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Source;

    /// [`cursor`](Self::cursor) for a merge above: one that names bounds on its next key
    /// where it can, so the merge reads it only when it must.
    fn lazy_cursor(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Box<dyn LazySource> {
        eager(self.cursor(start, end))
    }

    /// The same versions backwards: keys descending, newest version first within a key (a
    /// dTable's cursor goes both ways).
    fn cursor_rev(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Source;

    /// The range tombstones this dTable holds (they apply to every layer below it too; see
    /// [`crate::entry::RangeTombstone`]), indexed and shared, not copied.
    fn range_deletes(&self) -> RangeDeletes {
        RangeDeletes::default()
    }

    /// The newest of [`range_deletes`](Self::range_deletes) a reader at `snapshot`
    /// sees over `key` (without copying them).
    fn covering_tombstone(&self, _key: &[u8], _snapshot: u64) -> Option<u64> {
        None
    }
}

impl DTable for Arc<Memtable> {
    fn get(&self, key: &[u8], snapshot: u64) -> Result<Option<(u64, Value)>> {
        Ok(Memtable::get(self, key, snapshot))
    }

    fn cursor(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Source {
        Box::new(MemIter::new(self.clone(), start, end).map(Ok))
    }

    fn cursor_rev(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Source {
        Box::new(NewestFirst::new(
            MemRevIter::new(self.clone(), start, end).map(Ok),
        ))
    }

    fn range_deletes(&self) -> RangeDeletes {
        Memtable::range_deletes(self)
    }

    fn covering_tombstone(&self, key: &[u8], snapshot: u64) -> Option<u64> {
        Memtable::covering_tombstone(self, key, snapshot)
    }
}

impl DTable for Arc<Run> {
    fn get(&self, key: &[u8], snapshot: u64) -> Result<Option<(u64, Value)>> {
        Run::get(self, key, snapshot)
    }

    fn may_contain(&self, key: &[u8]) -> bool {
        self.covers(key)
    }

    /// Runs cannot stop at `end` themselves (the overlay above cuts the merged stream), but
    /// read no block ahead past it.
    fn cursor(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Source {
        Box::new(self.iter_range(start_key(start), end))
    }

    fn lazy_cursor(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Box<dyn LazySource> {
        Box::new(self.iter_range(start_key(start), end))
    }

    /// Runs cannot stop at `start` themselves: the overlay above cuts the merged stream.
    fn cursor_rev(&self, _start: Bound<&[u8]>, end: Bound<&[u8]>) -> Source {
        Box::new(NewestFirst::new(self.iter_rev(end)))
    }

    fn range_deletes(&self) -> RangeDeletes {
        Run::range_deletes(self)
    }

    fn covering_tombstone(&self, key: &[u8], snapshot: u64) -> Option<u64> {
        Run::covering_tombstone(self, key, snapshot)
    }
}

/// Where a run's cursor starts for a scan from `start` (an excluded bound is skipped above).
fn start_key(start: Bound<&[u8]>) -> &[u8] {
    match start {
        Bound::Included(k) | Bound::Excluded(k) => k,
        Bound::Unbounded => &[],
    }
}

/// `run` as a layer of an overlay: behind its quotient filter, if it has one.
pub fn filtered_run(run: &Arc<Run>) -> Arc<dyn DTable> {
    if run.has_filter() {
        Arc::new(Filtered::new(run.clone(), run.clone()))
    } else {
        Arc::new(run.clone())
    }
}

/// A run's filter asks the part over the block a key would be in.
impl KeyFilter for Run {
    fn may_contain(&self, key: &[u8]) -> bool {
        self.filter_may_contain(key)
    }
}
