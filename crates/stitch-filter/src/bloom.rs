//! A cache-blocked Bloom filter: fewer bits per key than a quotient filter at the same
//! false-positive rate, and one cache line per lookup, for a filter that is built from its keys
//! and never merged (see the crate documentation for when that is the better choice).
//!
//! The bits are cut into 512-bit (64-byte, one cache line) blocks. A key's hash picks one block
//! from its high 32 bits, and all of its `k` probes fall in that block, so an insert or a lookup
//! touches one cache line however large the filter is (a classic Bloom filter touches `k`).
//! The price is a somewhat higher false-positive rate than a classic filter of the same size,
//! because blocks receive unequal numbers of keys (Putze, Sanders and Singler, "Cache-, Hash-
//! and Space-Efficient Bloom Filters", 2007); [`BloomFilter::fp_rate_estimate`] accounts for it.
//!
//! The bit positions inside the block come from the low 32 bits of the hash by repeated
//! multiplication (the first probe takes the top 9 bits of that word; each further probe
//! multiplies the word by an odd constant and takes its top 9 bits again), the scheme of
//! RocksDB's cache-local Bloom filter. Double hashing (`h1 + i * h2`) was measured and rejected:
//! in a 512-bit block, the probe patterns it makes are arithmetic progressions that other keys'
//! patterns share all but one bit of, which raised the measured rate 7% above the blocked
//! filter's theory at 10 bits per key and 3x at 20; the multiplicative sequence meets the theory.

use crate::{hash_key, FilterError};

/// The first 4 bytes of every encoded Bloom filter; a quotient filter starts with
/// [`FILTER_MAGIC`](crate::FILTER_MAGIC) instead, so [`is_bloom`] tells the two apart.
pub const BLOOM_MAGIC: [u8; 4] = *b"STBF";
/// The Bloom filter format version this code writes and reads.
pub const BLOOM_FORMAT_VERSION: u8 = 1;
/// Bytes before the bit array of an encoded Bloom filter.
pub const BLOOM_HEADER_LEN: usize = 24;
/// The most bits a Bloom filter has: 2^36 (8 GiB), far above what a run of 50 million keys
/// needs even at 32 bits per key (1.6 Gbit), and a bound on what a constructor will allocate.
pub const MAX_BLOOM_BITS: u64 = 1 << 36;
/// The most bits per key a Bloom filter is built with (a rate of about 2e-6 in theory).
pub const MAX_BITS_PER_KEY: u32 = 32;
/// The most probes per key: beyond 16 the false-positive rate gains almost nothing and every
/// lookup pays for each probe.
pub const MAX_PROBES: u32 = 16;

/// Bits in a block: one 64-byte cache line.
const BLOCK_BITS: u64 = 512;
const BLOCK_BYTES: usize = 64;
const WORDS_PER_BLOCK: usize = 8;
const MAX_BLOCKS: u64 = MAX_BLOOM_BITS / BLOCK_BITS;
const CRC_LEN: usize = 4;
/// Multiplier of the probe sequence: odd (so each step is a bijection of the 32-bit word and
/// the sequence does not collapse) and with well-mixed high bits (2^32 over the golden ratio).
const PROBE_MULTIPLIER: u32 = 0x9e37_79b9;

/// One cache line of bits. Aligned so that a block never straddles two lines.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(align(64))]
struct Block([u64; WORDS_PER_BLOCK]);

const EMPTY_BLOCK: Block = Block([0; WORDS_PER_BLOCK]);

