//! What a file system operation reads and writes through: the [`Kv`] trait, and its
//! implementations: [`Batch`] reads the store and collects one operation's writes into one
//! atomic write (a commit); a [`Transaction`] reads its snapshot and keeps its writes
//! private until it commits; a [`Snapshot`] only reads (its writes fail with `EROFS`).

use crate::cache::{Key, Lookup, MetaCache, Range};
use crate::error::{FsError, FsResult};
use std::collections::BTreeMap;
use std::ops::Bound;
use stitchdb::{Db, Durability, Snapshot, TableId, Transaction, WriteBatch};

/// Reads and writes of one file system operation.
pub trait Kv {
    /// The value of `key`, seeing this operation's own writes.
    fn get(&mut self, table: TableId, key: &[u8]) -> FsResult<Option<Vec<u8>>>;
    /// Up to `limit` pairs with `start <= key < end`, in key order, seeing this operation's
    /// own writes.
    fn scan(
        &mut self,
        table: TableId,
        start: &[u8],
        end: &[u8],
        limit: usize,
    ) -> FsResult<Vec<(Vec<u8>, Vec<u8>)>>;
    /// Sets `key` to `value` (a transaction's write fails when spilling its writes fails).
    fn put(&mut self, table: TableId, key: &[u8], value: Vec<u8>) -> FsResult<()>;
    /// Removes `key`.
    fn delete(&mut self, table: TableId, key: &[u8]) -> FsResult<()>;
    /// Removes every key in `[start, end)`.
    fn delete_range(&mut self, table: TableId, start: &[u8], end: &[u8]) -> FsResult<()>;
}

impl<K: Kv + ?Sized> Kv for &mut K {
    fn get(&mut self, table: TableId, key: &[u8]) -> FsResult<Option<Vec<u8>>> {
        (**self).get(table, key)
    }
    fn scan(
        &mut self,
        table: TableId,
        start: &[u8],
        end: &[u8],
        limit: usize,
    ) -> FsResult<Vec<(Vec<u8>, Vec<u8>)>> {
        (**self).scan(table, start, end, limit)
    }
    fn put(&mut self, table: TableId, key: &[u8], value: Vec<u8>) -> FsResult<()> {
        (**self).put(table, key, value)
    }
    fn delete(&mut self, table: TableId, key: &[u8]) -> FsResult<()> {
        (**self).delete(table, key)
    }
    fn delete_range(&mut self, table: TableId, start: &[u8], end: &[u8]) -> FsResult<()> {
        (**self).delete_range(table, start, end)
    }
}

/// One operation's writes kept aside, in front of whatever it reads: range deletes, and
/// point writes after them (`None`: deleted).
#[derive(Default)]
pub(crate) struct Writes {
    pub(crate) points: BTreeMap<Key, Option<Vec<u8>>>,
    pub(crate) ranges: Vec<Range>,
}

impl Writes {
    fn is_empty(&self) -> bool {
        self.points.is_empty() && self.ranges.is_empty()
    }

    /// What these writes say of `key`: `Some` if they wrote it or deleted a range over it.
    fn own(&self, table: TableId, key: &[u8]) -> Option<Option<Vec<u8>>> {
        if let Some(v) = self.points.get(&(table, key.to_vec())) {
            return Some(v.clone());
        }
        self.range_deleted(table, key).then_some(None)
    }

    fn range_deleted(&self, table: TableId, key: &[u8]) -> bool {
        self.ranges
            .iter()
            .any(|(t, s, e)| *t == table && s.as_slice() <= key && key < e.as_slice())
    }

