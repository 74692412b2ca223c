//! Encoding: round trips, and damage is always an error, never a panic.

#![allow(clippy::unwrap_used)]

mod common;

use common::{filled, key_hashes};
use proptest::prelude::*;
use stitch_filter::{FilterError, FilterParams, QuotientFilter, FILTER_HEADER_LEN};

fn sample_filter(len: u64) -> QuotientFilter {
    let mut filter = QuotientFilter::with_spare_bits(len, 0.01, 2).unwrap();
    filled(&mut filter, 1, len);
    filter
}

/// Replaces the trailing CRC with the right one for the (changed) bytes before it.
fn fix_crc(bytes: &mut [u8]) {
    let body = bytes.len() - 4;
    let crc = crc32c::crc32c(&bytes[..body]);
    bytes[body..].copy_from_slice(&crc.to_le_bytes());
}

#[test]
fn encode_decode_round_trips() {
    let merged =
        QuotientFilter::merge(&[&sample_filter(3_000), &sample_filter(500)], 0.01).unwrap();
    let narrow = {
        let params = FilterParams::with_fingerprint_bits(100, 0.5, 5).unwrap();
        let mut filter = QuotientFilter::with_params(params).unwrap();
        filled(&mut filter, 2, 100);
        filter
    };
    for filter in [
        QuotientFilter::new(0, 0.5).unwrap(),
        QuotientFilter::new(1_000, 0.01).unwrap(),
        sample_filter(1),
        sample_filter(10_000),
        merged,
        narrow,
    ] {
        let bytes = filter.encode();
        let decoded = QuotientFilter::decode(&bytes).unwrap();
        assert_eq!(decoded, filter);
        assert_eq!(decoded.encode(), bytes);
    }
}

#[test]
fn decoded_filters_keep_working() {
    let mut filter = QuotientFilter::with_spare_bits(2_500, 0.01, 2).unwrap();
    filled(&mut filter, 1, 2_000);
    let mut decoded = QuotientFilter::decode(&filter.encode()).unwrap();
    let more = key_hashes(9, 0..500);
    for &hash in &more {
        decoded.insert(hash).unwrap();
    }
    assert!(key_hashes(1, 0..2_000)
        .iter()
        .chain(&more)
        .all(|&h| decoded.contains(h)));
}

#[test]
fn every_flipped_byte_is_an_error() {
    let bytes = sample_filter(300).encode();
    for index in 0..bytes.len() {
        for flip in [0x01, 0x80, 0xff] {
            let mut damaged = bytes.clone();
            damaged[index] ^= flip;
            assert!(
                QuotientFilter::decode(&damaged).is_err(),
                "flipping byte {index} with {flip:#x} went unnoticed"
            );
        }
    }
}

#[test]
fn every_truncation_and_extension_is_an_error() {
    let bytes = sample_filter(300).encode();
    for len in 0..bytes.len() {
        assert!(
            QuotientFilter::decode(&bytes[..len]).is_err(),
            "truncated to {len}"
        );
    }
    let mut longer = bytes.clone();
    longer.extend_from_slice(&[0; 8]);
    assert!(QuotientFilter::decode(&longer).is_err());
    fix_crc(&mut longer);
    assert!(QuotientFilter::decode(&longer).is_err());
}

#[test]
fn errors_name_the_damage() {
    let bytes = sample_filter(100).encode();
    assert!(matches!(
        QuotientFilter::decode(&bytes[..10]),
        Err(FilterError::TooShort { .. })
    ));
    let mut bad_magic = bytes.clone();
    bad_magic[0] = b'X';
    assert_eq!(
        QuotientFilter::decode(&bad_magic),
        Err(FilterError::BadMagic)
    );
    let mut future = bytes.clone();
    future[8] = 2;
    assert_eq!(
        QuotientFilter::decode(&future),
        Err(FilterError::UnsupportedVersion(2))
    );
    let mut damaged = bytes.clone();
    damaged[FILTER_HEADER_LEN + 3] ^= 4;
    assert!(matches!(
        QuotientFilter::decode(&damaged),
        Err(FilterError::ChecksumMismatch { .. })
    ));
    // A header that contradicts itself, with a valid checksum.
    let mut inconsistent = bytes.clone();
    inconsistent[40] ^= 0x40; // the slot count
    fix_crc(&mut inconsistent);
    assert!(matches!(
        QuotientFilter::decode(&inconsistent),
        Err(FilterError::Corrupt(_))
    ));
}

/// Structural damage behind a valid checksum is caught by the canonical-layout check.
#[test]
fn damaged_tables_with_valid_checksums_are_rejected() {
    let filter = sample_filter(300);
    let bytes = filter.encode();
    let mut rejected = 0;
    for index in FILTER_HEADER_LEN..bytes.len() - 4 {
        let mut damaged = bytes.clone();
        damaged[index] ^= 0x10;
        fix_crc(&mut damaged);
        match QuotientFilter::decode(&damaged) {
            Err(FilterError::Corrupt(_)) => rejected += 1,
            Err(other) => panic!("unexpected error {other}"),
            // A changed remainder can still be a valid table, of other fingerprints.
            Ok(decoded) => assert_eq!(decoded.len(), filter.len()),
        }
    }
    assert!(rejected > 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn decode_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = QuotientFilter::decode(&bytes);
    }

    /// Random bytes behind a valid header and checksum reach the layout check; whatever
    /// decodes must be usable.
    #[test]
    fn decode_never_panics_on_garbage_tables(
        edits in prop::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        header_edits in any::<bool>(),
    ) {
        let mut bytes = sample_filter(150).encode();
        let (start, end) = if header_edits { (8, bytes.len() - 4) } else { (FILTER_HEADER_LEN, bytes.len() - 4) };
        for (index, value) in edits {
            bytes[start + index % (end - start)] = value;
        }
        fix_crc(&mut bytes);
        if let Ok(mut filter) = QuotientFilter::decode(&bytes) {
            for hash in key_hashes(5, 0..200) {
                let _ = filter.contains(hash);
                let _ = filter.insert(hash);
            }
            prop_assert_eq!(QuotientFilter::decode(&filter.encode()).unwrap(), filter.clone());
            let _ = QuotientFilter::merge(&[&filter, &sample_filter(10)], 0.01).unwrap();
        }
    }
}
