//! A range rewritten in order after random writes scattered single keys over it (what a file
//! system does when the kernel writes a file's dirty pages back after random writes): merges
//! stitch the rewrite where it lies and drop the stale versions it shadows, instead of
//! copying the whole rewrite to drop them. A snapshot taken before the rewrite keeps the
//! versions it sees.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::ops::Bound;
use stitchdb::{Db, Durability, MemDisk, Options, WriteBatch};
use support::table_contents;

const KEYS: u32 = 2_000;

fn options() -> Options {
    Options {
        memtable_size: 256 * 1024,
        durability: Durability::Async,
        background: false,
        ..Options::default()
    }
}

/// Puts `keys` with values of 4,000 bytes `fill` (about one to a 4 KiB block, as KVFS's
/// file blocks), 50 to a batch, into `model` as well.
fn put(db: &Db, keys: &[u32], fill: u8, model: &mut Model) {
    let t = db.default_table();
    for chunk in keys.chunks(50) {
        let mut batch = WriteBatch::new();
        for &k in chunk {
            let key = k.to_be_bytes().to_vec();
            let value = vec![fill; 4000];
            batch.put(t, key.clone(), value.clone());
            model.insert(key, value);
        }
        db.write(&batch, Durability::Async).unwrap();
    }
}

/// A store holding the range written in order, then every seventh key rewritten (in a
/// scattered order), then the range rewritten in order, each stage flushed.
type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn rewritten(snapshot_before_rewrite: bool) -> (Db, Model, Model) {
    let db = Db::create_on(std::sync::Arc::new(MemDisk::new(0)), options()).unwrap();
    let mut model = BTreeMap::new();
    let all: Vec<u32> = (0..KEYS).collect();
    put(&db, &all, 1, &mut model);
    db.flush().unwrap();
    db.compact().unwrap();
    let mut scattered: Vec<u32> = (0..KEYS).step_by(7).collect();
    scattered.reverse();
    put(&db, &scattered, 2, &mut model);
    db.flush().unwrap();
    let before = model.clone();
    if snapshot_before_rewrite {
        db.snapshot("before").unwrap();
    }
    put(&db, &all, 3, &mut model);
    db.flush().unwrap();
    (db, before, model)
}

#[test]
fn a_rewrite_over_scattered_stale_keys_is_stitched_not_copied() {
    let (db, _, model) = rewritten(false);
    let copied_before = db.stats().merge_copied_bytes;
    db.compact().unwrap();
    let s = db.stats();
    let rewrite_bytes = u64::from(KEYS) * 4000;
    // What is copied is at most a few blocks where memtable flushes split the rewrite.
    let copied = s.merge_copied_bytes - copied_before;
    assert!(
        copied < rewrite_bytes / 20,
        "copied {copied} of {rewrite_bytes}: {s}"
    );
    assert!(table_contents(&db, db.default_table()) == model);
    db.check().unwrap();
}

#[test]
fn a_snapshot_from_before_the_rewrite_keeps_what_it_sees() {
    let (db, before, model) = rewritten(true);
    db.compact().unwrap();
    assert!(table_contents(&db, db.default_table()) == model);
    let snap = db.open_snapshot("before").unwrap();
    let t = db.default_table();
    let seen: BTreeMap<Vec<u8>, Vec<u8>> = snap
        .range(t, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(seen == before);
    db.check().unwrap();
}
