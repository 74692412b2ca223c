//! A command's writes before they commit, kept apart from any transaction while only point
//! reads follow them: most commands (`SET`, `INCR`, `HSET` ...) then commit as one write batch
//! instead of a transaction (a third less of the engine's time a command takes). The key
//! locks the command holds are what isolate it; a scan of a table it wrote moves the writes
//! into a transaction (`Ctx::scan`), which reads its own writes in ranges too.

use std::collections::HashMap;
use stitchdb::{TableId, Transaction, WriteBatch};

/// A point write: table, key, and value (`None`: a delete).
type Point = (TableId, Vec<u8>, Option<Vec<u8>>);

/// Writes not committed yet.
#[derive(Default)]
pub struct Pending {
    /// Point writes in the order made (`None`: a delete); a later write of the same key, or
    /// a range delete over it, empties the earlier's slot.
    points: Vec<Option<Point>>,
    /// Where each key's newest point write is in `points`.
    newest: HashMap<(TableId, Vec<u8>), usize>,
    /// Range deletes (start inclusive, end exclusive), each before every point write kept.
    ranges: Vec<(TableId, Vec<u8>, Vec<u8>)>,
}

impl Pending {
    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.newest.is_empty() && self.ranges.is_empty()
    }

    /// Whether anything was written to `table`.
    pub fn touches(&self, table: TableId) -> bool {
        self.ranges.iter().any(|(t, _, _)| *t == table)
            || self.newest.keys().any(|(t, _)| *t == table)
    }

    /// What the writes say `key` holds: `Some(value)` (`Some(None)`: deleted) if they decide
    /// it, `None` if the store does.
    pub fn get(&self, table: TableId, key: &[u8]) -> Option<Option<Vec<u8>>> {
        if let Some(&i) = self.newest.get(&(table, key.to_vec())) {
            return self.points[i].as_ref().map(|(_, _, v)| v.clone());
        }
        self.ranges
            .iter()
            .any(|(t, s, e)| *t == table && s.as_slice() <= key && key < e.as_slice())
            .then_some(None)
    }

    /// Sets `key` (`None`: deletes it).
    pub fn put(&mut self, table: TableId, key: &[u8], value: Option<&[u8]>) {
        let slot = self.points.len();
        if let Some(old) = self.newest.insert((table, key.to_vec()), slot) {
            self.points[old] = None;
        }
        self.points
            .push(Some((table, key.to_vec(), value.map(<[u8]>::to_vec))));
    }

    /// Deletes the keys from `start` to `end` (exclusive). Point writes made before it inside
    /// the range are dropped, so that applying every range delete before every point write
    /// (as a batch and a transaction commit them) keeps the order the command made them in.
    pub fn delete_range(&mut self, table: TableId, start: &[u8], end: &[u8]) {
        let inside = |t: TableId, k: &[u8]| t == table && start <= k && k < end;
        let points = &mut self.points;
        self.newest.retain(|(t, k), i| {
            let drop = inside(*t, k);
            if drop {
                points[*i] = None;
            }
            !drop
        });
        self.ranges.push((table, start.to_vec(), end.to_vec()));
    }

    /// The writes as one batch.
    pub fn into_batch(self) -> WriteBatch {
        let mut b = WriteBatch::new();
        for (t, s, e) in self.ranges {
            b.delete_range(t, s, e);
        }
        for (t, k, v) in self.points.into_iter().flatten() {
            match v {
                Some(v) => b.put(t, k, v),
                None => b.delete(t, k),
            }
        }
        b
    }

    /// Makes the writes in `txn`.
    pub fn replay(self, txn: &mut Transaction<'static>) -> stitchdb::Result<()> {
        for (t, s, e) in self.ranges {
            txn.delete_range(t, s, e)?;
        }
        for (t, k, v) in self.points.into_iter().flatten() {
            match v {
                Some(v) => txn.put(t, k, v)?,
                None => txn.delete(t, k)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_see_the_newest_write_and_ranges_drop_earlier_points() {
        let t = TableId(1);
        let mut p = Pending::default();
        assert!(p.is_empty() && p.get(t, b"a").is_none());
        p.put(t, b"a", Some(b"1"));
        p.put(t, b"a", Some(b"2"));
        assert_eq!(p.get(t, b"a"), Some(Some(b"2".to_vec())));
        p.delete_range(t, b"a", b"c");
        assert_eq!(p.get(t, b"a"), Some(None));
        assert_eq!(p.get(t, b"b"), Some(None));
        assert_eq!(p.get(t, b"c"), None);
        p.put(t, b"b", Some(b"3"));
        assert_eq!(p.get(t, b"b"), Some(Some(b"3".to_vec())));
        assert!(p.touches(t) && !p.touches(TableId(2)));
        assert_eq!(p.points.iter().flatten().count(), 1);
    }
}
