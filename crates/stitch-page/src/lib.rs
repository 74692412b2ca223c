//! Layer 8 of StitchDB: Stasis's page store, and a linear hash table over it.
//!
//! * [`PageStore`]: an update-in-place page file of 4 KiB pages ([`page`]) in whole zones
//!   of the [`ZoneStore`](stitch_zone::ZoneStore) ([`file`](mod@file)), a buffer pool with LRU-2
//!   replacement, steal and no-force ([`pool`]), transactions over stitch-wal's log with
//!   operations registered by id (redo and undo), nested top actions, rollback with
//!   compensation records, checkpoints ([`checkpoint`]) and ARIES recovery ([`recovery`]).
//! * [`LinearHash`]: a linear hash table whose puts and deletes are undone logically and
//!   whose bucket splits are nested top actions ([`hash`]).
//!
//! The design, and what it assumes of the device, is in the repository's
//! `docs/pagestore.md`; the page and record formats are in `docs/format.md` ("Page store").

pub mod change;
pub mod checkpoint;
mod error;
pub mod file;
pub mod hash;
pub mod page;
pub mod pool;
pub mod recovery;
mod store;

pub use error::{PageError, Result};
pub use hash::LinearHash;
pub use pool::PoolStats;
pub use store::{
    PageStore, PageStoreConfig, OP_COMMIT, OP_COMPENSATE, OP_PAGE_WRITE, OP_ROLLED_BACK,
};

/// A page's number in the page file.
pub type PageId = u32;
