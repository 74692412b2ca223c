//! The decoders of the stored formats as plain functions over bytes, for the fuzz targets
//! (`fuzz/`). Each returns an error for bytes it rejects and must never panic, whatever the
//! bytes; what it accepts it also walks, as a reader would, so the accessors of the decoded
//! value are fuzzed too. Not part of the stable API.

use crate::batch::TableId;
use crate::codec::{put_bytes, put_varint, Reader};
use crate::db::{Chunk, Reference};
use crate::entry::{EntryRef, RangeDeletes};
use crate::layout::cowbtree::node::{self, Body, Node, Slot};
use crate::layout::vtree::run::{
    decode_chunk, encode_chunks, Block, BlockHandle, BlockWriter, FilterPart, Framing, RunMeta,
    SpecialWriter,
};
use crate::layout::{BlockFormat, CodingSpec, FormatSpec};
use crate::manifest::{LogStart, Manifest, SnapshotMeta, TableMeta};
use crate::options::Stitching;
use crate::{Error, Result};
use std::sync::Arc;
use stitch_zone::ExtentAddr;

/// Where the bytes came from, for error messages.
const PLACE: &str = "fuzz input";

/// Decodes a manifest extent's payload.
pub fn decode_manifest(bytes: &[u8]) -> Result<()> {
    let manifest = Manifest::decode(bytes).map_err(|d| Error::corrupt("manifest", PLACE, d))?;
    // Re-encoding what was accepted must work too (checkpoints write it back).
    let _ = manifest.encode();
    Ok(())
}

/// Decodes a run's data block of any version. A block is read through its index handle,
/// which supplies what version 3 does not store, so the input starts with that: the entry
/// count (varint) and the first key (varint length, bytes); the block's payload follows.
pub fn decode_run_block(bytes: &[u8]) -> Result<()> {
    let mut r = Reader::new(bytes);
    let framing = (|| -> std::result::Result<Framing, String> {
        let entries = r.varint()?;
        let first_key = r.bytes()?;
        Ok(Framing { first_key, entries })
    })()
    .map_err(|d| Error::corrupt("run block handle", PLACE, d))?;
    let payload = bytes[r.pos()..].to_vec();
    let block =
        Block::parse_at(payload, 0, framing).map_err(|d| Error::corrupt("run block", PLACE, d))?;
    // A block that parses and agrees with its handle is one a raw lookup reads the same: a
    // difference is a bug.
    let agrees = block.len() > 0 && block.entry(0).key == framing.first_key;
    for i in 0..block.len() {
        let entry = block.entry(i);
        let _ = block.seek(entry.key);
        let _ = block.get(entry.key, entry.seq);
        let found = Block::find(&bytes[r.pos()..], 0, framing, entry.key, entry.seq);
        if !agrees {
            continue;
        }
        match found {
            Ok(Some(found)) => assert_eq!(found, block.found(entry.key, entry.seq)),
            Ok(None) => {}
            Err(d) => panic!("a raw lookup fails in a block that parses: {d}"),
        }
    }
    let _ = block.memory();
    Ok(())
}

/// Decodes one extent of a run's index (either version's chunk).
pub fn decode_run_index(bytes: &[u8]) -> Result<()> {
    let mut handles = Vec::new();
    decode_chunk(bytes, &mut handles).map_err(|d| Error::corrupt("run index", PLACE, d))
}

/// Decodes a B+tree node's payload (`cow-btree` tables, extent kind 6).
pub fn decode_btree_node(bytes: &[u8]) -> Result<()> {
    node::decode(bytes)
        .map(|_| ())
        .map_err(|d| Error::corrupt("B+tree node", PLACE, d))
}

/// Decodes a large value's reference (`db/large`, the hidden table's value). `bytes` is the
/// reference without its trailing checksum, which is appended here: a fuzzer would rarely get
/// past a checksum to the checks behind it (version, counts, the chunks against the length).
pub fn decode_large_reference(bytes: &[u8]) -> Result<()> {
    let mut framed = bytes.to_vec();
    framed.extend_from_slice(&crc32c::crc32c(bytes).to_le_bytes());
    Reference::decode(&framed, PLACE).map(|_| ())
}

