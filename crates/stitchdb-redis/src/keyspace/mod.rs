//! Redis's databases over a StitchDB store: each database is three tables (`redis.N.keys`,
//! `redis.N.members`, `redis.N.expires`; see [`encoding`]), created when first used. A
//! command reads and writes them through a [`Ctx`], which holds its engine transaction.

pub mod ctx;
pub mod cursors;
pub mod encoding;
pub mod expire;
pub mod locks;
pub mod pending;
pub mod ready;
pub mod watch;

pub use ctx::{Ctx, KsError, KsResult, Outcome};

use parking_lot::{Mutex, RwLock};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use stitchdb::{Db, Snapshot, TableId};

/// One database's tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DbTables {
    /// Metadata records, one per key.
    pub keys: TableId,
    /// Collections' members.
    pub members: TableId,
    /// The expiry index.
    pub expires: TableId,
}

/// Which of a database's tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// See [`DbTables::keys`].
    Keys,
    /// See [`DbTables::members`].
    Members,
    /// See [`DbTables::expires`].
    Expires,
}

impl DbTables {
    /// The id of `table`.
    pub fn id(&self, table: Table) -> TableId {
        match table {
            Table::Keys => self.keys,
            Table::Members => self.members,
            Table::Expires => self.expires,
        }
    }

    fn names(db: usize) -> [String; 3] {
        [
            format!("redis.{db}.keys"),
            format!("redis.{db}.members"),
            format!("redis.{db}.expires"),
        ]
    }

    /// Database `db`'s tables in `snap`, if it has them.
    pub fn in_snapshot(snap: &Snapshot, db: usize) -> Option<DbTables> {
        let [k, m, e] = DbTables::names(db);
        Some(DbTables {
            keys: snap.table(&k).ok()?,
            members: snap.table(&m).ok()?,
            expires: snap.table(&e).ok()?,
        })
    }
}

/// The databases of one server.
pub struct Keyspace {
    /// The store.
    pub db: Arc<Db>,
    /// Each database's tables, once first used.
    tables: Vec<OnceLock<DbTables>>,
    /// Serializes the creation of tables.
    creating: Mutex<()>,
    /// Keys in each database (metadata records, expired ones not yet removed included, as
    /// Redis's `DBSIZE` counts them): counted when the database is first used, then kept
    /// by each commit's [`Outcome`].
    counts: Vec<AtomicI64>,
    /// The key locks.
    pub locks: locks::KeyLocks,
    /// `WATCH`es.
    pub watches: watch::Watches,
    /// `SCAN` cursors (of every `*SCAN` command).
    pub cursors: cursors::Cursors,
    /// Clients blocked on keys (`BLPOP` ...).
    pub ready: ready::Ready,
    /// Held shared by every command that names its keys, exclusively by those that change a
    /// whole database (`FLUSHDB`, `FLUSHALL`).
    pub whole: RwLock<()>,
    /// The next collection version.
    versions: AtomicU64,
    /// The longest value the store takes (`stitchdb::max_value_len` of its zones): commands
    /// that build a value check it before their first write, so none fails halfway.
    pub max_value: usize,
}

impl Keyspace {
    /// The keyspace of `databases` databases in `db`.
    pub fn new(db: Arc<Db>, databases: usize) -> Keyspace {
        // Versions start from the clock, so they grow across restarts too.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        let max_value = stitchdb::max_value_len(db.stats().zones.zone_size);
        Keyspace {
            db,
            tables: (0..databases).map(|_| OnceLock::new()).collect(),
            creating: Mutex::new(()),
            counts: (0..databases).map(|_| AtomicI64::new(0)).collect(),
            locks: locks::KeyLocks::default(),
            watches: watch::Watches::default(),
            cursors: cursors::Cursors::default(),
            ready: ready::Ready::default(),
            whole: RwLock::new(()),
            versions: AtomicU64::new(now),
            max_value,
        }
    }

    /// How many databases there are.
    pub fn databases(&self) -> usize {
        self.tables.len()
    }

    /// Database `db`'s tables, created (and its keys counted) on first use.
    pub fn tables(&self, db: usize) -> KsResult<DbTables> {
        let slot = self
            .tables
            .get(db)
            .ok_or_else(|| KsError::Msg("ERR DB index is out of range".into()))?;
        if let Some(t) = slot.get() {
            return Ok(*t);
        }
        let _creating = self.creating.lock();
        if let Some(t) = slot.get() {
            return Ok(*t);
        }
        let [k, m, e] = DbTables::names(db);
        let t = DbTables {
            keys: self.db.open_table(&k)?,
            members: self.db.open_table(&m)?,
            expires: self.db.open_table(&e)?,
        };
        let mut n = 0;
        for item in self.db.range(
            t.keys,
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
        )? {
            item?;
            n += 1;
        }
        self.counts[db].store(n, Ordering::SeqCst);
        let _ = slot.set(t);
        Ok(t)
    }

    /// Database 0 and every database whose tables the store holds.
    pub fn stored_databases(&self) -> Vec<usize> {
        (0..self.tables.len())
            .filter(|&n| n == 0 || self.db.table(&DbTables::names(n)[0]).is_ok())
            .collect()
    }

    /// The databases used so far (their tables exist).
    pub fn opened(&self) -> Vec<usize> {
        (0..self.tables.len())
            .filter(|&i| self.tables[i].get().is_some())
            .collect()
    }

    /// Keys in database `db`.
    pub fn dbsize(&self, db: usize) -> KsResult<i64> {
        self.tables(db)?;
        Ok(self.counts[db].load(Ordering::SeqCst).max(0))
    }

    /// A version no collection has had.
    pub fn new_version(&self) -> u64 {
        self.versions.fetch_add(1, Ordering::Relaxed)
    }

    /// Makes a committed [`Outcome`] visible to the rest of the server: key counts, the
    /// watchers of every key it changed, and the clients blocked on one. Call while still
    /// holding the keys' locks.
    pub fn apply(&self, outcome: &Outcome) {
        for &db in &outcome.flushed {
            self.counts[db].store(0, Ordering::SeqCst);
        }
        for (db, delta) in outcome.deltas.iter().enumerate() {
            if *delta != 0 {
                self.counts[db].fetch_add(*delta, Ordering::SeqCst);
            }
        }
        let touched = || outcome.touched.iter().map(|(db, k)| (*db, k.as_slice()));
        self.watches.touch(touched());
        self.ready.touch(touched());
    }
}
