//! Reading a log: records in LSN order from a position, across segments, to the first thing
//! that is not valid (the log's end), telling a torn tail from damage.
//!
//! Where the records stop, the rest of the segment and the zone preallocated for the next one
//! are searched for valid records of the log past the expected LSN. If one of them *vouches*
//! for the bad record (it was appended when that record was already durable: format 2's
//! vouched-for field), the bad record was damaged after it was synced and everything past it
//! is out of reach: the end is damage, not a torn tail. A torn tail holds only records no
//! sync covered, which vouch for none of the records they follow. What the reader finds there
//! is a [`LogEnd`] (in `end`).

use crate::end::{LogDamage, LogEnd};
use crate::record::{decode_any_lsn, decode_versioned, header_len, LogRecord, RecordError};
use crate::segment::{SegmentHeader, SEGMENT_HEADER_LEN};
use crate::{LogPosition, Lsn, Result, WalError};
use stitch_zone::{ZoneId, ZoneStore};

/// A stretch of log a salvaging reader skipped: from the bad record at `at` to `resume`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedDamage {
    /// Where the bad record is.
    pub at: LogPosition,
    /// What is wrong with it.
    pub record: RecordError,
    /// Where reading resumed: the first valid record of the log past it.
    pub resume: LogPosition,
}

/// Where reading resumes past damage.
struct Resume {
    position: LogPosition,
    vouched_by: Lsn,
    /// The header and bytes of the zone it is in, when that is not the current segment.
    segment: Option<(SegmentHeader, Vec<u8>)>,
}