/// A cache-blocked Bloom filter over 64-bit key hashes: an approximate set with no false
/// negatives, sized once for an expected number of keys.
///
/// Build it with [`BloomFilter::new`], fill it with [`insert`](Self::insert) or
/// [`insert_key`](Self::insert_key), query it with [`contains`](Self::contains), and persist it
/// with [`encode`](Self::encode) / [`decode`](Self::decode). Unlike a
/// [`QuotientFilter`](crate::QuotientFilter) it never fills up (inserting past the expected
/// number of keys only raises the false-positive rate), and it cannot be merged with filters of
/// other sizes: the bits of a key depend on the block count.
///
/// ```
/// use stitch_filter::{is_bloom, BloomFilter};
///
/// let mut filter = BloomFilter::new(1_000, 10)?;
/// for i in 0..1_000u32 {
///     filter.insert_key(format!("key-{i}").as_bytes());
/// }
/// assert!(filter.contains_key(b"key-7"));
/// assert!(filter.fp_rate_estimate() < 0.015);
///
/// let bytes = filter.encode();
/// assert!(is_bloom(&bytes));
/// assert_eq!(BloomFilter::decode(&bytes)?, filter);
/// # Ok::<(), stitch_filter::FilterError>(())
/// ```
#[derive(Clone, PartialEq)]
pub struct BloomFilter {
    /// At least one, at most `MAX_BLOCKS`.
    blocks: Vec<Block>,
    /// In `1..=MAX_BITS_PER_KEY`.
    bits_per_key: u32,
    /// `probes_for(bits_per_key)`.
    probes: u32,
    /// Inserts, repeats included.
    len: u64,
}

impl std::fmt::Debug for BloomFilter {
    /// The parameters and counts, not the bits.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BloomFilter")
            .field("bits_per_key", &self.bits_per_key)
            .field("probes", &self.probes)
            .field("blocks", &self.blocks.len())
            .field("len", &self.len)
            .finish()
    }
}

/// Whether `bytes` start with [`BLOOM_MAGIC`]: the way a reader holding a filter extent's
/// payload tells a Bloom filter from a quotient filter before decoding it. Says nothing about
/// whether the rest is intact; [`BloomFilter::decode`] checks that.
pub fn is_bloom(bytes: &[u8]) -> bool {
    bytes.starts_with(&BLOOM_MAGIC)
}

/// The probe count that minimizes the false-positive rate of a classic Bloom filter with
/// `bits_per_key` bits per key, `round(bits_per_key * ln 2)`, kept in `1..=MAX_PROBES`.
fn probes_for(bits_per_key: u32) -> u32 {
    // At most 32 * 0.69 = 22.2 before the clamp, so the cast is exact.
    let probes = (f64::from(bits_per_key) * std::f64::consts::LN_2).round() as u32;
    probes.clamp(1, MAX_PROBES)
}

/// The block of `hash` among `blocks`: a multiply-shift of the high 32 bits, which maps them
/// evenly onto `0..blocks` without a division. `blocks <= 2^27`, so the product fits.
fn block_index(hash: u64, blocks: usize) -> usize {
    (((hash >> 32) * blocks as u64) >> 32) as usize
}

/// The bits `hash` sets in its block, as the block's 8 words. The low 32 bits of the hash are
/// a word `x`; each probe sets bit `x >> 23` (a position in `0..512`), then `x` is multiplied
/// by [`PROBE_MULTIPLIER`] for the next one.
fn probe_mask(hash: u64, probes: u32) -> [u64; WORDS_PER_BLOCK] {
    let mut mask = [0; WORDS_PER_BLOCK];
    let mut x = hash as u32;
    for _ in 0..probes {
        let bit = x >> 23;
        mask[(bit / 64) as usize] |= 1 << (bit % 64);
        x = x.wrapping_mul(PROBE_MULTIPLIER);
    }
    mask
}

/// The blocks of a filter of `keys` keys at `bits_per_key` bits each: `keys * bits_per_key`
/// bits rounded up to whole blocks, at least one.
fn block_count(keys: u64, bits_per_key: u32) -> Result<u64, FilterError> {
    if !(1..=MAX_BITS_PER_KEY).contains(&bits_per_key) {
        return Err(FilterError::InvalidBitsPerKey(bits_per_key));
    }
    let too_large = FilterError::BloomTooLarge {
        keys,
        bits_per_key,
        max_bits: MAX_BLOOM_BITS,
    };
    let bits = keys
        .checked_mul(u64::from(bits_per_key))
        .filter(|&bits| bits <= MAX_BLOOM_BITS)
        .ok_or(too_large)?;
    // MAX_BLOOM_BITS is a whole number of blocks, so rounding up stays within it.
    Ok(bits.div_ceil(BLOCK_BITS).max(1))
}

