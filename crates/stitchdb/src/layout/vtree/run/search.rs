//! Finding a run's blocks by key without chasing a pointer per probe.
//!
//! A run's index holds every block's first and last key as separate heap allocations. A seek
//! searches it once per run, and with one 4 KiB value per block a run has a block per entry: a
//! binary search over the handles would load a handle and then its key from another place in
//! memory at each of its ~18 probes. [`BlockSearch`] keeps, for every block, eight bytes of
//! its first and last key in two dense arrays and compares those; whole keys are compared only
//! among blocks whose eight bytes tie.
//!
//! The eight bytes are taken after the prefix every key of the run shares (the common prefix
//! of its smallest and largest key), so keys like `user000000…` still tell blocks apart.
//! Taking them zero-padded and reading them big-endian keeps their order: if two keys' padded
//! bytes differ, the keys differ in the same direction.

use super::block::shared_prefix;
use super::BlockHandle;
use std::cmp::Ordering;

#[derive(Clone)]
pub struct BlockSearch {
    /// The bytes every key of the run starts with.
    common: Vec<u8>,
    first: Fences,
    last: Fences,
}

/// Fences searched in two steps: a run of 200,000 blocks has 1.6 MB of them, and a binary
/// search over that many misses the CPU's caches at most of its 18 probes, once per run on
/// every seek. Every [`STRIDE`]-th fence is kept in a summary
/// 1/32 the size, which stays in cache; the summary picks the stride, and a search within it
/// touches four cache lines.
#[derive(Clone)]
struct Fences {
    all: Vec<u64>,
    /// The last fence of each whole stride of `all`.
    summary: Vec<u64>,
}

const STRIDE: usize = 32;

impl Fences {
    fn new(all: Vec<u64>) -> Fences {
        let summary = all.chunks_exact(STRIDE).map(|c| c[STRIDE - 1]).collect();
        Fences { all, summary }
    }

    /// How many fences are below `f` (`all.partition_point(|&x| x < f)`).
    fn count_below(&self, f: u64) -> usize {
        // Every fence of a stride whose last fence is below `f` is below it.
        let start = self.summary.partition_point(|&x| x < f) * STRIDE;
        let end = (start + STRIDE).min(self.all.len());
        start + self.all[start..end].partition_point(|&x| x < f)
    }
}

/// Eight bytes of `key` after its first `skip`, zero-padded, as a big-endian number.
fn fence(key: &[u8], skip: usize) -> u64 {
    let rest = key.get(skip..).unwrap_or_default();
    let mut bytes = [0u8; 8];
    let n = rest.len().min(8);
    bytes[..n].copy_from_slice(&rest[..n]);
    u64::from_be_bytes(bytes)
}

/// Where a key falls relative to a run's keys, as far as the fences can tell.
enum Probe {
    /// Before every key of the run.
    Before,
    /// After every key of the run.
    After,
    /// Among them, with this fence.
    Fence(u64),
}

impl BlockSearch {
    pub fn new(blocks: &[BlockHandle]) -> BlockSearch {
        let common = match (blocks.first(), blocks.last()) {
            (Some(first), Some(last)) => {
                let n = shared_prefix(&first.first_key, &last.last_key);
                first.first_key[..n].to_vec()
            }
            _ => Vec::new(),
        };
        let skip = common.len();
        BlockSearch {
            first: Fences::new(blocks.iter().map(|b| fence(&b.first_key, skip)).collect()),
            last: Fences::new(blocks.iter().map(|b| fence(&b.last_key, skip)).collect()),
            common,
        }
    }

    fn probe(&self, key: &[u8]) -> Probe {
        let n = self.common.len().min(key.len());
        match key[..n].cmp(&self.common[..n]) {
            Ordering::Less => Probe::Before,
            Ordering::Greater => Probe::After,
            // A key that is a proper prefix of the common bytes sorts before all of them.
            Ordering::Equal if key.len() < self.common.len() => Probe::Before,
            Ordering::Equal => Probe::Fence(fence(key, self.common.len())),
        }
    }

    /// The first block whose last key is not below `key` (`blocks.len()` if none): where a
    /// forward seek to `key` starts.
    pub fn first_ending_at_or_after(&self, blocks: &[BlockHandle], key: &[u8]) -> usize {
        self.partition(&self.last, blocks, key, |b| b.last_key.as_slice() < key)
    }

    /// How many blocks start at or before `key`: a backward seek from `key` starts at the
    /// block before that.
    pub fn starting_at_or_before(&self, blocks: &[BlockHandle], key: &[u8]) -> usize {
        self.partition(&self.first, blocks, key, |b| b.first_key.as_slice() <= key)
    }

