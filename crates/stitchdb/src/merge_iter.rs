//! Merging sorted sources: every version in (key ascending, newest first) order, and the two
//! views over it — what a reader at a snapshot sees, and what a merge must keep.

use crate::entry::{Entry, RangeDeletes, Value};
use crate::Result;
use std::cmp::{Ordering, Reverse};
use std::collections::binary_heap::{BinaryHeap, PeekMut};

pub type Source = Box<dyn Iterator<Item = Result<Entry>> + Send>;

/// A source that can name a lower bound on its next key without reading it: a run between
/// blocks knows the next block's first key from its index. A merge orders such a source by
/// the bound (as if it were that key's newest version) and reads the entry only once the bound
/// is the smallest head, so a seek across many runs reads the block of the run it lands in,
/// not one block of every run.
pub trait LazySource: Iterator<Item = Result<Entry>> + Send {
    /// A key no greater than the next entry's, if known without reading; `None` when only
    /// reading tells (or nothing is left).
    fn bound(&self) -> Option<&[u8]>;
}

/// A plain source as a [`LazySource`] that never knows a bound.
struct Eager(Source);

impl Iterator for Eager {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        self.0.next()
    }
}

impl LazySource for Eager {
    fn bound(&self) -> Option<&[u8]> {
        None
    }
}

/// A plain source for a merge (it never names a bound).
pub fn eager(source: Source) -> Box<dyn LazySource> {
    Box::new(Eager(source))
}

struct Head {
    /// For a bound (`lazy`), the bound as key and `u64::MAX` as sequence number: it sorts
    /// before every version the source can produce.
    entry: Entry,
    lazy: bool,
    source: usize,
    /// Keys descending (a reverse scan); within a key the newest version comes first either way.
    reverse: bool,
}

impl Head {
    fn order_key(&self) -> (&[u8], Reverse<u64>) {
        (&self.entry.key, Reverse(self.entry.seq))
    }
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Head {}
impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Head {
    // BinaryHeap pops the greatest. Forward we want the smallest (key, newest) first; in
    // reverse the greatest key, still newest first.
    fn cmp(&self, other: &Self) -> Ordering {
        if self.reverse {
            (&self.entry.key, self.entry.seq).cmp(&(&other.entry.key, other.entry.seq))
        } else {
            other.order_key().cmp(&self.order_key())
        }
    }
}

/// Every version from all sources, in order. Sequence numbers are unique across sources.
pub struct MergeIter {
    sources: Vec<Box<dyn LazySource>>,
    heap: BinaryHeap<Head>,
    failed: bool,
    started: bool,
    reverse: bool,
}

impl MergeIter {
    #[cfg(test)]
    pub fn new(sources: Vec<Source>) -> MergeIter {
        Self::lazy(sources.into_iter().map(eager).collect())
    }

    /// Sources whose bounds let the merge put off reading them (forward only).
    pub fn lazy(sources: Vec<Box<dyn LazySource>>) -> MergeIter {
        Self::with_direction(sources, false)
    }

    /// Sources in descending key order (newest version first within a key), merged the same.
    pub fn new_reverse(sources: Vec<Source>) -> MergeIter {
        Self::with_direction(sources.into_iter().map(eager).collect(), true)
    }

    fn with_direction(sources: Vec<Box<dyn LazySource>>, reverse: bool) -> MergeIter {
        MergeIter {
            reverse,
            heap: BinaryHeap::with_capacity(sources.len()),
            sources,
            failed: false,
            started: false,
        }
    }

    /// `source`'s next head: its bound if it has one (going forward), else its next entry.
    fn next_head(&mut self, source: usize) -> Result<Option<Head>> {
        if !self.reverse {
            if let Some(bound) = self.sources[source].bound() {
                return Ok(Some(Head {
                    entry: Entry {
                        key: bound.to_vec(),
                        seq: u64::MAX,
                        value: None,
                    },
                    lazy: true,
                    source,
                    reverse: false,
                }));
            }
        }
        self.next_entry(source)
    }

    /// `source`'s next entry, as a head.
    fn next_entry(&mut self, source: usize) -> Result<Option<Head>> {
        let Some(next) = self.sources[source].next() else {
            return Ok(None);
        };
        Ok(Some(Head {
            entry: next?,
            lazy: false,
            source,
            reverse: self.reverse,
        }))
    }

