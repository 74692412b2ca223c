//! Large values: model tests against a `BTreeMap` (puts, byte-range writes and reads,
//! deletes, checkpoints and reopens), crashes during large writes, transactions and
//! snapshots holding chunks, bad input, and damage.

#![allow(clippy::unwrap_used)]

mod support;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use stitchdb::{
    max_large_value_len, Db, Disk, Durability, Error, Isolation, MemDisk, Options, SimDisk,
};
use support::{env_count, table_contents, CrashingDisk};

/// 1 MiB zones (128 KiB chunks), no background work.
fn options() -> Options {
    Options {
        zone_size: 1 << 20,
        memtable_size: 256 * 1024,
        background: false,
        durability: Durability::Sync,
        ..Options::default()
    }
}

/// Where values turn large with 1 MiB zones: the longest value a record holds there.
const THRESHOLD: usize = (1 << 20) / 4 - 4096;

fn bytes(rng: &mut impl Rng, len: usize) -> Vec<u8> {
    let seed: u8 = rng.gen();
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

/// A value length around or far above the threshold, or small.
fn value_len(rng: &mut impl Rng) -> usize {
    match rng.gen_range(0..4) {
        0 => rng.gen_range(0..200),
        1 => THRESHOLD - 2 + rng.gen_range(0..4),
        2 => rng.gen_range(THRESHOLD..3 * THRESHOLD),
        _ => rng.gen_range(1..9) << 20,
    }
}

fn model_range(v: &[u8], offset: u64, len: u64) -> Vec<u8> {
    let start = (offset as usize).min(v.len());
    let end = (offset.saturating_add(len) as usize).min(v.len());
    v[start..end].to_vec()
}

/// Frees what nothing references any more: a merge drops shadowed versions, and two
/// checkpoints' sweeps give back their chunks.
fn settle(db: &Db) {
    db.compact().unwrap();
    db.flush().unwrap();
    db.flush().unwrap();
}

#[test]
fn random_large_writes_and_range_reads_match_a_model() {
    let ops = env_count("STITCHDB_LARGE_OPS", 1500u64);
    for seed in 0..env_count("STITCHDB_LARGE_SEEDS", 2u64) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
        let mut db = Db::create_on(disk.clone(), options()).unwrap();
        let t = db.default_table();
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for op in 0..ops {
            let key = format!("k{:02}", rng.gen_range(0..24)).into_bytes();
            let what = format!("seed {seed} op {op}");
            match rng.gen_range(0..100) {
                0..=24 => {
                    let len = value_len(&mut rng);
                    let v = bytes(&mut rng, len);
                    if rng.gen_bool(0.5) {
                        db.put(t, &key, &v).unwrap();
                    } else {
                        db.put_from(t, &key, &v[..], v.len() as u64).unwrap();
                    }
                    model.insert(key, v);
                }
                25..=44 => {
                    let cur = model.get(&key).map_or(0, Vec::len) as u64;
                    let offset = rng.gen_range(0..cur + 1 + (1 << 18));
                    let len = rng.gen_range(0..300_000);
                    let data = bytes(&mut rng, len);
                    db.put_range(t, &key, offset, &data).unwrap();
                    let v = model.entry(key).or_default();
                    let end = offset as usize + data.len();
                    if v.len() < end {
                        v.resize(end, 0);
                    }
                    v[offset as usize..end].copy_from_slice(&data);
                }
                45..=69 => {
                    let cur = model.get(&key).map_or(0, Vec::len) as u64;
                    let offset = rng.gen_range(0..cur + 10);
                    let len = rng.gen_range(0..200_000);
                    let got = db.get_range(t, &key, offset, len).unwrap();
                    let want = model.get(&key).map(|v| model_range(v, offset, len));
                    assert_eq!(got, want, "{what}: range {offset}+{len}");
                }
                70..=79 => {
                    db.delete(t, &key).unwrap();
                    model.remove(&key);
                }
                80..=89 => {
                    assert_eq!(db.get(t, &key).unwrap().as_ref(), model.get(&key), "{what}");
                    let len = db.value_len(t, &key).unwrap();
                    assert_eq!(len, model.get(&key).map(|v| v.len() as u64), "{what}");
                }
                90..=94 => db.flush().unwrap(),
                _ => {
                    db.close().unwrap();
                    db = Db::open_on(disk.clone(), options()).unwrap();
                }
            }
        }
        assert_eq!(table_contents(&db, t), model, "seed {seed}: scan");
        db.check().unwrap();
        for key in model.keys() {
            db.delete(t, key).unwrap();
        }
        settle(&db);
        assert_eq!(db.large_value_bytes(), 0, "seed {seed}: chunks left");
        db.close().unwrap();
        let db = Db::open_on(disk, options()).unwrap();
        assert_eq!(
            db.large_value_bytes(),
            0,
            "seed {seed}: chunks after reopen"
        );
    }
}

