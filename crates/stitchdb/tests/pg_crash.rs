//! Patchgroup ordering across crashes, through the calls the file system's control
//! directory makes (`Db::pg_*` with a `PatchContext` per client process): the mail move of
//! Featherstitch §8.5 on a simulated disk. Each move puts `dst/K` in a group, then deletes
//! `src/K` in a group depending on it (the next move's group depending on that one), with
//! no sync; another client's unordered commits have the log written now and then, and a
//! group is synced now and then. Crash images are taken at random writes and syncs of the
//! disk (`CrashingDisk`). Each, reopened: a move's delete is there only
//! with its copy, and a later move only with the earlier ones.
//!
//! STITCHDB_PG_CRASH_STATES sets how many crash states to check (default 400).

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use stitchdb::{Db, Durability, GroupId, Options, PatchContext, WriteBatch};
use support::CrashingDisk;

fn options() -> Options {
    Options {
        zone_size: 64 * 1024,
        background: false,
        ..Options::default()
    }
}

fn key(dir: &str, k: usize) -> String {
    format!("{dir}/{k:04}")
}

/// Runs `f` as one commit of the client whose context is `ctx`.
fn commit(db: &Db, ctx: &Arc<PatchContext>, how: Durability, f: impl FnOnce(&mut WriteBatch)) {
    let _in = ctx.enter();
    let mut b = WriteBatch::new();
    f(&mut b);
    db.write(&b, how).unwrap();
}

/// Checks crash image `db`; returns how many moves it holds (their deletes there).
fn check(db: &Db, moves: usize, what: &str) -> usize {
    let t = db.default_table();
    let has = |k: String| db.get(t, k).unwrap().is_some();
    let mut done = 0;
    let mut gap = false;
    for k in 0..moves {
        let (copied, deleted) = (has(key("dst", k)), !has(key("src", k)));
        assert!(copied || !deleted, "{what}: move {k} lost its message");
        // A move's copy is in a group after the previous move's delete, its delete in one
        // after its copy: what the image holds of the moves is a prefix of them.
        assert!(
            !(gap && copied),
            "{what}: move {k} is there, an earlier one is not"
        );
        if deleted {
            done += 1;
        }
        gap |= !deleted;
    }
    done
}

#[test]
fn a_dependent_groups_writes_are_never_durable_without_the_ones_it_follows() {
    let states: usize = support::env_count("STITCHDB_PG_CRASH_STATES", 400);
    let moves = 40;
    let (mut checked, mut partial, mut run) = (0, 0, 0u64);
    while checked < states {
        run += 1;
        let disk = CrashingDisk::new(run);
        let db = Db::create_on(disk.clone(), options()).unwrap();
        let mut b = WriteBatch::new();
        for k in 0..moves {
            b.put(db.default_table(), key("src", k), "message");
        }
        db.write(&b, Durability::Sync).unwrap();
        // From here on a crash image is taken at a third of the disk's writes and syncs.
        *disk.probability.lock() = 0.3;
        // The mail server, as the control directory serves one process.
        let ctx = PatchContext::new();
        let mut prev: Option<GroupId> = None;
        for k in 0..moves {
            let copy = db.pg_create();
            if let Some(p) = prev {
                db.pg_depend(copy, p).unwrap();
                db.pg_close(p).unwrap();
            }
            db.pg_engage(&ctx, copy).unwrap();
            commit(&db, &ctx, Durability::Async, |b| {
                b.put(db.default_table(), key("dst", k), "message")
            });
            db.pg_disengage(&ctx, copy).unwrap();
            let unlink = db.pg_create();
            db.pg_depend(unlink, copy).unwrap();
            db.pg_close(copy).unwrap();
            db.pg_engage(&ctx, unlink).unwrap();
            commit(&db, &ctx, Durability::Async, |b| {
                b.delete(db.default_table(), key("src", k))
            });
            db.pg_disengage(&ctx, unlink).unwrap();
            // Another client's unordered commits interleave with the groups' in the log, and
            // have it written (and synced) now and then.
            let other = PatchContext::new();
            let how = if k % 5 == 4 {
                Durability::Written
            } else {
                Durability::Async
            };
            commit(&db, &other, how, |b| {
                b.put(db.default_table(), format!("other/{k}"), "x")
            });
            if k % 13 == 12 {
                db.pg_sync(unlink).unwrap();
            }
            prev = Some(unlink);
        }
        if let Some(p) = prev {
            db.pg_sync(p).unwrap();
            db.pg_close(p).unwrap();
        }
        drop(db);
        for (i, (image, _, _)) in disk.images.lock().drain(..).enumerate() {
            let what = format!("run {run}, image {i}");
            let done = check(
                &Db::open_on(Arc::new(image), options()).unwrap(),
                moves,
                &what,
            );
            partial += usize::from(done < moves);
            checked += 1;
        }
    }
    // Not vacuous: some crash states hold only some of the moves.
    assert!(
        partial > 0,
        "every crash state held every move ({checked} checked)"
    );
}
