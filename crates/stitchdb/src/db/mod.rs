//! The database: opening and recovering a store, tables, and the shared state ([`Inner`])
//! the read, write, checkpoint and compaction paths work on.
//!
//! # Lock order
//!
//! A thread holding one of these locks takes only locks listed after it (each pair taken
//! together in the code is named, outer first):
//!
//! 1. Key and range locks of the [`LockManager`] (logical locks of transactions and of
//!    writes while a locking transaction is open): waited for with none of the locks below
//!    held. A commit holding them takes `flushing` (a linked commit) or `write`.
//! 2. `compacting` (shared by a level merge, exclusive for a whole-table merge or
//!    defragmentation): then `merging` to claim levels, and everything from `write` on while
//!    the merge runs (`write` via `oldest_reader`, `checkpoint` to install).
//! 3. `merging`: then `version` (to plan) and `compaction` (to count).
//! 4. `flushing` (a whole checkpoint): then `write` and `frozen` (to freeze memtables or take
//!    those a writer froze) and `checkpoint` (to install and write the manifest).
//! 5. `write` (the writer lock): then `frozen` (a writer freezing a full memtable),
//!    `checkpoint` (a linking checkpoint keeps `write` to its end; `next_run_id`), `version`
//!    (applying a commit, freezing, making a table), `readers` (`oldest_reader_locked`), and
//!    the leaves.
//! 6. `frozen`: then `version` and `readers` (freezing as a writer).
//! 7. `checkpoint` (manifests): then `signal` (`notify_flushed` after an install), `version`
//!    (to list the tables and apply a change), and the leaves.
//! 8. `signal` (with the condition variables `wake` and `flushed`, which wait on it): then
//!    `version` and `failure` (a writer waiting for a backlog to clear).
//! 9. `version`: nothing of this list while held, except leaves.
//! 10. `readers`: nothing.
//!
//! Leaves, taken last and holding nothing else of this list: `failure`, `flush_times`,
//! `compaction`, the patchgroups' and the lock manager's own mutexes. The lower layers' locks
//! (block cache, zones, log) are taken under any of these, and never call back up.

mod background;
mod check;
mod checkpoint;
mod compact;
#[cfg(test)]
mod cow_btree_tests;
mod damage;
mod defrag;
mod ingest;
mod large;
mod link;
mod log;
mod observe;
mod patchgroup;
mod read;
mod recover;
mod repair;
mod snapshot;
mod space;
mod stats;
mod tables;
mod verify;
mod write;

pub(crate) use large::{
    find as find_large, hidden_of, hidden_table, threshold as large_threshold,
    write_range as write_large_range, write_value as write_large, Chunk, Found, Reference, Written,
    MARKER as LARGE_MARKER,
};
pub(crate) use link::{link_transaction, PrivateRuns};
pub(crate) use read::{find_at, scan_at, ReaderGuard};
pub(crate) use space::admit_spill;
pub(crate) use write::{commit_batch, commit_reclaiming, lock_exclusive, Committer, Span};

pub use check::CheckReport;
pub use damage::{Damage, LostKeys, Salvage};
pub use defrag::DefragReport;
pub use large::{max_large_value_len, ValueReader, LARGE_VALUE_THRESHOLD};
pub use observe::{ChangedSpan, Commit, CommitObserver, ObserverGuard};
pub use patchgroup::{Engaged, PatchGroup};
pub use read::DbIter;
pub use repair::RepairReport;
pub use snapshot::{Snapshot, SnapshotInfo};
pub use stats::{AppendedBytes, RecordCacheStats, Stats, TableStats, WriteStalls};
pub use verify::{Placed, StoreCheck};

use crate::batch::TableId;
use crate::concurrency::{LockError, LockManager, Oracle};
use crate::layout::cowbtree::store::NodeRefs;
use crate::layout::vtree::run::{FilterChoice, Run, Storage};
use crate::layout::TableData;
use crate::layout::{FilterSpec, LayoutSpec, TableLayout};
use crate::manifest::LogStart;
use crate::options::Options;
use crate::options::Stitching;
use crate::seq_counts::SeqCounts;
use crate::version::{is_region, table_label, TableState, Version};
use crate::{Error, Result};
use parking_lot::{Condvar, Mutex, RwLock};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use stitch_io::{Disk, FileDisk, LockMode};
use stitch_patch::{BlockCache, CacheConfig, PatchGroups};
use stitch_wal::Wal;
use stitch_zone::{ExtentAddr, Stream, ZoneStore};

