//! The mount's backing device: a mount by root takes the readahead and dirty-page limits of
//! the disk holding its store, not FUSE's 128 KiB, 1% and strict limit.

#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;
use stitchdb_fuse::BdiSettings;

/// `/sys/class/bdi/MAJOR:MINOR` of the mount at `dir` (its device from mountinfo).
fn bdi_of(dir: &Path) -> std::path::PathBuf {
    let dir = dir.canonicalize().unwrap();
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let dev = info
        .lines()
        .rev()
        .find(|l| l.split(' ').nth(4) == dir.to_str())
        .and_then(|l| l.split(' ').nth(2))
        .unwrap();
    Path::new("/sys/class/bdi").join(dev)
}

fn read(path: &Path) -> u64 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn a_mount_by_root_takes_the_readahead_and_dirty_share_of_its_disk() {
    require_fuse!();
    if rustix::process::geteuid().as_raw() != 0 {
        eprintln!("SKIPPED: only root may change a backing device's settings");
        return;
    }
    let m = support::Mounted::new(true);
    // The settings are written at the first request after INIT (which sets the readahead).
    std::fs::metadata(&m.dir).unwrap();
    let bdi = bdi_of(&m.dir);
    let disk = BdiSettings::of_disk_holding(&m.store);
    assert_eq!(read(&bdi.join("max_ratio")), 100);
    assert_eq!(read(&bdi.join("strict_limit")), 0);
    if let Some(kb) = disk.read_ahead_kb {
        assert_eq!(read(&bdi.join("read_ahead_kb")), kb);
    }
    m.unmount();
}
