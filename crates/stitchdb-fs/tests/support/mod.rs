//! Shared by the file system's tests: the in-memory model and stores on simulated disks.

#![allow(dead_code)]

pub mod model;

use std::sync::Arc;
use stitchdb::{Db, Options, SimConfig, SimDisk};
use stitchdb_fs::{Fs, FsOptions, Timespec};

/// Store options small enough that a test's few megabytes flush, merge and stitch runs.
pub fn small_options() -> Options {
    Options {
        zone_size: 1 << 20,
        memtable_size: 256 << 10,
        background: false,
        ..Options::default()
    }
}

/// A deterministic clock (each call one nanosecond later).
pub fn test_clock() -> stitchdb_fs::Clock {
    let n = Arc::new(std::sync::atomic::AtomicU64::new(0));
    Arc::new(move || {
        let t = n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Timespec {
            secs: 1_700_000_000 + (t / 1_000_000_000) as i64,
            nanos: (t % 1_000_000_000) as u32,
        }
    })
}

/// A new file system on a new simulated disk.
pub fn new_fs(seed: u64) -> Fs {
    let disk = Arc::new(SimDisk::new(SimConfig {
        seed,
        len: 0,
        capacity: None,
    }));
    let db = Db::create_on(disk, small_options()).unwrap_or_else(|e| panic!("create: {e}"));
    Fs::mount(
        db,
        FsOptions {
            clock: test_clock(),
            ..FsOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("mount: {e}"))
}
