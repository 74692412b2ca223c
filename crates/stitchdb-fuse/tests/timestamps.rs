//! Time stamps through the write-back cache: the kernel stamps regular files' modification
//! and change times itself, from its coarse clock, so the file system stamps new files from
//! the same clock; times must never run backwards between the two. And it writes them back
//! after a file's last close, when the file may already be deleted.

#![allow(clippy::unwrap_used)]

mod support;

use std::os::unix::fs::MetadataExt;

fn mtime_ns(path: &std::path::Path) -> i128 {
    let m = std::fs::metadata(path).unwrap();
    i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec())
}

#[test]
fn a_file_written_after_another_was_made_is_not_older() {
    require_fuse!();
    let m = support::Mounted::new(true);
    for i in 0..200 {
        let made = m.dir.join(format!("made{i}"));
        let written = m.dir.join(format!("written{i}"));
        std::fs::File::create(&made).unwrap();
        std::fs::write(&written, b"x").unwrap();
        assert!(
            mtime_ns(&written) >= mtime_ns(&made),
            "try {i}: written {} before made {}",
            mtime_ns(&written),
            mtime_ns(&made)
        );
    }
    m.unmount();
}

/// A file made, closed and deleted (tar's placeholder for a link; any temporary file), or
/// replaced by a rename: the kernel writes its times back, to an inode with no name and no
/// open file. The file system answered `ENOENT`, and the next `syncfs` failed with it.
#[test]
fn syncfs_succeeds_after_files_were_made_closed_and_deleted() {
    require_fuse!();
    let m = support::Mounted::new(true);
    for (i, data) in [&b""[..], b"x", &[1u8; 100_000]].iter().enumerate() {
        let p = m.dir.join(format!("tmp{i}"));
        std::fs::write(&p, data).unwrap();
        std::fs::remove_file(&p).unwrap();
    }
    // A rename over a file deletes the file it replaces, whose change time the kernel then
    // writes back at once (an editor saving through a temporary file does this).
    std::fs::write(m.dir.join("saved"), b"old").unwrap();
    std::fs::write(m.dir.join("saved.tmp"), b"new").unwrap();
    std::fs::rename(m.dir.join("saved.tmp"), m.dir.join("saved")).unwrap();
    assert_eq!(std::fs::read(m.dir.join("saved")).unwrap(), b"new");
    let dir = std::fs::File::open(&m.dir).unwrap();
    rustix::fs::syncfs(&dir).unwrap();
    // And once the kernel has let them go, syncing still succeeds.
    std::fs::write("/proc/sys/vm/drop_caches", "2").unwrap();
    rustix::fs::syncfs(&dir).unwrap();
    drop(dir);
    m.unmount();
}

fn atime_ns(path: &std::path::Path) -> i128 {
    let m = std::fs::metadata(path).unwrap();
    i128::from(m.atime()) * 1_000_000_000 + i128::from(m.atime_nsec())
}

/// Reads `path` whole from the file system rather than the kernel's page cache (its clean
/// pages dropped first), after a pause longer than a tick of the kernel's coarse clock.
fn read_from_the_file_system(path: &std::path::Path) -> Vec<u8> {
    std::thread::sleep(std::time::Duration::from_millis(20));
    let f = std::fs::File::open(path).unwrap();
    rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).unwrap();
    let mut data = Vec::new();
    std::io::Read::read_to_end(&mut &f, &mut data).unwrap();
    data
}

/// Access times by mount option, as the kernel never writes them over FUSE: a read that
/// reaches the file system writes one as `relatime` (the default), `strictatime` and
/// `noatime` say, and `stat` shows it at once, attributes cached for 5 s notwithstanding (the
/// kernel drops its copy of the access time after each read it sends).
#[test]
fn reads_write_access_times_as_the_mount_options_say() {
    require_fuse!();
    // (options, whether the first read writes, whether a second one does)
    for (options, first, second) in [
        ("attr_timeout=5", true, false),
        ("attr_timeout=5,strictatime", true, true),
        ("attr_timeout=5,noatime", false, false),
    ] {
        let m = support::Mounted::with_options(options);
        let f = m.dir.join("f");
        std::fs::write(&f, b"data").unwrap();
        std::fs::File::open(&f).unwrap().sync_all().unwrap();
        let written = atime_ns(&f);
        assert_eq!(read_from_the_file_system(&f), b"data");
        let after_first = atime_ns(&f);
        assert_eq!(after_first > written, first, "{options}: the first read");
        assert!(after_first >= written, "{options}: went back");
        read_from_the_file_system(&f);
        let after_second = atime_ns(&f);
        assert_eq!(
            after_second > after_first,
            second,
            "{options}: the second read"
        );
        // A directory listed: written by the same rule (its entries changed since).
        let listed = atime_ns(&m.dir);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let _ = std::fs::read_dir(&m.dir).unwrap().count();
        assert_eq!(atime_ns(&m.dir) > listed, first, "{options}: the listing");
        m.unmount();
    }
}
