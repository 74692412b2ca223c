//! FSYNCs from many callers at once, through each transport: every one returns, the files
//! hold what was written, and the store passes the file system's check after unmounting.
//! (That an FSYNC's answer waits for the commits before it is `table`'s unit test.)

#![allow(clippy::unwrap_used)]

mod support;

use std::io::Write;
use stitchdb::{Db, Options};
use stitchdb_fs::{check_fs, Tables};
use support::Mounted;

const THREADS: usize = 8;
const FILES: usize = 40;

fn concurrent_fsyncs_all_return(options: &str) {
    let mounted = Mounted::with_options(options);
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let dir = mounted.dir.join(format!("t{t}"));
            std::thread::spawn(move || {
                std::fs::create_dir(&dir).unwrap();
                let d = std::fs::File::open(&dir).unwrap();
                for i in 0..FILES {
                    let mut f = std::fs::File::create(dir.join(format!("f{i}"))).unwrap();
                    f.write_all(&[t as u8 ^ i as u8; 4096]).unwrap();
                    if i % 2 == 0 {
                        f.sync_all().unwrap();
                    } else {
                        f.sync_data().unwrap();
                    }
                    // FSYNCDIR takes the same way.
                    d.sync_all().unwrap();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    for t in 0..THREADS {
        for i in 0..FILES {
            let got = std::fs::read(mounted.dir.join(format!("t{t}/f{i}"))).unwrap();
            assert!(got == [t as u8 ^ i as u8; 4096], "t{t}/f{i} differs");
        }
    }
    let store = mounted.store.clone();
    let _kept = mounted.unmount();
    let db = Db::open(&store, Options::default()).unwrap();
    let tables = Tables::find(&db).unwrap().unwrap();
    let report = check_fs(&db, &tables).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.inodes, 1 + (THREADS * (1 + FILES)) as u64);
}

#[test]
fn concurrent_fsyncs_through_dev_fuse_all_return() {
    require_fuse!();
    concurrent_fsyncs_all_return("writeback_cache,no_io_uring");
}

/// Through the io_uring queues where the kernel offers them (as root on 6.14 and later),
/// through `/dev/fuse` otherwise.
#[test]
fn concurrent_fsyncs_through_the_queues_all_return() {
    require_fuse!();
    concurrent_fsyncs_all_return("no_writeback_cache,io_uring");
}

/// With `-o sync` every change's answer waits for a sync, as an FSYNC's, on each transport.
#[test]
fn concurrent_changes_and_fsyncs_of_a_sync_mount_all_return() {
    require_fuse!();
    concurrent_fsyncs_all_return("sync,no_io_uring");
    concurrent_fsyncs_all_return("sync,io_uring");
}
