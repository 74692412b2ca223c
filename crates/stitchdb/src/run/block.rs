//! Data blocks: a run's sorted entries, a few KiB at a time, each block one extent.
//!
//! Payload: a version byte, the entries back to back, then the offset of every entry (u32 LE,
//! from the start of the payload) and the entry count (u32 LE). An entry is a tag (0 tombstone,
//! 1 value), the sequence number (varint), the key (varint length, bytes) and, for tag 1, the
//! value (varint length, bytes). The offset table lets a lookup binary-search a block without
//! decoding it; parsing validates every entry once, so later accesses cannot fail.

use crate::codec::{put_bytes, put_varint, Reader};
#[cfg(test)]
use crate::memtable::Entry;
use crate::memtable::EntryRef;
use std::cmp::Ordering;

const BLOCK_VERSION: u8 = 1;
const NO_VALUE: u32 = u32::MAX;

/// Accumulates entries into one block payload.
#[derive(Default)]
pub struct BlockWriter {
    body: Vec<u8>,
    offsets: Vec<u32>,
    first_key: Vec<u8>,
    last_key: Vec<u8>,
}

impl BlockWriter {
    pub fn add(&mut self, e: EntryRef) {
        if self.offsets.is_empty() {
            self.body.push(BLOCK_VERSION);
            self.first_key.clear();
            self.first_key.extend_from_slice(e.key);
        }
        self.offsets.push(self.body.len() as u32);
        self.body.push(e.value.is_some() as u8);
        put_varint(&mut self.body, e.seq);
        put_bytes(&mut self.body, e.key);
        if let Some(v) = e.value {
            put_bytes(&mut self.body, v);
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(e.key);
    }

    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// The payload size if the block were finished now.
    pub fn size(&self) -> usize {
        self.body.len() + 4 * self.offsets.len() + 4
    }

    /// The finished payload, its first and last key and entry count; the writer is reset.
    pub fn finish(&mut self) -> (Vec<u8>, Vec<u8>, Vec<u8>, u64) {
        let count = self.offsets.len() as u64;
        let mut payload = std::mem::take(&mut self.body);
        payload.reserve(4 * self.offsets.len() + 4);
        for off in self.offsets.drain(..) {
            payload.extend_from_slice(&off.to_le_bytes());
        }
        payload.extend_from_slice(&(count as u32).to_le_bytes());
        (
            payload,
            std::mem::take(&mut self.first_key),
            std::mem::take(&mut self.last_key),
            count,
        )
    }
}

/// Where one entry's parts lie in the payload.
#[derive(Debug, Clone, Copy)]
struct Span {
    key: (u32, u32),
    value: (u32, u32),
    seq: u64,
}

/// A parsed, validated block.
#[derive(Debug)]
pub struct Block {
    data: Vec<u8>,
    spans: Vec<Span>,
}

impl Block {
    /// Parses and validates a payload: version, offsets, every entry, and their order.
    pub fn parse(data: Vec<u8>) -> Result<Block, String> {
        if data.len() < 5 || data[0] != BLOCK_VERSION {
            return Err(format!("unsupported block version {:?}", data.first()));
        }
        let count = u32::from_le_bytes(data[data.len() - 4..].try_into().unwrap()) as usize;
        let table = count
            .checked_mul(4)
            .filter(|&t| t + 5 <= data.len())
            .ok_or("entry count too large")?;
        let entries_end = data.len() - 4 - table;
        let offset = |i: usize| {
            let at = entries_end + 4 * i;
            u32::from_le_bytes(data[at..at + 4].try_into().unwrap()) as usize
        };
        let mut spans: Vec<Span> = Vec::with_capacity(count);
        for i in 0..count {
            let (start, end) = (
                offset(i),
                if i + 1 < count {
                    offset(i + 1)
                } else {
                    entries_end
                },
            );
            if start >= end || end > entries_end || (i == 0 && start != 1) {
                return Err(format!(
                    "entry {i}: offsets {start}..{end} are out of place"
                ));
            }
            let span =
                Self::parse_entry(&data, start, end).map_err(|e| format!("entry {i}: {e}"))?;
            if let Some(prev) = spans.last() {
                let prev_key = &data[Self::range(prev.key)];
                let key = &data[Self::range(span.key)];
                if (prev_key, std::cmp::Reverse(prev.seq)) >= (key, std::cmp::Reverse(span.seq)) {
                    return Err(format!("entry {i} is out of order"));
                }
            }
            spans.push(span);
        }
        Ok(Block { data, spans })
    }

