//! Prints, for several sizes and rates, what a quotient filter costs and delivers: bits per
//! entry, measured false-positive rate, and insert / lookup / merge / decode throughput.
//!
//! Run in release mode: `cargo run --release -p stitch-filter --example filter_stats`
//! (add `-- --quick` to skip the 10-million-entry filters).

#![allow(clippy::unwrap_used)]

use std::hint::black_box;
use std::time::Instant;

use stitch_filter::{hash_key, QuotientFilter};

const FP_QUERIES: u64 = 1_000_000;

fn hashes(namespace: u32, count: u64) -> Vec<u64> {
    (0..count)
        .map(|id| {
            let mut key = [0u8; 12];
            key[..4].copy_from_slice(&namespace.to_le_bytes());
            key[4..].copy_from_slice(&id.to_le_bytes());
            hash_key(&key)
        })
        .collect()
}

/// Nanoseconds per item of `f` over `items` items.
fn ns_per(items: usize, f: impl FnOnce()) -> f64 {
    let start = Instant::now();
    f();
    start.elapsed().as_nanos() as f64 / items.max(1) as f64
}

/// How the filters of a row are built.
#[derive(Clone, Copy)]
enum Build {
    /// `QuotientFilter::new`: fingerprints for merges up to `DEFAULT_MERGE_TARGET` entries.
    New,
    /// The narrowest fingerprints that meet the rate at capacity.
    NoSpareBits,
}

impl Build {
    fn name(self) -> &'static str {
        match self {
            Build::New => "new",
            Build::NoSpareBits => "no spare",
        }
    }

    fn make(self, capacity: u64, fp_rate: f64) -> QuotientFilter {
        match self {
            Build::New => QuotientFilter::new(capacity, fp_rate),
            Build::NoSpareBits => QuotientFilter::with_spare_bits(capacity, fp_rate, 0),
        }
        .expect("valid parameters")
    }
}

fn filled(build: Build, fp_rate: f64, hashes: &[u64]) -> QuotientFilter {
    let mut filter = build.make(hashes.len() as u64, fp_rate);
    for &hash in hashes {
        filter.insert(hash).expect("sized for these keys");
    }
    filter
}

fn main() {
    let quick = std::env::args().any(|arg| arg == "--quick");
    let sizes: &[u64] = if quick {
        &[10_000, 100_000, 1_000_000]
    } else {
        &[10_000, 100_000, 1_000_000, 10_000_000]
    };
    let absent = hashes(u32::MAX, FP_QUERIES);
    println!(
        "{:>10} {:>6} {:<9} {:>3} {:>3} {:>5} {:>9} {:>10} {:>10} {:>8} {:>8} {:>8} {:>9} {:>9} {:>8}",
        "entries", "rate", "build", "p", "r", "load", "bits/ent", "fp meas", "fp est",
        "ins ns", "hit ns", "miss ns", "merge2 ns", "merge8 ns", "dec ns"
    );
    for &size in sizes {
        for fp_rate in [0.01, 0.001] {
            for build in [Build::New, Build::NoSpareBits] {
                let present = hashes(1, size);
                let mut filter = build.make(size, fp_rate);
                let insert_ns = ns_per(present.len(), || {
                    for &hash in &present {
                        filter.insert(hash).unwrap();
                    }
                });
                let lookups = present.len().min(FP_QUERIES as usize);
                let hit_ns = ns_per(lookups, || {
                    for &hash in &present[..lookups] {
                        assert!(black_box(filter.contains(hash)));
                    }
                });
                let mut false_positives = 0u64;
                let miss_ns = ns_per(absent.len(), || {
                    for &hash in &absent {
                        false_positives += u64::from(black_box(filter.contains(hash)));
                    }
                });

                // Merges of 2 and of 8 filters that add up to `size` entries.
                let halves: Vec<QuotientFilter> = present
                    .chunks(present.len().div_ceil(2))
                    .map(|part| filled(build, fp_rate, part))
                    .collect();
                let eighths: Vec<QuotientFilter> = present
                    .chunks(present.len().div_ceil(8))
                    .map(|part| filled(build, fp_rate, part))
                    .collect();
                let merge_ns = |inputs: &[QuotientFilter]| {
                    let refs: Vec<&QuotientFilter> = inputs.iter().collect();
                    ns_per(present.len(), || {
                        black_box(QuotientFilter::merge(&refs, fp_rate).unwrap());
                    })
                };
                let (merge2_ns, merge8_ns) = (merge_ns(&halves), merge_ns(&eighths));

                let bytes = filter.encode();
                let decode_ns = ns_per(present.len(), || {
                    black_box(QuotientFilter::decode(&bytes).unwrap());
                });

                println!(
                    "{:>10} {:>6} {:<9} {:>3} {:>3} {:>5.3} {:>9.2} {:>10.6} {:>10.6} {:>8.1} {:>8.1} {:>8.1} {:>9.1} {:>9.1} {:>8.1}",
                    size,
                    fp_rate,
                    build.name(),
                    filter.fingerprint_bits(),
                    filter.remainder_bits(),
                    filter.load_factor(),
                    filter.bits_per_entry(),
                    false_positives as f64 / absent.len() as f64,
                    filter.fp_rate_estimate(),
                    insert_ns,
                    hit_ns,
                    miss_ns,
                    merge2_ns,
                    merge8_ns,
                    decode_ns,
                );
            }
        }
    }
    println!(
        "\nns columns are per entry (insert, merge, decode) or per lookup (hit: present keys, \
         miss: {FP_QUERIES} absent keys, which also give the measured fp rate)."
    );
}
