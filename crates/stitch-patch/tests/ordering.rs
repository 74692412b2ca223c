//! Write ordering: the fewest syncs, reverting, overlap dependencies, sectors and cycles
//! between blocks.

mod support;

use parking_lot::Mutex;
use std::sync::Arc;
use stitch_io::{CountingDisk, Disk, DiskRequest, MemDisk};
use stitch_patch::{PatchId, PatchState};
use support::{cache_on, read_cache, read_disk, setup, small_cache_on, BLOCK};

/// What the disk held after each sync, captured by the counting disk's hook.
fn images_after_syncs(
    counting: &CountingDisk,
    disk: Arc<dyn Disk>,
    len: usize,
) -> Arc<Mutex<Vec<Vec<u8>>>> {
    let images = Arc::new(Mutex::new(Vec::new()));
    let sink = images.clone();
    counting.set_hook(move |op| {
        if op == DiskRequest::Sync {
            sink.lock().push(read_disk(&*disk, 0, len));
        }
    });
    images
}

#[test]
fn independent_chains_flush_with_one_sync_per_link() {
    const CHAINS: u64 = 24;
    const LINKS: u64 = 5;
    let counting = Arc::new(CountingDisk::new(Arc::new(MemDisk::new(
        CHAINS * LINKS * BLOCK,
    ))));
    let cache = cache_on(counting.clone());
    let mut tips = Vec::new();
    for chain in 0..CHAINS {
        let mut prev = PatchId::NONE;
        for link in 0..LINKS {
            // Link `link` of every chain lies in one run of adjacent blocks.
            let block = link * CHAINS + chain;
            prev = cache
                .write(block * BLOCK, &[chain as u8 + 1; 64], &[prev])
                .unwrap();
        }
        tips.push(prev);
    }
    cache.flush_all().unwrap();
    assert_eq!(
        counting.syncs(),
        LINKS,
        "one sync per link, shared by all chains"
    );
    assert_eq!(
        counting.writes(),
        LINKS,
        "each round's adjacent blocks go in one request"
    );
    assert!(tips
        .iter()
        .all(|&t| cache.state(t) == PatchState::Committed));
    let stats = cache.stats();
    assert_eq!(
        (stats.syncs, stats.block_writes, stats.live_patches),
        (LINKS, CHAINS * LINKS, 0)
    );
}

#[test]
fn flushing_one_chain_writes_only_that_chain() {
    let counting = Arc::new(CountingDisk::new(Arc::new(MemDisk::new(64 * BLOCK))));
    let cache = cache_on(counting.clone());
    let mut tips = Vec::new();
    for chain in 0..4u64 {
        let mut prev = PatchId::NONE;
        for link in 0..3u64 {
            prev = cache
                .write((chain * 8 + link) * BLOCK, &[9; 10], &[prev])
                .unwrap();
        }
        tips.push(prev);
    }
    cache.flush_patch(tips[2]).unwrap();
    assert_eq!((counting.syncs(), counting.writes()), (3, 3));
    assert_eq!(cache.state(tips[2]), PatchState::Committed);
    assert_eq!(cache.state(tips[0]), PatchState::Pending);
    // A join of all the chains needs no more syncs than one chain.
    let all = cache.empty(&tips).unwrap();
    cache.flush_patch(all).unwrap();
    assert_eq!(counting.syncs(), 6);
    assert_eq!(cache.state(all), PatchState::Committed);
}

#[test]
fn nothing_to_write_means_no_sync() {
    let (_sim, counting, cache) = setup(4);
    cache.flush_all().unwrap();
    let committed_join = cache.empty(&[PatchId::NONE]).unwrap();
    assert_eq!(cache.state(committed_join), PatchState::Committed);
    cache.flush_patch(committed_join).unwrap();
    cache.flush_patch(PatchId::NONE).unwrap();
    assert_eq!((counting.syncs(), counting.writes()), (0, 0));
}