/// `blocks` empty blocks, or an error rather than an abort when they cannot be allocated.
fn zeroed_blocks(blocks: u64) -> Result<Vec<Block>, FilterError> {
    let out_of_memory = FilterError::OutOfMemory {
        bytes: blocks.saturating_mul(BLOCK_BYTES as u64),
    };
    let count = usize::try_from(blocks).map_err(|_| out_of_memory.clone())?;
    let mut out = Vec::new();
    out.try_reserve_exact(count).map_err(|_| out_of_memory)?;
    out.resize(count, EMPTY_BLOCK);
    Ok(out)
}

impl BloomFilter {
    /// An empty filter with `bits_per_key` bits (in `1..=32`) for each of `keys` expected keys,
    /// rounded up to whole 512-bit blocks (at least one, so `keys` may be 0), probing
    /// `round(bits_per_key * ln 2)` bits per key (at most 16). At 10 bits per key that is 7
    /// probes and a rate of about 1%. More than [`MAX_BLOOM_BITS`] bits is an error.
    pub fn new(keys: u64, bits_per_key: u32) -> Result<Self, FilterError> {
        Ok(Self {
            blocks: zeroed_blocks(block_count(keys, bits_per_key)?)?,
            bits_per_key,
            probes: probes_for(bits_per_key),
            len: 0,
        })
    }

    /// Adds a hash (see [`hash_key`]). Never fails: a filter past its expected number of keys
    /// keeps working, with a higher false-positive rate.
    pub fn insert(&mut self, hash: u64) {
        let index = block_index(hash, self.blocks.len());
        let mask = probe_mask(hash, self.probes);
        // Always present: the index is below the (non-zero) block count.
        if let Some(block) = self.blocks.get_mut(index) {
            for (word, bits) in block.0.iter_mut().zip(mask) {
                *word |= bits;
            }
        }
        self.len = self.len.saturating_add(1);
    }

    /// [`insert`](Self::insert) of [`hash_key`]`(key)`.
    pub fn insert_key(&mut self, key: &[u8]) {
        self.insert(hash_key(key));
    }

    /// Whether the filter may hold the hash: always `true` for an inserted hash, and `true`
    /// for an absent one with probability about [`fp_rate_estimate`](Self::fp_rate_estimate).
    /// Reads one 64-byte block.
    pub fn contains(&self, hash: u64) -> bool {
        let index = block_index(hash, self.blocks.len());
        let mask = probe_mask(hash, self.probes);
        match self.blocks.get(index) {
            // No short-circuit: the eight words are one cache line, and a branch-free test
            // of all of them is cheaper than a mispredicted early exit.
            Some(block) => block
                .0
                .iter()
                .zip(mask)
                .fold(true, |all, (&word, bits)| all & (word & bits == bits)),
            // Not reachable (the index is below the block count); "maybe" is always safe.
            None => true,
        }
    }

    /// [`contains`](Self::contains) of [`hash_key`]`(key)`.
    pub fn contains_key(&self, key: &[u8]) -> bool {
        self.contains(hash_key(key))
    }

    /// Keys inserted. A key inserted twice counts twice: the filter cannot tell a repeat
    /// from a false positive.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing has been inserted.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bits per key the filter was sized with.
    pub fn bits_per_key(&self) -> u32 {
        self.bits_per_key
    }

    /// `k`: the bits each key sets and each lookup tests.
    pub fn probes(&self) -> u32 {
        self.probes
    }

