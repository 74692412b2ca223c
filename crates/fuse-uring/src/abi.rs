//! The kernel's FUSE protocol as it reaches the io_uring queues (`include/uapi/linux/fuse.h`,
//! protocol 7.42): where each field sits in the buffers a queue entry registers, and the
//! replies' layouts. `fuser` decodes the same protocol for `/dev/fuse`, but keeps its decoder
//! to itself, so the queues read the few dozen fields they need here.
//!
//! A queue entry registers two buffers: a header buffer
//! (`struct fuse_uring_req_header`: the `fuse_in_header` or, for the reply, the
//! `fuse_out_header` in its first 128 bytes, the operation's own header in the next 128, and
//! `struct fuse_uring_ent_in_out` after them) and a payload buffer (names, written data; the
//! reply's arguments). All fields are the machine's byte order.

use std::time::Duration;

/// `FUSE_OVER_IO_URING`: the INIT flag that offers (kernel) and takes (daemon) the queues.
pub const FUSE_OVER_IO_URING: u64 = 1 << 41;

/// `FUSE_IO_URING_CMD_REGISTER`: hands an entry's buffers to the kernel and waits for a
/// request.
pub const CMD_REGISTER: u32 = 1;
/// `FUSE_IO_URING_CMD_COMMIT_AND_FETCH`: sends the reply in an entry and waits for the next
/// request in it.
pub const CMD_COMMIT_AND_FETCH: u32 = 2;

/// Bytes of the header buffer (`sizeof(struct fuse_uring_req_header)`).
pub const HEADER_BYTES: usize = 288;

/// `IORING_ENTER_GETEVENTS`: `io_uring_enter` runs the ring's deferred work (with
/// `IORING_SETUP_DEFER_TASKRUN`, how requests reach the ring) and reaps completions.
pub const ENTER_GETEVENTS: u32 = 1;
const OP_IN: usize = 128;
const ENT_IN_OUT: usize = 256;
/// `ring_ent_in_out.commit_id`: the request's id, to commit its reply with.
const COMMIT_ID: usize = ENT_IN_OUT + 8;
/// `ring_ent_in_out.payload_sz`: the bytes used in the payload buffer, both ways.
const PAYLOAD_SZ: usize = ENT_IN_OUT + 16;

/// The command area of a queue entry's submission (`struct fuse_uring_cmd_req`).
pub fn cmd_req(commit_id: u64, qid: u16) -> [u8; 80] {
    let mut cmd = [0u8; 80];
    cmd[8..16].copy_from_slice(&commit_id.to_ne_bytes());
    cmd[16..18].copy_from_slice(&qid.to_ne_bytes());
    cmd
}

/// Opcodes (`enum fuse_opcode`): `FUSE_LOOKUP` is `LOOKUP`, and so on. FORGET, BATCH_FORGET,
/// INTERRUPT and INIT never come through the queues.
#[allow(missing_docs)]
pub mod op {
    pub const LOOKUP: u32 = 1;
    pub const GETATTR: u32 = 3;
    pub const SETATTR: u32 = 4;
    pub const READLINK: u32 = 5;
    pub const SYMLINK: u32 = 6;
    pub const MKNOD: u32 = 8;
    pub const MKDIR: u32 = 9;
    pub const UNLINK: u32 = 10;
    pub const RMDIR: u32 = 11;
    pub const RENAME: u32 = 12;
    pub const LINK: u32 = 13;
    pub const OPEN: u32 = 14;
    pub const READ: u32 = 15;
    pub const WRITE: u32 = 16;
    pub const STATFS: u32 = 17;
    pub const RELEASE: u32 = 18;
    pub const FSYNC: u32 = 20;
    pub const SETXATTR: u32 = 21;
    pub const GETXATTR: u32 = 22;
    pub const LISTXATTR: u32 = 23;
    pub const REMOVEXATTR: u32 = 24;
    pub const FLUSH: u32 = 25;
    pub const OPENDIR: u32 = 27;
    pub const READDIR: u32 = 28;
    pub const RELEASEDIR: u32 = 29;
    pub const FSYNCDIR: u32 = 30;
    pub const ACCESS: u32 = 34;
    pub const CREATE: u32 = 35;
    pub const DESTROY: u32 = 38;
    pub const FALLOCATE: u32 = 43;
    pub const READDIRPLUS: u32 = 44;
    pub const RENAME2: u32 = 45;
    pub const LSEEK: u32 = 46;
}

/// `FATTR_*`: which fields of a SETATTR are set (`FATTR_MODE` is `MODE`, and so on).
#[allow(missing_docs)]
pub mod fattr {
    pub const MODE: u32 = 1 << 0;
    pub const UID: u32 = 1 << 1;
    pub const GID: u32 = 1 << 2;
    pub const SIZE: u32 = 1 << 3;
    pub const ATIME: u32 = 1 << 4;
    pub const MTIME: u32 = 1 << 5;
    pub const FH: u32 = 1 << 6;
    pub const ATIME_NOW: u32 = 1 << 7;
    pub const MTIME_NOW: u32 = 1 << 8;
    pub const CTIME: u32 = 1 << 10;
}

