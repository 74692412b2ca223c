//! The read path: point lookups and ordered range scans over memtables and runs, at the
//! sequence number current when the read began.

use super::{large, Db, Inner};
use crate::batch::TableId;
use crate::bounds::{before_start, past_end};
use crate::layout::vtree::dtable::DTable;
use crate::merge_iter::Visible;
use crate::Result;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Db {
    /// Bytes `offset..offset + len` of `key`'s value in `table`: those up to the value's end,
    /// so empty at or past it; `None` if the key has no value. A range of a large value reads
    /// only the chunks it overlaps (one device read for a range within one chunk).
    pub fn get_range(
        &self,
        table: TableId,
        key: impl AsRef<[u8]>,
        offset: u64,
        len: u64,
    ) -> Result<Option<Vec<u8>>> {
        match find_at(&self.inner, table, key.as_ref(), || self.newest_seq())? {
            Some(found) => found.range(&self.inner, offset, len).map(Some),
            None => Ok(None),
        }
    }

    /// The length of `key`'s value in `table`, without reading a large value's bytes.
    pub fn value_len(&self, table: TableId, key: impl AsRef<[u8]>) -> Result<Option<u64>> {
        let found = find_at(&self.inner, table, key.as_ref(), || self.newest_seq())?;
        Ok(found.map(|f| f.len()))
    }

    /// A reader over `key`'s value in `table` as it is now (a later write does not change
    /// what it reads): it holds one chunk in memory at a time.
    pub fn value_reader(
        &self,
        table: TableId,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<large::ValueReader>> {
        let found = find_at(&self.inner, table, key.as_ref(), || self.newest_seq())?;
        Ok(found.map(|f| large::ValueReader::new(self.inner.clone(), f)))
    }

    fn newest_seq(&self) -> u64 {
        self.inner.visible_seq.load(Ordering::Acquire)
    }

    /// The value of `key` in `table`, if it has one.
    pub fn get(&self, table: TableId, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        // At the newest commit, taken after the view (see `get_at`): no snapshot is
        // registered, so a merge installed before the view was taken may have dropped the
        // version an earlier snapshot would have seen (a reader then got an older value
        // than one it had read).
        get_at(&self.inner, table, key.as_ref(), || {
            self.inner.visible_seq.load(Ordering::Acquire)
        })
    }

    /// The pairs with keys in `(start, end)`, in key order, as they were when the scan began
    /// (writes made meanwhile are not seen).
    pub fn range(&self, table: TableId, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Result<DbIter> {
        self.scan(table, start, end, false)
    }

    fn scan(
        &self,
        table: TableId,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
    ) -> Result<DbIter> {
        let guard = ReaderGuard::at_newest(&self.inner);
        scan_at(&guard, table, start, end, reverse)
    }

    /// The pairs with keys in `(start, end)`, in descending key order, as they were when the
    /// scan began.
    pub fn range_rev(
        &self,
        table: TableId,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
    ) -> Result<DbIter> {
        self.scan(table, start, end, true)
    }

    /// The pairs whose keys start with `prefix`, in key order.
    pub fn scan_prefix(&self, table: TableId, prefix: &[u8]) -> Result<DbIter> {
        match prefix_end(prefix) {
            Some(end) => self.range(table, Bound::Included(prefix), Bound::Excluded(&end)),
            None => self.range(table, Bound::Included(prefix), Bound::Unbounded),
        }
    }
}

/// The smallest key greater than every key starting with `prefix` (`None`: no such key).
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// The value of `key` in `table` as of the commit `snapshot` names, which it asks for once
/// it holds the table's view. A registered snapshot (a [`ReaderGuard`], a transaction's)
/// is kept by every merge, whenever it was taken. An unregistered one read after the view
/// is as good: every commit visible by then is in the view (a memtable is frozen and
/// written out only whole and visible), and a version a merge dropped from it was shadowed
/// by one visible at that snapshot.
pub(crate) fn get_at(
    inner: &Inner,
    table: TableId,
    key: &[u8],
    snapshot: impl FnOnce() -> u64,
) -> Result<Option<Vec<u8>>> {
    match find_at(inner, table, key, snapshot)? {
        Some(found) => found.into_bytes(inner).map(Some),
        None => Ok(None),
    }
}

/// [`get_at`], a large value found by its reference but not read.
pub(crate) fn find_at(
    inner: &Inner,
    table: TableId,
    key: &[u8],
    snapshot: impl FnOnce() -> u64,
) -> Result<Option<large::Found>> {
    let (view, hidden) = {
        let version = inner.version.read();
        let hidden = large::hidden_of(&version, table).map(|h| version.view(h));
        (version.key_view(table, key)?, hidden.transpose()?)
    };
    let label = || format!("table #{}", table.0);
    large::find_in(inner, (&*view, hidden.as_ref()), key, snapshot(), label)
}

/// How a scan finds the large values it meets: the hidden table's view at its snapshot.
pub(crate) struct LargeLookup {
    pub inner: Arc<Inner>,
    pub hidden: Arc<dyn DTable>,
    pub snapshot: u64,
}

/// A scan of `table` as of `guard`'s snapshot (the iterator keeps its own registration).
pub(crate) fn scan_at(
    guard: &ReaderGuard,
    table: TableId,
    start: Bound<&[u8]>,
    end: Bound<&[u8]>,
    reverse: bool,
) -> Result<DbIter> {
    let (view, hidden) = {
        let version = guard.inner.version.read();
        let hidden = large::hidden_of(&version, table).map(|h| version.view(h));
        (version.view(table)?, hidden.transpose()?)
    };
    let iter = scan_view(
        &*view,
        start,
        end,
        reverse,
        guard.snapshot,
        Some(guard.clone()),
    );
    Ok(iter.with_large(hidden.map(|hidden| LargeLookup {
        inner: guard.inner.clone(),
        hidden,
        snapshot: guard.snapshot,
    })))
}

/// What `view` holds in `(start, end)` for a reader at `snapshot`, either way round, with
/// the view's range tombstones applied; `guard` keeps the snapshot registered if it is the
/// mainline's.
pub(crate) fn scan_view(
    view: &dyn DTable,
    start: Bound<&[u8]>,
    end: Bound<&[u8]>,
    reverse: bool,
    snapshot: u64,
    guard: Option<ReaderGuard>,
) -> DbIter {
    let versions = view.cursor_at(start, end, reverse, snapshot);
    let ranges = view.range_deletes();
    let visible = Visible::new(versions, snapshot, ranges);
    DbIter::new(visible, start, end, reverse, guard)
}

/// Keeps a reader's snapshot registered, so merges keep the versions it can see.
pub(crate) struct ReaderGuard {
    inner: Arc<Inner>,
    snapshot: u64,
}

impl ReaderGuard {
    /// Registers the newest commit as a reader's snapshot.
    pub(crate) fn at_newest(inner: &Arc<Inner>) -> ReaderGuard {
        // Under the lock, so no merge can decide what to keep between reading the newest
        // commit and registering it.
        let mut readers = inner.readers.lock();
        let snapshot = inner.visible_seq.load(Ordering::Acquire);
        readers.add(snapshot);
        ReaderGuard {
            inner: inner.clone(),
            snapshot,
        }
    }

    /// Registers `snapshot`, which the caller already keeps registered some other way (it
    /// is not older than anything merges have dropped).
    pub(crate) fn at(inner: &Arc<Inner>, snapshot: u64) -> ReaderGuard {
        inner.readers.lock().add(snapshot);
        ReaderGuard {
            inner: inner.clone(),
            snapshot,
        }
    }
}

impl Clone for ReaderGuard {
    fn clone(&self) -> Self {
        self.inner.readers.lock().add(self.snapshot);
        ReaderGuard {
            inner: self.inner.clone(),
            snapshot: self.snapshot,
        }
    }
}

impl Drop for ReaderGuard {
    fn drop(&mut self) {
        self.inner.readers.lock().remove(self.snapshot);
    }
}

/// An ordered scan: yields `(key, value)` pairs, or the error that ended it.
pub struct DbIter {
    visible: Visible,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    /// Descending keys.
    reverse: bool,
    /// The registration of the snapshot read, if it is the mainline's.
    _guard: Option<ReaderGuard>,
    /// Where the table's large values are found, if it has any.
    large: Option<LargeLookup>,
    /// For repair: the keys whose large value is damaged, passed over and kept here.
    damaged: Option<DamagedValues>,
}

/// Keys a scan passed over for their damaged large values, with the damage.
pub(crate) type DamagedValues = Arc<parking_lot::Mutex<Vec<(Vec<u8>, crate::Error)>>>;

impl DbIter {
    pub(crate) fn new(
        visible: Visible,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
        guard: Option<ReaderGuard>,
    ) -> DbIter {
        DbIter {
            visible,
            start: start.map(<[u8]>::to_vec),
            end: end.map(<[u8]>::to_vec),
            reverse,
            _guard: guard,
            large: None,
            damaged: None,
        }
    }

    /// The scan, passing over keys whose large value is damaged (recorded in `damaged`)
    /// instead of ending at them.
    pub(crate) fn passing_damaged(mut self, damaged: DamagedValues) -> DbIter {
        self.damaged = Some(damaged);
        self
    }

    /// The scan, reading the large values it meets through `large`.
    pub(crate) fn with_large(mut self, large: Option<LargeLookup>) -> DbIter {
        self.large = large;
        self
    }

    /// `value` itself, or the large value it marks.
    fn resolve(&self, key: &[u8], value: Vec<u8>) -> Result<Vec<u8>> {
        let Some(l) = &self.large else {
            return Ok(value);
        };
        let found = large::find(
            &l.inner,
            Some(value),
            || Ok(l.hidden.get(key, l.snapshot)?.and_then(|(_, v)| v)),
            || format!("key {key:?}"),
        )?;
        found.map_or(Ok(Vec::new()), |f| f.into_bytes(&l.inner))
    }
}

impl Iterator for DbIter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let (key, value) = match self.visible.next()? {
                Ok(kv) => kv,
                Err(e) => return Some(Err(e)),
            };
            // Runs start at the first bound but cannot stop at the other one: the merged stream
            // is cut here. Keys on the near side of the first bound are skipped.
            let before = before_start(&key, self.start.as_ref().map(Vec::as_slice));
            let past = past_end(&key, self.end.as_ref().map(Vec::as_slice));
            let (skip, stop) = if self.reverse {
                (past, before)
            } else {
                (before, past)
            };
            if stop {
                return None;
            }
            if skip {
                continue;
            }
            match (self.resolve(&key, value), &self.damaged) {
                (Err(e), Some(damaged)) if e.is_corruption() => damaged.lock().push((key, e)),
                (r, _) => return Some(r.map(|value| (key, value))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::prefix_end;

    #[test]
    fn prefix_end_is_the_next_key_after_all_prefixed_ones() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), None);
        assert_eq!(prefix_end(b""), None);
    }
}
