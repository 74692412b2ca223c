//! Quotient filters for StitchDB's sorted runs, and Bloom filters for filters that are never
//! merged (see "When a Bloom filter is the better choice").
//!
//! Every sorted run carries a [`QuotientFilter`] over the hashes of its keys; a point lookup for
//! an absent key skips the runs whose filter says no. Unlike a Bloom filter, a quotient filter
//! stores each key's *fingerprint* (the top bits of its hash) in sorted order, so a compaction
//! builds the merged run's filter from the input runs' filters alone ([`QuotientFilter::merge`]),
//! without reading the keys of stitched blocks. Quotient filters are from Bender et al., "Don't
//! Thrash: How to Cache Your Hash on Flash" (VLDB 2012); the VT-tree uses them for this reason.
//!
//! ```
//! use stitch_filter::{hash_key, QuotientFilter};
//!
//! let mut older = QuotientFilter::new(1_000, 0.01)?;
//! let mut newer = QuotientFilter::new(1_000, 0.01)?;
//! for i in 0..1_000u32 {
//!     older.insert_key(format!("old-{i}").as_bytes())?;
//!     newer.insert(hash_key(format!("new-{i}").as_bytes()))?;
//! }
//! let merged = QuotientFilter::merge(&[&older, &newer], 0.01)?;
//! assert!(merged.contains_key(b"old-7") && merged.contains_key(b"new-7"));
//! assert!(merged.fp_rate_estimate() <= 0.01);
//!
//! let decoded = QuotientFilter::decode(&merged.encode())?;
//! assert_eq!(decoded, merged);
//! # Ok::<(), stitch_filter::FilterError>(())
//! ```
//!
//! # How a filter works
//!
//! A filter with fingerprint width `p` keeps `f`, the top `p` bits of a key's 64-bit hash
//! ([`hash_key`]), and splits it into a *quotient* `f / R` and a *remainder* `f % R`. The table
//! has `Q` home slots (plus a few overflow slots at its end); the remainder is stored in the
//! home slot of its quotient, or, when that is taken, pushed up to the next free slot. The
//! remainders of one quotient form a *run* (sorted, no duplicates), runs follow each other in
//! quotient order, and each run starts as early as it can: at `max(quotient, end of the previous
//! run + 1)`. Three metadata bits per slot (`occupied`, `runend`, `used`) locate a quotient's
//! run with a few word-wide rank and select steps.
//!
//! That layout depends only on the set of fingerprints, which gives the two properties the
//! store relies on:
//!
//! * Reading the slots in order yields the fingerprints sorted. A merge cuts each input's
//!   fingerprints to the merged width, merges the sorted streams and writes the runs in one
//!   pass: linear time, no re-insertion.
//! * The merged filter equals, byte for byte, the filter built by inserting all the inputs'
//!   hashes into `QuotientFilter::with_params(merged.params())`.
//!
//! A lookup for an absent key is a false positive exactly when its fingerprint equals a stored
//! one, so with `n` stored fingerprints the false-positive rate is `1 - (1 - 2^-p)^n`, about
//! `n / 2^p` ([`QuotientFilter::fp_rate_estimate`]). It grows with the number of entries, not
//! with the load factor, and an inserted key is always found.
//!
//! # Parameter rules
//!
//! A filter is fixed by three values ([`FilterParams`]): its capacity (the most distinct
//! fingerprints it takes), its configured false-positive rate, and its fingerprint width `p`.
//! `fp_rate` must be in `(0, 0.5]`, capacity at most [`MAX_CAPACITY`] (2^40), `p` in `1..=64`.
//! The layout follows from them:
//!
//! * Home slots: `Q` = the smallest multiple of 64 with `capacity <= 0.9 * Q` (at least 64), so
//!   a full filter is at most 90% loaded ([`MAX_LOAD`]).
//! * Remainders: `R = ceil(2^p / Q)` values, stored in `r = ceil(log2 R)` bits. A slot costs
//!   `r + 3` bits, so a full filter costs about `(r + 3) / 0.9` bits per entry, with
//!   `r ~ log2(0.9 * 2^p / capacity)`.
//!
//! Let `p_min(n)` be the smallest width with `max(n, 1) <= fp_rate * 2^p_min`: the narrowest
//! fingerprints that meet `fp_rate` with `n` entries. The constructors choose `p` as follows:
//!
//! * [`QuotientFilter::new`]`(capacity, fp_rate)`: `p = p_min(max(capacity,
//!   DEFAULT_MERGE_TARGET))`, the same as [`QuotientFilter::with_merge_target`] with
//!   [`DEFAULT_MERGE_TARGET`] = 2^26 (about 67 million entries, above StitchDB's largest runs of
//!   about 50 million). All filters from `new` with one rate and up to 2^26 entries share one
//!   width (33 bits at 1%, 36 at 0.1%), so merging them drops no fingerprint bits, and every
//!   merged filter of up to 2^26 entries meets `fp_rate`. (If that width would exceed 64 bits, `p`
//!   is 64.)
//! * [`QuotientFilter::with_merge_target`]`(capacity, fp_rate, target)`:
//!   `p = min(64, p_min(max(capacity, target)))`; `target = 0` gives `p_min(capacity)`.
//! * [`QuotientFilter::with_spare_bits`]`(capacity, fp_rate, s)`: `p = p_min(capacity) + s`.
//! * [`QuotientFilter::with_params`]: any parameters, e.g. a merged filter's.
//!
//! What a filter's rate is, given `len` stored fingerprints: about `len / 2^p`
//! ([`QuotientFilter::fp_rate_estimate`]). So:
//!
//! * With no spare bits (`p = p_min(capacity)`), the rate at capacity is between half the
//!   configured rate and the configured rate (the width is a whole number of bits). It equals
//!   the configured rate at the *design capacities* `fp_rate * 2^k`; in between, the fraction of
//!   a bit left over buys a proportionally lower rate. Below capacity the rate falls with the
//!   number of entries: half full, half the rate.
//! * The *spare bits* of a filter are `p - p_min(capacity)` ([`FilterParams::spare_bits`]).
//!   Each halves the rate at capacity, costs one bit per slot, and allows one doubling: the
//!   fingerprints meet `fp_rate` up to [`FilterParams::fp_rate_capacity`] `= floor(fp_rate *
//!   2^p)` entries, between `2^s` and `2^(s+1)` times the capacity. A filter from `new` with
//!   1,000 entries at 1% has 16 spare bits (and a rate of about 1e-7); one with 50 million has
//!   none to spare but still meets its rate.
//!
//! [`QuotientFilter::merge`]`(inputs, fp_rate)` picks ([`QuotientFilter::merge_params`]):
//!
//! * capacity: the sum of the inputs' lengths;
//! * `p`: the smallest width among the non-empty inputs (bits an input does not have cannot be
//!   recovered; empty inputs hold no fingerprints and do not constrain it; if all are empty, the
//!   smallest width of all);
//! * configured rate: `fp_rate`. `Q`, `R` and `r` follow from the rules above.
//!
//! So merges use up spare bits: a filter twice the size with the same `p` has one spare bit
//! fewer (its quotient is a bit wider, its remainders a bit narrower). While the merged length
//! stays within every non-empty input's `fp_rate_capacity`, the merged filter meets `fp_rate`.
//! Beyond that the merge still succeeds (compactions do not fail over a filter), with a rate of
//! about `len / 2^p` above `fp_rate`, which `fp_rate_estimate` reports; a caller that cannot
//! accept that rebuilds the filter from the keys. Filters from `new` reach that point only
//! beyond 2^26 entries.
//!
//! # When a Bloom filter is the better choice
//!
//! [`BloomFilter`] is a cache-blocked Bloom filter: all of a key's probes fall in one 64-byte
//! block, so a lookup costs one cache miss and a branch-free test of one line, where a quotient
//! filter's lookup takes rank and select steps over a run that may cross blocks. And it is
//! smaller per key at a given false-positive rate: about 10 bits a key for 1%, where a
//! quotient filter needs `(r + 3) / 0.9` bits (about 11 at 1% with no spare bits, about 18 for
//! one from `new`, whose fingerprints are kept wide for merges).
//!
//! What it cannot do is merge. A key's bits depend on the filter's block count and cannot be
//! told apart from other keys' afterwards, so filters of different sizes cannot be combined
//! into the filter of the merged run without its keys. A run whose merge stitches input blocks
//! without reading them therefore needs a quotient filter; a Bloom filter suits a filter built
//! from keys that are all read anyway (a flush, or a merge that rewrites every block). Nor does
//! it have a capacity: keys beyond the expected number raise its rate
//! ([`BloomFilter::fp_rate_estimate`]) rather than fail.
//!
//! The two encodings start with different magic bytes ([`BLOOM_MAGIC`], [`FILTER_MAGIC`]), so
//! a reader holding a filter extent's payload tells them apart with [`is_bloom`] before
//! decoding.
//!
//! # The hash
//!
//! [`hash_key`] is XXH3-64 with seed 0 (the `xxh3_64` function of the xxHash specification).
//! Encoded filters store fingerprints of it (a Bloom filter, the bits it picks), so it is part
//! of the format: changing it needs a new format version, and filters written before cannot be
//! used with it.
//!
//! # On-disk format
//!
//! [`QuotientFilter::encode`] writes a filter as a 56-byte header ([`FILTER_MAGIC`], format
//! version [`FILTER_FORMAT_VERSION`], the parameters and counts), the slot table block by
//! block (three metadata words and `r` remainder words per 64 slots), and a CRC32C of
//! everything before it. [`BloomFilter::encode`] writes a 24-byte header ([`BLOOM_MAGIC`],
//! version [`BLOOM_FORMAT_VERSION`], the parameters and the count of keys), the bit array and a
//! CRC32C. The byte-level formats are specified in the repository's `docs/format.md`
//! ("Quotient filter", "Bloom filter") and only there.
//!
//! # Errors and damage
//!
//! No function panics on bad input. Arguments out of range and a full filter are a
//! [`FilterError`]. So is a damaged encoding: a flipped bit or a truncation fails the length or
//! CRC check, so a damaged filter is never used to answer (and never answers a false negative).
//! Beyond the CRC, the decoder checks that the header is consistent and the table canonical,
//! so bytes with a matching CRC that this code did not write are an error too, never a panic or
//! a table the filter code could misread.

mod bloom;
mod build;
mod codec;
mod divide;
mod error;
mod filter;
mod merge;
mod params;
mod table;
mod validate;

pub use bloom::{
    is_bloom, BloomFilter, BLOOM_FORMAT_VERSION, BLOOM_HEADER_LEN, BLOOM_MAGIC, MAX_BITS_PER_KEY,
    MAX_BLOOM_BITS, MAX_PROBES,
};
pub use codec::{FILTER_FORMAT_VERSION, FILTER_HEADER_LEN, FILTER_MAGIC};
pub use error::FilterError;
pub use filter::QuotientFilter;
pub use params::{FilterParams, DEFAULT_MERGE_TARGET, MAX_CAPACITY, MAX_FP_RATE, MAX_LOAD};

/// The 64-bit hash of a key that every filter stores fingerprints of: XXH3-64 with seed 0.
///
/// Filters persist fingerprints of this hash, so it is part of the on-disk format: changing it
/// is a format change (a new [`FILTER_FORMAT_VERSION`]), and filters written with the old hash
/// would answer false negatives under the new one.
pub fn hash_key(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}