#[test]
fn unwritable_patches_are_reverted_from_the_block_image() {
    let (sim, counting, cache) = setup(4);
    let images = images_after_syncs(&counting, sim.clone(), 2 * BLOCK as usize);
    // On block 0, `late` must follow `first` on block 1; `early` has no dependencies.
    let first = cache.write(BLOCK, &[1; 100], &[]).unwrap();
    let late = cache.write(0, &[2; 100], &[first]).unwrap();
    let early = cache.write(200, &[3; 100], &[]).unwrap();
    assert_ne!(late, early);
    cache.flush_all().unwrap();
    let images = images.lock();
    assert_eq!(images.len(), 2);
    // First round: block 0 went out with `early` but `late` reverted.
    assert_eq!(&images[0][0..100], &[0; 100][..]);
    assert_eq!(&images[0][200..300], &[3; 100][..]);
    assert_eq!(&images[0][BLOCK as usize..][..100], &[1; 100][..]);
    // Second round: `late` too.
    assert_eq!(&images[1][0..100], &[2; 100][..]);
    assert!(cache.stats().reverts >= 1);
}

#[test]
fn cyclic_blocks_flush_without_deadlock() {
    // B:p1 depends on C:q1 while C:q2 depends on B:p0: neither block can go out whole first.
    let (sim, counting, cache) = setup(4);
    let images = images_after_syncs(&counting, sim.clone(), 2 * BLOCK as usize);
    let (b, c) = (0, BLOCK);
    let p0 = cache.write(b, &[1; 50], &[]).unwrap();
    let q1 = cache.write(c, &[2; 50], &[]).unwrap();
    let p1 = cache.write(b + 1000, &[3; 50], &[q1]).unwrap();
    let q2 = cache.write(c + 1000, &[4; 50], &[p0]).unwrap();
    cache.flush_all().unwrap();
    for p in [p0, q1, p1, q2] {
        assert_eq!(cache.state(p), PatchState::Committed);
    }
    assert_eq!(counting.syncs(), 2);
    // The bytes of p0, p1, q1 and q2.
    let probe = |image: &[u8]| [0, 1000, BLOCK as usize, BLOCK as usize + 1000].map(|at| image[at]);
    assert_eq!(
        probe(&images.lock()[0]),
        [1, 0, 2, 0],
        "first round: p0 and q1 only"
    );
    let disk = read_disk(&*sim, 0, 2 * BLOCK as usize);
    assert_eq!(probe(&disk), [1, 3, 2, 4]);
    assert_eq!(read_cache(&cache, 0, 2 * BLOCK as usize), disk);
}

#[test]
fn overlapping_writes_follow_the_patch_they_overwrite() {
    let (sim, counting, cache) = setup(4);
    let images = images_after_syncs(&counting, sim.clone(), BLOCK as usize);
    let elsewhere = cache.write(2 * BLOCK, &[9; 10], &[]).unwrap();
    let soft = cache.write(0, &[1; 100], &[elsewhere]).unwrap();
    // No explicit dependency, but it overwrites bytes of `soft`: it must not go out before it.
    let over = cache.write(50, &[2; 100], &[]).unwrap();
    assert_eq!(
        read_cache(&cache, 0, 150),
        [vec![1; 50], vec![2; 100]].concat()
    );
    cache.flush_patch(over).unwrap();
    assert_eq!(cache.state(soft), PatchState::Committed);
    let images = images.lock();
    // Round one wrote `elsewhere` only, with both overlapping patches reverted, newest first.
    assert_eq!(&images[0][..150], &[0; 150][..]);
    assert_eq!(
        &images.last().unwrap()[..150],
        &[vec![1; 50], vec![2; 100]].concat()[..]
    );
}