/// The name of the table every store has from the start.
pub const DEFAULT_TABLE: &str = "default";
const MAX_TABLE_NAME: usize = 255;

/// What the writer serializes on: appending to the log and applying to memtables. Guarded by
/// [`Inner::write`].
pub(crate) struct WriteState {
    /// The transaction id the next commit's log records carry.
    pub(super) next_txn: u64,
    /// The id the next table made gets.
    pub(super) next_table_id: u32,
    /// The sequence number (LSN) of the last applied commit.
    pub(super) last_seq: u64,
    /// `Ordered` writes since the log was last flushed (inline mode flushes every few).
    pub(super) unflushed_ordered: u64,
    /// Open transactions and the commits they may conflict with.
    pub(crate) oracle: Oracle,
    /// Who hears about each commit (called under this lock, in commit order).
    pub(super) observers: observe::Observers,
}

/// What the checkpointer keeps between checkpoints. Guarded by [`Inner::checkpoint`].
pub(super) struct CheckpointState {
    /// The newest durable manifest.
    pub manifest: Option<ExtentAddr>,
    pub next_run_id: u64,
    /// The epoch of this handle's log.
    pub epoch: u64,
    /// What the newest manifest says of the log: compactions write manifests that keep it.
    pub checkpoint_lsn: u64,
    pub log_start: LogStart,
    pub next_table_id: u32,
    pub checkpoints: u64,
    /// Key and value bytes written by memtable flushes.
    pub run_bytes_written: u64,
    /// Large transactions committed by linking their runs, and those runs' bytes.
    pub linked_commits: u64,
    pub linked_bytes: u64,
    /// The named snapshots, listed in every manifest.
    pub snapshots: BTreeMap<String, Arc<snapshot::NamedSnapshot>>,
    /// Runs merged away by merges installed since the newest manifest (which still lists
    /// them): the next manifest retires them.
    pub deferred: Vec<Arc<Run>>,
    /// Ingested runs by id, with the LSN of the record naming them, until a manifest whose
    /// checkpoint covers that record is written: recovery may adopt them from the log until
    /// then, so their extents must stay (see `ingest`).
    pub log_named: BTreeMap<u64, u64>,
    /// Retired runs held back because the log still names them (see `log_named`): a later
    /// manifest retires them.
    pub log_held: Vec<Arc<Run>>,
    /// Runs ingested since open, and their bytes.
    pub ingested_runs: u64,
    pub ingested_bytes: u64,
}

/// The state every handle of an open store shares, grouped by who owns it. Each field says
/// what guards it; the module documentation gives the order the locks are taken in.
pub(crate) struct Inner {
    // ---- Fixed when the store is opened: no lock. -------------------------------------
    pub(crate) opts: Options,
    /// The block cache every write goes through (the lower layers lock inside).
    pub(super) cache: Arc<BlockCache>,
    pub(super) zones: Arc<ZoneStore>,
    /// Which chunks of large values are live (see `large`).
    pub(crate) large: Arc<large::Registry>,
    pub(crate) storage: Arc<Storage>,
    /// The written B+tree nodes' children, for their release handler
    /// (`crate::layout::cowbtree::store`).
    pub(crate) nodes: Arc<NodeRefs>,
    /// `None` for a read-only handle. Locks inside; appended to under `write`.
    pub(super) wal: Option<Wal>,
    /// When the store was opened.
    pub(super) opened: std::time::Instant,

    // ---- The write path (writers and transactions). -----------------------------------
    /// The writer lock: one commit at a time is appended to the log and applied.
    pub(crate) write: Mutex<WriteState>,
    /// Readers see commits up to this sequence number. Stored under `write` (by the commit
    /// that makes it visible); read without a lock.
    pub(crate) visible_seq: AtomicU64,
    /// Patchgroups (their own lock, a leaf); a writer asks which are engaged in its context
    /// before taking `write` and adopts its record's patch under it.
    pub(super) groups: PatchGroups,
    /// Key and range locks of locking transactions (their own lock, a leaf). A lock is waited
    /// for with none of this struct's locks held.
    pub(crate) locks: LockManager,
    /// How often and how long writers were held back (counters: no lock).
    pub(super) stalls: background::Stalls,

