//! Mounting for tests: a guard that unmounts on every path (panics included), and the check
//! that decides whether FUSE tests can run here at all.

#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use stitchdb::{Db, Options};
use stitchdb_fs::Fs;
use stitchdb_fuse::{open_session, HeldCounts, KvFuse, MountConfig};

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
    /// What the `/dev/fuse` session's holding of write-back WRITEs did.
    pub held: Arc<HeldCounts>,
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
        std::fs::create_dir(tmp.path().join("mnt")).unwrap();
        let db = Db::create(tmp.path().join("fs.store"), Options::default()).unwrap();
        Mounted::serve(tmp, db, options)
    }

    /// Mounts again the store in `tmp` (what [`unmount`](Self::unmount) returned), with
    /// `options`.
    pub fn remount(tmp: tempfile::TempDir, options: &str) -> Mounted {
        let db = Db::open(tmp.path().join("fs.store"), Options::default()).unwrap();
        Mounted::serve(tmp, db, options)
    }

    /// Mounts the file system of `db`, the store in `tmp`, on `tmp`'s `mnt`.
    fn serve(tmp: tempfile::TempDir, db: Db, options: &str) -> Mounted {
        let store = tmp.path().join("fs.store");
        let dir = tmp.path().join("mnt");
        // The options and session `stitchdb mount` uses, polling included.
        let config =
            MountConfig::parse(store.clone(), dir.clone(), &[options.to_string()]).unwrap();
        let fs = Arc::new(Fs::mount(db, config.fs_options()).unwrap());
        let weak = Arc::downgrade(&fs);
        let adapter = KvFuse::new(fs, config.serve_options());
        let held = adapter.held_counts();
        let session = open_session(&config, adapter).unwrap();
        let session = session.spawn().unwrap();
        Mounted {
            dir,
            session: Some(session),
            tmp: Some(tmp),
            store,
            fs: weak,
            held,
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
