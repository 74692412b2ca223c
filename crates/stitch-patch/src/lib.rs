//! Layer 2 of StitchDB: Featherstitch patches.
//!
//! Every write reaches the [`Disk`](stitch_io::Disk) through one [`BlockCache`]. A write is a
//! *patch*: a change to a byte range of one block, or of several adjacent blocks when it
//! waits for nothing (an extent appended to a run), naming the patches it must not reach the
//! disk before. The cache's flush scheduler writes whatever is ready and issues a
//! `sync` only where a dependency crosses one, so many independent orderings share one sync.
//! Patchgroups ([`PatchGroups`]) expose the same ordering to applications.
//!
//! How the cache keeps that cheap and safe:
//! - A patch is *pending*, then *in flight* (written, not yet synced), then *committed*.
//!   Committed patches are forgotten. An empty patch commits once its dependencies have.
//! - A patch that waits for nothing pending when it is made is *hard*: it can be written
//!   whenever its block is, so it keeps no undo bytes. Others are *soft* and keep the bytes
//!   they replaced, so a block image can be written without them (*reverted*).
//! - A write that overwrites bytes of an uncommitted patch implicitly depends on it.
//! - New writes merge into an existing pending patch of their block when that adds no
//!   ordering constraint (`merge`), so a log tail or a rewritten data block stays one patch,
//!   and a stream of appends that wait for nothing stays one patch across its blocks
//!   (`PatchGraph::write_span`) rather than a patch per block and empty patches joining them,
//!   whose bookkeeping would cost more than the writes it orders.
//! - A patch spanning blocks is written with all of its blocks in one round, and nothing that
//!   depends on it shares a round with it: a crash may keep one block's write and lose
//!   another's.
//! - A crash may tear a write at 512-byte sectors, so two patches of one block share a
//!   write despite an explicit dependency only when both lie in one sector (`plan`).
//! - A flush proceeds in rounds: write every block with writable patches (adjacent blocks in
//!   one request), sync once, commit; the number of syncs is the longest chain of
//!   dependencies that must cross one.

mod blockio;
mod cache;
mod dot;
mod flush;
mod graph;
mod groups;
mod ids;
mod load;
mod lru;
mod merge;
mod patch;
mod plan;

pub use cache::{BlockCache, CacheConfig, CacheStats};
pub use groups::{
    ContextGuard, EngagedGroups, GroupId, PatchContext, PatchGroupError, PatchGroups,
};
pub use patch::{PatchId, PatchState};

/// Errors of the patch layer.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum PatchError {
    /// The disk failed.
    #[error(transparent)]
    Io(#[from] stitch_io::IoError),
    /// A previous write or sync failed; the cache accepts no more flushes.
    #[error("the block cache is read-only after an earlier write failure: {0}")]
    Failed(String),
    /// A dependency names a patch that does not exist (or was never created).
    #[error("unknown patch {0:?}")]
    UnknownPatch(PatchId),
    /// `add_dependency` on a patch that is not an empty patch, or is already in flight or committed.
    #[error("patch {0:?} can no longer gain dependencies")]
    Frozen(PatchId),
    /// The dependency would create a cycle.
    #[error("dependency {after:?} -> {before:?} would create a cycle")]
    Cycle {
        /// The patch that was to depend on `before`.
        after: PatchId,
        /// The patch it was to depend on.
        before: PatchId,
    },
}

/// A result whose error is a [`PatchError`].
pub type Result<T> = std::result::Result<T, PatchError>;
