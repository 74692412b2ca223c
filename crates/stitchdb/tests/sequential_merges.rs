//! Sequential inserts are the VT-tree's best case: every merge should stitch its inputs whole
//! and list their index and filter instead of writing anything. Two cases this checks could
//! break that: a run whose blocks cross a zone boundary leaves a piece at the end of the zone
//! shorter than the stitching threshold, which must still count as contiguous with the rest
//! (or it is copied alone into the merge's zone, where it stays a short span and every later
//! merge copies it again); and a merge's manifest appended while a flush writes its run must
//! not land between that run's blocks (manifests have a stream of their own).

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use stitchdb::{Db, Durability, MemDisk, Options, Stitching, WriteBatch};
use support::table_contents;

fn options(background: bool, memtable_size: usize, threshold: u64) -> Options {
    Options {
        // Small zones: a run of a few dozen blocks crosses a zone boundary every few flushes,
        // with pieces of every length on both sides of it.
        zone_size: 64 * 1024,
        memtable_size,
        stitching: Stitching::Threshold(threshold),
        durability: Durability::Async,
        background,
        ..Options::default()
    }
}

/// Writes `keys` sequential keys in batches of 50 and returns the contents.
fn fill_sequentially(db: &Db, keys: u32) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let t = db.default_table();
    let mut model = BTreeMap::new();
    for start in (0..keys).step_by(50) {
        let mut batch = WriteBatch::new();
        for i in start..(start + 50).min(keys) {
            let k = format!("key{i:08}").into_bytes();
            let v = vec![(i % 251) as u8; 100];
            batch.put(t, k.clone(), v.clone());
            model.insert(k, v);
        }
        db.write(&batch, Durability::Async).unwrap();
    }
    model
}

fn assert_merges_stitched_everything(db: &Db) {
    let s = db.stats();
    assert!(s.merges >= 20, "merges: {s:?}");
    assert_eq!(s.merge_copied_bytes, 0, "{s}");
    assert_eq!(s.merge_shared_indexes, s.merges, "{s}");
}

fn assert_contents(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let got = table_contents(db, db.default_table());
    assert!(got == *model, "contents differ");
    db.check().unwrap();
}

/// Fills a new store sequentially with `keys` keys, then checks that every merge stitched
/// its inputs whole and that the contents hold, before and after a reopen.
fn fill_and_check(opts: Options, keys: u32) {
    let disk = std::sync::Arc::new(MemDisk::new(0));
    let db = Db::create_on(disk.clone(), opts.clone()).unwrap();
    let model = fill_sequentially(&db, keys);
    db.flush().unwrap();
    assert_merges_stitched_everything(&db);
    assert_contents(&db, &model);
    drop(db);
    let db = Db::open_on(disk, opts).unwrap();
    assert_contents(&db, &model);
}

#[test]
fn sequential_runs_crossing_zone_boundaries_are_stitched_whole() {
    // Pieces of one to three blocks at a zone's end are shorter than the threshold. A
    // memtable of 32 KiB of memory holds about 150 of these entries: a run of about 18 KiB,
    // longer than the threshold.
    fill_and_check(options(false, 32 * 1024, 16 * 1024), 40_000);
}

#[test]
fn background_sequential_fills_stitch_every_merge_whole() {
    // Background flushes and merges, merges installing while the next memtable is written
    // out. A checkpoint may catch a memtable part full (a writer waiting for the one before
    // asks for the next at once), but never with less than one 50-key batch, more than the
    // one-block threshold: every run is long enough to stitch unless something splits it.
    // (That a manifest cannot split a flush's run is checked deterministically in
    // `db::checkpoint`'s unit tests; here the whole path is.)
    fill_and_check(options(true, 64 * 1024, 4096), 60_000);
}
