//! Damage to a store is never silent: the cases as regression tests.
//!
//! A log segment overwritten in its middle, with acknowledged `Sync` commits past the damage
//! still only in the log, must make `open` refuse (naming the place and how many records are
//! out of reach), not silently drop every later commit.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use stitchdb::{Db, Disk, Durability, Error, Options, SimConfig, SimDisk, WriteBatch};

const ZONE: u64 = 1 << 20;

fn options() -> Options {
    Options {
        zone_size: ZONE,
        // Large enough that nothing is checkpointed: every commit stays only in the log.
        memtable_size: 64 << 20,
        background: false,
        durability: Durability::Sync,
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    format!("value of key {i:08}, some bytes to make a record").into_bytes()
}

/// A store holding `n` keys, each committed with `Sync`, then `unsynced` more committed with
/// `Async`, and what a crash (seeded by `seed`) then leaves: every `Sync` commit is durable,
/// and only in the log; the `Async` ones are a tail the crash may have torn anywhere.
fn commits_in_the_log(n: u64, unsynced: u64, seed: u64) -> SimDisk {
    let sim = Arc::new(SimDisk::new(SimConfig {
        seed: 7,
        len: 0,
        capacity: None,
    }));
    let db = Db::create_on(sim.clone(), options()).unwrap();
    let t = db.default_table();
    for i in 0..n {
        db.put(t, key(i), value(i)).unwrap();
    }
    for i in n..n + unsynced {
        let mut batch = WriteBatch::new();
        batch.put(t, key(i), value(i));
        db.write(&batch, Durability::Async).unwrap();
    }
    let image = sim.crash(seed);
    drop(db);
    image
}

/// The zone of the newest log segment on `disk` (the largest epoch among segment headers).
fn log_zone(disk: &dyn Disk) -> u64 {
    let mut best = None;
    for zone in 1..disk.len() / ZONE {
        let mut header = [0u8; 24];
        disk.read_at(zone * ZONE, &mut header).unwrap();
        if &header[..8] == b"STWALSEG" {
            let epoch = u64::from_le_bytes(header[16..24].try_into().unwrap());
            if best.is_none_or(|(e, _)| epoch > e) {
                best = Some((epoch, zone));
            }
        }
    }
    best.unwrap().1
}

#[test]
fn log_overwritten_in_its_middle_is_refused_not_truncated() {
    let n = 10_251;
    let image = commits_in_the_log(n, 0, 1);
    let damaged_at = log_zone(&image) * ZONE + 100_000;
    image.write_at(damaged_at, &[0xA5; 16]).unwrap();
    let disk: Arc<dyn Disk> = Arc::new(image);
    let err = match Db::open_on(disk.clone(), options()) {
        Ok(db) => {
            let t = db.default_table();
            let held = (0..n)
                .filter(|&i| db.get(t, key(i)).unwrap().is_some())
                .count();
            panic!("a damaged log opened, holding {held} of {n} keys");
        }
        Err(e) => e,
    };
    assert!(matches!(err, Error::Log(_)), "{err}");
    let text = err.to_string();
    assert!(text.contains("damaged"), "{text}");
    assert!(text.contains("offset"), "the place is named: {text}");
    assert!(text.contains("out of reach"), "{text}");
    // Read-only opening refuses too: nothing silently hides the lost commits.
    assert!(Db::open_read_only_on(disk, options()).is_err());
}

#[test]
fn log_torn_at_its_tail_recovers_every_synced_commit_and_a_prefix_of_the_rest() {
    let (n, unsynced) = (1_000, 300);
    for seed in 0..8 {
        let disk: Arc<dyn Disk> = Arc::new(commits_in_the_log(n, unsynced, seed));
        let db = Db::open_on(disk, options()).unwrap();
        let t = db.default_table();
        let held: Vec<bool> = (0..n + unsynced)
            .map(|i| {
                let got = db.get(t, key(i)).unwrap();
                assert!(
                    got.is_none() || got == Some(value(i)),
                    "seed {seed} key {i}"
                );
                got.is_some()
            })
            .collect();
        let prefix = held.iter().take_while(|&&h| h).count();
        assert!(prefix >= n as usize, "seed {seed}: synced commits lost");
        assert!(
            held[prefix..].iter().all(|&h| !h),
            "seed {seed}: not a prefix"
        );
    }
}
