//! SQLite through `rusqlite` (SQLite compiled in: the `bundled` feature).

use crate::engine::{err, Engine, Item, Reader, Result, Writer};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub struct Sqlite {
    path: PathBuf,
}

impl Sqlite {
    /// WAL mode; a 64 MiB page cache per connection (StitchDB's cache); one table
    /// `items(k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID`, a B-tree on the key as the others.
    pub fn create(dir: &Path) -> Result<Sqlite> {
        let sqlite = Sqlite {
            path: dir.join("store.sqlite"),
        };
        let conn = sqlite.connect()?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(err)?;
        conn.execute_batch(
            "CREATE TABLE items (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID",
        )
        .map_err(err)?;
        Ok(sqlite)
    }

    /// A connection per thread (a `Connection` is not shared between threads).
    fn connect(&self) -> Result<Connection> {
        let conn = Connection::open(&self.path).map_err(err)?;
        conn.busy_timeout(Duration::from_secs(600)).map_err(err)?;
        conn.pragma_update(None, "cache_size", -65536)
            .map_err(err)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(err)?;
        Ok(conn)
    }
}

impl Engine for Sqlite {
    fn writer(&self) -> Result<Box<dyn Writer + '_>> {
        Ok(Box::new(SqliteWriter {
            conn: self.connect()?,
            synced: true,
        }))
    }
    fn reader(&self) -> Result<Box<dyn Reader + '_>> {
        let conn = self.connect()?;
        // One read transaction per reader, as for redb and LMDB.
        conn.execute_batch("BEGIN").map_err(err)?;
        Ok(Box::new(SqliteReader { conn }))
    }
    fn durability(&self) -> &'static str {
        "WAL mode; synced: `synchronous=FULL`; else `synchronous=NORMAL` (WAL written, not synced)"
    }
}

struct SqliteWriter {
    conn: Connection,
    /// Whether the connection is at `synchronous=FULL` (else NORMAL).
    synced: bool,
}

impl SqliteWriter {
    fn set_sync(&mut self, sync: bool) -> Result<()> {
        if sync != self.synced {
            let level = if sync { "FULL" } else { "NORMAL" };
            self.conn
                .pragma_update(None, "synchronous", level)
                .map_err(err)?;
            self.synced = sync;
        }
        Ok(())
    }
}

impl Writer for SqliteWriter {
    fn insert(&mut self, items: &[Item], sync: bool) -> Result<()> {
        self.set_sync(sync)?;
        let txn = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        {
            let mut insert = txn
                .prepare_cached("INSERT OR REPLACE INTO items (k, v) VALUES (?1, ?2)")
                .map_err(err)?;
            for (k, v) in items {
                insert.execute(params![k, v]).map_err(err)?;
            }
        }
        txn.commit().map_err(err)
    }
    fn remove(&mut self, keys: &[Vec<u8>]) -> Result<()> {
        self.set_sync(true)?;
        let txn = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        {
            let mut delete = txn
                .prepare_cached("DELETE FROM items WHERE k = ?1")
                .map_err(err)?;
            for k in keys {
                delete.execute(params![k]).map_err(err)?;
            }
        }
        txn.commit().map_err(err)
    }
}

struct SqliteReader {
    conn: Connection,
}

impl Reader for SqliteReader {
    fn get(&mut self, key: &[u8]) -> Result<Option<usize>> {
        let mut get = self
            .conn
            .prepare_cached("SELECT length(v) FROM items WHERE k = ?1")
            .map_err(err)?;
        get.query_row(params![key], |row| row.get::<_, i64>(0))
            .optional()
            .map_err(err)
            .map(|len| len.map(|len| len as usize))
    }
    fn scan(&mut self, start: &[u8], n: usize) -> Result<usize> {
        let mut scan = self
            .conn
            .prepare_cached("SELECT length(v) FROM items WHERE k >= ?1 ORDER BY k LIMIT ?2")
            .map_err(err)?;
        let mut rows = scan.query(params![start, n as i64]).map_err(err)?;
        let mut count = 0;
        while rows.next().map_err(err)?.is_some() {
            count += 1;
        }
        Ok(count)
    }
}
