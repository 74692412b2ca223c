//! Errors of the log.

use crate::{Lsn, OpId, TxnId};

/// Errors of the write-ahead log. Corruption errors name the structure and its place.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum WalError {
    #[error(transparent)]
    Zone(#[from] stitch_zone::ZoneError),
    #[error(transparent)]
    Patch(#[from] stitch_patch::PatchError),
    #[error("corrupt {what} at {place}: {detail}")]
    Corrupt {
        what: &'static str,
        place: String,
        detail: String,
    },
    /// Valid records past a bad one vouch that it was durable: the log was damaged after it
    /// was synced, and the records from the bad one on are out of reach.
    #[error("{0}")]
    Damaged(Box<crate::LogEnd>),
    #[error(
        "log record payload of {len} bytes is larger than the {max} bytes one segment can hold"
    )]
    TooLarge { len: usize, max: usize },
    #[error("invalid log request: {0}")]
    Invalid(String),
    /// An earlier write or flush failed; the log accepts nothing more.
    #[error("the log is read-only after an earlier failure: {0}")]
    Failed(Box<WalError>),
    #[error("operation id {op} is already registered (as {name:?})")]
    DuplicateOp { op: OpId, name: String },
    #[error("operation id {op} is reserved for the log itself")]
    ReservedOp { op: OpId },
    #[error("log record lsn {lsn} (txn {txn}) uses operation id {op}, which is not registered")]
    UnknownOp { lsn: Lsn, txn: TxnId, op: OpId },
    #[error("redo of log record lsn {lsn} (txn {txn}, op {op} {name:?}) failed: {message}")]
    Redo {
        lsn: Lsn,
        txn: TxnId,
        op: OpId,
        name: String,
        message: String,
    },
    #[error("undo of log record lsn {lsn} (txn {txn}, op {op} {name:?}) failed: {message}")]
    Undo {
        lsn: Lsn,
        txn: TxnId,
        op: OpId,
        name: String,
        message: String,
    },
}

pub type Result<T> = std::result::Result<T, WalError>;