#[test]
fn a_value_reader_streams_a_large_value() {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap();
    let t = db.default_table();
    let v = bytes(&mut ChaCha8Rng::seed_from_u64(1), 3 << 20);
    db.put_from(t, b"big", &v[..], v.len() as u64).unwrap();
    let mut reader = db.value_reader(t, b"big").unwrap().unwrap();
    assert_eq!(reader.len(), v.len() as u64);
    let mut out = Vec::new();
    std::io::copy(&mut reader, &mut out).unwrap();
    assert_eq!(out, v);
    assert!(db.value_reader(t, b"none").unwrap().is_none());
}

#[test]
fn bad_input_is_refused_and_writes_nothing() {
    let opts = Options {
        zone_size: 64 * 1024,
        ..options()
    };
    let db = Db::create_on(Arc::new(MemDisk::new(0)), opts).unwrap();
    let t = db.default_table();
    let limit = max_large_value_len(64 * 1024);
    let r = db.put_from(t, b"k", std::io::repeat(7), limit + 1);
    assert!(matches!(r, Err(Error::TooLarge { .. })), "{r:?}");
    assert_eq!(db.large_value_bytes(), 0);
    // A source shorter than it says.
    let r = db.put_from(t, b"k", &[1u8; 300_000][..], 400_000);
    assert!(matches!(r, Err(Error::LargeValue(_))), "{r:?}");
    assert_eq!(db.large_value_bytes(), 0);
    assert_eq!(db.get(t, b"k").unwrap(), None);
    assert_eq!(db.get_range(t, b"k", 0, 10).unwrap(), None);
    // The limit itself is taken (on the default zones it is 4 GiB).
    assert_eq!(max_large_value_len(8 << 20), 4 << 30);
    db.put_from(t, b"k", std::io::repeat(7), limit).unwrap();
    assert_eq!(db.value_len(t, b"k").unwrap(), Some(limit));
    assert_eq!(
        db.get_range(t, b"k", limit - 2, 10).unwrap(),
        Some(vec![7, 7])
    );
    assert_eq!(db.get_range(t, b"k", limit, 10).unwrap(), Some(vec![]));
    assert_eq!(db.get_range(t, b"k", u64::MAX, 10).unwrap(), Some(vec![]));
    let r = db.put_range(t, b"k", limit, b"x");
    assert!(matches!(r, Err(Error::TooLarge { .. })), "{r:?}");
}

