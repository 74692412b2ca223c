//! Anvil's dTables: one interface for every table format, and the modules that stack them.
//!
//! * [`Memtable`] — writable, in memory.
//! * [`Run`] — read-only, linear: sorted blocks in zones with an index.
//! * [`Filtered`] — a quotient filter in front of another dTable: answers "certainly not
//!   here" without touching it.
//! * [`Cached`] — a run behind its table's [`RecordCache`] of point lookups (a layout's
//!   `cache` module).
//! * [`Overlay`] — unifies dTables, newest first: the newest version of a key wins, and a
//!   tombstone is an authoritative *nonexistent* value that hides older layers.
//!
//! A table's read view is `Overlay[memtable, frozen memtable, Filtered(Cached(run))...]`. A point read
//! asks each layer's `get` down to the first that holds a version; each rules the key out
//! itself (a filtered run by its filter, then its key range), so a read probes each run's
//! filter once.

mod cached;
mod filtered;
mod overlay;

pub use cached::{Cached, RecordCache};
pub use filtered::{Filtered, KeyFilter};
pub use overlay::Overlay;

use crate::entry::{RangeDeletes, Value};
use crate::layout::vtree::memtable::{MemIter, MemRevIter, Memtable};
use crate::layout::vtree::run::Run;
use crate::merge_iter::{eager, LazySource, NewestFirst, Source};
use crate::Result;
use std::ops::Bound;
use std::sync::Arc;

/// One table format. Versions are (key, sequence number); a reader at a snapshot sees the
/// newest version at or below it.
pub trait DTable: Send + Sync {
    /// The newest version of `key` at or below `snapshot`, if this dTable holds one
    /// (`Some((seq, None))` is a tombstone). It rules `key` out itself, as cheaply as it can
    /// (a run by its key range, a [`Filtered`] dTable by its filter first): callers ask
    /// nothing before it, so a point read probes each run's filter once.
    fn get(&self, key: &[u8], snapshot: u64) -> Result<Option<(u64, Value)>>;

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

