//! A store mounted by the built `stitchdb`, its daemon a child of the test (in the
//! foreground, so the test can kill it), in a temporary directory; unmounted on every path
//! (a guard runs `fusermount3 -u -z` and kills the daemon). For the tests that mount and run
//! as root; included by `#[path]` where used.

#![allow(clippy::unwrap_used)]
// Each test file that includes it uses a part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// Why the mounting tests cannot run here, if they cannot.
pub fn unavailable() -> Option<&'static str> {
    if !std::path::Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse does not exist");
    }
    if Command::new("fusermount3").arg("-V").output().is_err() {
        return Some("fusermount3 is not installed (apt-get install fuse3)");
    }
    let root = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
    });
    if !root {
        return Some("these tests mount, and make mount namespaces, as root");
    }
    None
}

/// Unmounts `mp` lazily (detached at once, finished when the last user lets go), if
/// anything is mounted there.
pub fn force_unmount(mp: &std::path::Path) {
    let _ = Command::new("fusermount3")
        .args(["-u", "-z"])
        .arg(mp)
        .output();
}

/// A mounted store.
pub struct Mounted {
    pub tmp: tempfile::TempDir,
    /// `stitchdb mount`'s options.
    options: Vec<String>,
    daemon: Option<Child>,
}

impl Mounted {
    /// A new store, mounted.
    pub fn new() -> Mounted {
        Mounted::with_options(&[])
    }

    /// A new store, mounted with `stitchdb mount`'s `options` (e.g. `["-o", "allow_other"]`).
    pub fn with_options(options: &[&str]) -> Mounted {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("mnt")).unwrap();
        let mut m = Mounted {
            tmp,
            options: options.iter().map(|o| o.to_string()).collect(),
            daemon: None,
        };
        let out = Command::new(env!("CARGO_BIN_EXE_stitchdb"))
            .arg("init")
            .arg(m.store())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        m.mount();
        m
    }

    pub fn mp(&self) -> PathBuf {
        self.tmp.path().join("mnt")
    }

    pub fn store(&self) -> PathBuf {
        self.tmp.path().join("s.store")
    }

    /// A path outside the mount, for the tests' own signals.
    pub fn outside(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    /// Mounts (again), and waits until the mount is ready.
    pub fn mount(&mut self) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_stitchdb"))
            .arg("mount")
            .arg(self.store())
            .arg(self.mp())
            .arg("-f")
            .args(&self.options)
            .env("STITCHDB_MOUNT_NOTIFY", "1")
            .env_remove("RUST_LOG")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready");
        self.daemon = Some(child);
    }

    /// `kill -9` of the daemon, then the dead mount's removal.
    pub fn kill(&mut self) {
        if let Some(mut d) = self.daemon.take() {
            let _ = d.kill();
            let _ = d.wait();
        }
        self.unmount();
    }

    /// Unmounts (lazily, if busy) and waits for the daemon to end.
    pub fn unmount(&mut self) {
        force_unmount(&self.mp());
        if let Some(mut d) = self.daemon.take() {
            let _ = d.wait();
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        self.unmount();
    }
}
