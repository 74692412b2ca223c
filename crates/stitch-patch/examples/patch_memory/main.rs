//! The patch-memory report: how much memory patch bookkeeping and undo bytes take, as a
//! share of the dirty data they describe, on a write-heavy run (Featherstitch reports 4-18%
//! after hard patches and merging, against 145-355% without).
//!
//! `cargo run --release -p stitch-patch --example patch_memory [APPENDS]`

mod workload;

use std::sync::Arc;
use stitch_io::MemDisk;
use stitch_patch::{BlockCache, CacheConfig};
use workload::{percent_of_dirty, Workload};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let appends = match std::env::args().nth(1) {
        Some(arg) => arg
            .parse()
            .map_err(|e| format!("APPENDS must be a number ({e}): {arg}"))?,
        None => 200_000,
    };
    let workload = Workload {
        appends,
        record_len: 100,
        appends_per_extent: 50,
        max_extent_blocks: 8,
        extents_per_rewrite: 20,
        samples: 5,
        block_size: 4096,
    };
    let disk = Arc::new(MemDisk::new(workload.disk_len()));
    let cache = BlockCache::new(disk, CacheConfig::default());
    println!(
        "{} appends of {}-byte records, an extent of 1-{} blocks every {} appends, every {}th extent a soft rewrite",
        workload.appends, workload.record_len, workload.max_extent_blocks, workload.appends_per_extent, workload.extents_per_rewrite
    );
    println!(
        "{:>9} {:>10} {:>8} {:>12} {:>8} {:>11} {:>7}",
        "appends", "dirty MiB", "patches", "patch bytes", "patch %", "undo bytes", "undo %"
    );
    for (appends, stats) in workload.run(&cache)? {
        println!(
            "{:>9} {:>10.1} {:>8} {:>12} {:>7.2}% {:>11} {:>6.2}%",
            appends,
            stats.dirty_bytes as f64 / (1 << 20) as f64,
            stats.live_patches,
            stats.patch_bytes,
            percent_of_dirty(stats.patch_bytes, &stats),
            stats.undo_bytes,
            percent_of_dirty(stats.undo_bytes, &stats),
        );
    }
    let before = cache.stats();
    cache.flush_all()?;
    let after = cache.stats();
    println!(
        "patches made {}, writes merged {}, hard {}; flushed with {} syncs, {} block writes, {} reverts",
        before.patches_created, before.patches_merged, before.hard_patches, after.syncs, after.block_writes, after.reverts
    );
    Ok(())
}
