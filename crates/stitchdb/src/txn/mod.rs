//! Transactions: a snapshot taken at begin, private writes applied at commit as one batch
//! under one sequence number, and validation at commit against what committed meanwhile.
//!
//! * **Snapshot isolation**: reads see the snapshot; a key this transaction writes that some
//!   other commit wrote after the snapshot fails the commit with [`Error::Conflict`] (first
//!   committer wins).
//! * **Serializable**: as above, and the keys read and the ranges scanned must not have
//!   changed since the snapshot either (optimistic backward validation: a transaction that
//!   commits then read what it would have read at its commit point, so commit order is a
//!   serial order; a range covers keys not yet written, so there are no phantoms).
//!   Read-only transactions always commit: a snapshot is a prefix of that serial order.
//!
//! Aborting drops the private writes: nothing was applied, so there is nothing to undo.
//! Nested transactions ([`Transaction::begin_nested`]) are savepoints over the private writes.

mod iter;
mod spill;
mod write_set;

pub use iter::TxnIter;

use crate::batch::{RangeOp, TableId, WriteBatch};
use crate::concurrency::{HeldLocks, LockError, LockManager, LockMode, Oracle, TableKey};
use crate::db::{
    find_at, lock_exclusive, scan_at, Committer, Db, Found, Inner, ReaderGuard, Span, Written,
};
use crate::entry::{within, within_any, Value};
use crate::layout::vtree::run::FilterChoice;
use crate::options::Durability;
use crate::{Error, Result};
use spill::Spilled;
use std::collections::BTreeSet;
use std::marker::PhantomData;
use std::ops::{Bound, Deref, DerefMut};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use write_set::WriteSet;

/// How a transaction is isolated from concurrent ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Reads see the snapshot taken at begin; concurrent writes of the same key conflict.
    Snapshot,
    /// As if transactions ran one at a time, in commit order: optimistic. Nothing waits;
    /// a transaction whose reads changed under it fails at commit with `Error::Conflict`.
    Serializable,
    /// Serializable by strict two-phase locking: pessimistic. Reads take shared locks (a
    /// scan locks its whole range, keys not yet written included), writes exclusive ones,
    /// all held to commit or abort, and reads see the newest commit. A conflicting
    /// transaction waits, up to `Options::lock_timeout` (then `Error::LockTimeout`); of a
    /// deadlock's transactions the youngest fails with `Error::Deadlock`. Commits never
    /// fail validation. After a lock error the transaction holds nothing more and every
    /// further call returns that error.
    Locking,
}

/// Bytes a private write is charged beyond its key and value (its map entry).
const WRITE_OVERHEAD: usize = 64;

/// How to take back one private change.
enum Undo {
    /// Restore what `writes` held for the key (`None`: nothing).
    Write(TableKey, Option<Value>),
    /// Drop the newest private range delete.
    RangeDelete,
}

/// A range a serializable transaction scanned.
type ScannedRange = (TableId, Bound<Vec<u8>>, Bound<Vec<u8>>);

/// An open transaction. Commit or abort it; dropping it aborts. While it is open the versions
/// its snapshot sees are kept by merges.
///
/// It holds the store's shared state itself: `'db` only ties one from [`Db::begin`] to its
/// store, and one from [`Db::begin_owned`] is `'static`. Once the store is closed every call
/// of a transaction still open returns [`Error::Closed`] (dropping it is all that is left).
pub struct Transaction<'db> {
    inner: Arc<Inner>,
    _db: PhantomData<&'db Db>,
    isolation: Isolation,
    /// The newest commit this transaction sees. Registered with the oracle, which also keeps
    /// merges from dropping the versions it can see.
    snapshot: u64,
    /// The newest private write of each key (`None`: deleted).
    writes: WriteSet,
    /// Private range deletes since the last spill, in order.
    range_deletes: Vec<RangeOp>,
    /// Bytes of `writes` and `range_deletes`: past `Options::txn_memory` they are spilled.
    write_bytes: usize,
    /// The private writes spilled so far.
    spilled: Spilled,
    /// For savepoints, kept only while a nested transaction is open: how to take back each
    /// private change.
    undo: Vec<Undo>,
    /// Nested transactions open.
    nesting: usize,
    /// Keys read whose change after the snapshot fails the commit (serializable: every key
    /// read; snapshot isolation: those read for update), and (serializable) ranges scanned.
    reads: BTreeSet<TableKey>,
    ranges: Vec<ScannedRange>,
    /// Locking only: the transaction's owner id in the lock manager.
    owner: Option<u64>,
    /// Locking only: the lock error that ended the transaction early.
    failed: Option<Error>,
    ended: bool,
    /// Chunks of the large values this transaction wrote (given back unless it commits),
    /// and the chunks its private references name (pinned while it is open).
    large: Written,
    committed: bool,
}

