//! The linear hash against a `BTreeMap` model: thousands of random puts, deletes and gets
//! in several interleaved transactions that commit or abort, on a small buffer pool (so
//! uncommitted pages are stolen), checked at every read and at the end, then reopened.
//! `STITCH_PAGE_MODEL_SEEDS` (3) and `STITCH_PAGE_MODEL_OPS` (6,000 per seed) make it longer.

#![allow(clippy::unwrap_used)]

mod common;

use common::{contents, create, open, sim};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use stitch_io::Disk;
use stitch_page::PageError;

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(rng: &mut ChaCha8Rng, keys: u32) -> Vec<u8> {
    format!("key-{:05}", rng.gen_range(0..keys)).into_bytes()
}

fn value(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let len = match rng.gen_range(0..10) {
        0 => rng.gen_range(500..2000),
        1 => 0,
        _ => rng.gen_range(1..120),
    };
    (0..len).map(|_| rng.gen()).collect()
}

fn ops() -> usize {
    std::env::var("STITCH_PAGE_MODEL_OPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6000)
}

/// Seeds run: `STITCH_PAGE_MODEL_SEEDS`, 3 by default.
fn seeds() -> u64 {
    std::env::var("STITCH_PAGE_MODEL_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3)
}

fn run(seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let disk = Arc::new(sim(seed));
    let (store, hash) = create(disk.clone() as Arc<dyn Disk>, 8);
    let mut committed = Map::new();
    // Live transactions and their own writes (None: deleted).
    let mut live: Vec<(u64, common::Writes)> = Vec::new();
    let (mut commits, mut aborts, mut conflicts) = (0, 0, 0);
    for _ in 0..ops() {
        if live.len() < 3 && rng.gen_bool(0.1) || live.is_empty() {
            live.push((store.begin().unwrap(), HashMap::new()));
        }
        let i = rng.gen_range(0..live.len());
        let txn = live[i].0;
        match rng.gen_range(0..100) {
            0..=44 => {
                let (k, v) = (key(&mut rng, 1500), value(&mut rng));
                match hash.put(txn, &k, &v) {
                    Ok(()) => {
                        live[i].1.insert(k, Some(v));
                    }
                    Err(PageError::Locked { .. }) => conflicts += 1,
                    Err(e) => panic!("seed {seed}: put: {e}"),
                }
            }
            45..=64 => {
                let k = key(&mut rng, 1500);
                let expected = match live[i].1.get(&k) {
                    Some(v) => v.is_some(),
                    None => committed.contains_key(&k),
                };
                match hash.delete(txn, &k) {
                    Ok(was) => {
                        assert_eq!(was, expected, "seed {seed}: delete's answer");
                        live[i].1.insert(k, None);
                    }
                    Err(PageError::Locked { .. }) => conflicts += 1,
                    Err(e) => panic!("seed {seed}: delete: {e}"),
                }
            }
            65..=89 => {
                let k = key(&mut rng, 1500);
                let expected = match live[i].1.get(&k) {
                    Some(v) => v.clone(),
                    None => committed.get(&k).cloned(),
                };
                match hash.get(txn, &k) {
                    Ok(got) => assert_eq!(got, expected, "seed {seed}: get {k:?}"),
                    Err(PageError::Locked { holder }) => {
                        assert!(live.iter().any(|(t, w)| *t == holder && w.contains_key(&k)));
                        conflicts += 1;
                    }
                    Err(e) => panic!("seed {seed}: get: {e}"),
                }
            }
            90..=95 => {
                let (txn, writes) = live.swap_remove(i);
                store.commit(txn).unwrap();
                for (k, v) in writes {
                    match v {
                        Some(v) => committed.insert(k, v),
                        None => committed.remove(&k),
                    };
                }
                commits += 1;
            }
            _ => {
                let (txn, _) = live.swap_remove(i);
                store.abort(txn).unwrap();
                aborts += 1;
            }
        }
    }
    for (txn, _) in live.drain(..) {
        store.abort(txn).unwrap();
    }
    common::assert_same(
        &contents(&hash),
        &committed,
        &format!("seed {seed}: final contents"),
    );
    let stats = store.pool_stats();
    assert!(stats.evictions_written > 0, "seed {seed}: nothing stolen");
    println!(
        "seed {seed}: {commits} commits, {aborts} aborts, {conflicts} conflicts, {} keys, {:?}, pool {stats:?}",
        committed.len(),
        hash.stats().unwrap()
    );
    // Reopened (without a checkpoint: recovery redoes the log), it holds the same.
    drop(hash);
    drop(store);
    let crashed = Arc::new(disk.crash(seed));
    let (_, hash) = open(crashed as Arc<dyn Disk>, 8).unwrap().unwrap();
    common::assert_same(
        &contents(&hash),
        &committed,
        &format!("seed {seed}: after recovery"),
    );
}

#[test]
fn linear_hash_matches_a_btreemap_with_interleaved_aborting_transactions() {
    for seed in 0..seeds() {
        run(seed);
    }
}

#[test]
fn entries_past_the_limit_are_refused_and_nothing_changes() {
    let disk = Arc::new(sim(1));
    let (store, hash) = create(disk as Arc<dyn Disk>, 16);
    let t = store.begin().unwrap();
    let big = vec![0u8; stitch_page::hash::MAX_ENTRY];
    assert!(matches!(
        hash.put(t, b"k", &big),
        Err(PageError::TooLarge { .. })
    ));
    let long_key = vec![1u8; stitch_page::hash::MAX_KEY + 1];
    assert!(matches!(
        hash.put(t, &long_key, b"v"),
        Err(PageError::TooLarge { .. })
    ));
    hash.put(t, b"k", &big[..big.len() - 1]).unwrap();
    store.commit(t).unwrap();
    assert_eq!(hash.stats().unwrap().0, 1);
}

#[test]
fn threads_committing_and_aborting_on_one_table_keep_each_others_work() {
    let disk = Arc::new(sim(11));
    let (store, hash) = create(disk.clone() as Arc<dyn Disk>, 16);
    let models: Vec<Map> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..2u64)
            .map(|w| {
                let (store, hash) = (store.clone(), hash.clone());
                scope.spawn(move || {
                    let mut rng = ChaCha8Rng::seed_from_u64(100 + w);
                    let mut model = Map::new();
                    for _ in 0..150 {
                        let txn = store.begin().unwrap();
                        let mut writes = Map::new();
                        for _ in 0..rng.gen_range(1..12) {
                            let k = format!("w{w}-{:04}", rng.gen_range(0..600)).into_bytes();
                            let v = value(&mut rng);
                            hash.put(txn, &k, &v).unwrap();
                            writes.insert(k, v);
                        }
                        if rng.gen_bool(0.3) {
                            store.abort(txn).unwrap();
                        } else {
                            store.commit(txn).unwrap();
                            model.extend(writes);
                        }
                    }
                    model
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let want: Map = models.into_iter().flatten().collect();
    common::assert_same(&contents(&hash), &want, "after both threads");
    assert!(hash.stats().unwrap().1 > 8, "the table split");
    drop((store, hash));
    let (_, hash) = open(Arc::new(disk.crash(1)) as Arc<dyn Disk>, 16)
        .unwrap()
        .unwrap();
    common::assert_same(&contents(&hash), &want, "after a crash");
}
