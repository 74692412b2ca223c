//! Data blocks: a run's sorted entries, a few KiB at a time, each block one extent.
//!
//! Payload: version byte, entry count, then per entry a tag (0 tombstone, 1 value), the
//! sequence number, the key as (bytes shared with the previous key, the rest) and the value.

use crate::codec::{put_bytes, put_varint, Reader};
use crate::memtable::Entry;

const BLOCK_VERSION: u8 = 1;

/// Accumulates entries into one block payload.
#[derive(Default)]
pub struct BlockWriter {
    buf: Vec<u8>,
    count: u64,
    last_key: Vec<u8>,
    first_key: Vec<u8>,
    body: Vec<u8>,
}

impl BlockWriter {
    pub fn add(&mut self, e: &Entry) {
        let shared = if self.count == 0 {
            self.first_key = e.key.clone();
            0
        } else {
            e.key
                .iter()
                .zip(&self.last_key)
                .take_while(|(a, b)| a == b)
                .count()
        };
        self.body.push(e.value.is_some() as u8);
        put_varint(&mut self.body, e.seq);
        put_varint(&mut self.body, shared as u64);
        put_bytes(&mut self.body, &e.key[shared..]);
        if let Some(v) = &e.value {
            put_bytes(&mut self.body, v);
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(&e.key);
        self.count += 1;
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn size(&self) -> usize {
        self.body.len() + 10
    }

    /// The finished payload, with its first and last key and entry count; the writer is reset.
    pub fn finish(&mut self) -> (Vec<u8>, Vec<u8>, Vec<u8>, u64) {
        self.buf.clear();
        self.buf.push(BLOCK_VERSION);
        put_varint(&mut self.buf, self.count);
        self.buf.extend_from_slice(&self.body);
        let out = (
            std::mem::take(&mut self.buf),
            std::mem::take(&mut self.first_key),
            self.last_key.clone(),
            self.count,
        );
        self.body.clear();
        self.last_key.clear();
        self.count = 0;
        out
    }
}

/// Decodes a block payload into its entries, checking that they are sorted.
pub fn decode(payload: &[u8]) -> Result<Vec<Entry>, String> {
    let mut r = Reader::new(payload);
    let version = r.u8()?;
    if version != BLOCK_VERSION {
        return Err(format!("unsupported block version {version}"));
    }
    let count = r.len()?;
    let mut out: Vec<Entry> = Vec::with_capacity(count);
    let mut prev: Vec<u8> = Vec::new();
    for i in 0..count {
        let tag = r.u8()?;
        let seq = r.varint()?;
        let shared = r.varint()? as usize;
        if shared > prev.len() {
            return Err(format!(
                "entry {i} shares {shared} bytes of a {}-byte key",
                prev.len()
            ));
        }
        let mut key = prev[..shared].to_vec();
        key.extend_from_slice(r.bytes()?);
        let value = match tag {
            0 => None,
            1 => Some(r.bytes()?.to_vec()),
            t => return Err(format!("entry {i} has unknown tag {t}")),
        };
        if let Some(last) = out.last() {
            if (last.key.as_slice(), std::cmp::Reverse(last.seq))
                >= (key.as_slice(), std::cmp::Reverse(seq))
            {
                return Err(format!("entry {i} is out of order"));
            }
        }
        prev.clone_from(&key);
        out.push(Entry { key, seq, value });
    }
    if !r.is_empty() {
        return Err("trailing bytes after the last entry".into());
    }
    Ok(out)
}