#[test]
fn an_aborted_transaction_gives_its_chunks_back_and_a_committed_one_keeps_them() {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap();
    let t = db.default_table();
    let v = vec![5u8; 1 << 20];
    for isolation in [Isolation::Snapshot, Isolation::Serializable] {
        let mut txn = db.begin(isolation).unwrap();
        txn.put(t, b"a", &v).unwrap();
        txn.put_range(t, b"a", 10, b"xyz").unwrap();
        assert_eq!(
            txn.get_range(t, b"a", 9, 5).unwrap(),
            Some(vec![5, b'x', b'y', b'z', 5])
        );
        assert!(db.large_value_bytes() > 0);
        txn.abort();
        assert_eq!(db.large_value_bytes(), 0, "{isolation:?}");
        assert_eq!(db.get(t, b"a").unwrap(), None);
    }
    let mut txn = db.begin(Isolation::Snapshot).unwrap();
    txn.put(t, b"a", &v).unwrap();
    txn.commit().unwrap();
    settle(&db);
    assert_eq!(db.get(t, b"a").unwrap(), Some(v.clone()));
    assert!(db.large_value_bytes() >= v.len() as u64);
    // Two transactions changing the same large value: the second to commit fails.
    let mut one = db.begin(Isolation::Snapshot).unwrap();
    let mut two = db.begin(Isolation::Snapshot).unwrap();
    one.put_range(t, b"a", 0, b"1").unwrap();
    two.put_range(t, b"a", 1, b"2").unwrap();
    one.commit().unwrap();
    assert!(matches!(two.commit(), Err(Error::Conflict { .. })));
    assert_eq!(db.get_range(t, b"a", 0, 3).unwrap(), Some(vec![b'1', 5, 5]));
}

