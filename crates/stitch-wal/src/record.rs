//! The record codec: one log record to bytes and back (format in `docs/format.md`).

use crate::{Lsn, OpId, TxnId};
use std::fmt;

/// Bytes of a record header in the current log format (the payload follows).
pub const RECORD_HEADER_LEN: usize = 32;
/// Bytes of a record header in log format version 1 (no vouched-for field).
pub const RECORD_HEADER_LEN_V1: usize = 28;

/// A record's flags: how it ends its transaction, if it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flags(pub u8);

impl Flags {
    /// Neither ends nor commits a transaction: a step of a multi-record transaction.
    pub const NONE: Flags = Flags(0);
    /// A single-record transaction, committed by this record alone.
    pub const AUTOCOMMIT: Flags = Flags(1);
    /// The last record of its transaction, which committed.
    pub const COMMIT: Flags = Flags(2);
    /// The last record of its transaction, which aborted.
    pub const ABORT: Flags = Flags(4);
    const ALL: u8 = 1 | 2 | 4;

    /// True when every bit of `other` (which must not be [`Flags::NONE`]) is set.
    pub fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0 && other.0 != 0
    }

    /// True for a record that commits (AUTOCOMMIT or COMMIT).
    pub fn commits(self) -> bool {
        self.contains(Flags::AUTOCOMMIT) || self.contains(Flags::COMMIT)
    }

    /// True for a record that ends its transaction (AUTOCOMMIT, COMMIT or ABORT).
    pub fn ends(self) -> bool {
        self.0 != 0
    }

    /// Known bits only, and at most one of them.
    pub fn is_valid(self) -> bool {
        self.0 & !Self::ALL == 0 && self.0.count_ones() <= 1
    }
}

impl std::ops::BitOr for Flags {
    type Output = Flags;
    fn bitor(self, rhs: Flags) -> Flags {
        Flags(self.0 | rhs.0)
    }
}

/// One log record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    /// Its log sequence number: one more than the record before it.
    pub lsn: Lsn,
    /// The transaction it belongs to.
    pub txn: TxnId,
    /// The registered operation that redoes (and undoes) it.
    pub op: OpId,
    /// Whether it ends its transaction, and how.
    pub flags: Flags,
    /// The operation's argument, opaque to the log.
    pub payload: Vec<u8>,
}

impl LogRecord {
    /// Bytes the record takes in a segment.
    pub fn encoded_len(&self) -> usize {
        RECORD_HEADER_LEN + self.payload.len()
    }
}

/// Why bytes do not decode as the expected record. Every case ends a log cleanly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordError {
    /// Fewer bytes are left than a record header needs.
    NoRoom {
        /// The bytes left.
        left: usize,
    },
    /// The header is all zeros: nothing was ever written here.
    Zeros,
    /// The length field runs past the end of the segment.
    BadLength {
        /// The payload length the header gives.
        len: u64,
        /// The bytes left after the header.
        left: usize,
    },
    /// The CRC does not match: a torn or corrupt record, or a record of another epoch.
    Checksum {
        /// The CRC the header carries.
        stored: u32,
        /// The CRC of what is there.
        computed: u32,
    },
    /// The CRC matches but the flags or reserved bits are not valid.
    BadFlags {
        /// The flags byte.
        flags: u8,
        /// The reserved byte.
        reserved: u8,
    },
    /// A valid record of this epoch, but not the next LSN (stale, or a gap).
    UnexpectedLsn {
        /// The record's LSN.
        found: Lsn,
        /// The LSN the log continues with.
        expected: Lsn,
    },
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordError::NoRoom { left } => write!(f, "only {left} bytes left in the segment, too few for a record"),
            RecordError::Zeros => write!(f, "no record written (zeros)"),
            RecordError::BadLength { len, left } => {
                write!(f, "payload length {len} runs past the segment end ({left} bytes left)")
            }
            RecordError::Checksum { stored, computed } => write!(
                f,
                "checksum mismatch (stored {stored:#010x}, computed {computed:#010x}): torn, corrupt or another epoch's record"
            ),
            RecordError::BadFlags { flags, reserved } => {
                write!(f, "invalid flags {flags:#04x} / reserved byte {reserved:#04x}")
            }
            RecordError::UnexpectedLsn { found, expected } => {
                write!(f, "record has lsn {found} where lsn {expected} was expected (stale or out of order)")
            }
        }
    }
}