#[test]
fn a_dependency_in_the_same_sector_shares_the_write() {
    let (_sim, counting, cache) = setup(4);
    let a = cache.write(0, &[1; 10], &[]).unwrap();
    let b = cache.write(100, &[2; 10], &[a]).unwrap();
    assert_eq!(a, b, "merged: one sector is written atomically");
    cache.flush_all().unwrap();
    assert_eq!(counting.syncs(), 1);
    assert_eq!(cache.stats().patches_merged, 1);
}

#[test]
fn a_dependency_in_another_sector_of_the_block_needs_a_sync() {
    let (sim, counting, cache) = setup(4);
    let images = images_after_syncs(&counting, sim.clone(), BLOCK as usize);
    let a = cache.write(0, &[1; 10], &[]).unwrap();
    let b = cache.write(600, &[2; 10], &[a]).unwrap();
    assert_ne!(a, b, "a torn write could keep b's sector without a's");
    cache.flush_all().unwrap();
    assert_eq!(counting.syncs(), 2);
    let images = images.lock();
    assert_eq!((images[0][0], images[0][600]), (1, 0));
    assert_eq!((images[1][0], images[1][600]), (1, 2));
}

#[test]
fn soft_patches_in_one_sector_are_written_together_once_ready() {
    let (_sim, counting, cache) = setup(4);
    let elsewhere = cache.write(2 * BLOCK, &[9; 10], &[]).unwrap();
    let a = cache.write(0, &[1; 10], &[elsewhere]).unwrap();
    // Not adjacent to `a`, so not merged, but in its sector: the two can share a write.
    let b = cache.write(100, &[2; 10], &[a]).unwrap();
    assert_ne!(a, b);
    cache.flush_patch(b).unwrap();
    assert_eq!(counting.syncs(), 2, "elsewhere, then a and b together");
}

#[test]
fn log_appends_and_block_rewrites_collapse_into_one_patch() {
    let (_sim, _counting, cache) = setup(64);
    let mut offset = 0;
    for i in 0..1000u32 {
        let record = [i as u8; 100];
        cache.write(offset, &record, &[]).unwrap();
        offset += 100;
    }
    let stats = cache.stats();
    // Appends that wait for nothing join the pending patch of the block they start in, also
    // across blocks: the whole log is one hard patch.
    assert_eq!(stats.live_patches, 1, "{stats:?}");
    assert_eq!(stats.undo_bytes, 0);
    for _ in 0..10 {
        cache
            .write(40 * BLOCK, &[7; 4 * BLOCK as usize], &[])
            .unwrap();
    }
    let after = cache.stats();
    assert_eq!(
        after.live_patches - stats.live_patches,
        1,
        "one patch over the four blocks, which the rewrites join"
    );
    assert_eq!(after.undo_bytes, 0);
    cache.flush_all().unwrap();
    assert_eq!(read_cache(&cache, 40 * BLOCK, 10), vec![7; 10]);
}

#[test]
fn a_write_spanning_blocks_is_one_patch_and_goes_out_in_one_request() {
    let (sim, counting, cache) = setup(8);
    let data: Vec<u8> = (0..3 * BLOCK as usize).map(|i| (i % 251) as u8).collect();
    let patch = cache.write(BLOCK + 100, &data, &[]).unwrap();
    assert_eq!(cache.stats().live_patches, 1, "one patch over four blocks");
    assert_eq!(read_cache(&cache, BLOCK + 100, data.len()), data);
    cache.flush_patch(patch).unwrap();
    assert_eq!((counting.writes(), counting.syncs()), (1, 1));
    assert_eq!(read_disk(&*sim, BLOCK + 100, data.len()), data);
}

#[test]
fn a_write_spanning_blocks_that_waits_is_a_patch_per_block_and_a_join() {
    let (sim, counting, cache) = setup(8);
    let first = cache.write(7 * BLOCK, &[1; 10], &[]).unwrap();
    let data: Vec<u8> = (0..3 * BLOCK as usize).map(|i| (i % 251) as u8).collect();
    let join = cache.write(BLOCK + 100, &data, &[first]).unwrap();
    assert_eq!(
        cache.stats().live_patches,
        6,
        "the first write, four block patches and the join"
    );
    cache.flush_patch(join).unwrap();
    assert_eq!(counting.syncs(), 2);
    assert_eq!(read_disk(&*sim, BLOCK + 100, data.len()), data);
}

