//! Patchgroups through the database API: writes made while a group is engaged belong to it,
//! `sync` makes them durable without a store-wide sync, the sealing rule holds, and
//! engagement belongs to a context (a thread, or a `PatchContext` a surface enters) and ends
//! when its guard drops.
//!
//! `sync` also makes the log durable up to the group's newest record (recovery replays the
//! log as a prefix), and as a group commit may make later records durable with it: like
//! Featherstitch's `pg_sync` (§5), it promises the group's writes and what they follow are
//! durable, not that nothing else is. So a test that a write is *not* a group's makes the
//! group's writes durable first: a second sync then has nothing to make durable unless that
//! write joined the group.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use stitchdb::{Db, Durability, Error, Options, PatchContext, SimConfig, SimDisk, WriteBatch};

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
fn sync_makes_the_groups_writes_durable() {
    let sim = Arc::new(SimDisk::new(SimConfig {
        seed: 1,
        len: 0,
        capacity: None,
    }));
    let db = Db::create_on(sim.clone(), options()).unwrap();
    let g = db.patchgroup();
    let engaged = g.engage().unwrap();
    put(&db, "in-group");
    drop(engaged);
    // Nothing has made the Async write durable yet: some crashes lose it.
    let lost = (0..32).any(|seed| {
        let db = Db::open_on(Arc::new(sim.crash(seed)), options()).unwrap();
        db.get(db.default_table(), "in-group").unwrap().is_none()
    });
    assert!(
        lost,
        "an Async write is not durable before the group's sync"
    );
    g.sync().unwrap();
    for seed in 0..32 {
        let db = Db::open_on(Arc::new(sim.crash(seed)), options()).unwrap();
        assert_eq!(
            db.get(db.default_table(), "in-group").unwrap(),
            Some(b"v".to_vec()),
            "seed {seed}"
        );
    }
    g.close().unwrap();
}

#[test]
fn a_dependent_groups_writes_never_reach_the_disk_first() {
    let sim = Arc::new(SimDisk::new(SimConfig {
        seed: 2,
        len: 0,
        capacity: None,
    }));
    let db = Db::create_on(sim.clone(), options()).unwrap();
    let (p, q) = (db.patchgroup(), db.patchgroup());
    let engaged = p.engage().unwrap();
    put(&db, "first");
    drop(engaged);
    // P's changes are complete: Q may now depend on it (which seals P).
    q.depend_on(&p).unwrap();
    let engaged = q.engage().unwrap();
    put(&db, "second");
    drop(engaged);
    q.sync().unwrap();
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
    assert!(matches!(p.engage(), Err(Error::PatchGroup(_))));
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
    let (p, q) = (db.patchgroup(), db.patchgroup());
    let engaged = p.engage().unwrap();
    let mut txn = db.begin(stitchdb::Isolation::Serializable).unwrap();
    for i in 0..50 {
        txn.put(t, format!("txn{i:02}"), "v").unwrap();
    }
    txn.commit_with(Durability::Async).unwrap();
    drop(engaged);
    q.depend_on(&p).unwrap();
    let engaged = q.engage().unwrap();
    put(&db, "after-the-transaction");
    drop(engaged);
    q.sync().unwrap();
    for seed in 0..32 {
        let db = Db::open_on(Arc::new(sim.crash(seed)), options()).unwrap();
        assert!(db.get(t, "after-the-transaction").unwrap().is_some());
        let n = db.scan_prefix(t, b"txn").unwrap().count();
        assert_eq!(n, 50, "seed {seed}: the transaction is wholly there");
    }
}

fn sim(seed: u64) -> Arc<SimDisk> {
    Arc::new(SimDisk::new(SimConfig {
        seed,
        len: 0,
        capacity: None,
    }))
}

/// Whether some crash image of `sim` lacks `key`.
fn some_crash_loses(sim: &SimDisk, key: &str) -> bool {
    (0..32).any(|seed| {
        let db = Db::open_on(Arc::new(sim.crash(seed)), options()).unwrap();
        db.get(db.default_table(), key).unwrap().is_none()
    })
}