    /// The size of the bit array in bits: a multiple of 512.
    pub fn bit_count(&self) -> u64 {
        self.blocks.len() as u64 * BLOCK_BITS
    }

    /// Bytes the filter occupies in memory (the bit array plus this struct).
    pub fn memory_bytes(&self) -> usize {
        self.blocks.len() * BLOCK_BYTES + std::mem::size_of::<Self>()
    }

    /// The expected false-positive rate for the keys inserted so far.
    ///
    /// A classic Bloom filter of `m` bits with `n` keys and `k` probes has the rate
    /// `(1 - e^(-k n / m))^k`. Here each 512-bit block is such a filter for the keys that land
    /// in it, and that number is Poisson-distributed with mean `n / blocks`; the estimate is
    /// the classic rate of one block averaged over that distribution. Fuller blocks lose more
    /// than emptier ones gain, so this is above the classic formula for the whole array: by
    /// about 17% at 10 bits per key, and about 3x at 20 (the formula alone would understate
    /// what lookups measure).
    pub fn fp_rate_estimate(&self) -> f64 {
        blocked_fp_rate(self.len, self.blocks.len() as u64, self.probes)
    }

    /// The filter as bytes: a 24-byte header, the bit array and a CRC32C (the layout is in the
    /// repository's `docs/format.md`, "Bloom filter"). Equal filters encode to equal bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(BLOOM_HEADER_LEN + self.blocks.len() * BLOCK_BYTES + CRC_LEN);
        out.extend_from_slice(&BLOOM_MAGIC);
        out.push(BLOOM_FORMAT_VERSION);
        // Both are at most 32.
        out.push(self.probes as u8);
        out.push(self.bits_per_key as u8);
        out.push(0);
        out.extend_from_slice(&(self.blocks.len() as u64).to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
        debug_assert_eq!(out.len(), BLOOM_HEADER_LEN);
        for word in self.blocks.iter().flat_map(|block| block.0) {
            out.extend_from_slice(&word.to_le_bytes());
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// A filter from [`encode`](Self::encode)'s bytes. Damaged, truncated or foreign bytes are
    /// an error, never a panic: the checksum catches damage, and behind it the header must be
    /// what this code writes and agree with the length. The bit array is sized from the
    /// input's length, so a header cannot make the decoder allocate more than it was given.
    pub fn decode(bytes: &[u8]) -> Result<Self, FilterError> {
        let min = BLOOM_HEADER_LEN + BLOCK_BYTES + CRC_LEN;
        if bytes.len() < min {
            return Err(FilterError::TooShort {
                len: bytes.len(),
                min,
            });
        }
        if !is_bloom(bytes) {
            return Err(FilterError::BadMagic);
        }
        if bytes[4] != BLOOM_FORMAT_VERSION {
            return Err(FilterError::UnsupportedVersion(u32::from(bytes[4])));
        }
        let (body, crc) = bytes.split_at(bytes.len() - CRC_LEN);
        let stored = u32::from_le_bytes(array(crc));
        let computed = crc32c::crc32c(body);
        if stored != computed {
            return Err(FilterError::ChecksumMismatch { stored, computed });
        }

        let (probes, bits_per_key) = (u32::from(body[5]), u32::from(body[6]));
        if body[7] != 0 {
            return Err(FilterError::Corrupt("reserved header byte is not zero"));
        }
        if !(1..=MAX_BITS_PER_KEY).contains(&bits_per_key) {
            return Err(FilterError::Corrupt("bits per key outside 1..=32"));
        }
        if probes != probes_for(bits_per_key) {
            return Err(FilterError::Corrupt(
                "probe count does not match the bits per key",
            ));
        }
        let stored_blocks = u64::from_le_bytes(array(&body[8..16]));
        let len = u64::from_le_bytes(array(&body[16..24]));
        let bits = &body[BLOOM_HEADER_LEN..];
        if stored_blocks == 0
            || stored_blocks > MAX_BLOCKS
            || bits.len() % BLOCK_BYTES != 0
            || bits.len() / BLOCK_BYTES != stored_blocks as usize
        {
            return Err(FilterError::Corrupt(
                "bit array length does not match the block count",
            ));
        }
        let mut blocks = Vec::new();
        blocks
            .try_reserve_exact(bits.len() / BLOCK_BYTES)
            .map_err(|_| FilterError::OutOfMemory {
                bytes: bits.len() as u64,
            })?;
        blocks.extend(bits.chunks_exact(BLOCK_BYTES).map(|chunk| {
            let mut block = EMPTY_BLOCK;
            for (word, bytes) in block.0.iter_mut().zip(chunk.chunks_exact(8)) {
                *word = u64::from_le_bytes(array(bytes));
            }
            block
        }));
        // Each insert sets between 1 and `probes` bits.
        let set_bits: u64 = blocks
            .iter()
            .flat_map(|block| block.0)
            .map(|word| u64::from(word.count_ones()))
            .sum();
        if (len == 0) != (set_bits == 0) || set_bits > len.saturating_mul(u64::from(probes)) {
            return Err(FilterError::Corrupt(
                "set bits do not match the number of keys",
            ));
        }
        Ok(Self {
            blocks,
            bits_per_key,
            probes,
            len,
        })
    }
}

/// The expected false-positive rate of `keys` keys spread over `blocks` 512-bit blocks with
/// `probes` probes each: the rate of one block, `(1 - (1 - 1/512)^(probes * L))^probes` for
/// `L` keys in it, averaged over `L ~ Poisson(keys / blocks)`.
fn blocked_fp_rate(keys: u64, blocks: u64, probes: u32) -> f64 {
    if keys == 0 || blocks == 0 {
        return 0.0;
    }
    let k = f64::from(probes);
    let mean = keys as f64 / blocks as f64;
    // Fraction of a block's bits one key leaves clear.
    let clear = 1.0 - 1.0 / BLOCK_BITS as f64;
    let in_block = |load: f64| (1.0 - clear.powf(k * load)).powf(k);
    if mean > 10_000.0 {
        // Every block is saturated; the spread of loads no longer matters.
        return in_block(mean);
    }
    // Sum outwards from the most likely load until the Poisson terms vanish (within a few
    // hundred terms for any mean up to 10,000).
    let mode = mean.floor();
    let ln_mode_factorial: f64 = (2..=mode as u64).map(|j| (j as f64).ln()).sum();
    let at_mode = (mode * mean.ln() - mean - ln_mode_factorial).exp();
    let mut total = at_mode * in_block(mode);
    let (mut p, mut load) = (at_mode, mode);
    while p > 1e-18 {
        load += 1.0;
        p *= mean / load;
        total += p * in_block(load);
    }
    let (mut p, mut load) = (at_mode, mode);
    while p > 1e-18 && load > 0.0 {
        p *= load / mean;
        load -= 1.0;
        total += p * in_block(load);
    }
    total.min(1.0)
}

/// A fixed-size array from a slice of exactly that length (the callers slice it so).
fn array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0; N];
    out.copy_from_slice(bytes);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The key `(namespace, id)`: distinct namespaces give disjoint, deterministic key sets.
    fn key(namespace: u32, id: u64) -> [u8; 12] {
        let mut key = [0; 12];
        key[..4].copy_from_slice(&namespace.to_le_bytes());
        key[4..].copy_from_slice(&id.to_le_bytes());
        key
    }

