//! A transaction's range scan: the snapshot's pairs merged with the transaction's own writes.

use crate::db::DbIter;
use crate::memtable::Value;
use crate::Result;
use std::iter::Peekable;

/// Yields `(key, value)` pairs in key order; a private write replaces the snapshot's pair of
/// its key, a private delete hides it, and so does a private range delete (a private write
/// after it is among the private writes, which win).
pub struct TxnIter {
    store: Peekable<DbIter>,
    own: Peekable<std::vec::IntoIter<(Vec<u8>, Value)>>,
    /// Private range deletes: `[start, end)`.
    hidden: Vec<(Vec<u8>, Vec<u8>)>,
}

impl TxnIter {
    pub(crate) fn new(
        store: DbIter,
        own: Vec<(Vec<u8>, Value)>,
        hidden: Vec<(Vec<u8>, Vec<u8>)>,
    ) -> TxnIter {
        TxnIter {
            store: store.peekable(),
            own: own.into_iter().peekable(),
            hidden,
        }
    }

    fn is_hidden(&self, key: &[u8]) -> bool {
        self.hidden
            .iter()
            .any(|(s, e)| s.as_slice() <= key && key < e.as_slice())
    }
}

impl Iterator for TxnIter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let from_store = match (self.store.peek(), self.own.peek()) {
                (None, None) => return None,
                (Some(Err(_)), _) => return self.store.next(),
                (Some(Ok((sk, _))), Some((ok, _))) => match sk.cmp(ok) {
                    std::cmp::Ordering::Less => true,
                    std::cmp::Ordering::Equal => {
                        self.store.next();
                        false
                    }
                    std::cmp::Ordering::Greater => false,
                },
                (Some(_), None) => true,
                (None, Some(_)) => false,
            };
            if from_store {
                match self.store.next() {
                    Some(Ok((key, _))) if self.is_hidden(&key) => continue,
                    other => return other,
                }
            }
            if let Some((key, Some(value))) = self.own.next() {
                return Some(Ok((key, value)));
            }
        }
    }
}
