//! Write batches: changes to any number of tables applied atomically, and their log encoding.

use crate::codec::{put_bytes, put_varint, Reader};
use crate::entry::Value;

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

/// Range deletes as the tables apply them: table, start, end (borrowed).
pub(crate) fn range_refs(ranges: &[RangeOp]) -> impl Iterator<Item = (TableId, &[u8], &[u8])> {
    ranges
        .iter()
        .map(|(t, start, end)| (*t, start.as_slice(), end.as_slice()))
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `key` of `table` to `value`.
    pub fn put(&mut self, table: TableId, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) {
        self.push(table, key.into(), Some(value.into()));
    }

    /// Deletes `key` of `table`.
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

    /// Whether the batch holds no operation.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.ranges.is_empty()
    }

    /// Approximate encoded size in bytes.
    pub fn size(&self) -> usize {
        self.bytes
    }

    /// Removes every operation, keeping the allocations.
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

/// Operations as a log payload (`OP_BATCH_RANGES`): count, then (table, tag, key, value)
/// each; then the range deletes: count, then (table, start, end) each. Kept in pieces: the
/// encoding's own bytes in one buffer, long values where the batch holds them, so appending
/// the payload to the log copies such a value once, straight into the log's buffer.
pub(crate) struct OpsPayload<'a> {
    own: Vec<u8>,
    /// Each long value and the offset in `own` it goes before.
    values: Vec<(usize, &'a [u8])>,
}

/// Values at least this long stay where the batch holds them. Shorter ones are cheaper to copy
/// than to give a piece of their own.
const LONG_VALUE: usize = 1024;

/// The bytes of `value` an [`OpsPayload`] copies into its own buffer.
fn copied_len(value: &Value) -> usize {
    value
        .as_ref()
        .map_or(0, |v| if v.len() < LONG_VALUE { v.len() } else { 0 })
}

impl<'a> OpsPayload<'a> {
    pub fn new(ops: &'a [(TableId, Vec<u8>, Value)], ranges: &[RangeOp]) -> Self {
        // Sized up front: growing from empty reallocated a 100-byte put's payload six times.
        let varints = 3 * 5;
        let capacity = 2 * 10
            + ops
                .iter()
                .map(|(_, k, v)| k.len() + copied_len(v) + 1 + varints)
                .sum::<usize>()
            + ranges
                .iter()
                .map(|(_, s, e)| s.len() + e.len() + varints)
                .sum::<usize>();
        let mut own = Vec::with_capacity(capacity);
        let mut values = Vec::new();
        put_varint(&mut own, ops.len() as u64);
        for (table, key, value) in ops {
            put_varint(&mut own, table.0 as u64);
            own.push(value.is_some() as u8);
            put_bytes(&mut own, key);
            match value {
                Some(v) if v.len() >= LONG_VALUE => {
                    put_varint(&mut own, v.len() as u64);
                    values.push((own.len(), v.as_slice()));
                }
                Some(v) => put_bytes(&mut own, v),
                None => {}
            }
        }
        put_varint(&mut own, ranges.len() as u64);
        for (table, start, end) in ranges {
            put_varint(&mut own, table.0 as u64);
            put_bytes(&mut own, start);
            put_bytes(&mut own, end);
        }
        OpsPayload { own, values }
    }

    /// Calls `f` with the payload's pieces, in order (one unless it holds long values).
    pub fn with_pieces<R>(&self, f: impl FnOnce(&[&[u8]]) -> R) -> R {
        if self.values.is_empty() {
            return f(&[&self.own]);
        }
        f(&self.pieces())
    }

    fn pieces(&self) -> Vec<&[u8]> {
        let mut pieces = Vec::with_capacity(2 * self.values.len() + 1);
        let mut at = 0;
        for &(offset, value) in &self.values {
            pieces.push(&self.own[at..offset]);
            pieces.push(value);
            at = offset;
        }
        pieces.push(&self.own[at..]);
        pieces
    }
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

    /// The payload of `ops` and `ranges` in one piece.
    fn encode_ops(ops: &[(TableId, Vec<u8>, Value)], ranges: &[RangeOp]) -> Vec<u8> {
        OpsPayload::new(ops, ranges).pieces().concat()
    }

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

    #[test]
    fn long_values_are_pieces_of_their_own() {
        let mut b = WriteBatch::new();
        b.put(TableId(1), b"a".to_vec(), vec![1; LONG_VALUE]);
        b.put(TableId(1), b"b".to_vec(), vec![2; LONG_VALUE - 1]);
        b.put(TableId(1), b"c".to_vec(), vec![3; 3 * LONG_VALUE]);
        b.delete(TableId(1), b"d".to_vec());
        let payload = OpsPayload::new(&b.ops, &b.ranges);
        let pieces = payload.pieces();
        assert_eq!(pieces.len(), 2 * 2 + 1, "the short value is copied");
        assert_eq!(pieces[1].as_ptr(), b.ops[0].2.as_ref().unwrap().as_ptr());
        assert_eq!(pieces[3].as_ptr(), b.ops[2].2.as_ref().unwrap().as_ptr());
        let joined = payload.with_pieces(|p| p.concat());
        assert_eq!(
            decode_ops(&joined, true).unwrap(),
            (b.ops.clone(), Vec::new())
        );
        let short = &b.ops[1..2];
        let payload = OpsPayload::new(short, &[]);
        payload.with_pieces(|p| assert_eq!(p.len(), 1));
    }

    fn encoded_ranges_len(ranges: &[RangeOp]) -> usize {
        encode_ops(&[], ranges).len() - encode_ops(&[], &[]).len() + 1
    }
}