    /// `blocks.partition_point(below)`, where `below` holds of a block exactly when its fence
    /// in `fences` is below `key`'s or ties with it and the whole key says so.
    fn partition(
        &self,
        fences: &Fences,
        blocks: &[BlockHandle],
        key: &[u8],
        below: impl Fn(&BlockHandle) -> bool,
    ) -> usize {
        match self.probe(key) {
            Probe::Before => 0,
            Probe::After => blocks.len(),
            Probe::Fence(f) => {
                let lo = fences.count_below(f);
                let ties = leading_ties(&fences.all[lo..], f);
                lo + blocks[lo..lo + ties].partition_point(below)
            }
        }
    }
}

/// How many of `fences` (sorted, none below `f`), from the first, equal `f`, found by
/// galloping from the start: a fence ties only among blocks whose keys share their eight bytes,
/// so there are few, and a binary search over the rest of the run (its probes missing the
/// cache as the search for the first one did) is not needed to find them.
fn leading_ties(fences: &[u64], f: u64) -> usize {
    let mut bound = 1;
    while bound <= fences.len() && fences[bound - 1] == f {
        bound *= 2;
    }
    // The first bound / 2 fences tie; the first that does not lies before `bound`.
    let start = bound / 2;
    start + fences[start..bound.min(fences.len())].partition_point(|&x| x == f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use stitch_zone::ExtentAddr;

    fn handles(mut keys: Vec<Vec<u8>>, per_block: usize) -> Vec<BlockHandle> {
        keys.sort();
        keys.chunks(per_block)
            .map(|c| BlockHandle {
                first_key: c[0].clone(),
                last_key: c[c.len() - 1].clone(),
                entries: c.len() as u64,
                addr: ExtentAddr {
                    zone: 1,
                    offset: 0,
                    len: 64,
                },
            })
            .collect()
    }

    /// Keys over a tiny alphabet with long shared prefixes, so fences tie often and probes
    /// fall before, among and after the run's keys.
    fn key() -> impl Strategy<Value = Vec<u8>> {
        (
            0usize..4,
            prop::collection::vec(prop::sample::select(vec![0u8, 1, 7, 255]), 0..14),
        )
            .prop_map(|(shared, tail)| {
                let mut k = b"prefix\x00xx"[..shared * 3].to_vec();
                k.extend(tail);
                k
            })
    }

    #[test]
    fn fences_are_counted_as_a_binary_search_counts_them() {
        for len in [
            0,
            1,
            STRIDE - 1,
            STRIDE,
            STRIDE + 1,
            5 * STRIDE,
            5 * STRIDE + 7,
        ] {
            // Every value twice, so some strides end in the middle of a tie.
            let all: Vec<u64> = (0..len as u64).map(|i| 10 + i / 2 * 3).collect();
            let fences = Fences::new(all.clone());
            for f in 0..10 + len as u64 * 2 {
                assert_eq!(
                    fences.count_below(f),
                    all.partition_point(|&x| x < f),
                    "{f} in {len}"
                );
            }
        }
    }

    #[test]
    fn ties_are_counted_from_the_start() {
        for len in 0..40 {
            for ties in 0..=len {
                let fences: Vec<u64> = (0..len).map(|i| if i < ties { 7 } else { 9 }).collect();
                assert_eq!(leading_ties(&fences, 7), ties, "{ties} of {len}");
            }
        }
    }

    proptest! {
        #[test]
        fn fences_find_the_same_blocks_as_whole_keys(
            keys in prop::collection::vec(key(), 1..200),
            per_block in 1usize..5,
            probes in prop::collection::vec(key(), 1..50),
        ) {
            let blocks = handles(keys, per_block);
            let search = BlockSearch::new(&blocks);
            for p in &probes {
                prop_assert_eq!(
                    search.first_ending_at_or_after(&blocks, p),
                    blocks.partition_point(|b| b.last_key.as_slice() < p.as_slice())
                );
                prop_assert_eq!(
                    search.starting_at_or_before(&blocks, p),
                    blocks.partition_point(|b| b.first_key.as_slice() <= p.as_slice())
                );
            }
            // Every block's own keys find it.
            for (i, b) in blocks.iter().enumerate() {
                prop_assert!(search.first_ending_at_or_after(&blocks, &b.last_key) <= i);
                prop_assert!(search.starting_at_or_before(&blocks, &b.first_key) > i);
            }
        }
    }

    #[test]
    fn an_empty_run_finds_nothing() {
        let search = BlockSearch::new(&[]);
        assert_eq!(search.first_ending_at_or_after(&[], b"k"), 0);
        assert_eq!(search.starting_at_or_before(&[], b"k"), 0);
    }
}
