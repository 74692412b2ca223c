//! `pg_sync` and the log's order: a group's records are replayable only with every record
//! before them in the log, since recovery reads the log as a prefix. A commit made with no
//! group engaged (or in another group, from another context) between two of a group's commits
//! may still be in the log's memory, or in the cache as a patch of its own the group's writes
//! do not depend on; `pg_sync` must make it durable too, or a crash right after the sync
//! loses the group's later writes although the sync returned.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use stitchdb::{Db, Durability, Options, PatchContext, SimConfig, SimDisk, WriteBatch};

fn options(background: bool) -> Options {
    Options {
        zone_size: 64 * 1024,
        background,
        ..Options::default()
    }
}

fn sim(seed: u64) -> Arc<SimDisk> {
    Arc::new(SimDisk::new(SimConfig {
        seed,
        len: 0,
        capacity: None,
    }))
}

fn put(db: &Db, key: &str, len: usize, how: Durability) {
    let mut b = WriteBatch::new();
    b.put(db.default_table(), key, vec![b'v'; len]);
    db.write(&b, how).unwrap();
}

/// Checks that every crash image of `sim` taken now holds `keys`.
fn every_crash_holds(sim: &SimDisk, background: bool, keys: &[String], what: &str) {
    for seed in 0..16 {
        let db = Db::open_on(Arc::new(sim.crash(seed)), options(background)).unwrap();
        for k in keys {
            assert!(
                db.get(db.default_table(), k).unwrap().is_some(),
                "{what}, crash seed {seed}: {k} was synced with its group but is lost"
            );
        }
    }
}

/// Commits in group G interleaved with `between` ungrouped commits of `len` bytes each
/// (durability `how`) after each of G's, `rounds` times; then `pg_sync(G)` and crashes.
fn grouped_around_ungrouped(
    seed: u64,
    background: bool,
    rounds: usize,
    between: usize,
    len: usize,
    how: Durability,
) {
    let what = format!(
        "seed {seed}, background {background}, {rounds} rounds of {between} x {len} B {how:?}"
    );
    let sim = sim(seed);
    let db = Db::create_on(sim.clone(), options(background)).unwrap();
    let g = db.patchgroup();
    let mut in_group = Vec::new();
    for r in 0..rounds {
        let key = format!("g/{r:03}");
        {
            let _engaged = g.engage().unwrap();
            put(&db, &key, 16, Durability::Async);
        }
        in_group.push(key);
        for i in 0..between {
            put(&db, &format!("other/{r:03}/{i:03}"), len, how);
        }
    }
    {
        let _engaged = g.engage().unwrap();
        put(&db, "g/last", 16, Durability::Async);
    }
    in_group.push("g/last".to_string());
    g.sync().unwrap();
    every_crash_holds(&sim, background, &in_group, &what);
}

#[test]
fn a_synced_groups_writes_survive_small_ungrouped_commits_between_them() {
    for background in [false, true] {
        for how in [Durability::Async, Durability::Ordered] {
            grouped_around_ungrouped(1, background, 1, 1, 16, how);
            grouped_around_ungrouped(2, background, 5, 3, 100, how);
        }
    }
}

#[test]
fn a_synced_groups_writes_survive_ungrouped_commits_filling_a_log_segment() {
    // The ungrouped records cross into the next log segment: B's record is written into the
    // cache with them, but the piece in the earlier segment is a patch of its own.
    for background in [false, true] {
        for how in [Durability::Async, Durability::Ordered] {
            grouped_around_ungrouped(3, background, 1, 20, 4000, how);
            grouped_around_ungrouped(4, background, 4, 9, 3000, how);
        }
    }
}

#[test]
fn a_synced_groups_writes_survive_ungrouped_records_already_in_the_cache() {
    // `Written` puts the ungrouped records into the cache (and the operating system's hands,
    // unsynced) as patches of their own, spanning blocks the group's records do not touch.
    for background in [false, true] {
        grouped_around_ungrouped(5, background, 1, 1, 9000, Durability::Written);
        grouped_around_ungrouped(6, background, 3, 2, 5000, Durability::Written);
    }
}

#[test]
fn a_synced_groups_writes_survive_another_groups_records_between_them() {
    // Another client's group H commits between G's commits: G's later records replay only
    // after H's, which pg_sync(G) must make durable too (H's ordering is not broken by that:
    // H's writes may always become durable early).
    for background in [false, true] {
        let sim = sim(7);
        let db = Db::create_on(sim.clone(), options(background)).unwrap();
        let (g, h) = (db.patchgroup(), db.patchgroup());
        let other = PatchContext::new();
        {
            let _engaged = g.engage().unwrap();
            put(&db, "g/first", 16, Durability::Async);
        }
        {
            let _in_other = other.enter();
            let _engaged = h.engage_in(&other).unwrap();
            for i in 0..20 {
                put(&db, &format!("h/{i:02}"), 4000, Durability::Async);
            }
        }
        {
            let _engaged = g.engage().unwrap();
            put(&db, "g/second", 16, Durability::Async);
        }
        g.sync().unwrap();
        every_crash_holds(
            &sim,
            background,
            &["g/first".to_string(), "g/second".to_string()],
            &format!("another group's records between, background {background}"),
        );
    }
}

#[test]
fn a_synced_dependent_groups_earlier_groups_writes_survive_ungrouped_commits() {
    // Q depends on P and has no writes of its own after the ungrouped ones: pg_sync(Q) makes
    // P's writes durable, and with them the log before them.
    for background in [false, true] {
        let sim = sim(8);
        let db = Db::create_on(sim.clone(), options(background)).unwrap();
        let (p, q) = (db.patchgroup(), db.patchgroup());
        {
            let _engaged = p.engage().unwrap();
            put(&db, "p/first", 16, Durability::Async);
        }
        for i in 0..20 {
            put(&db, &format!("other/{i:02}"), 4000, Durability::Async);
        }
        {
            let _engaged = p.engage().unwrap();
            put(&db, "p/second", 16, Durability::Async);
        }
        q.depend_on(&p).unwrap();
        drop(p);
        q.sync().unwrap();
        every_crash_holds(
            &sim,
            background,
            &["p/first".to_string(), "p/second".to_string()],
            &format!("q after p, background {background}"),
        );
    }
}

#[test]
fn a_synced_groups_writes_survive_ungrouped_commits_in_blocks_of_their_own() {
    // A synced ungrouped commit between: the buffered ungrouped records after it start in a
    // block none of G's records is in, and cross into the next segment, so the piece in the
    // earlier segment is a patch nothing of G's needs or shares a block with.
    for background in [false, true] {
        for how in [Durability::Async, Durability::Ordered] {
            let sim = sim(9);
            let db = Db::create_on(sim.clone(), options(background)).unwrap();
            let g = db.patchgroup();
            {
                let _engaged = g.engage().unwrap();
                put(&db, "g/first", 16, Durability::Async);
            }
            put(&db, "synced", 5000, Durability::Sync);
            for i in 0..20 {
                put(&db, &format!("other/{i:02}"), 4000, how);
            }
            {
                let _engaged = g.engage().unwrap();
                put(&db, "g/second", 16, Durability::Async);
            }
            g.sync().unwrap();
            every_crash_holds(
                &sim,
                background,
                &["g/first".to_string(), "g/second".to_string()],
                &format!("blocks of their own, background {background}, {how:?}"),
            );
        }
    }
}