fn checksum(epoch: u64, header_tail: &[u8], payload: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&epoch.to_le_bytes());
    let crc = crc32c::crc32c_append(crc, header_tail);
    crc32c::crc32c_append(crc, payload)
}

/// The bytes of `record` in a segment of epoch `epoch` (current format), vouching for no
/// earlier record. The payload must fit in a `u32` (the writer guarantees it: a record never
/// exceeds one zone).
pub fn encode_record(epoch: u64, record: &LogRecord) -> Vec<u8> {
    encode_record_vouching(epoch, record, 0)
}

/// [`encode_record`] for a record appended when every record up to `durable` was durable:
/// the record vouches for them (a reader finding it valid past a bad record up to `durable`
/// knows the bad record was damaged after it was synced, not torn by a crash).
pub fn encode_record_vouching(epoch: u64, record: &LogRecord, durable: Lsn) -> Vec<u8> {
    let mut out = Vec::with_capacity(RECORD_HEADER_LEN + record.payload.len());
    encode_parts(
        &mut out,
        epoch,
        (record.lsn, durable),
        record.txn,
        record.op,
        record.flags,
        &[&record.payload],
    );
    out
}

/// [`encode_record`] without building a [`LogRecord`] first, appended to `out`; the payload is
/// the pieces laid end to end.
/// `(lsn, durable)`: the record's LSN and the newest LSN durable when it was appended.
pub(crate) fn encode_parts(
    out: &mut Vec<u8>,
    epoch: u64,
    (lsn, durable): (Lsn, Lsn),
    txn: TxnId,
    op: OpId,
    flags: Flags,
    payload: &[&[u8]],
) {
    let start = out.len();
    let len: usize = payload.iter().map(|p| p.len()).sum();
    out.reserve(RECORD_HEADER_LEN + len);
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.extend_from_slice(&lsn.to_le_bytes());
    out.extend_from_slice(&txn.to_le_bytes());
    out.extend_from_slice(&op.to_le_bytes());
    out.push(flags.0);
    out.push(0);
    out.extend_from_slice(&vouch_distance(lsn, durable).to_le_bytes());
    let header = checksum(epoch, &out[start + 4..start + RECORD_HEADER_LEN], &[]);
    let crc = payload
        .iter()
        .fold(header, |crc, p| crc32c::crc32c_append(crc, p));
    out[start..start + 4].copy_from_slice(&crc.to_le_bytes());
    for p in payload {
        out.extend_from_slice(p);
    }
}

/// How many records back from `lsn` the newest durable one is, as stored: a record that
/// vouches for nothing (or for a prefix too far back to say) stores `u32::MAX`.
fn vouch_distance(lsn: Lsn, durable: Lsn) -> u32 {
    if durable == 0 {
        return u32::MAX;
    }
    u32::try_from(lsn.saturating_sub(durable)).unwrap_or(u32::MAX)
}

/// A record decoded from a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decoded {
    pub record: LogRecord,
    /// Bytes it takes.
    pub len: usize,
    /// Every record up to this LSN was durable when this one was appended (0: none known;
    /// always 0 in format version 1).
    pub vouched: Lsn,
}

/// Decodes the record at the start of `bytes` (the rest of a segment), which must be the
/// record `expected_lsn` of a log of epoch `epoch` (current format). Returns it and the
/// bytes it takes.
pub fn decode_record(
    bytes: &[u8],
    epoch: u64,
    expected_lsn: Lsn,
) -> Result<(LogRecord, usize), RecordError> {
    let d = decode_versioned(bytes, crate::WAL_FORMAT_VERSION, epoch, expected_lsn)?;
    Ok((d.record, d.len))
}

/// [`decode_record`] for a segment of log format `version` (1 or 2).
pub(crate) fn decode_versioned(
    bytes: &[u8],
    version: u32,
    epoch: u64,
    expected_lsn: Lsn,
) -> Result<Decoded, RecordError> {
    let d = decode_any_lsn(bytes, version, epoch)?;
    if d.record.lsn != expected_lsn {
        return Err(RecordError::UnexpectedLsn {
            found: d.record.lsn,
            expected: expected_lsn,
        });
    }
    Ok(d)
}

/// The header length of log format `version`.
pub(crate) fn header_len(version: u32) -> usize {
    if version == 1 {
        RECORD_HEADER_LEN_V1
    } else {
        RECORD_HEADER_LEN
    }
}

