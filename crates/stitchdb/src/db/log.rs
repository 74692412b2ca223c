//! The database's use of the write-ahead log: its two operations, their payloads, and the
//! adapter between the log's types and the manifest's.

use crate::manifest::LogStart;
use crate::Error;
use stitch_wal::LogPosition;

/// A batch of puts and deletes (redo-only: applied at commit, so losers need no undo).
pub const OP_BATCH: u16 = 1;
/// A table was created: its id and name.
pub const OP_CREATE_TABLE: u16 = 2;

pub fn log_err(e: impl std::fmt::Display) -> Error {
    Error::Log(e.to_string())
}

pub fn to_start(pos: LogPosition, epoch: u64) -> LogStart {
    LogStart {
        zone: pos.zone,
        offset: pos.offset as u64,
        lsn: pos.lsn,
        epoch,
    }
}

pub fn to_position(start: &LogStart) -> LogPosition {
    LogPosition {
        zone: start.zone,
        offset: start.offset as u32,
        lsn: start.lsn,
    }
}
