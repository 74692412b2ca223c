//! Merging: the merged filter equals the one built from scratch and has no false negatives.

#![allow(clippy::unwrap_used)]

mod common;

use common::{filled, key_hashes};
use proptest::prelude::*;
use stitch_filter::{FilterError, FilterParams, QuotientFilter};

/// One merge input: its parameters and the key ids it holds (ids come from one shared pool, so
/// inputs overlap and the merge sees duplicates).
#[derive(Debug, Clone)]
struct Input {
    ids: Vec<u64>,
    slack: u64,
    fp_rate: f64,
    spare_bits: u32,
}

fn input() -> impl Strategy<Value = Input> {
    (
        prop_oneof![
            Just(Vec::new()),
            prop::collection::vec(0u64..4_000, 0..40),
            prop::collection::vec(0u64..4_000, 0..3_000),
        ],
        0u64..500,
        prop_oneof![Just(0.5), Just(0.1), Just(0.01), Just(0.001)],
        0u32..6,
    )
        .prop_map(|(ids, slack, fp_rate, spare_bits)| Input {
            ids,
            slack,
            fp_rate,
            spare_bits,
        })
}

fn build(input: &Input) -> (QuotientFilter, Vec<u64>) {
    let capacity = input.ids.len() as u64 + input.slack;
    let mut filter =
        QuotientFilter::with_spare_bits(capacity, input.fp_rate, input.spare_bits).unwrap();
    let hashes = key_hashes(7, input.ids.iter().copied());
    for &hash in &hashes {
        filter.insert(hash).unwrap();
    }
    (filter, hashes)
}

/// Builds the inputs, merges them, and checks the result against the filter built from scratch
/// with the merge's parameters.
fn check_merge(filters: &[QuotientFilter], hashes: &[u64], fp_rate: f64) -> QuotientFilter {
    let inputs: Vec<&QuotientFilter> = filters.iter().collect();
    let merged = QuotientFilter::merge(&inputs, fp_rate).unwrap();
    assert_eq!(
        merged.params(),
        QuotientFilter::merge_params(&inputs, fp_rate).unwrap()
    );
    let mut scratch = QuotientFilter::with_params(merged.params()).unwrap();
    for &hash in hashes {
        scratch.insert(hash).unwrap();
    }
    assert_eq!(merged.encode(), scratch.encode());
    assert!(hashes.iter().all(|&hash| merged.contains(hash)));
    merged
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn merge_equals_building_from_scratch(
        inputs in prop::collection::vec(input(), 2..=8),
        fp_rate in prop_oneof![Just(0.2), Just(0.01), Just(0.001)],
    ) {
        let (filters, hashes): (Vec<_>, Vec<_>) = inputs.iter().map(build).unzip();
        let hashes: Vec<u64> = hashes.concat();
        check_merge(&filters, &hashes, fp_rate);
    }
}

/// Filters of `sizes` keys each (from disjoint key namespaces, at a 1% rate), and all their
/// key hashes.
fn filters_of(sizes: &[u64]) -> (Vec<QuotientFilter>, Vec<u64>) {
    let filters = sizes
        .iter()
        .enumerate()
        .map(|(namespace, &len)| {
            let mut filter = QuotientFilter::new(len, 0.01).unwrap();
            filled(&mut filter, namespace as u32, len);
            filter
        })
        .collect();
    let hashes = sizes
        .iter()
        .enumerate()
        .flat_map(|(namespace, &len)| key_hashes(namespace as u32, 0..len))
        .collect();
    (filters, hashes)
}

#[test]
fn large_merges_equal_building_from_scratch() {
    let (filters, hashes) = filters_of(&[400_000, 250_000, 0, 60_000, 1_000]);
    let merged = check_merge(&filters, &hashes, 0.01);
    assert_eq!(
        merged.capacity(),
        filters.iter().map(QuotientFilter::len).sum::<u64>()
    );
    // Filters from `new` share one width, so the merge drops no bits and keeps the rate.
    assert!(filters
        .iter()
        .all(|f| f.fingerprint_bits() == merged.fingerprint_bits()));
    assert!(merged.fp_rate_estimate() <= 0.01);
}

/// A run stitched from many ingested runs keeps one filter part per run: a merge of
/// thousands of small inputs (and a large one) equals building from scratch.
#[test]
fn merges_of_thousands_of_parts_equal_building_from_scratch() {
    let mut sizes = vec![256u64; 3_000];
    sizes.push(200_000);
    let (filters, hashes) = filters_of(&sizes);
    check_merge(&filters, &hashes, 0.01);
}

