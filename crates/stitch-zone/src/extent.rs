//! Extents: checksummed byte strings at a place in a zone.
//!
//! On disk an extent is a 16-byte header followed by its payload (format in
//! `docs/format.md`). The checksum covers the header fields, the payload *and the extent's own
//! address*, so a stale or misdirected extent (the right bytes at the wrong place) fails too.

use crate::{Result, ZoneError};
use std::fmt;

/// Bytes of an extent's header, before its payload.
pub const EXTENT_HEADER_LEN: usize = 16;
/// Extents start at multiples of this many bytes within their zone.
pub const EXTENT_ALIGN: u64 = 16;
const EXTENT_MAGIC: u16 = 0x5845; // "EX" little-endian
const EXTENT_VERSION: u8 = 1;

/// Where an extent lives: `len` counts the header and the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExtentAddr {
    /// The zone it lies in.
    pub zone: u32,
    /// Its byte offset in the zone (a multiple of `EXTENT_ALIGN`, 16).
    pub offset: u32,
    /// Its length in bytes, header included.
    pub len: u32,
}

impl ExtentAddr {
    /// Bytes of an encoded address (three little-endian `u32`s: zone, offset, length).
    pub const ENCODED_LEN: usize = 12;

    /// True when this extent starts where `prev` ends on disk (the next aligned offset).
    pub fn follows(&self, prev: &ExtentAddr) -> bool {
        self.zone == prev.zone && self.offset as u64 == prev.aligned_end()
    }

    /// True when this extent continues the stream `prev` was appended to: it follows `prev`,
    /// or it opens another zone because it did not fit after `prev` in its `zone_size`-byte
    /// zone. Reading on across such a zone change costs one seek, as every span longer than a
    /// zone pays anyway, so for contiguity the two count as one span.
    pub fn continues(&self, prev: &ExtentAddr, zone_size: u64) -> bool {
        self.follows(prev)
            || (self.zone != prev.zone
                && self.offset == 0
                && prev.aligned_end() + self.len as u64 > zone_size)
    }

    /// The offset in its zone where the next extent may start.
    pub fn aligned_end(&self) -> u64 {
        (self.offset as u64 + self.len as u64).next_multiple_of(EXTENT_ALIGN)
    }

    /// Bytes of the payload (the length without the header; 0 for an address too short to
    /// hold one, which no extent has, so reading it fails the length check).
    pub fn payload_len(&self) -> usize {
        (self.len as usize).saturating_sub(EXTENT_HEADER_LEN)
    }

    /// Appends the address's [`Self::ENCODED_LEN`] bytes to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.zone.to_le_bytes());
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
    }

    /// Decodes an address; `None` if `bytes` is too short.
    pub fn decode(bytes: &[u8]) -> Option<ExtentAddr> {
        let b = bytes.get(..Self::ENCODED_LEN)?;
        let word = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Some(ExtentAddr {
            zone: word(0),
            offset: word(4),
            len: word(8),
        })
    }
}

impl fmt::Display for ExtentAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "extent zone {} offset {} len {}",
            self.zone, self.offset, self.len
        )
    }
}

/// What an extent holds; each kind can have its own release handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExtentKind(pub u8);

impl ExtentKind {
    /// A checkpoint's manifest.
    pub const MANIFEST: ExtentKind = ExtentKind(1);
    /// A data block of a sorted run.
    pub const RUN_BLOCK: ExtentKind = ExtentKind(2);
    /// A sorted run's index.
    pub const RUN_INDEX: ExtentKind = ExtentKind(3);
    /// A sorted run's quotient filter.
    pub const RUN_FILTER: ExtentKind = ExtentKind(4);
    /// A chunk of a large value, stored outside the runs (stitchdb's `db::large`).
    pub const LARGE_VALUE: ExtentKind = ExtentKind(5);
}

fn checksum(addr: ExtentAddr, header: &[u8], payload: &[u8]) -> u32 {
    let mut place = Vec::with_capacity(ExtentAddr::ENCODED_LEN);
    addr.encode(&mut place);
    let crc = crc32c::crc32c(&place);
    let crc = crc32c::crc32c_append(crc, &header[..8]);
    crc32c::crc32c_append(crc, payload)
}

/// The header of an extent at `addr` holding `payload`: written beside the payload, or into
/// room left in front of it, so the payload is never copied just to be put behind its header.
pub(crate) fn encode_header(
    addr: ExtentAddr,
    kind: ExtentKind,
    payload: &[u8],
) -> [u8; EXTENT_HEADER_LEN] {
    let mut out = [0u8; EXTENT_HEADER_LEN];
    out[0..2].copy_from_slice(&EXTENT_MAGIC.to_le_bytes());
    out[2] = EXTENT_VERSION;
    out[3] = kind.0;
    out[4..8].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    let crc = checksum(addr, &out, payload);
    out[8..12].copy_from_slice(&crc.to_le_bytes());
    out
}

