//! LMDB through `heed`.

use crate::engine::{err, Engine, Item, Reader, Result, Writer};
use heed::types::Bytes;
use heed::{Database, Env, EnvOpenOptions};
use std::ops::Bound;
use std::path::Path;

pub struct Lmdb {
    env: Env,
    db: Database<Bytes, Bytes>,
}

impl Lmdb {
    /// LMDB's defaults (a commit syncs), an 8 GiB map.
    pub fn create(dir: &Path) -> Result<Lmdb> {
        let path = dir.join("store");
        std::fs::create_dir_all(&path).map_err(err)?;
        // SAFETY: heed's open is unsafe because the map must not be opened twice in one
        // process nor changed by others while open: this process opens it once, and the
        // directory is this run's own.
        #[allow(unsafe_code)]
        let env = unsafe {
            EnvOpenOptions::new()
                .map_size(8 << 30)
                .max_dbs(1)
                .open(&path)
        }
        .map_err(err)?;
        let mut txn = env.write_txn().map_err(err)?;
        let db = env.create_database(&mut txn, Some("items")).map_err(err)?;
        txn.commit().map_err(err)?;
        Ok(Lmdb { env, db })
    }
}

impl Engine for Lmdb {
    fn writer(&self) -> Result<Box<dyn Writer + '_>> {
        Ok(Box::new(self))
    }
    fn reader(&self) -> Result<Box<dyn Reader + '_>> {
        let txn = self.env.read_txn().map_err(err)?;
        Ok(Box::new(LmdbReader { txn, db: self.db }))
    }
    fn durability(&self) -> &'static str {
        "every commit synced (its default; it has no unsynced commit short of `NOSYNC` for the whole environment)"
    }
}

impl Writer for &Lmdb {
    fn insert(&mut self, items: &[Item], _sync: bool) -> Result<()> {
        let mut txn = self.env.write_txn().map_err(err)?;
        for (k, v) in items {
            self.db.put(&mut txn, k, v).map_err(err)?;
        }
        txn.commit().map_err(err)
    }
    fn remove(&mut self, keys: &[Vec<u8>]) -> Result<()> {
        let mut txn = self.env.write_txn().map_err(err)?;
        for k in keys {
            self.db.delete(&mut txn, k).map_err(err)?;
        }
        txn.commit().map_err(err)
    }
}

/// Reads through one read transaction.
struct LmdbReader<'e> {
    txn: heed::RoTxn<'e>,
    db: Database<Bytes, Bytes>,
}

impl Reader for LmdbReader<'_> {
    fn get(&mut self, key: &[u8]) -> Result<Option<usize>> {
        Ok(self.db.get(&self.txn, key).map_err(err)?.map(<[u8]>::len))
    }
    fn scan(&mut self, start: &[u8], n: usize) -> Result<usize> {
        let range = (Bound::Included(start), Bound::Unbounded);
        let mut count = 0;
        for entry in self.db.range(&self.txn, &range).map_err(err)?.take(n) {
            entry.map_err(err)?;
            count += 1;
        }
        Ok(count)
    }
}
