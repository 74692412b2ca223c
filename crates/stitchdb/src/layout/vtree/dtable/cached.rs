//! Anvil's cache dTable (`cache(keys=N)` in a layout): remembers what point lookups found in
//! a table's runs, so a hot key is answered without its filter, index or block.
//!
//! A run never changes once written, so an entry never goes stale: it is keyed by the run's
//! id (unique among an open store's runs) and, for a transaction's run linked at its commit,
//! the sequence number it reads as (the same blocks read at another). What is cached is the
//! run's newest version of the key (or that it holds none), which answers every reader whose
//! snapshot is at or above that version; an older reader asks the run. Entries of runs
//! merged away are never asked for again and age out.

use super::DTable;
use crate::entry::{RangeDeletes, Value};
use crate::layout::vtree::run::Run;
use crate::merge_iter::{LazySource, Source};
use crate::Result;
use quick_cache::Equivalent;
use std::hash::Hash;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// One table's cache of point lookups, shared by the layers over each of its runs.
pub struct RecordCache {
    entries: quick_cache::sync::Cache<RecordKey, Option<(u64, Value)>>,
    /// Lookups answered from the cache, and those that read the run (counters only).
    hits: AtomicU64,
    misses: AtomicU64,
}

/// Which run, and which key in it. Hashes as [`Lookup`] does (fields in the same order, a
/// boxed slice hashing as the slice), so a lookup needs no copy of the key.
#[derive(Hash, PartialEq, Eq)]
struct RecordKey {
    run: (u64, u64),
    key: Box<[u8]>,
}

#[derive(Hash)]
struct Lookup<'a> {
    run: (u64, u64),
    key: &'a [u8],
}

impl Equivalent<RecordKey> for Lookup<'_> {
    fn equivalent(&self, stored: &RecordKey) -> bool {
        self.run == stored.run && self.key == &*stored.key
    }
}

impl RecordCache {
    /// A cache of at most `keys` lookups.
    pub fn new(keys: u32) -> RecordCache {
        RecordCache {
            entries: quick_cache::sync::Cache::new(keys as usize),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// Lookups held now, and lookups answered from the cache and not, since the store
    /// was opened.
    pub fn counts(&self) -> (usize, u64, u64) {
        let (hits, misses) = (self.hits.load(Relaxed), self.misses.load(Relaxed));
        (self.entries.len(), hits, misses)
    }
}

/// A run behind its table's [`RecordCache`].
pub struct Cached {
    cache: Arc<RecordCache>,
    run: Arc<Run>,
}

impl Cached {
    pub fn new(cache: Arc<RecordCache>, run: Arc<Run>) -> Cached {
        Cached { cache, run }
    }

    fn run_id(&self) -> (u64, u64) {
        (self.run.meta.id, self.run.meta.seq_override.unwrap_or(0))
    }
}

impl DTable for Cached {
    fn get(&self, key: &[u8], snapshot: u64) -> Result<Option<(u64, Value)>> {
        if !self.run.covers(key) {
            return Ok(None);
        }
        let run = self.run_id();
        let newest = match self.cache.entries.get(&Lookup { run, key }) {
            Some(newest) => {
                self.cache.hits.fetch_add(1, Relaxed);
                newest
            }
            None => {
                self.cache.misses.fetch_add(1, Relaxed);
                let newest = Run::get(&self.run, key, u64::MAX)?;
                let stored = RecordKey {
                    run,
                    key: key.into(),
                };
                self.cache.entries.insert(stored, newest.clone());
                newest
            }
        };
        match newest {
            // Written after the reader's snapshot: an older version may be the reader's.
            Some((seq, _)) if seq > snapshot => Run::get(&self.run, key, snapshot),
            newest => Ok(newest),
        }
    }

    fn cursor(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Source {
        self.run.cursor(start, end)
    }

    fn lazy_cursor(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Box<dyn LazySource> {
        self.run.lazy_cursor(start, end)
    }

    fn cursor_rev(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Source {
        self.run.cursor_rev(start, end)
    }

    fn range_deletes(&self) -> RangeDeletes {
        DTable::range_deletes(&self.run)
    }

    fn covering_tombstone(&self, key: &[u8], snapshot: u64) -> Option<u64> {
        DTable::covering_tombstone(&self.run, key, snapshot)
    }
}
