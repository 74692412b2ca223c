//! StitchDB through its own API.

use crate::engine::{err, Engine, Item, Reader, Result, Writer};
use std::ops::Bound;
use std::path::Path;
use stitchdb::{Db, Durability, Options, TableId, WriteBatch};

pub struct Stitch {
    db: Db,
    table: TableId,
}

impl Stitch {
    /// Default options: 4 MiB memtables, 64 MiB of cached run blocks, 1% filters. The data
    /// goes to a table of `layout` (`None`: the default table, a VT-tree).
    pub fn create(dir: &Path, layout: Option<&str>) -> Result<Stitch> {
        let db = Db::create(dir.join("store"), Options::default()).map_err(err)?;
        let table = match layout {
            Some(layout) => db.create_table_with_layout("bench", layout).map_err(err)?,
            None => db.default_table(),
        };
        Ok(Stitch { db, table })
    }
}

impl Engine for Stitch {
    fn writer(&self) -> Result<Box<dyn Writer + '_>> {
        Ok(Box::new(self))
    }
    fn reader(&self) -> Result<Box<dyn Reader + '_>> {
        Ok(Box::new(self))
    }
    fn durability(&self) -> &'static str {
        "synced: `Durability::Sync`; else `Async`"
    }
}

impl Writer for &Stitch {
    fn insert(&mut self, items: &[Item], sync: bool) -> Result<()> {
        let mut batch = WriteBatch::new();
        for (k, v) in items {
            batch.put(self.table, k.as_slice(), v.as_slice());
        }
        let durability = if sync {
            Durability::Sync
        } else {
            Durability::Async
        };
        self.db.write(&batch, durability).map_err(err)
    }
    fn remove(&mut self, keys: &[Vec<u8>]) -> Result<()> {
        let mut batch = WriteBatch::new();
        for k in keys {
            batch.delete(self.table, k.as_slice());
        }
        self.db.write(&batch, Durability::Sync).map_err(err)
    }
}

impl Reader for &Stitch {
    fn get(&mut self, key: &[u8]) -> Result<Option<usize>> {
        Ok(self.db.get(self.table, key).map_err(err)?.map(|v| v.len()))
    }
    fn scan(&mut self, start: &[u8], n: usize) -> Result<usize> {
        let iter = self
            .db
            .range(self.table, Bound::Included(start), Bound::Unbounded)
            .map_err(err)?;
        let mut count = 0;
        for entry in iter.take(n) {
            entry.map_err(err)?;
            count += 1;
        }
        Ok(count)
    }
}