#[test]
fn a_patch_in_the_sector_where_a_spanning_patch_ends_waits_for_all_of_it() {
    // Two patches of one block may share a write when they lie in one sector, but a patch
    // spanning blocks is written with its other blocks, and a crash may keep this block's
    // write and lose theirs: its dependents wait for its sync.
    let (sim, counting, cache) = setup(8);
    let data = vec![3u8; 2 * BLOCK as usize];
    let span = cache.write(100, &data, &[]).unwrap();
    let end = 100 + data.len() as u64;
    let after = cache.write(end + 10, &[4; 10], &[span]).unwrap();
    assert_ne!(
        after, span,
        "an explicit dependency on a spanning patch never merges"
    );
    cache.flush_patch(after).unwrap();
    assert_eq!(
        counting.syncs(),
        2,
        "the spanning patch, then its dependent"
    );
    assert_eq!(read_disk(&*sim, 100, data.len()), data);
    assert_eq!(read_disk(&*sim, end + 10, 10), vec![4; 10]);
}

#[test]
fn flushing_one_patch_writes_every_block_of_a_spanning_patch_sharing_its_block() {
    // Flushing `wanted` writes its block, which a spanning patch also changes: that patch
    // is committed only with all its blocks on the disk.
    let (sim, _counting, cache) = setup(8);
    let elsewhere = cache.write(7 * BLOCK, &[1; 10], &[]).unwrap();
    let data: Vec<u8> = (0..2 * BLOCK as usize).map(|i| (i % 253) as u8).collect();
    let span = cache.write(100, &data, &[]).unwrap();
    let wanted = cache
        .write(2 * BLOCK + 1000, &[5; 10], &[elsewhere])
        .unwrap();
    assert_ne!(wanted, span);
    cache.flush_patch(wanted).unwrap();
    assert_eq!(cache.state(span), PatchState::Committed);
    assert_eq!(read_disk(&*sim, 100, data.len()), data);
    assert_eq!(read_disk(&*sim, 2 * BLOCK + 1000, 10), vec![5; 10]);
}

#[test]
fn dependencies_are_checked() {
    let (_sim, _counting, cache) = setup(4);
    let unknown = PatchId(1_000);
    assert_eq!(
        cache.write(0, &[1], &[unknown]),
        Err(stitch_patch::PatchError::UnknownPatch(unknown))
    );
    assert_eq!(
        cache.empty(&[unknown]),
        Err(stitch_patch::PatchError::UnknownPatch(unknown))
    );
    let p = cache.write(0, &[1], &[]).unwrap();
    let e1 = cache.empty(&[p]).unwrap();
    let e2 = cache.empty(&[e1]).unwrap();
    use stitch_patch::PatchError::{Cycle, Frozen, UnknownPatch};
    assert_eq!(
        cache.add_dependency(p, e1),
        Err(Frozen(p)),
        "block patches never gain dependencies"
    );
    assert_eq!(
        cache.add_dependency(e1, e2),
        Err(Cycle {
            after: e1,
            before: e2
        })
    );
    assert_eq!(
        cache.add_dependency(e1, e1),
        Err(Cycle {
            after: e1,
            before: e1
        })
    );
    assert_eq!(
        cache.add_dependency(e1, unknown),
        Err(UnknownPatch(unknown))
    );
    assert_eq!(
        cache.add_dependency(PatchId::NONE, p),
        Err(Frozen(PatchId::NONE))
    );
    let q = cache.write(BLOCK, &[2], &[]).unwrap();
    cache.add_dependency(e1, q).unwrap();
    cache.flush_patch(p).unwrap();
    assert_eq!(cache.state(e1), PatchState::Pending, "still waits for q");
    cache.flush_patch(e2).unwrap();
    assert_eq!(cache.state(q), PatchState::Committed);
    assert_eq!(cache.add_dependency(e1, p), Err(Frozen(e1)));
    assert_eq!(cache.flush_patch(unknown), Err(UnknownPatch(unknown)));
}

