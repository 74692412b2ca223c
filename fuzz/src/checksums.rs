//! Copies of inputs with their checksums made to match their contents, so the decoders'
//! parsing behind the checks gets fuzzed too. Each follows the layout in `docs/format.md`; an
//! input too short to hold the checksum comes back unchanged.

use crate::u64_at;
use stitch_wal::{RECORD_HEADER_LEN, SEGMENT_HEADER_LEN};
use stitch_zone::{ExtentAddr, EXTENT_HEADER_LEN};

/// A superblock slot: the CRC-32C of its first 45 bytes (magic, version, sequence number, zone
/// size, block size, root flag and root address) follows them.
pub fn fixed_superblock(data: &[u8]) -> Vec<u8> {
    const BODY: usize = 8 + 4 + 8 + 8 + 4 + 1 + ExtentAddr::ENCODED_LEN;
    let mut out = data.to_vec();
    if out.len() >= BODY + 4 {
        let crc = crc32c::crc32c(&out[..BODY]);
        out[BODY..BODY + 4].copy_from_slice(&crc.to_le_bytes());
    }
    out
}

/// The extent target's input (address, kind, extent): the extent header's CRC-32C at bytes
/// 8..12 covers the encoded address, the header's first 8 bytes and the payload.
pub fn fixed_extent(data: &[u8]) -> Vec<u8> {
    let mut out = data.to_vec();
    let start = ExtentAddr::ENCODED_LEN + 1;
    if out.len() >= start + EXTENT_HEADER_LEN {
        let crc = crc32c::crc32c(&out[..ExtentAddr::ENCODED_LEN]);
        let crc = crc32c::crc32c_append(crc, &out[start..start + 8]);
        let crc = crc32c::crc32c_append(crc, &out[start + EXTENT_HEADER_LEN..]);
        out[start + 8..start + 12].copy_from_slice(&crc.to_le_bytes());
    }
    out
}

/// A filter of either kind (quotient or Bloom): its last 4 bytes are the CRC-32C of every byte
/// before them.
pub fn fixed_filter(data: &[u8]) -> Vec<u8> {
    let mut out = data.to_vec();
    if let Some(body) = out.len().checked_sub(4) {
        let crc = crc32c::crc32c(&out[..body]);
        out[body..].copy_from_slice(&crc.to_le_bytes());
    }
    out
}

/// Fixes the record at the start of `bytes` in place and returns its length (`None` if the
/// bytes cannot hold the record its header describes): the CRC-32C at bytes 0..4 covers the
/// log's epoch, the rest of the header and the payload, whose length is at bytes 4..8.
pub fn fixed_record(bytes: &mut [u8], epoch: u64) -> Option<usize> {
    let header = bytes.get(..RECORD_HEADER_LEN)?;
    let len = u32::from_le_bytes([header[4], header[5], header[6], header[7]]) as usize;
    let end = RECORD_HEADER_LEN.checked_add(len)?;
    let record = bytes.get_mut(..end)?;
    let crc = crc32c::crc32c(&epoch.to_le_bytes());
    let crc = crc32c::crc32c_append(crc, &record[4..]);
    record[..4].copy_from_slice(&crc.to_le_bytes());
    Some(end)
}

/// A segment's start: the header's CRC-32C at bytes 40..44 covers its first 40 bytes; then
/// each record that fits, in the header's epoch.
pub fn fixed_segment(data: &[u8]) -> Vec<u8> {
    let mut out = data.to_vec();
    if out.len() < SEGMENT_HEADER_LEN {
        return out;
    }
    let crc = crc32c::crc32c(&out[..40]);
    out[40..44].copy_from_slice(&crc.to_le_bytes());
    let epoch = u64_at(&out, 16).unwrap_or(0);
    let mut at = SEGMENT_HEADER_LEN;
    while let Some(len) = fixed_record(&mut out[at..], epoch) {
        at += len;
    }
    out
}
