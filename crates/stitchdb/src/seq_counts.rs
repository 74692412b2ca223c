//! A multiset of sequence numbers, oldest first: the snapshots open readers or transactions
//! hold. They are nearly always registered in increasing order and few are open at once, so
//! a sorted deque beats a tree: registering the newest is a push (or a count bump) and nothing
//! is allocated once the deque has grown.

use std::collections::VecDeque;

#[derive(Debug, Default)]
pub(crate) struct SeqCounts {
    /// Distinct sequence numbers, ascending, each with how many holders it has (never 0).
    held: VecDeque<(u64, usize)>,
}

impl SeqCounts {
    pub fn add(&mut self, seq: u64) {
        match self.held.back_mut() {
            Some((last, n)) if *last == seq => *n += 1,
            Some((last, _)) if *last > seq => match self.held.binary_search_by_key(&seq, |e| e.0) {
                Ok(i) => self.held[i].1 += 1,
                Err(i) => self.held.insert(i, (seq, 1)),
            },
            _ => self.held.push_back((seq, 1)),
        }
    }

    /// Removes one holder of `seq` (nothing if it has none).
    pub fn remove(&mut self, seq: u64) {
        // Holders usually leave oldest first, or are the only one.
        if let Some((first, n)) = self.held.front_mut() {
            if *first == seq {
                *n -= 1;
                if *n == 0 {
                    self.held.pop_front();
                }
                return;
            }
        }
        if let Ok(i) = self.held.binary_search_by_key(&seq, |e| e.0) {
            self.held[i].1 -= 1;
            if self.held[i].1 == 0 {
                self.held.remove(i);
            }
        }
    }

    pub fn oldest(&self) -> Option<u64> {
        self.held.front().map(|e| e.0)
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// Behaves as a counted `BTreeMap` under any order of adds and removes.
        #[test]
        fn matches_a_counted_map(ops in proptest::collection::vec((any::<bool>(), 0u64..8), 0..200)) {
            let (mut counts, mut model) = (SeqCounts::default(), BTreeMap::<u64, usize>::new());
            for (add, seq) in ops {
                if add {
                    counts.add(seq);
                    *model.entry(seq).or_default() += 1;
                } else {
                    counts.remove(seq);
                    if let Some(n) = model.get_mut(&seq) {
                        *n -= 1;
                        if *n == 0 {
                            model.remove(&seq);
                        }
                    }
                }
                prop_assert_eq!(counts.oldest(), model.keys().next().copied());
                prop_assert_eq!(counts.is_empty(), model.is_empty());
                let listed: Vec<_> = counts.held.iter().copied().collect();
                let want: Vec<_> = model.iter().map(|(&k, &v)| (k, v)).collect();
                prop_assert_eq!(listed, want);
            }
        }
    }
}