    fn step(&mut self) -> Result<Option<Entry>> {
        if !self.started {
            self.started = true;
            for s in 0..self.sources.len() {
                if let Some(head) = self.next_head(s)? {
                    self.heap.push(head);
                }
            }
        }
        // The smallest head is replaced by its source's next in place: one sift down, where
        // a pop and a push take two passes. A scan mostly reads one source for a while, whose
        // next head then stays on top after a comparison or two.
        loop {
            let Some(top) = self.heap.peek() else {
                return Ok(None);
            };
            let (source, lazy) = (top.source, top.lazy);
            // For a bound, the smallest: only now is the entry behind it worth reading.
            let next = match lazy {
                true => self.next_entry(source)?,
                false => self.next_head(source)?,
            };
            let Some(mut top) = self.heap.peek_mut() else {
                return Ok(None);
            };
            let head = match next {
                Some(next) => std::mem::replace(&mut *top, next),
                None => PeekMut::pop(top),
            };
            if !lazy {
                return Ok(Some(head.entry));
            }
        }
    }
}

impl Iterator for MergeIter {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        if self.failed {
            return None;
        }
        match self.step() {
            Ok(entry) => entry.map(Ok),
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

/// Turns versions in (key descending, oldest first) order — what walking a forward-sorted
/// table backwards gives — into (key descending, newest first), by holding one key's versions.
pub struct NewestFirst<I: Iterator> {
    inner: std::iter::Peekable<I>,
    held: Vec<Entry>,
}

impl<I: Iterator<Item = Result<Entry>>> NewestFirst<I> {
    pub fn new(inner: I) -> NewestFirst<I> {
        NewestFirst {
            inner: inner.peekable(),
            held: Vec::new(),
        }
    }
}

impl<I: Iterator<Item = Result<Entry>>> Iterator for NewestFirst<I> {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        if let Some(e) = self.held.pop() {
            return Some(Ok(e));
        }
        let first = match self.inner.next()? {
            Ok(e) => e,
            Err(err) => return Some(Err(err)),
        };
        // Older-to-newer versions of one key arrive together: hold them, hand out newest first.
        self.held.push(first);
        while let Some(Ok(next)) = self.inner.peek() {
            if next.key != self.held[0].key {
                break;
            }
            if let Some(Ok(e)) = self.inner.next() {
                self.held.push(e);
            }
        }
        self.held.pop().map(Ok)
    }
}

/// The newest version of each key at or below a snapshot, in order: `(key, value)`, or
/// `(key, None)` where that version is a tombstone or a range tombstone hides it.
pub struct Newest {
    inner: Source,
    snapshot: u64,
    /// The range tombstones of the layers `inner` merges.
    ranges: RangeDeletes,
    /// The last key handed out, if `have_key`: its older versions are skipped.
    last_key: Vec<u8>,
    have_key: bool,
}

impl Newest {
    pub fn new(inner: Source, snapshot: u64, ranges: RangeDeletes) -> Newest {
        Newest {
            inner,
            snapshot,
            ranges,
            last_key: Vec::new(),
            have_key: false,
        }
    }
}

impl Iterator for Newest {
    type Item = Result<(Vec<u8>, Value)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let e = match self.inner.next()? {
                Ok(e) => e,
                Err(err) => return Some(Err(err)),
            };
            if e.seq > self.snapshot || (self.have_key && self.last_key == e.key) {
                continue;
            }
            // The buffer is reused: no allocation per key.
            self.last_key.clear();
            self.last_key.extend_from_slice(&e.key);
            self.have_key = true;
            if self.ranges.hides(&e.key, e.seq, self.snapshot) {
                return Some(Ok((e.key, None)));
            }
            return Some(Ok((e.key, e.value)));
        }
    }
}

/// What a reader at a snapshot sees: the newest version of each key at or below it, in
/// order, deleted keys left out.
pub struct Visible {
    newest: Newest,
}

impl Visible {
    pub fn new(inner: Source, snapshot: u64, ranges: RangeDeletes) -> Visible {
        Visible {
            newest: Newest::new(inner, snapshot, ranges),
        }
    }
}

