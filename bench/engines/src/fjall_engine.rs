//! fjall through its own API.

use crate::engine::{err, Engine, Item, Reader, Result, Writer};
use fjall::{Config, Keyspace, PartitionCreateOptions, PartitionHandle, PersistMode};
use std::path::Path;

pub struct Fjall {
    keyspace: Keyspace,
    items: PartitionHandle,
}

impl Fjall {
    /// fjall's defaults but a 64 MiB cache (StitchDB's).
    pub fn create(dir: &Path) -> Result<Fjall> {
        let keyspace = Config::new(dir.join("store"))
            .cache_size(64 << 20)
            .open()
            .map_err(err)?;
        let items = keyspace
            .open_partition("items", PartitionCreateOptions::default())
            .map_err(err)?;
        Ok(Fjall { keyspace, items })
    }

    fn persist(&self, sync: bool) -> Result<()> {
        if sync {
            self.keyspace.persist(PersistMode::SyncAll).map_err(err)?;
        }
        Ok(())
    }
}

impl Engine for Fjall {
    fn writer(&self) -> Result<Box<dyn Writer + '_>> {
        Ok(Box::new(self))
    }
    fn reader(&self) -> Result<Box<dyn Reader + '_>> {
        Ok(Box::new(self))
    }
    fn durability(&self) -> &'static str {
        "synced: `persist(PersistMode::SyncAll)` after the write; else journal buffered"
    }
}

impl Writer for &Fjall {
    fn insert(&mut self, items: &[Item], sync: bool) -> Result<()> {
        let mut batch = self.keyspace.batch();
        for (k, v) in items {
            batch.insert(&self.items, k.as_slice(), v.as_slice());
        }
        batch.commit().map_err(err)?;
        self.persist(sync)
    }
    fn remove(&mut self, keys: &[Vec<u8>]) -> Result<()> {
        let mut batch = self.keyspace.batch();
        for k in keys {
            batch.remove(&self.items, k.as_slice());
        }
        batch.commit().map_err(err)?;
        self.persist(true)
    }
}

impl Reader for &Fjall {
    fn get(&mut self, key: &[u8]) -> Result<Option<usize>> {
        Ok(self.items.get(key).map_err(err)?.map(|v| v.len()))
    }
    fn scan(&mut self, start: &[u8], n: usize) -> Result<usize> {
        let mut count = 0;
        for entry in self.items.range(start..).take(n) {
            entry.map_err(err)?;
            count += 1;
        }
        Ok(count)
    }
}
