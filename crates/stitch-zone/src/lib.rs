//! Layer 3 of StitchDB: zones, superblocks and checksummed, reference-counted extents.
//!
//! The store is one disk cut into fixed zones (8 MiB by default). Zone 0 holds two superblocks,
//! written alternately; the newer valid one wins at open. Other zones hold either *extents*
//! (checksummed byte strings appended in open zones, shared by reference count, Goby-style) or
//! belong whole to one owner such as a log segment. All writes go through the patch layer's
//! [`BlockCache`](stitch_patch::BlockCache), so callers can order them by dependencies.

mod extent;
mod framed;
#[doc(hidden)]
pub mod fuzzing;
mod store;
mod superblock;

pub use extent::{ExtentAddr, ExtentKind, EXTENT_HEADER_LEN};
pub use framed::FramedBatch;
pub use store::{
    ReleaseHandler, Reserve, Stream, ZoneConfig, ZoneId, ZoneStats, ZoneStore, DEFAULT_AHEAD_ZONES,
    DEFAULT_RECYCLE_BYTES,
};
pub use superblock::{read_slots, SlotState, Superblock, FORMAT_VERSION, SLOT_ALL_ZEROS};

/// Errors of the zone layer. Every corruption error names the structure and its place.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ZoneError {
    /// The disk failed.
    #[error(transparent)]
    Io(#[from] stitch_io::IoError),
    /// The block cache failed (a write failed earlier, or a dependency was refused).
    #[error(transparent)]
    Patch(#[from] stitch_patch::PatchError),
    /// A stored structure failed its checks.
    #[error("corrupt {what} at {place}: {detail}")]
    Corrupt {
        /// Which structure (an extent, a superblock slot, a zone header ...).
        what: &'static str,
        /// Where it lies.
        place: String,
        /// What is wrong with it.
        detail: String,
    },
    /// Neither superblock slot holds a valid superblock.
    #[error("not a StitchDB store: {0}")]
    NotAStore(String),
    /// A valid superblock of a format version this build does not read.
    #[error("unsupported format version {found} (this build reads version {supported})")]
    Version {
        /// The store's format version.
        found: u32,
        /// The one this build reads.
        supported: u32,
    },
    /// No zone is free and the disk cannot grow.
    #[error("no space: {0}")]
    NoSpace(String),
    /// An extent longer than a zone (the address asked for, and the zone size).
    #[error("extent {0} is too large for a zone ({1} bytes)")]
    TooLarge(ExtentAddr, u64),
    /// A configuration the store cannot use.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A release of an extent whose reference count is already zero.
    #[error("extent {0} is not live (reference count already zero)")]
    Dead(ExtentAddr),
}

/// A result whose error is a [`ZoneError`].
pub type Result<T> = std::result::Result<T, ZoneError>;
