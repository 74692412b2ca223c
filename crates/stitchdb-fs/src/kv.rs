//! What a file system operation reads and writes through: the [`Kv`] trait, and [`Batch`],
//! its implementation that reads the store and collects the operation's writes into one
//! atomic write (a commit). A transaction can implement the same trait, so the operations in
//! `ops` run unchanged inside a transaction.

use crate::cache::{Key, Lookup, MetaCache, Range};
use crate::error::FsResult;
use std::collections::BTreeMap;
use std::ops::Bound;
use stitchdb::{Db, Durability, TableId, WriteBatch};

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
    /// Sets `key` to `value`.
    fn put(&mut self, table: TableId, key: &[u8], value: Vec<u8>);
    /// Removes `key`.
    fn delete(&mut self, table: TableId, key: &[u8]);
    /// Removes every key in `[start, end)`.
    fn delete_range(&mut self, table: TableId, start: &[u8], end: &[u8]);
}

/// An operation's writes over a store: reads see the store and the writes so far; `commit`
/// applies them all as one atomic write.
pub struct Batch<'db> {
    db: &'db Db,
    /// Where reads of the cached tables look first, and commits put what they wrote.
    cache: Option<&'db MetaCache>,
    /// Point writes (`None`: deleted) after the range deletes.
    writes: BTreeMap<Key, Option<Vec<u8>>>,
    /// Range deletes, applied before the point writes.
    ranges: Vec<Range>,
}

impl<'db> Batch<'db> {
    /// An empty operation over `db`.
    pub fn new(db: &'db Db) -> Self {
        Batch {
            db,
            cache: None,
            writes: BTreeMap::new(),
            ranges: Vec::new(),
        }
    }

    /// An empty operation over `db` and its metadata cache: every commit to the tables
    /// `cache` holds must go through a batch over it.
    pub(crate) fn cached(db: &'db Db, cache: &'db MetaCache) -> Self {
        Batch {
            cache: Some(cache),
            ..Batch::new(db)
        }
    }

    /// Whether the operation wrote nothing.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.ranges.is_empty()
    }

    /// Applies the writes as one commit with `durability`.
    pub fn commit(self, durability: Durability) -> FsResult<()> {
        if self.is_empty() {
            return Ok(());
        }
        let mut b = WriteBatch::new();
        for (t, s, e) in &self.ranges {
            b.delete_range(*t, s.clone(), e.clone());
        }
        // The writes of the cached tables, kept for the cache once the commit is written.
        let mut cached = Vec::new();
        for ((t, k), v) in self.writes {
            if self.cache.is_some_and(|c| c.holds(t)) {
                cached.push(((t, k.clone()), v.clone()));
            }
            match v {
                Some(v) => b.put(t, k, v),
                None => b.delete(t, k),
            }
        }
        let Some(cache) = self.cache else {
            self.db.write_owned(b, durability)?;
            return Ok(());
        };
        cache.begin_commit();
        match self.db.write_owned(b, durability) {
            Ok(_) => {
                cache.commit_written(&self.ranges, cached);
                Ok(())
            }
            Err(e) => {
                cache.commit_failed();
                Err(e.into())
            }
        }
    }

    fn range_deleted(&self, table: TableId, key: &[u8]) -> bool {
        self.ranges
            .iter()
            .any(|(t, s, e)| *t == table && s.as_slice() <= key && key < e.as_slice())
    }
}

impl Kv for Batch<'_> {
    fn get(&mut self, table: TableId, key: &[u8]) -> FsResult<Option<Vec<u8>>> {
        if let Some(v) = self.writes.get(&(table, key.to_vec())) {
            return Ok(v.clone());
        }
        if self.range_deleted(table, key) {
            return Ok(None);
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
        let mut out = Vec::new();
        if start >= end || limit == 0 {
            return Ok(out);
        }
        let lo = (table, start.to_vec());
        let hi = (table, end.to_vec());
        let mut own = self
            .writes
            .range((Bound::Included(&lo), Bound::Excluded(&hi)))
            .peekable();
        let mut store = self
            .db
            .range(table, Bound::Included(start), Bound::Excluded(end))?
            .peekable();
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

    fn put(&mut self, table: TableId, key: &[u8], value: Vec<u8>) {
        self.writes.insert((table, key.to_vec()), Some(value));
    }

    fn delete(&mut self, table: TableId, key: &[u8]) {
        self.writes.insert((table, key.to_vec()), None);
    }

    fn delete_range(&mut self, table: TableId, start: &[u8], end: &[u8]) {
        if start >= end {
            return;
        }
        let lo = (table, start.to_vec());
        let hi = (table, end.to_vec());
        let inside: Vec<_> = self
            .writes
            .range((Bound::Included(&lo), Bound::Excluded(&hi)))
            .map(|(k, _)| k.clone())
            .collect();
        for k in inside {
            self.writes.remove(&k);
        }
        self.ranges.push((table, start.to_vec(), end.to_vec()));
    }
}