    /// [`cursor`](Self::cursor), or going `reverse` [`cursor_rev`](Self::cursor_rev), for a
    /// reader at `snapshot` alone: it may leave out versions no reader at `snapshot` sees (a
    /// dTable that keeps each version whole, the B+tree's roots, reads that one only).
    fn cursor_at(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
        _snapshot: u64,
    ) -> Source {
        match reverse {
            true => self.cursor_rev(start, end),
            false => self.cursor(start, end),
        }
    }

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
        if !self.covers(key) {
            return Ok(None);
        }
        Run::get(self, key, snapshot)
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

/// `run` as a layer of an overlay: behind its filter, if it has one, and then its table's
/// record cache, if it has one (the filter first: keys it rules out take no cache room).
pub fn filtered_run(run: &Arc<Run>, cache: Option<&Arc<RecordCache>>) -> Arc<dyn DTable> {
    match (run.has_filter(), cache) {
        (true, Some(cache)) => Arc::new(Filtered::new(
            run.clone(),
            Cached::new(cache.clone(), run.clone()),
        )),
        (true, None) => Arc::new(Filtered::new(run.clone(), run.clone())),
        (false, Some(cache)) => Arc::new(Cached::new(cache.clone(), run.clone())),
        (false, None) => Arc::new(run.clone()),
    }
}

/// A run's filter asks the part over the block a key would be in.
impl KeyFilter for Run {
    fn may_contain(&self, key: &[u8]) -> bool {
        self.filter_may_contain(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::{EntryRef, RangeTombstone};
    use crate::layout::vtree::run::{RunBuilder, Storage};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use stitch_filter::{hash_key, QuotientFilter};
    use stitch_io::MemDisk;
    use stitch_patch::{BlockCache, CacheConfig};
    use stitch_zone::{Stream, ZoneConfig, ZoneStore};

    /// A run's own filter, counting how often it is asked.
    struct Counting {
        run: Arc<Run>,
        probes: AtomicUsize,
    }

    impl KeyFilter for Counting {
        fn may_contain(&self, key: &[u8]) -> bool {
            self.probes.fetch_add(1, Ordering::Relaxed);
            KeyFilter::may_contain(&*self.run, key)
        }
    }

    /// A filter that rules every key out.
    struct Nothing;

    impl KeyFilter for Nothing {
        fn may_contain(&self, _key: &[u8]) -> bool {
            false
        }
    }

    /// A run of `entries` (key, sequence number, value or tombstone) and `ranges`, with a
    /// filter of its keys, written to `storage`.
    fn run(
        storage: &Arc<Storage>,
        id: u64,
        entries: &[(&str, u64, Option<&str>)],
        ranges: Vec<RangeTombstone>,
    ) -> Arc<Run> {
        let mut builder = RunBuilder::new(storage, id, 0, Stream::Flush);
        let mut filter = QuotientFilter::new(entries.len() as u64, 0.01).unwrap();
        for &(key, seq, value) in entries {
            builder
                .add(EntryRef {
                    key: key.as_bytes(),
                    seq,
                    value: value.map(str::as_bytes),
                })
                .unwrap();
            filter.insert(hash_key(key.as_bytes())).unwrap();
        }
        builder.set_range_tombstones(ranges);
        let (run, patch) = builder
            .finish(Some(crate::layout::vtree::run::RunFilter::Quotient(filter)))
            .unwrap()
            .unwrap();
        storage.zones.cache().flush_patch(patch).unwrap();
        assert!(run.has_filter());
        run
    }

    fn range(start: &str, end: &str, seq: u64) -> RangeTombstone {
        RangeTombstone {
            start: start.as_bytes().to_vec(),
            end: end.as_bytes().to_vec(),
            seq,
        }
    }

    #[test]
    fn a_point_read_probes_each_runs_filter_once() {
        let disk = Arc::new(MemDisk::new(0));
        let cache = Arc::new(BlockCache::new(disk, CacheConfig::default()));
        let zones = Arc::new(ZoneStore::create(cache, ZoneConfig::default()).unwrap());
        let storage = Storage::new(zones, 0, false);
        // Oldest first: a run, a newer run, a memtable. The older run's range tombstone
        // hides its own `b` from readers at 6 on; the newer run deletes `a` and `[c, d)`; the
        // memtable deletes `[e, f)`.
        let older = run(
            &storage,
            1,
            &[
                ("a", 1, Some("a1")),
                ("b", 2, Some("b1")),
                ("c", 3, Some("c1")),
                ("d", 4, Some("d1")),
                ("e", 5, Some("e1")),
            ],
            vec![range("b", "c", 6)],
        );
        let newer = run(
            &storage,
            2,
            &[
                ("a", 10, None),
                ("b", 11, Some("b2")),
                ("f", 13, Some("f2")),
            ],
            vec![range("c", "d", 12)],
        );
        let mem = Arc::new(Memtable::default());
        mem.insert(b"g", 20, Some(b"g3".to_vec()));
        mem.delete_range(b"e", b"f", 21);
        let counting = |run: &Arc<Run>| {
            Arc::new(Counting {
                run: run.clone(),
                probes: AtomicUsize::new(0),
            })
        };
        let (newer_filter, older_filter) = (counting(&newer), counting(&older));
        let overlay = Overlay::new(vec![
            Arc::new(mem) as Arc<dyn DTable>,
            Arc::new(Filtered::new(newer_filter.clone(), newer.clone())),
            Arc::new(Filtered::new(older_filter.clone(), older.clone())),
        ]);
        let v = |seq: u64, value: Option<&str>| Some((seq, value.map(|v| v.as_bytes().to_vec())));
        // Key, snapshot, the answer, and how often the newer and the older run's filters are
        // probed: once each for the runs the read reaches, none for the runs below the layer
        // that answers.
        let reads = [
            ("g", u64::MAX, v(20, Some("g3")), (0, 0)),
            ("a", u64::MAX, v(10, None), (1, 0)),
            ("b", u64::MAX, v(11, Some("b2")), (1, 0)),
            ("b", 10, v(6, None), (1, 1)),
            ("b", 5, v(2, Some("b1")), (1, 1)),
            ("c", u64::MAX, v(12, None), (1, 1)),
            ("d", u64::MAX, v(4, Some("d1")), (1, 1)),
            ("e", u64::MAX, v(21, None), (1, 1)),
            ("e", 20, v(5, Some("e1")), (1, 1)),
            ("f", u64::MAX, v(13, Some("f2")), (1, 0)),
            ("z", u64::MAX, None, (1, 1)),
        ];
        for (key, snapshot, answer, probes) in reads {
            newer_filter.probes.store(0, Ordering::Relaxed);
            older_filter.probes.store(0, Ordering::Relaxed);
            assert_eq!(
                overlay.get(key.as_bytes(), snapshot).unwrap(),
                answer,
                "{key} at {snapshot}"
            );
            let probed = (
                newer_filter.probes.load(Ordering::Relaxed),
                older_filter.probes.load(Ordering::Relaxed),
            );
            assert_eq!(probed, probes, "filter probes reading {key} at {snapshot}");
        }
        // A key the filter rules out is not looked up behind it.
        let ruled_out = Overlay::new(vec![Arc::new(Filtered::new(Arc::new(Nothing), newer))]);
        assert_eq!(ruled_out.get(b"b", u64::MAX).unwrap(), None);
    }
}
