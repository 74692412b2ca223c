//! The seed corpus (`corpus/<target>/seed-*`) is what the formats' encoders write: this test
//! fails if a committed seed differs from what the encoders write now (a format change), and
//! with `STITCHDB_FUZZ_WRITE_SEEDS=1` it writes them instead. Every seed is also accepted by
//! its decoder, so the fuzzing starts from inputs that get past the checksums.

#![allow(clippy::unwrap_used)]

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::PathBuf;
use stitch_filter::{BloomFilter, QuotientFilter};
use stitch_wal::{encode_record, Flags, LogRecord, SegmentHeader, WAL_FORMAT_VERSION};
use stitch_zone::{ExtentAddr, ExtentKind, Superblock, EXTENT_HEADER_LEN};

/// Every seed: its target, its name, its bytes.
fn seeds() -> Vec<(&'static str, String, Vec<u8>)> {
    let mut seeds = Vec::new();
    let mut add = |target: &'static str, name: &str, bytes: Vec<u8>| {
        seeds.push((target, name.to_string(), bytes));
    };

    let root = ExtentAddr {
        zone: 2,
        offset: 4096,
        len: 300,
    };
    for (name, root) in [("root", Some(root)), ("no-root", None)] {
        let superblock = Superblock {
            seq: 5,
            zone_size: 8 << 20,
            block_size: 4096,
            root,
        };
        add(
            "superblock",
            name,
            stitch_zone::fuzzing::encode_superblock(&superblock),
        );
    }

    let payload = b"an extent's payload".repeat(3);
    let addr = ExtentAddr {
        len: (EXTENT_HEADER_LEN + payload.len()) as u32,
        ..root
    };
    let extent = stitch_zone::fuzzing::encode_extent(addr, ExtentKind::RUN_INDEX, &payload);
    add("extent", "run-index", extent);

    for (target, name, bytes) in stitchdb::fuzzing::sample_inputs() {
        add(target, name, bytes);
    }

    let mut filter = QuotientFilter::new(200, 0.01).unwrap();
    for i in 0..150 {
        filter.insert_key(format!("key-{i:03}").as_bytes()).unwrap();
    }
    add("filter", "150-keys", filter.encode());
    add(
        "filter",
        "empty",
        QuotientFilter::new(10, 0.1).unwrap().encode(),
    );

    let mut bloom = BloomFilter::new(200, 10).unwrap();
    for i in 0..150 {
        bloom.insert_key(format!("key-{i:03}").as_bytes());
    }
    add("bloom", "150-keys", bloom.encode());
    add("bloom", "empty", BloomFilter::new(10, 4).unwrap().encode());

    let (epoch, first_lsn) = (3u64, 100u64);
    let records: Vec<LogRecord> = (0..4)
        .map(|i| LogRecord {
            lsn: first_lsn + i,
            txn: 7 + i / 2,
            op: 1,
            flags: if i % 2 == 1 {
                Flags::COMMIT
            } else {
                Flags::NONE
            },
            payload: vec![i as u8; 10 * i as usize],
        })
        .collect();
    let mut record = Vec::new();
    record.extend_from_slice(&epoch.to_le_bytes());
    record.extend_from_slice(&first_lsn.to_le_bytes());
    record.extend_from_slice(&encode_record(epoch, &records[1]));
    // The record at LSN 101, where the reader expects LSN 100: rejected, as a stale record is.
    add("log_record", "unexpected-lsn", record);
    let mut record = Vec::new();
    record.extend_from_slice(&epoch.to_le_bytes());
    record.extend_from_slice(&first_lsn.to_le_bytes());
    record.extend_from_slice(&encode_record(epoch, &records[0]));
    add("log_record", "first", record);

    let header = SegmentHeader {
        version: WAL_FORMAT_VERSION,
        epoch,
        seq: 0,
        first_lsn,
        next_zone: 9,
    };
    let mut segment = header.encode().to_vec();
    for r in &records {
        segment.extend_from_slice(&encode_record(epoch, r));
    }
    add("log_segment", "four-records", segment);

    // Operations are bytes, so random inputs of a few lengths cover every kind of them.
    let mut rng = ChaCha8Rng::seed_from_u64(18);
    for len in [16, 200, 1000, 3000] {
        let ops: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        add("model", &format!("random-{len}"), ops);
    }

    // A client's bytes after the byte that says how they arrive (bit 7: authenticated;
    // bits 0-6: the longest read).
    let requests: [(&str, u8, &[u8]); 4] = [
        (
            "pipeline",
            0x87,
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\nGET k\r\n*1\r\n$4\r\nPING\r\n\
              set a \"b\\x41\\n\" 'c\\'d'\r\n\r\n*0\r\n*-1\r\nPING\n",
        ),
        (
            "unauthenticated",
            0x03,
            b"*2\r\n$4\r\nAUTH\r\n$6\r\nsecret\r\n*11\r\n",
        ),
        (
            "bad-bulk-length",
            0x82,
            b"PING\r\n*2\r\n$4\r\nECHO\r\n$-1\r\n",
        ),
        (
            "binary-byte-by-byte",
            0x81,
            b"*2\r\n$4\r\nECHO\r\n$4\r\n\x00\xff\r\n\r\n",
        ),
    ];
    for (name, how, bytes) in requests {
        let mut input = vec![how];
        input.extend_from_slice(bytes);
        add("resp", name, input);
    }
    seeds
}

