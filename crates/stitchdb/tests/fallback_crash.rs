//! Crash test for the older checkpoint: a seeded workload of `Sync` and `Written` commits
//! (with checkpoints, merges, defragmentation, and the store closed and reopened between
//! sessions) runs on a `SimDisk`, crash images are captured at random writes and syncs, and
//! in each the newest superblock slot is then damaged. `open` must refuse it, naming the slot;
//! `repair` must fall back to the older superblock's checkpoint and hold every acknowledged
//! `Sync` commit: nothing the older checkpoint names (its manifest, its runs, its log, and the
//! log of the session it started if the damaged superblock was that session's first) may have
//! been released before the superblock after the newest was durable.
//!
//! STITCHDB_FALLBACK_STATES sets how many crash states to verify (default 3000).

#![allow(clippy::unwrap_used)]

mod support;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use stitchdb::{Db, Disk, Durability, MemDisk, Options, SimDisk};
use support::{random_write, table_contents, CrashingDisk};

type State = BTreeMap<Vec<u8>, Vec<u8>>;

/// The key that records which commit last reached the store (each commit writes it).
const MARKER: &[u8] = b"\x00commit";

/// Where the superblock slots lie, and where a slot's sequence number is in it (after the
/// 8-byte magic and the 4-byte format version: docs/format.md).
const SLOTS: [u64; 2] = [0, 4096];
const SEQ_AT: u64 = 12;

fn options() -> Options {
    Options {
        zone_size: 64 * 1024,
        memtable_size: 6 * 1024,
        level_runs: 2,
        background: false,
        ..Options::default()
    }
}

/// Runs one seeded workload; returns the state after each commit (index = commit number) and
/// the crash images captured.
fn workload(seed: u64, commits: u64) -> (Vec<State>, Vec<(SimDisk, u64, u64)>) {
    let disk = CrashingDisk::new(seed);
    let mut db = Db::create_on(disk.clone(), options()).unwrap();
    *disk.probability.lock() = 0.03;
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xfa11);
    let mut states = vec![State::new()];
    let mut state = State::new();
    for n in 1..=commits {
        if rng.gen_bool(0.02) {
            // A new session: its log has a new epoch, and its first checkpoint (written by
            // opening) is the superblock a damaged newest slot may be.
            db.close().unwrap();
            db = Db::open_on(disk.clone(), options()).unwrap();
        }
        let t = db.default_table();
        let mut batch = stitchdb::WriteBatch::new();
        for _ in 0..rng.gen_range(1..4) {
            match random_write(&mut rng, &mut state) {
                (k, None) => batch.delete(t, k),
                (k, Some(v)) => batch.put(t, k, v),
            }
        }
        batch.put(t, MARKER.to_vec(), n.to_be_bytes().to_vec());
        state.insert(MARKER.to_vec(), n.to_be_bytes().to_vec());
        let durability = match rng.gen_bool(0.7) {
            true => Durability::Sync,
            false => Durability::Written,
        };
        disk.issued.store(n, Ordering::SeqCst);
        db.write(&batch, durability).unwrap();
        if durability == Durability::Sync {
            disk.acked.store(n, Ordering::SeqCst);
        }
        disk.handed.store(n, Ordering::SeqCst);
        states.push(state.clone());
        match rng.gen_range(0..100) {
            0..=2 => db.compact().unwrap(),
            3..=4 => {
                db.defrag(0.9, |_, _| {}).unwrap();
            }
            5..=7 => db.flush().unwrap(),
            _ => {}
        }
    }
    db.close().unwrap();
    let images = std::mem::take(&mut *disk.images.lock());
    (states, images)
}

/// The image's bytes with 16 bytes in the middle of its newest superblock slot inverted.
fn damage_newest_slot(image: &SimDisk) -> Arc<dyn Disk> {
    let mut bytes = vec![0u8; image.len() as usize];
    image.read_at(0, &mut bytes).unwrap();
    let seq = |slot: u64| {
        let at = (slot + SEQ_AT) as usize;
        u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
    };
    let newest = *SLOTS.iter().max_by_key(|&&slot| seq(slot)).unwrap();
    for b in &mut bytes[newest as usize + 24..newest as usize + 40] {
        *b = !*b;
    }
    let disk = MemDisk::new(bytes.len() as u64);
    disk.write_at(0, &bytes).unwrap();
    Arc::new(disk)
}

