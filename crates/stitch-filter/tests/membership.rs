//! Inserts and lookups: no false negatives, set semantics, capacity, memory.

mod common;

use common::{filled, key_hashes};
use proptest::prelude::*;
use stitch_filter::{hash_key, FilterError, FilterParams, QuotientFilter, MAX_CAPACITY, MAX_LOAD};

fn rate() -> impl Strategy<Value = f64> {
    prop_oneof![Just(0.5), Just(0.1), Just(0.01), Just(0.001), Just(1e-6)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn inserted_keys_are_always_found(
        keys in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..24), 0..2_000),
        slack in 0u64..3_000,
        fp_rate in rate(),
        spare_bits in 0u32..6,
    ) {
        let capacity = keys.len() as u64 + slack;
        let mut filter = QuotientFilter::with_spare_bits(capacity, fp_rate, spare_bits).unwrap();
        for key in &keys {
            filter.insert_key(key).unwrap();
        }
        for key in &keys {
            prop_assert!(filter.contains_key(key));
        }
        prop_assert!(filter.len() <= keys.len() as u64);
    }

    /// Hashes crowded into a few quotients make long runs and clusters that cross blocks and
    /// the end of the table.
    #[test]
    fn crowded_hashes_are_always_found(
        top_bits in prop::collection::vec(0u64..8, 1..600),
        low in prop::collection::vec(any::<u64>(), 600),
        end_of_table in any::<bool>(),
    ) {
        let mut filter = QuotientFilter::with_spare_bits(600, 0.01, 2).unwrap();
        let hashes: Vec<u64> = top_bits
            .iter()
            .zip(&low)
            .map(|(&top, &low)| {
                let top = if end_of_table { u64::MAX - top } else { top };
                (top << 54) | (low >> 10)
            })
            .collect();
        for &hash in &hashes {
            filter.insert(hash).unwrap();
        }
        for &hash in &hashes {
            prop_assert!(filter.contains(hash));
        }
        let decoded = QuotientFilter::decode(&filter.encode()).unwrap();
        prop_assert_eq!(decoded, filter);
    }

    /// The table depends only on the set of fingerprints, not on the insertion order.
    #[test]
    fn insertion_order_does_not_matter(
        hashes in prop::collection::vec(any::<u64>(), 0..1_500),
        seed in any::<u64>(),
    ) {
        let params = FilterParams::for_capacity(1_500, 0.05, 1).unwrap();
        let mut forward = QuotientFilter::with_params(params).unwrap();
        let mut shuffled = QuotientFilter::with_params(params).unwrap();
        for &hash in &hashes {
            forward.insert(hash).unwrap();
        }
        let mut order = hashes.clone();
        // A cheap deterministic shuffle: sort by a keyed mix of the hash.
        order.sort_by_key(|hash| (hash ^ seed).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        for &hash in order.iter().rev() {
            shuffled.insert(hash).unwrap();
        }
        prop_assert_eq!(forward.encode(), shuffled.encode());
    }
}

#[test]
fn large_sets_have_no_false_negatives() {
    for (len, fp_rate, spare_bits) in [
        (1_000_000u64, 0.01, 0),
        (1_000_000, 0.001, 3),
        (300_000, 0.5, 0),
    ] {
        let mut filter = QuotientFilter::with_spare_bits(len, fp_rate, spare_bits).unwrap();
        let hashes = key_hashes(1, 0..len);
        for &hash in &hashes {
            filter.insert(hash).unwrap();
        }
        assert!(hashes.iter().all(|&hash| filter.contains(hash)));
        assert!(filter.len() <= len);
    }
}

