//! StitchDB: a transactional storage engine that keeps records and files in one store.
//!
//! ```no_run
//! use stitchdb::{Db, Options};
//! let db = Db::create("/tmp/example.store", Options::default())?;
//! let t = db.default_table();
//! db.put(t, b"greeting", b"hello")?;
//! assert_eq!(db.get(t, b"greeting")?, Some(b"hello".to_vec()));
//! for item in db.scan_prefix(t, b"gr")? {
//!     let (key, value) = item?;
//!     println!("{:?} = {:?}", key, value);
//! }
//! db.close()?;
//! # Ok::<(), stitchdb::Error>(())
//! ```
//!
//! The layers (see `docs/architecture.md`): `stitch_io` (disks), `stitch_patch` (write-before
//! dependencies), `stitch_zone` (zones and extents), `stitch_wal` (the log), `stitch_filter`
//! (quotient filters), and this crate.
//!
//! # Interior layers
//!
//! This crate's modules, bottom up. A module imports only from modules listed before it
//! (`tests/layers.rs` fails on any import cycle between them):
//!
//! 1. `error`: [`Error`] and [`Result`].
//! 2. `codec`, `bounds`, `seq_counts`: varints and a checked byte reader; where a key stands
//!    against a range's bounds; a multiset of the sequence numbers readers hold.
//! 3. `entry`: a version of a key and its value (or tombstone), and range tombstones.
//! 4. `batch`: table ids, [`WriteBatch`] and a batch's log encoding.
//! 5. `options`: [`Options`], [`Durability`], [`Stitching`] and the size limits.
//! 6. `merge_iter`: merging sorted sources of versions, and what a reader at a snapshot sees
//!    of them (or a merge must keep).
//! 7. `layout/`: a table's layout string (the stack of dTable modules its data goes through),
//!    parsed and checked (`layout::spec`), and the layouts: the VT-tree (`layout::vtree`) with
//!    its memtable (the concurrent skip list of versions), its sorted runs on disk (`run/`:
//!    blocks, index, read cache, builder, and the stitching merge of runs, `run::stitch`), and
//!    its dTables (`dtable/`: the one interface over memtables and runs, filters in front of
//!    runs, and the overlay that stacks them into a table's read view), and its halves of
//!    compaction and defragmentation; the partition (`layout::partition`): a table's key
//!    space cut into regions, each with its stack, and the read view over them.
//!    `layout::TableData` is what `db/` needs of any layout.
//! 8. `manifest`: the checkpoint's root record and its encoding.
//! 9. `version`: the immutable picture of every table (its name, layout and data), and a
//!    partitioned table's regions: the routing of writes to them and the view over them.
//! 10. `concurrency/`: the transaction oracle (optimistic validation) and the lock manager.
//! 11. `db/`: the database: opening and recovery, the write path, checkpoints, compaction,
//!     snapshots, defragmentation, patchgroups, large values (`db::large`: values stored as
//!     chunk extents outside the runs, read and written by byte range), the public [`Db`].
//! 12. `txn/`: transactions over a [`Db`].
//! 13. `ctable/`: column tables (Anvil's cTables), built on the public [`Db`],
//!     [`Transaction`] and [`Snapshot`] alone.
//! 14. `fuzzing`: the stored formats' decoders as plain functions over bytes, for the fuzz
//!     targets (hidden from the documentation).

mod batch;
mod bounds;
mod codec;
mod concurrency;
mod ctable;
mod db;
mod entry;
mod error;
#[doc(hidden)]
pub mod fuzzing;
mod layout;
mod manifest;
mod merge_iter;
mod options;
mod seq_counts;
mod txn;
mod version;

pub use batch::{TableId, WriteBatch};
pub use ctable::{
    CTable, CTableInfo, CTableIter, CTableKind, CTableRead, CTableWrite, Values, MAX_COLUMNS,
};
pub use db::{
    max_large_value_len, AppendedBytes, ChangedSpan, CheckReport, Commit, CommitObserver, Damage,
    Db, DbIter, DefragReport, Engaged, LostKeys, ObserverGuard, PatchGroup, Placed,
    RecordCacheStats, RepairReport, Salvage, Snapshot, SnapshotInfo, Stats, StoreCheck, TableStats,
    ValueReader, WriteStalls, DEFAULT_TABLE, LARGE_VALUE_THRESHOLD,
};
pub use error::{Error, Result};
pub use layout::vtree::run::MergeStats;
pub use options::{max_value_len, Durability, Options, Stitching, MAX_KEY_LEN};
pub use stitch_io::{
    read_direct, spin_for_reads, Disk, FileDisk, IoError, IoErrorKind, IoOp, MemDisk, SimConfig,
    SimDisk, Space,
};
pub use stitch_patch::{CacheStats, ContextGuard, GroupId, PatchContext, PatchGroupError};
pub use stitch_zone::ZoneStats;
pub use txn::{Isolation, Nested, Transaction, TxnIter};

/// The README's examples, compiled as doctests so they cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeExamples;
