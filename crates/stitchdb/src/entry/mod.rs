//! The bottom layer of the engine: what every table format stores and yields. A version of a
//! key ([`Entry`], borrowed as [`EntryRef`]) whose [`Value`] is bytes or a tombstone, and
//! range tombstones, which delete every older version in a key range.

mod range_tombstone;

pub use range_tombstone::{within, within_any, RangeDeletes, RangeTombstone};

/// A value, or the authoritative absence of one (a tombstone).
pub type Value = Option<Vec<u8>>;

/// One version of a key, as every table format yields it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub key: Vec<u8>,
    pub seq: u64,
    pub value: Value,
}

/// One version of a key, borrowed (from a memtable or a parsed block).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryRef<'a> {
    pub key: &'a [u8],
    pub seq: u64,
    pub value: Option<&'a [u8]>,
}

impl EntryRef<'_> {
    pub fn to_entry(self) -> Entry {
        Entry {
            key: self.key.to_vec(),
            seq: self.seq,
            value: self.value.map(<[u8]>::to_vec),
        }
    }
}
