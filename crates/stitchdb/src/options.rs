//! How a store is opened and written.

use crate::{Error, Result};

/// When a write is durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Durable when the call returns (concurrent writers share one sync: group commit).
    #[default]
    Sync,
    /// In the operating system's hands when the call returns: the commit's log record is
    /// written into the store's file (no sync), so a crash of the process (`kill -9`, a
    /// panic) loses nothing, though power loss may lose the newest commits (never out of
    /// order). What RocksDB and LevelDB do by default (`sync = false` with the log on), and
    /// SQLite's `synchronous=NORMAL` in WAL mode. Durable at the next sync, checkpoint or
    /// close. A commit made with a patchgroup engaged syncs instead (its record must not
    /// reach the disk before the group's dependencies), as does the first commit into a new
    /// log segment (one per zone of records: its header must be durable before records
    /// that follow it are handed over).
    Written,
    /// Durable soon (within `Options::ordered_flush_interval`), and never out of order: after a
    /// crash the store holds a prefix of the commit order.
    Ordered,
    /// Durable at the next sync, checkpoint or close; still never out of order. The log
    /// records wait in the store's memory until then, so a crash of the process may lose
    /// them too (up to a memtable of commits): RocksDB with its log off (`disable_wal`).
    Async,
}

/// Options for [`Db::open`](crate::Db::open) and [`Db::create`](crate::Db::create).
#[derive(Debug, Clone)]
pub struct Options {
    /// Bytes per zone when a store is created (8 MiB). Read from the store when opened.
    pub zone_size: u64,
    /// The store never grows past this many bytes (`None`: until the device is full).
    pub max_size: Option<u64>,
    /// Bytes of free zones kept allocated in the store's file for reuse (1 GiB): merges free
    /// their inputs' zones and write their outputs, and writing over allocated blocks that
    /// the page cache still holds is cheaper than into punched-out space. Zones freed beyond
    /// it are punched out, returning their space to the file system.
    pub recycle_bytes: u64,
    /// The most free zones a background thread keeps ahead of writers in the store's file
    /// beyond those held back (8): a quarter of the zones in use, at least one and at most
    /// this many. A writer moving to a new zone then does not wait while the file grows, nor,
    /// once the device runs short and zones are allocated before use, while the file system
    /// allocates its blocks (on ext4, a disk read for each allocation bitmap not cached). The
    /// file is that many zones longer than it must be (taking no blocks while the device has
    /// room to spare); 0 grows and allocates each zone when it is taken, on the taker's
    /// thread.
    pub ahead_zones: u64,
    /// A memtable is written out as a run once it takes this many bytes of memory: its
    /// entries' skip-list nodes, keys too long for a node and value buffers, as allocated.
    pub memtable_size: usize,
    /// Runs a level holds before they are merged into one run of a level below (the paper's
    /// two runs per level: level `i` then holds about `memtable_size * 2^i` bytes per run).
    /// The merge carries through each level below that its run would fill in turn.
    pub level_runs: usize,
    /// Runs waiting to be merged (beyond what each level holds at rest, summed over a table's
    /// levels) that writers may run up before they are slowed: one run past it holds each
    /// writer to 64 MiB/s, `n` runs to a `n`th of that. A backlog costs reads a look at each
    /// waiting run (point lookups mostly only at its filter; seeks at a block of each) until
    /// merges catch up. 20 by default, RocksDB's level-0 slowdown trigger: a lower limit
    /// paces writers while the merge threads still have time to spare between bursts; at 20
    /// fills run at the merges' pace over the whole fill, merges may finish after it (as
    /// RocksDB's level-0 compactions do), and point reads right after a fill are slower until
    /// they have.
    pub slowdown_runs: usize,
    /// Threads merging levels in the background (1 or 2): a merge claims the levels it merges,
    /// so the second thread merges other tables, or levels of the same table no running merge
    /// claimed.
    pub compaction_threads: usize,
    /// How much nicer than the thread opening the store compaction threads run (0 to 19;
    /// Linux only, elsewhere ignored). Writers and the flusher are what a writer waits for;
    /// merges only have to keep up on average (pacing slows writers when they do not), so by
    /// default they yield the CPU: 5.
    pub compaction_nice: u8,
    /// How merges of new tables stitch blocks (change a table's with `Db::set_stitching`).
    pub stitching: Stitching,
    /// Bytes of parsed run blocks kept in memory for reads.
    pub read_cache_bytes: usize,
    /// False-positive rate of each run's quotient filter (`None`: runs have no filters).
    pub filter_fp_rate: Option<f64>,
    /// Durability of writes that do not name one.
    pub durability: Durability,
    /// How often `Ordered` writes are flushed, in milliseconds.
    pub ordered_flush_interval_ms: u64,
    /// How long opening a store file waits for another process (or handle) to let go of it,
    /// in milliseconds, before it fails with `IoErrorKind::Locked` (0: it fails at once). A
    /// mount's daemon closes its store shortly after `umount` returns, so the command line
    /// and the mount wait a few seconds.
    pub lock_wait_ms: u64,
    /// Clean blocks kept in the block cache.
    pub cache_blocks: usize,
    /// Bytes of private writes a transaction keeps in memory; beyond that they are written out
    /// as private runs, which its commit links into the tables without writing them again.
    pub txn_memory: usize,
    /// A write batch's stretch of consecutive puts to one table, keys ascending, of at least
    /// this many key and value bytes is ingested: written straight into a run of its own,
    /// durable before the commit's log record names it, instead of into the log and a
    /// memtable (values written once, not twice). `usize::MAX`: never. Below the default
    /// 256 KiB, the run's own sync costs more than the copies it saves.
    pub ingest_min_bytes: usize,
    /// How long a [`Locking`](crate::Isolation::Locking) transaction (or a write that must
    /// wait for one) waits for a lock before it fails with `Error::LockTimeout`.
    pub lock_timeout: std::time::Duration,
    /// Run memtable flushes, merges and `Ordered` flushes on a background thread. Off, they run
    /// inline in the writer's thread (deterministic: what crash tests use).
    pub background: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            zone_size: 8 << 20,
            max_size: None,
            recycle_bytes: stitch_zone::DEFAULT_RECYCLE_BYTES,
            ahead_zones: stitch_zone::DEFAULT_AHEAD_ZONES,
            memtable_size: 4 << 20,
            level_runs: 2,
            slowdown_runs: 20,
            compaction_threads: 2,
            compaction_nice: 5,
            stitching: Stitching::default(),
            read_cache_bytes: 64 << 20,
            filter_fp_rate: Some(0.01),
            durability: Durability::Sync,
            ordered_flush_interval_ms: 5,
            lock_wait_ms: 0,
            cache_blocks: 1024,
            txn_memory: 64 << 20,
            ingest_min_bytes: 256 * 1024,
            lock_timeout: std::time::Duration::from_secs(1),
            background: true,
        }
    }
}

