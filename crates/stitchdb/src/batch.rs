//! Write batches: changes to any number of tables applied atomically, and their log encoding.

use crate::codec::{put_bytes, put_varint, Reader};
use crate::memtable::Value;

/// Names a table inside a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableId(pub u32);

/// Changes applied together: after a crash all or none of them are present.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBatch {
    pub(crate) ops: Vec<(TableId, Vec<u8>, Value)>,
    pub(crate) bytes: usize,
}

impl WriteBatch {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn put(&mut self, table: TableId, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) {
        self.push(table, key.into(), Some(value.into()));
    }

    pub fn delete(&mut self, table: TableId, key: impl Into<Vec<u8>>) {
        self.push(table, key.into(), None);
    }

    fn push(&mut self, table: TableId, key: Vec<u8>, value: Value) {
        self.bytes += key.len() + value.as_ref().map_or(0, Vec::len) + 16;
        self.ops.push((table, key, value));
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Approximate encoded size in bytes.
    pub fn size(&self) -> usize {
        self.bytes
    }

    pub fn clear(&mut self) {
        self.ops.clear();
        self.bytes = 0;
    }
}

/// Encodes operations as a log payload: count, then (table, tag, key, value) each.
pub(crate) fn encode_ops(ops: &[(TableId, Vec<u8>, Value)]) -> Vec<u8> {
    let mut out = Vec::new();
    put_varint(&mut out, ops.len() as u64);
    for (table, key, value) in ops {
        put_varint(&mut out, table.0 as u64);
        out.push(value.is_some() as u8);
        put_bytes(&mut out, key);
        if let Some(v) = value {
            put_bytes(&mut out, v);
        }
    }
    out
}

pub(crate) fn decode_ops(payload: &[u8]) -> Result<Vec<(TableId, Vec<u8>, Value)>, String> {
    let mut r = Reader::new(payload);
    let n = r.len()?;
    let mut ops = Vec::with_capacity(n);
    for _ in 0..n {
        let table =
            TableId(u32::try_from(r.varint()?).map_err(|_| "table id out of range".to_string())?);
        let tag = r.u8()?;
        let key = r.bytes()?.to_vec();
        let value = match tag {
            0 => None,
            1 => Some(r.bytes()?.to_vec()),
            t => return Err(format!("unknown operation tag {t}")),
        };
        ops.push((table, key, value));
    }
    if !r.is_empty() {
        return Err(format!("{} trailing bytes", payload.len() - r.pos()));
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_round_trip_and_damage_is_reported() {
        let mut b = WriteBatch::new();
        b.put(TableId(1), b"k".to_vec(), b"v".to_vec());
        b.delete(TableId(2), b"gone".to_vec());
        b.put(TableId(1), Vec::new(), Vec::new());
        let enc = encode_ops(&b.ops);
        assert_eq!(decode_ops(&enc).unwrap(), b.ops);
        for cut in 0..enc.len() {
            assert!(
                decode_ops(&enc[..cut]).is_err(),
                "truncation at {cut} must fail"
            );
        }
    }
}
