//! [`Queued`]: the transport through the io_uring queues (`fuse-uring`). It decodes each
//! request from the kernel's layouts into a [`Request`] of the table, and encodes the table's
//! [`Reply`] into the kernel's layouts.

use crate::attr::fuse_attr;
use crate::bdi::PendingBdi;
use crate::table::{
    Answer, Op, Reply, Request, Served, INLINE_MAX, READ_SPIN_LIMIT, WRITE_KILL_SUIDGID,
};
use fuse_uring::abi::{fattr, op, put_attr_out, put_dirent, put_entry, put_open, Put};
use fuse_uring::{Handler, Later};
use std::sync::Arc;
use std::time::Duration;
use stitchdb_fs::{Attr, DirEntry, SetAttr, TimeSet, Timespec};

/// The table served through the queues.
pub struct Queued {
    /// The table.
    pub served: Arc<Served>,
    /// Backing-device settings the first request writes (see `KvFuse::set_bdi`).
    pub bdi: Arc<PendingBdi>,
}

impl Handler for Queued {
    /// A queue thread serves short reads itself, so it waits for the device the way the
    /// polling session thread does (see `stitchdb::spin_for_reads`).
    fn thread_started(&self) {
        stitchdb::spin_for_reads(READ_SPIN_LIMIT);
    }

    fn handle(
        &self,
        req: &fuse_uring::Request<'_>,
        out: &mut Vec<u8>,
        later: &mut Option<Later>,
    ) -> Result<(), i32> {
        self.bdi.apply();
        let ttl = self.served.opts.ttl;
        if req.opcode == op::READDIR || req.opcode == op::READDIRPLUS {
            // The entries are encoded as the table hands them over, until the reply is full.
            let limit = req.op.u32(16) as usize;
            let plus = req.opcode == op::READDIRPLUS;
            let add = &mut |e: &DirEntry, a: Option<&Attr>| {
                let entry = a.map(|a| (fuse_attr(a), ttl));
                let entry = entry.as_ref().map(|(a, ttl)| (a, *ttl));
                let mode = e.kind.mode_bits();
                !put_dirent(out, limit, e.ino, e.offset, mode, &e.name, entry)
            };
            let offset = req.op.u64(8) as i64;
            let op = Op::Readdir { offset, plus, add };
            return self.served.serve(request(req, op)).map(|_| ());
        }
        let op = decode(req)?;
        // A short read (a random reader's next block) is served here, on the caller's CPU; a
        // long one (read-ahead) on a worker, so that a sequential reader's requests overlap,
        // on the CPU the reader is not on.
        if let Op::Read { fh, offset, size } = op {
            if size > INLINE_MAX {
                if let Some(later) = later.take() {
                    let served = self.served.clone();
                    let read: Request<'static> = request(req, Op::Read { fh, offset, size });
                    self.served.workers.run(Box::new(move || {
                        later.send(served.serve(read).map(|r| encode(r, ttl)))
                    }));
                    return Ok(());
                }
            }
        }
        // FSYNC, and with `-o sync` a change, is answered here once the store is durable
        // (see `Served::fsync_here`).
        if let Op::Fsync = op {
            return self.served.fsync_here().map(|_| ());
        }
        let changes = op.changes();
        let reply = self.served.serve(request(req, op));
        let durable = self.served.needs_sync(changes, &reply);
        out.extend_from_slice(&encode(reply?, ttl));
        if durable {
            self.served.fsync_here()?;
        }
        Ok(())
    }
}

/// The table's request for `op`, from the caller of `req`.
fn request<'a>(req: &fuse_uring::Request<'_>, op: Op<'a>) -> Request<'a> {
    Request {
        ino: req.nodeid,
        uid: req.uid,
        gid: req.gid,
        pid: req.pid,
        op,
    }
}