/// Fingerprints so narrow that every remainder is zero bits wide still work.
#[test]
fn zero_width_remainders_work() {
    let params = FilterParams::with_fingerprint_bits(1_000, 0.5, 6).unwrap();
    assert_eq!(params.remainder_bits(), 0);
    let mut filter = QuotientFilter::with_params(params).unwrap();
    let hashes = key_hashes(2, 0..1_000);
    for &hash in &hashes {
        filter.insert(hash).unwrap();
    }
    assert_eq!(filter.len(), 64);
    assert!(hashes.iter().all(|&hash| filter.contains(hash)));
    assert_eq!(QuotientFilter::decode(&filter.encode()).unwrap(), filter);
}

#[test]
fn duplicates_are_stored_once() {
    let mut filter = QuotientFilter::new(100, 0.01).unwrap();
    assert_eq!(filter.insert_key(b"k"), Ok(true));
    assert_eq!(filter.insert_key(b"k"), Ok(false));
    assert_eq!(filter.insert(hash_key(b"k")), Ok(false));
    assert_eq!(filter.len(), 1);
}

#[test]
fn a_full_filter_refuses_new_fingerprints_only() {
    let mut filter = QuotientFilter::new(100, 0.01).unwrap();
    filled(&mut filter, 3, 100);
    assert_eq!(filter.len(), 100);
    assert_eq!(
        filter.insert_key(b"one more"),
        Err(FilterError::Full { capacity: 100 })
    );
    assert_eq!(filter.insert(key_hashes(3, [5])[0]), Ok(false));
    let mut empty = QuotientFilter::new(0, 0.01).unwrap();
    assert!(matches!(empty.insert(7), Err(FilterError::Full { .. })));
    assert!(!empty.contains(7));
}

#[test]
fn bad_parameters_are_rejected() {
    for fp_rate in [0.0, -1.0, 0.500_001, 2.0, f64::NAN, f64::NEG_INFINITY] {
        assert!(matches!(
            QuotientFilter::new(1_000, fp_rate),
            Err(FilterError::InvalidFpRate(_))
        ));
    }
    assert!(matches!(
        QuotientFilter::new(MAX_CAPACITY + 1, 0.01),
        Err(FilterError::CapacityTooLarge { .. })
    ));
    assert!(matches!(
        QuotientFilter::new(u64::MAX, 0.01),
        Err(FilterError::CapacityTooLarge { .. })
    ));
    assert!(matches!(
        QuotientFilter::with_spare_bits(1_000, 0.01, 60),
        Err(FilterError::FingerprintTooWide { .. })
    ));
}

/// Memory is `r + 3` bits per slot, plus an overflow block and the struct.
#[test]
fn memory_is_close_to_r_plus_three_bits_per_slot() {
    for capacity in [10_000u64, 100_000, 1_000_000] {
        for fp_rate in [0.01, 0.001] {
            for spare_bits in [0, 3] {
                let mut filter =
                    QuotientFilter::with_spare_bits(capacity, fp_rate, spare_bits).unwrap();
                filled(&mut filter, 4, capacity);
                let slot_bits = f64::from(filter.remainder_bits() + 3);
                let ideal = slot_bits / filter.load_factor();
                println!(
                    "capacity {capacity} rate {fp_rate} spare {spare_bits}: r = {}, load {:.3}, \
                     {:.2} bits/entry (r + 3 at this load: {ideal:.2})",
                    filter.remainder_bits(),
                    filter.load_factor(),
                    filter.bits_per_entry()
                );
                assert!(filter.load_factor() > MAX_LOAD - 0.01);
                assert!(filter.bits_per_entry() < ideal * 1.02);
            }
        }
    }
}

/// The hash is part of the format; these values must never change. (The empty key's is the
/// XXH3-64 reference value; the others pin the crate's output.)
#[test]
fn hash_key_is_stable() {
    assert_eq!(hash_key(b""), 0x2d06_8005_38d3_94c2);
    assert_eq!(hash_key(b"stitchdb"), 0xdc32_b917_f6f5_6115);
    assert_eq!(hash_key(&[0; 100]), 0x801f_edc7_4ccd_608c);
}