#[test]
fn actions_run_once_their_patch_commits() {
    let (_sim, _counting, cache) = setup(4);
    let log = Arc::new(Mutex::new(Vec::new()));
    let p = cache.write(0, &[1], &[]).unwrap();
    let q = cache.write(BLOCK, &[1], &[p]).unwrap();
    for (name, patch) in [("p", p), ("q", q)] {
        let log = log.clone();
        cache.when_committed(patch, Box::new(move || log.lock().push(name)));
    }
    assert!(log.lock().is_empty());
    cache.flush_patch(p).unwrap();
    assert_eq!(*log.lock(), vec!["p"]);
    // An action may itself use the cache (it runs outside its locks).
    let inner_cache = cache.clone();
    cache.when_committed(q, Box::new(move || inner_cache.flush_all().unwrap()));
    cache.flush_all().unwrap();
    assert_eq!(*log.lock(), vec!["p", "q"]);
    let late = log.clone();
    cache.when_committed(p, Box::new(move || late.lock().push("at once")));
    assert_eq!(log.lock().last(), Some(&"at once"));
}

#[test]
fn range_actions_wait_for_older_writes_in_the_range_too() {
    let (_sim, _counting, cache) = setup(4);
    let ran = Arc::new(Mutex::new(false));
    // An older write into the region, then a newer one elsewhere that commits first.
    let older = cache.write(2 * BLOCK + 10, &[1; 10], &[]).unwrap();
    let newer = cache.write(0, &[2], &[]).unwrap();
    let flag = ran.clone();
    cache.when_range_committed(
        2 * BLOCK,
        2 * BLOCK,
        newer,
        Box::new(move || *flag.lock() = true),
    );
    cache.flush_patch(newer).unwrap();
    assert_eq!(cache.state(older), PatchState::Pending);
    assert!(
        !*ran.lock(),
        "the older write into the range is not durable yet"
    );
    cache.flush_patch(older).unwrap();
    assert!(*ran.lock());
    // Nothing live in the range and the patch committed: at once.
    let at_once = Arc::new(Mutex::new(false));
    let flag = at_once.clone();
    cache.when_range_committed(0, BLOCK, newer, Box::new(move || *flag.lock() = true));
    assert!(*at_once.lock());
}

#[test]
fn reads_see_every_patch_and_survive_eviction() {
    let counting = Arc::new(CountingDisk::new(Arc::new(MemDisk::new(16 * BLOCK))));
    let cache = small_cache_on(counting.clone(), 2);
    // Bytes already on the disk, in a block the cache will have to load.
    counting.write_at(5 * BLOCK + 2000, &[99; 10]).unwrap();
    let mut expect = vec![0u8; 16 * BLOCK as usize];
    expect[5 * BLOCK as usize + 2000..][..10].fill(99);
    for block in 0..8u64 {
        let at = block * BLOCK + 4000;
        cache.write(at, &[block as u8 + 1; 200], &[]).unwrap();
        expect[at as usize..][..200].fill(block as u8 + 1);
    }
    assert_eq!(read_cache(&cache, 0, expect.len()), expect);
    cache.flush_all().unwrap();
    assert_eq!(read_cache(&cache, 0, expect.len()), expect);
    assert_eq!(read_disk(&*counting, 0, expect.len()), expect);
    assert_eq!(cache.stats().dirty_blocks, 0);
}

