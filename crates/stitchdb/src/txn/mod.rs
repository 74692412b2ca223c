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
mod locks;
mod oracle;
mod spill;
mod write_set;

pub use iter::TxnIter;
pub(crate) use oracle::Oracle;

use crate::batch::{RangeOp, TableId, WriteBatch};
use crate::db::{get_at, scan_at, Db, ReaderGuard};
use crate::memtable::Value;
use crate::options::Durability;
use crate::range_del::{within, within_any};
use crate::{Error, Result};
use oracle::TableKey;
use spill::Spilled;
use std::collections::BTreeSet;
use std::ops::{Bound, Deref, DerefMut};
use write_set::WriteSet;

/// How a transaction is isolated from concurrent ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Reads see the snapshot taken at begin; concurrent writes of the same key conflict.
    Snapshot,
    /// As if transactions ran one at a time, in commit order.
    Serializable,
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
pub struct Transaction<'db> {
    db: &'db Db,
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
    /// Serializable only: keys read from the snapshot, and ranges scanned.
    reads: BTreeSet<TableKey>,
    ranges: Vec<ScannedRange>,
    ended: bool,
}

impl Db {
    /// Begins a transaction over any number of tables.
    pub fn begin(&self, isolation: Isolation) -> Result<Transaction<'_>> {
        let inner = self.shared();
        if inner.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(Error::Closed);
        }
        // Under the write lock, so the snapshot and the oracle's record of later commits
        // begin at the same commit.
        let mut w = inner.write.lock();
        let snapshot = inner.visible_seq.load(std::sync::atomic::Ordering::Acquire);
        w.oracle.begin(snapshot);
        drop(w);
        Ok(Transaction {
            db: self,
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
            ended: false,
        })
    }
}

impl<'db> Transaction<'db> {
    pub fn isolation(&self) -> Isolation {
        self.isolation
    }

    /// The sequence number of the newest commit this transaction sees.
    pub fn snapshot_seq(&self) -> u64 {
        self.snapshot
    }

    /// The value of `key`: this transaction's own write if it made one, else the snapshot's.
    pub fn get(&mut self, table: TableId, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let key = key.as_ref();
        if let Some(v) = self.writes.get(table, key) {
            return Ok(v.clone());
        }
        if self.deleted_by_range(table, key) {
            return Ok(None);
        }
        if let Some(value) = self.spilled.get(table, key)? {
            return Ok(value);
        }
        let value = get_at(self.db.shared(), table, key, self.snapshot_seq())?;
        if self.isolation == Isolation::Serializable {
            self.reads.insert((table, key.to_vec()));
        }
        Ok(value)
    }

    /// The pairs with keys in `(start, end)` in key order: the snapshot's, with this
    /// transaction's own writes in place.
    pub fn range(
        &mut self,
        table: TableId,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
    ) -> Result<TxnIter> {
        // The scan may outlive the transaction: it keeps the snapshot registered itself.
        let guard = ReaderGuard::at(self.db.shared(), self.snapshot);
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
        Ok(TxnIter::new(store, own, Box::new(spilled), hidden))
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
        let (start, end) = (start.as_ref(), end.as_ref());
        self.db.check_write(table, start, None)?;
        self.db.check_write(table, end, None)?;
        if start >= end {
            return Ok(());
        }
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
        Ok(())
    }

    pub fn put(
        &mut self,
        table: TableId,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        self.write(table, key.as_ref(), Some(value.as_ref().to_vec()))
    }

    pub fn delete(&mut self, table: TableId, key: impl AsRef<[u8]>) -> Result<()> {
        self.write(table, key.as_ref(), None)
    }

    fn write(&mut self, table: TableId, key: &[u8], value: Value) -> Result<()> {
        self.db.check_write(table, key, value.as_deref())?;
        self.write_bytes += key.len() + value.as_ref().map_or(0, Vec::len) + WRITE_OVERHEAD;
        let before = self.writes.insert(table, key.to_vec(), value);
        if self.nesting > 0 {
            self.undo.push(Undo::Write((table, key.to_vec()), before));
        }
        self.spill_if_full()
    }

    /// Writes the private writes out as private runs once they pass the memory budget
    /// (not inside a nested transaction: what it may undo stays in memory).
    fn spill_if_full(&mut self) -> Result<()> {
        let inner = self.db.shared();
        if self.write_bytes <= inner.opts.txn_memory || self.nesting > 0 {
            return Ok(());
        }
        self.spill()
    }

    fn spill(&mut self) -> Result<()> {
        let inner = self.db.shared();
        inner.check_writable()?;
        self.spilled.spill(
            &inner.storage,
            || inner.next_run_id(),
            inner.opts.filter_fp_rate,
            &self.writes,
            &self.range_deletes,
        )?;
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
        let durability = self.db.shared().opts.durability;
        self.commit_with(durability)
    }

    /// Applies the writes as one commit, if validation passes; else nothing is applied and
    /// the error ([`Error::Conflict`]) names a key that changed under the transaction.
    pub fn commit_with(mut self, durability: Durability) -> Result<()> {
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
        let ended = std::cell::Cell::new(false);
        let check = |oracle: &mut Oracle| {
            let verdict = self.validate(oracle, &batch, snapshot);
            oracle.end(snapshot);
            ended.set(true);
            verdict
        };
        let committed = crate::db::commit_batch(self.db.shared(), &batch, durability, false, check);
        self.ended = ended.get();
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
        let ended = std::cell::Cell::new(false);
        let check = |oracle: &mut Oracle| {
            let verdict = self.validate_spilled(oracle, snapshot);
            oracle.end(snapshot);
            ended.set(true);
            verdict
        };
        let linked =
            crate::db::link_transaction(self.db.shared(), &runs, self.spilled.spills(), check);
        self.ended = ended.get();
        if linked.is_ok() {
            // The tables hold the runs now; dropping these references frees nothing.
            self.spilled = Spilled::default();
        }
        linked
    }

    /// [`validate`](Self::validate) for a spilled transaction: its writes are in its runs, so
    /// the commits after its snapshot are looked up there (rather than the other way round).
    fn validate_spilled(&self, oracle: &Oracle, snapshot: u64) -> Result<()> {
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
            table: self
                .db
                .table_name(table)
                .unwrap_or_else(|_| format!("#{}", table.0)),
            key: key.to_vec(),
            what,
            snapshot,
            commit: seq,
        }
    }

    /// Checks that nothing this transaction depends on was committed after its snapshot.
    fn validate(&self, oracle: &Oracle, batch: &WriteBatch, snapshot: u64) -> Result<()> {
        if oracle.is_quiet() {
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

    /// Serializable only (the sets are empty otherwise): what it read and scanned must not
    /// have changed after its snapshot.
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
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        self.spilled.discard();
        if !self.ended {
            self.ended = true;
            self.db
                .shared()
                .write
                .lock()
                .oracle
                .end(self.snapshot_seq());
        }
    }
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
