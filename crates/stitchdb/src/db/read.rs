//! The read path: point lookups and ordered range scans over memtables and runs, at the
//! sequence number current when the read began.

use super::{Db, Inner};
use crate::batch::TableId;
use crate::bounds::{before_start, past_end};
use crate::layout::vtree::dtable::DTable;
use crate::merge_iter::Visible;
use crate::Result;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Db {
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
    let view = inner.version.read().key_view(table, key)?;
    Ok(view.get(key, snapshot())?.and_then(|(_, value)| value))
}

/// A scan of `table` as of `guard`'s snapshot (the iterator keeps its own registration).
pub(crate) fn scan_at(
    guard: &ReaderGuard,
    table: TableId,
    start: Bound<&[u8]>,
    end: Bound<&[u8]>,
    reverse: bool,
) -> Result<DbIter> {
    let view = guard.inner.version.read().view(table)?;
    Ok(scan_view(
        &*view,
        start,
        end,
        reverse,
        guard.snapshot,
        Some(guard.clone()),
    ))
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
}

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
        }
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
            if !skip {
                return Some(Ok((key, value)));
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
