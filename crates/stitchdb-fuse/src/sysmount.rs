//! The mount system call, for a daemon running as root.
//!
//! `fuser`'s own mount unmounts the mount point again when its session is dropped, even after
//! the file system was unmounted: its test of whether the connection still lives
//! (`is_mounted`, fuser 0.16 and 0.18, the newest on crates.io) takes the device's `POLLERR`,
//! which the kernel reports once the connection is gone, for "mounted". So every clean
//! `umount` of a foreground mount logged `Unmount failed: Invalid argument`, and a file system
//! mounted on the same directory between the unmount and the daemon's exit would have been
//! unmounted by it. Here the device is opened and mounted by this module, the session is made
//! from the descriptor (`fuser::Session::from_fd`, which unmounts nothing), and the daemon
//! unmounts only a mount whose connection is still alive ([`connected`]). A daemon that is not
//! root mounts through `fusermount3`, which only `fuser` drives.

use crate::mount::MountConfig;
use rustix::event::{PollFd, PollFlags};
use rustix::fs::{Mode, OFlags};
use rustix::mount::MountFlags;
use std::ffi::CString;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

/// The type the mount table shows (`findmnt -t fuse.stitchdb`), as libfuse names a
/// file system with a subtype.
const FS_TYPE: &str = "fuse.stitchdb";

/// Opens `/dev/fuse` and mounts its connection on `mountpoint` (already resolved) as `c` says;
/// returns the device, from which the kernel's requests are read.
pub(crate) fn mount(c: &MountConfig, mountpoint: &Path) -> std::io::Result<OwnedFd> {
    let device = rustix::fs::open("/dev/fuse", OFlags::RDWR | OFlags::CLOEXEC, Mode::empty())?;
    let root_type = rustix::fs::stat(mountpoint)?.st_mode & libc::S_IFMT;
    let mut data = format!(
        "fd={},rootmode={root_type:o},user_id={},group_id={}",
        rustix::fd::AsRawFd::as_raw_fd(&device),
        rustix::process::getuid().as_raw(),
        rustix::process::getgid().as_raw(),
    );
    // `allow_root` is `allow_other` to the kernel; the session's ACL lets root and the owner
    // in (as libfuse does).
    if c.allow_other || c.allow_root {
        data.push_str(",allow_other");
    }
    if c.default_permissions {
        data.push_str(",default_permissions");
    }
    let data = CString::new(data).map_err(std::io::Error::other)?;
    rustix::mount::mount(
        c.source().as_path(),
        mountpoint,
        FS_TYPE,
        flags(c),
        data.as_c_str(),
    )?;
    Ok(device)
}

/// The mount flags of `c`: `nosuid` and `nodev` unless `suid` or `dev` is given (as `fuser`
/// and libfuse mount), later options overriding earlier ones.
fn flags(c: &MountConfig) -> MountFlags {
    let mut f = MountFlags::NOSUID | MountFlags::NODEV;
    if c.read_only {
        f |= MountFlags::RDONLY;
    }
    for o in &c.flags {
        match o.as_str() {
            "dev" => f.remove(MountFlags::NODEV),
            "nodev" => f.insert(MountFlags::NODEV),
            "suid" => f.remove(MountFlags::NOSUID),
            "nosuid" => f.insert(MountFlags::NOSUID),
            "exec" => f.remove(MountFlags::NOEXEC),
            "noexec" => f.insert(MountFlags::NOEXEC),
            "dirsync" => f.insert(MountFlags::DIRSYNC),
            _ => {}
        }
    }
    f
}

/// Whether the connection of `device` is alive: the kernel reports `POLLERR` on a FUSE
/// device once its file system is unmounted or its connection aborted.
pub(crate) fn connected(device: impl AsFd) -> bool {
    let mut fds = [PollFd::new(&device, PollFlags::empty())];
    match rustix::event::poll(&mut fds, Some(&rustix::time::Timespec::default())) {
        Ok(_) => !fds[0].revents().contains(PollFlags::ERR),
        // Cannot tell: as if alive, so the caller unmounts (which fails harmlessly on a
        // path no longer mounted).
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(options: &[&str]) -> MountConfig {
        let lists: Vec<String> = options.iter().map(|o| o.to_string()).collect();
        MountConfig::parse("s.store".into(), "mnt".into(), &lists).unwrap()
    }

    #[test]
    fn flags_default_to_nosuid_nodev_and_follow_the_options_in_order() {
        assert_eq!(flags(&config(&[])), MountFlags::NOSUID | MountFlags::NODEV);
        assert_eq!(
            flags(&config(&["ro,suid,noexec,dirsync"])),
            MountFlags::RDONLY | MountFlags::NODEV | MountFlags::NOEXEC | MountFlags::DIRSYNC
        );
        assert_eq!(
            flags(&config(&["dev,nosuid", "nodev,noexec,exec"])),
            MountFlags::NOSUID | MountFlags::NODEV
        );
    }

    #[test]
    fn only_a_descriptor_reporting_pollerr_reads_as_disconnected() {
        // A pipe's read end reports POLLHUP, not POLLERR, when its writer closes, and
        // nothing while it is open: the test of a live device.
        let (r, w) = rustix::pipe::pipe().unwrap();
        assert!(connected(&r));
        drop(w);
        assert!(connected(&r));
        // A pipe's write end reports POLLERR once its reader is gone, as a dead FUSE
        // connection does.
        let (r, w) = rustix::pipe::pipe().unwrap();
        drop(r);
        assert!(!connected(&w));
    }
}
