//! The generated data: the random number generator, db_bench's key format, the key sequences
//! of each workload, and the values.
//!
//! `bench/rocksdb_driver.cc` implements the same definitions in C++ so both stores see
//! byte-identical keys and values; `docs/bench-tool.md` writes them out. Change them only
//! together.

use std::sync::Arc;

/// splitmix64 (Steele, Lea and Flood): tiny, fast, and trivial to reproduce exactly in C++.
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform over `[0, n)` the way db_bench draws keys (`Next() % n`); the modulo bias is
    /// negligible for any key count that fits in memory. `n == 0` gives 0.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64().checked_rem(n).unwrap_or(0)
    }
}

/// Writes key number `n` into `key` as db_bench's `GenerateKeyFromInt` does: the low
/// `min(len, 8)` bytes of `n` big-endian, then ASCII '0' padding. So `--key_size=16` gives
/// 8 bytes of number and 8 bytes of "00000000", and both stores hold the same key space.
pub fn encode_key(n: u64, key: &mut [u8]) {
    let number = n.to_be_bytes();
    let fill = key.len().min(number.len());
    key[..fill].copy_from_slice(&number[number.len() - fill..]);
    key[fill..].fill(b'0');
}

/// Ranges the random-append workload appends to (the VT-tree paper's 2,040).
pub const APPEND_RANGES: u64 = 2040;
/// Tuples per run in the sequential-insertion workload (the paper's 16,384: one 64 MiB file of
/// 4 KiB blocks).
pub const SEQ_RUN: u64 = 16_384;

/// The key numbers a benchmark writes or reads, one per operation.
pub enum KeySequence {
    /// 0, 1, 2, ...
    Sequential {
        next: u64,
    },
    /// Uniform over `[0, n)`.
    Uniform {
        rng: SplitMix64,
        n: u64,
    },
    RandomAppend(RandomAppend),
    SeqInsert(SeqInsert),
}

impl KeySequence {
    pub fn next_key(&mut self) -> u64 {
        match self {
            KeySequence::Sequential { next } => {
                let key = *next;
                *next = next.wrapping_add(1);
                key
            }
            KeySequence::Uniform { rng, n } => rng.below(*n),
            KeySequence::RandomAppend(append) => append.next_key(),
            KeySequence::SeqInsert(insert) => insert.next_key(),
        }
    }
}

/// RANDOM-APPEND: `total` appends spread over [`APPEND_RANGES`] ranges. Range `r` receives
/// `total / R` appends, plus one if `r < total % R`. Each append picks a range uniformly among
/// those not yet full (`live[rng % live.len()]`) and writes its next sequence number; a range
/// that becomes full is removed by moving the last live range into its slot. Key number:
/// `r << 32 | seq`, so each range is a contiguous span of the key space.
pub struct RandomAppend {
    rng: SplitMix64,
    live: Vec<u64>,
    appended: Vec<u64>,
    quota: Vec<u64>,
}

impl RandomAppend {
    pub fn new(rng: SplitMix64, total: u64) -> RandomAppend {
        let quota: Vec<u64> = (0..APPEND_RANGES)
            .map(|r| total / APPEND_RANGES + u64::from(r < total % APPEND_RANGES))
            .collect();
        let live = (0..APPEND_RANGES)
            .filter(|&r| quota[r as usize] > 0)
            .collect();
        RandomAppend {
            rng,
            live,
            appended: vec![0; APPEND_RANGES as usize],
            quota,
        }
    }

    fn next_key(&mut self) -> u64 {
        // Past `total` appends every range is full; callers never ask, but stay total.
        if self.live.is_empty() {
            return 0;
        }
        let slot = self.rng.below(self.live.len() as u64) as usize;
        let range = self.live[slot];
        let seq = self.appended[range as usize];
        self.appended[range as usize] += 1;
        if self.appended[range as usize] == self.quota[range as usize] {
            self.live.swap_remove(slot);
        }
        (range << 32) | seq
    }
}

/// SEQUENTIAL-INSERTION: runs of [`SEQ_RUN`] consecutive key numbers, each starting at
/// `1 + rng % (2^64 - SEQ_RUN)` so a whole run fits in `[1, 2^64 - 1]` as in the paper; the
/// last run is cut short when the total is reached.
pub struct SeqInsert {
    rng: SplitMix64,
    next: u64,
    left_in_run: u64,
}