impl Db {
    /// Writes `bytes` into `key`'s value in `table` at `offset`; a value shorter than
    /// `offset` is first extended with zeros (a missing key is an empty value). Of a large
    /// value only the chunks the range touches are written again; the new value shares the
    /// others. Atomic: a transaction, retried if another writer changed the key meanwhile.
    pub fn put_range(
        &self,
        table: TableId,
        key: impl AsRef<[u8]>,
        offset: u64,
        bytes: &[u8],
    ) -> Result<()> {
        let mut tries = 0;
        loop {
            let mut txn = self.begin(Isolation::Snapshot)?;
            txn.put_range(table, key.as_ref(), offset, bytes)?;
            match txn.commit() {
                Err(Error::Conflict { .. }) if tries < 8 => tries += 1,
                r => return r,
            }
        }
    }

    /// Begins a transaction over any number of tables.
    pub fn begin(&self, isolation: Isolation) -> Result<Transaction<'_>> {
        self.begin_owned(isolation)
    }

    /// [`begin`](Self::begin) for a transaction that does not borrow the store (to keep in a
    /// table of open transactions, say). Closing the store does not wait for it: its
    /// uncommitted writes are dropped with it as an abort's are, and every call of it after
    /// the close returns [`Error::Closed`]. Until it is dropped it keeps the store's memory
    /// (and open file) alive, as an open iterator does.
    pub fn begin_owned(&self, isolation: Isolation) -> Result<Transaction<'static>> {
        let inner = self.shared();
        if inner.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        // Under the write lock, so the snapshot and the oracle's record of later commits
        // begin at the same commit.
        let mut w = inner.write.lock();
        let snapshot = inner.visible_seq.load(Ordering::Acquire);
        let owner = if isolation == Isolation::Locking {
            w.oracle.begin_locking();
            Some(inner.locks.register())
        } else {
            w.oracle.begin(snapshot);
            None
        };
        drop(w);
        Ok(Transaction {
            inner: inner.clone(),
            _db: PhantomData,
            isolation,
            snapshot,
            writes: WriteSet::default(),
            range_deletes: Vec::new(),
            write_bytes: 0,
            spilled: Spilled::default(),
            undo: Vec::new(),
            nesting: 0,
            reads: BTreeSet::new(),
            ranges: Vec::new(),
            owner,
            failed: None,
            ended: false,
            large: Written::new(inner),
            committed: false,
        })
    }
}

impl<'db> Transaction<'db> {
    /// How this transaction is isolated.
    pub fn isolation(&self) -> Isolation {
        self.isolation
    }

    /// The sequence number of the newest commit this transaction sees (for a locking
    /// transaction, the newest commit when it began: its reads see later ones too).
    pub fn snapshot_seq(&self) -> u64 {
        self.snapshot
    }

    /// The commit reads see: the snapshot, or for a locking transaction (whose locks keep
    /// what it reads from changing) the newest.
    fn read_seq(&self) -> u64 {
        match self.owner {
            Some(_) => self.inner.visible_seq.load(Ordering::Acquire),
            None => self.snapshot,
        }
    }

