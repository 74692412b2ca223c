//! The mount's backing device info (`/sys/class/bdi/MAJOR:MINOR/`): how much the kernel reads
//! ahead in a file and how many dirty pages it lets the mount hold.
//!
//! The kernel gives every FUSE mount a backing device of its own with settings made for a
//! daemon it cannot trust: 128 KiB of readahead, at most 1% of the dirty-page limit
//! (`max_ratio`), and that share enforced on its own (`strict_limit`: the mount is throttled
//! to the write rate it has shown, even while the machine's dirty pages are far below their
//! limit), where a disk gets its queue's readahead (often megabytes), up to 100% and no
//! strict limit. With 1%, or with a strict limit after a spell of small synced
//! writes taught the kernel a low rate, the kernel writes a file's pages back long before
//! they could gather into large requests: random 4 KiB writes over 1 GiB reach the store one
//! page at a time. A mount by root (which the store trusts anyway) takes the settings of the
//! disk holding its store instead, unless `-o read_ahead_kb=N`, `-o max_ratio=N` or
//! `-o strict_limit=0|1` say otherwise (docs/kvfs.md, "Serving").

use crate::mountinfo::mounts;
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// What to set; `None` leaves the kernel's value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BdiSettings {
    /// Readahead in KiB.
    pub read_ahead_kb: Option<u64>,
    /// The share of the dirty-page limit the mount may hold, in percent.
    pub max_ratio: Option<u64>,
    /// Whether the mount is held to its own share of dirty pages whatever the machine's (1),
    /// or only once the machine's dirty pages near their limit (0).
    pub strict_limit: Option<u64>,
}

impl BdiSettings {
    /// The settings of the disk holding `store`, where `/sys` tells them: its queue's
    /// readahead, and every disk's 100% and no strict limit.
    pub fn of_disk_holding(store: &Path) -> BdiSettings {
        let read_ahead_kb = rustix::fs::stat(store).ok().and_then(|st| {
            let dev = Path::new("/sys/dev/block").join(format!(
                "{}:{}",
                rustix::fs::major(st.st_dev),
                rustix::fs::minor(st.st_dev)
            ));
            // A whole disk has its queue; a partition's is its disk's.
            [
                dev.join("queue/read_ahead_kb"),
                dev.join("../queue/read_ahead_kb"),
            ]
            .iter()
            .find_map(|p| std::fs::read_to_string(p).ok()?.trim().parse().ok())
        });
        BdiSettings {
            read_ahead_kb,
            max_ratio: Some(100),
            strict_limit: Some(0),
        }
    }

    /// Writes the settings into the backing device of the FUSE mount at `mountpoint` (a
    /// canonical path, made before mounting: resolving the mount point would ask the daemon).
    /// Each one that cannot be written (not root, no `/sys`) is logged and left as it was.
    pub fn apply(&self, mountpoint: &Path) {
        let Some(dir) = bdi_dir(mountpoint) else {
            tracing::warn!(
                "no backing device found for {} in /proc/self/mountinfo: readahead and \
                 dirty-page limits left as the kernel set them",
                mountpoint.display()
            );
            return;
        };
        for (name, value) in [
            ("read_ahead_kb", self.read_ahead_kb),
            ("max_ratio", self.max_ratio),
            ("strict_limit", self.strict_limit),
        ] {
            let Some(value) = value else { continue };
            let path = dir.join(name);
            match std::fs::write(&path, value.to_string()) {
                Ok(()) => tracing::info!("{} = {value}", path.display()),
                Err(e) => tracing::warn!("setting {} to {value}: {e}", path.display()),
            }
        }
    }
}

/// `/sys/class/bdi/MAJOR:MINOR` of the mount at `mountpoint`, from `/proc/self/mountinfo`
/// (a `stat` of the mount point would ask the daemon, which is not serving yet).
fn bdi_dir(mountpoint: &Path) -> Option<PathBuf> {
    let want = mountpoint.to_string_lossy();
    // The last mount on the path is the one on top: ours.
    let (dev, _) = mounts().into_iter().rev().find(|(_, mp)| *mp == want)?;
    Some(Path::new("/sys/class/bdi").join(dev))
}

/// Settings to write once the kernel has taken the INIT reply (which sets the readahead
/// again): by the first request after it, whichever transport brings it.
#[derive(Default)]
pub struct PendingBdi {
    /// Read without the lock by every request.
    pending: AtomicBool,
    settings: Mutex<Option<(BdiSettings, PathBuf)>>,
}

impl PendingBdi {
    /// Writes `settings` into the backing device of the mount at `mountpoint` (canonical) at
    /// the next [`apply`](Self::apply).
    pub fn set(&self, settings: BdiSettings, mountpoint: PathBuf) {
        *self.settings.lock() = Some((settings, mountpoint));
        self.pending.store(true, Ordering::Release);
    }

    /// Writes the settings if they wait (once).
    pub fn apply(&self) {
        if self.pending.load(Ordering::Acquire) {
            if let Some((settings, mountpoint)) = self.settings.lock().take() {
                settings.apply(&mountpoint);
            }
            self.pending.store(false, Ordering::Release);
        }
    }
}
