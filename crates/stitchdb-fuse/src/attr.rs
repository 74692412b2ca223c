//! Conversions between the file system's types and FUSE's.

use fuser::{FileAttr, FileType};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use stitchdb_fs::{Attr, Kind, Timespec, BLOCK_SIZE};

/// FUSE's file type of a kind.
pub fn file_type(kind: Kind) -> FileType {
    match kind {
        Kind::File => FileType::RegularFile,
        Kind::Dir => FileType::Directory,
        Kind::Symlink => FileType::Symlink,
        Kind::Fifo => FileType::NamedPipe,
        Kind::Socket => FileType::Socket,
        Kind::CharDev => FileType::CharDevice,
        Kind::BlockDev => FileType::BlockDevice,
    }
}

/// A time stamp as a `SystemTime`.
pub fn system_time(t: Timespec) -> SystemTime {
    if t.secs >= 0 {
        UNIX_EPOCH + Duration::new(t.secs as u64, t.nanos)
    } else {
        UNIX_EPOCH - Duration::from_secs(t.secs.unsigned_abs())
            + Duration::from_nanos(t.nanos.into())
    }
}

/// A `SystemTime` as a time stamp.
pub fn timespec(t: SystemTime) -> Timespec {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => Timespec {
            secs: d.as_secs() as i64,
            nanos: d.subsec_nanos(),
        },
        Err(before) => {
            let d = before.duration();
            let (mut secs, mut nanos) = (-(d.as_secs() as i64), d.subsec_nanos());
            if nanos > 0 {
                secs -= 1;
                nanos = 1_000_000_000 - nanos;
            }
            Timespec { secs, nanos }
        }
    }
}

/// The size and 512-byte blocks FUSE reports: directories show ext4's one-block size.
fn size_and_blocks(a: &Attr) -> (u64, u64) {
    if a.kind == Kind::Dir {
        (BLOCK_SIZE, BLOCK_SIZE / 512)
    } else {
        (a.size, a.blocks())
    }
}

/// What FUSE reports for an inode, as the io_uring queues send it.
pub fn fuse_attr(a: &Attr) -> fuse_uring::FuseAttr {
    let (size, blocks) = size_and_blocks(a);
    let t = |t: Timespec| (t.secs, t.nanos);
    fuse_uring::FuseAttr {
        ino: a.ino,
        size,
        blocks,
        atime: t(a.atime),
        mtime: t(a.mtime),
        ctime: t(a.ctime),
        mode: a.kind.mode_bits() | a.perm,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize: BLOCK_SIZE as u32,
    }
}

/// What FUSE reports for an inode, as `fuser` takes it.
pub fn file_attr(a: &Attr) -> FileAttr {
    let (size, blocks) = size_and_blocks(a);
    FileAttr {
        ino: a.ino,
        size,
        blocks,
        atime: system_time(a.atime),
        mtime: system_time(a.mtime),
        ctime: system_time(a.ctime),
        crtime: system_time(a.crtime),
        kind: file_type(a.kind),
        perm: a.perm as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize: BLOCK_SIZE as u32,
        flags: 0,
    }
}