    // ---- Readers. -----------------------------------------------------------------------
    /// The tables as readers see them: replaced whole (under the write side) by commits that
    /// make a table, by freezes, and by installs of runs; readers clone the `Arc` and let go.
    pub(super) version: RwLock<Arc<Version>>,
    /// Sequence numbers of open iterators (with counts): merges keep what they can see.
    pub(super) readers: Mutex<SeqCounts>,

    // ---- The checkpointer (memtable flushes and manifests). -----------------------------
    /// Held for a whole checkpoint: one at a time. Writing the frozen memtables out happens
    /// under this lock only, so merges can finish and install meanwhile.
    pub(super) flushing: Mutex<()>,
    /// Memtables a writer froze (see `checkpoint::freeze_full`), for the next checkpoint.
    pub(super) frozen: Mutex<Option<checkpoint::FreezePoint>>,
    /// Held while a manifest is written (by a checkpoint, a merge, a snapshot): one at a
    /// time; every change to the version that a manifest must list is applied under it.
    pub(super) checkpoint: Mutex<CheckpointState>,
    /// How many runs `CheckpointState::log_named` holds (stored under `checkpoint`, read
    /// without it by writers asking whether a checkpoint is due).
    pub(super) logged_runs: std::sync::atomic::AtomicUsize,
    /// When each memtable flush since opening completed (its own lock, a leaf).
    pub(super) flush_times: Mutex<Vec<std::time::Duration>>,

    // ---- The compactor. -----------------------------------------------------------------
    /// Held shared while a level merge runs, exclusively by what must run alone (merging a
    /// table whole, defragmentation: both replace runs that level merges could be reading).
    pub(super) compacting: RwLock<()>,
    /// The levels level merges are merging now.
    pub(super) merging: Mutex<std::collections::HashSet<compact::LevelKey>>,
    /// What merges did so far (its own lock, a leaf).
    pub(super) compaction: Mutex<compact::CompactionStats>,

    // ---- Reclaiming space after a refused write (see `space`). ---------------------------
    /// Held for a reclaim, with no other lock of this struct held: one at a time.
    pub(super) reclaim: Mutex<space::Reclaim>,
    /// Reclaims run so far (stored under `reclaim`, read without it before a write).
    pub(super) reclaims: AtomicU64,

    // ---- Waking the background threads. -------------------------------------------------
    /// What the background threads are asked to do; `wake` and `flushed` wait on it.
    pub(super) signal: Mutex<background::Signal>,
    /// Wakes the background threads.
    pub(super) wake: Condvar,
    /// Wakes writers waiting for a checkpoint to write a frozen memtable out.
    pub(super) flushed: Condvar,

    // ---- Failure and closing. -----------------------------------------------------------
    /// Set after a failed write: why the store is now read-only (its own lock, a leaf).
    pub(super) failure: Mutex<Option<String>>,
    /// Whether `failure` is set (checked on every write without taking its lock).
    pub(super) failed: AtomicBool,
    /// Set once by `Db::close` (or drop); checked without a lock.
    pub(crate) closed: AtomicBool,
}

