//! The memtable: a concurrent skip list of versioned entries, newest version of a key first.
//!
//! Readers at a snapshot sequence number skip versions newer than it, so a reader sees a
//! consistent view while writers go on inserting.

use crate::bounds::past_end;
use crate::entry::{Entry, EntryRef, RangeDeletes, RangeTombstone, Value};
use crossbeam_skiplist::SkipMap;
use smallvec::SmallVec;
use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering as AtomicOrdering};

/// Keys up to this long live in the skip list's node itself, not in an allocation of their
/// own: a search then touches one cache line per node instead of two.
const INLINE_KEY: usize = 24;

/// A key and the sequence number of one of its versions; orders by key, then newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionedKey {
    /// The key's first 8 bytes, big-endian, zero-padded: comparing these first settles most
    /// comparisons without looking at the key's bytes (zero padding keeps the order, since a
    /// key that ends sorts before every longer key it begins).
    prefix: u64,
    key: SmallVec<[u8; INLINE_KEY]>,
    seq: u64,
}

impl VersionedKey {
    pub fn new(key: &[u8], seq: u64) -> VersionedKey {
        let mut head = [0u8; 8];
        let n = key.len().min(8);
        head[..n].copy_from_slice(&key[..n]);
        VersionedKey {
            prefix: u64::from_be_bytes(head),
            key: SmallVec::from_slice(key),
            seq,
        }
    }

    pub fn key(&self) -> &[u8] {
        &self.key
    }
}

impl Ord for VersionedKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.prefix
            .cmp(&other.prefix)
            .then_with(|| self.key.cmp(&other.key))
            .then(other.seq.cmp(&self.seq))
    }
}

impl PartialOrd for VersionedKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[derive(Default)]
pub struct Memtable {
    map: SkipMap<VersionedKey, Value>,
    /// Range tombstones, indexed as they come.
    ranges: parking_lot::RwLock<RangeDeletes>,
    /// Whether `ranges` holds any: every point read asks, and almost always the answer is no.
    has_ranges: std::sync::atomic::AtomicBool,
    bytes: AtomicUsize,
    /// `u64::MAX` minus the smallest sequence number written (0, the default: none yet), so
    /// that a derived default means empty.
    oldest_inverted: AtomicU64,
}

/// The average height of a skip-list node's tower: crossbeam's heights are geometric with
/// ratio 1/2 (height `h` with probability `2^-h`), so a node carries two links on average.
const AVERAGE_TOWER: usize = 2;

/// The bytes a skip-list node of the memtable takes: its key (the inline bytes, prefix and
/// sequence number), its value's header, the reference count and height, and the tower of
/// links (crossbeam-skiplist's `Node`), as the allocator hands it out.
const NODE_BYTES: usize = allocation(
    std::mem::size_of::<VersionedKey>()
        + std::mem::size_of::<Value>()
        + std::mem::size_of::<usize>()
        + AVERAGE_TOWER * std::mem::size_of::<usize>(),
);

/// The bytes an allocation of `n` bytes takes from the allocator: its size rounded up to the
/// allocator's size class (mimalloc's and glibc's are 16 bytes apart up to 128 bytes, then
/// four per doubling), so memtable accounting follows resident memory rather than payload.
pub(crate) const fn allocation(n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    if n <= 128 {
        return n.div_ceil(16) * 16;
    }
    // Four classes per power of two: steps of a quarter of the power of two below `n`.
    let step = (1usize << (usize::BITS - 1 - (n - 1).leading_zeros())) / 4;
    n.div_ceil(step) * step
}

/// The memory one version of a key costs in the memtable: its node, the key's bytes when
/// they do not fit in the node ([`INLINE_KEY`]) and the value's buffer (its capacity).
fn entry_bytes(key: &[u8], value: &Value) -> usize {
    let spilled = if key.len() > INLINE_KEY {
        allocation(key.len())
    } else {
        0
    };
    NODE_BYTES + spilled + value.as_ref().map_or(0, |v| allocation(v.capacity()))
}

impl Memtable {
    /// Inserts a version of `key`. [`bytes`](Self::bytes) grows by what the version costs in
    /// memory (its node, key and value as allocated), so a memtable of `memtable_size` bytes
    /// holds about that much of the process's memory, as RocksDB's arena-backed memtable does.
    pub fn insert(&self, key: &[u8], seq: u64, value: Value) {
        self.bytes
            .fetch_add(entry_bytes(key, &value), AtomicOrdering::Relaxed);
        self.note_seq(seq);
        self.map.insert(VersionedKey::new(key, seq), value);
    }

