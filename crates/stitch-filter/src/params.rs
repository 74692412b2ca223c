//! Filter parameters: how a capacity, a false-positive rate and spare bits become a fingerprint
//! width and a slot layout, and how a hash becomes a (quotient, remainder) pair.

use crate::divide::Divider;
use crate::table::SLOTS_PER_BLOCK;
use crate::FilterError;

/// The largest capacity a filter accepts (2^40 entries; a 50-million-entry run is far below).
pub const MAX_CAPACITY: u64 = 1 << 40;

/// The largest false-positive rate a filter accepts.
pub const MAX_FP_RATE: f64 = 0.5;

/// The merged size [`QuotientFilter::new`](crate::QuotientFilter::new) sizes fingerprints for:
/// 2^26 (about 67 million) entries, above the largest run StitchDB builds (about 50 million).
/// Filters from `new` with the same rate share one fingerprint width, so merging them drops no
/// bits, and every merge of up to this many entries keeps the configured rate.
pub const DEFAULT_MERGE_TARGET: u64 = 1 << 26;

/// The load factor a filter reaches at its capacity, as a fraction: the slot count is the
/// smallest multiple of 64 that is at least `capacity * 10 / 9`.
pub const MAX_LOAD: f64 = MAX_LOAD_NUMERATOR as f64 / MAX_LOAD_DENOMINATOR as f64;
const MAX_LOAD_NUMERATOR: u64 = 9;
const MAX_LOAD_DENOMINATOR: u64 = 10;

/// Everything that fixes a filter's layout and meaning.
///
/// Two filters with equal parameters that hold the same set of fingerprints are equal slot for
/// slot and encode to the same bytes. The three chosen values are the capacity, the configured
/// false-positive rate and the fingerprint width `p`; the rest is derived:
///
/// * `slot_count` (`Q`): the smallest multiple of 64 with `capacity <= 0.9 * Q` (at least 64).
/// * `remainder_range` (`R`): `ceil(2^p / Q)`. A fingerprint `f` (the top `p` bits of the hash)
///   lives in the run of quotient `f / R` as remainder `f % R`.
/// * `remainder_bits` (`r`): the bits that hold a value below `R`. A slot costs `r + 3` bits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FilterParams {
    capacity: u64,
    fp_rate: f64,
    fingerprint_bits: u32,
    slot_count: u64,
    remainder_range: u64,
    remainder_bits: u32,
    /// Splits fingerprints by `remainder_range`.
    divider: Divider,
}

impl FilterParams {
    /// The parameters [`QuotientFilter::new`](crate::QuotientFilter::new) uses (with
    /// [`DEFAULT_MERGE_TARGET`]): the fingerprint width is the smallest `p` with
    /// `max(capacity, merge_target, 1) <= fp_rate * 2^p`, so that the filter, and any merge of
    /// it into a filter of up to `max(capacity, merge_target)` entries, meets `fp_rate`. Where
    /// that needs more than 64 bits, `p` is 64 (the width `capacity` alone needs must fit).
    pub fn for_merge_target(
        capacity: u64,
        fp_rate: f64,
        merge_target: u64,
    ) -> Result<Self, FilterError> {
        check_fp_rate(fp_rate)?;
        check_capacity(capacity)?;
        let needed = needed_fingerprint_bits(capacity, fp_rate);
        if needed > u64::BITS {
            return Err(FilterError::FingerprintTooWide { needed });
        }
        let for_target = needed_fingerprint_bits(capacity.max(merge_target), fp_rate);
        Self::with_fingerprint_bits(capacity, fp_rate, for_target.min(u64::BITS))
    }

    /// The parameters [`QuotientFilter::with_spare_bits`](crate::QuotientFilter::with_spare_bits)
    /// uses: the fingerprint width is the smallest `p` with `max(capacity, 1) <= fp_rate * 2^p`
    /// (so the filter meets `fp_rate` at capacity), plus `spare_bits`.
    pub fn for_capacity(capacity: u64, fp_rate: f64, spare_bits: u32) -> Result<Self, FilterError> {
        check_fp_rate(fp_rate)?;
        check_capacity(capacity)?;
        let needed = needed_fingerprint_bits(capacity, fp_rate).saturating_add(spare_bits);
        if needed > u64::BITS {
            return Err(FilterError::FingerprintTooWide { needed });
        }
        Self::with_fingerprint_bits(capacity, fp_rate, needed)
    }

