//! Which keys committed after a transaction's snapshot: what commit-time validation asks.
//!
//! While any transaction is open, every commit (transactional or not) records the keys it
//! wrote with its sequence number. A transaction that began at snapshot `s` conflicts on a
//! key if the key's newest recorded commit is after `s`. Records no open transaction can
//! conflict with (at or below the oldest open snapshot) are pruned, so the oracle holds only
//! the writes that overlap some open transaction's life. Lives under the write lock.

use crate::batch::{RangeOp, TableId};
use crate::entry::within;
use crate::seq_counts::SeqCounts;
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;

/// A key of a table, as the oracle orders them: by table, then key.
pub(crate) type TableKey = (TableId, Vec<u8>);

#[derive(Debug, Default)]
pub(crate) struct Oracle {
    /// Snapshots of open transactions.
    open: SeqCounts,
    /// The newest commit of each key written since the oldest open snapshot.
    newest: BTreeMap<TableKey, u64>,
    /// Range deletes committed since the oldest open snapshot, with their commits.
    ranges: Vec<(RangeOp, u64)>,
    /// The same writes in commit order, for pruning.
    commits: VecDeque<(u64, Vec<TableKey>)>,
    /// Open [`Locking`](crate::txn::Isolation::Locking) transactions: while there are any, other
    /// commits lock what they write (the oracle does not track these transactions).
    locking: usize,
}

impl Oracle {
    /// A transaction begins at `snapshot` (the newest commit it sees).
    pub fn begin(&mut self, snapshot: u64) {
        self.open.add(snapshot);
    }

    /// A locking transaction begins.
    pub fn begin_locking(&mut self) {
        self.locking += 1;
    }

    /// A locking transaction has committed or aborted.
    pub fn end_locking(&mut self) {
        self.locking = self.locking.saturating_sub(1);
    }

    /// Whether a locking transaction is open: then every commit must hold locks on what it
    /// writes. Asked under the write lock, where `begin_locking` is called, so a commit that
    /// finds none open is ordered before any that begins later.
    pub fn locking_open(&self) -> bool {
        self.locking > 0
    }

    /// A transaction that began at `snapshot` has committed or aborted.
    pub fn end(&mut self, snapshot: u64) {
        self.open.remove(snapshot);
        self.prune();
    }

    /// Whether no commit is recorded at all (no other transaction was open meanwhile): then
    /// nothing can conflict.
    pub fn is_quiet(&self) -> bool {
        self.newest.is_empty() && self.ranges.is_empty()
    }

    /// The oldest snapshot an open transaction holds.
    pub fn oldest(&self) -> Option<u64> {
        self.open.oldest()
    }

    /// Whether commits must be recorded: some transaction is open.
    pub fn tracking(&self) -> bool {
        !self.open.is_empty()
    }

    /// Records that commit `seq` wrote `keys` and deleted `ranges`.
    pub fn record(&mut self, seq: u64, keys: Vec<TableKey>, ranges: Vec<RangeOp>) {
        for k in &keys {
            self.newest.insert(k.clone(), seq);
        }
        self.ranges.extend(ranges.into_iter().map(|r| (r, seq)));
        self.commits.push_back((seq, keys));
    }

    /// A commit after `snapshot` that wrote `key` (or deleted a range holding it).
    pub fn written_after(&self, key: &TableKey, snapshot: u64) -> Option<u64> {
        let ranged = self
            .ranges
            .iter()
            .find(|((t, s, e), seq)| *seq > snapshot && *t == key.0 && within(s, e, &key.1))
            .map(|(_, seq)| *seq);
        if self.newest.is_empty() {
            return ranged;
        }
        self.newest
            .get(key)
            .copied()
            .filter(|&s| s > snapshot)
            .or(ranged)
    }

    /// The keys written after `snapshot`, with the commit that last wrote each.
    pub fn writes_after(&self, snapshot: u64) -> impl Iterator<Item = (&TableKey, u64)> {
        self.newest
            .iter()
            .filter(move |(_, &s)| s > snapshot)
            .map(|(k, &s)| (k, s))
    }

