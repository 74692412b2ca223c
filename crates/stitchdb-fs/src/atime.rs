//! When a read writes the inode's access time: the mount's `noatime`, `relatime` (Linux's
//! default, and ours) and `strictatime`, with `nodiratime` for directories, decided as
//! Linux's `touch_atime` and `relatime_need_update` decide.
//!
//! Over FUSE the kernel never writes access times itself (it marks every inode
//! `S_NOATIME`): the file system does, for the reads that reach it. A read the kernel
//! answers from its page cache (or a symbolic link it has cached) reaches nobody and
//! changes nothing, so on a mount the access time follows the reads that reach the daemon.

use crate::schema::{Attr, Kind, Timespec};

/// Which reads write an access time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AtimeMode {
    /// Never (`noatime`).
    Never,
    /// When the access time is not after the modification or change time, or is a day old
    /// (`relatime`): a reader can still tell whether a file was read since it last changed,
    /// and a file read over and over is written at most once a day.
    #[default]
    Relative,
    /// Every read (`strictatime`).
    Always,
}

/// The mount's access-time options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtimePolicy {
    /// For files and symbolic links, and directories unless `dirs` is false.
    pub mode: AtimeMode,
    /// Whether listing a directory writes its access time (false: `nodiratime`).
    pub dirs: bool,
}

impl Default for AtimePolicy {
    fn default() -> Self {
        AtimePolicy {
            mode: AtimeMode::Relative,
            dirs: true,
        }
    }
}

/// Seconds after which `relatime` writes the access time of a file read again although it
/// has not changed since (Linux's value).
const RELATIME_SECS: i64 = 24 * 60 * 60;

impl AtimePolicy {
    /// Applies one mount option; false if `option` is not an access-time option. Later
    /// options override earlier ones, as `mount(8)` passes them: `atime` only lifts
    /// `noatime`, `norelatime` means `strictatime` unless access times are off.
    pub fn apply_option(&mut self, option: &str) -> bool {
        match option {
            "noatime" => self.mode = AtimeMode::Never,
            "atime" if self.mode == AtimeMode::Never => self.mode = AtimeMode::Relative,
            "atime" => {}
            "relatime" => self.mode = AtimeMode::Relative,
            "strictatime" => self.mode = AtimeMode::Always,
            "norelatime" if self.mode == AtimeMode::Relative => self.mode = AtimeMode::Always,
            "norelatime" => {}
            "nodiratime" => self.dirs = false,
            "diratime" => self.dirs = true,
            _ => return false,
        }
        true
    }

    /// Whether reading `a` at `now` writes its access time.
    pub fn due(&self, a: &Attr, now: Timespec) -> bool {
        if a.kind == Kind::Dir && !self.dirs {
            return false;
        }
        match self.mode {
            AtimeMode::Never => false,
            AtimeMode::Always => a.atime != now,
            AtimeMode::Relative => {
                a.atime <= a.mtime
                    || a.atime <= a.ctime
                    || now.secs.saturating_sub(a.atime.secs) >= RELATIME_SECS
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timespec {
        Timespec { secs, nanos: 0 }
    }

    fn file(atime: i64, mtime: i64, ctime: i64) -> Attr {
        Attr {
            ino: 2,
            kind: Kind::File,
            perm: 0o644,
            uid: 0,
            gid: 0,
            nlink: 1,
            size: 0,
            rdev: 0,
            atime: at(atime),
            mtime: at(mtime),
            ctime: at(ctime),
            crtime: at(0),
            parent: 0,
            next_cookie: 0,
            no_xattrs: true,
        }
    }

    #[test]
    fn relatime_writes_after_a_change_or_a_day_only() {
        let p = AtimePolicy::default();
        assert!(p.due(&file(10, 10, 5), at(20)), "atime equal to mtime");
        assert!(
            p.due(&file(10, 5, 12), at(20)),
            "changed after the last read"
        );
        assert!(
            !p.due(&file(10, 5, 5), at(20)),
            "read since the last change"
        );
        assert!(p.due(&file(10, 5, 5), at(10 + RELATIME_SECS)), "a day old");
        assert!(!p.due(&file(10, 5, 5), at(9 + RELATIME_SECS)));
    }

    #[test]
    fn strictatime_writes_every_read_and_noatime_none() {
        let mut p = AtimePolicy::default();
        assert!(p.apply_option("strictatime"));
        assert!(p.due(&file(10, 5, 5), at(11)));
        assert!(
            !p.due(&file(11, 5, 5), at(11)),
            "already the time it would write"
        );
        assert!(p.apply_option("noatime"));
        assert!(!p.due(&file(10, 10, 10), at(11)));
    }

    #[test]
    fn nodiratime_spares_directories_only() {
        let mut p = AtimePolicy::default();
        assert!(p.apply_option("nodiratime"));
        let mut d = file(10, 10, 10);
        d.kind = Kind::Dir;
        assert!(!p.due(&d, at(20)));
        assert!(p.due(&file(10, 10, 10), at(20)));
        assert!(p.apply_option("diratime"));
        assert!(p.due(&d, at(20)));
    }

    #[test]
    fn options_combine_as_mount_passes_them() {
        let after = |opts: &[&str]| {
            let mut p = AtimePolicy::default();
            for o in opts {
                assert!(p.apply_option(o), "{o}");
            }
            p.mode
        };
        assert_eq!(after(&[]), AtimeMode::Relative);
        assert_eq!(after(&["noatime", "atime"]), AtimeMode::Relative);
        assert_eq!(after(&["strictatime", "atime"]), AtimeMode::Always);
        assert_eq!(after(&["norelatime"]), AtimeMode::Always);
        assert_eq!(after(&["noatime", "norelatime"]), AtimeMode::Never);
        assert_eq!(after(&["strictatime", "relatime"]), AtimeMode::Relative);
        assert!(!AtimePolicy::default().apply_option("ro"));
    }
}
