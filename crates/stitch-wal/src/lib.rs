//! Layer 4 of StitchDB: the write-ahead log (Stasis-style).
//!
//! The log is a chain of *segments*, each a whole zone taken from the
//! [`ZoneStore`](stitch_zone::ZoneStore). A record is appended either into the block cache at
//! once, as a patch that depends on no other record ([`Wal::append_with_deps`], for callers
//! that order the record against patches of their own), or into the log's own buffer
//! ([`Wal::append_buffered`]), which a flush writes into the cache in order, and which a
//! checkpoint that overtakes it drops unwritten. [`Wal::sync_to`] makes a prefix durable with
//! group commit (one flush shared by every concurrent caller); [`Wal::write_through`] hands a
//! prefix to the operating system without a sync, so a crash of the process loses none of
//! it (power loss still may). Upper layers register their
//! operations by id in an [`OpRegistry`] with a redo function and, where needed, an undo
//! function; [`Wal::recover`] runs ARIES-style analysis, redo and undo over a log without
//! writing anything.
//!
//! # On-disk format
//!
//! A segment starts with a [`SEGMENT_HEADER_LEN`]-byte header ([`SEGMENT_MAGIC`], format
//! version [`WAL_FORMAT_VERSION`], the log's epoch, the segment's sequence number, its first
//! LSN and the zone preallocated for the next segment, under a CRC32C); records follow back to
//! back, each a [`RECORD_HEADER_LEN`]-byte header (CRC32C over the epoch, the header and the
//! payload; length, LSN, transaction, operation, flags, and how far back the log was durable
//! when the record was appended) and its payload. A log is read as a prefix: from a
//! [`LogPosition`] and its epoch, record by record while each is valid and has the next LSN,
//! into the next segment while its header continues the log, and a torn or stale tail ends it
//! cleanly. A bad record that later valid records vouch for (they were appended once it was
//! durable) is damage, not an end: recovery refuses it ([`WalError::Damaged`]). The byte-level format and the reading rules are specified in the
//! repository's `docs/format.md` ("Write-ahead log") and only there.
//!
//! # Durability protocol (what the upper layer must do)
//!
//! * A checkpoint that names a [`LogPosition`] must depend on the header patch returned with
//!   it ([`Wal::position`], [`Wal::start_patch`]). Segment headers are chained (each depends on
//!   the one before), so that patch covers every segment header up to the current one.
//! * Nothing is appended to a log until the superblock naming it is durable, and after every
//!   recovery a *new* log (new epoch, larger than any used before) is started with
//!   [`Wal::create`] instead of appending to the recovered one.
//! * Zones of segments a checkpoint no longer needs are given back with
//!   [`Wal::release_before`], passing the checkpoint's superblock patch: they are freed only
//!   once it is durable.

mod end;
mod error;
mod group;
mod reader;
mod record;
mod recovery;
mod registry;
mod segment;
mod writer;

pub use end::{LogDamage, LogEnd};
pub use error::{Result, WalError};
pub use reader::{find_log_start, segment_zones, LogReader, SkippedDamage};
pub use record::{
    decode_record, encode_record, encode_record_vouching, Flags, LogRecord, RecordError,
    RECORD_HEADER_LEN, RECORD_HEADER_LEN_V1,
};
pub use recovery::RecoveryReport;
pub use registry::{OpFn, OpRegistry, OP_NOOP};
pub use segment::{
    SegmentHeader, OLDEST_WAL_FORMAT_VERSION, SEGMENT_HEADER_LEN, SEGMENT_MAGIC, WAL_FORMAT_VERSION,
};
pub use writer::Wal;

use stitch_zone::ZoneId;

/// A log sequence number. LSNs are consecutive; 0 is never used for a record.
pub type Lsn = u64;
/// A transaction id, chosen by the upper layer.
pub type TxnId = u64;
/// An operation id, registered in an [`OpRegistry`].
pub type OpId = u16;

/// Where the record with `lsn` starts (or will be written): byte `offset` of zone `zone`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LogPosition {
    /// The segment's zone.
    pub zone: ZoneId,
    /// The byte offset in that zone.
    pub offset: u32,
    /// The record's log sequence number.
    pub lsn: Lsn,
}

impl std::fmt::Display for LogPosition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "lsn {} at zone {} offset {}",
            self.lsn, self.zone, self.offset
        )
    }
}
