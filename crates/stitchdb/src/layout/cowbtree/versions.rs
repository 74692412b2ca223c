//! The versions of one table kept for readers, and the blessed one writers derive from.
//!
//! The engine numbers commits (sequence numbers, `crate::txn`); the tree keeps, newest
//! first, the root of each commit a reader may still ask for: a reader at `s` reads the
//! newest root at or below `s`. Publishing a commit's root drops the roots no reader can
//! reach any more: all but the newest at or below the oldest reader's snapshot. A root is an
//! `Arc`, so a reader holding a [`Versions`] keeps its nodes alive however far writers go on,
//! and a node is freed when the last version holding it goes (its children with it: the
//! release handler Goby gives each extent, here `Drop`).
//!
//! A scan at a snapshot reads its one root (`DTable::cursor_at`); a cursor told no snapshot
//! (`DTable::cursor` yields every version) merges the kept roots, and a key deleted after an
//! older kept root must then still say so, which is why a delete leaves a tombstone until no
//! kept root is older than it (`tree::put`'s horizon).

use super::node::Node;
use super::tree::{self, Iter};
use super::txn::Txn;
use crate::entry::{Entry, Value};
use crate::layout::vtree::dtable::DTable;
use crate::merge_iter::{eager, MergeIter, Source};
use crate::{Error, Result};
use arc_swap::ArcSwap;
use std::ops::Bound;
use std::sync::Arc;

/// Roots by commit, newest first; never empty.
pub(crate) struct Versions {
    roots: Vec<(u64, Arc<Node>)>,
}

impl Versions {
    /// One version, `root`, older than every commit after it (a new table's empty leaf, or
    /// the root a manifest names).
    pub fn new(root: Arc<Node>) -> Versions {
        Versions {
            roots: vec![(0, root)],
        }
    }

    /// The blessed version: the newest root.
    pub fn head(&self) -> &Arc<Node> {
        &self.roots[0].1
    }

    pub fn head_seq(&self) -> u64 {
        self.roots[0].0
    }

    /// Tombstones at or below this sequence number hide nothing any kept root holds.
    pub fn horizon(&self) -> u64 {
        self.roots.last().map_or(0, |(seq, _)| *seq)
    }

    /// How many roots are kept.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.roots.len()
    }

    /// The roots kept, newest first.
    pub fn roots(&self) -> impl Iterator<Item = &Arc<Node>> {
        self.roots.iter().map(|(_, root)| root)
    }

    /// The root a reader at `snapshot` reads.
    fn at(&self, snapshot: u64) -> Option<&Arc<Node>> {
        self.roots
            .iter()
            .find(|(seq, _)| *seq <= snapshot)
            .map(|(_, root)| root)
    }

    /// These versions with `root` as the newest, at `seq` (replacing the head if it is at
    /// `seq` already), keeping of the older ones only those a reader at `oldest_reader` or
    /// later may read.
    fn with_head(&self, seq: u64, root: Arc<Node>, oldest_reader: u64) -> Versions {
        let mut roots = vec![(seq, root)];
        let older = self.roots.iter().filter(|(s, _)| *s < seq);
        for (s, r) in older {
            if roots
                .last()
                .is_some_and(|(newer, _)| *newer <= oldest_reader)
            {
                break;
            }
            roots.push((*s, r.clone()));
        }
        Versions { roots }
    }
}

impl DTable for Versions {
    /// A reader older than every kept version would be an engine bug (the oldest reader is
    /// kept): an error, never an answer from the wrong version.
    fn get(&self, key: &[u8], snapshot: u64) -> Result<Option<(u64, Value)>> {
        let root = self.at(snapshot).ok_or_else(|| Error::Corrupt {
            what: "B+tree versions",
            place: format!("snapshot {snapshot}"),
            detail: format!(
                "internal error: older than every version kept (oldest {})",
                self.horizon()
            ),
        })?;
        Ok(tree::get(root, key).map(|s| (s.seq, s.value.as_deref().map(<[u8]>::to_vec))))
    }

    fn cursor(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Source {
        self.merged(start, end, true)
    }

    fn cursor_rev(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Source {
        self.merged(start, end, false)
    }

    /// The one root a reader at `snapshot` reads (the merge of them all for one older than
    /// every kept root, which no registered reader is).
    fn cursor_at(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
        snapshot: u64,
    ) -> Source {
        match self.at(snapshot) {
            Some(root) => Box::new(Iter::new(root.clone(), start, end, !reverse).map(Ok)),
            None => self.merged(start, end, !reverse),
        }
    }
}

impl Versions {
    /// Every kept root's slots in the range, merged (each version of a key once).
    fn merged(&self, start: Bound<&[u8]>, end: Bound<&[u8]>, forward: bool) -> Source {
        let one = |root: &Arc<Node>| -> Source {
            Box::new(Iter::new(root.clone(), start, end, forward).map(Ok))
        };
        if self.roots.len() == 1 {
            return one(self.head());
        }
        let sources: Vec<Source> = self.roots().map(one).collect();
        let merged = match forward {
            true => MergeIter::lazy(sources.into_iter().map(eager).collect()),
            false => MergeIter::new_reverse(sources),
        };
        let mut last: Option<(Vec<u8>, u64)> = None;
        Box::new(merged.filter(move |e: &Result<Entry>| match e {
            Ok(e) => {
                let same = last
                    .as_ref()
                    .is_some_and(|(k, s)| *k == e.key && *s == e.seq);
                last = Some((e.key.clone(), e.seq));
                !same
            }
            Err(_) => true,
        }))
    }
}

/// The versions of a table as writers and readers share them: readers load them without a
/// lock; a commit swaps in new ones atomically.
pub(crate) struct Blessed {
    versions: ArcSwap<Versions>,
}

impl Blessed {
    pub fn new(root: Arc<Node>) -> Blessed {
        Blessed {
            versions: ArcSwap::from_pointee(Versions::new(root)),
        }
    }

    /// The versions now: a reader's, held as long as it likes.
    pub fn load(&self) -> Arc<Versions> {
        self.versions.load_full()
    }

    /// A transaction derived from the blessed version.
    pub fn begin(&self, node_size: usize) -> Txn {
        let v = self.versions.load();
        Txn::begin(v.head().clone(), node_size, v.horizon())
    }

    /// Makes `txn`'s version blessed at `seq` (`None`: the head's next), merged with whatever
    /// was blessed since it began; retries the merge if another commit won the swap (Goby's
    /// iterative committing). Returns the sequence number it was blessed at.
    pub fn bless(&self, txn: &Txn, seq: Option<u64>, oldest_reader: u64) -> u64 {
        loop {
            let current = self.versions.load_full();
            let merged = txn.merge_onto(current.head());
            let seq = seq.unwrap_or(current.head_seq() + 1);
            let next = Arc::new(current.with_head(seq, merged, oldest_reader));
            let previous = self.versions.compare_and_swap(&current, next);
            if Arc::ptr_eq(&previous, &current) {
                return seq;
            }
        }
    }
}
