//! Every decoder of the page store's formats refuses damaged input with an error, never a
//! panic: random bytes, and valid encodings with bytes flipped, overwritten, cut or grown.
//! `STITCH_PAGE_DECODER_CASES` sets the cases per decoder (default 20,000).

#![allow(clippy::unwrap_used)]

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use stitch_page::change::{
    decode_changes, decode_compensation, encode_changes, Images, PageChange,
};
use stitch_page::checkpoint::{Checkpoint, UndoEntry};
use stitch_page::hash::bucket::{self, Bucket};
use stitch_page::page::{self, BODY_LEN, PAGE_SIZE};
use stitch_wal::LogPosition;
use stitch_zone::ExtentAddr;

fn cases() -> usize {
    std::env::var("STITCH_PAGE_DECODER_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000)
}

fn mutate(rng: &mut ChaCha8Rng, valid: &[u8]) -> Vec<u8> {
    let mut bytes = valid.to_vec();
    match rng.gen_range(0..5) {
        0 => {
            return (0..rng.gen_range(0..PAGE_SIZE + 64))
                .map(|_| rng.gen())
                .collect()
        }
        1 => bytes.truncate(rng.gen_range(0..=bytes.len())),
        2 => bytes.extend((0..rng.gen_range(1..64)).map(|_| rng.gen::<u8>())),
        _ => {}
    }
    for _ in 0..rng.gen_range(1..4) {
        if bytes.is_empty() {
            break;
        }
        let at = rng.gen_range(0..bytes.len());
        bytes[at] = if rng.gen_bool(0.5) {
            bytes[at] ^ (1 << rng.gen_range(0..8))
        } else {
            rng.gen()
        };
    }
    bytes
}

fn fuzz(valid: Vec<u8>, decode: impl Fn(&[u8])) {
    let mut rng = ChaCha8Rng::seed_from_u64(valid.len() as u64);
    decode(&valid);
    for _ in 0..cases() {
        decode(&mutate(&mut rng, &valid));
    }
}

fn bucket_body() -> Vec<u8> {
    Bucket {
        next: 9,
        entries: vec![(b"key".to_vec(), b"value".to_vec()), (vec![], vec![7; 300])],
    }
    .encode()
}

#[test]
fn page_images() {
    let mut image = vec![0u8; PAGE_SIZE];
    page::seal(3, 77, &bucket_body(), &mut image);
    fuzz(image, |b| {
        if b.len() == PAGE_SIZE {
            let _ = page::open(3, 0, b);
        }
    });
}

#[test]
fn bucket_bodies() {
    fuzz(bucket_body(), |b| {
        let mut body = b.to_vec();
        body.resize(BODY_LEN, 0);
        let _ = Bucket::decode(&body);
        let _ = bucket::lookup(&body, b"key");
    });
}

#[test]
fn log_payloads() {
    let old = vec![0u8; BODY_LEN];
    let mut new = old.clone();
    new[10..20].fill(1);
    new[900] = 2;
    let mut changes = PageChange::between(4, &old, &new, false);
    changes.extend(PageChange::between(5, &old, &new, true));
    let mut payload = 42u64.to_le_bytes().to_vec();
    encode_changes(&changes, Images::Both, &mut payload);
    fuzz(payload, |b| {
        let _ = decode_changes(b, Images::Both);
        let _ = decode_changes(b, Images::After);
        let _ = decode_compensation(b);
    });
}

#[test]
fn checkpoint_records() {
    let cp = Checkpoint {
        epoch: 3,
        log_start: LogPosition {
            zone: 2,
            offset: 64,
            lsn: 100,
        },
        zones: vec![1, 4, 5],
        pending: vec![UndoEntry {
            txn: 8,
            lsn: 90,
            op: 40,
            payload: vec![1, 2, 3],
        }],
    };
    let chunk = ExtentAddr {
        zone: 6,
        offset: 32,
        len: 64,
    };
    fuzz(cp.encode(&[chunk]), |b| {
        let _ = Checkpoint::decode(b);
    });
}