impl Iterator for Visible {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match self.newest.next()? {
                Ok((key, Some(value))) => return Some(Ok((key, value))),
                Ok((_, None)) => continue,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// Decides which versions a merge keeps: every version newer than the oldest snapshot still
/// readable, and the newest version at or below it; a tombstone among the latter is dropped
/// too when the merge covers everything beneath it (`bottom`). Feed it entries in merge order.
pub struct VersionFilter {
    oldest_snapshot: u64,
    bottom: bool,
    /// Range tombstones over the merged entries: versions every reader sees hidden go.
    ranges: RangeDeletes,
    key: Vec<u8>,
    have_key: bool,
    kept_old_version: bool,
}

impl VersionFilter {
    pub fn new(oldest_snapshot: u64, bottom: bool, ranges: RangeDeletes) -> VersionFilter {
        VersionFilter {
            oldest_snapshot,
            bottom,
            ranges,
            key: Vec::new(),
            have_key: false,
            kept_old_version: false,
        }
    }

    pub fn keep(&mut self, key: &[u8], seq: u64, tombstone: bool) -> bool {
        if !self.have_key || self.key != key {
            self.key.clear();
            self.key.extend_from_slice(key);
            self.have_key = true;
            self.kept_old_version = false;
        }
        if seq > self.oldest_snapshot {
            return true;
        }
        // Hidden from the oldest reader by a range it sees, so from every reader.
        if self.ranges.hides(key, seq, self.oldest_snapshot) {
            return false;
        }
        if self.kept_old_version {
            return false;
        }
        self.kept_old_version = true;
        !(tombstone && self.bottom)
    }

    /// Whether `key` is the key whose versions the filter is judging: more versions of it
    /// must pass through the filter too (stitched past it, an older version would outlive
    /// the newer ones the filter dropped).
    pub fn is_current(&self, key: &[u8]) -> bool {
        self.have_key && self.key == key
    }

