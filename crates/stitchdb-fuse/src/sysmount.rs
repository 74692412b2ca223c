//! Mounting: with the mount system call for a daemon running as root, through `fusermount3`
//! for any other user.
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
//! root runs `fusermount3` itself, as libfuse does ([`mount_as_user`]), and serves the
//! descriptor it hands back the same way: `fuser`'s own `fusermount3` mount has the same
//! session drop, which ran `fusermount3 -u -q -z` on the path once more at every exit.

use crate::options::MountConfig;
use rustix::event::{PollFd, PollFlags};
use rustix::fs::{Mode, OFlags};
use rustix::mount::MountFlags;
use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SocketFlags, SocketType,
};
use std::ffi::CString;
use std::io::IoSliceMut;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;
use std::process::Command;
use stitchdb_fs::AtimeMode;

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
    for o in access_options(c) {
        data.push(',');
        data.push_str(o);
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

/// Mounts through `fusermount3`, the set-user-ID helper that lets users mount FUSE file
/// systems: it opens `/dev/fuse`, mounts it on `mountpoint` (already resolved) with the
/// options of `c`, and hands the descriptor back over the socket named by `_FUSE_COMMFD`
/// (libfuse's protocol); returns the device.
pub(crate) fn mount_as_user(c: &MountConfig, mountpoint: &Path) -> std::io::Result<OwnedFd> {
    let (ours, theirs) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )?;
    // `fusermount3` inherits its end.
    rustix::io::fcntl_setfd(&theirs, rustix::io::FdFlags::empty())?;
    let ran = Command::new("fusermount3")
        .arg("-o")
        .arg(user_options(c))
        .arg("--")
        .arg(mountpoint)
        .env("_FUSE_COMMFD", theirs.as_raw_fd().to_string())
        .output();
    // Closed here, so that the read below ends if `fusermount3` sent nothing.
    drop(theirs);
    let out =
        ran.map_err(|e| std::io::Error::new(e.kind(), format!("running fusermount3: {e}")))?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        return Err(std::io::Error::other(format!(
            "fusermount3 failed ({}): {}",
            out.status,
            said.trim()
        )));
    }
    received_fd(&ours)?.ok_or_else(|| std::io::Error::other("fusermount3 sent no descriptor"))
}

/// The descriptor sent over `socket` with one byte of data, if any.
fn received_fd(socket: &OwnedFd) -> std::io::Result<Option<OwnedFd>> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut byte = [0u8; 1];
    rustix::net::recvmsg(
        socket,
        &mut [IoSliceMut::new(&mut byte)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    let fd = control.drain().find_map(|m| match m {
        RecvAncillaryMessage::ScmRights(mut fds) => fds.next(),
        _ => None,
    });
    Ok(fd)
}

/// The kernel's options of `c` that say who may use the mount, on both mounting paths.
/// `allow_root` is `allow_other` to the kernel; the session's ACL lets root and the owner in
/// (as libfuse does).
fn access_options(c: &MountConfig) -> impl Iterator<Item = &'static str> {
    let other = (c.allow_other || c.allow_root).then_some("allow_other");
    let permissions = c.default_permissions.then_some("default_permissions");
    other.into_iter().chain(permissions)
}

/// The option list `fusermount3` mounts with for `c`: what [`mount`] puts in the mount's data
/// and flags (`fusermount3` adds the descriptor, root mode and ids, and for a user
/// `nosuid,nodev` whatever the list says), and the source, escaped as libfuse escapes it.
fn user_options(c: &MountConfig) -> String {
    let source = c.source().display().to_string();
    let source = source.replace('\\', "\\\\").replace(',', "\\,");
    let mut o = vec![
        format!("fsname={source}"),
        "subtype=stitchdb".to_string(),
        if c.read_only { "ro" } else { "rw" }.to_string(),
    ];
    o.extend(access_options(c).map(String::from));
    o.extend(c.flags.iter().cloned());
    // fusermount3 as Debian 12 ships it (3.14) refuses `relatime` and `strictatime`; without
    // them the kernel mounts `relatime`, so only a user's `strictatime` mount shows as
    // `relatime` in the mount table (it behaves as `strictatime` all the same).
    o.extend(
        atime_options(c)
            .filter(|o| matches!(*o, "noatime" | "nodiratime"))
            .map(String::from),
    );
    o.join(",")
}

/// The kernel's names for `c`'s access-time policy, so that the mount table shows it. The
/// kernel writes no FUSE inode's access time whatever they say: the file system does.
fn atime_options(c: &MountConfig) -> impl Iterator<Item = &'static str> {
    let mode = match c.atime.mode {
        AtimeMode::Never => "noatime",
        AtimeMode::Relative => "relatime",
        AtimeMode::Always => "strictatime",
    };
    std::iter::once(mode).chain((!c.atime.dirs).then_some("nodiratime"))
}

