//! redb through its own API.

use crate::engine::{err, Engine, Item, Reader, Result, Writer};
use redb::{Database, Durability, ReadOnlyTable, TableDefinition};
use std::path::Path;

const ITEMS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("items");

pub struct Redb {
    db: Database,
}

impl Redb {
    /// redb's defaults but a 64 MiB cache (StitchDB's).
    pub fn create(dir: &Path) -> Result<Redb> {
        let db = redb::Builder::new()
            .set_cache_size(64 << 20)
            .create(dir.join("store"))
            .map_err(err)?;
        let txn = db.begin_write().map_err(err)?;
        txn.open_table(ITEMS).map_err(err)?;
        txn.commit().map_err(err)?;
        Ok(Redb { db })
    }

    fn write(
        &self,
        sync: bool,
        f: impl FnOnce(&mut redb::Table<&[u8], &[u8]>) -> Result<()>,
    ) -> Result<()> {
        let mut txn = self.db.begin_write().map_err(err)?;
        txn.set_durability(if sync {
            Durability::Immediate
        } else {
            Durability::None
        });
        {
            let mut table = txn.open_table(ITEMS).map_err(err)?;
            f(&mut table)?;
        }
        txn.commit().map_err(err)
    }
}

impl Engine for Redb {
    fn writer(&self) -> Result<Box<dyn Writer + '_>> {
        Ok(Box::new(self))
    }
    fn reader(&self) -> Result<Box<dyn Reader + '_>> {
        let txn = self.db.begin_read().map_err(err)?;
        let table = txn.open_table(ITEMS).map_err(err)?;
        Ok(Box::new(RedbReader { table }))
    }
    fn durability(&self) -> &'static str {
        "synced: `Durability::Immediate` (its default); else `Durability::None`"
    }
}

impl Writer for &Redb {
    fn insert(&mut self, items: &[Item], sync: bool) -> Result<()> {
        self.write(sync, |table| {
            for (k, v) in items {
                table.insert(k.as_slice(), v.as_slice()).map_err(err)?;
            }
            Ok(())
        })
    }
    fn remove(&mut self, keys: &[Vec<u8>]) -> Result<()> {
        self.write(true, |table| {
            for k in keys {
                table.remove(k.as_slice()).map_err(err)?;
            }
            Ok(())
        })
    }
}

/// Reads through one read transaction, as redb's own benchmark does.
struct RedbReader {
    table: ReadOnlyTable<&'static [u8], &'static [u8]>,
}

impl Reader for RedbReader {
    fn get(&mut self, key: &[u8]) -> Result<Option<usize>> {
        Ok(self.table.get(key).map_err(err)?.map(|v| v.value().len()))
    }
    fn scan(&mut self, start: &[u8], n: usize) -> Result<usize> {
        let mut count = 0;
        for entry in self.table.range::<&[u8]>(start..).map_err(err)?.take(n) {
            entry.map_err(err)?;
            count += 1;
        }
        Ok(count)
    }
}
