//! Page changes as the log records them, and the payloads of the page store's operations.
//!
//! Every record that changes pages starts with its changes: a count (u16) and, per change,
//! the page (u32), the body offset (u16), the length (u16), the before-image (physical
//! writes only: see [`Images`]) and the after-image. A change covering the whole body is a *full-page image*: redo writes it
//! without reading the page, which is how a page torn by a crash is rebuilt (the first
//! change of every page after a checkpoint is logged whole).

use crate::page::BODY_LEN;
use crate::{PageError, PageId, Result};
use stitch_wal::Lsn;

/// Differing stretches of a body closer than this are logged as one change.
pub const MERGE_GAP: usize = 16;

/// One page's bytes `offset..offset + after.len()` of the body, before and after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageChange {
    /// The page changed.
    pub page: PageId,
    /// Where in its body the change starts.
    pub offset: u16,
    /// The bytes there before the change (what undo puts back).
    pub before: Vec<u8>,
    /// The bytes there after it (what redo writes).
    pub after: Vec<u8>,
}

impl PageChange {
    /// The changes from body `old` to body `new` of `page`: each stretch of differing bytes
    /// (stretches fewer than [`MERGE_GAP`] bytes apart taken as one, so a change costs a few
    /// records' headers at most), or one change of the whole body when `full`. Empty when
    /// nothing differs.
    pub fn between(page: PageId, old: &[u8], new: &[u8], full: bool) -> Vec<PageChange> {
        let change = |start: usize, end: usize| PageChange {
            page,
            offset: start as u16,
            before: old[start..end].to_vec(),
            after: new[start..end].to_vec(),
        };
        if old == new {
            return Vec::new();
        }
        if full {
            return vec![change(0, BODY_LEN)];
        }
        let mut changes = Vec::new();
        let mut run: Option<(usize, usize)> = None;
        // Compared a chunk at a time (a memcmp), bytes only inside chunks that differ.
        for (i, (a, b)) in old.chunks(MERGE_GAP).zip(new.chunks(MERGE_GAP)).enumerate() {
            if a == b {
                continue;
            }
            let base = i * MERGE_GAP;
            let first = base + a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(0);
            let last = base + a.iter().zip(b).rposition(|(x, y)| x != y).unwrap_or(0) + 1;
            run = match run {
                Some((start, end)) if first - end < MERGE_GAP => Some((start, last)),
                Some((start, end)) => {
                    changes.push(change(start, end));
                    Some((first, last))
                }
                None => Some((first, last)),
            };
        }
        if let Some((start, end)) = run {
            changes.push(change(start, end));
        }
        changes
    }

    /// Whether redo can write it without the page's old contents.
    pub fn is_full(&self) -> bool {
        self.offset == 0 && self.after.len() == BODY_LEN
    }
}

/// Which images a record's changes carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Images {
    /// Before- and after-images: a physical write, undone by its before-images.
    Both,
    /// After-images only: a change undone logically, or a compensation (never undone).
    After,
}

/// Appends `changes` in the log's encoding.
pub fn encode_changes(changes: &[PageChange], images: Images, out: &mut Vec<u8>) {
    out.extend_from_slice(&(changes.len() as u16).to_le_bytes());
    for c in changes {
        out.extend_from_slice(&c.page.to_le_bytes());
        out.extend_from_slice(&c.offset.to_le_bytes());
        out.extend_from_slice(&(c.after.len() as u16).to_le_bytes());
        if images == Images::Both {
            out.extend_from_slice(&c.before);
        }
        out.extend_from_slice(&c.after);
    }
}

/// A little-endian reader over a payload that turns running short into [`PageError::Corrupt`].
pub struct Cursor<'a> {
    bytes: &'a [u8],
    what: &'static str,
}

impl<'a> Cursor<'a> {
    /// Reads `bytes`, naming `what` in errors.
    pub fn new(bytes: &'a [u8], what: &'static str) -> Self {
        Cursor { bytes, what }
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.bytes.len() < n {
            return Err(PageError::Corrupt {
                what: self.what,
                detail: format!("ends {} bytes short", n - self.bytes.len()),
            });
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    /// The next byte.
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    /// The next u16.
    pub fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes([self.u8()?, self.u8()?]))
    }

    /// The next u32.
    pub fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// The next u64.
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from(self.u32()?) | (u64::from(self.u32()?) << 32))
    }

    /// What is left.
    pub fn rest(&self) -> &'a [u8] {
        self.bytes
    }

    /// An error naming this payload.
    pub fn bad(&self, detail: impl Into<String>) -> PageError {
        PageError::Corrupt {
            what: self.what,
            detail: detail.into(),
        }
    }
}

/// Decodes the changes at the start of `payload` (their before-images empty unless `images`
/// is [`Images::Both`]); returns them and the rest of the payload.
pub fn decode_changes(payload: &[u8], images: Images) -> Result<(Vec<PageChange>, &[u8])> {
    let mut c = Cursor::new(payload, "log record's page changes");
    let n = c.u16()?;
    let mut changes = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let page = c.u32()?;
        let offset = c.u16()?;
        let len = c.u16()? as usize;
        if offset as usize + len > BODY_LEN {
            return Err(c.bad(format!("change {offset}+{len} runs past the page body")));
        }
        let before = match images {
            Images::Both => c.take(len)?.to_vec(),
            Images::After => Vec::new(),
        };
        let after = c.take(len)?.to_vec();
        changes.push(PageChange {
            page,
            offset,
            before,
            after,
        });
    }
    Ok((changes, c.rest()))
}

/// Splits a compensation record's payload into the LSN it undoes and its changes.
pub fn decode_compensation(payload: &[u8]) -> Result<(Lsn, Vec<PageChange>)> {
    let mut c = Cursor::new(payload, "compensation record");
    let lsn = c.u64()?;
    let (changes, _) = decode_changes(c.rest(), Images::After)?;
    Ok((lsn, changes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_round_trip_and_diff_is_minimal() {
        let old = vec![0u8; BODY_LEN];
        let mut new = old.clone();
        new[10] = 1;
        new[20] = 2;
        let c = PageChange::between(5, &old, &new, false).remove(0);
        assert_eq!((c.offset, c.after.len()), (10, 11));
        new[1000] = 3;
        let two = PageChange::between(5, &old, &new, false);
        assert_eq!(two.len(), 2);
        assert_eq!((two[1].offset, two[1].after.len()), (1000, 1));
        let full = PageChange::between(5, &old, &new, true).remove(0);
        assert!(full.is_full() && !c.is_full());
        assert!(PageChange::between(5, &old, &old, true).is_empty());
        let mut out = Vec::new();
        encode_changes(&[c.clone(), full.clone()], Images::Both, &mut out);
        out.extend_from_slice(b"tail");
        let (back, rest) = decode_changes(&out, Images::Both).unwrap();
        assert_eq!((back, rest), (vec![c.clone(), full.clone()], &b"tail"[..]));
        assert!(decode_changes(&out[..30], Images::Both).is_err());
        let mut out = Vec::new();
        encode_changes(&[c.clone(), full], Images::After, &mut out);
        let (back, _) = decode_changes(&out, Images::After).unwrap();
        assert_eq!((back[0].before.len(), &back[0].after), (0, &c.after));
    }
}
