//! Merging sorted sources: every version in (key ascending, newest first) order, and the two
//! views over it — what a reader at a snapshot sees, and what a merge must keep.

use crate::memtable::{Entry, Value};
use crate::range_del::RangeDeletes;
use crate::Result;
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

pub type Source = Box<dyn Iterator<Item = Result<Entry>> + Send>;

struct Head {
    entry: Entry,
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
    sources: Vec<Source>,
    heap: BinaryHeap<Head>,
    failed: bool,
    started: bool,
    reverse: bool,
}

impl MergeIter {
    pub fn new(sources: Vec<Source>) -> MergeIter {
        Self::with_direction(sources, false)
    }

    /// Sources in descending key order (newest version first within a key), merged the same.
    pub fn new_reverse(sources: Vec<Source>) -> MergeIter {
        Self::with_direction(sources, true)
    }

    fn with_direction(sources: Vec<Source>, reverse: bool) -> MergeIter {
        MergeIter {
            reverse,
            heap: BinaryHeap::with_capacity(sources.len()),
            sources,
            failed: false,
            started: false,
        }
    }

    fn pull(&mut self, source: usize) -> Result<()> {
        if let Some(next) = self.sources[source].next() {
            self.heap.push(Head {
                entry: next?,
                source,
                reverse: self.reverse,
            });
        }
        Ok(())
    }
}

impl Iterator for MergeIter {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        if self.failed {
            return None;
        }
        if !self.started {
            self.started = true;
            for s in 0..self.sources.len() {
                if let Err(e) = self.pull(s) {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
        let head = self.heap.pop()?;
        if let Err(e) = self.pull(head.source) {
            self.failed = true;
            return Some(Err(e));
        }
        Some(Ok(head.entry))
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
    last_key: Option<Vec<u8>>,
}

impl Newest {
    pub fn new(inner: Source, snapshot: u64, ranges: RangeDeletes) -> Newest {
        Newest {
            inner,
            snapshot,
            ranges,
            last_key: None,
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
            if e.seq > self.snapshot || self.last_key.as_ref() == Some(&e.key) {
                continue;
            }
            self.last_key = Some(e.key.clone());
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
