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
//! dependencies), `stitch_zone` (zones and extents), `stitch_wal` (the log), and this crate:
//! memtables, sorted runs, the manifest, and the database itself.

mod batch;
mod bounds;
mod codec;
mod db;
mod dtable;
mod error;
mod manifest;
mod memtable;
mod merge;
mod options;
mod range_del;
mod run;
mod seq_counts;
mod txn;

pub use batch::{TableId, WriteBatch};
pub use db::{
    AppendedBytes, CheckReport, Db, DbIter, DefragReport, Snapshot, SnapshotInfo, Stats,
    TableStats, DEFAULT_TABLE,
};
pub use error::{Error, Result};
pub use options::{max_value_len, Durability, Options, MAX_KEY_LEN};
pub use run::{MergeStats, Stitching};
pub use stitch_io::{Disk, FileDisk, IoError, IoErrorKind, MemDisk, SimConfig, SimDisk};
pub use stitch_patch::{CacheStats, GroupId};
pub use stitch_zone::ZoneStats;
pub use txn::{Isolation, Nested, Transaction, TxnIter};

/// The README's examples, compiled as doctests so they cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeExamples;
