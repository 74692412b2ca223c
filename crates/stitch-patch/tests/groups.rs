//! Patchgroups: the rules of Featherstitch's Fig. 5, durability of `pg_sync`, the ordering
//! between groups on crashed disk images, and engagement per context.

#![allow(clippy::unwrap_used)]

mod support;

use parking_lot::Mutex;
use std::sync::Arc;
use stitch_io::{CountingDisk, DiskRequest};
use stitch_patch::{
    BlockCache, GroupId, PatchContext, PatchGroupError, PatchGroups, PatchId, PatchState,
};
use support::{read_disk, setup, BLOCK};

/// A write as an application makes it: carrying the groups engaged in the calling thread's
/// current context along.
fn write(cache: &BlockCache, groups: &PatchGroups, offset: u64, data: &[u8]) -> PatchId {
    let engaged = PatchContext::with_current(|ctx| groups.engaged(ctx));
    let deps = engaged.as_ref().map_or(&[][..], |e| e.deps());
    let patch = cache.write(offset, data, deps).unwrap();
    if let Some(engaged) = &engaged {
        groups.adopt(engaged, patch, 0);
    }
    patch
}

/// Engages `group` in the calling thread's current context.
fn engage(groups: &PatchGroups, group: GroupId) -> Result<(), PatchGroupError> {
    groups.pg_engage(&PatchContext::current(), group)
}

fn disengage(groups: &PatchGroups, group: GroupId) -> Result<(), PatchGroupError> {
    groups.pg_disengage(&PatchContext::current(), group)
}

fn setup_groups(
    blocks: u64,
) -> (
    Arc<stitch_io::SimDisk>,
    Arc<CountingDisk>,
    Arc<BlockCache>,
    PatchGroups,
) {
    let (sim, counting, cache) = setup(blocks);
    let groups = PatchGroups::new(cache.clone());
    (sim, counting, cache, groups)
}

#[test]
fn a_group_something_depends_on_is_sealed() {
    let (_sim, _counting, _cache, groups) = setup_groups(4);
    let (p, q) = (groups.pg_create(), groups.pg_create());
    engage(&groups, p).unwrap();
    assert_eq!(
        groups.pg_depend(q, p),
        Err(PatchGroupError::Engaged(p)),
        "p's writes are not complete yet"
    );
    disengage(&groups, p).unwrap();
    groups.pg_depend(q, p).unwrap();
    assert_eq!(engage(&groups, p), Err(PatchGroupError::Sealed(p)));
    // A sealed group cannot gain dependencies either, so no cycle can be built.
    assert_eq!(
        groups.pg_depend(p, q),
        Err(PatchGroupError::DependenciesFixed(p))
    );
    engage(&groups, q).unwrap();
}

#[test]
fn dependencies_come_before_the_first_engagement() {
    let (_sim, _counting, _cache, groups) = setup_groups(4);
    let (p, q) = (groups.pg_create(), groups.pg_create());
    engage(&groups, q).unwrap();
    disengage(&groups, q).unwrap();
    assert_eq!(
        groups.pg_depend(q, p),
        Err(PatchGroupError::DependenciesFixed(q))
    );
    assert_eq!(
        groups.pg_depend(p, p),
        Err(PatchGroupError::SelfDependency(p))
    );
    let gone = GroupId(999);
    assert_eq!(
        groups.pg_depend(p, gone),
        Err(PatchGroupError::Unknown(gone))
    );
    groups.pg_close(p).unwrap();
    assert_eq!(engage(&groups, p), Err(PatchGroupError::Unknown(p)));
    assert_eq!(groups.pg_close(p), Err(PatchGroupError::Unknown(p)));
    assert_eq!(groups.pg_sync(p), Err(PatchGroupError::Unknown(p)));
}

#[test]
fn pg_sync_makes_the_groups_writes_durable_and_the_group_stays_usable() {
    let (sim, _counting, cache, groups) = setup_groups(8);
    let p = groups.pg_create();
    engage(&groups, p).unwrap();
    let first = write(&cache, &groups, 0, &[1; 100]);
    let second = write(&cache, &groups, 3 * BLOCK, &[2; 100]);
    let outside = cache.write(6 * BLOCK, &[3; 100], &[]).unwrap();
    groups.pg_sync(p).unwrap();
    assert_eq!(cache.state(first), PatchState::Committed);
    assert_eq!(cache.state(second), PatchState::Committed);
    assert_eq!(
        cache.state(outside),
        PatchState::Pending,
        "not part of the group"
    );
    for seed in 0..10 {
        let crashed = sim.crash(seed);
        assert_eq!(read_disk(&crashed, 0, 100), vec![1; 100]);
        assert_eq!(read_disk(&crashed, 3 * BLOCK, 100), vec![2; 100]);
    }
    // Still engaged: its committed head is replaced by a new one for the next writes.
    let third = write(&cache, &groups, 5 * BLOCK, &[4; 100]);
    groups.pg_sync(p).unwrap();
    assert_eq!(cache.state(third), PatchState::Committed);
    assert_eq!(read_disk(&sim.crash(99), 5 * BLOCK, 100), vec![4; 100]);
}