    /// Parameters with an explicit fingerprint width `p` in `1..=64`. A width below what
    /// `fp_rate` needs at capacity is allowed (merges produce such filters); the filter's
    /// [`fp_rate_estimate`](crate::QuotientFilter::fp_rate_estimate) then exceeds `fp_rate`
    /// when it fills up.
    pub fn with_fingerprint_bits(
        capacity: u64,
        fp_rate: f64,
        fingerprint_bits: u32,
    ) -> Result<Self, FilterError> {
        check_fp_rate(fp_rate)?;
        check_capacity(capacity)?;
        if !(1..=u64::BITS).contains(&fingerprint_bits) {
            return Err(FilterError::InvalidFingerprintBits(fingerprint_bits));
        }
        let slot_count = slots_for_capacity(capacity);
        // R * Q >= 2^p, so every quotient f / R is below Q. With Q >= 64, R <= 2^58.
        let remainder_range = (1u128 << fingerprint_bits).div_ceil(u128::from(slot_count)) as u64;
        let remainder_bits = u64::BITS - (remainder_range - 1).leading_zeros();
        Ok(Self {
            capacity,
            fp_rate,
            fingerprint_bits,
            slot_count,
            remainder_range,
            remainder_bits,
            divider: Divider::new(remainder_range),
        })
    }

    /// The most distinct fingerprints the filter takes.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The configured false-positive rate.
    pub fn fp_rate(&self) -> f64 {
        self.fp_rate
    }

    /// `p`: how many top bits of the hash the filter keeps.
    pub fn fingerprint_bits(&self) -> u32 {
        self.fingerprint_bits
    }

    /// `Q`: the number of quotients (home slots). The table may hold a few more slots at its
    /// end for runs pushed past the last home slot.
    pub fn slot_count(&self) -> u64 {
        self.slot_count
    }

    /// `R`: remainders are below this value.
    pub fn remainder_range(&self) -> u64 {
        self.remainder_range
    }

    /// `r`: the width of a stored remainder.
    pub fn remainder_bits(&self) -> u32 {
        self.remainder_bits
    }

    /// The fingerprint bits beyond what `fp_rate` needs at capacity: each one lets the
    /// fingerprints be merged into a filter twice as large without the rate rising above
    /// `fp_rate`. Negative when a merge has already pushed the filter past its rate.
    pub fn spare_bits(&self) -> i64 {
        i64::from(self.fingerprint_bits)
            - i64::from(needed_fingerprint_bits(self.capacity, self.fp_rate))
    }

    /// The most distinct fingerprints a filter with this fingerprint width holds while its
    /// expected false-positive rate stays at or below `fp_rate`: `floor(fp_rate * 2^p)`.
    /// A merge keeps the configured rate as long as its total length stays below the smallest
    /// of its non-empty inputs' `fp_rate_capacity`.
    pub fn fp_rate_capacity(&self) -> u64 {
        (self.fp_rate * (self.fingerprint_bits as f64).exp2()).floor() as u64
    }

    /// The expected false-positive rate of a filter with these parameters holding `len`
    /// distinct fingerprints: `1 - (1 - 2^-p)^len`, about `len / 2^p`. It does not depend on
    /// the load factor: a lookup for an absent key is a false positive exactly when its
    /// `p`-bit fingerprint equals a stored one.
    pub fn fp_rate_at(&self, len: u64) -> f64 {
        let miss_one = (-(self.fingerprint_bits as f64)).exp2();
        -(len as f64 * (-miss_one).ln_1p()).exp_m1()
    }

    /// The fingerprint of a hash: its top `p` bits.
    pub(crate) fn fingerprint(&self, hash: u64) -> u64 {
        hash >> (u64::BITS - self.fingerprint_bits)
    }

    /// Splits a fingerprint into its quotient (home slot) and remainder.
    pub(crate) fn split(&self, fingerprint: u64) -> (u64, u64) {
        self.divider.div_rem(fingerprint)
    }

    /// The fingerprint stored as `remainder` in the run of `quotient`, if it is one this
    /// filter can hold (below `2^p`).
    pub(crate) fn join(&self, quotient: u64, remainder: u64) -> Option<u64> {
        let fingerprint =
            u128::from(quotient) * u128::from(self.remainder_range) + u128::from(remainder);
        (remainder < self.remainder_range && fingerprint < (1u128 << self.fingerprint_bits))
            .then_some(fingerprint as u64)
    }
}

fn check_fp_rate(fp_rate: f64) -> Result<(), FilterError> {
    // Written so that NaN fails too.
    if fp_rate > 0.0 && fp_rate <= MAX_FP_RATE {
        Ok(())
    } else {
        Err(FilterError::InvalidFpRate(fp_rate))
    }
}

fn check_capacity(capacity: u64) -> Result<(), FilterError> {
    if capacity <= MAX_CAPACITY {
        Ok(())
    } else {
        Err(FilterError::CapacityTooLarge {
            capacity,
            max: MAX_CAPACITY,
        })
    }
}

/// The slot count for a capacity: the smallest multiple of 64 (at least 64) that keeps the
/// load at capacity at or below [`MAX_LOAD`].
fn slots_for_capacity(capacity: u64) -> u64 {
    let slots = (capacity * MAX_LOAD_DENOMINATOR).div_ceil(MAX_LOAD_NUMERATOR);
    slots.div_ceil(SLOTS_PER_BLOCK).max(1) * SLOTS_PER_BLOCK
}

