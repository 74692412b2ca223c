//! Crash tests on the simulated disk: workloads of interleaved transactions (puts, deletes,
//! commits, aborts) on a buffer pool of 8 frames, so uncommitted pages are stolen to disk,
//! crashed at every write and sync (a crash image: unsynced writes dropped, torn at sectors
//! or reordered). Each image recovers to exactly the state after some commit between the
//! last acknowledged and the last issued. Recovery itself is crashed at every write it
//! makes, and each of those images recovers to the same state as the uninterrupted run.
//! `STITCH_PAGE_CRASH_SEEDS` (workloads, 2) and `STITCH_PAGE_CRASH_OPS` (operations per
//! workload, 1,200) make the run longer.

#![allow(clippy::unwrap_used)]

mod common;

use common::{assert_same, contents, create, open, sim, CapturingDisk, Image};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use stitch_io::Disk;
use stitch_page::{LinearHash, PageError, PageStore};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;
const FRAMES: usize = 8;

/// Workloads (seeds) crashed at every write: `STITCH_PAGE_CRASH_SEEDS`, 2 by default.
fn seeds() -> u64 {
    std::env::var("STITCH_PAGE_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2)
}

fn ops() -> usize {
    std::env::var("STITCH_PAGE_CRASH_OPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1200)
}

/// Runs a random workload; returns the committed state after each commit (index 0: before
/// any).
fn workload(
    seed: u64,
    disk: &CapturingDisk,
    store: &Arc<PageStore>,
    hash: &LinearHash,
) -> Vec<Map> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut states = vec![Map::new()];
    let mut live: Vec<(u64, common::Writes)> = Vec::new();
    for _ in 0..ops() {
        if live.len() < 2 && rng.gen_bool(0.15) || live.is_empty() {
            live.push((store.begin().unwrap(), HashMap::new()));
        }
        let i = rng.gen_range(0..live.len());
        let txn = live[i].0;
        let k = format!("k{:04}", rng.gen_range(0..400)).into_bytes();
        match rng.gen_range(0..100) {
            0..=59 => {
                let v: Vec<u8> = vec![rng.gen(); rng.gen_range(0..300)];
                match hash.put(txn, &k, &v) {
                    Ok(()) => {
                        live[i].1.insert(k, Some(v));
                    }
                    Err(PageError::Locked { .. }) => {}
                    Err(e) => panic!("seed {seed}: {e}"),
                }
            }
            60..=84 => match hash.delete(txn, &k) {
                Ok(_) => {
                    live[i].1.insert(k, None);
                }
                Err(PageError::Locked { .. }) => {}
                Err(e) => panic!("seed {seed}: {e}"),
            },
            85..=93 => {
                let (txn, writes) = live.swap_remove(i);
                let mut next = states[states.len() - 1].clone();
                for (k, v) in writes {
                    match v {
                        Some(v) => next.insert(k, v),
                        None => next.remove(&k),
                    };
                }
                states.push(next);
                disk.issued.fetch_add(1, Ordering::SeqCst);
                store.commit(txn).unwrap();
                disk.acked.fetch_add(1, Ordering::SeqCst);
            }
            _ => {
                let (txn, _) = live.swap_remove(i);
                store.abort(txn).unwrap();
            }
        }
    }
    states
}

/// Recovers `image` and checks it holds a state its acknowledgements allow; returns it.
fn check_image(image: &Image, states: &[Map], seed: u64, n: usize) -> Option<Map> {
    let disk = Arc::new(image.disk.crash(0));
    let (_, hash) = open(disk as Arc<dyn Disk>, FRAMES)
        .unwrap_or_else(|e| panic!("seed {seed} image {n}: recovery failed: {e}"))?;
    let got = contents(&hash);
    let allowed = &states[image.acked as usize..=image.issued as usize];
    if allowed.len() == 1 {
        assert_same(&got, &allowed[0], &format!("seed {seed} image {n}"));
    }
    assert!(
        allowed.contains(&got),
        "seed {seed} image {n}: recovered {} keys, not a state after commit {}..={} ({:?} keys)",
        got.len(),
        image.acked,
        image.issued,
        allowed.iter().map(|s| s.len()).collect::<Vec<_>>()
    );
    Some(got)
}

fn images_of_a_workload(seed: u64, every: u64) -> (Vec<Image>, Vec<Map>) {
    let disk = CapturingDisk::new(sim(seed));
    let (store, hash) = create(disk.clone() as Arc<dyn Disk>, FRAMES);
    disk.every.store(every, Ordering::SeqCst);
    let states = workload(seed, &disk, &store, &hash);
    assert!(
        store.pool_stats().evictions_written > 0,
        "seed {seed}: no page was stolen"
    );
    (disk.take_images(), states)
}

#[test]
fn a_crash_at_every_write_recovers_a_committed_prefix() {
    let mut images_checked = 0;
    for seed in 0..seeds() {
        let (images, states) = images_of_a_workload(seed, 1);
        for (n, image) in images.iter().enumerate() {
            check_image(image, &states, seed, n);
            images_checked += 1;
        }
    }
    println!("{images_checked} crash images recovered");
    assert!(images_checked > 500);
}

#[test]
fn recovery_crashed_at_every_write_ends_in_the_same_state() {
    let (images, states) = images_of_a_workload(7, 1);
    // A sample of crash points across the workload, each recovered once cleanly and once
    // crashed at each write of its recovery (and the recovery of that, once).
    let mut crashes = 0;
    for (n, image) in images.iter().enumerate().step_by(images.len() / 24 + 1) {
        let Some(clean) = check_image(image, &states, 7, n) else {
            continue;
        };
        let disk = CapturingDisk::new(image.disk.crash(0));
        disk.every.store(1, Ordering::SeqCst);
        open(disk.clone() as Arc<dyn Disk>, FRAMES).unwrap();
        for (m, during) in disk.take_images().into_iter().enumerate() {
            let again = CapturingDisk::new(during.disk.crash(0));
            if m % 7 == 0 {
                again.every.store(3, Ordering::SeqCst);
            }
            let (_, hash) = open(again.clone() as Arc<dyn Disk>, FRAMES)
                .unwrap()
                .unwrap();
            assert_same(
                &contents(&hash),
                &clean,
                &format!("image {n}, recovery crashed at write {m}"),
            );
            for twice in again.take_images() {
                let disk = Arc::new(twice.disk.crash(0));
                let (_, hash) = open(disk as Arc<dyn Disk>, FRAMES).unwrap().unwrap();
                assert_same(
                    &contents(&hash),
                    &clean,
                    &format!("image {n}, recovery crashed at write {m} and again"),
                );
            }
            crashes += 1;
        }
    }
    println!("{crashes} crashed recoveries");
    assert!(crashes > 50);
}

#[test]
fn an_abort_whose_pages_were_stolen_is_undone_and_survives_a_crash_at_every_write() {
    let disk = CapturingDisk::new(sim(3));
    let (store, hash) = create(disk.clone() as Arc<dyn Disk>, FRAMES);
    let base = store.begin().unwrap();
    for i in 0..100 {
        hash.put(base, format!("base{i}").as_bytes(), &[1; 50])
            .unwrap();
    }
    store.commit(base).unwrap();
    let want = contents(&hash);
    let t = store.begin().unwrap();
    let stolen = store.pool_stats().evictions_written;
    for i in 0..300 {
        hash.put(t, format!("loser{i}").as_bytes(), &[2; 80])
            .unwrap();
        if i % 3 == 0 {
            hash.delete(t, format!("base{}", i / 3).as_bytes()).unwrap();
        }
    }
    assert!(store.pool_stats().evictions_written > stolen + 10);
    // Crash images at every write from here on: none may show the loser's work.
    disk.every.store(1, Ordering::SeqCst);
    store.abort(t).unwrap();
    assert_same(&contents(&hash), &want, "after the abort");
    store.checkpoint().unwrap();
    let images = disk.take_images();
    assert!(images.len() > 20);
    for (n, image) in images.iter().enumerate() {
        let crashed = Arc::new(image.disk.crash(0));
        let (_, hash) = open(crashed as Arc<dyn Disk>, FRAMES).unwrap().unwrap();
        assert_same(
            &contents(&hash),
            &want,
            &format!("crash {n} during the abort"),
        );
    }
    // And without the abort: the crash leaves the loser to recovery's undo.
    let t = store.begin().unwrap();
    for i in 0..300 {
        hash.put(t, format!("loser{i}").as_bytes(), &[3; 80])
            .unwrap();
    }
    let crashed = Arc::new(disk.sim.crash(9));
    let (_, hash) = open(crashed as Arc<dyn Disk>, FRAMES).unwrap().unwrap();
    assert_same(&contents(&hash), &want, "loser undone by recovery");
}

#[test]
fn an_abort_after_a_split_another_transaction_depends_on_unwinds_only_its_own_keys() {
    let disk = CapturingDisk::new(sim(4));
    let (store, hash) = create(disk.clone() as Arc<dyn Disk>, FRAMES);
    let t1 = store.begin().unwrap();
    let t2 = store.begin().unwrap();
    let (_, buckets_before) = hash.stats().unwrap();
    let mut i = 0;
    // T1 grows the table until it splits; T2 puts keys after each split (some land in the
    // new buckets, whose pages the splits made).
    let mut t2_keys = Map::new();
    while hash.stats().unwrap().1 < buckets_before + 6 {
        hash.put(t1, format!("t1-{i}").as_bytes(), &[1; 200])
            .unwrap();
        if i % 4 == 0 {
            let k = format!("t2-{i}").into_bytes();
            hash.put(t2, &k, &[2; 100]).unwrap();
            t2_keys.insert(k, vec![2; 100]);
        }
        i += 1;
    }
    let buckets = hash.stats().unwrap().1;
    let in_new_buckets = t2_keys
        .keys()
        .filter(|k| hash.bucket_of(k).unwrap() >= buckets_before)
        .count();
    assert!(
        in_new_buckets > 0,
        "no key of T2 lies in a bucket T1's splits made"
    );
    // Crash images while T1 is live and T2 commits: recovery undoes T1 only.
    disk.every.store(2, Ordering::SeqCst);
    store.commit(t2).unwrap();
    let before_abort = disk.sim.crash(1);
    store.abort(t1).unwrap();
    disk.every.store(0, Ordering::SeqCst);
    assert_same(&contents(&hash), &t2_keys, "T2's keys after T1's abort");
    assert_eq!(hash.stats().unwrap().1, buckets, "the splits stay");
    let (_, hash) = open(Arc::new(before_abort) as Arc<dyn Disk>, FRAMES)
        .unwrap()
        .unwrap();
    assert_same(&contents(&hash), &t2_keys, "T1 undone by recovery");
    assert_eq!(
        hash.stats().unwrap().1,
        buckets,
        "the splits stay after recovery"
    );
    for (n, image) in disk.take_images().into_iter().enumerate() {
        let (_, hash) = open(Arc::new(image.disk.crash(0)) as Arc<dyn Disk>, FRAMES)
            .unwrap()
            .unwrap();
        let got = contents(&hash);
        assert!(
            got.is_empty() || got == t2_keys,
            "image {n}: {} keys: not before or after T2's commit",
            got.len()
        );
    }
}

#[test]
fn a_flipped_byte_in_a_page_is_named() {
    let disk = CapturingDisk::new(sim(5));
    let (store, hash) = create(disk.clone() as Arc<dyn Disk>, FRAMES);
    let t = store.begin().unwrap();
    for i in 0..50 {
        hash.put(t, format!("k{i}").as_bytes(), b"value").unwrap();
    }
    store.commit(t).unwrap();
    store.checkpoint().unwrap();
    let offset = store.page_offset(3).unwrap();
    assert!(store.check_pages().unwrap().is_empty());
    drop((store, hash));
    let mut byte = [0u8];
    disk.sim.read_at(offset + 1000, &mut byte).unwrap();
    disk.sim.write_at(offset + 1000, &[byte[0] ^ 0x10]).unwrap();
    disk.sim.sync().unwrap();
    let (store, hash) = open(Arc::new(disk.sim.crash(0)) as Arc<dyn Disk>, FRAMES)
        .unwrap()
        .unwrap();
    let t = store.begin().unwrap();
    let errors: Vec<String> = (0..50)
        .filter_map(|i| hash.get(t, format!("k{i}").as_bytes()).err())
        .map(|e| e.to_string())
        .collect();
    assert!(!errors.is_empty());
    for e in &errors {
        assert!(
            e.contains("corrupt page 3") && e.contains("checksum"),
            "{e}"
        );
    }
    let named: Vec<String> = store
        .check_pages()
        .unwrap()
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert_eq!(named.len(), 1, "{named:?}");
    let place = format!("corrupt page 3 (disk byte {offset})");
    assert!(named[0].contains(&place), "{named:?}");
}

#[test]
fn a_crash_while_creating_leaves_no_store_or_one_that_works() {
    let disk = CapturingDisk::new(sim(6));
    disk.every.store(1, Ordering::SeqCst);
    let (store, hash) = create(disk.clone() as Arc<dyn Disk>, FRAMES);
    let t = store.begin().unwrap();
    hash.put(t, b"k", b"v").unwrap();
    store.commit(t).unwrap();
    let images = disk.take_images();
    assert!(images.len() > 5);
    let mut opened = 0;
    for (n, image) in images.iter().enumerate() {
        let disk = Arc::new(image.disk.crash(0)) as Arc<dyn Disk>;
        let Some((store, hash)) = open(disk, FRAMES).unwrap() else {
            continue;
        };
        opened += 1;
        let got = contents(&hash);
        assert!(got.is_empty() || got.len() == 1, "image {n}: {got:?}");
        let t = store.begin().unwrap();
        hash.put(t, b"after", b"crash").unwrap();
        store.commit(t).unwrap();
    }
    assert!(opened > 0);
}