    /// Forgets the current key (entries were passed on without the filter seeing them).
    pub fn reset(&mut self) {
        self.have_key = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(key: &str, seq: u64, value: Option<&str>) -> Entry {
        Entry {
            key: key.as_bytes().to_vec(),
            seq,
            value: value.map(|v| v.as_bytes().to_vec()),
        }
    }

    fn source(entries: Vec<Entry>) -> Source {
        Box::new(entries.into_iter().map(Ok))
    }

    /// Entries in "blocks"; between blocks it names the next block's first key as its bound,
    /// and it counts the blocks it was made to read.
    struct Blocks {
        blocks: std::collections::VecDeque<Vec<Entry>>,
        current: std::collections::VecDeque<Entry>,
        reads: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    }

    impl Iterator for Blocks {
        type Item = Result<Entry>;

        fn next(&mut self) -> Option<Result<Entry>> {
            if self.current.is_empty() {
                self.current = self.blocks.pop_front()?.into();
                self.reads
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            self.current.pop_front().map(Ok)
        }
    }

    impl LazySource for Blocks {
        fn bound(&self) -> Option<&[u8]> {
            if !self.current.is_empty() {
                return None;
            }
            self.blocks.front().map(|b| b[0].key.as_slice())
        }
    }

    #[test]
    fn a_lazy_merge_reads_only_the_blocks_it_hands_out() {
        let reads = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        // Ten sources, each two one-entry blocks: source i holds keys 1i and 2i.
        let sources: Vec<Box<dyn LazySource>> = (0..10)
            .map(|i| {
                let blocks = [1, 2]
                    .map(|b| vec![e(&format!("{b}{i}"), 100 + i, Some("v"))])
                    .into_iter()
                    .collect();
                Box::new(Blocks {
                    blocks,
                    current: Default::default(),
                    reads: reads.clone(),
                }) as Box<dyn LazySource>
            })
            .collect();
        let mut merged = MergeIter::lazy(sources);
        assert_eq!(merged.next().unwrap().unwrap().key, b"10");
        assert_eq!(reads.load(std::sync::atomic::Ordering::Relaxed), 1);
        let rest: Vec<Vec<u8>> = merged.map(|e| e.unwrap().key).collect();
        let mut want: Vec<Vec<u8>> = (0..10)
            .flat_map(|i| [format!("1{i}"), format!("2{i}")])
            .map(String::into_bytes)
            .filter(|k| k != b"10")
            .collect();
        want.sort();
        assert_eq!(rest, want);
        assert_eq!(reads.load(std::sync::atomic::Ordering::Relaxed), 20);
    }

    proptest::proptest! {
        /// Bounds change when entries are read, never what comes out: a lazy merge of blocked
        /// sources yields what an eager merge of the same entries does.
        #[test]
        fn lazy_and_eager_merges_agree(
            layout in proptest::collection::vec(
                proptest::collection::vec(
                    proptest::collection::vec((0u8..20, 0u8..3), 1..4), 0..5), 1..5),
        ) {
            // Sequence numbers unique across sources; within a source, key ascending and
            // newest first; blocks cut the source's entries where the layout says.
            let mut seq = 1000u64;
            let mut lazy: Vec<Box<dyn LazySource>> = Vec::new();
            let mut plain: Vec<Source> = Vec::new();
            for blocks in layout {
                let mut entries: Vec<(u8, u64)> = blocks
                    .iter()
                    .flatten()
                    .map(|&(k, _)| { seq -= 1; (k, seq) })
                    .collect();
                entries.sort_by_key(|a| (a.0, Reverse(a.1)));
                let entries: Vec<Entry> = entries
                    .into_iter()
                    .map(|(k, s)| Entry { key: vec![b'k', k], seq: s, value: Some(vec![k]) })
                    .collect();
                let mut cut = Vec::new();
                let mut rest = entries.as_slice();
                for b in &blocks {
                    let (head, tail) = rest.split_at(b.len());
                    cut.push(head.to_vec());
                    rest = tail;
                }
                plain.push(source(entries.clone()));
                lazy.push(Box::new(Blocks {
                    blocks: cut.into_iter().filter(|b| !b.is_empty()).collect(),
                    current: Default::default(),
                    reads: Default::default(),
                }));
            }
            let a: Vec<Entry> = MergeIter::lazy(lazy).map(|e| e.unwrap()).collect();
            let b: Vec<Entry> = MergeIter::new(plain).map(|e| e.unwrap()).collect();
            proptest::prop_assert_eq!(a, b);
        }
    }

    #[test]
    fn visible_takes_newest_version_at_snapshot_and_hides_tombstones() {
        let newer = source(vec![e("a", 9, None), e("b", 8, Some("b8"))]);
        let older = source(vec![
            e("a", 3, Some("a3")),
            e("b", 2, Some("b2")),
            e("c", 1, Some("c1")),
        ]);
        let all: Vec<_> = Visible::new(
            Box::new(MergeIter::new(vec![newer, older])),
            100,
            RangeDeletes::default(),
        )
        .map(|r| r.unwrap())
        .collect();
        assert_eq!(
            all,
            vec![
                (b"b".to_vec(), b"b8".to_vec()),
                (b"c".to_vec(), b"c1".to_vec())
            ]
        );
        let newer = source(vec![e("a", 9, None), e("b", 8, Some("b8"))]);
        let older = source(vec![e("a", 3, Some("a3")), e("b", 2, Some("b2"))]);
        let at5: Vec<_> = Visible::new(
            Box::new(MergeIter::new(vec![newer, older])),
            5,
            RangeDeletes::default(),
        )
        .map(|r| r.unwrap())
        .collect();
        assert_eq!(
            at5,
            vec![
                (b"a".to_vec(), b"a3".to_vec()),
                (b"b".to_vec(), b"b2".to_vec())
            ]
        );
    }

    #[test]
    fn merges_keep_what_snapshots_need() {
        let entries = [
            e("a", 9, None),
            e("a", 6, Some("a6")),
            e("a", 3, Some("a3")),
            e("b", 2, None),
        ];
        let kept = |bottom: bool| {
            let mut f = VersionFilter::new(7, bottom, RangeDeletes::default());
            entries
                .iter()
                .filter(|x| f.keep(&x.key, x.seq, x.value.is_none()))
                .map(|x| x.seq)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            kept(true),
            vec![9, 6],
            "a@9 is newer than the snapshot, a@6 is what it sees, b's tombstone goes"
        );
        assert_eq!(
            kept(false),
            vec![9, 6, 2],
            "not at the bottom: the tombstone must stay"
        );
    }
}