/// An open store. Cheap to share between threads (`&Db` is `Sync`).
pub struct Db {
    pub(crate) inner: Arc<Inner>,
    /// The background threads (memtable flushes, compaction), joined at close.
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// The free zones an open store holds back (see [`stitch_zone::Reserve`]). Opening needs
/// two log segments (the first and the one preallocated after it), a manifest zone, and
/// zones for the memtables the log replays (at most an active and a frozen one) plus the
/// flush zone they start in: what flushes and manifests leave. Merges stop earlier by a
/// checkpoint (one memtable's flush, a zone for its runs and one for its manifest), so
/// merges cannot take the room that gives the log's zones back. Log segments and ingested
/// runs stop earlier again by a merge's output (a zone for the blocks it copies, one for its
/// index and one spare), so a writer refused for want of room can still merge deleted data
/// away (`space::reclaim`).
fn open_reserve(opts: &Options, zone_size: u64) -> stitch_zone::Reserve {
    let memtables = |n: u64| (n * opts.memtable_size as u64).div_ceil(zone_size);
    let extents = 2 + 1 + 1 + memtables(2);
    let merges = extents + memtables(1) + 2;
    stitch_zone::Reserve {
        log: merges + 3,
        merges,
        extents,
    }
}

impl Db {
    /// Creates a new store in the file (or on the block device) at `path`. On failure no file
    /// is left behind: options are checked before the file is made, and a file this call made
    /// is removed if writing the new store into it fails (a full disk, say), so that trying
    /// again does not meet a half-made store that "already exists".
    pub fn create(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        let path = path.as_ref();
        opts.validate_new()?;
        let file = FileDisk::create(path)?;
        let made_file = !file.is_block_device();
        let created = Self::create_on(Arc::new(file), opts);
        if created.is_err() && made_file {
            // The file is this call's own (`create_new`), so nobody else's data goes with it.
            if let Err(e) = std::fs::remove_file(path) {
                tracing::warn!(
                    "removing {} after failing to create a store in it: {e}",
                    path.display()
                );
            }
        }
        created
    }

    /// Opens an existing store for reading and writing. A second opener gets an error (once
    /// `Options::lock_wait_ms` has passed).
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        let disk = open_file(path.as_ref(), LockMode::Exclusive, &opts)?;
        Self::open_on(disk, opts)
    }

    /// Opens a store read-only: recovery runs in memory and nothing is written.
    pub fn open_read_only(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        let disk = open_file(path.as_ref(), LockMode::Shared, &opts)?;
        Self::open_read_only_on(disk, opts)
    }

    /// Creates a store on any [`Disk`] (a `MemDisk` or `SimDisk` in tests).
    pub fn create_on(disk: Arc<dyn Disk>, opts: Options) -> Result<Db> {
        opts.validate_new()?;
        let cache = Self::cache_for(disk, &opts);
        let zones = Arc::new(ZoneStore::create(cache, opts.zone_config())?);
        let storage = Storage::new(zones, opts.read_cache_bytes, opts.background);
        let mut version = Version::default();
        version.add_table(
            TableId(0),
            DEFAULT_TABLE.to_string(),
            opts.stitching,
            Arc::default(),
        );
        let recovered = recover::Recovered {
            version,
            last_lsn: 0,
            next_table_id: 1,
            next_run_id: 1,
            old_log: Vec::new(),
            snapshots: BTreeMap::new(),
            checkpoint_lsn: 0,
            log_start: LogStart {
                zone: 0,
                offset: 0,
                lsn: 1,
                epoch: 0,
            },
            replaced: Vec::new(),
            large: Default::default(),
            nodes: NodeRefs::install(&storage.zones),
        };
        Self::start(storage, opts, recovered, None)
    }

    /// Opens a store on any [`Disk`] for reading and writing.
    pub fn open_on(disk: Arc<dyn Disk>, opts: Options) -> Result<Db> {
        opts.validate()?;
        let (storage, recovered, manifest) = recover::recover(disk, &opts)?;
        Self::start(storage, opts, recovered, manifest)
    }

    /// Opens a store on any [`Disk`] read-only.
    pub fn open_read_only_on(disk: Arc<dyn Disk>, opts: Options) -> Result<Db> {
        opts.validate()?;
        let (storage, recovered, manifest) = recover::recover(disk, &opts)?;
        let inner = Self::inner(storage, opts, &recovered, manifest, None, 0);
        Ok(Db {
            inner: Arc::new(inner),
            threads: Vec::new(),
        })
    }

    fn cache_for(disk: Arc<dyn Disk>, opts: &Options) -> Arc<BlockCache> {
        let config = CacheConfig {
            block_size: 4096,
            clean_blocks: opts.cache_blocks,
        };
        Arc::new(BlockCache::new(disk, config))
    }

