//! Mounting for tests: a guard that unmounts on every path (panics included), and the check
//! that decides whether FUSE tests can run here at all.

#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use stitchdb::{Db, Options};
use stitchdb_fs::Fs;
use stitchdb_fuse::{open_session, KvFuse, MountConfig};

/// Why FUSE tests cannot run here, if they cannot: no /dev/fuse or no fusermount3.
pub fn fuse_unavailable() -> Option<String> {
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse does not exist".into());
    }
    let found = Command::new("fusermount3").arg("-V").output();
    if found.is_err() {
        return Some("fusermount3 is not installed (apt-get install fuse3)".into());
    }
    None
}

/// Skips the calling test (printing why) when FUSE is unavailable.
#[macro_export]
macro_rules! require_fuse {
    () => {
        if let Some(why) = support::fuse_unavailable() {
            eprintln!("SKIPPED: {why}");
            return;
        }
    };
}

/// Unmounts `mp` lazily (detached at once, finished when the last user lets go).
pub fn force_unmount(mp: &Path) {
    let _ = Command::new("fusermount3")
        .arg("-u")
        .arg("-z")
        .arg(mp)
        .output();
}

/// A store mounted in this process; dropping it unmounts, whatever happened.
pub struct Mounted {
    /// The mount point.
    pub dir: PathBuf,
    session: Option<fuser::BackgroundSession>,
    /// Holds the store and the mount point; `unmount` hands it over.
    tmp: Option<tempfile::TempDir>,
    /// The store's path.
    pub store: PathBuf,
    /// The file system being served (weak: the mount alone keeps it open).
    pub fs: std::sync::Weak<Fs>,
}

impl Mounted {
    /// A new store in a temporary directory, mounted there with the write-back cache on or
    /// off.
    pub fn new(writeback_cache: bool) -> Mounted {
        let cache = if writeback_cache {
            "writeback_cache"
        } else {
            "no_writeback_cache"
        };
        Mounted::with_options(cache)
    }

    /// A new store in a temporary directory, mounted there with `options` (`-o`'s).
    pub fn with_options(options: &str) -> Mounted {
        let tmp = tempfile::tempdir().unwrap();
        let store = tmp.path().join("fs.store");
        let dir = tmp.path().join("mnt");
        std::fs::create_dir(&dir).unwrap();
        let db = Db::create(&store, Options::default()).unwrap();
        // The options and session `stitchdb mount` uses, polling included.
        let config =
            MountConfig::parse(store.clone(), dir.clone(), &[options.to_string()]).unwrap();
        let fs = Arc::new(Fs::mount(db, config.fs_options()).unwrap());
        let weak = Arc::downgrade(&fs);
        let session = open_session(&config, KvFuse::new(fs, config.serve_options())).unwrap();
        let session = session.spawn().unwrap();
        Mounted {
            dir,
            session: Some(session),
            tmp: Some(tmp),
            store,
            fs: weak,
        }
    }

    /// Unmounts and waits for the file system to close its store; returns the temporary
    /// directory holding the store (deleted when dropped).
    pub fn unmount(mut self) -> tempfile::TempDir {
        force_unmount(&self.dir);
        if let Some(s) = self.session.take() {
            let _ = s.guard.join();
        }
        self.tmp.take().unwrap()
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        force_unmount(&self.dir);
        // The session's thread ends when the kernel closes the connection; it is not joined
        // here, so a failing test cannot hang on a file it left open.
        drop(self.session.take());
    }
}
