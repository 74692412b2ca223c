//! Transactions larger than their memory budget: they spill to private runs, read their own
//! writes back through them, commit by linking the runs (not writing them again) and abort by
//! dropping them; a crash at any point of a large commit leaves it wholly there or wholly gone.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use std::time::{Duration, Instant};
use stitchdb::{Db, Disk, Durability, Isolation, MemDisk, Options, TableId};
use support::CrashingDisk;

const BUDGET: usize = 64 * 1024;

fn options() -> Options {
    Options {
        zone_size: 256 * 1024,
        memtable_size: 32 * 1024,
        txn_memory: BUDGET,
        background: false,
        ..Options::default()
    }
}

fn k(i: u32) -> Vec<u8> {
    format!("key{i:07}").into_bytes()
}

fn v(i: u32, round: u32) -> Vec<u8> {
    format!("{round}-{i}-{}", "v".repeat(100)).into_bytes()
}

fn contents(db: &Db, t: TableId) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.range(t, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Writes 4x the budget in one transaction: overwrites, deletes and a range delete across
/// spills, checking reads against a model on the way.
fn big_transaction<'db>(
    db: &'db Db,
    t: TableId,
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
) -> stitchdb::Transaction<'db> {
    let mut txn = db.begin(Isolation::Snapshot).unwrap();
    let n = (4 * BUDGET / 120) as u32;
    for i in 0..n {
        txn.put(t, k(i), v(i, 1)).unwrap();
        model.insert(k(i), v(i, 1));
        if i % 7 == 3 {
            // Overwrite a key from an earlier spill, delete another.
            let (a, b) = (i / 2, i / 3);
            txn.put(t, k(a), v(a, 2)).unwrap();
            model.insert(k(a), v(a, 2));
            txn.delete(t, k(b)).unwrap();
            model.remove(&k(b));
        }
        if i == n / 2 {
            txn.delete_range(t, k(100), k(200)).unwrap();
            model.retain(|key, _| !(k(100) <= *key && *key < k(200)));
        }
    }
    for i in (0..n).step_by(97) {
        assert_eq!(
            txn.get(t, k(i)).unwrap(),
            model.get(&k(i)).cloned(),
            "key {i}"
        );
    }
    let seen: BTreeMap<_, _> = txn
        .range(t, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(&seen, model);
    let part: Vec<_> = txn
        .range(
            t,
            Bound::Included(&k(150)[..]),
            Bound::Excluded(&k(400)[..]),
        )
        .unwrap()
        .map(|kv| kv.unwrap().0)
        .collect();
    let want: Vec<_> = model
        .range(k(150)..k(400))
        .map(|(key, _)| key.clone())
        .collect();
    assert_eq!(part, want);
    txn
}

#[test]
fn a_transaction_four_times_its_memory_commits_without_rewriting_its_data() {
    let disk = Arc::new(MemDisk::new(0));
    let db = Db::create_on(disk.clone(), options()).unwrap();
    let t = db.default_table();
    for i in 0..300 {
        db.put(t, k(i), b"before").unwrap();
    }
    let mut model: BTreeMap<_, _> = (0..300).map(|i| (k(i), b"before".to_vec())).collect();
    let txn = big_transaction(&db, t, &mut model);
    // Nothing is visible before commit.
    assert_eq!(db.get(t, k(250)).unwrap().unwrap(), b"before");
    let before = db.stats();
    txn.commit_with(Durability::Sync).unwrap();
    let after = db.stats();
    assert_eq!(after.linked_commits, 1);
    assert!(
        after.linked_bytes > 4 * BUDGET as u64 / 2,
        "{}",
        after.linked_bytes
    );
    // The commit wrote the memtable and a manifest, not the transaction's data again.
    let flushed = after.flushed_bytes - before.flushed_bytes;
    assert!(
        flushed < BUDGET as u64 / 2,
        "the commit flushed {flushed} bytes"
    );
    assert_eq!(contents(&db, t), model);
    db.compact().unwrap();
    assert_eq!(contents(&db, t), model);
    db.check().unwrap();
    db.close().unwrap();
    let db = Db::open_on(disk, options()).unwrap();
    assert_eq!(contents(&db, t), model);
    db.check().unwrap();
}

#[test]
fn aborting_a_spilled_transaction_leaves_nothing_and_frees_its_runs() {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap();
    let t = db.default_table();
    db.put(t, k(5), b"kept").unwrap();
    db.flush().unwrap();
    let live = db.stats().zones.live_bytes;
    let mut model = BTreeMap::new();
    let txn = big_transaction(&db, t, &mut model);
    assert!(db.stats().zones.live_bytes > live + 2 * BUDGET as u64);
    let started = Instant::now();
    txn.abort();
    let took = started.elapsed();
    assert_eq!(contents(&db, t), BTreeMap::from([(k(5), b"kept".to_vec())]));
    // Freed in the background.
    let deadline = Instant::now() + Duration::from_secs(10);
    while db.stats().zones.live_bytes > live + 4096 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        db.stats().zones.live_bytes <= live + 4096,
        "abort took {took:?}, space not freed"
    );
    db.check().unwrap();
}

#[test]
fn a_spilled_transaction_conflicts_like_any_other() {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap();
    let t = db.default_table();
    let mut model = BTreeMap::new();
    let txn = big_transaction(&db, t, &mut model);
    // A plain write of a key the transaction spilled long ago.
    db.put(t, k(7), b"first").unwrap();
    assert!(matches!(
        txn.commit(),
        Err(stitchdb::Error::Conflict { .. })
    ));
    assert_eq!(
        contents(&db, t),
        BTreeMap::from([(k(7), b"first".to_vec())])
    );
    // And the other way: a transaction that read a key a linked commit wrote.
    let mut reader = db.begin(Isolation::Serializable).unwrap();
    assert_eq!(reader.get(t, k(9)).unwrap(), None);
    reader.put(t, b"other", b"x").unwrap();
    let mut model = BTreeMap::new();
    big_transaction(&db, t, &mut model).commit().unwrap();
    assert!(matches!(
        reader.commit(),
        Err(stitchdb::Error::Conflict { .. })
    ));
}

#[test]
fn a_crash_anywhere_in_a_large_commit_leaves_it_whole_or_absent() {
    let mut images = 0;
    for seed in 0..40 {
        let disk = CrashingDisk::new(seed);
        let db = Db::create_on(disk.clone(), options()).unwrap();
        let t = db.default_table();
        for i in 0..50 {
            db.put(t, k(i), b"before").unwrap();
        }
        db.flush().unwrap();
        let before = contents(&db, t);
        let mut after = before.clone();
        *disk.probability.lock() = 0.25;
        let txn = big_transaction(&db, t, &mut after);
        txn.commit_with(Durability::Sync).unwrap();
        *disk.probability.lock() = 0.0;
        // A write after the commit: if it is there, the commit must be too.
        db.put(t, b"zz-after", b"1").unwrap();
        db.flush().unwrap();
        drop(db);
        for (image, _, _) in disk.images.lock().drain(..) {
            images += 1;
            let image: Arc<dyn Disk> = Arc::new(image);
            let db = Db::open_on(image, options()).unwrap();
            let mut now = contents(&db, t);
            now.remove(&b"zz-after"[..]);
            assert!(
                now == before || now == after,
                "seed {seed}: {} keys, neither before ({}) nor after ({})",
                now.len(),
                before.len(),
                after.len()
            );
            db.check().unwrap();
        }
    }
    assert!(images > 100, "only {images} crash images");
}
