//! The byte encoding of a filter (specified in `docs/format.md`).

use crate::filter::QuotientFilter;
use crate::params::FilterParams;
use crate::table::{SlotTable, SLOTS_PER_BLOCK};
use crate::validate::check_canonical;
use crate::FilterError;

/// The first 8 bytes of every encoded filter.
pub const FILTER_MAGIC: [u8; 8] = *b"STQFILTR";
/// The format version this code writes and reads.
pub const FILTER_FORMAT_VERSION: u32 = 1;
/// Bytes before the slot table.
pub const FILTER_HEADER_LEN: usize = 56;
const CRC_LEN: usize = 4;

impl QuotientFilter {
    /// The filter as bytes: a header, the slot table and a CRC32C. Equal filters encode to
    /// equal bytes.
    pub fn encode(&self) -> Vec<u8> {
        let params = self.params();
        let words = self.table().words();
        let mut out = Vec::with_capacity(FILTER_HEADER_LEN + words.len() * 8 + CRC_LEN);
        out.extend_from_slice(&FILTER_MAGIC);
        out.extend_from_slice(&FILTER_FORMAT_VERSION.to_le_bytes());
        // Both widths are at most 64.
        out.push(params.fingerprint_bits() as u8);
        out.push(params.remainder_bits() as u8);
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&params.fp_rate().to_bits().to_le_bytes());
        out.extend_from_slice(&params.capacity().to_le_bytes());
        out.extend_from_slice(&self.len().to_le_bytes());
        out.extend_from_slice(&params.slot_count().to_le_bytes());
        out.extend_from_slice(&self.table().block_count().to_le_bytes());
        debug_assert_eq!(out.len(), FILTER_HEADER_LEN);
        for word in words {
            out.extend_from_slice(&word.to_le_bytes());
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// A filter from [`encode`](Self::encode)'s bytes. Damaged, truncated or foreign bytes are
    /// an error, never a panic: the checksum catches damage, and the table is checked to be the
    /// canonical table of its parameters before it is used.
    pub fn decode(bytes: &[u8]) -> Result<Self, FilterError> {
        let min = FILTER_HEADER_LEN + CRC_LEN;
        if bytes.len() < min {
            return Err(FilterError::TooShort {
                len: bytes.len(),
                min,
            });
        }
        if bytes[..8] != FILTER_MAGIC {
            return Err(FilterError::BadMagic);
        }
        let version = u32::from_le_bytes(array(&bytes[8..12]));
        if version != FILTER_FORMAT_VERSION {
            return Err(FilterError::UnsupportedVersion(version));
        }
        let (body, crc) = bytes.split_at(bytes.len() - CRC_LEN);
        let stored = u32::from_le_bytes(array(crc));
        let computed = crc32c::crc32c(body);
        if stored != computed {
            return Err(FilterError::ChecksumMismatch { stored, computed });
        }

        let field = |at: usize| u64::from_le_bytes(array(&body[at..at + 8]));
        let (fingerprint_bits, remainder_bits) = (u32::from(body[12]), u32::from(body[13]));
        if body[14..16] != [0, 0] {
            return Err(FilterError::Corrupt("reserved header bytes are not zero"));
        }
        let fp_rate = f64::from_bits(field(16));
        let (capacity, len, slot_count, block_count) = (field(24), field(32), field(40), field(48));
        let params = FilterParams::with_fingerprint_bits(capacity, fp_rate, fingerprint_bits)
            .map_err(|_| FilterError::Corrupt("invalid filter parameters"))?;
        if params.remainder_bits() != remainder_bits || params.slot_count() != slot_count {
            return Err(FilterError::Corrupt(
                "layout does not match the filter parameters",
            ));
        }
        let words_per_block = 3 + remainder_bits as usize;
        let table_bytes = usize::try_from(block_count)
            .ok()
            .and_then(|blocks| blocks.checked_mul(words_per_block * 8));
        if table_bytes != Some(body.len() - FILTER_HEADER_LEN)
            || block_count < slot_count / SLOTS_PER_BLOCK
        {
            return Err(FilterError::Corrupt(
                "table length does not match the block count",
            ));
        }
        let words = body[FILTER_HEADER_LEN..]
            .chunks_exact(8)
            .map(|chunk| u64::from_le_bytes(array(chunk)))
            .collect();
        let table = SlotTable::from_words(words, remainder_bits).ok_or(FilterError::Corrupt(
            "table is not a whole number of blocks",
        ))?;
        check_canonical(&params, &table, len).map_err(FilterError::Corrupt)?;
        Ok(QuotientFilter::from_parts(params, table, len))
    }
}

/// A fixed-size array from a slice of exactly that length (the callers slice it so).
fn array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0; N];
    out.copy_from_slice(bytes);
    out
}
