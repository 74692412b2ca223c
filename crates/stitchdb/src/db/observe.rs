//! Commit observers: other layers (a file system's metadata cache) hear about every commit
//! that changes what a table holds, whoever makes it, in commit order.
//!
//! Observers live in `WriteState`, so the write path asks whether there are any with the
//! writer lock it holds anyway: with none registered a commit pays one empty check. Merges,
//! compactions, defragmentation and flushes change no table's contents and are not reported;
//! creating a table (empty) is not a commit of contents either.

use super::{Db, Inner};
use crate::batch::{RangeOp, TableId};
use crate::entry::Value;
use crate::layout::vtree::run::Run;
use std::sync::{Arc, Weak};

/// Hears about every commit of the store it is registered with ([`Db::observe_commits`]).
///
/// Both calls run under the store's writer lock, in commit order: an observer must not call
/// back into the store (it would deadlock on that lock) and must not block (every writer
/// waits for it). Record what is needed and return.
pub trait CommitObserver: Send + Sync {
    /// Called under the store's write lock, before the commit becomes visible to readers.
    /// Not called for a commit that fails (validation, a full store): those change nothing.
    fn committing(&self, commit: &Commit<'_>);
    /// Called under the store's write lock once that commit is visible (same order, no other
    /// commit in between). If the store fails between the two calls (it turns read-only),
    /// this is not called for that commit, and what it wrote may reappear at the next open.
    fn committed(&self, seq: u64);
}

/// What one commit changes, as told to a [`CommitObserver`]. Apply [`range_deletes`]
/// first, then [`writes`] in order, then treat everything in [`spans`] as changed (re-read
/// it from the store once the commit is visible).
///
/// [`range_deletes`]: Commit::range_deletes
/// [`writes`]: Commit::writes
/// [`spans`]: Commit::spans
pub struct Commit<'a> {
    seq: u64,
    ops: &'a [(TableId, Vec<u8>, Value)],
    ranges: &'a [RangeOp],
    linked: &'a [(TableId, Vec<Arc<Run>>)],
}

/// Keys a commit may have changed without listing them: `lo..=hi` of `table` (both bounds
/// inclusive; a span may cover keys the commit did not touch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangedSpan<'a> {
    /// The table the span is of.
    pub table: TableId,
    /// The span's first key.
    pub lo: &'a [u8],
    /// The span's last key.
    pub hi: &'a [u8],
}

impl<'a> Commit<'a> {
    /// A batch's commit: its keys are listed.
    pub(crate) fn batch(
        seq: u64,
        ops: &'a [(TableId, Vec<u8>, Value)],
        ranges: &'a [RangeOp],
    ) -> Commit<'a> {
        Commit {
            seq,
            ops,
            ranges,
            linked: &[],
        }
    }

    /// A spilled transaction's commit: its runs are linked into their tables as they are.
    pub(crate) fn linked(seq: u64, linked: &'a [(TableId, Vec<Arc<Run>>)]) -> Commit<'a> {
        Commit {
            seq,
            ops: &[],
            ranges: &[],
            linked,
        }
    }

    /// The commit's sequence number (readers see it once `committed(seq)` is called).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The point writes in the order applied (a later write of a key wins): `(table, key,
    /// value)`, `None` for a delete.
    pub fn writes(&self) -> impl Iterator<Item = (TableId, &'a [u8], Option<&'a [u8]>)> + 'a {
        self.ops
            .iter()
            .map(|(t, k, v)| (*t, k.as_slice(), v.as_deref()))
    }

    /// The range deletes, `(table, start, end)` with `end` exclusive, applied before the point
    /// writes.
    pub fn range_deletes(&self) -> impl Iterator<Item = (TableId, &'a [u8], &'a [u8])> + 'a {
        self.ranges
            .iter()
            .map(|(t, s, e)| (*t, s.as_slice(), e.as_slice()))
    }

    /// For a commit whose keys are not listed (a transaction that spilled, whose runs are
    /// linked in whole), every span it may have changed: each run's keys and each of its
    /// range deletes. Empty for the others.
    pub fn spans(&self) -> impl Iterator<Item = ChangedSpan<'a>> + 'a {
        self.linked.iter().flat_map(|(table, runs)| {
            runs.iter().flat_map(move |run| {
                let blocks = run.blocks();
                let keys = match (blocks.first(), blocks.last()) {
                    (Some(first), Some(last)) => Some((&first.first_key[..], &last.last_key[..])),
                    _ => None,
                };
                // A range delete's end is exclusive: as an inclusive bound it covers one key
                // more, which an observer re-reads for nothing.
                let deleted = run.meta.ranges.iter().map(|r| (&r.start[..], &r.end[..]));
                keys.into_iter()
                    .chain(deleted)
                    .map(move |(lo, hi)| ChangedSpan {
                        table: *table,
                        lo,
                        hi,
                    })
            })
        })
    }
}

/// The registered observers, each with the id its guard unregisters.
#[derive(Default)]
pub(crate) struct Observers {
    list: Vec<(u64, Arc<dyn CommitObserver>)>,
    next_id: u64,
}

impl Observers {
    /// Whether nobody listens: the write path's only cost then.
    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub(crate) fn committing(&self, commit: &Commit<'_>) {
        for (_, o) in &self.list {
            o.committing(commit);
        }
    }

    pub(crate) fn committed(&self, seq: u64) {
        for (_, o) in &self.list {
            o.committed(seq);
        }
    }
}

/// Keeps an observer registered; dropping it unregisters the observer (after any call in
/// progress: it waits for the writer lock). It does not keep the store open.
#[must_use = "dropping the guard unregisters the observer"]
pub struct ObserverGuard {
    inner: Weak<Inner>,
    id: u64,
}

impl Drop for ObserverGuard {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.upgrade() {
            let id = self.id;
            inner.write.lock().observers.list.retain(|(i, _)| *i != id);
        }
    }
}

impl Db {
    /// Registers `observer` to hear about every commit from the next one on, until the
    /// returned guard is dropped. See [`CommitObserver`] for what it may do.
    pub fn observe_commits(&self, observer: Arc<dyn CommitObserver>) -> ObserverGuard {
        let inner = self.shared();
        let mut w = inner.write.lock();
        let id = w.observers.next_id;
        w.observers.next_id += 1;
        w.observers.list.push((id, observer));
        ObserverGuard {
            inner: Arc::downgrade(inner),
            id,
        }
    }
}