    fn inner(
        storage: Arc<Storage>,
        opts: Options,
        recovered: &recover::Recovered,
        manifest: Option<ExtentAddr>,
        wal: Option<Wal>,
        epoch: u64,
    ) -> Inner {
        let cache = storage.zones.cache().clone();
        Inner {
            groups: PatchGroups::new(cache.clone()),
            cache,
            zones: storage.zones.clone(),
            large: recovered.large.clone(),
            storage,
            nodes: recovered.nodes.clone(),
            wal,
            write: Mutex::new(WriteState {
                next_txn: recovered.last_lsn + 1,
                next_table_id: recovered.next_table_id,
                last_seq: recovered.last_lsn,
                unflushed_ordered: 0,
                oracle: Default::default(),
                observers: Default::default(),
            }),
            version: RwLock::new(Arc::new(recovered.version.clone())),
            visible_seq: AtomicU64::new(recovered.last_lsn),
            stalls: background::Stalls::default(),
            checkpoint: Mutex::new(CheckpointState {
                manifest,
                next_run_id: recovered.next_run_id,
                epoch,
                checkpoint_lsn: recovered.checkpoint_lsn,
                log_start: recovered.log_start,
                next_table_id: recovered.next_table_id,
                checkpoints: 0,
                run_bytes_written: 0,
                linked_commits: 0,
                linked_bytes: 0,
                snapshots: recovered.snapshots.clone(),
                // Runs replay copied into memtables: the open's checkpoint retires them.
                deferred: recovered.replaced.clone(),
                log_named: BTreeMap::new(),
                log_held: Vec::new(),
                ingested_runs: 0,
                ingested_bytes: 0,
            }),
            compaction: Mutex::new(compact::CompactionStats::default()),
            compacting: RwLock::new(()),
            merging: Default::default(),
            flushing: Mutex::new(()),
            reclaim: Mutex::new(space::Reclaim::default()),
            reclaims: AtomicU64::new(0),
            frozen: Mutex::new(None),
            readers: Mutex::default(),
            locks: LockManager::new(),
            failure: Mutex::new(None),
            failed: false.into(),
            logged_runs: 0.into(),
            closed: false.into(),
            opened: std::time::Instant::now(),
            flush_times: Mutex::new(Vec::new()),
            signal: Mutex::new(background::Signal::default()),
            wake: Condvar::new(),
            flushed: Condvar::new(),
            opts,
        }
    }

    /// Starts a writable store: a new log (new epoch), then a checkpoint that writes out what
    /// recovery replayed and points the superblock at the new log. Nothing is appended to the
    /// new log before that superblock is durable, so stale records can never pass for its own.
    fn start(
        storage: Arc<Storage>,
        opts: Options,
        recovered: recover::Recovered,
        manifest: Option<ExtentAddr>,
    ) -> Result<Db> {
        // Opening may take every free zone: the reserve kept while the store was open last
        // is what lets a store that filled its disk open again.
        let reserve = open_reserve(&opts, storage.zones.zone_size());
        storage.zones.set_reserve(stitch_zone::Reserve::default());
        let epoch = storage.zones.superblock().seq + 1;
        let wal = Wal::create(storage.zones.clone(), epoch, recovered.last_lsn + 1);
        let wal = wal.map_err(log::log_err)?;
        let inner = Self::inner(storage, opts, &recovered, manifest, Some(wal), epoch);
        let inner = Arc::new(inner);
        let superblock = checkpoint::checkpoint(&inner, checkpoint::Trigger::Open)?;
        for zone in recovered.old_log {
            inner.zones.release_zone(zone, superblock)?;
        }
        inner.zones.set_reserve(reserve);
        let threads = if inner.opts.background {
            background::spawn(&inner)
        } else {
            Vec::new()
        };
        Ok(Db { inner, threads })
    }

    /// The table every store has.
    pub fn default_table(&self) -> TableId {
        TableId(0)
    }

    /// The table called `name`.
    pub fn table(&self, name: &str) -> Result<TableId> {
        let v = self.inner.version.read().clone();
        v.names
            .get(name)
            .copied()
            .filter(|_| !is_region(name) && !large::is_hidden(name))
            .ok_or_else(|| Error::NoSuchTable(name.to_string()))
    }

    /// The state every handle of the store shares.
    pub(crate) fn shared(&self) -> &Arc<Inner> {
        &self.inner
    }