/// The operation of `req`, from its `fuse_*_in` header and payload: `EINVAL` for one that
/// does not hold what its opcode needs, `ENOSYS` for an opcode the file system does not serve
/// (locks, which the kernel keeps itself; ioctl, poll, bmap, copy_file_range ...).
fn decode<'a>(req: &fuse_uring::Request<'a>) -> Answer<Op<'a>> {
    let o = req.op;
    let name = || req.name().map(|(n, _)| n).ok_or(libc::EINVAL);
    let two_names = || req.two_names().ok_or(libc::EINVAL);
    Ok(match req.opcode {
        op::LOOKUP => Op::Lookup { name: name()? },
        op::GETATTR => Op::Getattr,
        op::SETATTR => Op::Setattr(set_attr(req)),
        op::READLINK => Op::Readlink,
        op::SYMLINK => {
            let (name, target) = two_names()?;
            Op::Symlink { name, target }
        }
        op::MKNOD => Op::Mknod {
            name: name()?,
            mode: o.u32(0),
            rdev: o.u32(4),
        },
        op::MKDIR => Op::Mkdir {
            name: name()?,
            mode: o.u32(0),
        },
        op::UNLINK => Op::Unlink { name: name()? },
        op::RMDIR => Op::Rmdir { name: name()? },
        op::RENAME | op::RENAME2 => {
            let (name, new_name) = two_names()?;
            let flags = if req.opcode == op::RENAME2 {
                o.u32(8)
            } else {
                0
            };
            Op::Rename {
                name,
                new_parent: o.u64(0),
                new_name,
                flags,
            }
        }
        op::LINK => Op::Link {
            target: o.u64(0),
            name: name()?,
        },
        op::OPEN => Op::Open {
            flags: o.u32(0) as i32,
        },
        op::READ => Op::Read {
            fh: o.u64(0),
            offset: o.u64(8) as i64,
            size: o.u32(16),
        },
        op::WRITE => Op::Write {
            fh: o.u64(0),
            offset: o.u64(8) as i64,
            data: req.payload.get(..o.u32(16) as usize).ok_or(libc::EINVAL)?,
            flags: o.u32(32) as i32,
            kill_suidgid: o.u32(20) & WRITE_KILL_SUIDGID != 0,
        },
        op::STATFS => Op::Statfs,
        op::RELEASE => Op::Release { fh: o.u64(0) },
        op::FSYNC | op::FSYNCDIR => Op::Fsync,
        op::SETXATTR => {
            let (name, value) = req.name().ok_or(libc::EINVAL)?;
            Op::Setxattr {
                name,
                value: value.get(..o.u32(0) as usize).ok_or(libc::EINVAL)?,
                flags: o.u32(4),
            }
        }
        op::GETXATTR => Op::Getxattr {
            name: name()?,
            size: o.u32(0),
        },
        op::LISTXATTR => Op::Listxattr { size: o.u32(0) },
        op::REMOVEXATTR => Op::Removexattr { name: name()? },
        op::FLUSH => Op::Flush,
        op::OPENDIR => Op::Opendir {
            flags: o.u32(0) as i32,
        },
        op::RELEASEDIR => Op::Releasedir,
        op::ACCESS => Op::Access { mask: o.u32(0) },
        op::CREATE => Op::Create {
            name: name()?,
            mode: o.u32(4),
        },
        op::DESTROY => Op::Destroy,
        op::FALLOCATE => Op::Fallocate {
            offset: o.u64(8) as i64,
            length: o.u64(16) as i64,
            mode: o.u32(24) as i32,
        },
        op::LSEEK => Op::Lseek {
            offset: o.u64(8) as i64,
            whence: o.u32(16) as i32,
        },
        _ => return Err(libc::ENOSYS),
    })
}

/// The changes a SETATTR asks for (`struct fuse_setattr_in`).
fn set_attr(req: &fuse_uring::Request<'_>) -> SetAttr {
    let o = req.op;
    let valid = o.u32(0);
    let has = |bit: u32| valid & bit != 0;
    let time = |set: u32, now: u32, secs: usize, nanos: usize| {
        has(set).then(|| {
            if has(now) {
                TimeSet::Now
            } else {
                TimeSet::At(Timespec {
                    secs: o.u64(secs) as i64,
                    nanos: o.u32(nanos),
                })
            }
        })
    };
    SetAttr {
        mode: has(fattr::MODE).then(|| o.u32(68)),
        uid: has(fattr::UID).then(|| o.u32(76)),
        gid: has(fattr::GID).then(|| o.u32(80)),
        size: has(fattr::SIZE).then(|| o.u64(16)),
        atime: time(fattr::ATIME, fattr::ATIME_NOW, 32, 56),
        mtime: time(fattr::MTIME, fattr::MTIME_NOW, 40, 60),
        through_handle: has(fattr::FH),
        // Only a kernel keeping the file's times (the write-back cache) sends a change time:
        // see `SetAttr::ctime`.
        ctime: has(fattr::CTIME).then(|| Timespec {
            secs: o.u64(48) as i64,
            nanos: o.u32(64),
        }),
    }
}

/// A reply's arguments in the kernel's layouts; names and attributes cached for `ttl`.
fn encode(reply: Reply, ttl: Duration) -> Vec<u8> {
    let mut out = Vec::new();
    match reply {
        Reply::Entry(a) => put_entry(&mut out, &fuse_attr(&a), ttl),
        Reply::Attr(a) => put_attr_out(&mut out, &fuse_attr(&a), ttl),
        Reply::Data(d) => out = d,
        Reply::XattrSize(n) => {
            // `struct fuse_getxattr_out`.
            out.u32(n);
            out.u32(0);
        }
        Reply::Written(n) => {
            // `struct fuse_write_out`.
            out.u32(n);
            out.u32(0);
        }
        Reply::Opened { fh, flags } => put_open(&mut out, fh, flags),
        Reply::Created { attr, fh, flags } => {
            put_entry(&mut out, &fuse_attr(&attr), ttl);
            put_open(&mut out, fh, flags);
        }
        Reply::Statfs(st) => {
            // `struct fuse_statfs_out`.
            for v in [st.blocks, st.bfree, st.bavail, st.files, st.ffree] {
                out.u64(v);
            }
            for v in [st.bsize, st.namelen, st.frsize, 0, 0, 0, 0, 0, 0, 0] {
                out.u32(v);
            }
        }
        Reply::Offset(o) => out.u64(o),
        Reply::Empty => {}
    }
    out
}