/// A request as it lies in an entry's buffers.
pub struct Request<'a> {
    /// What is asked (`op::*`).
    pub opcode: u32,
    /// The request's id, which its reply carries.
    pub unique: u64,
    /// The inode it is about (for name operations: the directory).
    pub nodeid: u64,
    /// The caller's file system uid.
    pub uid: u32,
    /// The caller's file system gid.
    pub gid: u32,
    /// The calling thread's process.
    pub pid: u32,
    /// The operation's own header (`fuse_*_in`), zero-padded to 128 bytes.
    pub op: Fields<'a>,
    /// The rest: names (each ending in a NUL), then data.
    pub payload: &'a [u8],
    /// The id to commit the reply with.
    pub commit_id: u64,
}

impl<'a> Request<'a> {
    /// Reads the request in `header` and `payload` (the whole payload buffer).
    pub fn parse(header: &'a [u8], payload: &'a [u8]) -> Option<Request<'a>> {
        let h = Fields(header.get(..HEADER_BYTES)?);
        let used = (h.u32(PAYLOAD_SZ) as usize).min(payload.len());
        Some(Request {
            opcode: h.u32(4),
            unique: h.u64(8),
            nodeid: h.u64(16),
            uid: h.u32(24),
            gid: h.u32(28),
            pid: h.u32(32),
            op: Fields(&header[OP_IN..ENT_IN_OUT]),
            payload: &payload[..used],
            commit_id: h.u64(COMMIT_ID),
        })
    }

    /// The first NUL-terminated name of the payload, and what follows it.
    pub fn name(&self) -> Option<(&'a [u8], &'a [u8])> {
        split_name(self.payload)
    }

    /// The two names of a RENAME or SYMLINK.
    pub fn two_names(&self) -> Option<(&'a [u8], &'a [u8])> {
        let (first, rest) = split_name(self.payload)?;
        let (second, _) = split_name(rest)?;
        Some((first, second))
    }
}

fn split_name(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let end = b.iter().position(|&c| c == 0)?;
    Some((&b[..end], &b[end + 1..]))
}

/// Fixed-offset fields of a header (zero past its end: a shorter header from an older
/// kernel reads as fields left unset).
#[derive(Clone, Copy)]
pub struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    /// The `u32` at byte `at`.
    pub fn u32(&self, at: usize) -> u32 {
        let mut b = [0u8; 4];
        if let Some(s) = self.0.get(at..at + 4) {
            b.copy_from_slice(s);
        }
        u32::from_ne_bytes(b)
    }

    /// The `u64` at byte `at`.
    pub fn u64(&self, at: usize) -> u64 {
        let mut b = [0u8; 8];
        if let Some(s) = self.0.get(at..at + 8) {
            b.copy_from_slice(s);
        }
        u64::from_ne_bytes(b)
    }
}

/// Writes the reply's `fuse_out_header` and payload size into an entry's header buffer.
pub fn set_reply_header(header: &mut [u8], unique: u64, error: i32, payload: usize) {
    header[..128].fill(0);
    header[0..4].copy_from_slice(&((16 + payload) as u32).to_ne_bytes());
    header[4..8].copy_from_slice(&(-error).to_ne_bytes());
    header[8..16].copy_from_slice(&unique.to_ne_bytes());
    header[PAYLOAD_SZ..PAYLOAD_SZ + 4].copy_from_slice(&(payload as u32).to_ne_bytes());
}

/// Appends native-order integers to a reply.
pub trait Put {
    /// Appends a `u32`.
    fn u32(&mut self, v: u32);
    /// Appends a `u64`.
    fn u64(&mut self, v: u64);
}

impl Put for Vec<u8> {
    fn u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_ne_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_ne_bytes());
    }
}

/// `struct fuse_attr`: what the kernel is told of an inode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FuseAttr {
    /// Inode number.
    pub ino: u64,
    /// Bytes.
    pub size: u64,
    /// 512-byte blocks.
    pub blocks: u64,
    /// Last access: seconds and nanoseconds since the epoch.
    pub atime: (i64, u32),
    /// Last change of the contents.
    pub mtime: (i64, u32),
    /// Last change of the inode.
    pub ctime: (i64, u32),
    /// Type and permission bits (`st_mode`).
    pub mode: u32,
    /// Links.
    pub nlink: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Device number of a device node.
    pub rdev: u32,
    /// Preferred I/O size.
    pub blksize: u32,
}

/// Appends `struct fuse_attr` (88 bytes).
pub fn put_attr(out: &mut Vec<u8>, a: &FuseAttr) {
    out.u64(a.ino);
    out.u64(a.size);
    out.u64(a.blocks);
    out.u64(a.atime.0 as u64);
    out.u64(a.mtime.0 as u64);
    out.u64(a.ctime.0 as u64);
    out.u32(a.atime.1);
    out.u32(a.mtime.1);
    out.u32(a.ctime.1);
    out.u32(a.mode);
    out.u32(a.nlink);
    out.u32(a.uid);
    out.u32(a.gid);
    out.u32(a.rdev);
    out.u32(a.blksize);
    out.u32(0);
}