    /// The name of a table.
    pub fn table_name(&self, table: TableId) -> Result<String> {
        Ok(self.inner.version.read().user_table(table)?.name.clone())
    }

    /// The names of all tables, sorted (a partitioned table once: its regions are its own).
    pub fn tables(&self) -> Vec<String> {
        let v = self.inner.version.read();
        (v.names.keys())
            .filter(|n| !is_region(n) && !large::is_hidden(n))
            .cloned()
            .collect()
    }

    /// Creates a table laid out as the VT-tree (durably, like a `Sync` write).
    pub fn create_table(&self, name: &str) -> Result<TableId> {
        self.create_table_with_layout(name, "")
    }

    /// Creates a table whose data goes through the modules `layout` names, e.g.
    /// `managed -> btree -> fixed(8)` (docs/layouts.md; empty: the default VT-tree stack).
    /// An invalid layout is an error naming the module at fault, and creates nothing.
    pub fn create_table_with_layout(&self, name: &str, layout: &str) -> Result<TableId> {
        if name.is_empty() || name.len() > MAX_TABLE_NAME {
            return Err(Error::BadTableName(
                name.to_string(),
                "must be 1 to 255 bytes",
            ));
        }
        if is_region(name) {
            return Err(Error::BadTableName(
                name.to_string(),
                "must not hold a NUL (partitioned tables' regions are named so)",
            ));
        }
        if large::is_hidden(name) {
            return Err(Error::BadTableName(
                name.to_string(),
                "must not start with U+0001 (large values' hidden tables are named so)",
            ));
        }
        let layout = match layout.trim() {
            "" => TableLayout::default(),
            text => TableLayout::parse(text).map_err(|e| Error::BadLayout(e.to_string()))?,
        };
        tables::create_table(&self.inner, name, Arc::new(layout))
    }

    /// The layout of a table, as `create_table_with_layout` accepts it (every parameter
    /// written out).
    pub fn table_layout(&self, table: TableId) -> Result<String> {
        Ok(self
            .inner
            .version
            .read()
            .user_table(table)?
            .layout
            .to_string())
    }

    /// The table called `name`, created if it does not exist yet.
    pub fn open_table(&self, name: &str) -> Result<TableId> {
        match self.table(name) {
            Err(Error::NoSuchTable(_)) => self.create_table(name),
            other => other,
        }
    }

    /// Writes everything out as runs and makes it durable: after a checkpoint the log is empty.
    /// Full levels are merged (inline, or by the background compactor).
    pub fn flush(&self) -> Result<()> {
        self.inner.check_writable()?;
        checkpoint::checkpoint(&self.inner, checkpoint::Trigger::Explicit)?;
        if self.inner.opts.background {
            background::request_compaction(&self.inner);
        } else {
            while compact::compact_once(&self.inner, Stream::Merge)? {}
            let r = checkpoint::write_deferred(&self.inner);
            self.inner.guard(r)?;
        }
        Ok(())
    }

    /// Flushes, then merges every table's runs into one (`stitchdb compact`).
    pub fn compact(&self) -> Result<()> {
        self.inner.check_writable()?;
        checkpoint::checkpoint(&self.inner, checkpoint::Trigger::Explicit)?;
        compact::compact_all(&self.inner)
    }

    /// Evacuates zones whose live bytes are below `max_live_ratio` of a zone (0.5 is a good
    /// default), while reads and writes go on. `progress` is told (runs done, runs to do).
    pub fn defrag(
        &self,
        max_live_ratio: f64,
        mut progress: impl FnMut(u64, u64),
    ) -> Result<DefragReport> {
        self.inner.check_writable()?;
        defrag::defrag(&self.inner, max_live_ratio, &mut progress)
    }

    /// Changes how merges of `table` (a partitioned table's regions) stitch, at once and
    /// durably.
    pub fn set_stitching(&self, table: TableId, stitching: Stitching) -> Result<()> {
        self.inner.check_writable()?;
        let ids = self.inner.version.read().with_regions(table)?;
        let change = |v: &mut Version| {
            for &id in &ids {
                v.update(id, |t| {
                    // A B+tree merges nothing: it has no stitching to set.
                    if let Some(v) = t.data.vtree_mut() {
                        v.stitching = stitching;
                    }
                });
            }
        };
        checkpoint::commit_change(&self.inner, change, &[], Vec::new())?;
        Ok(())
    }