    /// A filter sized for and holding the keys `0..keys` of namespace 1.
    fn filled(keys: u64, bits_per_key: u32) -> BloomFilter {
        let mut filter = BloomFilter::new(keys, bits_per_key).unwrap();
        for id in 0..keys {
            filter.insert_key(&key(1, id));
        }
        filter
    }

    /// The fraction of `queries` keys of a namespace no test inserts that the filter claims.
    fn measured_fp_rate(filter: &BloomFilter, queries: u64) -> f64 {
        let hits = (0..queries)
            .filter(|&id| filter.contains_key(&key(u32::MAX, id)))
            .count();
        hits as f64 / queries as f64
    }

    /// Replaces the trailing CRC with the right one for the (changed) bytes before it.
    fn fix_crc(bytes: &mut [u8]) {
        let body = bytes.len() - CRC_LEN;
        let crc = crc32c::crc32c(&bytes[..body]);
        bytes[body..].copy_from_slice(&crc.to_le_bytes());
    }

    #[test]
    fn sizes_and_probes_follow_the_parameters() {
        let empty = BloomFilter::new(0, 10).unwrap();
        assert_eq!(
            (empty.bit_count(), empty.probes(), empty.len()),
            (512, 7, 0)
        );
        assert!(empty.is_empty() && !empty.contains_key(b"anything"));
        assert_eq!(empty.fp_rate_estimate(), 0.0);
        assert_eq!(BloomFilter::new(51, 10).unwrap().bit_count(), 512);
        assert_eq!(BloomFilter::new(52, 10).unwrap().bit_count(), 1024);
        let filter = BloomFilter::new(100_000, 10).unwrap();
        assert_eq!(filter.bit_count(), 1_000_448); // 1,000,000 rounded up to 512
        assert!(filter.memory_bytes() >= 1_000_448 / 8);
        for (bits_per_key, probes) in [(1, 1), (2, 1), (3, 2), (8, 6), (10, 7), (20, 14), (32, 16)]
        {
            let filter = BloomFilter::new(10, bits_per_key).unwrap();
            assert_eq!(filter.probes(), probes, "{bits_per_key} bits per key");
            assert_eq!(filter.bits_per_key(), bits_per_key);
        }
    }

