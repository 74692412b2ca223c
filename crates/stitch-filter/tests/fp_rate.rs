//! False-positive rates: measured on absent keys against the configured rate and the estimate.
//!
//! A filter's rate is `len / 2^p` (fingerprint width `p`), so it meets the configured rate at
//! capacity and equals it exactly at the design capacities `fp_rate * 2^k`; in between, and with
//! spare bits, it is lower, and `fp_rate_estimate` says by how much.

mod common;

use common::{filled, measured_fp_rate};
use stitch_filter::QuotientFilter;

const QUERIES: u64 = 1_000_000;

/// The design capacity `fp_rate * 2^k` nearest to `size`: the capacity at which a filter
/// without spare bits has exactly the configured rate.
fn design_capacity(size: u64, fp_rate: f64) -> u64 {
    let k = (size as f64 / fp_rate).log2().round();
    (fp_rate * k.exp2()).floor() as u64
}

fn assert_within_20_percent(measured: f64, expected: f64, what: &str) {
    println!("{what}: measured {measured:.6}, expected {expected:.6}");
    assert!(
        (measured - expected).abs() <= 0.2 * expected,
        "{what}: measured {measured}, expected {expected}"
    );
}

#[test]
fn fp_rate_is_the_configured_rate_at_design_capacity() {
    for size in [10_000, 100_000, 1_000_000] {
        for fp_rate in [0.01, 0.001] {
            let capacity = design_capacity(size, fp_rate);
            let mut filter = QuotientFilter::with_spare_bits(capacity, fp_rate, 0).unwrap();
            filled(&mut filter, 1, capacity);
            assert!((filter.fp_rate_estimate() - fp_rate).abs() < 0.01 * fp_rate);
            assert_within_20_percent(
                measured_fp_rate(&filter, QUERIES),
                fp_rate,
                &format!("{capacity} entries (near {size}) at {fp_rate}"),
            );
        }
    }
}

#[test]
fn fp_rate_meets_the_configured_rate_at_any_capacity() {
    for capacity in [10_000, 100_000, 1_000_000] {
        for fp_rate in [0.01, 0.001] {
            let mut filter = QuotientFilter::with_spare_bits(capacity, fp_rate, 0).unwrap();
            filled(&mut filter, 2, capacity);
            let estimate = filter.fp_rate_estimate();
            assert!(estimate <= fp_rate && estimate > fp_rate / 2.0);
            assert_within_20_percent(
                measured_fp_rate(&filter, QUERIES),
                estimate,
                &format!("{capacity} entries at {fp_rate}, no spare bits"),
            );
        }
    }
}

/// Half full, half the rate: the rate follows the number of entries, not the load factor.
#[test]
fn fp_rate_falls_with_the_number_of_entries() {
    let capacity = design_capacity(200_000, 0.01);
    let mut filter = QuotientFilter::with_spare_bits(capacity, 0.01, 0).unwrap();
    filled(&mut filter, 3, capacity / 2);
    assert_within_20_percent(measured_fp_rate(&filter, QUERIES), 0.005, "half full");
}

/// Filters from `new` have fingerprints for the default merge target, so their own rate is far
/// below the configured one; the estimate still predicts it.
#[test]
fn new_filters_have_the_estimated_rate() {
    let mut filter = QuotientFilter::new(1_000_000, 0.5).unwrap();
    filled(&mut filter, 4, 1_000_000);
    let estimate = filter.fp_rate_estimate();
    assert!(estimate < 0.5 / 32.0);
    assert_within_20_percent(measured_fp_rate(&filter, QUERIES), estimate, "new(1M, 0.5)");
}

/// Merged filters have the rate their width gives them, also past their spare bits.
#[test]
fn merged_filters_have_the_estimated_rate() {
    let fp_rate = 0.01;
    let halves: Vec<QuotientFilter> = (0..2)
        .map(|namespace| {
            let mut filter = QuotientFilter::with_spare_bits(300_000, fp_rate, 0).unwrap();
            filled(&mut filter, 10 + namespace, 300_000);
            filter
        })
        .collect();
    let merged = QuotientFilter::merge(&[&halves[0], &halves[1]], fp_rate).unwrap();
    let estimate = merged.fp_rate_estimate();
    assert!(
        estimate > fp_rate,
        "no spare bits: the merge doubles the rate"
    );
    assert_within_20_percent(measured_fp_rate(&merged, QUERIES), estimate, "merged");
}