/// Seconds and nanoseconds of a validity period.
fn valid(ttl: Duration) -> (u64, u32) {
    (ttl.as_secs(), ttl.subsec_nanos())
}

/// Appends `struct fuse_entry_out` (128 bytes): a name's inode (generation 0), its name and
/// attributes cached for `ttl`.
pub fn put_entry(out: &mut Vec<u8>, a: &FuseAttr, ttl: Duration) {
    let (s, ns) = valid(ttl);
    out.u64(a.ino);
    out.u64(0);
    out.u64(s);
    out.u64(s);
    out.u32(ns);
    out.u32(ns);
    put_attr(out, a);
}

/// Appends `struct fuse_attr_out` (104 bytes).
pub fn put_attr_out(out: &mut Vec<u8>, a: &FuseAttr, ttl: Duration) {
    let (s, ns) = valid(ttl);
    out.u64(s);
    out.u32(ns);
    out.u32(0);
    put_attr(out, a);
}

/// Appends `struct fuse_open_out` (16 bytes).
pub fn put_open(out: &mut Vec<u8>, fh: u64, open_flags: u32) {
    out.u64(fh);
    out.u32(open_flags);
    out.u32(0);
}

/// Appends the `struct fuse_dirent` of one entry (`mode`: its type bits), padded to 8
/// bytes, if it fits in `limit` bytes of reply; `entry` puts the `fuse_entry_out` of a
/// READDIRPLUS entry first. False, and nothing appended, when it does not fit.
pub fn put_dirent(
    out: &mut Vec<u8>,
    limit: usize,
    ino: u64,
    next: u64,
    mode: u32,
    name: &[u8],
    entry: Option<(&FuseAttr, Duration)>,
) -> bool {
    let plain = (24 + name.len()).next_multiple_of(8);
    let size = plain + if entry.is_some() { 128 } else { 0 };
    if out.len() + size > limit {
        return false;
    }
    if let Some((a, ttl)) = entry {
        put_entry(out, a, ttl);
    }
    out.u64(ino);
    out.u64(next);
    out.u32(name.len() as u32);
    out.u32((mode & libc::S_IFMT) >> 12);
    out.extend_from_slice(name);
    out.resize(out.len() + plain - 24 - name.len(), 0);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_split_at_their_nul() {
        let payload = b"old\0new\0";
        let (a, rest) = split_name(payload).unwrap();
        assert_eq!((a, rest), (&b"old"[..], &b"new\0"[..]));
        assert!(split_name(b"no-nul").is_none());
    }

    #[test]
    fn fields_past_a_short_header_read_as_zero() {
        let f = Fields(&[1, 0, 0, 0, 2]);
        assert_eq!(f.u32(0), 1);
        assert_eq!(f.u32(4), 0);
        assert_eq!(f.u64(100), 0);
    }

    #[test]
    fn replies_have_the_kernels_sizes() {
        let a = FuseAttr {
            ino: 7,
            size: 5,
            mode: libc::S_IFREG | 0o644,
            nlink: 1,
            ..FuseAttr::default()
        };
        let ttl = Duration::from_millis(1500);
        let mut v = Vec::new();
        put_attr(&mut v, &a);
        assert_eq!(v.len(), 88);
        assert_eq!(Fields(&v).u32(60), libc::S_IFREG | 0o644, "mode");
        v.clear();
        put_entry(&mut v, &a, ttl);
        assert_eq!(v.len(), 128);
        assert_eq!((Fields(&v).u64(16), Fields(&v).u32(32)), (1, 500_000_000));
        v.clear();
        put_attr_out(&mut v, &a, ttl);
        assert_eq!(v.len(), 104);
        v.clear();
        assert!(put_dirent(&mut v, 4096, 7, 9, libc::S_IFREG, b"abc", None));
        assert_eq!(v.len(), 32, "24 bytes and the name, padded to 8");
        assert_eq!(Fields(&v).u32(20), libc::DT_REG as u32);
        assert!(
            !put_dirent(&mut v, 40, 8, 10, libc::S_IFDIR, b"d", None),
            "full"
        );
        assert_eq!(v.len(), 32);
        assert!(put_dirent(
            &mut v,
            4096,
            8,
            10,
            libc::S_IFDIR,
            b"d",
            Some((&a, ttl))
        ));
        assert_eq!(v.len(), 32 + 128 + 32);
    }

    #[test]
    fn a_reply_header_carries_the_negated_errno_and_the_payload_size() {
        let mut h = vec![0xffu8; HEADER_BYTES];
        set_reply_header(&mut h, 42, libc::ENOENT, 0);
        let f = Fields(&h);
        assert_eq!(f.u32(0), 16);
        assert_eq!(f.u32(4) as i32, -libc::ENOENT);
        assert_eq!(f.u64(8), 42);
        assert_eq!(f.u32(PAYLOAD_SZ), 0);
    }
}
