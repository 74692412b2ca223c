//! The decoders of the stored formats as plain functions over bytes, for the fuzz targets
//! (`fuzz/`). Each returns an error for bytes it rejects and must never panic, whatever the
//! bytes; what it accepts it also walks, as a reader would, so the accessors of the decoded
//! value are fuzzed too. Not part of the stable API.

use crate::codec::Reader;
use crate::manifest::Manifest;
use crate::run::{decode_chunk, Block, Framing};
use crate::{Error, Result};

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
    for i in 0..block.len() {
        let entry = block.entry(i);
        let _ = block.seek(entry.key);
        let _ = block.get(entry.key, entry.seq);
    }
    let _ = block.memory();
    Ok(())
}

/// Decodes one extent of a run's index (either version's chunk).
pub fn decode_run_index(bytes: &[u8]) -> Result<()> {
    let mut handles = Vec::new();
    decode_chunk(bytes, &mut handles).map_err(|d| Error::corrupt("run index", PLACE, d))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    type Decoder = fn(&[u8]) -> Result<()>;
    const DECODERS: [(&str, Decoder); 3] = [
        ("manifest", decode_manifest),
        ("run block", decode_run_block),
        ("run index", decode_run_index),
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

    /// A well-formed input for each decoder, written by the formats' own encoders.
    fn well_formed() -> [(&'static str, Decoder, Vec<u8>); 6] {
        use crate::batch::TableId;
        use crate::codec::{put_bytes, put_varint};
        use crate::entry::{Entry, EntryRef};
        use crate::manifest::{LogStart, SnapshotMeta, TableMeta};
        use crate::options::Stitching;
        use crate::run::{
            counted_payload, elided_payload, encode_chunks, whole_keys_payload, BlockHandle,
            BlockWriter,
        };
        use stitch_zone::{ExtentAddr, EXTENT_HEADER_LEN};

        let table = TableMeta {
            id: TableId(0),
            name: "default".into(),
            stitching: Stitching::default(),
            runs: Vec::new(),
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

        let entries: Vec<Entry> = [&b"apple"[..], b"apricot", b"banana"]
            .into_iter()
            .enumerate()
            .map(|(i, key)| Entry {
                key: key.to_vec(),
                seq: 10 - i as u64,
                value: (i != 1).then(|| b"value".to_vec()),
            })
            .collect();
        // Every block version behind the handle's entry count and first key.
        let behind_handle = |payload: &[u8]| {
            let mut input = Vec::new();
            put_varint(&mut input, entries.len() as u64);
            put_bytes(&mut input, &entries[0].key);
            input.extend_from_slice(payload);
            input
        };
        let mut writer = BlockWriter::default();
        for e in &entries {
            writer.add(EntryRef {
                key: &e.key,
                seq: e.seq,
                value: e.value.as_deref(),
            });
        }
        let block = behind_handle(&writer.finish().framed()[EXTENT_HEADER_LEN..]);
        let block_v1 = behind_handle(&whole_keys_payload(&entries));
        let block_v2 = behind_handle(&counted_payload(&entries));
        let block_v3 = behind_handle(&elided_payload(&entries));

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

        [
            ("manifest", decode_manifest as Decoder, manifest),
            ("run block", decode_run_block, block),
            ("run block version 1", decode_run_block, block_v1),
            ("run block version 2", decode_run_block, block_v2),
            ("run block version 3", decode_run_block, block_v3),
            ("run index", decode_run_index, index),
        ]
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