#[test]
fn a_group_reaches_the_disk_only_after_the_groups_it_depends_on() {
    // p writes blocks 0..4, q (after p) blocks 4..8, r (after q, which writes nothing itself
    // after a first round) blocks 8..10; flushed with crashes after every write and sync.
    let (sim, counting, cache, groups) = setup_groups(12);
    let (p, q, r) = (groups.pg_create(), groups.pg_create(), groups.pg_create());
    let empty = groups.pg_create();
    engage(&groups, p).unwrap();
    for i in 0..4 {
        write(&cache, &groups, i * BLOCK + 100, &[1; 300]);
    }
    disengage(&groups, p).unwrap();
    groups.pg_depend(q, p).unwrap();
    engage(&groups, q).unwrap();
    assert_eq!(groups.pg_depend(empty, q), Err(PatchGroupError::Engaged(q)));
    for i in 4..8 {
        write(&cache, &groups, i * BLOCK, &[2; 300]);
    }
    // Overwriting p's bytes on block 0 while q is engaged: ordered after p as well.
    write(&cache, &groups, 150, &[2; 10]);
    disengage(&groups, q).unwrap();
    groups.pg_depend(empty, q).unwrap();
    groups.pg_depend(r, empty).unwrap();
    engage(&groups, r).unwrap();
    write(&cache, &groups, 8 * BLOCK, &[3; 300]);
    write(&cache, &groups, 9 * BLOCK + 4000, &[3; 300]);
    disengage(&groups, r).unwrap();

    let present = |image: &[u8], value: u8, blocks: std::ops::Range<u64>| -> (bool, bool) {
        let bytes: Vec<bool> = blocks
            .map(|b| image[(b * BLOCK) as usize + 200] == value)
            .collect();
        (bytes.iter().any(|&x| x), bytes.iter().all(|&x| x))
    };
    let violations = Arc::new(Mutex::new(Vec::new()));
    let (hook_sim, sink) = (sim.clone(), violations.clone());
    let mut seed = 0;
    counting.set_hook(move |op| {
        // Crash after every write and sync (reads change nothing).
        if matches!(op, DiskRequest::Read { .. }) {
            return;
        }
        for _ in 0..8 {
            seed += 1;
            let image = read_disk(&hook_sim.crash(seed), 0, (12 * BLOCK) as usize);
            let (p_any, p_all) = present(&image, 1, 0..4);
            let (q_any, q_all) = present(&image, 2, 4..8);
            let (r_any, _) = present(&image, 3, 8..9);
            if (q_any && !p_all) || (r_any && !q_all) || (image[150] == 2 && !p_all) {
                sink.lock().push(format!(
                    "crash {seed}: p {p_any}/{p_all} q {q_any}/{q_all} r {r_any}"
                ));
            }
        }
    });
    groups.pg_sync(r).unwrap();
    assert_eq!(*violations.lock(), Vec::<String>::new());
    assert!(
        counting.syncs() >= 3,
        "three groups in a chain need three rounds"
    );
    let image = read_disk(&*sim, 0, (12 * BLOCK) as usize);
    assert_eq!(
        (
            image[200],
            image[150],
            image[4 * BLOCK as usize],
            image[8 * BLOCK as usize]
        ),
        (1, 2, 2, 3)
    );
}