#[test]
fn ranges_past_the_disk_end_are_refused() {
    let (_sim, _counting, cache) = setup(2);
    assert!(matches!(
        cache.write(2 * BLOCK - 1, &[1, 2], &[]),
        Err(stitch_patch::PatchError::Io(_))
    ));
    assert!(matches!(
        cache.write(u64::MAX, &[1], &[]),
        Err(stitch_patch::PatchError::Io(_))
    ));
    let mut buf = [0; 2];
    assert!(matches!(
        cache.read(2 * BLOCK - 1, &mut buf),
        Err(stitch_patch::PatchError::Io(_))
    ));
    assert!(cache.write(2 * BLOCK - 1, &[1], &[]).is_ok());
}

#[test]
fn punching_a_hole_forgets_cached_copies() {
    let (sim, _counting, cache) = setup(4);
    cache.write(BLOCK, &[3; 100], &[]).unwrap();
    cache.flush_all().unwrap();
    assert_eq!(read_cache(&cache, BLOCK, 100), vec![3; 100]);
    cache.punch_hole(BLOCK, BLOCK).unwrap();
    assert_eq!(read_cache(&cache, BLOCK, 100), vec![0; 100]);
    assert_eq!(read_disk(&*sim, BLOCK, 100), vec![0; 100]);
}

#[test]
fn the_dot_graph_shows_uncommitted_patches() {
    let (_sim, _counting, cache) = setup(4);
    let elsewhere = cache.write(BLOCK, &[1; 10], &[]).unwrap();
    let soft = cache.write(0, &[1; 10], &[elsewhere]).unwrap();
    // Overlapping `soft` but following something `soft` does not: a patch of its own.
    let third = cache.write(2 * BLOCK, &[1; 10], &[]).unwrap();
    let over = cache.write(5, &[2; 10], &[third]).unwrap();
    let join = cache.empty(&[soft, over]).unwrap();
    let dot = cache.dump_dot();
    assert!(dot.starts_with("digraph patches {"), "{dot}");
    for node in [elsewhere, soft, third, over, join] {
        assert!(dot.contains(&format!("p{} [", node.0)), "{dot}");
    }
    assert!(
        dot.contains(&format!("p{} -> p{};", soft.0, elsewhere.0)),
        "{dot}"
    );
    assert!(
        dot.contains(&format!("p{} -> p{} [style=dotted];", over.0, soft.0)),
        "{dot}"
    );
    assert!(
        dot.contains("style=dashed"),
        "empty patches are drawn apart: {dot}"
    );
    assert!(
        dot.contains("block 0 [0, 10)") && dot.contains("hard") && dot.contains("soft"),
        "{dot}"
    );
    cache.flush_all().unwrap();
    assert!(!cache.dump_dot().contains("->"));
}

#[test]
fn writers_and_flushers_run_concurrently() {
    const THREADS: u64 = 8;
    const BLOCKS_EACH: u64 = 8;
    let sim = support::sim_disk(THREADS * BLOCKS_EACH + 8, 3);
    // Few clean blocks: reads keep going to the disk while other threads' flushes write it.
    let cache = small_cache_on(sim.clone(), 4);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let cache = cache.clone();
            s.spawn(move || {
                let mut prev = PatchId::NONE;
                for i in 0..400u64 {
                    let block = t * BLOCKS_EACH + i % BLOCKS_EACH;
                    let at = block * BLOCK + (i / BLOCKS_EACH) * 64 % BLOCK;
                    // Chains across the thread's blocks, and flushes of them, interleaved.
                    prev = cache.write(at, &[(t * 31 + i) as u8; 64], &[prev]).unwrap();
                    if i % 50 == 49 {
                        cache.flush_patch(prev).unwrap();
                    }
                    let mut back = [0; 64];
                    cache.read(at, &mut back).unwrap();
                    assert_eq!(back, [(t * 31 + i) as u8; 64]);
                }
            });
        }
    });
    cache.flush_all().unwrap();
    let len = (THREADS * BLOCKS_EACH * BLOCK) as usize;
    assert_eq!(read_disk(&*sim, 0, len), read_cache(&cache, 0, len));
    assert_eq!(cache.stats().live_patches, 0);
}

