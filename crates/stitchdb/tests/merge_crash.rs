//! A crash at every step of a merge: crash images are taken at every write and sync a
//! compaction makes (merging, stitching, writing filters, index, manifest, superblock), at each
//! end of the stitching continuum; every image must reopen to the same contents and pass
//! `check`.

#![allow(clippy::unwrap_used)]

mod support;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::sync::Arc;
use stitchdb::{Db, Durability, Options, Stitching, WriteBatch};
use support::{every_image_holds, table_contents, CrashingDisk};

fn options(stitching: Stitching) -> Options {
    Options {
        zone_size: 64 * 1024,
        memtable_size: 8 * 1024,
        level_runs: 8,
        background: false,
        durability: Durability::Async,
        stitching,
        ..Options::default()
    }
}

/// Merges the table's runs into one with a crash image taken at every write and sync.
fn compact_taking_images(db: &Db, disk: &support::CrashingDisk) -> stitchdb::Stats {
    assert!(db.stats().tables[0].runs() >= 2, "runs to merge");
    *disk.probability.lock() = 1.0;
    db.compact().unwrap();
    *disk.probability.lock() = 0.0;
    let s = db.stats();
    assert_eq!(s.tables[0].runs(), 1);
    s
}

#[test]
fn every_write_and_sync_of_a_merge_is_a_safe_place_to_crash() {
    let mut images = 0;
    let mut stitched = 0;
    for (seed, stitching) in [
        Stitching::Threshold(0),
        Stitching::Threshold(8192),
        Stitching::Never,
    ]
    .into_iter()
    .enumerate()
    {
        let seed = seed as u64;
        let disk = CrashingDisk::new(seed);
        let db = Db::create_on(disk.clone(), options(stitching)).unwrap();
        let t = db.default_table();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut model = BTreeMap::new();
        // Several runs: some key ranges disjoint (stitchable), some overlapping, some deletes.
        for run in 0..6u32 {
            let base = if run % 2 == 0 { run * 5000 } else { 0 };
            let mut batch = WriteBatch::new();
            for i in 0..1500u32 {
                let k = format!("key{:06}", base + i * 3 + rng.gen_range(0..3)).into_bytes();
                if run == 5 && i % 4 == 0 {
                    batch.delete(t, k.clone());
                    model.remove(&k);
                } else {
                    let v = vec![run as u8; rng.gen_range(1..60)];
                    batch.put(t, k.clone(), v.clone());
                    model.insert(k, v);
                }
            }
            db.write(&batch, Durability::Async).unwrap();
            db.flush().unwrap();
        }
        let s = compact_taking_images(&db, &disk);
        stitched += s.merge_stitched_bytes;
        drop(db);
        images += every_image_holds(
            &disk,
            &options(stitching),
            &model,
            &format!("{stitching:?}"),
        );
    }
    assert!(stitched > 0, "some merges stitched");
    assert!(images >= 40, "{images} crash images");
    eprintln!("{images} crash images taken during merges, all consistent");
}

#[test]
fn a_merge_sharing_its_inputs_index_is_a_safe_place_to_crash() {
    // Disjoint runs of sequential keys: the merge stitches them whole, one after another, and
    // its run lists their index extents instead of writing its own. Every image must reopen
    // to the same contents (the shared extents readable from whichever runs the image lists)
    // and pass check; after the inputs are dropped, the merged run must still read.
    let stitching = Stitching::Threshold(0);
    let disk = CrashingDisk::new(7);
    let db = Db::create_on(disk.clone(), options(stitching)).unwrap();
    let t = db.default_table();
    let mut model = BTreeMap::new();
    for run in 0..4u32 {
        let mut batch = WriteBatch::new();
        for i in 0..1500u32 {
            let k = format!("key{:06}", run * 10_000 + i).into_bytes();
            let v = vec![run as u8 + 1; 40];
            batch.put(t, k.clone(), v.clone());
            model.insert(k, v);
        }
        db.write(&batch, Durability::Async).unwrap();
        db.flush().unwrap();
    }
    let s = compact_taking_images(&db, &disk);
    assert_eq!(s.merge_copied_bytes, 0, "{s:?}");
    assert!(s.merge_shared_indexes >= 1, "{s:?}");
    db.check().unwrap();
    drop(db);
    let images = every_image_holds(&disk, &options(stitching), &model, "shared index");
    assert!(images >= 5, "{images} crash images");
    // The merged run alone, after a reopen and a defragmentation that moves what it shares.
    let db = Db::open_on(disk.clone(), options(stitching)).unwrap();
    db.defrag(1.0, &mut |_, _| {}).unwrap();
    db.check().unwrap();
    let got = table_contents(&db, t);
    assert_eq!(got, model);
}