/// Damages the image's newest slot: `open` refuses it; `repair` holds a prefix of the
/// commits with every acknowledged one. Returns the prefix length.
fn verify(image: SimDisk, acked: u64, issued: u64, states: &[State], what: &str) -> u64 {
    let damaged = damage_newest_slot(&image);
    match Db::open_on(damaged.clone(), options()) {
        Ok(_) => panic!("{what}: a store with a damaged newest superblock slot opened"),
        Err(e) => assert!(e.to_string().contains("superblock slot"), "{what}: {e}"),
    }
    let fresh: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    let report = Db::repair_on(damaged, fresh.clone(), options())
        .unwrap_or_else(|e| panic!("{what}: repair failed: {e}"));
    assert!(
        report.salvage.lost.is_empty(),
        "{what}: {:?}",
        report.salvage.lost
    );
    let db = Db::open_on(fresh, options()).unwrap();
    let got = table_contents(&db, db.default_table());
    let n = got
        .get(MARKER)
        .map_or(0, |v| u64::from_be_bytes(v.as_slice().try_into().unwrap()));
    assert!(
        n >= acked,
        "{what}: commit {acked} was acknowledged as durable but the repaired store holds \
         only {n} ({:?})",
        report.salvage.damage
    );
    assert!(n <= issued, "{what}: holds commit {n} of {issued} issued");
    assert_eq!(
        got, states[n as usize],
        "{what}: the repaired store is not the prefix ending at commit {n}"
    );
    db.check()
        .unwrap_or_else(|e| panic!("{what}: check failed: {e}"));
    n
}

#[test]
fn repair_of_a_damaged_newest_slot_keeps_every_acknowledged_commit() {
    let target: usize = support::env_count("STITCHDB_FALLBACK_STATES", 3000);
    let mut verified = 0;
    let mut prefixes = std::collections::BTreeSet::new();
    let mut seed = 0;
    while verified < target {
        seed += 1;
        let (states, images) = workload(seed, 300);
        for (i, (image, acked, issued)) in images.into_iter().enumerate() {
            let what = format!("seed {seed} image {i}");
            prefixes.insert(verify(image, acked, issued, &states, &what));
            verified += 1;
        }
    }
    eprintln!(
        "verified {verified} crash states with a damaged newest slot from {seed} workloads; \
         {} distinct prefixes",
        prefixes.len()
    );
    assert!(prefixes.len() > 20, "crashes landed at many points");
}

/// A value of a few hundred bytes, so that 50 commits span several blocks of the log.
fn value(i: u32) -> Vec<u8> {
    format!("v{i}-{}", "x".repeat(300)).into_bytes()
}

#[test]
fn repair_keeps_sync_commits_that_follow_async_ones_a_checkpoint_dropped() {
    let sim = Arc::new(SimDisk::new(stitchdb::SimConfig {
        seed: 5,
        len: 0,
        capacity: None,
    }));
    let opts = Options {
        memtable_size: 1 << 20,
        ..options()
    };
    let db = Db::create_on(sim.clone(), opts.clone()).unwrap();
    let t = db.default_table();
    let put = |i: u32, durability| {
        let mut batch = stitchdb::WriteBatch::new();
        batch.put(t, format!("k{i:03}"), value(i));
        db.write(&batch, durability).unwrap();
    };
    for i in 0..50 {
        put(i, Durability::Sync);
    }
    // Async commits no sync follows (several 4 KiB blocks of records): the checkpoint
    // overtakes their log records and drops them unwritten; the Sync commits after it are
    // only in the log.
    for i in 50..100 {
        put(i, Durability::Async);
    }
    db.flush().unwrap();
    // One Sync commit after the checkpoint: no later record vouches for it, so it is found
    // only if reading gets past the dropped records to it.
    put(100, Durability::Sync);
    let image = sim.crash(1);
    drop(db);
    let fresh: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    let report = Db::repair_on(damage_newest_slot(&image), fresh.clone(), opts.clone()).unwrap();
    let db = Db::open_on(fresh, opts).unwrap();
    let got = table_contents(&db, db.default_table());
    let held = |i: u32| got.get(format!("k{i:03}").as_bytes()) == Some(&value(i));
    // The older checkpoint's log runs past the dropped records to the Sync commit after
    // them (it vouches for what the checkpoint made durable): every synced one is there.
    let missing: Vec<u32> = (0..50).chain([100]).filter(|&i| !held(i)).collect();
    assert!(
        missing.is_empty(),
        "synced commits lost: {missing:?}: {:?}",
        report.salvage.damage
    );
    // The Async ones lived only in the damaged checkpoint's runs: lost, and said so.
    if (50..100).any(|i| !held(i)) {
        assert!(
            report.salvage.damage.iter().any(|d| d.what == "log"),
            "{:?}",
            report.salvage.damage
        );
    }
}
