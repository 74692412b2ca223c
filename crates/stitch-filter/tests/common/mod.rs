//! Shared helpers: deterministic key sets and false-positive measurement.
#![allow(dead_code)] // Each test binary uses a different subset.

use stitch_filter::{hash_key, QuotientFilter};

/// Hashes of the keys `(namespace, id)` for `ids`: distinct namespaces give disjoint key sets.
pub fn key_hashes(namespace: u32, ids: impl IntoIterator<Item = u64>) -> Vec<u64> {
    ids.into_iter()
        .map(|id| hash_key(&key(namespace, id)))
        .collect()
}

pub fn key(namespace: u32, id: u64) -> [u8; 12] {
    let mut key = [0; 12];
    key[..4].copy_from_slice(&namespace.to_le_bytes());
    key[4..].copy_from_slice(&id.to_le_bytes());
    key
}

/// The namespace of keys that no test inserts.
pub const ABSENT: u32 = u32::MAX;

/// The fraction of `queries` absent keys the filter claims to hold.
pub fn measured_fp_rate(filter: &QuotientFilter, queries: u64) -> f64 {
    let hits = (0..queries)
        .filter(|&id| filter.contains_key(&key(ABSENT, id)))
        .count();
    hits as f64 / queries as f64
}

/// A full filter of `len` keys from `namespace`.
pub fn filled(filter: &mut QuotientFilter, namespace: u32, len: u64) {
    for hash in key_hashes(namespace, 0..len) {
        filter.insert(hash).expect("the filter has room");
    }
}