#[test]
fn engagement_ends_when_its_guard_drops() {
    let sim = sim(4);
    let db = Db::create_on(sim.clone(), options()).unwrap();
    let g = db.patchgroup();
    {
        let _engaged = g.engage().unwrap();
        put(&db, "while-engaged");
    }
    g.sync().unwrap();
    put(&db, "after-the-guard");
    g.sync().unwrap();
    assert!(!some_crash_loses(&sim, "while-engaged"));
    assert!(
        some_crash_loses(&sim, "after-the-guard"),
        "a write after the guard dropped is not the group's"
    );
    // Disengaged, the group may now be depended on (a group engaged anywhere may not).
    let h = db.patchgroup();
    let engaged = g.engage().unwrap();
    assert!(matches!(h.depend_on(&g), Err(Error::PatchGroup(_))));
    drop(engaged);
    h.depend_on(&g).unwrap();
}

#[test]
fn another_threads_writes_are_not_the_groups() {
    let sim = sim(5);
    let db = Db::create_on(sim.clone(), options()).unwrap();
    let g = db.patchgroup();
    let engaged = g.engage().unwrap();
    put(&db, "this-thread");
    g.sync().unwrap();
    std::thread::scope(|s| {
        s.spawn(|| put(&db, "other-thread"));
    });
    drop(engaged);
    g.sync().unwrap();
    assert!(!some_crash_loses(&sim, "this-thread"));
    assert!(
        some_crash_loses(&sim, "other-thread"),
        "the other thread's context has nothing engaged"
    );
}

#[test]
fn a_context_entered_by_several_threads_orders_all_their_writes() {
    // One context per client: requests of one client served by two threads both belong to
    // the group the client engaged; another client's requests do not.
    let sim = sim(6);
    let db = Db::create_on(sim.clone(), options()).unwrap();
    let (client, other_client) = (PatchContext::new(), PatchContext::new());
    let g = db.patchgroup();
    let engaged = g.engage_in(&client).unwrap();
    std::thread::scope(|s| {
        for i in 0..2 {
            let (db, client) = (&db, client.clone());
            s.spawn(move || {
                let _serving = client.enter();
                put(db, &format!("client-{i}"));
            });
        }
    });
    // After the client's writes are durable, so that the log's order does not make the other
    // client's durable with them.
    g.sync().unwrap();
    std::thread::scope(|s| {
        let (db, other_client) = (&db, other_client.clone());
        s.spawn(move || {
            let _serving = other_client.enter();
            put(db, "other-client");
        });
    });
    {
        let _serving = other_client.enter();
        put(&db, "other-client-here");
    }
    drop(engaged);
    g.sync().unwrap();
    assert!(!some_crash_loses(&sim, "client-0"));
    assert!(!some_crash_loses(&sim, "client-1"));
    assert!(some_crash_loses(&sim, "other-client"));
    assert!(
        some_crash_loses(&sim, "other-client-here"),
        "this thread, while in the other client's context, is not the client's"
    );
}

#[test]
fn a_write_in_a_context_with_nothing_engaged_does_not_join_another_contexts_group() {
    // q follows p and is engaged in context a; a write from context b, engaging nothing, is
    // neither q's nor p's: syncing q makes p's write durable and leaves b's free to be lost.
    // (That b's write does not wait for q's dependencies either is tested at the patch layer,
    // `stitch-patch/tests/groups.rs`: here the log's order would hide it.)
    let sim = sim(7);
    let db = Db::create_on(sim.clone(), options()).unwrap();
    let (a, b) = (PatchContext::new(), PatchContext::new());
    let (p, q) = (db.patchgroup(), db.patchgroup());
    {
        let _in_a = a.enter();
        let _engaged = p.engage().unwrap();
        put(&db, "p-write");
    }
    // Durable now, so that syncing q below has nothing of the log to make durable unless
    // b's write joined q.
    p.sync().unwrap();
    q.depend_on(&p).unwrap();
    let q_in_a = q.engage_in(&a).unwrap();
    {
        let _in_b = b.enter();
        put(&db, "b-write");
    }
    drop(q_in_a);
    q.sync().unwrap();
    assert!(!some_crash_loses(&sim, "p-write"));
    assert!(
        some_crash_loses(&sim, "b-write"),
        "b's write is not q's, so syncing q need not make it durable"
    );
}