#[test]
fn a_named_snapshot_keeps_the_chunks_it_can_read() {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap();
    let t = db.default_table();
    let old = vec![1u8; 2 << 20];
    db.put(t, b"a", &old).unwrap();
    db.snapshot("before").unwrap();
    db.put_range(t, b"a", 0, &vec![2u8; 1 << 20]).unwrap();
    db.delete(t, b"b").unwrap();
    settle(&db);
    let before = db.large_value_bytes();
    let snap = db.open_snapshot("before").unwrap();
    assert_eq!(snap.get(t, b"a").unwrap(), Some(old.clone()));
    assert_eq!(
        snap.get_range(t, b"a", (2 << 20) - 1, 5).unwrap(),
        Some(vec![1])
    );
    let scanned: Vec<_> = snap
        .range(t, std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(scanned, vec![(b"a".to_vec(), old)]);
    drop(snap);
    db.drop_snapshot("before").unwrap();
    settle(&db);
    assert!(
        db.large_value_bytes() < before,
        "the snapshot's own chunks are freed"
    );
    assert_eq!(db.get_range(t, b"a", 0, 1).unwrap(), Some(vec![2]));
}

#[test]
fn check_names_a_flipped_byte_in_a_large_value_and_reads_refuse_it() {
    let disk = Arc::new(MemDisk::new(0));
    let db = Db::create_on(disk.clone(), options()).unwrap();
    let t = db.default_table();
    db.put(t, b"a", vec![9u8; 1 << 20]).unwrap();
    db.flush().unwrap();
    db.close().unwrap();
    // The chunks are the only long runs of 9s on the disk.
    let len = disk.len();
    let mut buf = vec![0u8; len as usize];
    disk.read_at(0, &mut buf).unwrap();
    let at = buf
        .windows(4096)
        .position(|w| w.iter().all(|&b| b == 9))
        .unwrap()
        + 1000;
    disk.write_at(at as u64, &[8]).unwrap();
    let db = Db::open_on(disk, options()).unwrap();
    let e = match db.get(t, b"a") {
        Err(e) => e,
        Ok(v) => panic!("read {:?} bytes, flipped at {at}", v.map(|v| v.len())),
    };
    assert!(e.to_string().contains("large value chunk"), "{e}");
    let e = db.check().unwrap_err();
    assert!(e.to_string().contains("large value chunk"), "{e}");
    assert!(e.to_string().contains("key [97]"), "{e}");
}

#[test]
fn repair_drops_a_damaged_large_value_and_keeps_the_rest() {
    let disk = Arc::new(MemDisk::new(0));
    let db = Db::create_on(disk.clone(), options()).unwrap();
    let t = db.default_table();
    db.put(t, b"a", vec![9u8; 1 << 20]).unwrap();
    let b: Vec<u8> = (0..(1u32 << 20)).map(|i| (i % 7) as u8).collect();
    db.put(t, b"b", &b).unwrap();
    db.put(t, b"c", b"small").unwrap();
    db.snapshot("s").unwrap();
    db.close().unwrap();
    let mut buf = vec![0u8; disk.len() as usize];
    disk.read_at(0, &mut buf).unwrap();
    let at = buf
        .windows(4096)
        .position(|w| w.iter().all(|&b| b == 9))
        .unwrap()
        + 1000;
    disk.write_at(at as u64, &[8]).unwrap();
    let fresh: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    let report = Db::repair_on(disk, fresh.clone(), options()).unwrap();
    let damage: Vec<String> = report
        .salvage
        .damage
        .iter()
        .map(|d| d.to_string())
        .collect();
    assert!(
        damage.iter().any(|d| d.contains("large value chunk")),
        "{damage:?}"
    );
    assert!(
        report.salvage.lost.iter().any(|l| l.table == "default"),
        "{report:?}"
    );
    let db = Db::open_on(fresh, options()).unwrap();
    db.check().unwrap();
    assert_eq!(db.get(t, b"a").unwrap(), None);
    assert_eq!(db.get(t, b"b").unwrap(), Some(b.clone()));
    assert_eq!(db.get(t, b"c").unwrap(), Some(b"small".to_vec()));
    let snap = db.open_snapshot("s").unwrap();
    assert_eq!(snap.get(t, b"a").unwrap(), None);
    assert_eq!(snap.get(t, b"b").unwrap(), Some(b));
}

#[test]
fn a_transaction_that_spills_commits_its_large_values_and_leaves_no_reference_behind() {
    let opts = Options {
        txn_memory: 4096,
        ..options()
    };
    let db = Db::create_on(Arc::new(MemDisk::new(0)), opts).unwrap();
    let t = db.default_table();
    db.put(t, b"k0", vec![1u8; 500_000]).unwrap();
    db.put(t, b"k1", vec![1u8; 500_000]).unwrap();
    let mut txn = db.begin(Isolation::Snapshot).unwrap();
    for i in 0..200u32 {
        txn.put(t, format!("s{i:03}"), vec![b's'; 100]).unwrap();
    }
    txn.put(t, b"k0", b"inline now").unwrap();
    txn.delete_range(t, b"k1", b"k2").unwrap();
    txn.put(t, b"k2", vec![2u8; 400_000]).unwrap();
    assert_eq!(txn.get(t, b"k1").unwrap(), None);
    txn.commit().unwrap();
    assert_eq!(db.get(t, b"k0").unwrap(), Some(b"inline now".to_vec()));
    assert_eq!(db.get(t, b"k1").unwrap(), None);
    assert_eq!(db.get(t, b"k2").unwrap(), Some(vec![2u8; 400_000]));
    settle(&db);
    // k2's four chunks, nothing of k0's and k1's.
    assert_eq!(db.large_value_bytes(), 400_000 + 4 * 16);
}

#[test]
fn a_transaction_scan_reads_its_own_and_committed_large_values() {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap();
    let t = db.default_table();
    let committed = vec![3u8; 600_000];
    db.put(t, b"a", &committed).unwrap();
    let mut txn = db.begin(Isolation::Serializable).unwrap();
    let own = vec![4u8; 700_000];
    txn.put(t, b"b", &own).unwrap();
    txn.put(t, b"c", b"inline").unwrap();
    txn.put_range(t, b"a", 599_999, b"xy").unwrap();
    let mut a = committed.clone();
    a[599_999] = b'x';
    a.push(b'y');
    let got: Vec<_> = txn
        .range(t, std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    let want = vec![
        (b"a".to_vec(), a.clone()),
        (b"b".to_vec(), own.clone()),
        (b"c".to_vec(), b"inline".to_vec()),
    ];
    assert_eq!(got, want);
    // Replaced by an inline value in the same transaction: no reference is left behind.
    txn.put(t, b"b", b"short").unwrap();
    assert_eq!(txn.get(t, b"b").unwrap(), Some(b"short".to_vec()));
    txn.commit().unwrap();
    assert_eq!(db.get(t, b"a").unwrap(), Some(a));
    assert_eq!(db.get(t, b"b").unwrap(), Some(b"short".to_vec()));
    settle(&db);
    // Only `a`'s chunks are left: 600,001 bytes in five chunks, each with its header.
    assert_eq!(db.large_value_bytes(), 600_001 + 5 * 16);
}

/// One random large write for the crash workload: a whole value or a range of one.
fn crash_write(db: &Db, rng: &mut ChaCha8Rng, model: &mut BTreeMap<Vec<u8>, Vec<u8>>) {
    let t = db.default_table();
    let key = format!("k{}", rng.gen_range(0..3)).into_bytes();
    if rng.gen_bool(0.5) || !model.contains_key(&key) {
        let len = rng.gen_range(THRESHOLD + 1..(3 << 20));
        let v = bytes(rng, len);
        db.put(t, &key, &v).unwrap();
        model.insert(key, v);
    } else {
        let v = model.get_mut(&key).unwrap();
        let offset = rng.gen_range(0..v.len() as u64 + 1000);
        let len = rng.gen_range(1..400_000);
        let data = bytes(rng, len);
        db.put_range(t, &key, offset, &data).unwrap();
        let end = offset as usize + data.len();
        if v.len() < end {
            v.resize(end, 0);
        }
        v[offset as usize..end].copy_from_slice(&data);
    }
}

#[test]
fn a_crash_during_large_writes_leaves_the_old_value_or_the_new_one() {
    let seeds = env_count("STITCHDB_LARGE_CRASH_SEEDS", 4u64);
    let mut images = 0;
    for seed in 0..seeds {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let disk = CrashingDisk::new(seed);
        let db = Db::create_on(disk.clone(), options()).unwrap();
        *disk.probability.lock() = 1.0;
        let mut states = vec![BTreeMap::new()];
        let mut model = BTreeMap::new();
        for i in 1..=12u64 {
            disk.issued.store(i, Ordering::SeqCst);
            crash_write(&db, &mut rng, &mut model);
            disk.acked.store(i, Ordering::SeqCst);
            states.push(model.clone());
            if i % 4 == 0 {
                db.flush().unwrap();
            }
        }
        *disk.probability.lock() = 0.0;
        drop(db);
        for (image, acked, issued) in disk.images.lock().drain(..) {
            images += 1;
            let image: Arc<SimDisk> = Arc::new(image);
            let db = Db::open_on(image.clone(), options()).unwrap();
            let got = table_contents(&db, db.default_table());
            let matched = (acked..=issued).find(|&n| states[n as usize] == got);
            assert!(
                matched.is_some(),
                "seed {seed}: image acked {acked} issued {issued}"
            );
            db.check().unwrap();
            // Nothing leaked: with every key deleted and its versions merged away, no chunk
            // is held, in this session or the next.
            for key in got.keys() {
                db.delete(db.default_table(), key).unwrap();
            }
            settle(&db);
            assert_eq!(db.large_value_bytes(), 0, "seed {seed}");
            db.close().unwrap();
            let db = Db::open_on(image, options()).unwrap();
            assert_eq!(db.large_value_bytes(), 0, "seed {seed}: after reopen");
            let live: u64 = db.stats().zones.zone_live.iter().map(|(_, b)| b).sum();
            assert!(
                live < 1 << 20,
                "seed {seed}: {live} bytes live with no large value"
            );
        }
    }
    // An image at every write, sync and punch: crashes land inside each large write.
    assert!(images >= 100 * seeds, "{images} crash images");
}