impl SeqInsert {
    pub fn new(rng: SplitMix64) -> SeqInsert {
        SeqInsert {
            rng,
            next: 0,
            left_in_run: 0,
        }
    }

    fn next_key(&mut self) -> u64 {
        if self.left_in_run == 0 {
            self.next = 1 + self.rng.below(0u64.wrapping_sub(SEQ_RUN));
            self.left_in_run = SEQ_RUN;
        }
        self.left_in_run -= 1;
        let key = self.next;
        self.next = self.next.wrapping_add(1);
        key
    }
}

/// Bytes of random data values are cut from (db_bench's `RandomGenerator` uses 1 MiB too).
const VALUE_POOL: usize = 1 << 20;

/// The pool values are cut from: `max(1 MiB, value_size)` bytes, the little-endian outputs of
/// splitmix64 seeded with `!seed`. Shared by all threads.
pub fn value_pool(seed: u64, value_size: usize) -> Arc<[u8]> {
    let mut rng = SplitMix64::new(!seed);
    let len = VALUE_POOL.max(value_size);
    let mut pool = Vec::with_capacity(len + 8);
    while pool.len() < len {
        pool.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    pool.truncate(len);
    pool.into()
}

/// One thread's values: consecutive `size`-byte slices of the pool, starting over at its
/// beginning when the next slice would run past the end (db_bench's `Generate`).
pub struct Values {
    pool: Arc<[u8]>,
    size: usize,
    pos: usize,
}

impl Values {
    /// `pool` must hold at least `size` bytes ([`value_pool`] ensures it).
    pub fn new(pool: Arc<[u8]>, size: usize) -> Values {
        Values { pool, size, pos: 0 }
    }

    pub fn next_value(&mut self) -> &[u8] {
        if self.pos + self.size > self.pool.len() {
            self.pos = 0;
        }
        self.pos += self.size;
        &self.pool[self.pos - self.size..self.pos]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_matches_the_reference_outputs() {
        // The first outputs for seed 0 from the reference C implementation.
        let mut rng = SplitMix64::new(0);
        assert_eq!(rng.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(rng.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        assert_eq!(rng.next_u64(), 0x06c4_5d18_8009_454f);
    }

    #[test]
    fn keys_are_big_endian_numbers_padded_with_ascii_zeros() {
        let mut key = [0u8; 16];
        encode_key(0x0102_0304_0506_0708, &mut key);
        assert_eq!(&key, b"\x01\x02\x03\x04\x05\x06\x07\x0800000000");
        let mut short = [0u8; 4];
        encode_key(0x0102_0304_0506_0708, &mut short);
        assert_eq!(&short, b"\x05\x06\x07\x08");
    }

    #[test]
    fn random_append_fills_every_range_to_its_quota_exactly() {
        let total = 2040 * 3 + 7;
        let mut append = RandomAppend::new(SplitMix64::new(42), total);
        let mut per_range = vec![Vec::new(); APPEND_RANGES as usize];
        for _ in 0..total {
            let key = append.next_key();
            per_range[(key >> 32) as usize].push(key & 0xffff_ffff);
        }
        for (range, seqs) in per_range.iter().enumerate() {
            let quota = if range < 7 { 4 } else { 3 };
            assert_eq!(*seqs, (0..quota).collect::<Vec<u64>>(), "range {range}");
        }
        assert!(append.live.is_empty());
    }

    #[test]
    fn seq_insert_writes_runs_of_consecutive_keys_from_random_starts() {
        let mut insert = SeqInsert::new(SplitMix64::new(42));
        let first: Vec<u64> = (0..SEQ_RUN).map(|_| insert.next_key()).collect();
        assert!(first.windows(2).all(|w| w[1] == w[0] + 1));
        assert!(first[0] >= 1 && first[0] <= 0u64.wrapping_sub(SEQ_RUN));
        let second_start = insert.next_key();
        assert_ne!(second_start, first[SEQ_RUN as usize - 1] + 1);
    }

    #[test]
    fn values_are_consecutive_slices_that_wrap_like_db_bench() {
        let pool = value_pool(42, 100);
        let mut values = Values::new(pool.clone(), 300_000);
        assert_eq!(values.next_value(), &pool[..300_000]);
        assert_eq!(values.next_value(), &pool[300_000..600_000]);
        assert_eq!(values.next_value(), &pool[600_000..900_000]);
        // 900,000 + 300,000 > 1 MiB: start over.
        assert_eq!(values.next_value(), &pool[..300_000]);
    }
}
