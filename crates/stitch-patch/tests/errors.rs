//! A failed disk write or sync: the flush reports it, the cache refuses further flushes and
//! says why, and nothing written through it is lost from memory.

mod support;

use stitch_patch::{PatchError, PatchState};
use support::{read_cache, setup, BLOCK};

fn assert_failed_for_good(cache: &stitch_patch::BlockCache, first: Result<(), PatchError>) {
    assert!(matches!(first, Err(PatchError::Io(_))), "{first:?}");
    let reason = cache.failure().expect("the cache remembers the failure");
    assert!(reason.contains("EIO"), "{reason}");
    assert_eq!(cache.flush_all(), Err(PatchError::Failed(reason.clone())));
    assert_eq!(
        cache.flush_patch(stitch_patch::PatchId::NONE),
        Err(PatchError::Failed(reason))
    );
}

#[test]
fn a_failed_write_fails_the_flush_and_every_later_one() {
    let (sim, _counting, cache) = setup(8);
    let a = cache.write(0, &[1; 100], &[]).unwrap();
    let b = cache.write(4 * BLOCK, &[2; 100], &[a]).unwrap();
    sim.fail_nth_write(1);
    assert_failed_for_good(&cache, cache.flush_all());
    assert_eq!(cache.state(a), PatchState::Pending, "not durable");
    assert_eq!(cache.state(b), PatchState::Pending);
    assert_eq!(read_cache(&cache, 0, 100), vec![1; 100]);
    assert_eq!(read_cache(&cache, 4 * BLOCK, 100), vec![2; 100]);
    // Writes are still taken in memory (the layers above turn read-only).
    cache.write(2 * BLOCK, &[3; 10], &[b]).unwrap();
    assert_eq!(read_cache(&cache, 2 * BLOCK, 10), vec![3; 10]);
    assert_eq!(cache.stats().syncs, 0);
}

#[test]
fn a_failed_sync_fails_the_flush_and_every_later_one() {
    let (sim, counting, cache) = setup(8);
    let a = cache.write(0, &[1; 100], &[]).unwrap();
    let b = cache.write(BLOCK, &[2; 100], &[a]).unwrap();
    sim.fail_nth_sync(2);
    assert_failed_for_good(&cache, cache.flush_patch(b));
    assert_eq!(
        cache.state(a),
        PatchState::Committed,
        "the first round's sync succeeded"
    );
    assert_eq!(cache.state(b), PatchState::Pending);
    assert_eq!(counting.syncs(), 1);
    assert_eq!(read_cache(&cache, BLOCK, 100), vec![2; 100]);
}

#[test]
fn a_failed_read_fails_only_that_call() {
    let (sim, _counting, cache) = setup(8);
    sim.fail_nth_read(1);
    let mut buf = [0; 10];
    assert!(matches!(cache.read(0, &mut buf), Err(PatchError::Io(_))));
    // A partial block write must read the rest of the block first.
    sim.fail_nth_read(1);
    assert!(matches!(
        cache.write(3 * BLOCK + 5, &[1], &[]),
        Err(PatchError::Io(_))
    ));
    assert_eq!(cache.stats().live_patches, 0, "nothing recorded");
    cache.write(3 * BLOCK + 5, &[1], &[]).unwrap();
    cache.read(0, &mut buf).unwrap();
    assert_eq!(
        cache.failure(),
        None,
        "a failed read does not fail the cache"
    );
    cache.flush_all().unwrap();
}
