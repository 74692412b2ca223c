//! A transaction's range scan: the snapshot's pairs merged with the transaction's own writes.

use crate::db::DbIter;
use crate::memtable::Value;
use crate::Result;
use std::iter::Peekable;

/// Yields `(key, value)` pairs in key order; a private write replaces the snapshot's pair of
/// its key, a private delete hides it.
pub struct TxnIter {
    store: Peekable<DbIter>,
    own: Peekable<std::vec::IntoIter<(Vec<u8>, Value)>>,
}

impl TxnIter {
    pub(crate) fn new(store: DbIter, own: Vec<(Vec<u8>, Value)>) -> TxnIter {
        TxnIter {
            store: store.peekable(),
            own: own.into_iter().peekable(),
        }
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
                return self.store.next();
            }
            if let Some((key, Some(value))) = self.own.next() {
                return Some(Ok((key, value)));
            }
        }
    }
}