    /// The range deletes committed after `snapshot`, with their commits.
    pub fn ranges_after(&self, snapshot: u64) -> impl Iterator<Item = (&RangeOp, u64)> {
        self.ranges
            .iter()
            .filter(move |(_, s)| *s > snapshot)
            .map(|(r, s)| (r, *s))
    }

    /// A key in `(start, end)` of `table` written after `snapshot`, with that commit.
    pub fn range_written_after(
        &self,
        table: TableId,
        start: &Bound<Vec<u8>>,
        end: &Bound<Vec<u8>>,
        snapshot: u64,
    ) -> Option<(TableKey, u64)> {
        let overlaps = |s: &[u8], e: &[u8]| {
            let after_start = match start {
                Bound::Included(k) | Bound::Excluded(k) => e > k.as_slice(),
                Bound::Unbounded => true,
            };
            let before_end = match end {
                Bound::Included(k) => s <= k.as_slice(),
                Bound::Excluded(k) => s < k.as_slice(),
                Bound::Unbounded => true,
            };
            after_start && before_end
        };
        let ranged = self
            .ranges
            .iter()
            .find(|((t, s, e), seq)| *seq > snapshot && *t == table && overlaps(s, e))
            .map(|((t, s, _), seq)| ((*t, s.clone()), *seq));
        if ranged.is_some() {
            return ranged;
        }
        let lo = match start {
            Bound::Included(k) => Bound::Included((table, k.clone())),
            Bound::Excluded(k) => Bound::Excluded((table, k.clone())),
            Bound::Unbounded => Bound::Included((table, Vec::new())),
        };
        let hi = match end {
            Bound::Included(k) => Bound::Included((table, k.clone())),
            Bound::Excluded(k) => Bound::Excluded((table, k.clone())),
            Bound::Unbounded => match table.0.checked_add(1) {
                Some(next) => Bound::Excluded((TableId(next), Vec::new())),
                None => Bound::Unbounded,
            },
        };
        if crate::bounds::is_empty_range(lo.as_ref(), hi.as_ref()) {
            return None;
        }
        self.newest
            .range((lo, hi))
            .find(|(_, &s)| s > snapshot)
            .map(|(k, &s)| (k.clone(), s))
    }

    /// Forgets the commits no open transaction can conflict with.
    fn prune(&mut self) {
        let oldest = self.open.oldest().unwrap_or(u64::MAX);
        self.ranges.retain(|(_, seq)| *seq > oldest);
        while self.commits.front().is_some_and(|(seq, _)| *seq <= oldest) {
            let Some((seq, keys)) = self.commits.pop_front() else {
                break;
            };
            for k in keys {
                if self.newest.get(&k) == Some(&seq) {
                    self.newest.remove(&k);
                }
            }
        }
    }

    /// Keys recorded.
    #[cfg(test)]
    pub fn recorded(&self) -> usize {
        self.newest.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &[u8]) -> TableKey {
        (TableId(1), k.to_vec())
    }

    #[test]
    fn conflicts_are_commits_after_the_snapshot_and_pruned_when_no_one_can_see_them() {
        let mut o = Oracle::default();
        assert!(!o.tracking());
        o.begin(10);
        o.begin(20);
        o.record(15, vec![key(b"a")], Vec::new());
        o.record(25, vec![key(b"b")], Vec::new());
        assert_eq!(o.written_after(&key(b"a"), 10), Some(15));
        assert_eq!(o.written_after(&key(b"a"), 20), None);
        assert_eq!(o.written_after(&key(b"b"), 20), Some(25));
        let all = (Bound::Unbounded, Bound::Unbounded);
        assert_eq!(
            o.range_written_after(TableId(1), &all.0, &all.1, 20)
                .map(|(k, s)| (k.1.clone(), s)),
            Some((b"b".to_vec(), 25))
        );
        assert_eq!(o.range_written_after(TableId(2), &all.0, &all.1, 0), None);
        let upto_b = Bound::Excluded(b"b".to_vec());
        assert_eq!(o.range_written_after(TableId(1), &all.0, &upto_b, 20), None);
        o.end(10);
        // Only the transaction at 20 is left: the write at 15 can no longer conflict.
        assert_eq!(o.recorded(), 1);
        o.end(20);
        assert_eq!(o.recorded(), 0);
        assert!(!o.tracking());
    }
}