/// A well-formed input of each decoder, as the formats' encoders write it, by the name of its
/// fuzz target: `manifest`, `run_block` (the current block version), `run_index`,
/// `btree_node` (a leaf and an interior node) and `large_reference` (a value of two chunks,
/// without its checksum). The fuzz targets' seed corpus.
pub fn sample_inputs() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let at = |zone: u32, offset: u32| ExtentAddr {
        zone,
        offset,
        len: 200,
    };
    // A run with two index extents, their mirrors and a filter.
    let run = RunMeta {
        id: 2,
        level: 1,
        entries: 12,
        data_bytes: 300,
        min_seq: 1,
        max_seq: 6,
        index: vec![at(3, 8192), at(3, 8400)],
        index_mirror: vec![at(4, 0), at(4, 208)],
        blocks_together: true,
        filters: vec![FilterPart {
            blocks: 3,
            addr: at(3, 4096),
        }],
        ranges: Vec::new(),
        seq_override: None,
    };
    let table = TableMeta {
        id: TableId(0),
        name: "default".into(),
        stitching: Stitching::default(),
        layout: "managed -> exception -> fixed(size=8) -> linear".into(),
        runs: vec![run],
        root: None,
    };
    let manifest = Manifest {
        checkpoint_lsn: 7,
        log: LogStart {
            zone: 1,
            offset: 4096,
            lsn: 8,
            epoch: 2,
        },
        next_table_id: 1,
        next_run_id: 3,
        tables: vec![table.clone()],
        snapshots: vec![SnapshotMeta {
            name: "s".into(),
            seq: 5,
            tables: vec![table],
        }],
    }
    .encode();

    let entries = sample_entries();
    let mut writer = BlockWriter::default();
    for e in &entries {
        writer.add(*e);
    }
    let block = behind_handle(&entries, writer.finish().payload());

    let handles: Vec<BlockHandle> = (0..3u32)
        .map(|i| BlockHandle {
            first_key: format!("k{i}a").into_bytes(),
            last_key: format!("k{i}z").into_bytes(),
            entries: 4,
            addr: ExtentAddr {
                zone: 1,
                offset: 4096 * i,
                len: 4000,
            },
        })
        .collect();
    let index = encode_chunks(&handles, 1 << 20).remove(0);
    let mut inputs = vec![
        ("manifest", "encoder", manifest),
        ("run_block", "encoder", block),
        ("run_index", "encoder", index),
        ("run_block", "sliding-window", sliding_window_block()),
    ];
    // A block of each specialized format: 8-byte keys, 4-byte values from a few (small
    // integers but for every ninth) and a few state codes, every tenth version above the
    // horizon (its versions section).
    let keyed: Vec<(Vec<u8>, u64, Vec<u8>)> = (0..40u64)
        .map(|k| (1000 + k + k / 7).to_be_bytes().to_vec())
        .enumerate()
        .map(|(i, key)| {
            let value = match i % 9 {
                8 => (70_000 + i as u32).to_le_bytes().to_vec(),
                5 => b"MA".to_vec(),
                _ => (17 + i as u32 % 3).to_le_bytes().to_vec(),
            };
            (key, 100 + i as u64 % 10, value)
        })
        .collect();
    let small = |delta, format| BlockFormat {
        existential: false,
        delta,
        coding: Some(CodingSpec::SmallInteger { bytes: 1 }),
        format,
    };
    for (name, format) in [
        ("fixed", BlockFormat::plain(FormatSpec::Fixed { size: 4 })),
        ("array", BlockFormat::plain(FormatSpec::Array { size: 4 })),
        (
            "unique-string",
            BlockFormat::plain(FormatSpec::UniqueString { max: 8, len: 16 }),
        ),
        (
            "small-integer-fixed",
            small(false, FormatSpec::Fixed { size: 1 }),
        ),
        (
            "small-integer-array",
            small(false, FormatSpec::Array { size: 1 }),
        ),
        (
            "delta-integer-fixed",
            small(true, FormatSpec::Fixed { size: 1 }),
        ),
        (
            "delta-integer-array",
            small(true, FormatSpec::Array { size: 1 }),
        ),
        (
            "state-dictionary",
            BlockFormat {
                existential: false,
                delta: false,
                coding: Some(CodingSpec::StateDictionary),
                format: FormatSpec::Array { size: 1 },
            },
        ),
    ] {
        // Every entry fits one block: 40 keys close together, 8 distinct values.
        let versions = keyed.iter().map(|(key, seq, value)| EntryRef {
            key,
            seq: *seq,
            value: Some(value),
        });
        inputs.push(("run_block", name, special_block(format, versions)));
    }
    // An `empty` block: the keys alone, and a value it rejects in its versions section.
    let versions = keyed.iter().enumerate().map(|(i, (key, seq, _))| EntryRef {
        key,
        seq: *seq,
        value: Some(if i % 9 == 8 { &b"not empty"[..] } else { b"" }),
    });
    let empty = special_block(BlockFormat::plain(FormatSpec::Empty), versions);
    inputs.push(("run_block", "empty", empty));
    // `existential` blocks: every third version a tombstone, kept as a key alone.
    for (name, format) in [
        ("existential-fixed", FormatSpec::Fixed { size: 4 }),
        ("existential-array", FormatSpec::Array { size: 4 }),
    ] {
        let format = BlockFormat {
            existential: true,
            ..BlockFormat::plain(format)
        };
        let versions = keyed
            .iter()
            .enumerate()
            .map(|(i, (key, seq, value))| EntryRef {
                key,
                seq: *seq,
                value: (i % 3 != 1).then_some(value.as_slice()),
            });
        inputs.push(("run_block", name, special_block(format, versions)));
    }
    // The `fixed` blocks above, of 8-byte keys, hold them as one array (version 10); one key
    // a byte longer keeps this one's sharing prefixes (version 5).
    let keys: Vec<Vec<u8>> = keyed
        .iter()
        .enumerate()
        .map(|(i, (key, _, _))| match i {
            20 => [key.as_slice(), &[0]].concat(),
            _ => key.clone(),
        })
        .collect();
    let versions = keyed
        .iter()
        .zip(&keys)
        .map(|((_, seq, value), key)| EntryRef {
            key,
            seq: *seq,
            value: Some(value),
        });
    let format = BlockFormat::plain(FormatSpec::Fixed { size: 4 });
    inputs.push((
        "run_block",
        "fixed-several-widths",
        special_block(format, versions),
    ));
    // A leaf with a value and a tombstone, and an interior node over two written leaves.
    let slot = |key: &str, seq: u64, value: Option<&str>| Slot {
        key: key.as_bytes().into(),
        seq,
        value: value.map(|v| v.as_bytes().into()),
    };
    let leaf = Node::new(Body::Leaf(vec![
        slot("a", 3, Some("one")),
        slot("b", 4, None),
    ]));
    let children: Vec<Arc<Node>> = (0..2u32)
        .map(|i| {
            let child = Arc::new(Node::empty_leaf());
            child.set_addr(ExtentAddr {
                zone: 5,
                offset: 4096 * i,
                len: 64,
            });
            child
        })
        .collect();
    let interior = Node::new(Body::Interior {
        keys: vec![b"m".as_slice().into()],
        children,
    });
    for (name, node) in [("leaf", leaf), ("interior", interior)] {
        if let Some(bytes) = node.encode() {
            inputs.push(("btree_node", name, bytes));
        }
    }
    // 1,500 bytes in chunks of 1,024: a whole chunk and one of 476 bytes, each extent with its
    // 16-byte header.
    let chunk = |offset: u32, payload: u32, crc: u32| Chunk {
        addr: ExtentAddr {
            zone: 6,
            offset,
            len: payload + 16,
        },
        crc,
    };
    let mut reference = Reference {
        len: 1500,
        chunk_len: 1024,
        chunks: vec![chunk(0, 1024, 0x1234_5678), chunk(1040, 476, 0x9abc_def0)],
    }
    .encode();
    reference.truncate(reference.len() - 4);
    inputs.push(("large_reference", "two-chunks", reference));
    inputs
}