#[test]
fn a_read_racing_a_flush_does_not_cache_stale_bytes() {
    let counting = Arc::new(CountingDisk::new(Arc::new(MemDisk::new(4 * BLOCK))));
    let cache = small_cache_on(counting.clone(), 1);
    let racer = cache.clone();
    let mut raced = false;
    counting.set_hook(move |op| {
        if matches!(op, DiskRequest::Read { offset: 0, .. }) && !raced {
            raced = true;
            // While the read below holds block 0's old bytes: rewrite the block, make it
            // durable, and push it out of the one-block clean cache.
            racer.write(0, &[7; BLOCK as usize], &[]).unwrap();
            racer.flush_all().unwrap();
            read_cache(&racer, 2 * BLOCK, 1);
        }
    });
    assert_eq!(
        read_cache(&cache, 0, 16),
        vec![7; 16],
        "the block was read again after the flush"
    );
    assert_eq!(
        read_cache(&cache, 0, 16),
        vec![7; 16],
        "and the old bytes were not cached"
    );
}

#[test]
fn appends_read_only_the_bytes_before_them() {
    let (sim, counting, cache) = setup(4);
    // Garbage on the disk that an append must neither need nor keep in front of itself.
    sim.write_at(0, &[9; 2 * BLOCK as usize]).unwrap();
    sim.sync().unwrap();
    let reads = Arc::new(Mutex::new(Vec::new()));
    let seen = reads.clone();
    counting.set_hook(move |op| {
        if let DiskRequest::Read { offset, .. } = op {
            seen.lock().push(offset);
        }
    });
    // Starting a fresh block: nothing is read.
    cache.write_append(0, &[1; 100], &[]).unwrap();
    // Continuing it while it is cached: nothing is read.
    cache.write_append(100, &[2; 100], &[]).unwrap();
    // Crossing into the next block: still nothing.
    cache.write_append(BLOCK - 50, &[3; 100], &[]).unwrap();
    assert!(reads.lock().is_empty(), "appends read {:?}", reads.lock());
    cache.flush_all().unwrap();
    assert_eq!(
        &read_disk(&*sim, 0, 200)[..],
        &[[1; 100], [2; 100]].concat()[..]
    );
    // A partial first block that is no longer cached: its bytes before the write are read.
    let fresh = cache_on(counting.clone());
    fresh.write_append(200, &[4; 10], &[]).unwrap();
    assert_eq!(*reads.lock(), vec![0], "only block 0 is loaded");
    fresh.flush_all().unwrap();
    assert_eq!(
        &read_disk(&*sim, 0, 210)[..],
        &[[1; 100], [2; 100]]
            .concat()
            .into_iter()
            .chain([4; 10])
            .collect::<Vec<_>>()[..]
    );
}

#[test]
fn appends_into_reused_block_buffers_reach_the_disk_exactly() {
    // A block an append filled to its end is not kept clean once written: its buffer serves
    // a later fresh block (not zeroed past the append, which nobody reads). Appends that
    // straddle blocks, over several flushes, must still put exactly their bytes on the disk,
    // and never read: the block each flush leaves partly filled stays cached.
    let (sim, counting, cache) = setup(64);
    let reads = Arc::new(Mutex::new(0));
    let seen = reads.clone();
    counting.set_hook(move |op| {
        if let DiskRequest::Read { .. } = op {
            *seen.lock() += 1;
        }
    });
    let mut expected = Vec::new();
    for round in 0..3u8 {
        for i in 0..20u8 {
            // Longer than a block, so every append ends part-way into a fresh block.
            let piece = vec![round * 20 + i + 1; BLOCK as usize + 54];
            cache
                .write_append(expected.len() as u64, &piece, &[])
                .unwrap();
            expected.extend_from_slice(&piece);
        }
        cache.flush_all().unwrap();
    }
    assert_eq!(*reads.lock(), 0, "appends read nothing");
    assert_eq!(read_disk(&*sim, 0, expected.len()), expected);
    assert_eq!(read_cache(&cache, 0, expected.len()), expected);
}

