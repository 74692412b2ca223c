//! Patchgroups through the database API: writes made while a group is engaged belong to it,
//! `pg_sync` makes exactly them durable without a store-wide sync, and the sealing rule holds.

use std::sync::Arc;
use stitchdb::{Db, Durability, Error, Options, SimConfig, SimDisk, WriteBatch};

fn options() -> Options {
    Options {
        zone_size: 64 * 1024,
        background: false,
        ..Options::default()
    }
}

fn put(db: &Db, key: &str) {
    let mut b = WriteBatch::new();
    b.put(db.default_table(), key, "v");
    db.write(&b, Durability::Async).unwrap();
}

#[test]
fn pg_sync_makes_the_groups_writes_durable() {
    let sim = Arc::new(SimDisk::new(SimConfig {
        seed: 1,
        len: 0,
        capacity: None,
    }));
    let db = Db::create_on(sim.clone(), options()).unwrap();
    let g = db.pg_create();
    db.pg_engage(g).unwrap();
    put(&db, "in-group");
    db.pg_disengage(g).unwrap();
    // Nothing has made the Async write durable yet: some crashes lose it.
    let lost = (0..32).any(|seed| {
        let db = Db::open_on(Arc::new(sim.crash(seed)), options()).unwrap();
        db.get(db.default_table(), "in-group").unwrap().is_none()
    });
    assert!(lost, "an Async write is not durable before pg_sync");
    db.pg_sync(g).unwrap();
    for seed in 0..32 {
        let db = Db::open_on(Arc::new(sim.crash(seed)), options()).unwrap();
        assert_eq!(
            db.get(db.default_table(), "in-group").unwrap(),
            Some(b"v".to_vec()),
            "seed {seed}"
        );
    }
    db.pg_close(g).unwrap();
}

#[test]
fn a_dependent_groups_writes_never_reach_the_disk_first() {
    let sim = Arc::new(SimDisk::new(SimConfig {
        seed: 2,
        len: 0,
        capacity: None,
    }));
    let db = Db::create_on(sim.clone(), options()).unwrap();
    let (p, q) = (db.pg_create(), db.pg_create());
    db.pg_engage(p).unwrap();
    put(&db, "first");
    db.pg_disengage(p).unwrap();
    // P's changes are complete: Q may now depend on it (which seals P).
    db.pg_depend(q, p).unwrap();
    db.pg_engage(q).unwrap();
    put(&db, "second");
    db.pg_disengage(q).unwrap();
    db.pg_sync(q).unwrap();
    for seed in 0..32 {
        let db = Db::open_on(Arc::new(sim.crash(seed)), options()).unwrap();
        let t = db.default_table();
        assert!(db.get(t, "second").unwrap().is_some(), "q was synced");
        assert!(
            db.get(t, "first").unwrap().is_some(),
            "q's writes imply p's"
        );
    }
    // Sealing: p has a dependent now and can never be engaged again.
    assert!(matches!(db.pg_engage(p), Err(Error::PatchGroup(_))));
}

#[test]
fn a_transaction_commit_is_ordered_by_patchgroups_like_any_write() {
    let sim = Arc::new(SimDisk::new(SimConfig {
        seed: 3,
        len: 0,
        capacity: None,
    }));
    let db = Db::create_on(sim.clone(), options()).unwrap();
    let t = db.default_table();
    let (p, q) = (db.pg_create(), db.pg_create());
    db.pg_engage(p).unwrap();
    let mut txn = db.begin(stitchdb::Isolation::Serializable).unwrap();
    for i in 0..50 {
        txn.put(t, format!("txn{i:02}"), "v").unwrap();
    }
    txn.commit_with(Durability::Async).unwrap();
    db.pg_disengage(p).unwrap();
    db.pg_depend(q, p).unwrap();
    db.pg_engage(q).unwrap();
    put(&db, "after-the-transaction");
    db.pg_disengage(q).unwrap();
    db.pg_sync(q).unwrap();
    for seed in 0..32 {
        let db = Db::open_on(Arc::new(sim.crash(seed)), options()).unwrap();
        assert!(db.get(t, "after-the-transaction").unwrap().is_some());
        let n = db.scan_prefix(t, b"txn").unwrap().count();
        assert_eq!(n, 50, "seed {seed}: the transaction is wholly there");
    }
}