/// A `sliding-window` block (version 9) of 24 keys, a tombstone every fifth, values of a
/// few that repeat and some that do not; a window of 4 values, so some repeats are out of
/// its reach and stored whole again.
fn sliding_window_block() -> Vec<u8> {
    let versions: Vec<(Vec<u8>, Option<Vec<u8>>)> = (0..24u32)
        .map(|i| {
            let value = match i % 5 {
                4 => None,
                3 => Some(format!("distinct value {i}").into_bytes()),
                n => Some(format!("popular value {}", n * i % 7).into_bytes()),
            };
            (format!("key{i:02}").into_bytes(), value)
        })
        .collect();
    let entries: Vec<EntryRef> = versions
        .iter()
        .map(|(key, value)| EntryRef {
            key,
            seq: 50,
            value: value.as_deref(),
        })
        .collect();
    let mut writer = BlockWriter::with_window(Some(4));
    for e in &entries {
        writer.add(*e);
    }
    behind_handle(&entries, writer.finish().payload())
}

/// Three versions of keys, one a tombstone, in block order.
fn sample_entries() -> [EntryRef<'static>; 3] {
    [
        EntryRef {
            key: b"apple",
            seq: 10,
            value: Some(b"value"),
        },
        EntryRef {
            key: b"apricot",
            seq: 9,
            value: None,
        },
        EntryRef {
            key: b"banana",
            seq: 8,
            value: Some(b"value"),
        },
    ]
}