    /// Up to `limit` pairs of `[start, end)`: those of the store's iterator `range` opens
    /// over it (in key order), under these writes.
    fn scan<'k, I>(
        &self,
        table: TableId,
        (start, end): (&'k [u8], &'k [u8]),
        limit: usize,
        range: impl FnOnce(Bound<&'k [u8]>, Bound<&'k [u8]>) -> stitchdb::Result<I>,
    ) -> FsResult<Vec<(Vec<u8>, Vec<u8>)>>
    where
        I: Iterator<Item = stitchdb::Result<(Vec<u8>, Vec<u8>)>>,
    {
        let mut out = Vec::new();
        if start >= end || limit == 0 {
            return Ok(out);
        }
        let store = range(Bound::Included(start), Bound::Excluded(end))?;
        let lo = (table, start.to_vec());
        let hi = (table, end.to_vec());
        let mut own = self
            .points
            .range((Bound::Included(&lo), Bound::Excluded(&hi)))
            .peekable();
        let mut store = store.peekable();
        while out.len() < limit {
            if let Some(Err(_)) = store.peek() {
                if let Some(Err(e)) = store.next() {
                    return Err(e.into());
                }
            }
            let store_key = store.peek().and_then(|r| r.as_ref().ok()).map(|(k, _)| k);
            let own_key = own.peek().map(|((_, k), _)| k);
            // Which source holds the smaller key; on a tie this operation's write wins.
            let from_store = match (store_key, own_key) {
                (None, None) => break,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(sk), Some(ok)) => {
                    if sk == ok {
                        store.next();
                        false
                    } else {
                        sk < ok
                    }
                }
            };
            if from_store {
                if let Some(Ok((k, v))) = store.next() {
                    if !self.range_deleted(table, &k) {
                        out.push((k, v));
                    }
                }
            } else if let Some(((_, k), Some(v))) = own.next() {
                out.push((k.clone(), v.clone()));
            }
        }
        Ok(out)
    }

    fn put(&mut self, table: TableId, key: &[u8], value: Option<Vec<u8>>) {
        self.points.insert((table, key.to_vec()), value);
    }

    fn delete_range(&mut self, table: TableId, start: &[u8], end: &[u8]) {
        if start >= end {
            return;
        }
        let lo = (table, start.to_vec());
        let hi = (table, end.to_vec());
        let inside: Vec<_> = self
            .points
            .range((Bound::Included(&lo), Bound::Excluded(&hi)))
            .map(|(k, _)| k.clone())
            .collect();
        for k in inside {
            self.points.remove(&k);
        }
        self.ranges.push((table, start.to_vec(), end.to_vec()));
    }
}

/// Implements the writes of [`Kv`] by keeping them in `self.w`.
macro_rules! kept_writes {
    () => {
        fn put(&mut self, table: TableId, key: &[u8], value: Vec<u8>) -> FsResult<()> {
            self.w.put(table, key, Some(value));
            Ok(())
        }

        fn delete(&mut self, table: TableId, key: &[u8]) -> FsResult<()> {
            self.w.put(table, key, None);
            Ok(())
        }

        fn delete_range(&mut self, table: TableId, start: &[u8], end: &[u8]) -> FsResult<()> {
            self.w.delete_range(table, start, end);
            Ok(())
        }
    };
}

/// An operation's writes over a store: reads see the store and the writes so far; `commit`
/// applies them all as one atomic write.
pub struct Batch<'db> {
    db: &'db Db,
    /// Where reads of the cached tables look first.
    cache: Option<&'db MetaCache>,
    w: Writes,
}

impl<'db> Batch<'db> {
    /// An empty operation over `db`.
    pub fn new(db: &'db Db) -> Self {
        Batch {
            db,
            cache: None,
            w: Writes::default(),
        }
    }

    /// An empty operation over `db` and its metadata cache.
    pub(crate) fn cached(db: &'db Db, cache: &'db MetaCache) -> Self {
        Batch {
            cache: Some(cache),
            ..Batch::new(db)
        }
    }

    /// Whether the operation wrote nothing.
    pub fn is_empty(&self) -> bool {
        self.w.is_empty()
    }

    /// Applies the writes as one commit with `durability`.
    pub fn commit(self, durability: Durability) -> FsResult<()> {
        if self.is_empty() {
            return Ok(());
        }
        let mut b = WriteBatch::new();
        for (t, s, e) in self.w.ranges {
            b.delete_range(t, s, e);
        }
        for ((t, k), v) in self.w.points {
            match v {
                Some(v) => b.put(t, k, v),
                None => b.delete(t, k),
            }
        }
        // The metadata cache learns of it from the store, as of every commit.
        crate::observe::own_commit(|| self.db.write_owned(b, durability))?;
        Ok(())
    }
}