    #[test]
    fn bad_arguments_are_errors() {
        for bits_per_key in [0, 33, u32::MAX] {
            assert_eq!(
                BloomFilter::new(10, bits_per_key),
                Err(FilterError::InvalidBitsPerKey(bits_per_key))
            );
        }
        // The largest size is allowed (checked without allocating its 8 GiB).
        assert_eq!(block_count(MAX_BLOOM_BITS / 32, 32), Ok(MAX_BLOCKS));
        assert_eq!(block_count(MAX_BLOOM_BITS, 1), Ok(MAX_BLOCKS));
        for (keys, bits_per_key) in [
            (MAX_BLOOM_BITS / 32 + 1, 32),
            (MAX_BLOOM_BITS, 2),
            (u64::MAX, 32),
        ] {
            assert!(matches!(
                BloomFilter::new(keys, bits_per_key),
                Err(FilterError::BloomTooLarge { .. })
            ));
        }
    }

    #[test]
    fn fp_rate_at_10_bits_per_key_is_below_one_and_a_half_percent() {
        let filter = filled(100_000, 10);
        let measured = measured_fp_rate(&filter, 100_000);
        let estimate = filter.fp_rate_estimate();
        println!("measured {measured:.5}, estimated {estimate:.5}");
        assert!(measured < 0.015, "measured {measured}");
        assert!(
            (measured - estimate).abs() < 0.15 * estimate,
            "measured {measured}, estimated {estimate}"
        );
    }

