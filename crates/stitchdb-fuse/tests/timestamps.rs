//! Time stamps through the write-back cache: the kernel stamps regular files' modification
//! and change times itself, from its coarse clock, so the file system stamps new files from
//! the same clock; times must never run backwards between the two.

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
