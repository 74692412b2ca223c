//! Errors of the log.

use crate::{Lsn, OpId, TxnId};

/// Errors of the write-ahead log. Corruption errors name the structure and its place.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum WalError {
    /// The zone layer failed.
    #[error(transparent)]
    Zone(#[from] stitch_zone::ZoneError),
    /// The block cache failed.
    #[error(transparent)]
    Patch(#[from] stitch_patch::PatchError),
    /// A segment header or log record failed its checks where one must be valid.
    #[error("corrupt {what} at {place}: {detail}")]
    Corrupt {
        /// Which structure.
        what: &'static str,
        /// Where it lies.
        place: String,
        /// What is wrong with it.
        detail: String,
    },
    /// Valid records past a bad one vouch that it was durable: the log was damaged after it
    /// was synced, and the records from the bad one on are out of reach.
    #[error("{0}")]
    Damaged(Box<crate::LogEnd>),
    #[error(
        "log record payload of {len} bytes is larger than the {max} bytes one segment can hold"
    )]
    /// A record whose payload does not fit in a segment.
    TooLarge {
        /// The payload's length.
        len: usize,
        /// The most a segment holds.
        max: usize,
    },
    /// A request the log cannot take (say, an epoch not above the last one).
    #[error("invalid log request: {0}")]
    Invalid(String),
    /// An earlier write or flush failed; the log accepts nothing more.
    #[error("the log is read-only after an earlier failure: {0}")]
    Failed(Box<WalError>),
    /// An operation id registered twice.
    #[error("operation id {op} is already registered (as {name:?})")]
    DuplicateOp {
        /// The id.
        op: OpId,
        /// The name it was registered under first.
        name: String,
    },
    /// An operation id the log keeps for itself.
    #[error("operation id {op} is reserved for the log itself")]
    ReservedOp {
        /// The id.
        op: OpId,
    },
    /// Recovery met a record of an operation no one registered.
    #[error("log record lsn {lsn} (txn {txn}) uses operation id {op}, which is not registered")]
    UnknownOp {
        /// The record's LSN.
        lsn: Lsn,
        /// Its transaction.
        txn: TxnId,
        /// Its operation id.
        op: OpId,
    },
    /// An operation's redo function failed during recovery.
    #[error("redo of log record lsn {lsn} (txn {txn}, op {op} {name:?}) failed: {message}")]
    Redo {
        /// The record's LSN.
        lsn: Lsn,
        /// Its transaction.
        txn: TxnId,
        /// Its operation id.
        op: OpId,
        /// The operation's registered name.
        name: String,
        /// What the redo function said.
        message: String,
    },
    /// An operation's undo function failed during recovery.
    #[error("undo of log record lsn {lsn} (txn {txn}, op {op} {name:?}) failed: {message}")]
    Undo {
        /// The record's LSN.
        lsn: Lsn,
        /// Its transaction.
        txn: TxnId,
        /// Its operation id.
        op: OpId,
        /// The operation's registered name.
        name: String,
        /// What the undo function said.
        message: String,
    },
}

/// A result whose error is a [`WalError`].
pub type Result<T> = std::result::Result<T, WalError>;