#[test]
fn the_committed_corpus_holds_what_the_encoders_write() {
    let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let write = std::env::var_os("STITCHDB_FUZZ_WRITE_SEEDS").is_some();
    for (target, name, bytes) in seeds() {
        let path = corpus.join(target).join(format!("seed-{name}"));
        if write {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &bytes).unwrap();
        } else {
            let committed = std::fs::read(&path)
                .unwrap_or_else(|e| panic!("{}: {e} (write the seeds again)", path.display()));
            assert!(
                committed == bytes,
                "{} differs from what the encoders write",
                path.display()
            );
        }
    }
}

#[test]
fn every_seed_is_accepted_by_its_decoder() {
    for (target, name, bytes) in seeds() {
        let accepted = match target {
            "superblock" => matches!(stitch_zone::fuzzing::decode_superblock(&bytes), Ok(Some(_))),
            "extent" => stitch_zone::fuzzing::decode_extent(&bytes).is_ok(),
            "manifest" => stitchdb::fuzzing::decode_manifest(&bytes).is_ok(),
            "run_block" => stitchdb::fuzzing::decode_run_block(&bytes).is_ok(),
            "run_index" => stitchdb::fuzzing::decode_run_index(&bytes).is_ok(),
            "btree_node" => stitchdb::fuzzing::decode_btree_node(&bytes).is_ok(),
            "large_reference" => stitchdb::fuzzing::decode_large_reference(&bytes).is_ok(),
            "filter" => QuotientFilter::decode(&bytes).is_ok(),
            "bloom" => BloomFilter::decode(&bytes).is_ok(),
            "log_record" => {
                let lsn = u64::from_le_bytes(bytes[8..16].try_into().unwrap());
                let decoded = stitch_wal::decode_record(&bytes[16..], 3, lsn);
                decoded.is_ok() == (name == "first")
            }
            "log_segment" => SegmentHeader::decode(&bytes).is_ok(),
            "resp" => {
                let mut parser = stitchdb_redis::resp::parse::Parser::default();
                stitchdb_fuzz::resp(&bytes);
                matches!(
                    parser.parse(&bytes[1..], true).1,
                    stitchdb_redis::resp::parse::Parsed::Request(_)
                )
            }
            _ => {
                // The model target checks itself; it must simply run.
                stitchdb_fuzz::model(&bytes);
                true
            }
        };
        assert!(accepted, "{target} seed {name}");
    }
}
