//! Reading a log: records in LSN order from a position, across segments, to the first thing
//! that is not valid (the log's end).

use crate::record::{decode_record, LogRecord, RecordError};
use crate::segment::{SegmentHeader, SEGMENT_HEADER_LEN};
use crate::{LogPosition, Lsn, Result, WalError};
use std::fmt;
use stitch_zone::{ZoneId, ZoneStore};

/// Where and why a log ended. Every log ends somewhere; none of these is an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEnd {
    /// Where the next record would have been (just after the last valid one).
    pub at: LogPosition,
    /// Why the bytes at `at` are not the next record.
    pub record: RecordError,
    /// Why the log does not continue in the next segment's zone.
    pub next_segment: String,
}

impl LogEnd {
    /// True when nothing but unwritten or stale bytes follow the last record; false for a
    /// torn or corrupt record (normal after a crash, but worth a note).
    pub fn is_clean(&self) -> bool {
        matches!(
            self.record,
            RecordError::Zeros | RecordError::NoRoom { .. } | RecordError::UnexpectedLsn { .. }
        )
    }
}

impl fmt::Display for LogEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "log ends at {}: {}; next segment: {}",
            self.at, self.record, self.next_segment
        )
    }
}

/// Reads the records of one log. It only reads (through the block cache): it claims nothing.
pub struct LogReader<'a> {
    zones: &'a ZoneStore,
    epoch: u64,
    zone: ZoneId,
    header: SegmentHeader,
    /// The whole current segment.
    buf: Vec<u8>,
    offset: usize,
    expected: Lsn,
    chain: Vec<ZoneId>,
    end: Option<LogEnd>,
}

impl<'a> LogReader<'a> {
    /// Starts reading the log of epoch `epoch` at `start`. A start segment whose header is
    /// unreadable, of another epoch or inconsistent with `start` is an error naming the zone.
    pub fn open(zones: &'a ZoneStore, start: LogPosition, epoch: u64) -> Result<LogReader<'a>> {
        let zone_size = zones.zone_size();
        let bad_position = |detail: String| WalError::Corrupt {
            what: "log start position",
            place: start.to_string(),
            detail,
        };
        if !zone_in_store(zones, start.zone) {
            return Err(bad_position(format!(
                "zone {} is not a zone of the store",
                start.zone
            )));
        }
        let offset = start.offset as u64;
        if offset < SEGMENT_HEADER_LEN as u64 || offset > zone_size {
            return Err(bad_position(format!(
                "offset outside a segment's records (zone size {zone_size})"
            )));
        }
        let buf = read_zone(zones, start.zone)?;
        let place = format!(
            "zone {} (disk byte {})",
            start.zone,
            zones.zone_offset(start.zone)
        );
        let corrupt = |detail: String| WalError::Corrupt {
            what: "log segment header",
            place: place.clone(),
            detail,
        };
        let header = SegmentHeader::decode(&buf).map_err(corrupt)?;
        if header.epoch != epoch {
            return Err(corrupt(format!(
                "segment of epoch {}, expected epoch {epoch}",
                header.epoch
            )));
        }
        let consistent = if offset == SEGMENT_HEADER_LEN as u64 {
            start.lsn == header.first_lsn
        } else {
            start.lsn > header.first_lsn
        };
        if !consistent {
            return Err(bad_position(format!(
                "segment's first lsn is {}",
                header.first_lsn
            )));
        }
        Ok(LogReader {
            zones,
            epoch,
            zone: start.zone,
            header,
            buf,
            offset: offset as usize,
            expected: start.lsn,
            chain: vec![start.zone],
            end: None,
        })
    }

    /// The next record and where it starts; `None` at the log's end (see [`end`](Self::end)).
    /// Errors are I/O errors only: invalid bytes end the log.
    pub fn next_record(&mut self) -> Result<Option<(LogPosition, LogRecord)>> {
        loop {
            if self.end.is_some() {
                return Ok(None);
            }
            let at = self.position();
            match decode_record(&self.buf[self.offset..], self.epoch, self.expected) {
                Ok((record, used)) => {
                    self.offset += used;
                    self.expected += 1;
                    return Ok(Some((at, record)));
                }
                Err(record) => {
                    if let Err(next_segment) = self.enter_next_segment()? {
                        self.end = Some(LogEnd {
                            at,
                            record,
                            next_segment,
                        });
                    }
                }
            }
        }
    }

    /// Where the next record is (or would be).
    pub fn position(&self) -> LogPosition {
        LogPosition {
            zone: self.zone,
            offset: self.offset as u32,
            lsn: self.expected,
        }
    }

    /// Why the log ended, once [`next_record`](Self::next_record) returned `None`.
    pub fn end(&self) -> Option<&LogEnd> {
        self.end.as_ref()
    }

    /// The zones of the log so far, in order: the segments read, then the zone preallocated
    /// for the next segment (if it lies in the store and is not one of them).
    pub fn zones(&self) -> Vec<ZoneId> {
        let mut zones = self.chain.clone();
        let next = self.header.next_zone;
        if zone_in_store(self.zones, next) && !zones.contains(&next) {
            zones.push(next);
        }
        zones
    }

    /// Moves to the zone the current header names, if it continues this log.
    /// `Ok(Err(why))` when it does not.
    fn enter_next_segment(&mut self) -> Result<std::result::Result<(), String>> {
        let next = self.header.next_zone;
        if !zone_in_store(self.zones, next) {
            return Ok(Err(format!("zone {next} lies outside the store")));
        }
        if self.chain.contains(&next) {
            return Ok(Err(format!("zone {next} is already part of this log")));
        }
        let mut bytes = [0u8; SEGMENT_HEADER_LEN];
        self.zones
            .cache()
            .read(self.zones.zone_offset(next), &mut bytes)?;
        let header = match SegmentHeader::decode(&bytes) {
            Ok(h) => h,
            Err(why) => return Ok(Err(format!("zone {next}: {why}"))),
        };
        let wanted = (self.epoch, self.header.seq + 1, self.expected);
        if (header.epoch, header.seq, header.first_lsn) != wanted {
            return Ok(Err(format!(
                "zone {next} holds segment (epoch {}, seq {}, first lsn {}), not (epoch {}, seq {}, first lsn {})",
                header.epoch, header.seq, header.first_lsn, wanted.0, wanted.1, wanted.2
            )));
        }
        self.buf = read_zone(self.zones, next)?;
        self.zone = next;
        self.header = header;
        self.offset = SEGMENT_HEADER_LEN;
        self.chain.push(next);
        Ok(Ok(()))
    }
}

/// True when `zone` is a whole zone of the store other than zone 0 (the superblocks).
fn zone_in_store(zones: &ZoneStore, zone: ZoneId) -> bool {
    let end = (zone as u64 + 1).checked_mul(zones.zone_size());
    zone != 0 && end.is_some_and(|end| end <= zones.cache().disk().len())
}

fn read_zone(zones: &ZoneStore, zone: ZoneId) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; zones.zone_size() as usize];
    zones.cache().read(zones.zone_offset(zone), &mut buf)?;
    Ok(buf)
}
