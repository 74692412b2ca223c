//! The page format: fixed 4 KiB pages, updated in place.
//!
//! A page is a [`PAGE_HEADER_LEN`]-byte header and a body. The header holds a magic, the
//! format version, the page's own number (a misdirected write is caught), its page LSN (the
//! newest log record whose change it holds) and a CRC32C over everything else. A page of all
//! zeros was never written: it reads as an empty body at LSN 0. The body's first byte is the
//! page's kind, so a full-page image in the log restores the kind too.

use crate::{PageError, PageId, Result};
use stitch_wal::Lsn;

/// Bytes per page.
pub const PAGE_SIZE: usize = 4096;
/// Bytes of header in front of each page's body.
pub const PAGE_HEADER_LEN: usize = 24;
/// Bytes of body per page.
pub const BODY_LEN: usize = PAGE_SIZE - PAGE_HEADER_LEN;
/// The page format version this build writes and reads.
pub const PAGE_FORMAT_VERSION: u8 = 1;
const PAGE_MAGIC: [u8; 2] = *b"PG";

/// What a page holds: the body's first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum PageKind {
    /// Never written, or not in use.
    Unused = 0,
    /// Page 0: the page file's header (how many pages are allocated).
    FileHeader = 1,
    /// A linear hash table's meta page.
    HashMeta = 2,
    /// A linear hash table's bucket directory page.
    HashDirectory = 3,
    /// A linear hash table's bucket page (primary or overflow).
    HashBucket = 4,
}

impl PageKind {
    /// The kind a body holds.
    pub fn of(body: &[u8]) -> Option<PageKind> {
        Some(match body.first().copied().unwrap_or(0) {
            0 => PageKind::Unused,
            1 => PageKind::FileHeader,
            2 => PageKind::HashMeta,
            3 => PageKind::HashDirectory,
            4 => PageKind::HashBucket,
            _ => return None,
        })
    }
}

/// Seals `body` into a page image for page `page` at `lsn`.
pub fn seal(page: PageId, lsn: Lsn, body: &[u8], out: &mut [u8]) {
    out[0..2].copy_from_slice(&PAGE_MAGIC);
    out[2] = PAGE_FORMAT_VERSION;
    out[3] = 0;
    out[4..8].copy_from_slice(&page.to_le_bytes());
    out[8..16].copy_from_slice(&lsn.to_le_bytes());
    out[20..24].fill(0);
    out[PAGE_HEADER_LEN..].copy_from_slice(body);
    let crc = checksum(out);
    out[16..20].copy_from_slice(&crc.to_le_bytes());
}

fn checksum(image: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&image[..16]), &image[20..])
}

/// Checks a page image read from disk at `offset`; returns its LSN and body.
pub fn open(page: PageId, offset: u64, image: &[u8]) -> Result<(Lsn, &[u8])> {
    let bad = |detail: String| PageError::CorruptPage {
        page,
        offset,
        detail,
    };
    if image.iter().all(|&b| b == 0) {
        return Ok((0, &image[PAGE_HEADER_LEN..]));
    }
    let stored = u32::from_le_bytes([image[16], image[17], image[18], image[19]]);
    let computed = checksum(image);
    if stored != computed {
        return Err(bad(format!(
            "checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
        )));
    }
    if image[0..2] != PAGE_MAGIC {
        return Err(bad("bad magic".into()));
    }
    if image[2] != PAGE_FORMAT_VERSION {
        return Err(bad(format!(
            "unsupported page format version {} (this build reads {PAGE_FORMAT_VERSION})",
            image[2]
        )));
    }
    let own = u32::from_le_bytes([image[4], image[5], image[6], image[7]]);
    if own != page {
        return Err(bad(format!("holds page {own} (a misdirected write)")));
    }
    let lsn = u64::from_le_bytes(image[8..16].try_into().unwrap_or_default());
    Ok((lsn, &image[PAGE_HEADER_LEN..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_open_round_trip_and_a_flipped_byte_is_named() {
        let mut body = vec![0u8; BODY_LEN];
        body[0] = PageKind::HashBucket as u8;
        body[100] = 7;
        let mut image = vec![0u8; PAGE_SIZE];
        seal(9, 42, &body, &mut image);
        let (lsn, b) = open(9, 9 * 4096, &image).unwrap();
        assert_eq!((lsn, b), (42, &body[..]));
        assert!(open(8, 0, &image).is_err());
        image[2000] ^= 1;
        let e = open(9, 36864, &image).unwrap_err().to_string();
        assert!(e.contains("page 9") && e.contains("checksum"), "{e}");
        assert_eq!(open(3, 0, &[0u8; PAGE_SIZE]).unwrap().0, 0);
    }
}