    /// Makes every write made so far durable (whatever its durability said).
    pub fn sync(&self) -> Result<()> {
        self.inner.check_writable()?;
        let last = self.inner.write.lock().last_seq;
        self.inner.sync_log(last)
    }

    /// Hands every write made so far to the operating system, without a sync: what a
    /// `Durability::Written` commit does for itself, for all commits before the call at once
    /// (concurrent callers share one write). A server acknowledging a pipeline of `Async`
    /// commits calls it once before replying.
    pub fn write_out(&self) -> Result<()> {
        self.inner.check_writable()?;
        let last = self.inner.write.lock().last_seq;
        self.inner.write_log(last)
    }

    /// When each memtable flush since the store was opened completed (time since opening), for
    /// seeing compaction stalls: the paper's Figure 5 plots these.
    pub fn flush_history(&self) -> Vec<std::time::Duration> {
        self.inner.flush_times.lock().clone()
    }

    /// Why the store turned read-only, if it did.
    pub fn failure(&self) -> Option<String> {
        self.inner.failure.lock().clone()
    }

    /// Flushes everything and closes the store. Dropping a `Db` does the same, ignoring errors.
    /// A store that turned read-only after a failed write closes with that failure as its error
    /// (`Error::ReadOnly`), since what was written before it may not be durable.
    pub fn close(mut self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<()> {
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        background::stop(&self.inner);
        for handle in self.threads.drain(..) {
            let _ = handle.join();
        }
        if self.inner.wal.is_none() {
            return Ok(());
        }
        // The log first: every commit is then durable even if the checkpoint below finds no
        // room, or a failure turned the store read-only and left the log whole (a flush that
        // found no room): reopening replays it.
        let last = self.inner.write.lock().last_seq;
        let logged = self.inner.sync_log(last);
        if let Some(why) = self.inner.failure.lock().clone() {
            return Err(Error::ReadOnly(why));
        }
        logged?;
        checkpoint::checkpoint(&self.inner, checkpoint::Trigger::Close)?;
        self.inner.cache.flush_all()?;
        Ok(())
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        match self.shutdown() {
            // The failure that turned the store read-only was logged when it happened.
            Ok(()) | Err(Error::ReadOnly(_)) => {}
            Err(e) => tracing::error!("closing the store: {e}"),
        }
    }
}

impl Inner {
    /// A lock the lock manager refused, as the public error (naming the table).
    pub fn zones_size(&self) -> u64 {
        self.zones.zone_size()
    }

    pub fn lock_refused(&self, refused: LockError) -> Error {
        refused.into_error(|t| self.table_label(t))
    }

    /// A table's name for a message (its number if it has none any more).
    pub fn table_label(&self, table: TableId) -> String {
        self.version
            .read()
            .table(table)
            .map_or_else(|_| format!("#{}", table.0), |t| table_label(&t.name))
    }

    /// The filter a table of `layout` gives its runs (a quotient filter without a rate of
    /// its own takes the store's, `Options::filter_fp_rate`).
    pub fn filter_choice(&self, layout: &LayoutSpec) -> FilterChoice {
        match layout.filter {
            None => FilterChoice::None,
            Some(FilterSpec::Quotient { fp_rate }) => {
                FilterChoice::quotient(fp_rate.or(self.opts.filter_fp_rate))
            }
            Some(FilterSpec::Bloom { bits_per_key }) => FilterChoice::Bloom(bits_per_key),
        }
    }

    /// Fails with why the store cannot be written, if it cannot.
    pub fn check_writable(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        if self.wal.is_none() {
            return Err(Error::ReadOnly("opened read-only".into()));
        }
        if self.failed.load(Ordering::Acquire) {
            if let Some(why) = self.failure.lock().as_ref() {
                return Err(Error::ReadOnly(why.clone()));
            }
        }
        Ok(())
    }

