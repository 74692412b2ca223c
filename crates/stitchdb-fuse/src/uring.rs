//! The requests that come through the io_uring queues (`fuse-uring`), served by [`Served`]:
//! the same operations as the `fuser` session's, decoded from the kernel's layouts.

use crate::attr::fuse_attr;
use crate::serve::{self, errno, Answer, Served, Xattr};
use fuse_uring::abi::{fattr, op, put_attr_out, put_dirent, put_entry, put_open, Put};
use fuse_uring::{Handler, Later, Request};
use stitchdb_fs::{Attr, SetAttr, TimeSet, Timespec};

/// `FOPEN_KEEP_CACHE`: only this mount changes the files, so the page cache stays valid
/// across opens.
const FOPEN_KEEP_CACHE: u32 = 1 << 1;

impl Handler for Served {
    /// A queue thread serves short reads itself, so it waits for the device the way the
    /// polling session thread does: cold random 4 KiB reads (`fio --rw=randread`, 2 GiB,
    /// three alternating pairs) 10.9-13.5K IOPS polling, 7.7-8.1K sleeping.
    fn thread_started(&self) {
        stitchdb::spin_for_reads(serve::READ_SPIN_LIMIT);
    }

    fn handle(
        &self,
        req: &Request<'_>,
        out: &mut Vec<u8>,
        later: &mut Option<Later>,
    ) -> Result<(), i32> {
        self.request_started();
        let ino = req.nodeid;
        let o = req.op;
        let ttl = self.opts.ttl;
        let fs = &self.fs;
        let who = || serve::caller(req.uid, req.gid, req.pid);
        let name = || req.name().map(|(n, _)| n).ok_or(libc::EINVAL);
        let entry = |out: &mut Vec<u8>, r: Result<Attr, stitchdb_fs::FsError>| -> Answer<()> {
            put_entry(out, &fuse_attr(&r.map_err(|e| errno(&e))?), ttl);
            Ok(())
        };
        let done = |r: Result<(), stitchdb_fs::FsError>| r.map_err(|e| errno(&e));
        match req.opcode {
            op::LOOKUP => entry(out, fs.lookup(&who(), ino, name()?)),
            op::GETATTR => {
                let a = fs.getattr(ino).map_err(|e| errno(&e))?;
                put_attr_out(out, &fuse_attr(&a), ttl);
                Ok(())
            }
            op::SETATTR => {
                let a = fs
                    .setattr(&who(), ino, &set_attr(req))
                    .map_err(|e| errno(&e))?;
                put_attr_out(out, &fuse_attr(&a), ttl);
                Ok(())
            }
            op::READLINK => {
                out.extend_from_slice(&fs.readlink(ino).map_err(|e| errno(&e))?);
                Ok(())
            }
            op::SYMLINK => {
                let (link, target) = req.two_names().ok_or(libc::EINVAL)?;
                entry(out, fs.symlink(&who(), ino, link, target))
            }
            op::MKNOD => entry(out, fs.mknod(&who(), ino, name()?, o.u32(0), o.u32(4))),
            op::MKDIR => entry(out, fs.mkdir(&who(), ino, name()?, o.u32(0))),
            op::UNLINK => done(fs.unlink(&who(), ino, name()?)),
            op::RMDIR => done(fs.rmdir(&who(), ino, name()?)),
            op::RENAME | op::RENAME2 => {
                let (from, to) = req.two_names().ok_or(libc::EINVAL)?;
                let flags = if req.opcode == op::RENAME2 {
                    o.u32(8)
                } else {
                    0
                };
                done(fs.rename(&who(), ino, from, o.u64(0), to, flags))
            }
            op::LINK => entry(out, fs.link(&who(), o.u64(0), ino, name()?)),
            op::OPEN => {
                fs.open(&who(), ino, o.u32(0) as i32)
                    .map_err(|e| errno(&e))?;
                put_open(out, ino, FOPEN_KEEP_CACHE);
                Ok(())
            }
            op::READ => {
                let offset = u64::try_from(o.u64(8) as i64).map_err(|_| libc::EINVAL)?;
                let size = o.u32(16);
                // A short read (a random reader's next block) is served here, on the
                // caller's CPU; a long one (read-ahead) on a worker, so that a sequential
                // reader's requests overlap, on the CPU the reader is not on.
                if size > serve::INLINE_MAX {
                    if let Some(later) = later.take() {
                        let fs = fs.clone();
                        self.workers.run(Box::new(move || {
                            later.send(fs.read(ino, offset, size as usize).map_err(|e| errno(&e)))
                        }));
                        return Ok(());
                    }
                }
                let data = fs.read(ino, offset, size as usize).map_err(|e| errno(&e))?;
                out.extend_from_slice(&data);
                Ok(())
            }
            op::WRITE => {
                let size = o.u32(16) as usize;
                let data = req.payload.get(..size).ok_or(libc::EINVAL)?;
                let offset = self.write_offset(ino, o.u64(8) as i64, o.u32(32) as i32)?;
                let n = fs.write(&who(), ino, offset, data).map_err(|e| errno(&e))?;
                out.u32(n as u32);
                out.u32(0);
                Ok(())
            }
            op::STATFS => {
                let st = self.statfs();
                for v in [st.blocks, st.bfree, st.bavail, st.files, st.ffree] {
                    out.u64(v);
                }
                for v in [st.bsize, st.namelen, st.frsize, 0, 0, 0, 0, 0, 0, 0] {
                    out.u32(v);
                }
                Ok(())
            }
            op::RELEASE => done(fs.release(ino)),
            op::FSYNC | op::FSYNCDIR => done(fs.fsync()),
            op::SETXATTR => {
                let (name, value) = req.name().ok_or(libc::EINVAL)?;
                let value = value.get(..o.u32(0) as usize).ok_or(libc::EINVAL)?;
                done(fs.setxattr(&who(), ino, name, value, o.u32(4)))
            }
            op::GETXATTR => {
                let v = fs.getxattr(&who(), ino, name()?).map_err(|e| errno(&e))?;
                put_xattr(out, &v, o.u32(0))
            }
            op::LISTXATTR => {
                let names = fs.listxattr(&who(), ino).map_err(|e| errno(&e))?;
                put_xattr(out, &serve::xattr_list(names), o.u32(0))
            }
            op::REMOVEXATTR => done(fs.removexattr(&who(), ino, name()?)),
            // As the `fuser` session answers (see `KvFuse::flush`): nothing to do, and ENOSYS
            // stops the kernel from sending it.
            op::FLUSH => Err(libc::ENOSYS),
            op::OPENDIR => {
                self.opendir(&who(), ino, o.u32(0) as i32)?;
                put_open(out, ino, 0);
                Ok(())
            }
            op::READDIR | op::READDIRPLUS => {
                let limit = o.u32(16) as usize;
                let plus = req.opcode == op::READDIRPLUS;
                self.entries_from(ino, o.u64(8) as i64, |e| {
                    let attr = if plus {
                        Some(fuse_attr(&fs.getattr(e.ino)?))
                    } else {
                        None
                    };
                    let mode = e.kind.mode_bits();
                    let fits = put_dirent(
                        out,
                        limit,
                        e.ino,
                        e.offset,
                        mode,
                        &e.name,
                        attr.as_ref().map(|a| (a, ttl)),
                    );
                    Ok(!fits)
                })
            }
            op::RELEASEDIR => Ok(()),
            op::ACCESS => done(fs.access(&who(), ino, o.u32(0))),
            op::CREATE => {
                let a = fs
                    .create(&who(), ino, name()?, o.u32(4))
                    .map_err(|e| errno(&e))?;
                put_entry(out, &fuse_attr(&a), ttl);
                put_open(out, a.ino, FOPEN_KEEP_CACHE);
                Ok(())
            }
            op::DESTROY => done(fs.fsync()),
            op::FALLOCATE => {
                let (Ok(offset), Ok(length)) = (
                    u64::try_from(o.u64(8) as i64),
                    u64::try_from(o.u64(16) as i64),
                ) else {
                    return Err(libc::EINVAL);
                };
                done(fs.fallocate(&who(), ino, offset, length, o.u32(24) as i32))
            }
            op::LSEEK => {
                let off = self.lseek(ino, o.u64(8) as i64, o.u32(16) as i32)?;
                out.u64(off);
                Ok(())
            }
            // Locks (the kernel keeps them itself), ioctl, poll, bmap, copy_file_range ...
            _ => Err(libc::ENOSYS),
        }
    }
}

/// A getxattr or listxattr answer: `struct fuse_getxattr_out` with the size, or the bytes.
fn put_xattr(out: &mut Vec<u8>, v: &[u8], size: u32) -> Answer<()> {
    match serve::xattr_answer(v, size)? {
        Xattr::Size(n) => {
            out.u32(n);
            out.u32(0);
        }
        Xattr::Data(d) => out.extend_from_slice(d),
    }
    Ok(())
}

/// The changes a SETATTR asks for (`struct fuse_setattr_in`).
fn set_attr(req: &Request<'_>) -> SetAttr {
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