/// [`decode_run_block`]'s input for a block of `entries` with `payload`: the index handle's
/// entry count and first key, then the payload.
fn behind_handle(entries: &[EntryRef], payload: &[u8]) -> Vec<u8> {
    let first_key = entries.first().map_or(&[][..], |e| e.key);
    framed(entries.len() as u64, first_key, payload)
}

/// `decode_run_block`'s input: the handle's entry count and first key, then the payload.
fn framed(entries: u64, first_key: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut input = Vec::new();
    put_varint(&mut input, entries);
    put_bytes(&mut input, first_key);
    input.extend_from_slice(payload);
    input
}

/// `versions` written as one block of `format` (horizon 108: later versions go to its
/// versions section; a version the block does not take is left out), behind its handle.
fn special_block<'a>(format: BlockFormat, versions: impl Iterator<Item = EntryRef<'a>>) -> Vec<u8> {
    let mut writer = SpecialWriter::new(format, 108, RangeDeletes::default());
    for version in versions {
        let _fits = writer.add(version);
    }
    let block = writer.finish();
    framed(block.entries, &block.first_key, block.payload())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    type Decoder = fn(&[u8]) -> Result<()>;
    const DECODERS: [(&str, Decoder); 5] = [
        ("manifest", decode_manifest),
        ("run block", decode_run_block),
        ("run index", decode_run_index),
        ("B+tree node", decode_btree_node),
        ("large value reference", decode_large_reference),
    ];

    #[test]
    fn every_decoder_rejects_garbage_without_panicking() {
        for (name, decode) in DECODERS {
            assert!(decode(&[]).is_err(), "{name}: empty input");
            assert!(decode(&[0xff; 64]).is_err(), "{name}: all ones");
        }
        let mut rng = ChaCha8Rng::seed_from_u64(18);
        for _ in 0..20_000 {
            let len = rng.gen_range(0..200);
            let bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            for (_, decode) in DECODERS {
                let _ = decode(&bytes);
            }
        }
    }

    /// A well-formed input for each decoder (blocks of every version).
    fn well_formed() -> Vec<(String, Decoder, Vec<u8>)> {
        use crate::entry::Entry;
        use crate::layout::vtree::run::{counted_payload, elided_payload, whole_keys_payload};

        let mut inputs: Vec<(String, Decoder, Vec<u8>)> = sample_inputs()
            .into_iter()
            .map(|(target, name, bytes)| {
                let decode = match target {
                    "manifest" => decode_manifest as Decoder,
                    "run_block" => decode_run_block,
                    "btree_node" => decode_btree_node,
                    "large_reference" => decode_large_reference,
                    _ => decode_run_index,
                };
                (format!("{target} {name}"), decode, bytes)
            })
            .collect();
        let entries: Vec<Entry> = sample_entries()
            .iter()
            .map(|e| Entry {
                key: e.key.to_vec(),
                seq: e.seq,
                value: e.value.map(<[u8]>::to_vec),
            })
            .collect();
        let v1 = behind_handle(&sample_entries(), &whole_keys_payload(&entries));
        let v2 = behind_handle(&sample_entries(), &counted_payload(&entries));
        inputs.push(("run block version 1".into(), decode_run_block, v1));
        inputs.push(("run block version 2".into(), decode_run_block, v2));
        let v3 = behind_handle(&sample_entries(), &elided_payload(&entries));
        inputs.push(("run block version 3".into(), decode_run_block, v3));
        inputs
    }

    #[test]
    fn the_decoders_accept_what_the_encoders_write_and_reject_its_damage() {
        for (name, decode, bytes) in well_formed() {
            decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
            for len in 0..bytes.len() {
                assert!(decode(&bytes[..len]).is_err(), "{name} cut to {len} bytes");
            }
            for at in 0..bytes.len() {
                for flip in [0x01, 0x80, 0xff] {
                    let mut damaged = bytes.clone();
                    damaged[at] ^= flip;
                    let _ = decode(&damaged);
                }
            }
        }
    }
}