    /// Fails as a write of `key` (and `value`) to `table` would for its arguments alone.
    pub fn check_write(&self, table: TableId, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        self.check_writable()?;
        tables::check_op(self, &self.version.read(), table, key, value)
    }

    /// Records a failed write: from now on the store refuses writes and says why.
    pub fn fail(&self, e: &Error) {
        self.failed.store(true, Ordering::Release);
        let mut failure = self.failure.lock();
        if failure.is_none() {
            tracing::error!("store turned read-only after a failed write: {e}");
            *failure = Some(format!("a write failed: {e}"));
        }
    }

    /// Runs a write step; a failure turns the store read-only.
    pub fn guard<T>(&self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            if matches!(
                e,
                Error::Io(_) | Error::Patch(_) | Error::Zone(_) | Error::Log(_)
            ) {
                self.fail(e);
            }
        }
        r
    }

    /// Runs a write step that takes zones before it writes (a commit's log append or
    /// ingested run, a merge's output): one that found the store out of zones is refused and
    /// the store stays writable, as the step left everything as it was (a builder gives back
    /// what it wrote); any other failure turns the store read-only, as [`guard`](Self::guard).
    pub fn guard_space<T>(&self, r: Result<T>) -> Result<T> {
        match r {
            Err(e)
                if e.is_out_of_zones()
                    && self.wal.as_ref().is_none_or(|w| w.failure().is_none()) =>
            {
                tracing::debug!("a write step was refused: {e}");
                Err(e)
            }
            r => self.guard(r),
        }
    }

    pub fn wal(&self) -> Result<&Wal> {
        self.wal
            .as_ref()
            .ok_or_else(|| Error::ReadOnly("opened read-only".into()))
    }

    /// Makes the log durable up to `lsn` (group commit).
    pub fn sync_log(&self, lsn: u64) -> Result<()> {
        let r = self.wal()?.sync_to(lsn).map_err(log::log_err);
        self.guard(r)
    }

    /// Hands the log to the operating system up to `lsn`, without a sync (see
    /// `Durability::Written`).
    pub fn write_log(&self, lsn: u64) -> Result<()> {
        let r = self.wal()?.write_through(lsn).map_err(log::log_err);
        self.guard(r)
    }

    /// A fresh run id.
    pub fn next_run_id(&self) -> u64 {
        let mut ck = self.checkpoint.lock();
        ck.next_run_id += 1;
        ck.next_run_id - 1
    }

    /// The oldest sequence number an open reader or transaction may still ask for.
    pub fn oldest_reader(&self) -> u64 {
        let w = self.write.lock();
        self.oldest_reader_locked(&w)
    }

    /// Whether table `t`'s memtable has reached `Options::memtable_size`.
    pub fn memtable_is_full(&self, t: &TableState) -> bool {
        t.data.unfrozen_bytes() >= self.opts.memtable_size
    }

    /// Whether a checkpoint is due: some table's memtable has reached
    /// `Options::memtable_size`, or enough ingested runs wait for a manifest to name them
    /// (`ingest::LOGGED_RUNS_LIMIT`).
    pub fn checkpoint_due(&self, v: &Version) -> bool {
        v.tables.values().any(|t| self.memtable_is_full(t))
            || self.logged_runs.load(Ordering::Acquire) >= ingest::LOGGED_RUNS_LIMIT
    }

    /// [`oldest_reader`](Self::oldest_reader) for a caller holding the write lock.
    pub fn oldest_reader_locked(&self, w: &WriteState) -> u64 {
        let readers = self.readers.lock().oldest();
        let newest = self.visible_seq.load(Ordering::Acquire);
        [readers, w.oracle.oldest()]
            .into_iter()
            .flatten()
            .fold(newest, u64::min)
    }
}

/// Opens the store file at `path` locked as `mode`, waiting up to `opts.lock_wait_ms` for
/// another holder of the lock to let go.
pub(crate) fn open_file(path: &Path, mode: LockMode, opts: &Options) -> Result<Arc<dyn Disk>> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(opts.lock_wait_ms);
    loop {
        match FileDisk::open(path, mode) {
            Err(e)
                if e.kind == stitch_io::IoErrorKind::Locked
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            opened => return Ok(Arc::new(opened?)),
        }
    }
}