#[test]
fn a_run_sharing_its_inputs_filter_parts_finds_every_key() {
    // Sequential runs merged whole keep one filter part per input; a lookup asks the part
    // over the key's block. Every key must be found (no part may answer for another's keys),
    // absent keys between and around the runs not, before and after a reopen.
    let disk = CrashingDisk::new(8);
    let opts = options(Stitching::Threshold(0));
    let db = Db::create_on(disk.clone(), opts.clone()).unwrap();
    let t = db.default_table();
    let mut model = BTreeMap::new();
    for run in 0..5u32 {
        let mut batch = WriteBatch::new();
        for i in 0..800u32 {
            let k = format!("key{:06}", run * 10_000 + i * 2).into_bytes();
            batch.put(t, k.clone(), vec![run as u8; 30]);
            model.insert(k, vec![run as u8; 30]);
        }
        db.write(&batch, Durability::Async).unwrap();
        db.flush().unwrap();
    }
    db.compact().unwrap();
    let s = db.stats();
    assert!(s.merge_shared_indexes >= 1, "{s:?}");
    assert_eq!(s.tables[0].runs(), 1);
    let lookups = |db: &Db| {
        for (k, v) in &model {
            assert_eq!(db.get(t, k).unwrap().as_ref(), Some(v), "{k:?}");
        }
        let absent = (0..6u32).flat_map(|run| [1u32, 777, 1601, 5000].map(|i| run * 10_000 + i));
        for n in absent {
            let k = format!("key{n:06}").into_bytes();
            assert_eq!(db.get(t, &k).unwrap(), None, "{k:?}");
        }
        db.check().unwrap();
    };
    lookups(&db);
    drop(db);
    let db = Db::open_on(disk, opts).unwrap();
    lookups(&db);
}

#[test]
fn a_merge_is_listed_by_the_next_manifest_and_a_crash_before_it_loses_nothing() {
    // Merges install at once and are listed by the next manifest (a checkpoint's, or the
    // compactor's once it has been out of work a while): they write no manifest or
    // superblock of their own. Until then the durable manifest lists the merged-away runs,
    // which must stay intact.
    let opts = Options {
        level_runs: 2,
        ..options(Stitching::Threshold(8192))
    };
    let disk = CrashingDisk::new(21);
    let db = Db::create_on(disk.clone(), opts.clone()).unwrap();
    let t = db.default_table();
    let mut model = BTreeMap::new();
    let mut rng = ChaCha8Rng::seed_from_u64(21);
    let mut deferred_seen = 0;
    for round in 0..60u32 {
        let before = db.stats();
        let mut batch = WriteBatch::new();
        for _ in 0..60 {
            let k = format!("key{:05}", rng.gen_range(0..3000u32)).into_bytes();
            let v = vec![round as u8; rng.gen_range(10..60)];
            batch.put(t, k.clone(), v.clone());
            model.insert(k, v);
        }
        // Durable when it returns: every image below must hold it.
        db.write(&batch, Durability::Sync).unwrap();
        let after = db.stats();
        if after.merges == before.merges {
            continue;
        }
        // The memtable filled: one checkpoint, then merges, none of them writing a manifest.
        assert_eq!(after.checkpoints, before.checkpoints + 1, "{after}");
        deferred_seen += 1;
        let live_runs = after.tables[0].runs();
        for seed in 0..3 {
            let image = Db::open_on(Arc::new(disk.sim.crash(seed)), opts.clone()).unwrap();
            assert!(
                image.stats().tables[0].runs() > live_runs,
                "the image lists the runs the merge replaced"
            );
            let got = table_contents(&image, t);
            assert!(got == model, "round {round}, image {seed}");
            image.check().unwrap();
        }
    }
    assert!(deferred_seen >= 5, "{deferred_seen} rounds merged");
    // A flush writes the manifest: the merges are durable.
    db.flush().unwrap();
    let live_runs = db.stats().tables[0].runs();
    let image = Db::open_on(Arc::new(disk.sim.crash(99)), opts).unwrap();
    assert_eq!(image.stats().tables[0].runs(), live_runs);
    image.check().unwrap();
}

#[test]
fn the_compactor_lists_its_merges_in_a_manifest_once_it_runs_out_of_work() {
    let opts = Options {
        level_runs: 2,
        background: true,
        ..options(Stitching::Threshold(8192))
    };
    let disk = CrashingDisk::new(22);
    let db = Db::create_on(disk.clone(), opts.clone()).unwrap();
    let t = db.default_table();
    let mut model = BTreeMap::new();
    for i in 0..6000u32 {
        let k = format!("key{:05}", (i * 7919) % 6000).into_bytes();
        let v = vec![(i % 200) as u8; 40];
        db.put(t, k.clone(), v.clone()).unwrap();
        model.insert(k, v);
    }
    db.flush().unwrap();
    // The compactor merges what the flushes left, then writes a manifest.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let settled = loop {
        let s = db.stats();
        let debt = s.tables[0].levels.iter().any(|&runs| runs >= 2);
        if !debt && s.runs_awaiting_manifest == 0 {
            break s;
        }
        assert!(std::time::Instant::now() < deadline, "never settled: {s}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    assert!(settled.merges > 0);
    let image = Db::open_on(Arc::new(disk.sim.crash(5)), opts).unwrap();
    assert_eq!(image.stats().tables[0].levels, settled.tables[0].levels);
    let got = table_contents(&image, t);
    assert!(got == model);
    image.check().unwrap();
}
