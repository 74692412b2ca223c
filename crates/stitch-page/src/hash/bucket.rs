//! A bucket page's body: kind (1 byte), the next overflow page (u32, 0: none), the entry
//! count (u16), the end of the entries (u16), then entries packed from byte
//! [`ENTRIES_START`]: key length (u16), value length (u16), key, value.

use crate::change::Cursor;
use crate::page::{PageKind, BODY_LEN};
use crate::{PageId, Result};

/// Where entries start in a bucket body.
pub const ENTRIES_START: usize = 9;
/// Bytes of entries a bucket page holds.
pub const BUCKET_CAPACITY: usize = BODY_LEN - ENTRIES_START;
/// Bytes an entry takes besides its key and value.
pub const ENTRY_OVERHEAD: usize = 4;

/// A bucket page, decoded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bucket {
    /// The next page of the bucket's chain (0: none).
    pub next: PageId,
    /// The entries, in page order.
    pub entries: Vec<(Vec<u8>, Vec<u8>)>,
}

/// The bytes `key` and `value` take in a bucket.
pub fn entry_len(key: &[u8], value: &[u8]) -> usize {
    ENTRY_OVERHEAD + key.len() + value.len()
}

/// A bucket body's next page and its entries, borrowed.
type Parsed<'a> = (PageId, Vec<(&'a [u8], &'a [u8])>);

/// Parses a bucket body, checking its kind and every entry's bounds.
fn parse(body: &[u8]) -> Result<Parsed<'_>> {
    let mut c = Cursor::new(body, "hash bucket page");
    if PageKind::of(body) != Some(PageKind::HashBucket) {
        return Err(c.bad(format!("page kind {} is not a bucket", body[0])));
    }
    c.u8()?;
    let next = c.u32()?;
    let count = c.u16()?;
    let end = c.u16()? as usize;
    if !(ENTRIES_START..=BODY_LEN).contains(&end) {
        return Err(c.bad(format!("entries end at {end}")));
    }
    let mut c = Cursor::new(&body[ENTRIES_START..end], "hash bucket page");
    let mut entries = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let klen = c.u16()? as usize;
        let vlen = c.u16()? as usize;
        entries.push((c.take(klen)?, c.take(vlen)?));
    }
    Ok((next, entries))
}

impl Bucket {
    /// Decodes a bucket body.
    pub fn decode(body: &[u8]) -> Result<Bucket> {
        let (next, entries) = parse(body)?;
        Ok(Bucket {
            next,
            entries: entries
                .into_iter()
                .map(|(k, v)| (k.to_vec(), v.to_vec()))
                .collect(),
        })
    }

    /// The bytes its entries take.
    pub fn used(&self) -> usize {
        self.entries.iter().map(|(k, v)| entry_len(k, v)).sum()
    }

    /// Whether one more entry of `len` bytes fits.
    pub fn fits(&self, len: usize) -> bool {
        self.used() + len <= BUCKET_CAPACITY
    }

    /// The body (entries must fit: callers check with [`fits`](Self::fits)).
    pub fn encode(&self) -> Vec<u8> {
        let mut body = vec![0u8; BODY_LEN];
        body[0] = PageKind::HashBucket as u8;
        body[1..5].copy_from_slice(&self.next.to_le_bytes());
        body[5..7].copy_from_slice(&(self.entries.len() as u16).to_le_bytes());
        let mut at = ENTRIES_START;
        for (k, v) in &self.entries {
            body[at..at + 2].copy_from_slice(&(k.len() as u16).to_le_bytes());
            body[at + 2..at + 4].copy_from_slice(&(v.len() as u16).to_le_bytes());
            at += ENTRY_OVERHEAD;
            body[at..at + k.len()].copy_from_slice(k);
            at += k.len();
            body[at..at + v.len()].copy_from_slice(v);
            at += v.len();
        }
        body[7..9].copy_from_slice(&(at as u16).to_le_bytes());
        body
    }
}

/// Finds `key` in a bucket body, copying only its value.
pub fn lookup(body: &[u8], key: &[u8]) -> Result<Option<Vec<u8>>> {
    let (_, entries) = parse(body)?;
    Ok(entries
        .into_iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.to_vec()))
}

/// The next page of a bucket body's chain (0: none).
pub fn next_of(body: &[u8]) -> PageId {
    u32::from_le_bytes([body[1], body[2], body[3], body[4]])
}