#[test]
fn a_reverted_append_never_reaches_the_disk_before_its_dependency() {
    // A soft append into a fresh block, next to a writable one: the block goes out with the
    // soft append reverted to zeros, never to its own new bytes.
    let (sim, counting, cache) = setup(4);
    let images = images_after_syncs(&counting, sim.clone(), 2 * BLOCK as usize);
    let before = cache.write(BLOCK, &[1; 100], &[]).unwrap();
    let soft = cache.write_append(0, &[2; 100], &[before]).unwrap();
    let hard = cache.write_append(1000, &[3; 100], &[]).unwrap();
    assert_ne!(soft, hard);
    cache.flush_all().unwrap();
    let images = images.lock();
    assert_eq!(
        &images[0][0..100],
        &[0; 100][..],
        "reverted to zeros in the first round"
    );
    assert_eq!(&images[0][1000..1100], &[3; 100][..]);
    assert_eq!(&images[1][0..100], &[2; 100][..]);
}

#[test]
fn discarded_writes_never_reach_the_disk_and_free_their_dependents() {
    let mem: Arc<dyn Disk> = Arc::new(MemDisk::new(8 * BLOCK));
    let counting = Arc::new(CountingDisk::new(mem.clone()));
    let cache = cache_on(counting.clone());
    // Blocks 0 and 1 hold obsolete data, block 3 depends on block 1; block 2 is durable.
    let kept = cache.write(2 * BLOCK, &[2; 64], &[]).unwrap();
    cache.flush_patch(kept).unwrap();
    let old = cache.write(0, &[9; 100], &[]).unwrap();
    let obsolete = cache.write(BLOCK + 10, &[8; 100], &[old]).unwrap();
    let dependent = cache.write(3 * BLOCK, &[7; 64], &[obsolete]).unwrap();
    let waiting = cache.empty(&[obsolete]).unwrap();
    let committed = Arc::new(Mutex::new(false));
    let flag = committed.clone();
    cache.when_committed(obsolete, Box::new(move || *flag.lock() = true));
    let writes = counting.writes();
    // A range ending inside block 2 covers blocks 0 and 1 only.
    assert_eq!(cache.discard(0, 2 * BLOCK + 100), 3);
    assert_eq!(counting.writes(), writes, "discarding writes nothing");
    assert_eq!(cache.state(old), PatchState::Committed);
    assert_eq!(cache.state(obsolete), PatchState::Committed);
    assert_eq!(cache.state(waiting), PatchState::Committed);
    assert!(*committed.lock(), "callbacks of discarded patches run");
    assert_eq!(cache.state(dependent), PatchState::Pending);
    // Reads see the disk again, not the dropped bytes.
    assert_eq!(read_cache(&cache, 0, 100), vec![0; 100]);
    cache.flush_all().unwrap();
    let two_blocks = 2 * BLOCK as usize;
    assert_eq!(read_disk(&*mem, 0, two_blocks), vec![0; two_blocks]);
    assert_eq!(read_disk(&*mem, 2 * BLOCK, 64), vec![2; 64]);
    assert_eq!(read_disk(&*mem, 3 * BLOCK, 64), vec![7; 64]);
    assert_eq!(cache.stats().patches_discarded, 2);
    // A range holding no whole block drops nothing.
    let partial = cache.write(4 * BLOCK, &[1; 10], &[]).unwrap();
    assert_eq!(cache.discard(4 * BLOCK + 1, BLOCK), 0);
    assert_eq!(cache.state(partial), PatchState::Pending);
}