impl Kv for Batch<'_> {
    fn get(&mut self, table: TableId, key: &[u8]) -> FsResult<Option<Vec<u8>>> {
        if let Some(v) = self.w.own(table, key) {
            return Ok(v);
        }
        match self.cache.filter(|c| c.holds(table)) {
            None => Ok(self.db.get(table, key)?),
            Some(cache) => match cache.get(table, key) {
                Lookup::Hit(v) => Ok(v),
                Lookup::Miss(generation) => {
                    let v = self.db.get(table, key)?;
                    cache.fill(generation, table, key, &v);
                    Ok(v)
                }
            },
        }
    }

    fn scan(
        &mut self,
        table: TableId,
        start: &[u8],
        end: &[u8],
        limit: usize,
    ) -> FsResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let db = self.db;
        self.w
            .scan(table, (start, end), limit, |lo, hi| db.range(table, lo, hi))
    }

    kept_writes!();
}

impl Kv for Transaction<'_> {
    fn get(&mut self, table: TableId, key: &[u8]) -> FsResult<Option<Vec<u8>>> {
        Ok(Transaction::get(self, table, key)?)
    }

    fn scan(
        &mut self,
        table: TableId,
        start: &[u8],
        end: &[u8],
        limit: usize,
    ) -> FsResult<Vec<(Vec<u8>, Vec<u8>)>> {
        // The transaction's iterator sees its own writes already: nothing goes in front.
        Writes::default().scan(table, (start, end), limit, |lo, hi| {
            self.range(table, lo, hi)
        })
    }

    fn put(&mut self, table: TableId, key: &[u8], value: Vec<u8>) -> FsResult<()> {
        Ok(Transaction::put(self, table, key, value)?)
    }

    fn delete(&mut self, table: TableId, key: &[u8]) -> FsResult<()> {
        Ok(Transaction::delete(self, table, key)?)
    }

    fn delete_range(&mut self, table: TableId, start: &[u8], end: &[u8]) -> FsResult<()> {
        Ok(Transaction::delete_range(self, table, start, end)?)
    }
}

/// A snapshot reads as it was taken; every write fails with `EROFS`.
impl Kv for &Snapshot {
    fn get(&mut self, table: TableId, key: &[u8]) -> FsResult<Option<Vec<u8>>> {
        Ok(Snapshot::get(self, table, key)?)
    }

    fn scan(
        &mut self,
        table: TableId,
        start: &[u8],
        end: &[u8],
        limit: usize,
    ) -> FsResult<Vec<(Vec<u8>, Vec<u8>)>> {
        // A snapshot writes nothing: nothing goes in front of what it holds.
        Writes::default().scan(table, (start, end), limit, |lo, hi| {
            self.range(table, lo, hi)
        })
    }

    fn put(&mut self, _: TableId, _: &[u8], _: Vec<u8>) -> FsResult<()> {
        Err(FsError::Errno(libc::EROFS))
    }

    fn delete(&mut self, _: TableId, _: &[u8]) -> FsResult<()> {
        Err(FsError::Errno(libc::EROFS))
    }

    fn delete_range(&mut self, _: TableId, _: &[u8], _: &[u8]) -> FsResult<()> {
        Err(FsError::Errno(libc::EROFS))
    }
}
/// One operation inside a transaction: its writes are kept aside until it succeeds
/// ([`TxnOp::into_writes`]), so a failed operation leaves the transaction as it was.
pub(crate) struct TxnOp<'t, 'db> {
    pub(crate) txn: &'t mut Transaction<'db>,
    w: Writes,
}

impl<'t, 'db> TxnOp<'t, 'db> {
    pub(crate) fn new(txn: &'t mut Transaction<'db>) -> Self {
        TxnOp {
            txn,
            w: Writes::default(),
        }
    }

    /// The operation's writes: range deletes, then point writes.
    pub(crate) fn into_writes(self) -> (Vec<Range>, BTreeMap<Key, Option<Vec<u8>>>) {
        (self.w.ranges, self.w.points)
    }
}

impl Kv for TxnOp<'_, '_> {
    fn get(&mut self, table: TableId, key: &[u8]) -> FsResult<Option<Vec<u8>>> {
        match self.w.own(table, key) {
            Some(v) => Ok(v),
            None => Ok(self.txn.get(table, key)?),
        }
    }

    fn scan(
        &mut self,
        table: TableId,
        start: &[u8],
        end: &[u8],
        limit: usize,
    ) -> FsResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let txn = &mut *self.txn;
        self.w.scan(table, (start, end), limit, |lo, hi| {
            txn.range(table, lo, hi)
        })
    }

    kept_writes!();
}
