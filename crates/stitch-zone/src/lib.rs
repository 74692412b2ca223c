//! Layer 3 of StitchDB: zones, superblocks and checksummed, reference-counted extents.
//!
//! The store is one disk cut into fixed zones (8 MiB by default). Zone 0 holds two superblocks,
//! written alternately; the newer valid one wins at open. Other zones hold either *extents*
//! (checksummed byte strings appended in open zones, shared by reference count, Goby-style) or
//! belong whole to one owner such as a log segment. All writes go through the patch layer's
//! [`BlockCache`](stitch_patch::BlockCache), so callers can order them by dependencies.

mod extent;
mod store;
mod superblock;

pub use extent::{ExtentAddr, ExtentKind, EXTENT_HEADER_LEN};
pub use store::{
    ReleaseHandler, Stream, ZoneConfig, ZoneId, ZoneStats, ZoneStore, DEFAULT_RECYCLE_BYTES,
};
pub use superblock::{read_slots, SlotState, Superblock, FORMAT_VERSION};

/// Errors of the zone layer. Every corruption error names the structure and its place.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ZoneError {
    #[error(transparent)]
    Io(#[from] stitch_io::IoError),
    #[error(transparent)]
    Patch(#[from] stitch_patch::PatchError),
    #[error("corrupt {what} at {place}: {detail}")]
    Corrupt {
        what: &'static str,
        place: String,
        detail: String,
    },
    #[error("not a StitchDB store: {0}")]
    NotAStore(String),
    #[error("unsupported format version {found} (this build reads version {supported})")]
    Version { found: u32, supported: u32 },
    #[error("no space: {0}")]
    NoSpace(String),
    #[error("extent {0} is too large for a zone ({1} bytes)")]
    TooLarge(ExtentAddr, u64),
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("extent {0} is not live (reference count already zero)")]
    Dead(ExtentAddr),
}

pub type Result<T> = std::result::Result<T, ZoneError>;