/// When a merge may stitch blocks instead of copying them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stitching {
    /// Stitch spans of non-overlapping, contiguous blocks of at least this many bytes.
    Threshold(u64),
    /// Copy everything.
    Never,
}

impl Default for Stitching {
    /// The paper's 64 KiB.
    fn default() -> Self {
        Stitching::Threshold(64 * 1024)
    }
}

/// The zone streams merges append to: one per compaction thread, so each merge's blocks stay
/// contiguous on disk.
pub(crate) const MERGE_STREAMS: [stitch_zone::Stream; 2] =
    [stitch_zone::Stream::Merge, stitch_zone::Stream::SecondMerge];

/// The largest key, in bytes.
pub const MAX_KEY_LEN: usize = 16 * 1024;
/// The largest value a store with `zone_size`-byte zones accepts: a quarter of a zone less
/// 4 KiB (so a record with the largest key, and a run block holding it, fit in a zone with room
/// to spare), and never more than 4 MiB. With the default 8 MiB zones: 2 MiB less 4 KiB.
pub fn max_value_len(zone_size: u64) -> usize {
    ((zone_size / 4) as usize).saturating_sub(4096).min(4 << 20)
}

impl Options {
    /// The zone store's configuration these options ask for.
    pub(crate) fn zone_config(&self) -> stitch_zone::ZoneConfig {
        stitch_zone::ZoneConfig {
            zone_size: self.zone_size,
            max_size: self.max_size,
            recycle_bytes: self.recycle_bytes,
            ahead_zones: self.ahead_zones,
        }
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if self.memtable_size < 4096 {
            return Err(Error::Config(format!(
                "memtable_size {} is below 4096 bytes",
                self.memtable_size
            )));
        }
        if self.filter_fp_rate.is_some_and(|p| !(p > 0.0 && p <= 0.5)) {
            return Err(Error::Config(format!(
                "filter_fp_rate {:?} must be in (0, 0.5]",
                self.filter_fp_rate
            )));
        }
        if !(1..=MERGE_STREAMS.len()).contains(&self.compaction_threads) {
            return Err(Error::Config(format!(
                "compaction_threads {} must be 1 or 2",
                self.compaction_threads
            )));
        }
        if self.compaction_nice > 19 {
            return Err(Error::Config(format!(
                "compaction_nice {} must be at most 19",
                self.compaction_nice
            )));
        }
        if self.level_runs < 2 {
            return Err(Error::Config(format!(
                "level_runs {} must be at least 2",
                self.level_runs
            )));
        }
        Ok(())
    }

    /// [`validate`](Self::validate), and the settings only a new store takes (an existing
    /// store's zone size is its own).
    pub(crate) fn validate_new(&self) -> Result<()> {
        self.validate()?;
        self.zone_config().validate().map_err(|e| match e {
            stitch_zone::ZoneError::Config(why) => Error::Config(why),
            other => other.into(),
        })
    }
}
