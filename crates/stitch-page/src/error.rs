//! The page store's errors.

use crate::PageId;
use stitch_wal::TxnId;

/// What went wrong in the page store or a structure over it.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// The log failed (or recovery refused the log).
    #[error(transparent)]
    Wal(#[from] stitch_wal::WalError),
    /// The zone store failed.
    #[error(transparent)]
    Zone(#[from] stitch_zone::ZoneError),
    /// The block cache failed.
    #[error(transparent)]
    Patch(#[from] stitch_patch::PatchError),
    /// A page failed its checks (checksum, magic, version, its own id): damage.
    #[error("corrupt page {page} (disk byte {offset}): {detail}")]
    CorruptPage {
        /// The page's number in the page file.
        page: PageId,
        /// Where it lies on the device.
        offset: u64,
        /// What is wrong with it.
        detail: String,
    },
    /// A stored structure other than a page (the checkpoint record, a log payload, a
    /// structure's page contents) failed its checks.
    #[error("corrupt {what}: {detail}")]
    Corrupt {
        /// Which structure.
        what: &'static str,
        /// What is wrong with it.
        detail: String,
    },
    /// A key or value past the documented limits.
    #[error("entry too large: key {key} bytes, value {value} bytes (at most {max} bytes together, key 1..={max_key})")]
    TooLarge {
        /// The key's length.
        key: usize,
        /// The value's length.
        value: usize,
        /// The most key and value may hold together.
        max: usize,
        /// The longest key.
        max_key: usize,
    },
    /// Another live transaction holds the key (no-wait locking: retry after it ends).
    #[error("key locked by transaction {holder}")]
    Locked {
        /// The transaction holding the lock.
        holder: TxnId,
    },
    /// The transaction is not live (never begun, or already committed or aborted).
    #[error("transaction {0} is not live")]
    NoSuchTxn(TxnId),
    /// A hash table or the page file is full.
    #[error("full: {0}")]
    Full(String),
    /// Every frame of the buffer pool is pinned.
    #[error("buffer pool exhausted: all {0} frames are pinned")]
    PoolExhausted(usize),
    /// An earlier failure left the page store unusable until it is reopened (which recovers).
    #[error("page store failed earlier and must be reopened: {0}")]
    Failed(String),
    /// A bad argument.
    #[error("invalid: {0}")]
    Invalid(String),
}

/// The page store's result type.
pub type Result<T> = std::result::Result<T, PageError>;