#[test]
fn merge_params_follow_the_rules() {
    let mut wide = QuotientFilter::with_spare_bits(1_000, 0.01, 5).unwrap();
    let mut narrow = QuotientFilter::with_spare_bits(1_000, 0.01, 1).unwrap();
    let empty_narrower = QuotientFilter::with_spare_bits(10, 0.5, 0).unwrap();
    filled(&mut wide, 1, 1_000);
    filled(&mut narrow, 2, 600);
    let params = QuotientFilter::merge_params(&[&wide, &narrow, &empty_narrower], 0.02).unwrap();
    assert_eq!(params.capacity(), 1_600);
    // Empty inputs do not narrow the fingerprints.
    assert_eq!(params.fingerprint_bits(), narrow.fingerprint_bits());
    assert_eq!(params.fp_rate(), 0.02);
    assert_eq!(
        params,
        FilterParams::with_fingerprint_bits(1_600, 0.02, narrow.fingerprint_bits()).unwrap()
    );
    // With only empty inputs, the narrowest width is kept.
    let all_empty = [&QuotientFilter::new(10, 0.01).unwrap(), &empty_narrower];
    let merged = QuotientFilter::merge(&all_empty, 0.01).unwrap();
    assert!(merged.is_empty());
    assert_eq!(merged.capacity(), 0);
    assert_eq!(merged.fingerprint_bits(), empty_narrower.fingerprint_bits());
    assert_eq!(
        QuotientFilter::merge(&[], 0.01).unwrap_err(),
        FilterError::NoInputs
    );
    assert!(matches!(
        QuotientFilter::merge(&[&wide], 0.7),
        Err(FilterError::InvalidFpRate(_))
    ));
}

/// Each merge of equal filters into one twice as large uses one spare bit; with 3 spare bits,
/// eight full filters merge into one that still meets the configured rate.
#[test]
fn spare_bits_keep_the_configured_rate_through_merges() {
    let fp_rate = 0.01;
    let filters: Vec<QuotientFilter> = (0..8)
        .map(|namespace| {
            let mut filter = QuotientFilter::with_spare_bits(20_000, fp_rate, 3).unwrap();
            filled(&mut filter, namespace, 20_000);
            filter
        })
        .collect();
    let pairs: Vec<QuotientFilter> = filters
        .chunks(2)
        .map(|pair| QuotientFilter::merge(&[&pair[0], &pair[1]], fp_rate).unwrap())
        .collect();
    let quads: Vec<QuotientFilter> = pairs
        .chunks(2)
        .map(|pair| QuotientFilter::merge(&[&pair[0], &pair[1]], fp_rate).unwrap())
        .collect();
    let all = QuotientFilter::merge(&[&quads[0], &quads[1]], fp_rate).unwrap();
    let spare = |filter: &QuotientFilter| filter.params().spare_bits();
    assert_eq!(spare(&filters[0]), 3);
    assert_eq!((spare(&pairs[0]), spare(&quads[0]), spare(&all)), (2, 1, 0));
    assert!(all.fp_rate_estimate() <= fp_rate);
    // Merging the eight at once stores the same fingerprints as merging in pairs (its capacity
    // differs: the pairwise merges already collapsed colliding fingerprints).
    let at_once = QuotientFilter::merge(&filters.iter().collect::<Vec<_>>(), fp_rate).unwrap();
    assert_eq!(
        (at_once.len(), at_once.fingerprint_bits()),
        (all.len(), all.fingerprint_bits())
    );
    for namespace in 0..8 {
        assert!(key_hashes(namespace, 0..20_000)
            .iter()
            .all(|&h| all.contains(h)));
    }
    // One more doubling and the rate is above the configured one, and reported so.
    let mut other = QuotientFilter::with_spare_bits(160_000, fp_rate, 0).unwrap();
    filled(&mut other, 9, 160_000);
    let beyond = QuotientFilter::merge(&[&all, &other], fp_rate).unwrap();
    assert_eq!(spare(&beyond), -1);
    assert!(beyond.fp_rate_estimate() > fp_rate);
}

/// Filters of very different widths: the narrow one decides, and everything is still found.
#[test]
fn merging_narrow_into_wide_keeps_every_key() {
    let mut wide = QuotientFilter::with_spare_bits(50_000, 0.001, 6).unwrap();
    let mut narrow = QuotientFilter::with_spare_bits(50_000, 0.3, 0).unwrap();
    filled(&mut wide, 1, 50_000);
    filled(&mut narrow, 2, 50_000);
    let hashes = [key_hashes(1, 0..50_000), key_hashes(2, 0..50_000)].concat();
    let merged = check_merge(&[wide, narrow.clone()], &hashes, 0.001);
    assert_eq!(merged.fingerprint_bits(), narrow.fingerprint_bits());
    assert!(merged.fp_rate_estimate() > 0.001);
    assert!(
        merged.len() < 100_000,
        "narrow fingerprints collide and are stored once"
    );
}
