//! Patch bookkeeping stays small next to the dirty data on a write-heavy run (the workload
//! of the patch-memory report, scaled down).

#[path = "../examples/patch_memory/workload.rs"]
mod workload;

use std::sync::Arc;
use stitch_io::MemDisk;
use stitch_patch::{BlockCache, CacheConfig};
use workload::{percent_of_dirty, Workload};

#[test]
fn bookkeeping_stays_a_small_share_of_dirty_data() {
    let workload = Workload {
        appends: 20_000,
        record_len: 100,
        appends_per_extent: 50,
        max_extent_blocks: 8,
        extents_per_rewrite: 20,
        samples: 4,
        block_size: 4096,
    };
    let cache = BlockCache::new(
        Arc::new(MemDisk::new(workload.disk_len())),
        CacheConfig::default(),
    );
    for (appends, stats) in workload.run(&cache).unwrap() {
        let patch = percent_of_dirty(stats.patch_bytes, &stats);
        let undo = percent_of_dirty(stats.undo_bytes, &stats);
        assert!(
            patch + undo < 25.0,
            "after {appends} appends: patches {patch:.1}% undo {undo:.1}% ({stats:?})"
        );
        assert!(stats.undo_bytes > 0, "the rewrites make soft patches");
        assert!(
            stats.patches_merged > stats.patches_created,
            "appends merge: {stats:?}"
        );
    }
    cache.flush_all().unwrap();
    assert_eq!(cache.stats().live_patches, 0);
}
