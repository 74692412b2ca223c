//! A transaction's private writes: the newest write of each key, in (table, key) order.
//!
//! Most transactions write a handful of keys. Those live in a sorted vector laid out like a
//! [`WriteBatch`](crate::batch::WriteBatch)'s operations, so a small commit hands the vector
//! over as its batch without copying or allocating anything. Past [`SMALL`] keys a vector's
//! insertions would cost O(n) each, so the set moves into a tree.

use crate::batch::TableId;
use crate::entry::Value;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::ops::Bound;

/// Keys held in the sorted vector before the set moves into a tree.
const SMALL: usize = 32;

/// One private write: table, key, value (`None`: deleted).
pub(crate) type Write = (TableId, Vec<u8>, Value);

#[derive(Debug)]
pub(crate) enum WriteSet {
    /// Sorted by (table, key), keys distinct.
    Small(Vec<Write>),
    Large(BTreeMap<(TableId, Vec<u8>), Value>),
}

impl Default for WriteSet {
    fn default() -> Self {
        WriteSet::Small(Vec::new())
    }
}

fn order(w: &Write, table: TableId, key: &[u8]) -> Ordering {
    (w.0, w.1.as_slice()).cmp(&(table, key))
}

/// Whether `key` is at or after `start`, and before or at `end`.
fn inside(key: &[u8], start: Bound<&[u8]>, end: Bound<&[u8]>) -> bool {
    let after_start = match start {
        Bound::Included(s) => key >= s,
        Bound::Excluded(s) => key > s,
        Bound::Unbounded => true,
    };
    let before_end = match end {
        Bound::Included(e) => key <= e,
        Bound::Excluded(e) => key < e,
        Bound::Unbounded => true,
    };
    after_start && before_end
}

impl WriteSet {
    pub fn is_empty(&self) -> bool {
        match self {
            WriteSet::Small(v) => v.is_empty(),
            WriteSet::Large(m) => m.is_empty(),
        }
    }

    /// This transaction's newest write of `key`, if it made one.
    pub fn get(&self, table: TableId, key: &[u8]) -> Option<&Value> {
        match self {
            WriteSet::Small(v) => v
                .binary_search_by(|w| order(w, table, key))
                .ok()
                .map(|i| &v[i].2),
            WriteSet::Large(m) => m.get(&(table, key.to_vec())),
        }
    }

    /// Records a write of `key`, returning the write it replaces.
    pub fn insert(&mut self, table: TableId, key: Vec<u8>, value: Value) -> Option<Value> {
        match self {
            WriteSet::Small(v) => match v.binary_search_by(|w| order(w, table, &key)) {
                Ok(i) => Some(std::mem::replace(&mut v[i].2, value)),
                Err(i) if v.len() < SMALL => {
                    v.insert(i, (table, key, value));
                    None
                }
                Err(_) => {
                    let mut tree: BTreeMap<_, _> = std::mem::take(v)
                        .into_iter()
                        .map(|(t, k, v)| ((t, k), v))
                        .collect();
                    tree.insert((table, key), value);
                    *self = WriteSet::Large(tree);
                    None
                }
            },
            WriteSet::Large(m) => m.insert((table, key), value),
        }
    }

    /// Forgets the write of `key`, returning it.
    pub fn remove(&mut self, table: TableId, key: &[u8]) -> Option<Value> {
        match self {
            WriteSet::Small(v) => v
                .binary_search_by(|w| order(w, table, key))
                .ok()
                .map(|i| v.remove(i).2),
            WriteSet::Large(m) => m.remove(&(table, key.to_vec())),
        }
    }