#[test]
fn a_contexts_engagement_orders_every_thread_that_enters_it() {
    let (_sim, _counting, cache, groups) = setup_groups(8);
    let groups = Arc::new(groups);
    let ctx = PatchContext::new();
    let p = groups.pg_create();
    groups.pg_engage(&ctx, p).unwrap();
    let patches: Vec<PatchId> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4u64)
            .map(|t| {
                let (cache, groups, ctx) = (cache.clone(), groups.clone(), ctx.clone());
                s.spawn(move || {
                    let _entered = ctx.enter();
                    write(&cache, &groups, t * BLOCK, &[t as u8; 10])
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    groups.pg_sync(p).unwrap();
    assert!(patches
        .iter()
        .all(|&w| cache.state(w) == PatchState::Committed));
}

#[test]
fn two_threads_never_see_each_others_engagement() {
    let (_sim, _counting, _cache, groups) = setup_groups(8);
    let p = groups.pg_create();
    engage(&groups, p).unwrap();
    assert!(PatchContext::with_current(|ctx| groups.engaged(ctx)).is_some());
    std::thread::scope(|s| {
        s.spawn(|| {
            assert_eq!(
                PatchContext::with_current(|ctx| groups.engaged(ctx)),
                None,
                "another thread's own context has nothing engaged"
            );
        });
    });
    disengage(&groups, p).unwrap();
    assert_eq!(PatchContext::with_current(|ctx| groups.engaged(ctx)), None);
}

#[test]
fn two_contexts_never_see_each_others_engagement_and_entering_nests() {
    let (_sim, _counting, _cache, groups) = setup_groups(8);
    let (a, b) = (PatchContext::new(), PatchContext::new());
    let (p, q) = (groups.pg_create(), groups.pg_create());
    groups.pg_engage(&a, p).unwrap();
    groups.pg_engage(&b, q).unwrap();
    let engaged_p = groups.engaged(&a).unwrap();
    let engaged_q = groups.engaged(&b).unwrap();
    assert_eq!(engaged_p.deps().len(), 1);
    assert_ne!(
        engaged_p.deps(),
        engaged_q.deps(),
        "each sees only its own group"
    );
    {
        let _in_a = a.enter();
        assert_eq!(
            PatchContext::with_current(|c| groups.engaged(c)),
            Some(engaged_p.clone())
        );
        {
            let _in_b = b.enter();
            assert_eq!(
                PatchContext::with_current(|c| groups.engaged(c)),
                Some(engaged_q)
            );
        }
        assert_eq!(
            PatchContext::with_current(|c| groups.engaged(c)),
            Some(engaged_p),
            "leaving b returns to a"
        );
    }
    assert_eq!(
        PatchContext::with_current(|c| groups.engaged(c)),
        None,
        "leaving a returns to the thread's own context"
    );
    // An engagement in either context counts for the sealing rules.
    let r = groups.pg_create();
    assert_eq!(groups.pg_depend(r, p), Err(PatchGroupError::Engaged(p)));
    groups.pg_disengage(&a, p).unwrap();
    groups.pg_depend(r, p).unwrap();
}

#[test]
fn a_write_in_a_context_with_nothing_engaged_is_not_ordered_by_another_contexts_group() {
    // p follows o, whose write to block 0 has not reached the disk, and p is engaged in
    // context a: a write there waits for o's. A write from context b, which engages
    // nothing, waits for nothing: syncing it leaves o's write pending.
    let (_sim, _counting, cache, groups) = setup_groups(8);
    let (a, b) = (PatchContext::new(), PatchContext::new());
    let (o, p) = (groups.pg_create(), groups.pg_create());
    groups.pg_engage(&a, o).unwrap();
    let in_o = {
        let _in_a = a.enter();
        write(&cache, &groups, 0, &[1; 10])
    };
    groups.pg_disengage(&a, o).unwrap();
    groups.pg_depend(p, o).unwrap();
    groups.pg_engage(&a, p).unwrap();
    let outside = {
        let _in_b = b.enter();
        write(&cache, &groups, 4 * BLOCK, &[2; 10])
    };
    cache.flush_patch(outside).unwrap();
    assert_eq!(cache.state(outside), PatchState::Committed);
    assert_eq!(
        cache.state(in_o),
        PatchState::Pending,
        "b's write does not carry p"
    );
    // The same write from a does carry p, so syncing it makes o's write durable first.
    let in_p = {
        let _in_a = a.enter();
        write(&cache, &groups, 5 * BLOCK, &[3; 10])
    };
    cache.flush_patch(in_p).unwrap();
    assert_eq!(cache.state(in_o), PatchState::Committed);
}

#[test]
fn a_closed_group_orders_nothing_more_and_its_engagements_can_still_end() {
    let (_sim, _counting, _cache, groups) = setup_groups(8);
    let ctx = PatchContext::new();
    let p = groups.pg_create();
    groups.pg_engage(&ctx, p).unwrap();
    groups.pg_close(p).unwrap();
    assert_eq!(groups.engaged(&ctx), None);
    assert_eq!(
        groups.pg_disengage(&ctx, p),
        Err(PatchGroupError::Unknown(p))
    );
    assert_eq!(groups.engaged(&ctx), None);
}
