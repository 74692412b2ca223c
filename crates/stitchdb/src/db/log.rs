//! The database's use of the write-ahead log: its two operations, their payloads, and the
//! adapter between the log's types and the manifest's.

use crate::manifest::LogStart;
use crate::Error;
use stitch_wal::LogPosition;

/// A batch of puts and deletes (redo-only: applied at commit, so losers need no undo). Only
/// replayed: logs written before range deletes existed hold these.
pub const OP_BATCH: u16 = 1;
/// A table was created: its id and name.
pub const OP_CREATE_TABLE: u16 = 2;
/// A batch of range deletes, puts and deletes: what every batch is logged as now.
pub const OP_BATCH_RANGES: u16 = 3;
/// A large transaction's commit: one record per private run it links, giving that run its
/// sequence number. Nothing to redo: the checkpoint that links the runs is durable before
/// the commit returns, and a crash before that loses the transaction whole (it was never
/// acknowledged, and no later commit can be in the log: the writer lock is held meanwhile).
pub const OP_TXN_LINK: u16 = 4;
/// A batch whose long sorted stretch of puts to one table was written as a level-0 run
/// (durable before the record): the table, the run's manifest entry, then the batch's other
/// operations as `OP_BATCH_RANGES` encodes them. Redo adopts the run and applies the rest.
pub const OP_INGEST: u16 = 5;

/// A log error as the store's error, keeping it as the source.
pub fn log_err(e: stitch_wal::WalError) -> Error {
    Error::Log(e)
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
