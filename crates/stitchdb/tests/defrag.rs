//! Defragmentation: under-used zones are evacuated online, contents never change, space is
//! reclaimed, and a crash at any point of it leaves a store that opens to the same contents.

#![allow(clippy::unwrap_used)]

mod support;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::sync::Arc;
use stitchdb::{Db, Disk, Durability, MemDisk, Options, Stitching, WriteBatch};
use support::{every_image_holds, table_contents, CrashingDisk};

fn options() -> Options {
    Options {
        zone_size: 64 * 1024,
        memtable_size: 16 * 1024,
        background: false,
        durability: Durability::Async,
        stitching: Stitching::Threshold(0),
        ..Options::default()
    }
}

/// Writes, overwrites and deletes enough that merges leave holes in many zones.
fn fragment(db: &Db, seed: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let t = db.default_table();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut model = BTreeMap::new();
    // Eight rounds: the merges leave zones part live, part dead (the first assertion checks).
    for round in 0..8u32 {
        let mut batch = WriteBatch::new();
        for _ in 0..400 {
            let k = format!("key{:05}", rng.gen_range(0..3000)).into_bytes();
            if round > 2 && rng.gen_bool(0.3) {
                batch.delete(t, k.clone());
                model.remove(&k);
            } else {
                let v = vec![round as u8; rng.gen_range(10..200)];
                batch.put(t, k.clone(), v.clone());
                model.insert(k, v);
            }
            if batch.len() == 50 {
                db.write(&batch, Durability::Async).unwrap();
                batch.clear();
            }
        }
        db.write(&batch, Durability::Async).unwrap();
        db.flush().unwrap();
    }
    model
}

fn contents(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    table_contents(db, db.default_table())
}

#[test]
fn defrag_moves_live_data_out_of_sparse_zones_and_changes_nothing() {
    let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    let db = Db::create_on(disk.clone(), options()).unwrap();
    let model = fragment(&db, 1);
    let before = db.stats().zones;
    let held = db.scan_prefix(db.default_table(), b"").unwrap();
    let mut calls = 0;
    let report = db
        .defrag(0.6, |done, total| {
            assert!(done <= total);
            calls += 1;
        })
        .unwrap();
    assert!(!report.zones.is_empty(), "the workload left sparse zones");
    assert!(
        report.blocks_moved > 0 && report.runs_rewritten > 0 && calls > 0,
        "{report:?}"
    );
    // A scan begun before defragmentation still reads the old runs, undisturbed.
    let held: BTreeMap<_, _> = held.map(|r| r.unwrap()).collect();
    assert_eq!(held, model);
    assert_eq!(contents(&db), model);
    db.check().unwrap();
    // With the old runs released, their zones are free again.
    db.flush().unwrap();
    let after = db.stats().zones;
    assert!(
        after.dead_bytes < before.dead_bytes,
        "dead bytes {} -> {}",
        before.dead_bytes,
        after.dead_bytes
    );
    db.close().unwrap();
    let db = Db::open_on(disk, options()).unwrap();
    assert_eq!(contents(&db), model);
    db.check().unwrap();
}

#[test]
fn a_crash_during_defragmentation_keeps_the_contents() {
    let mut images = 0;
    let mut moved = 0;
    for seed in 0..12u64 {
        let disk = CrashingDisk::new(seed);
        let db = Db::create_on(disk.clone(), options()).unwrap();
        let model = fragment(&db, seed);
        db.sync().unwrap();
        // Capture crash images at every write and sync of the defragmentation.
        *disk.probability.lock() = 1.0;
        moved += db.defrag(0.6, |_, _| {}).unwrap().blocks_moved;
        *disk.probability.lock() = 0.0;
        drop(db);
        images += every_image_holds(&disk, &options(), &model, &format!("seed {seed}"));
    }
    assert!(moved > 0, "blocks were moved");
    assert!(images > 100, "{images} crash images");
}
