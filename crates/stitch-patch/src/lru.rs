//! The clean blocks kept for reads, least recently used evicted first.

use crate::graph::BlockBytes;
use std::collections::{BTreeMap, HashMap};

#[derive(Debug)]
pub(crate) struct CleanBlocks {
    capacity: usize,
    /// Block number -> (bytes, last use).
    blocks: HashMap<u64, (BlockBytes, u64)>,
    /// Last use -> block number, oldest first.
    by_use: BTreeMap<u64, u64>,
    clock: u64,
}

impl CleanBlocks {
    pub fn new(capacity: usize) -> CleanBlocks {
        CleanBlocks {
            capacity,
            blocks: HashMap::new(),
            by_use: BTreeMap::new(),
            clock: 0,
        }
    }

    pub fn contains(&self, block: u64) -> bool {
        self.blocks.contains_key(&block)
    }

    /// The bytes of `block`, marking it used.
    pub fn get(&mut self, block: u64) -> Option<&BlockBytes> {
        self.clock += 1;
        let (data, used) = self.blocks.get_mut(&block)?;
        self.by_use.remove(used);
        *used = self.clock;
        self.by_use.insert(self.clock, block);
        Some(data)
    }

    /// Removes `block` (it is becoming dirty), returning its bytes.
    pub fn take(&mut self, block: u64) -> Option<BlockBytes> {
        let (data, used) = self.blocks.remove(&block)?;
        self.by_use.remove(&used);
        Some(data)
    }

    pub fn insert(&mut self, block: u64, data: BlockBytes) {
        self.take(block);
        if self.capacity == 0 {
            return;
        }
        while self.blocks.len() >= self.capacity {
            let Some((_, oldest)) = self.by_use.pop_first() else {
                break;
            };
            self.blocks.remove(&oldest);
        }
        self.clock += 1;
        self.blocks.insert(block, (data, self.clock));
        self.by_use.insert(self.clock, block);
    }

    /// Forgets the blocks in `first..=last` (their bytes on the disk changed behind the cache).
    pub fn forget(&mut self, first: u64, last: u64) {
        let doomed: Vec<u64> = self
            .blocks
            .keys()
            .copied()
            .filter(|b| (first..=last).contains(b))
            .collect();
        for block in doomed {
            self.take(block);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn evicts_the_least_recently_used() {
        let mut lru = CleanBlocks::new(2);
        lru.insert(1, Arc::new(vec![1]));
        lru.insert(2, Arc::new(vec![2]));
        assert!(lru.get(1).is_some());
        lru.insert(3, Arc::new(vec![3]));
        assert!(lru.contains(1) && lru.contains(3) && !lru.contains(2));
        lru.forget(0, 1);
        assert!(!lru.contains(1));
        assert_eq!(lru.take(3).map(|d| d[0]), Some(3));
    }

    #[test]
    fn zero_capacity_keeps_nothing() {
        let mut lru = CleanBlocks::new(0);
        lru.insert(1, Arc::new(vec![1]));
        assert!(!lru.contains(1));
    }
}
