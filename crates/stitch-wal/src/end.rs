//! Where and why a log ends ([`LogEnd`]): a clean end, a torn tail, a file cut short, or
//! damage ([`LogDamage`]: valid records past a bad one vouch that it was durable). The reader
//! finds the end; an error ([`WalError::Damaged`](crate::WalError::Damaged)) and recovery's
//! report carry it.

use crate::record::RecordError;
use crate::{LogPosition, Lsn};
use std::fmt;
use stitch_zone::ZoneId;

/// Where and why a log ended. A clean or torn end is normal; an end with
/// [`damage`](Self::damage) is not (recovery refuses it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEnd {
    /// Where the next record would have been (just after the last valid one).
    pub at: LogPosition,
    /// Why the bytes at `at` are not the next record.
    pub record: RecordError,
    /// Why the log does not continue in the next segment's zone.
    pub next_segment: String,
    /// Valid records of the log past `at` that prove the bytes at `at` were durable.
    pub damage: Option<LogDamage>,
    /// The zone the log would continue in, when it lies past the end of the store's file
    /// though a sync covered the segment header naming it: the file was cut (see
    /// "Reading a log" in `docs/format.md`). Records past `at` may have been lost with it.
    pub cut: Option<ZoneId>,
}

/// Records of a log past a bad record that vouch for it: the log was damaged there after it
/// was synced, so the records from the bad one on are out of reach of a plain read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDamage {
    /// The first valid record of the log past the bad one (reading can resume here).
    pub resume: LogPosition,
    /// A record past the bad one appended once the bad one was durable.
    pub vouched_by: Lsn,
    /// The newest record of the log readable past the damage (following it from `resume`).
    pub last_lsn: Lsn,
}

impl LogEnd {
    /// True when nothing but unwritten or stale bytes follow the last record; false for a
    /// torn or corrupt record (normal after a crash, but worth a note) or damage.
    pub fn is_clean(&self) -> bool {
        self.damage.is_none()
            && self.cut.is_none()
            && matches!(
                self.record,
                RecordError::Zeros | RecordError::NoRoom { .. } | RecordError::UnexpectedLsn { .. }
            )
    }

    /// Records out of reach past a damaged end (the bad one included): 0 for a clean or torn
    /// end.
    pub fn out_of_reach(&self) -> u64 {
        self.damage
            .as_ref()
            .map_or(0, |d| d.last_lsn.saturating_sub(self.at.lsn) + 1)
    }
}

impl fmt::Display for LogEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.damage, self.cut) {
            (None, Some(zone)) => write!(
                f,
                "log ends at {}: {}; the segment header names zone {zone} for the next \
                 segment, which lies past the end of the file, though a sync covered the \
                 header (the store grows before the header naming a new zone is written): \
                 the file was cut, truncated?",
                self.at, self.record
            ),
            (None, None) => write!(
                f,
                "log ends at {}: {}; next segment: {}",
                self.at, self.record, self.next_segment
            ),
            (Some(d), _) => write!(
                f,
                "log damaged at {}: {}; {} records (lsn {}..={}) are out of reach past it \
                 (lsn {} at zone {} offset {} vouches that lsn {} was durable)",
                self.at,
                self.record,
                self.out_of_reach(),
                self.at.lsn,
                d.last_lsn,
                d.vouched_by,
                d.resume.zone,
                d.resume.offset,
                self.at.lsn
            ),
        }
    }
}