/// What searching one zone's bytes past a bad record found.
#[derive(Default)]
struct Found {
    /// The first valid record of the log at or past the expected LSN: (offset, lsn).
    first: Option<(usize, Lsn)>,
    /// A record vouching for the expected LSN.
    vouched_by: Option<Lsn>,
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
    /// A sync is known to have covered the current segment's header: the start segment (a
    /// durable checkpoint names it), or a record read in it vouches for one of its records.
    header_synced: bool,
    chain: Vec<ZoneId>,
    end: Option<LogEnd>,
    /// Reading on past damage (repair) instead of ending there.
    salvage: bool,
    skipped: Vec<SkippedDamage>,
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
            header_synced: true,
            chain: vec![start.zone],
            end: None,
            salvage: false,
            skipped: Vec::new(),
        })
    }

    /// [`open`](Self::open) for salvage: damage does not end the log, reading resumes at the
    /// first valid record past it ([`skipped`](Self::skipped) lists where); the log ends at
    /// the first clean or torn end.
    pub fn open_salvaging(
        zones: &'a ZoneStore,
        start: LogPosition,
        epoch: u64,
    ) -> Result<LogReader<'a>> {
        let mut reader = Self::open(zones, start, epoch)?;
        reader.salvage = true;
        Ok(reader)
    }

    /// The damaged stretches a salvaging reader skipped so far.
    pub fn skipped(&self) -> &[SkippedDamage] {
        &self.skipped
    }

    /// The next record and where it starts; `None` at the log's end (see [`end`](Self::end)).
    /// Errors are I/O errors only: invalid bytes end the log (see [`LogEnd`] for damage).
    pub fn next_record(&mut self) -> Result<Option<(LogPosition, LogRecord)>> {
        loop {
            if self.end.is_some() {
                return Ok(None);
            }
            let at = self.position();
            let bytes = &self.buf[self.offset..];
            match decode_versioned(bytes, self.header.version, self.epoch, self.expected) {
                Ok(decoded) => {
                    self.offset += decoded.len;
                    self.expected += 1;
                    self.header_synced |= decoded.vouched >= self.header.first_lsn;
                    return Ok(Some((at, decoded.record)));
                }
                Err(record) => {
                    let Err(next_segment) = self.enter_next_segment()? else {
                        continue;
                    };
                    let Some(resume) = self.find_damage()? else {
                        self.end = Some(LogEnd {
                            at,
                            record,
                            next_segment,
                            damage: None,
                            cut: self.cut(),
                        });
                        continue;
                    };
                    if self.salvage {
                        self.skipped.push(SkippedDamage {
                            at,
                            record,
                            resume: resume.position,
                        });
                        self.jump(resume);
                        continue;
                    }
                    let damage = self.follow(resume)?;
                    self.end = Some(LogEnd {
                        at,
                        record,
                        next_segment,
                        damage: Some(damage),
                        cut: None,
                    });
                }
            }
        }
    }

    /// Searches the rest of the current segment, then the zone preallocated for the next,
    /// for a record of this log vouching for the expected LSN; if there is one, reading can
    /// resume at the first valid record of the log past the expected position.
    fn find_damage(&self) -> Result<Option<Resume>> {
        if self.header.version < 2 {
            // Format 1 records vouch for nothing: a bad record ends the log, as it always did.
            return Ok(None);
        }
        let here = search(
            &self.buf,
            self.offset + 1,
            self.header.version,
            self.epoch,
            self.expected,
        );
        let in_current = |offset: usize, lsn: Lsn| LogPosition {
            zone: self.zone,
            offset: offset as u32,
            lsn,
        };
        if let (Some((offset, lsn)), Some(vouched_by)) = (here.first, here.vouched_by) {
            return Ok(Some(Resume {
                position: in_current(offset, lsn),
                vouched_by,
                segment: None,
            }));
        }
        let next = self.header.next_zone;
        if !zone_in_store(self.zones, next) || self.chain.contains(&next) {
            return Ok(None);
        }
        // A zone whose first block is all zeros was never written (a fresh preallocated
        // zone, the usual case at a log's end): not read whole.
        let mut first = vec![0u8; self.zones.cache().block_size()];
        self.zones
            .cache()
            .read(self.zones.zone_offset(next), &mut first)?;
        if first.iter().all(|&b| b == 0) {
            return Ok(None);
        }
        let buf = read_zone(self.zones, next)?;
        let there = search(
            &buf,
            SEGMENT_HEADER_LEN,
            self.header.version,
            self.epoch,
            self.expected,
        );
        let Some(vouched_by) = there.vouched_by else {
            return Ok(None);
        };
        if let Some((offset, lsn)) = here.first {
            return Ok(Some(Resume {
                position: in_current(offset, lsn),
                vouched_by,
                segment: None,
            }));
        }
        let Some((offset, lsn)) = there.first else {
            return Ok(None);
        };
        // The next segment's header may be the damage: then the zone after it is found by
        // its header (this log's epoch, the sequence number after), if any zone has one.
        let seq = self.header.seq + 1;
        let header = match SegmentHeader::decode(&buf) {
            Ok(h) if h.epoch == self.epoch && h.seq == seq => h,
            _ => SegmentHeader {
                version: self.header.version,
                epoch: self.epoch,
                seq,
                first_lsn: lsn,
                next_zone: find_segment(self.zones, self.epoch, seq + 1)?.unwrap_or(0),
            },
        };
        Ok(Some(Resume {
            position: LogPosition {
                zone: next,
                offset: offset as u32,
                lsn,
            },
            vouched_by,
            segment: Some((header, buf)),
        }))
    }

    /// The zone the current segment's header names for the next segment, if it lies past
    /// the end of the file though a sync covered the header. The store grows to hold a zone
    /// before a segment header names it, and a sync makes the growth durable with whatever
    /// it covers, so the file was cut; without a sync known to cover the header, the header
    /// may have reached the disk by writeback and the growth not.
    fn cut(&self) -> Option<ZoneId> {
        let next = self.header.next_zone;
        (self.header_synced && next != 0 && !zone_in_store(self.zones, next)).then_some(next)
    }

    /// Moves reading to `resume`.
    fn jump(&mut self, resume: Resume) {
        if let Some((header, buf)) = resume.segment {
            self.header = header;
            self.buf = buf;
            self.header_synced = false;
            self.chain.push(resume.position.zone);
        }
        self.zone = resume.position.zone;
        self.offset = resume.position.offset as usize;
        self.expected = resume.position.lsn;
    }

    /// Follows the log past damage from `resume` (salvaging, on a copy of this reader) to
    /// learn how far it goes.
    fn follow(&self, resume: Resume) -> Result<LogDamage> {
        let position = resume.position;
        let vouched_by = resume.vouched_by;
        let mut rest = LogReader {
            zones: self.zones,
            epoch: self.epoch,
            zone: self.zone,
            header: self.header,
            buf: self.buf.clone(),
            offset: self.offset,
            expected: self.expected,
            header_synced: self.header_synced,
            chain: self.chain.clone(),
            end: None,
            salvage: true,
            skipped: Vec::new(),
        };
        rest.jump(resume);
        let mut last_lsn = position.lsn;
        while let Some((_, record)) = rest.next_record()? {
            last_lsn = record.lsn;
        }
        Ok(LogDamage {
            resume: position,
            vouched_by,
            last_lsn,
        })
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
        self.header_synced = false;
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

/// The zone holding the header of segment `seq` of the log of epoch `epoch`, if one does.
fn find_segment(zones: &ZoneStore, epoch: u64, seq: u64) -> Result<Option<ZoneId>> {
    Ok(find_segment_header(zones, epoch, seq)?.map(|(zone, _)| zone))
}

/// [`find_segment`], with the header found.
fn find_segment_header(
    zones: &ZoneStore,
    epoch: u64,
    seq: u64,
) -> Result<Option<(ZoneId, SegmentHeader)>> {
    let count = zones.cache().disk().len() / zones.zone_size();
    for zone in 1..count {
        let Ok(zone) = ZoneId::try_from(zone) else {
            break;
        };
        let mut bytes = [0u8; SEGMENT_HEADER_LEN];
        zones.cache().read(zones.zone_offset(zone), &mut bytes)?;
        if let Ok(h) = SegmentHeader::decode(&bytes) {
            if h.epoch == epoch && h.seq == seq {
                return Ok(Some((zone, h)));
            }
        }
    }
    Ok(None)
}

/// The zones of the log of epoch `epoch` from `start` on, found by following segment
/// headers alone (no record is read): each segment's zone and the zone it names for the
/// next, up to `until` (a zone of the same log: the segments from there on are someone
/// else's concern) or the first zone not holding the next segment of the log. For opening:
/// the older superblock's log must outlive the next checkpoint.
pub fn segment_zones(
    zones: &ZoneStore,
    start: LogPosition,
    epoch: u64,
    until: Option<ZoneId>,
) -> Result<Vec<ZoneId>> {
    let mut found = Vec::new();
    let mut zone = start.zone;
    let mut seq = None;
    while zone_in_store(zones, zone) && Some(zone) != until && !found.contains(&zone) {
        let mut bytes = [0u8; SEGMENT_HEADER_LEN];
        zones.cache().read(zones.zone_offset(zone), &mut bytes)?;
        let Ok(header) = SegmentHeader::decode(&bytes) else {
            break;
        };
        if header.epoch != epoch || seq.is_some_and(|s: u64| header.seq != s + 1) {
            break;
        }
        found.push(zone);
        seq = Some(header.seq);
        zone = header.next_zone;
    }
    if zone_in_store(zones, zone) && Some(zone) != until && !found.contains(&zone) {
        // The zone preallocated after the last segment found (a reader looks into it).
        found.push(zone);
    }
    Ok(found)
}

/// Where the log of epoch `epoch` starts (the first record of its first segment), if a zone
/// holds that segment's header. For repair: falling back to the older superblock's
/// checkpoint, it must follow that checkpoint's log into the log the next session started,
/// which only the damaged superblock named. Reads every zone's first bytes.
pub fn find_log_start(zones: &ZoneStore, epoch: u64) -> Result<Option<LogPosition>> {
    Ok(
        find_segment_header(zones, epoch, 0)?.map(|(zone, header)| LogPosition {
            zone,
            offset: SEGMENT_HEADER_LEN as u32,
            lsn: header.first_lsn,
        }),
    )
}

/// Searches `buf` (a segment of log format `version`) from byte `from` for valid records of
/// epoch `epoch` with an LSN of at least `lsn`, stepping over each one found: the first, and
/// whether one vouches for `lsn`.
fn search(buf: &[u8], from: usize, version: u32, epoch: u64, lsn: Lsn) -> Found {
    let mut found = Found::default();
    let mut at = from;
    let end = buf.len().saturating_sub(header_len(version));

    let header = header_len(version);
    while at < end {
        let bytes = &buf[at..];
        if bytes[..header].iter().all(|&b| b == 0) {
            // Unwritten space (the usual rest of a segment): skip to the first header that
            // could hold the next non-zero byte.
            match bytes[header..].iter().position(|&b| b != 0) {
                Some(p) => at += p + 1,
                None => break,
            }
            continue;
        }
        if !crate::record::may_follow(bytes, version, lsn) {
            at += 1;
            continue;
        }
        match decode_any_lsn(bytes, version, epoch) {
            Ok(d) if d.record.lsn >= lsn => {
                found.first.get_or_insert((at, d.record.lsn));
                if d.vouched >= lsn {
                    found.vouched_by = Some(d.record.lsn);
                    return found;
                }
                at += d.len;
            }
            _ => at += 1,
        }
    }
    found
}

fn read_zone(zones: &ZoneStore, zone: ZoneId) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; zones.zone_size() as usize];
    zones.cache().read(zones.zone_offset(zone), &mut buf)?;
    Ok(buf)
}