    /// The estimate tracks the measured rate across sizes and loads, not only at 10 bits.
    #[test]
    fn fp_rate_estimate_tracks_the_measured_rate() {
        for (bits_per_key, queries) in [(4, 100_000), (8, 100_000), (16, 400_000)] {
            let filter = filled(20_000, bits_per_key);
            let measured = measured_fp_rate(&filter, queries);
            let estimate = filter.fp_rate_estimate();
            assert!(
                (measured - estimate).abs() < 0.2 * estimate,
                "{bits_per_key} bits per key: measured {measured}, estimated {estimate}"
            );
        }
        // Over-full: ten times the keys it was sized for still answers, at a high rate.
        let mut filter = BloomFilter::new(1_000, 10).unwrap();
        for id in 0..10_000 {
            filter.insert_key(&key(2, id));
        }
        assert!((0..10_000).all(|id| filter.contains_key(&key(2, id))));
        let (measured, estimate) = (measured_fp_rate(&filter, 20_000), filter.fp_rate_estimate());
        assert!(estimate > 0.5 && (measured - estimate).abs() < 0.1 * estimate);
        // A saturated estimate (more than 10,000 keys a block) stays a rate.
        let mut filter = BloomFilter::new(1, 1).unwrap();
        filter.len = u64::MAX;
        assert!(filter.fp_rate_estimate() <= 1.0 && filter.fp_rate_estimate() > 0.99);
    }

    #[test]
    fn encode_decode_round_trips() {
        for filter in [
            BloomFilter::new(0, 1).unwrap(),
            BloomFilter::new(1_000, 10).unwrap(),
            filled(1, 32),
            filled(1_000, 10),
            filled(5_000, 3),
        ] {
            let bytes = filter.encode();
            assert!(is_bloom(&bytes));
            assert_eq!(
                bytes.len(),
                BLOOM_HEADER_LEN + filter.bit_count() as usize / 8 + CRC_LEN
            );
            let decoded = BloomFilter::decode(&bytes).unwrap();
            assert_eq!(decoded, filter);
            assert_eq!(decoded.encode(), bytes);
        }
    }

    #[test]
    fn decoded_filters_keep_working() {
        let mut decoded = BloomFilter::decode(&filled(2_000, 10).encode()).unwrap();
        for id in 0..500 {
            decoded.insert_key(&key(9, id));
        }
        assert_eq!(decoded.len(), 2_500);
        assert!((0..2_000).all(|id| decoded.contains_key(&key(1, id))));
        assert!((0..500).all(|id| decoded.contains_key(&key(9, id))));
    }

    #[test]
    fn the_kinds_are_told_apart_by_their_magic() {
        let bloom = filled(100, 10).encode();
        let quotient = crate::QuotientFilter::new(100, 0.01).unwrap().encode();
        assert!(is_bloom(&bloom) && !is_bloom(&quotient) && !is_bloom(b"STB"));
        assert_eq!(BloomFilter::decode(&quotient), Err(FilterError::BadMagic));
        assert_eq!(
            crate::QuotientFilter::decode(&bloom),
            Err(FilterError::BadMagic)
        );
    }

    #[test]
    fn every_single_byte_change_is_an_error() {
        let bytes = filled(300, 10).encode();
        for index in 0..bytes.len() {
            for flip in 1..=255u8 {
                let mut damaged = bytes.clone();
                damaged[index] ^= flip;
                assert!(
                    BloomFilter::decode(&damaged).is_err(),
                    "byte {index} ^ {flip:#x} went unnoticed"
                );
            }
        }
    }

    #[test]
    fn every_truncation_and_extension_is_an_error() {
        let bytes = filled(300, 10).encode();
        for len in 0..bytes.len() {
            assert!(
                BloomFilter::decode(&bytes[..len]).is_err(),
                "truncated to {len}"
            );
        }
        for extra in [1, 8, 64] {
            let mut longer = bytes.clone();
            longer.extend(std::iter::repeat_n(0, extra));
            assert!(BloomFilter::decode(&longer).is_err());
            fix_crc(&mut longer);
            assert!(BloomFilter::decode(&longer).is_err(), "{extra} more bytes");
        }
    }