/// The mount flags of `c`: `nosuid` and `nodev` unless `suid` or `dev` is given (as `fuser`
/// and libfuse mount), later options overriding earlier ones.
fn flags(c: &MountConfig) -> MountFlags {
    let mut f = MountFlags::NOSUID | MountFlags::NODEV;
    if c.read_only {
        f |= MountFlags::RDONLY;
    }
    let atime: Vec<&str> = atime_options(c).collect();
    for o in c.flags.iter().map(String::as_str).chain(atime) {
        match o {
            "dev" => f.remove(MountFlags::NODEV),
            "nodev" => f.insert(MountFlags::NODEV),
            "suid" => f.remove(MountFlags::NOSUID),
            "nosuid" => f.insert(MountFlags::NOSUID),
            "exec" => f.remove(MountFlags::NOEXEC),
            "noexec" => f.insert(MountFlags::NOEXEC),
            "dirsync" => f.insert(MountFlags::DIRSYNC),
            "noatime" => f.insert(MountFlags::NOATIME),
            "relatime" => f.insert(MountFlags::RELATIME),
            "strictatime" => f.insert(MountFlags::STRICTATIME),
            "nodiratime" => f.insert(MountFlags::NODIRATIME),
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
    fn flags_default_to_nosuid_nodev_relatime_and_follow_the_options_in_order() {
        let relatime = MountFlags::RELATIME;
        assert_eq!(
            flags(&config(&[])),
            MountFlags::NOSUID | MountFlags::NODEV | relatime
        );
        assert_eq!(
            flags(&config(&["ro,suid,noexec,dirsync"])),
            MountFlags::RDONLY
                | MountFlags::NODEV
                | MountFlags::NOEXEC
                | MountFlags::DIRSYNC
                | relatime
        );
        assert_eq!(
            flags(&config(&["dev,nosuid", "nodev,noexec,exec"])),
            MountFlags::NOSUID | MountFlags::NODEV | relatime
        );
        assert_eq!(
            flags(&config(&["strictatime,nodiratime", "relatime,noatime"])),
            MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOATIME | MountFlags::NODIRATIME
        );
        assert_eq!(
            flags(&config(&["noatime", "strictatime"])),
            MountFlags::NOSUID | MountFlags::NODEV | MountFlags::STRICTATIME
        );
    }

    #[test]
    fn fusermount3_gets_the_source_escaped_and_the_options_in_order() {
        let c = config(&["ro,allow_root,nosuid", "default_permissions,dirsync"]);
        let fsname = c.source().display().to_string();
        assert_eq!(
            user_options(&c),
            format!("fsname={fsname},subtype=stitchdb,ro,allow_other,default_permissions,nosuid,dirsync")
        );
        let atime = config(&["noatime,nodiratime"]);
        assert!(user_options(&atime).ends_with(",rw,default_permissions,noatime,nodiratime"));
        assert!(user_options(&config(&["strictatime"])).ends_with(",rw,default_permissions"));
        let off = config(&["no_default_permissions"]);
        assert!(user_options(&off).ends_with(",rw"));
        let odd = MountConfig::parse("a,b\\c".into(), "mnt".into(), &[]).unwrap();
        assert!(user_options(&odd).starts_with("fsname="));
        assert!(user_options(&odd).contains("a\\,b\\\\c,subtype=stitchdb,rw"));
    }

    #[test]
    fn a_descriptor_sent_over_a_socket_is_received() {
        let (a, b) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::STREAM,
            SocketFlags::CLOEXEC,
            None,
        )
        .unwrap();
        let (r, _w) = rustix::pipe::pipe().unwrap();
        let fds = [r.as_fd()];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = rustix::net::SendAncillaryBuffer::new(&mut space);
        assert!(control.push(rustix::net::SendAncillaryMessage::ScmRights(&fds)));
        rustix::net::sendmsg(
            &a,
            &[std::io::IoSlice::new(b"x")],
            &mut control,
            rustix::net::SendFlags::empty(),
        )
        .unwrap();
        let got = received_fd(&b).unwrap().expect("a descriptor");
        assert_ne!(got.as_raw_fd(), r.as_raw_fd());
        // The same pipe: what is written to `_w` is read from the received descriptor.
        rustix::io::write(&_w, b"y").unwrap();
        let mut buf = [0u8; 1];
        rustix::io::read(&got, &mut buf).unwrap();
        assert_eq!(&buf, b"y");
        // Nothing sent, the peer closed: no descriptor.
        drop(a);
        assert!(received_fd(&b).unwrap().is_none());
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
