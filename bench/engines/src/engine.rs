//! What every engine offers the workloads: writers and readers, each used by one thread.

/// A key and its value.
pub type Item = (Vec<u8>, Vec<u8>);

pub type Result<T> = std::result::Result<T, String>;

/// Turns any engine's error into the message the run reports.
pub fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// An open store. Shared by the worker threads of a workload.
pub trait Engine: Sync {
    /// A writer for one thread.
    fn writer(&self) -> Result<Box<dyn Writer + '_>>;
    /// A reader for one thread. Engines with read transactions (redb, LMDB, SQLite) read
    /// through one transaction per reader, as their own benchmarks do.
    fn reader(&self) -> Result<Box<dyn Reader + '_>>;
    /// What "synced" means for this engine's writes, for the table.
    fn durability(&self) -> &'static str;
}

pub trait Writer {
    /// Inserts `items` atomically (one batch or transaction); with `sync`, durable (survives
    /// power loss) when it returns.
    fn insert(&mut self, items: &[Item], sync: bool) -> Result<()>;
    /// Removes `keys` atomically, durable when it returns.
    fn remove(&mut self, keys: &[Vec<u8>]) -> Result<()>;
}

pub trait Reader {
    /// The value's length, if the key is present.
    fn get(&mut self, key: &[u8]) -> Result<Option<usize>>;
    /// Reads up to `n` entries from `start` on; returns how many there were.
    fn scan(&mut self, start: &[u8], n: usize) -> Result<usize>;
}