/// The smallest fingerprint width `p >= 1` with `max(capacity, 1) <= fp_rate * 2^p`. May
/// exceed 64 (the caller rejects such widths). `fp_rate` is in `(0, 0.5]`.
fn needed_fingerprint_bits(capacity: u64, fp_rate: f64) -> u32 {
    let entries = capacity.max(1) as f64;
    let fits = |bits: u32| entries <= fp_rate * (bits as f64).exp2();
    // log2 gives the answer up to rounding; the exact comparisons settle it (scaling by a
    // power of two is exact, and so is `entries` below 2^53).
    let mut bits = (entries / fp_rate).log2().ceil().max(1.0) as u32;
    while bits > 1 && fits(bits - 1) {
        bits -= 1;
    }
    while !fits(bits) {
        bits += 1;
    }
    bits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_width_is_the_smallest_that_meets_the_rate_at_capacity() {
        assert_eq!(needed_fingerprint_bits(10_485, 0.01), 20); // 10_485 / 2^20 = 0.99996 %
        assert_eq!(needed_fingerprint_bits(10_486, 0.01), 21);
        assert_eq!(needed_fingerprint_bits(1 << 20, 0.5), 21);
        assert_eq!(needed_fingerprint_bits(0, 0.5), 1);
        assert_eq!(needed_fingerprint_bits(1, 0.5), 1);
        assert_eq!(needed_fingerprint_bits(50_000_000, 0.001), 36);
    }

    #[test]
    fn spare_bits_are_added_and_reported() {
        let params = FilterParams::for_capacity(100_000, 0.01, 3).unwrap();
        assert_eq!(params.fingerprint_bits(), 24 + 3);
        assert_eq!(params.spare_bits(), 3);
        assert!(params.fp_rate_at(100_000) <= 0.01 / 8.0);
        assert!(params.fp_rate_capacity() >= 800_000);
    }

    #[test]
    fn merge_target_sets_one_width_for_all_smaller_filters() {
        let width = |capacity| {
            FilterParams::for_merge_target(capacity, 0.01, DEFAULT_MERGE_TARGET)
                .unwrap()
                .fingerprint_bits()
        };
        // 2^26 / 0.01 needs 33 bits; capacities above the target need more.
        assert_eq!([width(0), width(1_000), width(50_000_000)], [33, 33, 33]);
        assert_eq!(width(1 << 27), 34);
        let tiny_rate = FilterParams::for_merge_target(1_000, 1e-15, DEFAULT_MERGE_TARGET).unwrap();
        assert_eq!(tiny_rate.fingerprint_bits(), 64);
        assert!(FilterParams::for_merge_target(1 << 30, 1e-15, 0).is_err());
        assert_eq!(
            FilterParams::for_merge_target(12_345, 0.003, 0),
            FilterParams::for_capacity(12_345, 0.003, 0)
        );
    }

    #[test]
    fn slots_keep_the_load_at_capacity_at_most_ninety_percent() {
        for capacity in [0u64, 1, 57, 58, 1_000, 10_000, 1_000_000, 50_000_000] {
            let slots = slots_for_capacity(capacity);
            assert_eq!(slots % 64, 0);
            assert!(capacity as f64 <= MAX_LOAD * slots as f64);
            assert!(slots == 64 || capacity as f64 > MAX_LOAD * (slots - 64) as f64);
        }
    }

    #[test]
    fn remainders_cover_the_fingerprint_space() {
        for bits in [1, 6, 7, 20, 33, 63, 64] {
            let params = FilterParams::with_fingerprint_bits(1_000, 0.01, bits).unwrap();
            let top = if bits == 64 {
                u64::MAX
            } else {
                (1 << bits) - 1
            };
            let (quotient, remainder) = params.split(top);
            assert!(quotient < params.slot_count());
            assert!(remainder < params.remainder_range());
            assert!(params.remainder_range() - 1 < 1u64 << params.remainder_bits());
            assert_eq!(params.join(quotient, remainder), Some(top));
            assert_eq!(params.fingerprint(u64::MAX), top);
        }
    }

    #[test]
    fn bad_arguments_are_rejected() {
        for rate in [0.0, -0.1, 0.51, 1.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(
                FilterParams::for_capacity(10, rate, 0),
                Err(FilterError::InvalidFpRate(_))
            ));
        }
        assert!(matches!(
            FilterParams::for_capacity(MAX_CAPACITY + 1, 0.01, 0),
            Err(FilterError::CapacityTooLarge { .. })
        ));
        assert!(matches!(
            FilterParams::for_capacity(1_000, 1e-12, 40),
            Err(FilterError::FingerprintTooWide { .. })
        ));
        assert!(matches!(
            FilterParams::with_fingerprint_bits(1_000, 0.01, 0),
            Err(FilterError::InvalidFingerprintBits(0))
        ));
        assert!(matches!(
            FilterParams::with_fingerprint_bits(1_000, 0.01, 65),
            Err(FilterError::InvalidFingerprintBits(65))
        ));
    }
}