    /// Deletes `[start, end)` as of `seq` (see [`crate::entry::RangeTombstone`]).
    pub fn delete_range(&self, start: &[u8], end: &[u8], seq: u64) {
        let charged = allocation(start.len())
            + allocation(end.len())
            + std::mem::size_of::<RangeTombstone>()
            + NODE_BYTES;
        self.bytes.fetch_add(charged, AtomicOrdering::Relaxed);
        self.note_seq(seq);
        self.has_ranges.store(true, AtomicOrdering::Release);
        self.ranges.write().push(RangeTombstone {
            start: start.to_vec(),
            end: end.to_vec(),
            seq,
        });
    }

    /// The range tombstones written so far (sharing their indexes).
    pub fn range_deletes(&self) -> RangeDeletes {
        if !self.has_ranges.load(AtomicOrdering::Acquire) {
            return RangeDeletes::default();
        }
        self.ranges.read().clone()
    }

    pub fn covering_tombstone(&self, key: &[u8], snapshot: u64) -> Option<u64> {
        if !self.has_ranges.load(AtomicOrdering::Acquire) {
            return None;
        }
        self.ranges.read().covering(key, snapshot)
    }

    /// Keeps the smallest sequence number written; sequence numbers mostly grow, so after
    /// the first write this is one load.
    fn note_seq(&self, seq: u64) {
        let inverted = u64::MAX - seq;
        if inverted > self.oldest_inverted.load(AtomicOrdering::Relaxed) {
            self.oldest_inverted
                .fetch_max(inverted, AtomicOrdering::Relaxed);
        }
    }

    /// The smallest sequence number of a version or range tombstone written to it
    /// (`u64::MAX` if none).
    pub fn min_seq(&self) -> u64 {
        u64::MAX - self.oldest_inverted.load(AtomicOrdering::Relaxed)
    }

