//! Layer 4 of StitchDB: the write-ahead log (Stasis-style).
//!
//! The log is a chain of *segments*, each a whole zone taken from the
//! [`ZoneStore`](stitch_zone::ZoneStore). Records are written into the block cache at once, as
//! patches with no dependencies between them; [`Wal::sync_to`] makes a prefix durable with
//! group commit (one flush shared by every concurrent caller). Upper layers register their
//! operations by id in an [`OpRegistry`] with a redo function and, where needed, an undo
//! function; [`Wal::recover`] runs ARIES-style analysis, redo and undo over a log without
//! writing anything.
//!
//! # On-disk format (version 1)
//!
//! All integers are little-endian. CRCs are CRC32C (Castagnoli).
//!
//! ## Segment header
//!
//! Every segment is one zone. Its first [`SEGMENT_HEADER_LEN`] (64) bytes are the header:
//!
//! | bytes  | field       | meaning                                                        |
//! |--------|-------------|----------------------------------------------------------------|
//! | 0..8   | magic       | `"STWALSEG"`                                                   |
//! | 8..12  | version     | u32, format version ([`WAL_FORMAT_VERSION`] = 1)               |
//! | 12..16 | next zone   | u32, the zone preallocated for the segment after this one      |
//! | 16..24 | epoch       | u64, the log's epoch (the superblock sequence number it was made for) |
//! | 24..32 | seq         | u64, segment sequence number: 0 for a log's first segment, +1 per segment |
//! | 32..40 | first lsn   | u64, the LSN of the first record this segment holds            |
//! | 40..44 | crc         | u32, CRC32C of bytes 0..40                                     |
//! | 44..64 | reserved    | zero                                                           |
//!
//! Records follow from byte 64, back to back (no padding, no alignment). A record never spans
//! segments: when the next record does not fit in what is left of a segment, the log continues
//! at byte 64 of the preallocated next zone, whose header is written then (preallocating the
//! zone after it). The unused tail of a segment holds whatever was there before.
//!
//! ## Record
//!
//! A [`RECORD_HEADER_LEN`] (28) byte header, then the payload:
//!
//! | bytes  | field    | meaning                                                        |
//! |--------|----------|----------------------------------------------------------------|
//! | 0..4   | crc      | u32, CRC32C of: the segment's epoch (u64 LE), bytes 4..28, the payload |
//! | 4..8   | len      | u32, payload length                                            |
//! | 8..16  | lsn      | u64, log sequence number: consecutive, +1 per record           |
//! | 16..24 | txn      | u64, transaction id                                            |
//! | 24..26 | op       | u16, operation id (0 = [`OP_NOOP`], reserved; others from the [`OpRegistry`]) |
//! | 26     | flags    | u8: 1 = AUTOCOMMIT, 2 = COMMIT, 4 = ABORT; other bits must be 0 |
//! | 27     | reserved | zero                                                           |
//! | 28..   | payload  | `len` bytes                                                    |
//!
//! At most one of the three flags is set. AUTOCOMMIT: the record is a whole committed
//! transaction by itself (its txn field is informational). COMMIT: the last record of
//! transaction `txn`, which committed. ABORT: the last record of `txn`, which aborted (it is a
//! loser for recovery: its undoable operations are undone).
//!
//! The epoch is not stored in the record but covered by its CRC, so a record left in a zone
//! by an earlier log (another epoch) fails its checksum.
//!
//! ## Reading a log
//!
//! A log is named by a [`LogPosition`] `(zone, offset, lsn)` (kept in the upper layer's
//! checkpoint) and its epoch. The start segment's header must be valid and carry that epoch
//! (otherwise recovery fails with an error naming the zone). Records are read while valid:
//! CRC correct under the epoch, sane length and flags, and `lsn` equal to the expected next
//! LSN. At the first record that is not valid the reader tries the next zone named by the
//! header: if that zone holds a valid header with the same epoch, `seq + 1` and `first lsn`
//! equal to the expected LSN, reading goes on at its byte 64. Otherwise the log ends there,
//! cleanly: a torn or stale tail is normal after a crash, not an error. Within an epoch a log
//! is append-only and never rewritten, so stale bytes (an earlier life of the zone, another
//! epoch) can never pass for the expected next record.
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

mod error;
mod group;
mod reader;
mod record;
mod recovery;
mod registry;
mod segment;
mod writer;

pub use error::{Result, WalError};
pub use reader::{LogEnd, LogReader};
pub use record::{decode_record, encode_record, Flags, LogRecord, RecordError, RECORD_HEADER_LEN};
pub use recovery::RecoveryReport;
pub use registry::{OpFn, OpRegistry, OP_NOOP};
pub use segment::{SegmentHeader, SEGMENT_HEADER_LEN, SEGMENT_MAGIC, WAL_FORMAT_VERSION};
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
    pub zone: ZoneId,
    pub offset: u32,
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