/// Cheap test run before [`decode_any_lsn`] when searching a segment for records past a bad
/// one: could `bytes` start a record of format `version` with an LSN of at least `lsn`?
/// (Sane length, known flags, zero reserved byte, LSN in range.)
pub(crate) fn may_follow(bytes: &[u8], version: u32, lsn: Lsn) -> bool {
    let Some(h) = bytes.get(..header_len(version)) else {
        return false;
    };
    let len = u32::from_le_bytes([h[4], h[5], h[6], h[7]]) as usize;
    let mut word = [0u8; 8];
    word.copy_from_slice(&h[8..16]);
    let found = u64::from_le_bytes(word);
    h[27] == 0
        && Flags(h[26]).is_valid()
        && len <= bytes.len() - h.len()
        && found >= lsn
        && found - lsn < 1 << 32
}

/// Decodes the record at the start of `bytes` whatever its LSN.
pub(crate) fn decode_any_lsn(
    bytes: &[u8],
    version: u32,
    epoch: u64,
) -> Result<Decoded, RecordError> {
    let header_len = header_len(version);
    let Some(header) = bytes.get(..header_len) else {
        return Err(RecordError::NoRoom { left: bytes.len() });
    };
    if header.iter().all(|&b| b == 0) {
        return Err(RecordError::Zeros);
    }
    let u32_at =
        |i: usize| u32::from_le_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]]);
    let u64_at = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&header[i..i + 8]);
        u64::from_le_bytes(b)
    };
    let left = bytes.len() - header_len;
    let len = u32_at(4) as usize;
    if len > left {
        return Err(RecordError::BadLength {
            len: len as u64,
            left,
        });
    }
    let payload = &bytes[header_len..header_len + len];
    let stored = u32_at(0);
    let computed = checksum(epoch, &header[4..], payload);
    if stored != computed {
        return Err(RecordError::Checksum { stored, computed });
    }
    let (flags, reserved) = (Flags(header[26]), header[27]);
    if !flags.is_valid() || reserved != 0 {
        return Err(RecordError::BadFlags {
            flags: flags.0,
            reserved,
        });
    }
    let lsn = u64_at(8);
    // u32::MAX: nothing vouched for (or a prefix too far back to store).
    let vouched = match version {
        1 => 0,
        _ => match u32_at(28) {
            u32::MAX => 0,
            distance => lsn.saturating_sub(u64::from(distance)),
        },
    };
    let record = LogRecord {
        lsn,
        txn: u64_at(16),
        op: u16::from_le_bytes([header[24], header[25]]),
        flags,
        payload: payload.to_vec(),
    };
    Ok(Decoded {
        record,
        len: header_len + len,
        vouched,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> LogRecord {
        LogRecord {
            lsn: 42,
            txn: 7,
            op: 3,
            flags: Flags::COMMIT,
            payload: b"hello, log".to_vec(),
        }
    }

    #[test]
    fn round_trip() {
        let r = sample();
        let mut bytes = encode_record(9, &r);
        assert_eq!(bytes.len(), r.encoded_len());
        bytes.extend_from_slice(&[0xAB; 10]); // whatever follows does not matter
        let (back, used) = decode_record(&bytes, 9, 42).unwrap();
        assert_eq!(back, r);
        assert_eq!(used, r.encoded_len());
        let empty = LogRecord {
            payload: Vec::new(),
            flags: Flags::NONE,
            ..r
        };
        let bytes = encode_record(9, &empty);
        assert_eq!(
            decode_record(&bytes, 9, 42).unwrap(),
            (empty, RECORD_HEADER_LEN)
        );
    }

    #[test]
    fn every_flipped_bit_is_rejected() {
        let r = sample();
        let bytes = encode_record(1, &r);
        for i in 0..bytes.len() * 8 {
            let mut bad = bytes.clone();
            bad[i / 8] ^= 1 << (i % 8);
            assert!(decode_record(&bad, 1, 42).is_err(), "bit {i}");
        }
    }

    #[test]
    fn wrong_epoch_fails_the_checksum() {
        let bytes = encode_record(1, &sample());
        assert!(matches!(
            decode_record(&bytes, 2, 42),
            Err(RecordError::Checksum { .. })
        ));
    }

    #[test]
    fn unexpected_lsn_is_rejected() {
        let bytes = encode_record(1, &sample());
        assert_eq!(
            decode_record(&bytes, 1, 41),
            Err(RecordError::UnexpectedLsn {
                found: 42,
                expected: 41
            })
        );
        assert_eq!(
            decode_record(&bytes, 1, 43),
            Err(RecordError::UnexpectedLsn {
                found: 42,
                expected: 43
            })
        );
    }

    #[test]
    fn truncated_and_empty_input() {
        let bytes = encode_record(1, &sample());
        for cut in 0..bytes.len() {
            let err = decode_record(&bytes[..cut], 1, 42).unwrap_err();
            if cut < RECORD_HEADER_LEN {
                assert_eq!(err, RecordError::NoRoom { left: cut });
            } else {
                assert!(matches!(err, RecordError::BadLength { .. }), "{err:?}");
            }
        }
        assert_eq!(decode_record(&[0; 100], 1, 1), Err(RecordError::Zeros));
    }

    #[test]
    fn torn_payload_is_rejected() {
        let r = LogRecord {
            payload: vec![0x5A; 2000],
            ..sample()
        };
        let mut bytes = encode_record(1, &r);
        bytes[1500..].fill(0); // a later sector never reached the disk
        assert!(matches!(
            decode_record(&bytes, 1, 42),
            Err(RecordError::Checksum { .. })
        ));
    }

    #[test]
    fn invalid_flags_are_rejected_even_with_a_good_crc() {
        for flags in [
            Flags(8),
            Flags::COMMIT | Flags::ABORT,
            Flags::AUTOCOMMIT | Flags::COMMIT,
        ] {
            let bytes = encode_record(1, &LogRecord { flags, ..sample() });
            assert!(matches!(
                decode_record(&bytes, 1, 42),
                Err(RecordError::BadFlags { .. })
            ));
        }
    }

    #[test]
    fn format_1_records_are_read_and_vouch_for_nothing() {
        // A format 1 record: the format 2 bytes without the vouched-for field, CRC redone.
        let r = sample();
        let v2 = encode_record_vouching(5, &r, 41);
        let mut v1 = v2[..RECORD_HEADER_LEN_V1].to_vec();
        v1.extend_from_slice(&v2[RECORD_HEADER_LEN..]);
        let crc = checksum(5, &v1[4..RECORD_HEADER_LEN_V1], &v1[RECORD_HEADER_LEN_V1..]);
        v1[..4].copy_from_slice(&crc.to_le_bytes());
        let d = decode_versioned(&v1, 1, 5, 42).unwrap();
        assert_eq!((d.record, d.len, d.vouched), (r.clone(), v1.len(), 0));
        let d = decode_versioned(&v2, 2, 5, 42).unwrap();
        assert_eq!((d.record, d.len, d.vouched), (r, v2.len(), 41));
        assert!(decode_versioned(&v1, 2, 5, 42).is_err());
    }

    #[test]
    fn vouched_for_lsn_round_trips_and_saturates() {
        let r = sample(); // lsn 42
        for (durable, vouched) in [(0, 0), (41, 41), (42, 42), (1000, 42), (7, 7), (1, 1)] {
            let bytes = encode_record_vouching(1, &r, durable);
            assert_eq!(decode_versioned(&bytes, 2, 1, 42).unwrap().vouched, vouched);
        }
        let far = LogRecord {
            lsn: 1 << 40,
            ..sample()
        };
        let bytes = encode_record_vouching(1, &far, 1);
        // Too far back to store: vouches for a shorter prefix, never a longer one.
        assert!(decode_versioned(&bytes, 2, 1, 1 << 40).unwrap().vouched <= 1);
    }

    #[test]
    fn flags() {
        assert!(Flags::AUTOCOMMIT.commits() && Flags::COMMIT.commits());
        assert!(!Flags::ABORT.commits() && Flags::ABORT.ends());
        assert!(!Flags::NONE.ends() && !Flags::NONE.commits() && Flags::NONE.is_valid());
    }

    proptest::proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200), epoch: u64, lsn: u64) {
            let _ = decode_record(&bytes, epoch, lsn);
        }

        #[test]
        fn round_trips(lsn: u64, txn: u64, op: u16, flag in 0u8..4, payload in proptest::collection::vec(proptest::num::u8::ANY, 0..300), epoch: u64) {
            let flags = [Flags::NONE, Flags::AUTOCOMMIT, Flags::COMMIT, Flags::ABORT][flag as usize];
            let r = LogRecord { lsn, txn, op, flags, payload };
            let bytes = encode_record(epoch, &r);
            proptest::prop_assert_eq!(decode_record(&bytes, epoch, lsn).unwrap(), (r.clone(), r.encoded_len()));
        }
    }
}
