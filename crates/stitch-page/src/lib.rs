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
mod ops;
pub mod page;
pub mod pool;
pub mod recovery;
mod store;

pub use error::{PageError, Result};
pub use hash::LinearHash;
pub use ops::{OP_COMMIT, OP_COMPENSATE, OP_PAGE_WRITE, OP_ROLLED_BACK};
pub use pool::PoolStats;
pub use store::{PageStore, PageStoreConfig};

/// A page's number in the page file.
pub type PageId = u32;

/// The logical undo of `op`, if a structure over the store registered `op` as logical.
///
/// The structures over the page store (today the linear hash) import the store to log and
/// undo their operations; the store and its recovery reach those operations only through
/// these two functions of the crate root, which lists the structures, so no module of the
/// crate imports one that imports it (operations registered by the structures that use them,
/// as Stasis has it).
pub(crate) fn logical_undo(op: stitch_wal::OpId) -> Option<store::LogicalUndo> {
    hash::logical_undo(op)
}

/// Registers the structures' operations for recovery, acting on recovery's `state`.
pub(crate) fn register_structure_ops(
    registry: &mut stitch_wal::OpRegistry,
    state: &std::sync::Arc<parking_lot::Mutex<recovery::Redone>>,
) -> Result<()> {
    hash::register_ops(registry, state)
}