/// Checks the bytes read at `addr` and returns the payload.
pub(crate) fn decode(
    addr: ExtentAddr,
    kind: ExtentKind,
    mut bytes: Vec<u8>,
    disk_offset: u64,
) -> Result<Vec<u8>> {
    verify(addr, kind, &bytes, disk_offset)?;
    bytes.drain(..EXTENT_HEADER_LEN);
    Ok(bytes)
}

/// Checks the bytes read at `addr`: header, kind, length and checksum.
pub(crate) fn verify(
    addr: ExtentAddr,
    kind: ExtentKind,
    bytes: &[u8],
    disk_offset: u64,
) -> Result<()> {
    verify_with(addr, kind, bytes, disk_offset, None)
}

/// [`verify`], and if `payload_crc` is given, that the payload's CRC-32C is that: the payload
/// is then checksummed once, its CRC combined with the header's for the extent's own.
pub(crate) fn verify_with(
    addr: ExtentAddr,
    kind: ExtentKind,
    bytes: &[u8],
    disk_offset: u64,
    payload_crc: Option<u32>,
) -> Result<()> {
    // The place is only spelled out for an error: reads of good extents are the hot path.
    let corrupt = |detail: String| ZoneError::Corrupt {
        what: "extent",
        place: format!("{addr} (disk byte {disk_offset})"),
        detail,
    };
    if bytes.len() < EXTENT_HEADER_LEN {
        return Err(corrupt(format!(
            "{} bytes is shorter than an extent header",
            bytes.len()
        )));
    }
    let magic = u16::from_le_bytes([bytes[0], bytes[1]]);
    if magic != EXTENT_MAGIC {
        return Err(corrupt(format!("bad magic {magic:#06x}")));
    }
    if bytes[2] != EXTENT_VERSION {
        return Err(corrupt(format!("unsupported extent version {}", bytes[2])));
    }
    if bytes[3] != kind.0 {
        return Err(corrupt(format!(
            "holds kind {} where kind {} was expected",
            bytes[3], kind.0
        )));
    }
    let len = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize;
    if len != addr.payload_len() {
        return Err(corrupt(format!(
            "payload length {len} does not match the address ({})",
            addr.payload_len()
        )));
    }
    let stored = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    let payload = &bytes[EXTENT_HEADER_LEN..];
    let computed = match payload_crc {
        None => checksum(addr, &bytes[..EXTENT_HEADER_LEN], payload),
        Some(expected) => {
            let found = crc32c::crc32c(payload);
            if found != expected {
                return Err(corrupt(format!(
                    "payload checksum {found:#010x} is not its referrer's {expected:#010x}"
                )));
            }
            let head = checksum(addr, &bytes[..EXTENT_HEADER_LEN], &[]);
            crc32c::crc32c_combine(head, found, payload.len())
        }
    };
    if stored != computed {
        return Err(corrupt(format!(
            "checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_checksum_the_referrer_holds_verifies_the_extent_in_one_pass() {
        let addr = at(3, 4096, 16 + 100);
        let payload = vec![7u8; 100];
        let mut bytes = encode_header(addr, ExtentKind::LARGE_VALUE, &payload).to_vec();
        bytes.extend_from_slice(&payload);
        let crc = crc32c::crc32c(&payload);
        verify_with(addr, ExtentKind::LARGE_VALUE, &bytes, 0, Some(crc)).unwrap();
        assert!(verify_with(addr, ExtentKind::LARGE_VALUE, &bytes, 0, Some(crc ^ 1)).is_err());
        bytes[8] ^= 1;
        assert!(verify_with(addr, ExtentKind::LARGE_VALUE, &bytes, 0, Some(crc)).is_err());
    }

    fn at(zone: u32, offset: u32, len: u32) -> ExtentAddr {
        ExtentAddr { zone, offset, len }
    }

    #[test]
    fn an_extent_continues_its_stream_in_its_zone_or_at_the_start_of_the_next() {
        const ZONE: u64 = 64 * 1024;
        let prev = at(3, 4096, 100);
        // Right after it, at the next multiple of 16.
        assert!(at(3, 4208, 50).continues(&prev, ZONE));
        assert!(!at(3, 4224, 50).continues(&prev, ZONE));
        // The last extent that fit in zone 3, then one that did not fit after it.
        let last = at(3, 60_000, 4000);
        assert!(at(9, 0, 4000).continues(&last, ZONE));
        // Not at the start of its zone, or small enough to have fit after `last`.
        assert!(!at(9, 16, 4000).continues(&last, ZONE));
        assert!(!at(9, 0, 1000).continues(&last, ZONE));
        // A zone that did not fill.
        assert!(!at(9, 0, 4000).continues(&prev, ZONE));
    }
}
