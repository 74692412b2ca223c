//! The Bloom filter against the quotient filter at 1,000,000 keys: memory per key, measured
//! false-positive rate, and the time of a lookup for an absent key. The figures are printed;
//! what is asserted is the rates and the sizes, never the timings.
//!
//! Run in release mode:
//! `cargo test --release -p stitch-filter --test bloom_vs_quotient -- --ignored --nocapture`

#![allow(clippy::unwrap_used)]

mod common;

use std::hint::black_box;
use std::time::Instant;

use common::{key_hashes, ABSENT};
use stitch_filter::{BloomFilter, QuotientFilter};

const KEYS: u64 = 1_000_000;
const QUERIES: u64 = 1_000_000;

/// What one filter costs and delivers.
struct Figures {
    bits_per_key: f64,
    fp_rate: f64,
    ns_per_lookup: f64,
}

/// Measures `contains` over the absent hashes: the fraction that hit, and the best of three
/// timed passes (the first also warms the caches).
fn measure(
    name: &str,
    memory_bytes: usize,
    estimate: f64,
    absent: &[u64],
    contains: impl Fn(u64) -> bool,
) -> Figures {
    let hits = absent.iter().filter(|&&hash| contains(hash)).count();
    let best = (0..3)
        .map(|_| {
            let start = Instant::now();
            let hits = absent.iter().filter(|&&h| contains(black_box(h))).count();
            black_box(hits);
            start.elapsed().as_nanos() as f64 / absent.len() as f64
        })
        .fold(f64::INFINITY, f64::min);
    let figures = Figures {
        bits_per_key: memory_bytes as f64 * 8.0 / KEYS as f64,
        fp_rate: hits as f64 / absent.len() as f64,
        ns_per_lookup: best,
    };
    println!(
        "{name:<40} {:>6.2} bits/key  fp {:.5} (estimate {estimate:.5})  {:>6.1} ns/contains (absent)",
        figures.bits_per_key, figures.fp_rate, figures.ns_per_lookup
    );
    figures
}

#[test]
#[ignore = "a measurement: run in release mode with --ignored --nocapture"]
fn bloom_against_quotient_at_a_million_keys() {
    let present = key_hashes(1, 0..KEYS);
    let absent = key_hashes(ABSENT, 0..QUERIES);

    let mut bloom = BloomFilter::new(KEYS, 10).unwrap();
    // About the size of the narrowest quotient filter below, to compare rates at one size.
    let mut bloom_11 = BloomFilter::new(KEYS, 11).unwrap();
    // A quotient filter from `new`, as runs build them (fingerprints sized for merges up to
    // 2^26 entries), and the narrowest one that meets 1% at a million keys.
    let mut merged_width = QuotientFilter::new(KEYS, 0.01).unwrap();
    let mut narrowest = QuotientFilter::with_merge_target(KEYS, 0.01, 0).unwrap();
    for &hash in &present {
        bloom.insert(hash);
        bloom_11.insert(hash);
        merged_width.insert(hash).unwrap();
        narrowest.insert(hash).unwrap();
    }
    assert!(present
        .iter()
        .all(|&h| bloom.contains(h) && merged_width.contains(h) && narrowest.contains(h)));

    let b = measure(
        "Bloom, 10 bits/key, 7 probes",
        bloom.memory_bytes(),
        bloom.fp_rate_estimate(),
        &absent,
        |h| bloom.contains(h),
    );
    let b11 = measure(
        "Bloom, 11 bits/key, 8 probes",
        bloom_11.memory_bytes(),
        bloom_11.fp_rate_estimate(),
        &absent,
        |h| bloom_11.contains(h),
    );
    let q = measure(
        &format!("quotient 1% new (p = {})", merged_width.fingerprint_bits()),
        merged_width.memory_bytes(),
        merged_width.fp_rate_estimate(),
        &absent,
        |h| merged_width.contains(h),
    );
    let n = measure(
        &format!(
            "quotient 1% no spare bits (p = {})",
            narrowest.fingerprint_bits()
        ),
        narrowest.memory_bytes(),
        narrowest.fp_rate_estimate(),
        &absent,
        |h| narrowest.contains(h),
    );

    assert!(b.fp_rate < 0.015, "Bloom: {}", b.fp_rate);
    assert!((b.fp_rate - bloom.fp_rate_estimate()).abs() < 0.1 * bloom.fp_rate_estimate());
    assert!(q.fp_rate < 0.001 && n.fp_rate < 0.012);
    // The Bloom filter is the smaller: about 10 bits a key against about 11 for the narrowest
    // quotient filter at 1% and about 18 for one whose fingerprints survive merges.
    assert!(
        b.bits_per_key < 10.1 && b.bits_per_key < n.bits_per_key && n.bits_per_key < q.bits_per_key
    );
    // At about the same size, the Bloom filter has the lower rate.
    assert!(b11.bits_per_key < n.bits_per_key && b11.fp_rate < n.fp_rate);
    black_box((
        b11.ns_per_lookup,
        b.ns_per_lookup,
        q.ns_per_lookup,
        n.ns_per_lookup,
    ));
}
