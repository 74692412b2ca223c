//! RocksDB through the `rocksdb` crate, linked against the release library
//! bench/build-rocksdb.sh built (see the README).

use crate::engine::{err, Engine, Item, Reader, Result, Writer};
use rocksdb::{BlockBasedOptions, Cache, DBCompressionType, Options, WriteBatch, WriteOptions, DB};
use std::path::Path;

pub struct Rocks {
    db: DB,
}

impl Rocks {
    /// RocksDB's defaults (64 MiB memtables, WAL on), no compression (StitchDB has none),
    /// a 64 MiB block cache and 10-bit Bloom filters (StitchDB's 64 MiB and 1% filters).
    pub fn create(dir: &Path) -> Result<Rocks> {
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&Cache::new_lru_cache(64 << 20));
        table.set_bloom_filter(10.0, false);
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.set_compression_type(DBCompressionType::None);
        opts.set_block_based_table_factory(&table);
        let db = DB::open(&opts, dir.join("store")).map_err(err)?;
        Ok(Rocks { db })
    }
}

impl Engine for Rocks {
    fn writer(&self) -> Result<Box<dyn Writer + '_>> {
        Ok(Box::new(self))
    }
    fn reader(&self) -> Result<Box<dyn Reader + '_>> {
        Ok(Box::new(self))
    }
    fn durability(&self) -> &'static str {
        "synced: `WriteOptions::set_sync(true)`; else WAL written, not synced"
    }
}

fn write_options(sync: bool) -> WriteOptions {
    let mut wo = WriteOptions::default();
    wo.set_sync(sync);
    wo
}

impl Writer for &Rocks {
    fn insert(&mut self, items: &[Item], sync: bool) -> Result<()> {
        let mut batch = WriteBatch::default();
        for (k, v) in items {
            batch.put(k, v);
        }
        self.db.write_opt(batch, &write_options(sync)).map_err(err)
    }
    fn remove(&mut self, keys: &[Vec<u8>]) -> Result<()> {
        let mut batch = WriteBatch::default();
        for k in keys {
            batch.delete(k);
        }
        self.db.write_opt(batch, &write_options(true)).map_err(err)
    }
}

impl Reader for &Rocks {
    fn get(&mut self, key: &[u8]) -> Result<Option<usize>> {
        Ok(self.db.get_pinned(key).map_err(err)?.map(|v| v.len()))
    }
    fn scan(&mut self, start: &[u8], n: usize) -> Result<usize> {
        let mut iter = self.db.raw_iterator();
        iter.seek(start);
        let mut count = 0;
        while count < n && iter.valid() {
            count += 1;
            iter.next();
        }
        iter.status().map_err(err)?;
        Ok(count)
    }
}