    #[test]
    fn errors_name_the_damage() {
        let bytes = filled(100, 10).encode();
        assert!(matches!(
            BloomFilter::decode(&bytes[..20]),
            Err(FilterError::TooShort { len: 20, .. })
        ));
        let mut future = bytes.clone();
        future[4] = 2;
        assert_eq!(
            BloomFilter::decode(&future),
            Err(FilterError::UnsupportedVersion(2))
        );
        let mut damaged = bytes.clone();
        damaged[BLOOM_HEADER_LEN + 5] ^= 1;
        assert!(matches!(
            BloomFilter::decode(&damaged),
            Err(FilterError::ChecksumMismatch { .. })
        ));
        // Headers this code does not write, behind valid checksums.
        let edits: [(usize, u8); 9] = [
            (5, 6),     // 6 probes with 10 bits per key
            (6, 0),     // 0 bits per key
            (6, 33),    // 33 bits per key
            (7, 1),     // the reserved byte
            (8, 3),     // 3 blocks where there are 2
            (8, 0),     // no blocks
            (15, 0x80), // 2^63 blocks
            (16, 0),    // no keys, bits set
            (16, 1),    // 1 key, more than 7 bits set
        ];
        for (at, value) in edits {
            let mut inconsistent = bytes.clone();
            inconsistent[at] = value;
            if at == 16 {
                inconsistent[17] = 0;
            }
            fix_crc(&mut inconsistent);
            assert!(
                matches!(
                    BloomFilter::decode(&inconsistent),
                    Err(FilterError::Corrupt(_))
                ),
                "byte {at} = {value}"
            );
        }
        // Bits set in a filter that says it holds no key.
        let mut empty = BloomFilter::new(0, 10).unwrap().encode();
        empty[BLOOM_HEADER_LEN] = 1;
        fix_crc(&mut empty);
        assert!(matches!(
            BloomFilter::decode(&empty),
            Err(FilterError::Corrupt(_))
        ));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn inserted_keys_are_always_found(
            keys in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..24), 0..2_000),
            expected in 0u64..3_000,
            bits_per_key in 1u32..=32,
        ) {
            let mut filter = BloomFilter::new(expected, bits_per_key).unwrap();
            for key in &keys {
                filter.insert_key(key);
            }
            prop_assert_eq!(filter.len(), keys.len() as u64);
            for key in &keys {
                prop_assert!(filter.contains_key(key));
            }
            let decoded = BloomFilter::decode(&filter.encode()).unwrap();
            for key in &keys {
                prop_assert!(decoded.contains_key(key));
            }
        }

        #[test]
        fn inserted_hashes_are_always_found(
            hashes in prop::collection::vec(any::<u64>(), 1..500),
            expected in 0u64..100,
        ) {
            // Raw hashes reach the corners the key hash rarely does (0, u64::MAX, equal halves).
            let mut filter = BloomFilter::new(expected, 10).unwrap();
            for &hash in hashes.iter().chain(&[0, u64::MAX, 1 << 32]) {
                filter.insert(hash);
            }
            for &hash in hashes.iter().chain(&[0, u64::MAX, 1 << 32]) {
                prop_assert!(filter.contains(hash));
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        #[test]
        fn decode_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
            let _ = BloomFilter::decode(&bytes);
        }

        /// Random edits behind the magic and a valid checksum reach the header checks;
        /// whatever decodes must be usable and re-encode to the same bytes.
        #[test]
        fn decode_never_panics_behind_a_valid_checksum(
            edits in prop::collection::vec((any::<usize>(), any::<u8>()), 1..4),
            cut in prop::option::of(0usize..400),
        ) {
            let mut bytes = filled(150, 10).encode();
            let end = bytes.len() - CRC_LEN;
            for (index, value) in edits {
                bytes[5 + index % (end - 5)] = value;
            }
            if let Some(cut) = cut {
                bytes.truncate(cut.max(CRC_LEN));
            }
            fix_crc(&mut bytes);
            if let Ok(mut filter) = BloomFilter::decode(&bytes) {
                prop_assert_eq!(filter.encode(), bytes);
                for id in 0..200 {
                    let _ = filter.contains_key(&key(5, id));
                    filter.insert_key(&key(5, id));
                }
                prop_assert!((0..200).all(|id| filter.contains_key(&key(5, id))));
            }
        }
    }
}