    /// The writes of `table` with keys in `(start, end)`, in key order.
    pub fn range<'a>(
        &'a self,
        table: TableId,
        start: Bound<&'a [u8]>,
        end: Bound<&'a [u8]>,
    ) -> Box<dyn Iterator<Item = (&'a [u8], &'a Value)> + 'a> {
        match self {
            WriteSet::Small(v) => {
                let first = v.partition_point(|w| order(w, table, &[]) == Ordering::Less);
                Box::new(
                    v[first..]
                        .iter()
                        .take_while(move |w| w.0 == table)
                        .filter(move |w| inside(&w.1, start, end))
                        .map(|w| (w.1.as_slice(), &w.2)),
                )
            }
            WriteSet::Large(m) => {
                // Only a lower bound: a tree's range of an empty interval would panic.
                let from = match start {
                    Bound::Included(k) => Bound::Included((table, k.to_vec())),
                    Bound::Excluded(k) => Bound::Excluded((table, k.to_vec())),
                    Bound::Unbounded => Bound::Included((table, Vec::new())),
                };
                Box::new(
                    m.range((from, Bound::Unbounded))
                        .take_while(move |((t, k), _)| *t == table && inside(k, start, end))
                        .map(|((_, k), v)| (k.as_slice(), v)),
                )
            }
        }
    }

    /// Removes the writes of `table` with keys from `start` (inclusive) to `end` (exclusive),
    /// returning them.
    pub fn remove_range(&mut self, table: TableId, start: &[u8], end: &[u8]) -> Vec<Write> {
        let doomed: Vec<Vec<u8>> = self
            .range(table, Bound::Included(start), Bound::Excluded(end))
            .map(|(k, _)| k.to_vec())
            .collect();
        doomed
            .into_iter()
            .filter_map(|k| self.remove(table, &k).map(|v| (table, k, v)))
            .collect()
    }

    /// The tables written, each once, in order.
    pub fn tables(&self) -> Vec<TableId> {
        let mut tables: Vec<TableId> = match self {
            WriteSet::Small(v) => v.iter().map(|w| w.0).collect(),
            WriteSet::Large(m) => m.keys().map(|(t, _)| *t).collect(),
        };
        tables.dedup();
        tables
    }

    /// Every write, in (table, key) order: a batch's operations.
    pub fn into_writes(self) -> Vec<Write> {
        match self {
            WriteSet::Small(v) => v,
            WriteSet::Large(m) => m.into_iter().map(|((t, k), v)| (t, k, v)).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u32, u8, Option<u8>),
        Remove(u32, u8),
        RemoveRange(u32, u8, u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..3u32, any::<u8>(), any::<Option<u8>>()).prop_map(|(t, k, v)| Op::Insert(t, k, v)),
            1 => (0..3u32, any::<u8>()).prop_map(|(t, k)| Op::Remove(t, k)),
            1 => (0..3u32, any::<u8>(), any::<u8>()).prop_map(|(t, s, e)| Op::RemoveRange(t, s, e)),
        ]
    }

    fn bound(b: u8, kind: u8) -> Bound<Vec<u8>> {
        match kind % 3 {
            0 => Bound::Included(vec![b]),
            1 => Bound::Excluded(vec![b]),
            _ => Bound::Unbounded,
        }
    }

    proptest! {
        /// Through the move from vector to tree and back out, the set answers as a map does.
        #[test]
        fn answers_as_a_map_in_either_form(
            ops in prop::collection::vec(op(), 0..200),
            probes in prop::collection::vec((0..3u32, any::<u8>(), any::<u8>(), 0..9u8), 1..20),
        ) {
            let mut set = WriteSet::default();
            let mut model: BTreeMap<(TableId, Vec<u8>), Value> = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Insert(t, k, v) => {
                        let value = v.map(|b| vec![b]);
                        prop_assert_eq!(
                            set.insert(TableId(t), vec![k], value.clone()),
                            model.insert((TableId(t), vec![k]), value)
                        );
                    }
                    Op::Remove(t, k) => {
                        prop_assert_eq!(set.remove(TableId(t), &[k]), model.remove(&(TableId(t), vec![k])));
                    }
                    Op::RemoveRange(t, s, e) => {
                        let removed = set.remove_range(TableId(t), &[s], &[e]);
                        let expected: Vec<Write> = if s < e {
                            let gone: Vec<_> = model
                                .range((TableId(t), vec![s])..(TableId(t), vec![e]))
                                .map(|((t, k), v)| (*t, k.clone(), v.clone()))
                                .collect();
                            for (t, k, _) in &gone {
                                model.remove(&(*t, k.clone()));
                            }
                            gone
                        } else {
                            Vec::new()
                        };
                        prop_assert_eq!(removed, expected);
                    }
                }
                prop_assert_eq!(set.is_empty(), model.is_empty());
            }
            for (t, a, b, kinds) in probes {
                let table = TableId(t);
                prop_assert_eq!(set.get(table, &[a]), model.get(&(table, vec![a])));
                let (lo, hi) = (bound(a, kinds), bound(b, kinds / 3));
                let got: Vec<(Vec<u8>, Value)> = set
                    .range(table, lo.as_ref().map(Vec::as_slice), hi.as_ref().map(Vec::as_slice))
                    .map(|(k, v)| (k.to_vec(), v.clone()))
                    .collect();
                let expected: Vec<(Vec<u8>, Value)> = model
                    .iter()
                    .filter(|((mt, k), _)| {
                        *mt == table
                            && inside(k, lo.as_ref().map(Vec::as_slice), hi.as_ref().map(Vec::as_slice))
                    })
                    .map(|((_, k), v)| (k.clone(), v.clone()))
                    .collect();
                prop_assert_eq!(got, expected);
            }
            let mut tables: Vec<TableId> = model.keys().map(|(t, _)| *t).collect();
            tables.dedup();
            prop_assert_eq!(set.tables(), tables);
            let all: Vec<Write> = model.into_iter().map(|((t, k), v)| (t, k, v)).collect();
            prop_assert_eq!(set.into_writes(), all);
        }
    }
}
