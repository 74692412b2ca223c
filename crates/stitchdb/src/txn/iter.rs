//! A transaction's range scan: the snapshot's pairs merged with the transaction's own writes.

use crate::db::DbIter;
use crate::entry::{within_any, Value};
use crate::Result;
use std::iter::Peekable;

/// A transaction's say on each key of a range, in key order (`None`: it deletes the key).
pub(crate) type OwnSay = Box<dyn Iterator<Item = Result<(Vec<u8>, Value)>>>;

/// Reads the large value a private write's marker stands for (its key, the marker); other
/// values are returned as they are.
pub(crate) type OwnLarge = Box<dyn Fn(&[u8], Vec<u8>) -> Result<Vec<u8>>>;

/// Yields `(key, value)` pairs in key order; a private write replaces the snapshot's pair of
/// its key, a private delete hides it, and so does a private range delete (a private write
/// after it is among the private writes, which win).
pub struct TxnIter {
    store: Peekable<DbIter>,
    own: Peekable<OwnPairs>,
    /// Private range deletes: `[start, end)`.
    hidden: Vec<(Vec<u8>, Vec<u8>)>,
    large: Option<OwnLarge>,
}

impl TxnIter {
    /// `own`: the write set's pairs in the range; `spilled`: the private runs' say on the
    /// range (older than `own`); `hidden`: every private range delete.
    pub(crate) fn new(
        store: DbIter,
        own: Vec<(Vec<u8>, Value)>,
        spilled: OwnSay,
        hidden: Vec<(Vec<u8>, Vec<u8>)>,
        large: Option<OwnLarge>,
    ) -> TxnIter {
        let own = OwnPairs {
            memory: own.into_iter().peekable(),
            spilled: spilled.peekable(),
        };
        TxnIter {
            store: store.peekable(),
            own: own.peekable(),
            hidden,
            large,
        }
    }

    fn is_hidden(&self, key: &[u8]) -> bool {
        within_any(&self.hidden, key)
    }
}

impl Iterator for TxnIter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(Err(_)) = self.own.peek() {
                if let Some(Err(e)) = self.own.next() {
                    return Some(Err(e));
                }
            }
            let from_store = match (self.store.peek(), self.own.peek()) {
                (None, None) => return None,
                (Some(Err(_)), _) => return self.store.next(),
                (_, Some(Err(_))) => continue,
                (Some(Ok((sk, _))), Some(Ok((ok, _)))) => match sk.cmp(ok) {
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
            match self.own.next() {
                Some(Ok((key, Some(value)))) => {
                    return Some(match &self.large {
                        Some(large) => large(&key, value).map(|value| (key, value)),
                        None => Ok((key, value)),
                    })
                }
                Some(Err(e)) => return Some(Err(e)),
                _ => {}
            }
        }
    }
}

/// The transaction's own pairs: the write set's, over the private runs' (older).
struct OwnPairs {
    memory: Peekable<std::vec::IntoIter<(Vec<u8>, Value)>>,
    spilled: Peekable<OwnSay>,
}

impl Iterator for OwnPairs {
    type Item = Result<(Vec<u8>, Value)>;

    fn next(&mut self) -> Option<Self::Item> {
        let (take_memory, shadowed) = match (self.memory.peek(), self.spilled.peek()) {
            (None, None) => return None,
            (_, Some(Err(_))) => return self.spilled.next(),
            (Some(_), None) => (true, false),
            (None, Some(_)) => (false, false),
            (Some((mk, _)), Some(Ok((sk, _)))) => (mk <= sk, mk == sk),
        };
        if shadowed {
            // The write set's version of the key is the newer one.
            self.spilled.next();
        }
        if take_memory {
            self.memory.next().map(Ok)
        } else {
            self.spilled.next()
        }
    }
}