    pub fn bytes(&self) -> usize {
        self.bytes.load(AtomicOrdering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty() && !self.has_ranges.load(AtomicOrdering::Acquire)
    }

    /// Calls `f` with every version in order (key ascending, newest first), borrowed: writing
    /// a memtable out copies each key and value once, into its block.
    pub fn for_each<E>(&self, mut f: impl FnMut(EntryRef) -> Result<(), E>) -> Result<(), E> {
        for e in self.map.iter() {
            f(EntryRef {
                key: e.key().key(),
                seq: e.key().seq,
                value: e.value().as_deref(),
            })?;
        }
        Ok(())
    }

    /// The newest version of `key` at or below `snapshot`: `None` if the memtable has none.
    pub fn get(&self, key: &[u8], snapshot: u64) -> Option<(u64, Value)> {
        let e = self.map.range(VersionedKey::new(key, snapshot)..).next()?;
        (e.key().key() == key).then(|| (e.key().seq, e.value().clone()))
    }
}

/// The bound on versioned keys admitting every version of the keys the key bound admits from
/// below (versions sort newest first: a key's newest is its smallest).
fn lower(start: Bound<&[u8]>) -> Bound<VersionedKey> {
    match start {
        Bound::Included(k) => Bound::Included(VersionedKey::new(k, u64::MAX)),
        Bound::Excluded(k) => Bound::Excluded(VersionedKey::new(k, 0)),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// [`lower`]'s counterpart for the upper end of a range.
fn upper(end: Bound<&[u8]>) -> Bound<VersionedKey> {
    match end {
        Bound::Included(k) => Bound::Included(VersionedKey::new(k, 0)),
        Bound::Excluded(k) => Bound::Excluded(VersionedKey::new(k, u64::MAX)),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Iterates an `Arc<Memtable>` without borrowing it, so the iterator can outlive the caller's
/// borrow of the table state: each step seeks past the last key returned (O(log n)).
pub struct MemIter {
    mem: std::sync::Arc<Memtable>,
    from: Bound<VersionedKey>,
    end: Bound<Vec<u8>>,
}

impl MemIter {
    pub fn new(mem: std::sync::Arc<Memtable>, start: Bound<&[u8]>, end: Bound<&[u8]>) -> MemIter {
        let from = lower(start);
        MemIter {
            mem,
            from,
            end: end.map(|k| k.to_vec()),
        }
    }
}

impl Iterator for MemIter {
    type Item = Entry;

    fn next(&mut self) -> Option<Entry> {
        let e = self
            .mem
            .map
            .range((self.from.clone(), Bound::Unbounded))
            .next()?;
        let k = e.key();
        if past_end(k.key(), self.end.as_ref().map(Vec::as_slice)) {
            return None;
        }
        self.from = Bound::Excluded(k.clone());
        Some(Entry {
            key: k.key().to_vec(),
            seq: k.seq,
            value: e.value().clone(),
        })
    }
}

/// Iterates an `Arc<Memtable>` backwards: keys descending, a key's versions oldest first (wrap
/// it in `merge_iter::NewestFirst`). Each step seeks before the last version returned.
pub struct MemRevIter {
    mem: std::sync::Arc<Memtable>,
    lo: Bound<VersionedKey>,
    hi: Bound<VersionedKey>,
}

impl MemRevIter {
    pub fn new(
        mem: std::sync::Arc<Memtable>,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
    ) -> MemRevIter {
        let (lo, hi) = (lower(start), upper(end));
        MemRevIter { mem, lo, hi }
    }
}

impl Iterator for MemRevIter {
    type Item = Entry;

    fn next(&mut self) -> Option<Entry> {
        let e = self
            .mem
            .map
            .range((self.lo.clone(), self.hi.clone()))
            .next_back()?;
        let k = e.key().clone();
        let entry = Entry {
            key: k.key().to_vec(),
            seq: k.seq,
            value: e.value().clone(),
        };
        self.hi = Bound::Excluded(k);
        Some(entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_at_a_snapshot_see_the_version_then_current() {
        let m = Memtable::default();
        m.insert(b"a", 1, Some(b"one".to_vec()));
        m.insert(b"a", 5, Some(b"five".to_vec()));
        m.insert(b"a", 7, None);
        assert_eq!(m.get(b"a", 0), None);
        assert_eq!(m.get(b"a", 4), Some((1, Some(b"one".to_vec()))));
        assert_eq!(m.get(b"a", 6), Some((5, Some(b"five".to_vec()))));
        assert_eq!(m.get(b"a", 100), Some((7, None)));
        assert_eq!(m.get(b"b", 100), None);
        let m = std::sync::Arc::new(m);
        let seqs: Vec<u64> = MemIter::new(m, Bound::Unbounded, Bound::Unbounded)
            .map(|e| e.seq)
            .collect();
        assert_eq!(seqs, vec![7, 5, 1]);
    }

    #[test]
    fn allocations_round_up_to_size_classes() {
        let sizes = [0, 1, 16, 17, 100, 128, 129, 160, 161, 1000, 4096, 4097];
        let classes = [0, 16, 16, 32, 112, 128, 160, 160, 192, 1024, 4096, 5120];
        for (n, class) in sizes.into_iter().zip(classes) {
            assert_eq!(allocation(n), class, "allocation({n})");
        }
    }

    /// A memtable counts what its entries take from the allocator, not their payload: the
    /// node (never less than crossbeam's node of average height), a key too long to sit in
    /// the node, and the value's buffer by its capacity.
    #[test]
    fn bytes_count_nodes_spilled_keys_and_value_capacity() {
        let m = Memtable::default();
        let node = std::mem::size_of::<VersionedKey>() + std::mem::size_of::<Value>() + 8 + 16;
        assert!(
            NODE_BYTES >= node && NODE_BYTES < node + 16,
            "{NODE_BYTES} vs {node}"
        );
        // 16-byte keys and 100-byte values (db_bench's): a node and a 112-byte buffer each.
        for i in 0..1000u64 {
            m.insert(&i.to_be_bytes().repeat(2), i, Some(vec![7; 100]));
        }
        assert_eq!(m.bytes(), 1000 * (NODE_BYTES + 112));
        // A key past the inline length has a buffer of its own; a tombstone has no value.
        m.insert(&[1; INLINE_KEY + 1], 2000, None);
        assert_eq!(m.bytes(), 1000 * (NODE_BYTES + 112) + NODE_BYTES + 32);
        // A value is charged by its capacity.
        let mut v = Vec::with_capacity(1000);
        v.push(1);
        m.insert(b"k", 2001, Some(v));
        assert_eq!(
            m.bytes(),
            1000 * (NODE_BYTES + 112) + 2 * NODE_BYTES + 32 + 1024
        );
    }

    proptest::proptest! {
        /// The prefix shortcut orders exactly as comparing (key, newest first) would, for keys
        /// around the prefix's length and full of the zero bytes its padding uses.
        #[test]
        fn versioned_keys_order_by_key_then_newest_first(
            a in proptest::collection::vec(0u8..3, 0..12),
            b in proptest::collection::vec(0u8..3, 0..12),
            sa in 0u64..3,
            sb in 0u64..3,
        ) {
            let want = a.cmp(&b).then(sb.cmp(&sa));
            proptest::prop_assert_eq!(VersionedKey::new(&a, sa).cmp(&VersionedKey::new(&b, sb)), want);
        }
    }
}