    /// The lock error that ended this transaction, if one did, or the store's close.
    fn usable(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        match &self.failed {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Locking only: takes a lock (`request` asks the lock manager for this transaction's
    /// owner, with the store's lock timeout), or ends the transaction with the lock error,
    /// releasing every lock so those it blocked go on.
    fn lock(
        &mut self,
        request: impl FnOnce(&LockManager, u64, Duration) -> std::result::Result<(), LockError>,
    ) -> Result<()> {
        let Some(owner) = self.owner else {
            return Ok(());
        };
        let inner = &self.inner;
        let Err(refused) = request(&inner.locks, owner, inner.opts.lock_timeout) else {
            return Ok(());
        };
        let e = inner.lock_refused(refused);
        inner.locks.release_all(owner);
        self.failed = Some(e.clone());
        Err(e)
    }

    /// The value of `key`: this transaction's own write if it made one, else the snapshot's.
    pub fn get(&mut self, table: TableId, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.read(table, key.as_ref(), false)
    }

    /// [`get`](Self::get) for a key the transaction means to write (RocksDB's
    /// `GetForUpdate`): the read conflicts as a write would. A locking transaction takes the
    /// exclusive lock at once (two that read a key shared and then write it would deadlock
    /// upgrading); under snapshot isolation and serializable, the commit fails if another
    /// committed the key after the snapshot, so a check made on it cannot be skewed.
    pub fn get_for_update(
        &mut self,
        table: TableId,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<Vec<u8>>> {
        self.read(table, key.as_ref(), true)
    }

    fn read(&mut self, table: TableId, key: &[u8], for_update: bool) -> Result<Option<Vec<u8>>> {
        match self.find(table, key, for_update)? {
            Some(found) => found.into_bytes(&self.inner).map(Some),
            None => Ok(None),
        }
    }

    /// What [`read`](Self::read) reads, a large value found by its reference but not read.
    fn find(&mut self, table: TableId, key: &[u8], for_update: bool) -> Result<Option<Found>> {
        self.usable()?;
        // Own writes answer first; the key is locked exclusive already if they do.
        if let Some(v) = self.private(table, key)? {
            let hidden = crate::db::hidden_of(&self.inner.version.read(), table);
            let place = || format!("transaction, table #{}, key {key:?}", table.0);
            let reference = || match hidden {
                Some(h) => Ok(self.private(h, key)?.flatten()),
                None => Ok(None),
            };
            return crate::db::find_large(&self.inner, v, reference, place);
        }
        let mode = match for_update {
            true => LockMode::Exclusive,
            false => LockMode::Shared,
        };
        self.lock(|m, owner, timeout| m.lock_key(owner, table, key, mode, timeout))?;
        let value = find_at(&self.inner, table, key, || self.read_seq())?;
        let validated = self.isolation == Isolation::Serializable || for_update;
        if validated && self.owner.is_none() {
            self.reads.insert((table, key.to_vec()));
        }
        Ok(value)
    }

    /// This transaction's own write of `key`, if it made one (`Some(None)`: deleted).
    fn private(&self, table: TableId, key: &[u8]) -> Result<Option<Value>> {
        if let Some(v) = self.writes.get(table, key) {
            return Ok(Some(v.clone()));
        }
        if self.deleted_by_range(table, key) {
            return Ok(Some(None));
        }
        self.spilled.get(table, key)
    }

    /// Bytes `offset..offset + len` of `key`'s value, as [`get`](Self::get) would read it
    /// (see [`Db::get_range`]).
    pub fn get_range(
        &mut self,
        table: TableId,
        key: impl AsRef<[u8]>,
        offset: u64,
        len: u64,
    ) -> Result<Option<Vec<u8>>> {
        match self.find(table, key.as_ref(), false)? {
            Some(found) => found.range(&self.inner, offset, len).map(Some),
            None => Ok(None),
        }
    }

    /// Sets `key` to the `len` bytes `src` yields, streamed into extents (see
    /// [`Db::put_from`]); their chunks are given back if the transaction does not commit.
    pub fn put_from(
        &mut self,
        table: TableId,
        key: impl AsRef<[u8]>,
        mut src: impl std::io::Read,
        len: u64,
    ) -> Result<()> {
        let key = key.as_ref();
        if len <= crate::db::large_threshold(self.inner.zones_size()) as u64 {
            let mut value = vec![0; len as usize];
            src.read_exact(&mut value)
                .map_err(|e| Error::LargeValue(format!("reading the value: {e}")))?;
            return self.write(table, key, Some(value));
        }
        self.usable()?;
        let inner = self.inner.clone();
        let (hidden, r) =
            crate::db::write_large(&inner, table, key, &mut src, len, &mut self.large)?;
        self.write_reference(table, hidden, key, &r)
    }

    /// Writes `bytes` into `key`'s value at `offset` (see [`Db::put_range`]): read for update,
    /// so a transaction that changed the key after this one's snapshot fails its commit.
    pub fn put_range(
        &mut self,
        table: TableId,
        key: impl AsRef<[u8]>,
        offset: u64,
        bytes: &[u8],
    ) -> Result<()> {
        let key = key.as_ref();
        let found = self.find(table, key, true)?;
        let end = offset
            .checked_add(bytes.len() as u64)
            .ok_or_else(|| Error::LargeValue("range past 2^64".into()))?;
        let inner = self.inner.clone();
        // The old chunks stay pinned while the changed ones are copied from them.
        let mut _reading = None;
        let r = match found {
            Some(Found::Large(r, pins)) => {
                _reading = Some(pins);
                r
            }
            found => {
                let mut v = match found {
                    Some(Found::Inline(v)) => v,
                    _ => Vec::new(),
                };
                if end.max(v.len() as u64)
                    <= crate::db::large_threshold(self.inner.zones_size()) as u64
                {
                    if v.len() < end as usize {
                        v.resize(end as usize, 0);
                    }
                    v[offset as usize..end as usize].copy_from_slice(bytes);
                    return self.write(table, key, Some(v));
                }
                // An inline value that grows large is written out first, then changed.
                let len = v.len() as u64;
                crate::db::write_large(&inner, table, key, &mut &v[..], len, &mut self.large)?.1
            }
        };
        let hidden = crate::db::hidden_table(&inner, table)?;
        let r = crate::db::write_large_range(&inner, &r, offset, bytes, &mut self.large)?;
        self.write_reference(table, hidden, key, &r)
    }

    /// The private writes of a large value: the marker in the table, the reference in its
    /// hidden table.
    fn write_reference(
        &mut self,
        table: TableId,
        hidden: TableId,
        key: &[u8],
        r: &crate::db::Reference,
    ) -> Result<()> {
        self.write(table, key, Some(crate::db::LARGE_MARKER.to_vec()))?;
        self.write(hidden, key, Some(r.encode()))
    }

    /// The pairs with keys in `(start, end)` in key order: the snapshot's, with this
    /// transaction's own writes in place.
    pub fn range(
        &mut self,
        table: TableId,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
    ) -> Result<TxnIter> {
        self.usable()?;
        self.lock(|m, owner, timeout| {
            m.lock_range(owner, table, start, end, LockMode::Shared, timeout)
        })?;
        // The scan may outlive the transaction: it keeps the snapshot registered itself.
        let guard = match self.owner {
            Some(_) => ReaderGuard::at_newest(&self.inner),
            None => ReaderGuard::at(&self.inner, self.snapshot),
        };
        let store = scan_at(&guard, table, start, end, false)?;
        let own = self
            .writes
            .range(table, start, end)
            .map(|(k, v)| (k.to_vec(), v.clone()))
            .collect();
        if self.isolation == Isolation::Serializable {
            let (lo, hi) = (start.map(<[u8]>::to_vec), end.map(<[u8]>::to_vec));
            self.ranges.push((table, lo, hi));
        }
        let mut hidden: Vec<(Vec<u8>, Vec<u8>)> = self
            .range_deletes
            .iter()
            .filter(|(t, _, _)| *t == table)
            .map(|(_, s, e)| (s.clone(), e.clone()))
            .collect();
        // Range deletes since the last spill hide the spilled pairs too (they are older).
        let pending = hidden.clone();
        let spilled = self.spilled.pairs(table, start, end).filter(move |pair| {
            pair.as_ref()
                .map_or(true, |(key, _)| !within_any(&pending, key))
        });
        hidden.extend(self.spilled.deleted_ranges(table));
        let large = self.own_large(table, start, end)?;
        Ok(TxnIter::new(store, own, Box::new(spilled), hidden, large))
    }

    /// How a scan of `table` reads the large values of this transaction's own writes: by
    /// their private references in the range, taken now (with their chunks pinned).
    fn own_large(
        &mut self,
        table: TableId,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
    ) -> Result<Option<iter::OwnLarge>> {
        let Some(h) = crate::db::hidden_of(&self.inner.version.read(), table) else {
            return Ok(None);
        };
        let mut refs: std::collections::BTreeMap<Vec<u8>, Option<Vec<u8>>> =
            self.spilled.pairs(h, start, end).collect::<Result<_>>()?;
        refs.extend(
            self.writes
                .range(h, start, end)
                .map(|(k, v)| (k.to_vec(), v.clone())),
        );
        let inner = self.inner.clone();
        Ok(Some(Box::new(move |key: &[u8], value: Vec<u8>| {
            let reference = || Ok(refs.get(key).cloned().flatten());
            let place = || format!("transaction, table #{}, key {key:?}", table.0);
            match crate::db::find_large(&inner, Some(value), reference, place)? {
                Some(found) => found.into_bytes(&inner),
                None => Ok(Vec::new()),
            }
        })))
    }

    /// Whether a private range delete covers `key` (private writes after it are in `writes`).
    fn deleted_by_range(&self, table: TableId, key: &[u8]) -> bool {
        self.range_deletes
            .iter()
            .any(|(t, s, e)| *t == table && within(s, e, key))
    }

    /// Deletes every key from `start` (inclusive) to `end` (exclusive) in `table`: one range
    /// tombstone at commit, however many keys the range holds. This transaction's earlier
    /// writes in the range go; later ones win. An empty range does nothing.
    pub fn delete_range(
        &mut self,
        table: TableId,
        start: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
    ) -> Result<()> {
        self.usable()?;
        let (start, end) = (start.as_ref(), end.as_ref());
        self.inner.check_write(table, start, None)?;
        self.inner.check_write(table, end, None)?;
        if start >= end {
            return Ok(());
        }
        let (lo, hi) = (Bound::Included(start), Bound::Excluded(end));
        self.lock(|m, owner, timeout| {
            m.lock_range(owner, table, lo, hi, LockMode::Exclusive, timeout)
        })?;
        for (t, key, before) in self.writes.remove_range(table, start, end) {
            if self.nesting > 0 {
                self.undo.push(Undo::Write((t, key), Some(before)));
            }
        }
        self.range_deletes
            .push((table, start.to_vec(), end.to_vec()));
        if self.nesting > 0 {
            self.undo.push(Undo::RangeDelete);
        }
        // The references of the range's large values go with them.
        let hidden = crate::db::hidden_of(&self.inner.version.read(), table);
        match hidden {
            Some(h) => self.delete_range(h, start, end),
            None => Ok(()),
        }
    }

    /// Sets `key` of `table` to `value` when the transaction commits (seen by its own reads
    /// at once).
    pub fn put(
        &mut self,
        table: TableId,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        let value = value.as_ref();
        if value.len() > crate::db::large_threshold(self.inner.zones_size()) {
            return self.put_from(table, key, value, value.len() as u64);
        }
        self.write(table, key.as_ref(), Some(value.to_vec()))
    }

    /// Deletes `key` of `table` when the transaction commits (seen by its own reads at once).
    pub fn delete(&mut self, table: TableId, key: impl AsRef<[u8]>) -> Result<()> {
        self.write(table, key.as_ref(), None)
    }

    fn write(&mut self, table: TableId, key: &[u8], value: Value) -> Result<()> {
        self.usable()?;
        self.inner.check_write(table, key, value.as_deref())?;
        self.lock(|m, owner, timeout| m.lock_key(owner, table, key, LockMode::Exclusive, timeout))?;
        self.write_bytes += key.len() + value.as_ref().map_or(0, Vec::len) + WRITE_OVERHEAD;
        let inline = value.as_deref() != Some(crate::db::LARGE_MARKER);
        let before = self.writes.insert(table, key.to_vec(), value);
        if self.nesting > 0 {
            self.undo.push(Undo::Write((table, key.to_vec()), before));
        }
        // An inline value or a delete of a key in a table with large values deletes its
        // reference too (as `add_hidden_deletes` does for batches), so that a commit that
        // spilled, which links its runs without that pass, leaves no reference behind.
        let hidden = crate::db::hidden_of(&self.inner.version.read(), table);
        if let Some(h) = hidden.filter(|_| inline) {
            let before = self.writes.insert(h, key.to_vec(), None);
            if self.nesting > 0 {
                self.undo.push(Undo::Write((h, key.to_vec()), before));
            }
        }
        self.spill_if_full()
    }

    /// Writes the private writes out as private runs once they pass the memory budget
    /// (not inside a nested transaction: what it may undo stays in memory).
    fn spill_if_full(&mut self) -> Result<()> {
        let inner = &self.inner;
        if self.write_bytes <= inner.opts.txn_memory || self.nesting > 0 {
            return Ok(());
        }
        self.spill()
    }

    fn spill(&mut self) -> Result<()> {
        let inner = &self.inner;
        inner.check_writable()?;
        // A full store refuses it as it would a commit of the same writes, and it may go in
        // after a reclaim (a spill is all or nothing).
        let (spilled, writes, ranges) = (&mut self.spilled, &self.writes, &self.range_deletes);
        let partition_of = |table| {
            let version = inner.version.read();
            let t = version.table(table).ok()?;
            t.layout.partition().cloned()
        };
        let spill = || {
            crate::db::admit_spill(inner)?;
            spilled.spill(
                &inner.storage,
                || inner.next_run_id(),
                FilterChoice::quotient(inner.opts.filter_fp_rate),
                partition_of,
                writes,
                ranges,
            )
        };
        // A failed write or sync of its runs fails the store, as any failed write does.
        inner.guard_space(crate::db::commit_reclaiming(inner, spill, || true))?;
        self.writes = WriteSet::default();
        self.range_deletes.clear();
        self.write_bytes = 0;
        Ok(())
    }

    /// Begins a nested transaction (a savepoint): its writes become part of this one when it
    /// commits, and are undone, leaving this one's, when it aborts or is dropped.
    pub fn begin_nested(&mut self) -> Nested<'_, 'db> {
        let mark = self.undo.len();
        self.nesting += 1;
        Nested {
            txn: self,
            mark,
            done: false,
        }
    }

    /// Undoes the private writes made after the first `mark`.
    fn rollback_to(&mut self, mark: usize) {
        while self.undo.len() > mark {
            match self.undo.pop() {
                Some(Undo::Write((table, key), Some(v))) => {
                    self.writes.insert(table, key, v);
                }
                Some(Undo::Write((table, key), None)) => {
                    self.writes.remove(table, &key);
                }
                Some(Undo::RangeDelete) => {
                    self.range_deletes.pop();
                }
                None => break,
            }
        }
    }

    /// Commits with the store's default durability.
    pub fn commit(self) -> Result<()> {
        let durability = self.inner.opts.durability;
        self.commit_with(durability)
    }

    /// Applies the writes as one commit, if validation passes; else nothing is applied and
    /// the error ([`Error::Conflict`]) names a key that changed under the transaction.
    pub fn commit_with(mut self, durability: Durability) -> Result<()> {
        self.usable()?;
        if !self.spilled.is_empty() {
            return self.commit_spilled();
        }
        if self.writes.is_empty() && self.range_deletes.is_empty() {
            return Ok(());
        }
        // The writes still in `writes` came after the range deletes: a batch applies its
        // range deletes first.
        let batch = WriteBatch::from_parts(
            std::mem::take(&mut self.writes).into_writes(),
            std::mem::take(&mut self.range_deletes),
        );
        let snapshot = self.snapshot_seq();
        // The transaction ends in the commit's critical section, whatever the verdict: one
        // trip through the write lock, and its own commit is recorded only for the others.
        // A full store refuses it before that (then it may commit after a reclaim) or at
        // the log, after it.
        let ended = std::cell::Cell::new(false);
        let committer = Committer::Transaction {
            holds_locks: self.owner.is_some(),
        };
        let commit = || {
            let check = |oracle: &mut Oracle| {
                let verdict = self.validate(oracle, &batch, snapshot);
                self.end_in(oracle);
                ended.set(true);
                verdict
            };
            crate::db::commit_batch(
                &self.inner,
                &mut std::borrow::Cow::Borrowed(&batch),
                durability,
                committer,
                check,
            )
        };
        let committed = crate::db::commit_reclaiming(&self.inner, commit, || !ended.get());
        self.ended = ended.get();
        self.committed = committed.is_ok();
        committed
    }

    /// Commits a transaction that spilled: the rest of its writes are spilled too, and its
    /// private runs are linked into their tables as they are, in a checkpoint (durable when
    /// this returns, whatever the durability asked).
    fn commit_spilled(mut self) -> Result<()> {
        if !self.writes.is_empty() || !self.range_deletes.is_empty() {
            self.spill()?;
        }
        let snapshot = self.snapshot_seq();
        let runs = self.spilled.to_link();
        // A handle of its own: the locks are held while `self` changes.
        let inner = self.inner.clone();
        let _held = lock_spans(&inner, self.owner.is_some(), &runs)?;
        // As in `commit_with`: a full store refuses the link before validation ends the
        // transaction, and it may then commit after a reclaim.
        let ended = std::cell::Cell::new(false);
        let link = || {
            let check = |oracle: &mut Oracle| {
                let verdict = self.validate_spilled(oracle, snapshot);
                self.end_in(oracle);
                ended.set(true);
                verdict
            };
            crate::db::link_transaction(&self.inner, &runs, self.spilled.spills(), check)
        };
        let linked = crate::db::commit_reclaiming(&self.inner, link, || !ended.get());
        self.ended = ended.get();
        self.committed = linked.is_ok();
        if linked.is_ok() {
            // The tables hold the runs now; dropping these references frees nothing.
            self.spilled = Spilled::default();
        }
        linked
    }

    /// [`validate`](Self::validate) for a spilled transaction: its writes are in its runs, so
    /// the commits after its snapshot are looked up there (rather than the other way round).
    fn validate_spilled(&self, oracle: &Oracle, snapshot: u64) -> Result<()> {
        if self.owner.is_some() {
            return Ok(());
        }
        for ((table, key), seq) in oracle.writes_after(snapshot) {
            if self.spilled.get(*table, key)?.is_some() {
                return Err(self.conflict(*table, key, seq, "written", snapshot));
            }
        }
        for ((table, start, end), seq) in oracle.ranges_after(snapshot) {
            let mut mine = self
                .spilled
                .pairs(*table, Bound::Included(start), Bound::Excluded(end));
            if let Some(pair) = mine.next() {
                let (key, _) = pair?;
                return Err(self.conflict(*table, &key, seq, "written", snapshot));
            }
        }
        for (table, start, end) in self.spilled.to_link().iter().flat_map(|(t, runs)| {
            runs.iter().flat_map(move |(_, r)| {
                r.meta
                    .ranges
                    .iter()
                    .map(move |x| (*t, x.start.clone(), x.end.clone()))
            })
        }) {
            let (lo, hi) = (Bound::Included(start), Bound::Excluded(end));
            if let Some(((t, k), seq)) = oracle.range_written_after(table, &lo, &hi, snapshot) {
                return Err(self.conflict(t, &k, seq, "deleted by range", snapshot));
            }
        }
        self.validate_reads(oracle, snapshot)
    }

    fn conflict(
        &self,
        table: TableId,
        key: &[u8],
        seq: u64,
        what: &'static str,
        snapshot: u64,
    ) -> Error {
        Error::Conflict {
            table: self.inner.table_label(table),
            key: key.to_vec(),
            what,
            snapshot,
            commit: seq,
        }
    }

    /// Checks that nothing this transaction depends on was committed after its snapshot.
    /// (A locking transaction's locks exclude every conflict: nothing to check.)
    fn validate(&self, oracle: &Oracle, batch: &WriteBatch, snapshot: u64) -> Result<()> {
        if self.owner.is_some() || oracle.is_quiet() {
            return Ok(());
        }
        for (table, key, _) in &batch.ops {
            if let Some(seq) = oracle.written_after(&(*table, key.clone()), snapshot) {
                return Err(self.conflict(*table, key, seq, "written", snapshot));
            }
        }
        for (table, start, end) in &batch.ranges {
            let (lo, hi) = (Bound::Included(start.clone()), Bound::Excluded(end.clone()));
            if let Some(((t, k), seq)) = oracle.range_written_after(*table, &lo, &hi, snapshot) {
                return Err(self.conflict(t, &k, seq, "deleted by range", snapshot));
            }
        }
        self.validate_reads(oracle, snapshot)
    }

    /// What it read (serializable; any isolation for reads for update) and scanned
    /// (serializable) must not have changed after its snapshot.
    fn validate_reads(&self, oracle: &Oracle, snapshot: u64) -> Result<()> {
        for tk in &self.reads {
            if let Some(seq) = oracle.written_after(tk, snapshot) {
                return Err(self.conflict(tk.0, &tk.1, seq, "read", snapshot));
            }
        }
        for (table, lo, hi) in &self.ranges {
            if let Some(((t, k), seq)) = oracle.range_written_after(*table, lo, hi, snapshot) {
                return Err(self.conflict(t, &k, seq, "scanned", snapshot));
            }
        }
        Ok(())
    }

    /// Drops the private writes. Nothing was applied, so nothing is undone.
    pub fn abort(self) {}

    /// Tells the oracle this transaction is over (under the write lock).
    fn end_in(&self, oracle: &mut Oracle) {
        match self.owner {
            Some(_) => oracle.end_locking(),
            None => oracle.end(self.snapshot),
        }
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        self.spilled.discard();
        // An aborted transaction's chunks are named by nothing; a committed one's by the
        // tables (its pins go with `large`).
        let large = std::mem::replace(&mut self.large, Written::new(&self.inner));
        if !self.committed {
            large.discard(&self.inner);
        }
        if !self.ended {
            self.ended = true;
            self.end_in(&mut self.inner.write.lock().oracle);
        }
        // After the commit is visible (strict two-phase locking), or on abort.
        if let Some(owner) = self.owner {
            self.inner.locks.release_all(owner);
        }
    }
}

/// An optimistic transaction's linked commit may change any key of its runs' spans, and
/// a locking transaction that began meanwhile must not see that happen under its locks:
/// it takes exclusive locks on the spans and its range deletes (a locking transaction
/// holds locks on every key it wrote already).
fn lock_spans<'i>(
    inner: &'i Inner,
    locking: bool,
    runs: &crate::db::PrivateRuns,
) -> Result<Option<HeldLocks<'i>>> {
    if locking {
        return Ok(None);
    }
    let mut spans: Vec<Span> = Vec::new();
    for (table, list) in runs {
        for (_, run) in list {
            let blocks = run.blocks();
            if let (Some(first), Some(last)) = (blocks.first(), blocks.last()) {
                let (lo, hi) = (&first.first_key[..], &last.last_key[..]);
                spans.push((*table, Bound::Included(lo), Bound::Included(hi)));
            }
            spans.extend(run.meta.ranges.iter().map(|r| {
                (
                    *table,
                    Bound::Included(&r.start[..]),
                    Bound::Excluded(&r.end[..]),
                )
            }));
        }
    }
    lock_exclusive(inner, &spans, Vec::new()).map(Some)
}

/// A nested transaction: derefs to its parent [`Transaction`], so it reads and writes the
/// same way (its reads see the parent's writes). Dropping it without `commit` aborts it.
pub struct Nested<'t, 'db> {
    txn: &'t mut Transaction<'db>,
    mark: usize,
    done: bool,
}

impl Nested<'_, '_> {
    /// Makes this nested transaction's writes part of its parent's.
    pub fn commit(mut self) {
        self.done = true;
    }

    /// Undoes this nested transaction's writes, and only those.
    pub fn abort(self) {}
}

impl<'db> Deref for Nested<'_, 'db> {
    type Target = Transaction<'db>;

    fn deref(&self) -> &Transaction<'db> {
        self.txn
    }
}

impl DerefMut for Nested<'_, '_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.txn
    }
}

impl Drop for Nested<'_, '_> {
    fn drop(&mut self) {
        if !self.done {
            self.txn.rollback_to(self.mark);
        }
        self.txn.nesting -= 1;
        if self.txn.nesting == 0 {
            // Outside every savepoint nothing can be rolled back any more.
            self.txn.undo.clear();
        }
    }
}
