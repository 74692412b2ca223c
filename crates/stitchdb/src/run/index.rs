//! A run's secondary index: first key, last key, entry count and extent of every block.
//! Kept in memory while the run is open and persisted beside the blocks as index extents.

use crate::codec::{put_bytes, put_varint, Reader};
use stitch_zone::ExtentAddr;

const INDEX_VERSION: u8 = 1;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockHandle {
    pub first_key: Vec<u8>,
    pub last_key: Vec<u8>,
    pub entries: u64,
    pub addr: ExtentAddr,
}

impl BlockHandle {
    fn encoded_len(&self) -> usize {
        self.first_key.len() + self.last_key.len() + ExtentAddr::ENCODED_LEN + 12
    }
}

/// Splits the handles into index extent payloads of at most `max_chunk` bytes each.
pub fn encode_chunks(handles: &[BlockHandle], max_chunk: usize) -> Vec<Vec<u8>> {
    let mut chunks = Vec::new();
    let mut start = 0;
    while start < handles.len() || chunks.is_empty() {
        let mut size = 16;
        let mut end = start;
        while end < handles.len()
            && (end == start || size + handles[end].encoded_len() <= max_chunk)
        {
            size += handles[end].encoded_len();
            end += 1;
        }
        let mut out = vec![INDEX_VERSION];
        put_varint(&mut out, (end - start) as u64);
        for h in &handles[start..end] {
            put_bytes(&mut out, &h.first_key);
            put_bytes(&mut out, &h.last_key);
            put_varint(&mut out, h.entries);
            h.addr.encode(&mut out);
        }
        chunks.push(out);
        start = end;
    }
    chunks
}

pub fn decode_chunk(payload: &[u8], out: &mut Vec<BlockHandle>) -> Result<(), String> {
    let mut r = Reader::new(payload);
    let version = r.u8()?;
    if version != INDEX_VERSION {
        return Err(format!("unsupported index version {version}"));
    }
    let n = r.len()?;
    for i in 0..n {
        let first_key = r.bytes()?.to_vec();
        let last_key = r.bytes()?.to_vec();
        let entries = r.varint()?;
        let addr = ExtentAddr::decode(r.take(ExtentAddr::ENCODED_LEN)?).ok_or("short address")?;
        if first_key > last_key {
            return Err(format!("block {i}: first key sorts after last key"));
        }
        if let Some(prev) = out.last() {
            if prev.last_key > first_key {
                return Err(format!("block {i} overlaps the block before it"));
            }
        }
        out.push(BlockHandle {
            first_key,
            last_key,
            entries,
            addr,
        });
    }
    if !r.is_empty() {
        return Err("trailing bytes after the last handle".into());
    }
    Ok(())
}