    fn parse_entry(data: &[u8], start: usize, end: usize) -> Result<Span, String> {
        let mut r = Reader::new(&data[start..end]);
        let tag = r.u8()?;
        let seq = r.varint()?;
        let klen = r.len()?;
        let key_start = start + r.pos();
        r.take(klen)?;
        let value = match tag {
            0 => (NO_VALUE, NO_VALUE),
            1 => {
                let vlen = r.len()?;
                let at = start + r.pos();
                r.take(vlen)?;
                (at as u32, (at + vlen) as u32)
            }
            t => return Err(format!("unknown tag {t}")),
        };
        if !r.is_empty() {
            return Err("trailing bytes".into());
        }
        Ok(Span {
            key: (key_start as u32, (key_start + klen) as u32),
            value,
            seq,
        })
    }

    fn range((start, end): (u32, u32)) -> std::ops::Range<usize> {
        start as usize..end as usize
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Bytes the block takes in memory (for the read cache's budget).
    pub fn memory(&self) -> usize {
        self.data.capacity() + self.spans.capacity() * std::mem::size_of::<Span>()
    }

    pub fn entry(&self, i: usize) -> EntryRef<'_> {
        let s = self.spans[i];
        let value = (s.value.0 != NO_VALUE).then(|| &self.data[Self::range(s.value)]);
        EntryRef {
            key: &self.data[Self::range(s.key)],
            seq: s.seq,
            value,
        }
    }

    /// The index of the first entry whose key is at least `key`.
    pub fn seek(&self, key: &[u8]) -> usize {
        self.spans
            .partition_point(|s| self.data[Self::range(s.key)].cmp(key) == Ordering::Less)
    }

    /// The newest version of `key` at or below `snapshot` in this block; `Err(true)` when there
    /// is none here but older versions may continue in the next block.
    pub fn get(&self, key: &[u8], snapshot: u64) -> Result<EntryRef<'_>, bool> {
        for i in self.seek(key)..self.len() {
            let e = self.entry(i);
            if e.key != key {
                return Err(false);
            }
            if e.seq <= snapshot {
                return Ok(e);
            }
        }
        Err(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(e: &Entry) -> EntryRef<'_> {
        EntryRef {
            key: &e.key,
            seq: e.seq,
            value: e.value.as_deref(),
        }
    }

    fn e(key: &str, seq: u64, value: Option<&str>) -> Entry {
        Entry {
            key: key.as_bytes().to_vec(),
            seq,
            value: value.map(|v| v.as_bytes().to_vec()),
        }
    }

    #[test]
    fn blocks_round_trip_and_search() {
        let entries = vec![
            e("a", 5, Some("a5")),
            e("a", 2, None),
            e("b", 9, Some("")),
            e("d", 1, Some("dd")),
        ];
        let mut w = BlockWriter::default();
        for x in &entries {
            w.add(r(x));
        }
        let size = w.size();
        let (payload, first, last, n) = w.finish();
        assert_eq!(
            (payload.len(), first, last, n),
            (size, b"a".to_vec(), b"d".to_vec(), 4)
        );
        let b = Block::parse(payload).unwrap();
        let back: Vec<Entry> = (0..b.len()).map(|i| b.entry(i).to_entry()).collect();
        assert_eq!(back, entries);
        assert_eq!(b.get(b"a", 10).unwrap().value, Some(&b"a5"[..]));
        assert_eq!(b.get(b"a", 3).unwrap().value, None, "the tombstone at 2");
        assert_eq!(b.get(b"a", 1), Err(false));
        assert_eq!(b.get(b"c", 10), Err(false));
        assert_eq!(
            b.get(b"d", 0),
            Err(true),
            "older versions of the last key may follow"
        );
        assert_eq!(b.seek(b"c"), 3);
    }

    #[test]
    fn damaged_blocks_are_errors_not_panics() {
        let mut w = BlockWriter::default();
        for i in 0..20 {
            w.add(r(&e(&format!("key{i:02}"), 1, Some("value"))));
        }
        let (payload, ..) = w.finish();
        for cut in 0..payload.len() {
            let _ = Block::parse(payload[..cut].to_vec());
        }
        for i in 0..payload.len() {
            let mut bad = payload.clone();
            bad[i] ^= 0x5a;
            if let Ok(b) = Block::parse(bad) {
                for j in 0..b.len() {
                    let _ = b.entry(j);
                }
            }
        }
        let mut swapped = BlockWriter::default();
        swapped.add(r(&e("b", 1, None)));
        swapped.add(r(&e("a", 1, None)));
        assert!(
            Block::parse(swapped.finish().0).is_err(),
            "order is checked"
        );
    }
}
