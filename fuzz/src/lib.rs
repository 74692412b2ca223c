//! StitchDB's fuzz targets as plain functions over bytes.
//!
//! One target per decoder of a stored format, one for the Redis protocol's request parser
//! (`resp`), and a model target that runs operations decoded
//! from the bytes against a [`stitchdb::Db`] on the simulated disk and against a `BTreeMap`.
//! A target returns normally for any input it handles correctly, whether the bytes decode or
//! not; it panics only on a bug (a decoder that panics, an accepted value that does not
//! re-encode to itself, a store that disagrees with the model).
//!
//! Where a format carries a checksum, a target decodes the input twice: as it is, and with
//! its checksums made to match (`checksums_fixed`), since a random change almost never passes
//! a CRC and the parsing behind it would otherwise go unfuzzed. The fix-ups follow the layouts
//! in `docs/format.md`.
//!
//! Two drivers call them: the libFuzzer binaries in `fuzz_targets/` (`cargo fuzz run <target>`)
//! and the stable runner in `tests/stable.rs`, which CI runs over the committed seed corpus in
//! `corpus/<target>/` plus a few seconds of random and mutated inputs.

mod model;
mod resp;

pub use model::model;
pub use resp::resp;

mod checksums;

use checksums::{fixed_extent, fixed_filter, fixed_record, fixed_segment, fixed_superblock};
use stitch_filter::{is_bloom, BloomFilter, QuotientFilter};
use stitch_wal::{decode_record, SegmentHeader, SEGMENT_HEADER_LEN};

/// A fuzz target.
pub type Target = fn(&[u8]);

/// Every target, by name (the name of its libFuzzer binary and of its corpus folder).
pub const TARGETS: [(&str, Target); 13] = [
    ("superblock", superblock),
    ("extent", extent),
    ("manifest", manifest),
    ("run_block", run_block),
    ("run_index", run_index),
    ("btree_node", btree_node),
    ("large_reference", large_reference),
    ("filter", filter),
    ("bloom", bloom),
    ("log_record", log_record),
    ("log_segment", log_segment),
    ("model", model),
    ("resp", resp),
];

/// A superblock slot (stitch-zone).
pub fn superblock(data: &[u8]) {
    let _ = stitch_zone::fuzzing::decode_superblock(data);
    let _ = stitch_zone::fuzzing::decode_superblock(&fixed_superblock(data));
}

/// An extent as a read checks it, behind the address and kind the reader expects
/// (stitch-zone).
pub fn extent(data: &[u8]) {
    let _ = stitch_zone::fuzzing::decode_extent(data);
    let _ = stitch_zone::fuzzing::decode_extent(&fixed_extent(data));
}

/// A checkpoint's manifest (stitchdb).
pub fn manifest(data: &[u8]) {
    let _ = stitchdb::fuzzing::decode_manifest(data);
}

/// A sorted run's data block of any version, behind its index handle's entry count and
/// first key (stitchdb).
pub fn run_block(data: &[u8]) {
    let _ = stitchdb::fuzzing::decode_run_block(data);
}

/// One extent of a sorted run's index (stitchdb).
pub fn run_index(data: &[u8]) {
    let _ = stitchdb::fuzzing::decode_run_index(data);
}

/// A copy-on-write B+tree node (stitchdb, extent kind 6).
pub fn btree_node(data: &[u8]) {
    let _ = stitchdb::fuzzing::decode_btree_node(data);
}

/// A large value's reference (stitchdb), its checksum appended by the decoder.
pub fn large_reference(data: &[u8]) {
    let _ = stitchdb::fuzzing::decode_large_reference(data);
}

/// A quotient filter (stitch-filter). One it accepts is queried, merged with itself, and must
/// re-encode to bytes that decode to a filter of the same contents.
pub fn filter(data: &[u8]) {
    decode_filter(data);
    decode_filter(&fixed_filter(data));
}

fn decode_filter(data: &[u8]) {
    let Ok(filter) = QuotientFilter::decode(data) else {
        return;
    };
    for key in [&b""[..], b"a", b"key-001", data] {
        let _ = filter.contains_key(key);
    }
    let again = QuotientFilter::decode(&filter.encode());
    assert_eq!(
        again.as_ref().map(|f| (f.params(), f.len())),
        Ok((filter.params(), filter.len())),
        "a decoded filter re-encodes to itself"
    );
    let _ = QuotientFilter::merge(&[&filter, &filter], filter.fp_rate());
}

/// A Bloom filter (stitch-filter), the other kind a run filter extent can hold. One it accepts
/// must carry the Bloom magic, re-encode to the very bytes it came from (the decoder accepts
/// only what the encoder writes), answer lookups, and find a key inserted into it.
pub fn bloom(data: &[u8]) {
    decode_bloom(data);
    decode_bloom(&fixed_filter(data));
}

fn decode_bloom(data: &[u8]) {
    let Ok(mut filter) = BloomFilter::decode(data) else {
        return;
    };
    assert!(is_bloom(data), "a decoded Bloom filter has the Bloom magic");
    assert!(
        filter.encode() == data,
        "a decoded Bloom filter re-encodes to its bytes"
    );
    for key in [&b""[..], b"a", b"key-001", data] {
        let _ = filter.contains_key(key);
    }
    let _ = filter.fp_rate_estimate();
    filter.insert_key(data);
    assert!(filter.contains_key(data), "an inserted key is found");
}

/// One log record (stitch-wal): the input is the epoch and the expected LSN (8 bytes each,
/// little-endian), then the bytes where the record should start.
pub fn log_record(data: &[u8]) {
    let (Some(epoch), Some(lsn)) = (u64_at(data, 0), u64_at(data, 8)) else {
        return;
    };
    let bytes = &data[16..];
    decode_one_record(bytes, epoch, lsn);
    let mut fixed = bytes.to_vec();
    fixed_record(&mut fixed, epoch);
    decode_one_record(&fixed, epoch, lsn);
}

fn decode_one_record(bytes: &[u8], epoch: u64, lsn: u64) {
    if let Ok((record, used)) = decode_record(bytes, epoch, lsn) {
        assert_eq!(
            used,
            record.encoded_len(),
            "a record takes its encoded length"
        );
        assert!(used <= bytes.len(), "a record lies within its bytes");
        assert_eq!(record.lsn, lsn, "a record decodes only at its own LSN");
    }
}

/// The start of a log segment (stitch-wal): its header, then records read one after another
/// as the log reader does, until one does not decode.
pub fn log_segment(data: &[u8]) {
    decode_segment(data);
    decode_segment(&fixed_segment(data));
}

fn decode_segment(data: &[u8]) {
    let Ok(header) = SegmentHeader::decode(data) else {
        return;
    };
    assert_eq!(
        SegmentHeader::decode(&header.encode()),
        Ok(header),
        "a segment header re-encodes to itself"
    );
    let (mut at, mut lsn) = (SEGMENT_HEADER_LEN, header.first_lsn);
    while let Ok((_, used)) = decode_record(&data[at..], header.epoch, lsn) {
        at += used;
        lsn = lsn.wrapping_add(1);
    }
}

pub(crate) fn u64_at(data: &[u8], at: usize) -> Option<u64> {
    let bytes = data.get(at..at + 8)?;
    let mut word = [0; 8];
    word.copy_from_slice(bytes);
    Some(u64::from_le_bytes(word))
}
