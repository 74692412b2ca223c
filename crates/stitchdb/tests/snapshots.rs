//! Named snapshots: they read the tables as they were, survive restarts, merges and
//! defragmentation, cost no data writes when taken, free their space when dropped, and a
//! crash while taking or dropping one leaves it wholly there or wholly gone; on a table of each
//! layout of `support::LAYOUTS`.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use stitchdb::{Db, Disk, Error, MemDisk, Options, Snapshot, TableId};
use support::CrashingDisk;

type State = BTreeMap<Vec<u8>, Vec<u8>>;

fn options() -> Options {
    Options {
        zone_size: 64 * 1024,
        memtable_size: 8 * 1024,
        background: false,
        ..Options::default()
    }
}

fn fill(db: &Db, t: TableId, round: u32, keys: u32) -> State {
    let mut state = State::new();
    for i in 0..keys {
        let (k, v) = (
            format!("key{i:04}"),
            format!("round{round}-{i}-{}", "x".repeat(40)),
        );
        db.put(t, &k, &v).unwrap();
        state.insert(k.into_bytes(), v.into_bytes());
    }
    state
}

fn contents(db: &Db, t: TableId) -> State {
    db.range(t, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn snap_contents(s: &Snapshot, t: TableId) -> State {
    s.range(t, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn a_snapshot_reads_the_past_across_merges_defrag_and_restarts() {
    for layout in support::LAYOUTS {
        snapshot_reads_the_past(layout);
    }
}

/// A snapshot of a table in `layout` (one of `support::LAYOUTS`) and of another table.
fn snapshot_reads_the_past(layout: &str) {
    let disk = Arc::new(MemDisk::new(0));
    let db = Db::create_on(disk.clone(), options()).unwrap();
    let t = support::layout_table(&db, layout);
    let other = db.create_table("other").unwrap();
    let before = fill(&db, t, 0, 300);
    db.put(other, "o", "1").unwrap();
    let info = db.snapshot("before").unwrap();
    assert_eq!(info.name, "before");
    assert!(info.runs > 0);
    // The mainline moves on: overwrites, deletes, merges, defragmentation.
    let mut after = fill(&db, t, 1, 300);
    for i in (0..300).step_by(3) {
        let k = format!("key{i:04}");
        db.delete(t, &k).unwrap();
        after.remove(k.as_bytes());
    }
    db.put(other, "o", "2").unwrap();
    db.compact().unwrap();
    db.defrag(0.9, |_, _| {}).unwrap();
    let snap = db.open_snapshot("before").unwrap();
    assert_eq!(snap_contents(&snap, t), before);
    assert_eq!(snap.get(other, "o").unwrap().unwrap(), b"1");
    let mut tables = vec!["default".to_string(), "other".to_string()];
    if !layout.is_empty() {
        tables.insert(1, support::LAID_OUT.to_string());
    }
    assert_eq!(snap.tables(), tables, "{layout}");
    assert_eq!(contents(&db, t), after);
    db.check().unwrap();
    drop(snap);
    db.close().unwrap();

    let db = Db::open_on(disk.clone(), options()).unwrap();
    let listed = db.snapshots();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].seq, info.seq);
    let snap = db.open_snapshot("before").unwrap();
    assert_eq!(snap_contents(&snap, t), before);
    let rev: Vec<_> = snap
        .range_rev(t, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|kv| kv.unwrap().0)
        .collect();
    assert_eq!(rev, before.keys().rev().cloned().collect::<Vec<_>>());
    assert_eq!(contents(&db, t), after);
    // More merges after the restart must not free what the snapshot holds.
    fill(&db, t, 2, 300);
    db.compact().unwrap();
    db.close().unwrap();
    let db = Db::open_on(disk, options()).unwrap();
    assert_eq!(
        snap_contents(&db.open_snapshot("before").unwrap(), t),
        before
    );
    db.check().unwrap();
}

#[test]
fn taking_a_snapshot_writes_no_data_and_dropping_it_frees_space() {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap();
    let t = db.default_table();
    fill(&db, t, 0, 400);
    db.flush().unwrap();
    let live_before = db.stats().zones.live_bytes;
    db.snapshot("s").unwrap();
    // Only a manifest was written.
    let live_with = db.stats().zones.live_bytes;
    assert!(
        live_with < live_before + 8 * 1024,
        "{live_before} -> {live_with}"
    );
    // Rewriting everything: the snapshot keeps the old data alive.
    fill(&db, t, 1, 400);
    db.compact().unwrap();
    let held = db.stats().zones.live_bytes;
    db.drop_snapshot("s").unwrap();
    let freed = db.stats().zones.live_bytes;
    assert!(freed + 20_000 < held, "dropping freed {held} -> {freed}");
    assert!(db.snapshots().is_empty());
    db.check().unwrap();
}

#[test]
fn after_a_restart_runs_shared_with_a_snapshot_are_freed_once_both_let_go() {
    let disk = Arc::new(MemDisk::new(0));
    let db = Db::create_on(disk.clone(), options()).unwrap();
    let t = db.default_table();
    fill(&db, t, 0, 400);
    db.snapshot("s").unwrap();
    let baseline = db.stats().zones.live_bytes;
    db.close().unwrap();
    let db = Db::open_on(disk, options()).unwrap();
    // The mainline rewrites everything; then the snapshot goes: the old runs must be freed.
    fill(&db, t, 1, 400);
    db.compact().unwrap();
    db.drop_snapshot("s").unwrap();
    let live = db.stats().zones.live_bytes;
    assert!(
        live < baseline + 8 * 1024,
        "the old runs were not freed: {baseline} live before, {live} after"
    );
    db.check().unwrap();
}

#[test]
fn an_open_snapshot_outlives_its_drop() {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap();
    let t = db.default_table();
    let before = fill(&db, t, 0, 200);
    db.snapshot("s").unwrap();
    let snap = db.open_snapshot("s").unwrap();
    fill(&db, t, 1, 200);
    db.compact().unwrap();
    db.drop_snapshot("s").unwrap();
    db.compact().unwrap();
    assert_eq!(snap_contents(&snap, t), before);
    drop(snap);
    db.check().unwrap();
}

#[test]
fn bad_snapshot_names_and_uses_get_clear_errors() {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap();
    db.snapshot("a").unwrap();
    assert!(matches!(db.snapshot("a"), Err(Error::SnapshotExists(_))));
    assert!(matches!(db.snapshot(""), Err(Error::BadSnapshotName(..))));
    let long = "x".repeat(256);
    assert!(matches!(
        db.snapshot(&long),
        Err(Error::BadSnapshotName(..))
    ));
    assert!(matches!(
        db.open_snapshot("b"),
        Err(Error::NoSuchSnapshot(_))
    ));
    assert!(matches!(
        db.drop_snapshot("b"),
        Err(Error::NoSuchSnapshot(_))
    ));
    let snap = db.open_snapshot("a").unwrap();
    assert!(matches!(snap.table("nope"), Err(Error::NoSuchTable(_))));
    assert!(matches!(
        snap.get(TableId(77), "k"),
        Err(Error::NoSuchTable(_))
    ));
}

#[test]
fn a_crash_while_taking_or_dropping_a_snapshot_leaves_it_whole_or_gone() {
    let mut images = 0;
    for seed in 0..30 {
        let disk = CrashingDisk::new(seed);
        let db = Db::create_on(disk.clone(), options()).unwrap();
        let layout = support::LAYOUTS[seed as usize % support::LAYOUTS.len()];
        let t = support::layout_table(&db, layout);
        let before = fill(&db, t, 0, 150);
        *disk.probability.lock() = 0.3;
        db.snapshot("s").unwrap();
        *disk.probability.lock() = 0.0;
        let after = fill(&db, t, 1, 150);
        db.compact().unwrap();
        *disk.probability.lock() = 0.3;
        db.drop_snapshot("s").unwrap();
        *disk.probability.lock() = 0.0;
        drop(db);
        for (image, _, _) in disk.images.lock().drain(..) {
            images += 1;
            let image: Arc<dyn Disk> = Arc::new(image);
            let db = Db::open_on(image, options()).unwrap();
            let now = contents(&db, t);
            assert!(
                now == before || now == after,
                "seed {seed}: mainline is neither state"
            );
            match db.open_snapshot("s") {
                Ok(snap) => assert_eq!(snap_contents(&snap, t), before, "seed {seed}"),
                Err(Error::NoSuchSnapshot(_)) => {}
                Err(e) => panic!("seed {seed}: {e}"),
            }
            db.check().unwrap();
        }
    }
    assert!(images > 30, "only {images} crash images");
}
