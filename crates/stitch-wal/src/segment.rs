//! The segment header codec (format in `docs/format.md`).

use crate::Lsn;
use stitch_zone::ZoneId;

/// Bytes reserved for the header at the start of every segment; records start here.
pub const SEGMENT_HEADER_LEN: usize = 64;
/// The first bytes of every segment.
pub const SEGMENT_MAGIC: &[u8; 8] = b"STWALSEG";
/// The log format this build writes. It reads this one and version 1 (whose records do not
/// vouch for earlier ones: see `docs/format.md`).
pub const WAL_FORMAT_VERSION: u32 = 2;
/// The oldest log format this build reads.
pub const OLDEST_WAL_FORMAT_VERSION: u32 = 1;
/// Bytes the CRC covers.
const BODY: usize = 40;

/// The header of one segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// The log format of the segment's records.
    pub version: u32,
    /// The log's epoch: a record checks against it, so one of an older log does not pass.
    pub epoch: u64,
    /// 0 for the first segment of a log, +1 for each following one.
    pub seq: u64,
    /// The LSN of the first record in this segment.
    pub first_lsn: Lsn,
    /// The zone preallocated for the next segment.
    pub next_zone: ZoneId,
}

impl SegmentHeader {
    /// The header's bytes, CRC included.
    pub fn encode(&self) -> [u8; SEGMENT_HEADER_LEN] {
        let mut out = [0u8; SEGMENT_HEADER_LEN];
        out[0..8].copy_from_slice(SEGMENT_MAGIC);
        out[8..12].copy_from_slice(&self.version.to_le_bytes());
        out[12..16].copy_from_slice(&self.next_zone.to_le_bytes());
        out[16..24].copy_from_slice(&self.epoch.to_le_bytes());
        out[24..32].copy_from_slice(&self.seq.to_le_bytes());
        out[32..40].copy_from_slice(&self.first_lsn.to_le_bytes());
        let crc = crc32c::crc32c(&out[..BODY]);
        out[40..44].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes a header; the error says what is wrong (for messages and log-end reasons).
    pub fn decode(bytes: &[u8]) -> Result<SegmentHeader, String> {
        let Some(b) = bytes.get(..SEGMENT_HEADER_LEN) else {
            return Err(format!(
                "{} bytes is shorter than a segment header",
                bytes.len()
            ));
        };
        if &b[..8] != SEGMENT_MAGIC {
            return Err("no segment header (bad magic)".into());
        }
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(w)
        };
        let stored = u32_at(40);
        let computed = crc32c::crc32c(&b[..BODY]);
        if stored != computed {
            return Err(format!("segment header checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"));
        }
        let version = u32_at(8);
        if !(OLDEST_WAL_FORMAT_VERSION..=WAL_FORMAT_VERSION).contains(&version) {
            return Err(format!(
                "unsupported log format version {version} (this build reads {OLDEST_WAL_FORMAT_VERSION} to {WAL_FORMAT_VERSION})"
            ));
        }
        Ok(SegmentHeader {
            version,
            next_zone: u32_at(12),
            epoch: u64_at(16),
            seq: u64_at(24),
            first_lsn: u64_at(32),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: SegmentHeader = SegmentHeader {
        version: WAL_FORMAT_VERSION,
        epoch: 5,
        seq: 3,
        first_lsn: 1000,
        next_zone: 17,
    };

    #[test]
    fn round_trip() {
        assert_eq!(SegmentHeader::decode(&H.encode()), Ok(H));
    }

    #[test]
    fn corruption_is_detected() {
        let bytes = H.encode();
        for i in 0..BODY + 4 {
            let mut bad = bytes;
            bad[i] ^= 0x10;
            assert!(SegmentHeader::decode(&bad).is_err(), "byte {i}");
        }
        assert!(SegmentHeader::decode(&bytes[..63]).is_err());
        assert!(SegmentHeader::decode(&[0; 64]).is_err());
    }

    #[test]
    fn other_version_is_rejected() {
        let mut bytes = H.encode();
        bytes[8] = 3;
        let crc = crc32c::crc32c(&bytes[..BODY]);
        bytes[40..44].copy_from_slice(&crc.to_le_bytes());
        assert!(SegmentHeader::decode(&bytes)
            .unwrap_err()
            .contains("version 3"));
        let old = SegmentHeader { version: 1, ..H };
        assert_eq!(SegmentHeader::decode(&old.encode()), Ok(old));
    }

    proptest::proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..100)) {
            let _ = SegmentHeader::decode(&bytes);
        }
    }
}
