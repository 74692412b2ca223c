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
    /// Range deletes: table, start, end (exclusive).
    pub(crate) ranges: Vec<RangeOp>,
    pub(crate) bytes: usize,
}

/// A range delete of a batch: table, start, end (exclusive).
pub(crate) type RangeOp = (TableId, Vec<u8>, Vec<u8>);

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

    /// Deletes every key from `start` (inclusive) to `end` (exclusive) in `table`, at the cost
    /// of one record however many keys the range holds. Writes earlier in this batch inside
    /// the range are dropped; later ones win. An empty range (`start >= end`) does nothing.
    pub fn delete_range(
        &mut self,
        table: TableId,
        start: impl Into<Vec<u8>>,
        end: impl Into<Vec<u8>>,
    ) {
        let (start, end) = (start.into(), end.into());
        if start >= end {
            return;
        }
        self.ops
            .retain(|(t, k, _)| !(*t == table && start <= *k && *k < end));
        self.bytes += range_bytes(&start, &end);
        self.ranges.push((table, start, end));
    }

    /// A batch of `ranges` (applied first) and `ops` (distinct keys none of the ranges
    /// holds), taken as they are.
    pub(crate) fn from_parts(ops: Vec<(TableId, Vec<u8>, Value)>, ranges: Vec<RangeOp>) -> Self {
        let bytes = ops
            .iter()
            .map(|(_, k, v)| op_bytes(k, v))
            .chain(ranges.iter().map(|(_, s, e)| range_bytes(s, e)))
            .sum();
        WriteBatch { ops, ranges, bytes }
    }

    fn push(&mut self, table: TableId, key: Vec<u8>, value: Value) {
        self.bytes += op_bytes(&key, &value);
        self.ops.push((table, key, value));
    }

    /// Operations in the batch (puts, deletes and range deletes).
    pub fn len(&self) -> usize {
        self.ops.len() + self.ranges.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.ranges.is_empty()
    }

    /// Approximate encoded size in bytes.
    pub fn size(&self) -> usize {
        self.bytes
    }

    pub fn clear(&mut self) {
        self.ops.clear();
        self.ranges.clear();
        self.bytes = 0;
    }
}

/// What a put or delete adds to a batch's approximate size.
fn op_bytes(key: &[u8], value: &Value) -> usize {
    key.len() + value.as_ref().map_or(0, Vec::len) + 16
}

/// What a range delete adds to a batch's approximate size.
fn range_bytes(start: &[u8], end: &[u8]) -> usize {
    start.len() + end.len() + 16
}

/// Encodes operations as a log payload (`OP_BATCH_RANGES`): count, then (table, tag, key,
/// value) each; then the range deletes: count, then (table, start, end) each.
pub(crate) fn encode_ops(ops: &[(TableId, Vec<u8>, Value)], ranges: &[RangeOp]) -> Vec<u8> {
    // Sized up front: growing from empty reallocated a 100-byte put's payload six times.
    let varints = 3 * 5;
    let capacity = 2 * 10
        + ops
            .iter()
            .map(|(_, k, v)| k.len() + v.as_ref().map_or(0, Vec::len) + 1 + varints)
            .sum::<usize>()
        + ranges
            .iter()
            .map(|(_, s, e)| s.len() + e.len() + varints)
            .sum::<usize>();
    let mut out = Vec::with_capacity(capacity);
    put_varint(&mut out, ops.len() as u64);
    for (table, key, value) in ops {
        put_varint(&mut out, table.0 as u64);
        out.push(value.is_some() as u8);
        put_bytes(&mut out, key);
        if let Some(v) = value {
            put_bytes(&mut out, v);
        }
    }
    put_varint(&mut out, ranges.len() as u64);
    for (table, start, end) in ranges {
        put_varint(&mut out, table.0 as u64);
        put_bytes(&mut out, start);
        put_bytes(&mut out, end);
    }
    out
}

/// What a batch payload holds.
pub(crate) type DecodedOps = (Vec<(TableId, Vec<u8>, Value)>, Vec<RangeOp>);

/// Decodes a batch payload; `with_ranges` for `OP_BATCH_RANGES`, else the older `OP_BATCH`
/// (operations only).
pub(crate) fn decode_ops(payload: &[u8], with_ranges: bool) -> Result<DecodedOps, String> {
    let mut r = Reader::new(payload);
    let table_id = |r: &mut Reader| -> Result<TableId, String> {
        Ok(TableId(
            u32::try_from(r.varint()?).map_err(|_| "table id out of range".to_string())?,
        ))
    };
    let n = r.len()?;
    let mut ops = Vec::with_capacity(n);
    for _ in 0..n {
        let table = table_id(&mut r)?;
        let tag = r.u8()?;
        let key = r.bytes()?.to_vec();
        let value = match tag {
            0 => None,
            1 => Some(r.bytes()?.to_vec()),
            t => return Err(format!("unknown operation tag {t}")),
        };
        ops.push((table, key, value));
    }
    let mut ranges = Vec::new();
    if with_ranges {
        for _ in 0..r.len()? {
            let table = table_id(&mut r)?;
            let (start, end) = (r.bytes()?.to_vec(), r.bytes()?.to_vec());
            if start >= end {
                return Err("range delete with start not before end".into());
            }
            ranges.push((table, start, end));
        }
    }
    if !r.is_empty() {
        return Err(format!("{} trailing bytes", payload.len() - r.pos()));
    }
    Ok((ops, ranges))
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
        b.put(
            TableId(3),
            b"m".to_vec(),
            b"dropped by the range below".to_vec(),
        );
        b.delete_range(TableId(3), b"a".to_vec(), b"z".to_vec());
        b.delete_range(TableId(3), b"z".to_vec(), b"a".to_vec());
        assert_eq!(
            b.len(),
            4,
            "the put in the range went, the empty range was ignored"
        );
        let enc = encode_ops(&b.ops, &b.ranges);
        assert_eq!(
            decode_ops(&enc, true).unwrap(),
            (b.ops.clone(), b.ranges.clone())
        );
        // The older payload, without the range deletes, still reads.
        let old = &enc[..enc.len() - encoded_ranges_len(&b.ranges)];
        assert_eq!(decode_ops(old, false).unwrap(), (b.ops.clone(), Vec::new()));
        for cut in 0..enc.len() {
            assert!(
                decode_ops(&enc[..cut], true).is_err(),
                "truncation at {cut} must fail"
            );
        }
    }

    fn encoded_ranges_len(ranges: &[RangeOp]) -> usize {
        encode_ops(&[], ranges).len() - encode_ops(&[], &[]).len() + 1
    }
}
