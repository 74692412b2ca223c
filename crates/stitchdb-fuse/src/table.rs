//! The one table of FUSE operations: what each request does to the file system and what it
//! answers, whichever transport brought it. The `fuser` session (`session`) and the io_uring
//! queues (`uring`) only decode a request into a [`Request`] and encode the [`Reply`] (or the
//! errno) that [`Served::serve`] gives back; every errno is chosen here, and every failure is
//! logged here ([`errno`]).

use crate::control::{self, Control};
use crate::invalidate::{Invalidator, Stale};
use crate::nodeid::{self, CONTROL, MAINLINE};
use crate::options::ServeOptions;
use parking_lot::{Condvar, Mutex};
use std::path::Path;
use std::sync::{Arc, OnceLock};
use stitchdb_fs::{
    permit, Attr, Caller, Cap, Changed, Check, DirEntry, FileTree, Fs, FsError, Kind, SetAttr,
    BLOCK_SIZE, R, ROOT_INO, W, X,
};

/// Entries read from the store per batch while filling a readdir reply.
const READDIR_BATCH: usize = 128;

/// Threads serving requests off the thread they came on.
const WORKERS: usize = 4;

/// The largest read served on the thread the request came on: about one device request (a
/// random 4 KiB read and its neighbours). Longer ones are the kernel's read-ahead of a
/// sequential reader, requests no caller waits for one by one: they gain from overlapping
/// on the workers, on CPUs the reader is not on.
pub const INLINE_MAX: u32 = 64 << 10;

/// How long a thread serving short reads itself polls for the device before sleeping: a few
/// times a cold read's latency on a solid-state disk (see `stitchdb::spin_for_reads`).
pub const READ_SPIN_LIMIT: std::time::Duration = std::time::Duration::from_micros(500);

/// `FOPEN_KEEP_CACHE`: only this mount changes the files, so the page cache stays valid
/// across opens.
pub const FOPEN_KEEP_CACHE: u32 = 1 << 1;

/// `FOPEN_DIRECT_IO`: every read and write of the handle comes to the daemon as it is made,
/// from the caller's thread (no page cache, no write-back by the kernel's flushers).
pub const FOPEN_DIRECT_IO: u32 = 1 << 0;

/// Where READDIR's entries go: into the reply, until it answers `true`, full (the entry it
/// was given is then not in it).
pub type AddEntry<'a> = dyn FnMut(&DirEntry, Option<&Attr>) -> bool + Send + 'a;

/// `FUSE_WRITE_KILL_SUIDGID`, in a WRITE's `write_flags`.
pub const WRITE_KILL_SUIDGID: u32 = 1 << 2;

/// A request to serve on a worker thread.
pub type Job = Box<dyn FnOnce() + Send>;

/// A request's outcome: its answer, or the errno the kernel gets.
pub type Answer<T> = Result<T, i32>;

/// Where an FSYNC's answer goes, from the syncer's thread: the transport's reply.
pub type Synced = Box<dyn FnOnce(Answer<Reply>) + Send>;

/// A request: the inode it is about (for operations on names, their directory), who sends
/// it, and the operation.
pub struct Request<'a> {
    /// The inode (`nodeid`).
    pub ino: u64,
    /// The caller's file-system uid.
    pub uid: u32,
    /// The caller's file-system gid.
    pub gid: u32,
    /// The calling thread (0 when this mount cannot see it).
    pub pid: u32,
    /// What is asked.
    pub op: Op<'a>,
}

/// The operations, with their arguments as the kernel sends them.
#[allow(missing_docs)]
pub enum Op<'a> {
    Lookup {
        name: &'a [u8],
    },
    Getattr,
    Setattr(SetAttr),
    Readlink,
    Mknod {
        name: &'a [u8],
        mode: u32,
        rdev: u32,
    },
    Mkdir {
        name: &'a [u8],
        mode: u32,
    },
    Unlink {
        name: &'a [u8],
    },
    Rmdir {
        name: &'a [u8],
    },
    Symlink {
        name: &'a [u8],
        target: &'a [u8],
    },
    Rename {
        name: &'a [u8],
        new_parent: u64,
        new_name: &'a [u8],
        flags: u32,
    },
    /// A new name in directory `ino` for inode `target`.
    Link {
        target: u64,
        name: &'a [u8],
    },
    Open {
        flags: i32,
    },
    /// `fh`: the handle OPEN answered.
    Read {
        fh: u64,
        offset: i64,
        size: u32,
    },
    /// `flags`: the file's open flags; `kill_suidgid`: the kernel's `FUSE_WRITE_KILL_SUIDGID`,
    /// set when the writer lacks `CAP_FSETID` (so its write takes the file's set-user-id and
    /// set-group-id bits away). The kernel writes back cached pages without naming the
    /// writer, having decided before that nothing needs taking away.
    Write {
        fh: u64,
        offset: i64,
        data: &'a [u8],
        flags: i32,
        kill_suidgid: bool,
    },
    Flush,
    Release {
        fh: u64,
    },
    Fsync,
    Opendir {
        flags: i32,
    },
    /// The entries after `offset` go to `add` (with their attributes if `plus`, for
    /// READDIRPLUS) until it answers that the reply is full.
    Readdir {
        offset: i64,
        plus: bool,
        add: &'a mut AddEntry<'a>,
    },
    Releasedir,
    Statfs,
    Setxattr {
        name: &'a [u8],
        value: &'a [u8],
        flags: u32,
    },
    /// `size`: the caller's buffer (0: it asks for the size).
    Getxattr {
        name: &'a [u8],
        size: u32,
    },
    Listxattr {
        size: u32,
    },
    Removexattr {
        name: &'a [u8],
    },
    Access {
        mask: u32,
    },
    Create {
        name: &'a [u8],
        mode: u32,
    },
    Fallocate {
        offset: i64,
        length: i64,
        mode: i32,
    },
    Lseek {
        offset: i64,
        whence: i32,
    },
    Destroy,
}

impl Op<'_> {
    /// Whether serving it may commit a change, which `-o sync` makes durable before the
    /// reply: not the reads (the access times they write are committed `Async`, durable
    /// with the next change), nor FSYNC, answered after a sync anyway.
    pub fn changes(&self) -> bool {
        !matches!(
            self,
            Op::Lookup { .. }
                | Op::Getattr
                | Op::Readlink
                | Op::Read { .. }
                | Op::Flush
                | Op::Fsync
                | Op::Opendir { .. }
                | Op::Readdir { .. }
                | Op::Releasedir
                | Op::Statfs
                | Op::Getxattr { .. }
                | Op::Listxattr { .. }
                | Op::Access { .. }
                | Op::Lseek { .. }
                | Op::Destroy
        )
    }
}

/// What a served request answers.
#[derive(Debug)]
pub enum Reply {
    /// A name's inode (`fuse_entry_out`).
    Entry(Attr),
    /// An inode's attributes (`fuse_attr_out`).
    Attr(Attr),
    /// Bytes: file data, a symlink's target, an extended attribute or the list of names.
    Data(Vec<u8>),
    /// The size of an extended attribute or of the list of names (`fuse_getxattr_out`).
    XattrSize(u32),
    /// Bytes written.
    Written(u32),
    /// An open file or directory (`fuse_open_out`).
    Opened { fh: u64, flags: u32 },
    /// A created and opened file (`fuse_entry_out` then `fuse_open_out`).
    Created { attr: Attr, fh: u64, flags: u32 },
    /// `statfs`.
    Statfs(Statfs),
    /// An offset (`lseek`).
    Offset(u64),
    /// Done, nothing to say.
    Empty,
}

impl Reply {
    /// The reply with the inode numbers it carries turned into node ids of view `view`.
    fn in_view(self, view: u16) -> Reply {
        let at = |mut a: Attr| {
            a.ino = nodeid::join(view, a.ino);
            a
        };
        match self {
            Reply::Entry(a) => Reply::Entry(at(a)),
            Reply::Attr(a) => Reply::Attr(at(a)),
            Reply::Created { attr, fh, flags } => Reply::Created {
                attr: at(attr),
                fh,
                flags,
            },
            other => other,
        }
    }
}

/// `statfs`'s answer, in `struct statfs`'s terms.
#[derive(Debug)]
pub struct Statfs {
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
    pub bsize: u32,
    pub namelen: u32,
    pub frsize: u32,
}

/// The file system as both transports serve it.
pub struct Served {
    /// The file system.
    pub fs: Arc<Fs>,
    /// How the kernel is served.
    pub opts: ServeOptions,
    /// Threads serving reads the transports hand them.
    pub workers: Workers,
    /// The control namespace `/.stitch`, and the patchgroups of the mount's processes.
    pub control: Control,
    /// Where the session puts its notifier, once it exists: the kernel is told through it
    /// of changes made around the mainline (`invalidate`).
    pub notifier: Arc<OnceLock<fuser::Notifier>>,
    /// Sends those notices.
    invalidator: Arc<Invalidator>,
    /// The thread answering FSYNC and FSYNCDIR (see [`Served::fsync`]).
    syncer: Syncer,
}

impl Served {
    /// Serves `fs` as `opts` say.
    pub fn new(fs: Arc<Fs>, opts: ServeOptions) -> Served {
        let born = (stitchdb_fs::system_clock())();
        let notifier = Arc::new(OnceLock::new());
        let invalidator = Arc::new(Invalidator::start(notifier.clone()));
        // Commits made around the mainline (a transaction's, a record write to the file
        // system's tables) change what the kernel may cache: it is told to drop it. The
        // observer calls this under the store's write lock: it only queues.
        let to_drop = invalidator.clone();
        fs.on_outside_change(Box::new(move |changed| {
            to_drop.push(changed.iter().filter_map(|c| match c {
                Changed::Inode(ino) => Some(Stale::Inode(*ino)),
                Changed::Name(parent, name) => Some(Stale::Entry(*parent, name.clone())),
                Changed::All => {
                    tracing::debug!("a commit too large to list: the kernel's caches expire");
                    None
                }
            }));
        }));
        let store = fs.clone();
        Served {
            fs,
            opts,
            workers: Workers::start(WORKERS),
            control: Control::new(born, invalidator.clone()),
            notifier,
            invalidator,
            syncer: Syncer::start(move || store.fsync().map_err(|e| errno(&e))),
        }
    }

    /// FSYNC and FSYNCDIR: `reply` gets the answer once every commit served before this call
    /// is durable. The syncer thread makes the store durable once for all the FSYNCs waiting
    /// (the log's group commit), so the thread serving requests goes on to the next one
    /// instead of waiting for the device, and FSYNCs from many callers share a device flush.
    pub fn fsync(&self, reply: Synced) {
        self.syncer.sync(reply);
    }

    /// As [`Served::fsync`], for a request nothing waits behind: when no other FSYNC waits or
    /// is being synced either, syncs on the caller's thread and returns the answer (no
    /// thread wake-up each way); else hands the reply `later` makes to the syncer and
    /// returns `None`, so that concurrent FSYNCs share a sync.
    pub fn fsync_alone(&self, later: impl FnOnce() -> Synced) -> Option<Answer<Reply>> {
        let answer = self.syncer.sync_alone(later)?;
        Some(answer.map(|()| Reply::Empty))
    }

    /// FSYNC on the caller's thread, for a transport with a thread per CPU (the io_uring
    /// queues): concurrent ones share a flush by the log's group commit, and two threads'
    /// syncs overlap without the hand-over's wake-ups, which cost more than they gained on
    /// two CPUs (docs/benchmarks.md).
    pub fn fsync_here(&self) -> Answer<Reply> {
        self.syncer.sync_here().map(|()| Reply::Empty)
    }

    /// Whether `answer`, to a request that `changes` (see [`Op::changes`]), waits until
    /// the store is durable before it goes: with `-o sync` (`ServeOptions::sync`), unless it
    /// is a failure (which committed nothing). The transports send it after a sync of the
    /// syncer's, as an FSYNC's, so that concurrent changes share it.
    pub fn needs_sync(&self, changes: bool, answer: &Answer<Reply>) -> bool {
        self.opts.sync && changes && answer.is_ok()
    }

    /// Serves `req`. A write-back of the kernel's (a WRITE or SETATTR naming no process)
    /// that fails loses what a process was told it wrote, and fails the next `syncfs`: it is
    /// logged.
    pub fn serve(&self, req: Request<'_>) -> Answer<Reply> {
        let writeback = req.pid == 0 && matches!(req.op, Op::Write { .. } | Op::Setattr(_));
        let node = req.ino;
        let answer = self.route(req);
        if let (true, Err(e)) = (writeback, &answer) {
            tracing::warn!("the kernel's write-back to node {node:#x} failed: errno {e}");
        }
        answer
    }

    /// Serves `req` by the view of its node id (`nodeid`).
    fn route(&self, req: Request<'_>) -> Answer<Reply> {
        match nodeid::split(req.ino) {
            (MAINLINE, _) => {}
            (CONTROL, ino) => return self.serve_control(ino, req),
            (view, _) => return self.serve_view(view, req),
        }
        if req.ino == ROOT_INO {
            if let Some(answer) = self.control_name(&req.op) {
                return answer;
            }
        }
        // The calling process's patchgroups order what this request changes; nothing to do
        // (one atomic load) while no process has one engaged.
        let ctx = self.control.context(self.fs.db(), req.pid);
        let _in_groups = ctx.as_ref().map(|c| c.enter());
        self.serve_tree(&*self.fs, MAINLINE, req, ctx.is_some())
    }

    /// Serves a request on a node of the tree of view `view` (a transaction's or a
    /// snapshot's): only its owner's processes reach a transaction's.
    fn serve_view(&self, view: u16, req: Request<'_>) -> Answer<Reply> {
        let v = self.control.views().get(view).ok_or(libc::ESTALE)?;
        if !v.admits(req.uid) {
            return Err(libc::EACCES);
        }
        self.serve_tree(v.tree(), view, req, false)
            .map(|reply| reply.in_view(view))
    }

    /// The answer to a request of the mainline root naming `.stitch`, if it does: the name
    /// is the control directory's, so it cannot be made, taken or removed (EEXIST to make
    /// it or rename onto it, EBUSY to remove or rename it, as a mount point).
    fn control_name(&self, op: &Op<'_>) -> Option<Answer<Reply>> {
        let is = |n: &[u8]| n == control::NAME;
        Some(match *op {
            Op::Lookup { name } if is(name) => {
                self.control.root().map(Reply::Entry).ok_or(libc::EIO)
            }
            Op::Mknod { name, .. }
            | Op::Mkdir { name, .. }
            | Op::Symlink { name, .. }
            | Op::Create { name, .. }
            | Op::Link { name, .. }
                if is(name) =>
            {
                Err(libc::EEXIST)
            }
            Op::Unlink { name } | Op::Rmdir { name } | Op::Rename { name, .. } if is(name) => {
                Err(libc::EBUSY)
            }
            _ => return None,
        })
    }

    /// Serves a request on a node of `tree`, the tree of view `view` (its node ids are its
    /// inode numbers in that view); `in_groups`: its process has patchgroups engaged, so the
    /// files it opens are served with direct I/O (their writes then come from the writer,
    /// and belong to its groups, not from the kernel's flushers later).
    fn serve_tree(
        &self,
        fs: &dyn FileTree,
        view: u16,
        req: Request<'_>,
        in_groups: bool,
    ) -> Answer<Reply> {
        // A second node must be in the same view: across views is across file systems.
        let local = |other: u64| match nodeid::split(other) {
            (v, ino) if v == view => Ok(ino),
            _ => Err(libc::EXDEV),
        };
        if let Op::Rename {
            new_parent: ROOT_INO,
            new_name,
            ..
        } = req.op
        {
            if new_name == control::NAME {
                return Err(libc::EEXIST);
            }
        }
        let open_flags = if in_groups {
            FOPEN_KEEP_CACHE | FOPEN_DIRECT_IO
        } else {
            FOPEN_KEEP_CACHE
        };
        let ino = nodeid::split(req.ino).1;
        // Read from /proc only when a decision needs more than the uid and gid.
        let who = || Caller::thread(req.uid, req.gid, req.pid);
        let done = |r: Result<(), FsError>| r.map(|()| Reply::Empty).map_err(|e| errno(&e));
        let entry = |r: Result<Attr, FsError>| r.map(Reply::Entry).map_err(|e| errno(&e));
        match req.op {
            Op::Lookup { name } => entry(fs.lookup(&who(), ino, name)),
            Op::Getattr => fs.getattr(ino).map(Reply::Attr).map_err(|e| errno(&e)),
            Op::Setattr(ref s) => fs
                .setattr(&who(), ino, s)
                .map(Reply::Attr)
                .map_err(|e| errno(&e)),
            Op::Readlink => fs.readlink(ino).map(Reply::Data).map_err(|e| errno(&e)),
            Op::Mknod { name, mode, rdev } => entry(fs.mknod(&who(), ino, name, mode, rdev)),
            Op::Mkdir { name, mode } => entry(fs.mkdir(&who(), ino, name, mode)),
            Op::Unlink { name } => done(fs.unlink(&who(), ino, name)),
            Op::Rmdir { name } => done(fs.rmdir(&who(), ino, name)),
            Op::Symlink { name, target } => entry(fs.symlink(&who(), ino, name, target)),
            Op::Rename {
                name,
                new_parent,
                new_name,
                flags,
            } => done(fs.rename(&who(), ino, name, local(new_parent)?, new_name, flags)),
            Op::Link { target, name } => entry(fs.link(&who(), local(target)?, ino, name)),
            Op::Open { flags } => {
                fs.open(&who(), ino, flags).map_err(|e| errno(&e))?;
                Ok(Reply::Opened {
                    fh: ino,
                    flags: open_flags,
                })
            }
            Op::Read { offset, size, .. } => {
                let offset = u64::try_from(offset).map_err(|_| libc::EINVAL)?;
                fs.read(ino, offset, size as usize)
                    .map(Reply::Data)
                    .map_err(|e| errno(&e))
            }
            Op::Write {
                offset,
                data,
                flags,
                kill_suidgid,
                ..
            } => {
                let offset = self.write_offset(fs, ino, offset, flags)?;
                let writer = who().knowing(Cap::Fsetid, !kill_suidgid);
                let n = fs
                    .write(&writer, ino, offset, data)
                    .map_err(|e| errno(&e))?;
                Ok(Reply::Written(n as u32))
            }
            // Every write request is already a commit and close(2) is not a durability
            // point, so there is nothing to do. ENOSYS tells the kernel so once: it then stops
            // sending a FLUSH on every close (one round trip fewer per file closed), while
            // still writing back a file's dirty pages before close returns. Locks need no
            // FLUSH either: the kernel keeps them itself (see docs/kvfs.md, "Locks").
            Op::Flush => Err(libc::ENOSYS),
            Op::Release { .. } => done(fs.release(ino)),
            Op::Fsync | Op::Destroy => done(fs.fsync()),
            Op::Opendir { flags } => {
                self.opendir(fs, &who(), ino, flags)?;
                Ok(Reply::Opened { fh: ino, flags: 0 })
            }
            Op::Readdir { offset, plus, add } => self.readdir(fs, view, ino, offset, plus, add),
            Op::Releasedir => Ok(Reply::Empty),
            Op::Statfs => Ok(Reply::Statfs(self.statfs())),
            Op::Setxattr { name, value, flags } => {
                done(fs.setxattr(&who(), ino, name, value, flags))
            }
            Op::Getxattr { name, size } => {
                let v = fs.getxattr(&who(), ino, name).map_err(|e| errno(&e))?;
                xattr_answer(v, size)
            }
            Op::Listxattr { size } => {
                let names = fs.listxattr(&who(), ino).map_err(|e| errno(&e))?;
                xattr_answer(xattr_list(names), size)
            }
            Op::Removexattr { name } => done(fs.removexattr(&who(), ino, name)),
            Op::Access { mask } => done(fs.access(&who(), ino, mask)),
            Op::Create { name, mode } => {
                let attr = fs.create(&who(), ino, name, mode).map_err(|e| errno(&e))?;
                Ok(Reply::Created {
                    fh: attr.ino,
                    attr,
                    flags: open_flags,
                })
            }
            Op::Fallocate {
                offset,
                length,
                mode,
            } => {
                let (Ok(offset), Ok(length)) = (u64::try_from(offset), u64::try_from(length))
                else {
                    return Err(libc::EINVAL);
                };
                done(fs.fallocate(&who(), ino, offset, length, mode))
            }
            Op::Lseek { offset, whence } => self.lseek(fs, ino, offset, whence).map(Reply::Offset),
        }
    }

    /// The kernel lets go of `ino` (FORGET, BATCH_FORGET: it sends the whole count it held,
    /// when it evicts the inode): a deleted inode it still held is gone for good.
    pub fn forget(&self, nodeid: u64) {
        match nodeid::split(nodeid) {
            (MAINLINE, ino) => self.fs.forget(ino),
            (CONTROL, _) => {}
            (view, ino) => {
                if let Some(v) = self.control.views().get(view) {
                    v.tree().forget(ino);
                }
            }
        }
    }

    /// Serves a request on node `ino` of the control namespace: read-only but for the
    /// `control` file's commands.
    fn serve_control(&self, ino: u64, req: Request<'_>) -> Answer<Reply> {
        let c = &self.control;
        let db = self.fs.db();
        match req.op {
            Op::Lookup { name } => match c.lookup_tree(&self.fs, ino, name, req.uid) {
                Some(root) => root.map(Reply::Entry),
                None => c.lookup(ino, name).map(Reply::Entry).ok_or(libc::ENOENT),
            },
            Op::Mkdir { name, .. } if control::is_snapshots(ino) => {
                c.take_snapshot(&self.fs, name, req.uid).map(Reply::Entry)
            }
            Op::Rmdir { name } if control::is_snapshots(ino) => c
                .drop_snapshot(&self.fs, name, req.uid)
                .map(|()| Reply::Empty),
            Op::Getattr => c.getattr(ino).map(Reply::Attr).ok_or(libc::ESTALE),
            // `> /.stitch/control` truncates: there is nothing to truncate.
            Op::Setattr(ref s)
                if s.size == Some(0) && s.mode.is_none() && s.uid.is_none() && s.gid.is_none() =>
            {
                c.getattr(ino).map(Reply::Attr).ok_or(libc::ESTALE)
            }
            Op::Open { flags } => c.open(ino, flags).map(|fh| Reply::Opened {
                fh,
                flags: FOPEN_DIRECT_IO,
            }),
            Op::Read { fh, offset, size } => {
                let offset = u64::try_from(offset).map_err(|_| libc::EINVAL)?;
                c.read(ino, (fh, req.uid), offset, size as usize)
                    .map(Reply::Data)
            }
            Op::Write {
                fh, offset, data, ..
            } => c
                .write(
                    &self.fs,
                    (ino, fh),
                    offset,
                    data,
                    control::Writer {
                        uid: req.uid,
                        pid: req.pid,
                    },
                )
                .map(Reply::Written),
            Op::Release { fh } => {
                c.release(db, ino, fh);
                Ok(Reply::Empty)
            }
            Op::Flush => Err(libc::ENOSYS),
            Op::Fsync | Op::Releasedir => Ok(Reply::Empty),
            Op::Opendir { flags } => {
                let a = c.getattr(ino).ok_or(libc::ESTALE)?;
                if a.kind != Kind::Dir {
                    return Err(libc::ENOTDIR);
                }
                if flags & libc::O_ACCMODE != libc::O_RDONLY {
                    return Err(libc::EISDIR);
                }
                Ok(Reply::Opened { fh: 0, flags: 0 })
            }
            Op::Readdir { offset, plus, add } => {
                let offset = offset.max(0) as u64;
                let mut entries = c.readdir(ino, offset).ok_or(libc::ENOTDIR)?;
                if let Some(trees) = c.tree_entries(&self.fs, ino, req.uid) {
                    entries.extend(trees.into_iter().filter(|e| e.offset > offset));
                }
                for e in entries {
                    let attr = if !plus {
                        None
                    } else if e.ino == ROOT_INO {
                        Some(self.fs.getattr(ROOT_INO).map_err(|e| errno(&e))?)
                    } else if control::holds_trees(ino) && e.offset > 2 {
                        c.lookup_tree(&self.fs, ino, &e.name, req.uid)
                            .and_then(Result::ok)
                    } else {
                        c.getattr(nodeid::split(e.ino).1)
                    };
                    if add(&e, attr.as_ref()) {
                        break;
                    }
                }
                Ok(Reply::Empty)
            }
            Op::Statfs => Ok(Reply::Statfs(self.statfs())),
            Op::Access { mask } => {
                let a = c.getattr(ino).ok_or(libc::ESTALE)?;
                let wanted = mask & (R | W | X);
                // Everyone is in the same class (root-owned, the same bits for all); root
                // may read and write, and search directories.
                let allowed = if req.uid == 0 {
                    R | W | X
                } else {
                    a.perm & 0o7
                };
                if wanted & !allowed != 0 || (mask & W != 0 && a.perm & 0o222 == 0) {
                    return Err(libc::EACCES);
                }
                Ok(Reply::Empty)
            }
            Op::Getxattr { .. } => Err(libc::ENODATA),
            Op::Listxattr { size } => xattr_answer(Vec::new(), size),
            Op::Readlink => Err(libc::EINVAL),
            Op::Lseek { .. } => Err(libc::ENXIO),
            Op::Setattr(_)
            | Op::Mknod { .. }
            | Op::Mkdir { .. }
            | Op::Unlink { .. }
            | Op::Rmdir { .. }
            | Op::Symlink { .. }
            | Op::Rename { .. }
            | Op::Link { .. }
            | Op::Create { .. }
            | Op::Setxattr { .. }
            | Op::Removexattr { .. }
            | Op::Fallocate { .. } => Err(libc::EPERM),
            Op::Destroy => Ok(Reply::Empty),
        }
    }

    /// Where a WRITE lands: with the write-back cache the kernel places appends itself;
    /// without it, `O_APPEND` writes go at the end.
    fn write_offset(
        &self,
        fs: &dyn FileTree,
        ino: u64,
        offset: i64,
        open_flags: i32,
    ) -> Answer<u64> {
        let offset = u64::try_from(offset).map_err(|_| libc::EINVAL)?;
        if !self.opts.writeback_cache && open_flags & libc::O_APPEND != 0 {
            return fs.getattr(ino).map(|a| a.size).map_err(|e| errno(&e));
        }
        Ok(offset)
    }

    /// OPENDIR: a directory the caller may read (and write, if it asks).
    fn opendir(&self, fs: &dyn FileTree, caller: &Caller, ino: u64, flags: i32) -> Answer<()> {
        let a = fs.getattr(ino).map_err(|e| errno(&e))?;
        if a.kind != Kind::Dir {
            return Err(libc::ENOTDIR);
        }
        let mask = match flags & libc::O_ACCMODE {
            libc::O_RDONLY => R,
            _ => R | W,
        };
        permit(caller, Check::Access(&a, mask)).map_err(|e| errno(&e))
    }

    /// STATFS: the store grows into its device's free space.
    fn statfs(&self) -> Statfs {
        let st = self.fs.statfs();
        let dir = self
            .opts
            .store_path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let (free, files_free) = match rustix::fs::statvfs(dir) {
            Ok(v) => (v.f_bavail * v.f_frsize, v.f_ffree),
            Err(_) => (0, 0),
        };
        let used_blocks = st.used_bytes.div_ceil(BLOCK_SIZE);
        let free_blocks = free / BLOCK_SIZE;
        Statfs {
            blocks: used_blocks + free_blocks,
            bfree: free_blocks,
            bavail: free_blocks,
            files: st.inodes + files_free,
            ffree: files_free,
            bsize: BLOCK_SIZE as u32,
            namelen: st.name_max,
            frsize: BLOCK_SIZE as u32,
        }
    }

    /// LSEEK with `SEEK_DATA` or `SEEK_HOLE`.
    fn lseek(&self, fs: &dyn FileTree, ino: u64, offset: i64, whence: i32) -> Answer<u64> {
        if self.opts.writeback_cache {
            // The kernel holds written pages (and the size they make) that have not reached
            // the store, and sends FUSE_LSEEK without writing them back first, so the store
            // cannot answer for them. ENOSYS makes the kernel answer every later lseek on this
            // mount itself, from its own size: the whole file is data, the hole is at the end
            // (what Linux does for file systems that report no holes).
            return Err(libc::ENOSYS);
        }
        let offset = u64::try_from(offset).map_err(|_| libc::ENXIO)?;
        let data = match whence {
            libc::SEEK_DATA => true,
            libc::SEEK_HOLE => false,
            _ => return Err(libc::EINVAL),
        };
        fs.seek(ino, offset, data).map_err(|e| errno(&e))
    }

    /// Hands the entries of directory `ino` after `offset` (with their attributes if `plus`)
    /// to `add`, a batch at a time, until the directory ends or the reply is full.
    /// The entries' node ids are in view `view`.
    fn readdir(
        &self,
        fs: &dyn FileTree,
        view: u16,
        ino: u64,
        offset: i64,
        plus: bool,
        add: &mut AddEntry<'_>,
    ) -> Answer<Reply> {
        let mut offset = offset.max(0) as u64;
        loop {
            let batch = fs
                .readdir(ino, offset, READDIR_BATCH)
                .map_err(|e| errno(&e))?;
            if batch.is_empty() {
                return Ok(Reply::Empty);
            }
            for mut entry in batch {
                let attr = if plus {
                    let mut a = fs.getattr(entry.ino).map_err(|e| errno(&e))?;
                    a.ino = nodeid::join(view, a.ino);
                    Some(a)
                } else {
                    None
                };
                entry.ino = nodeid::join(view, entry.ino);
                if add(&entry, attr.as_ref()) {
                    return Ok(Reply::Empty);
                }
                offset = entry.offset;
            }
        }
    }

    /// After the last request: finishes the reads and FSYNCs in flight, then makes
    /// everything durable.
    pub fn finish(&self) {
        self.workers.finish();
        self.invalidator.finish();
        self.syncer.finish();
        let (fsyncs, syncs) = self.syncer.counts();
        tracing::info!(
            "{fsyncs} answers sent once durable (FSYNC, FSYNCDIR; with -o sync, changes) after {syncs} syncs of the store"
        );
        // A read-only mount wrote nothing (and its store may refuse a sync).
        if self.fs.options().read_only {
            return;
        }
        if let Err(e) = self.fs.fsync() {
            tracing::error!("sync at unmount failed: {e}");
        }
    }
}

/// Threads that serve requests handed to them, in the order handed.
pub struct Workers {
    /// `None` once [`Workers::finish`] ran.
    tx: Mutex<Option<std::sync::mpsc::Sender<Job>>>,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl Workers {
    fn start(n: usize) -> Workers {
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let threads = (0..n)
            .filter_map(|i| {
                let rx = rx.clone();
                std::thread::Builder::new()
                    .name(format!("kvfs-work-{i}"))
                    .spawn(move || {
                        // The workers serve reads of file data, which the kernel keeps in the
                        // mount's page cache: the store's copy would be a second one.
                        stitchdb::read_direct(true);
                        loop {
                            // The lock is held only to take the next job, not to run it.
                            let job = rx.lock().recv();
                            match job {
                                Ok(job) => job(),
                                Err(_) => return,
                            }
                        }
                    })
                    .ok()
            })
            .collect::<Vec<_>>();
        Workers {
            tx: Mutex::new((!threads.is_empty()).then_some(tx)),
            threads: Mutex::new(threads),
        }
    }

    /// Runs `job` on a worker thread (on this one if there are none, or no more).
    pub fn run(&self, job: Job) {
        let job = match &*self.tx.lock() {
            Some(tx) => match tx.send(job) {
                Ok(()) => return,
                Err(e) => e.0,
            },
            None => job,
        };
        job();
    }

    /// Waits for the jobs handed over so far; later ones run on the caller's thread.
    pub fn finish(&self) {
        drop(self.tx.lock().take());
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
    }
}

/// One thread making the store durable for the FSYNCs handed to it, in rounds: a round takes
/// every FSYNC waiting, syncs once and answers them all; those handed over meanwhile wait for
/// the next round. A round's sync starts after each of its FSYNCs was handed over, so it
/// covers every commit made before (`Db::sync` makes durable what was committed when it is
/// called). What waits is only the replies the kernel has outstanding.
struct Syncer {
    /// Makes the store durable.
    sync: Arc<dyn Fn() -> Answer<()> + Send + Sync>,
    state: Arc<(Mutex<SyncState>, Condvar)>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

struct SyncState {
    /// The replies for the next round.
    waiting: Vec<Synced>,
    /// Syncs running: the syncer thread's round, and those of callers syncing themselves
    /// ([`Syncer::sync_alone`]).
    syncing: usize,
    /// FSYNCs answered, and the syncs that answered them (rounds, and callers' own).
    answered: u64,
    syncs: u64,
    /// False once [`Syncer::finish`] ran: later FSYNCs are served on the caller's thread.
    open: bool,
}

impl Syncer {
    fn start(sync: impl Fn() -> Answer<()> + Send + Sync + 'static) -> Syncer {
        let sync: Arc<dyn Fn() -> Answer<()> + Send + Sync> = Arc::new(sync);
        let state = Arc::new((
            Mutex::new(SyncState {
                waiting: Vec::new(),
                syncing: 0,
                answered: 0,
                syncs: 0,
                open: true,
            }),
            Condvar::new(),
        ));
        let thread = {
            let (sync, state) = (sync.clone(), state.clone());
            std::thread::Builder::new()
                .name("kvfs-sync".into())
                .spawn(move || Syncer::rounds(&*sync, &state))
        };
        let thread = match thread {
            Ok(t) => Some(t),
            Err(e) => {
                // Served on the callers' threads instead, one sync each, as without a syncer.
                tracing::warn!("cannot start the syncer thread ({e}): fsyncs wait in turn");
                state.0.lock().open = false;
                None
            }
        };
        Syncer {
            sync,
            state,
            thread: Mutex::new(thread),
        }
    }

    /// The syncer thread: rounds until finished and nothing waits.
    fn rounds(sync: &(dyn Fn() -> Answer<()> + Send + Sync), state: &(Mutex<SyncState>, Condvar)) {
        loop {
            let round = {
                let mut s = state.0.lock();
                while s.waiting.is_empty() && s.open {
                    state.1.wait(&mut s);
                }
                if s.waiting.is_empty() {
                    return;
                }
                s.syncing += 1;
                s.syncs += 1;
                s.answered += s.waiting.len() as u64;
                std::mem::take(&mut s.waiting)
            };
            let answer = sync();
            state.0.lock().syncing -= 1;
            for reply in round {
                reply(answer.map(|()| Reply::Empty));
            }
        }
    }

    /// Answers `reply` after a sync that starts after this call.
    fn sync(&self, reply: Synced) {
        let mut s = self.state.0.lock();
        if s.open {
            s.waiting.push(reply);
            self.state.1.notify_one();
            return;
        }
        s.answered += 1;
        s.syncs += 1;
        drop(s);
        reply((self.sync)().map(|()| Reply::Empty));
    }

    /// As [`Syncer::sync`] with the reply `later` makes, but when no other FSYNC waits or is
    /// being synced, syncs on the caller's thread and returns the answer instead: a lone
    /// FSYNC is not worth the two thread wake-ups of the hand-over, and one arriving
    /// meanwhile is handed over, so concurrent ones still share rounds.
    fn sync_alone(&self, later: impl FnOnce() -> Synced) -> Option<Answer<()>> {
        let s = self.state.0.lock();
        if s.syncing > 0 || !s.waiting.is_empty() || !s.open {
            drop(s);
            self.sync(later());
            return None;
        }
        Some(self.sync_counted(s))
    }

    /// Syncs on the caller's thread (the log's group commit merges it with the syncs running
    /// meanwhile), counted as an FSYNC answered.
    fn sync_here(&self) -> Answer<()> {
        self.sync_counted(self.state.0.lock())
    }

    fn sync_counted(&self, mut s: parking_lot::MutexGuard<'_, SyncState>) -> Answer<()> {
        s.syncing += 1;
        s.syncs += 1;
        s.answered += 1;
        drop(s);
        let answer = (self.sync)();
        self.state.0.lock().syncing -= 1;
        answer
    }

    /// FSYNCs answered so far, and the syncs that answered them.
    fn counts(&self) -> (u64, u64) {
        let s = self.state.0.lock();
        (s.answered, s.syncs)
    }

    /// Answers the FSYNCs handed over so far; later ones are served on the caller's thread.
    fn finish(&self) {
        self.state.0.lock().open = false;
        self.state.1.notify_one();
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
    }
}

/// A LISTXATTR answer's bytes: each name followed by a NUL.
fn xattr_list(names: Vec<Vec<u8>>) -> Vec<u8> {
    let mut v = Vec::new();
    for n in names {
        v.extend_from_slice(&n);
        v.push(0);
    }
    v
}

/// Answers a getxattr or listxattr of `v` into a buffer of `size` bytes: the size when asked
/// for it (size 0), `ERANGE` when the caller's buffer is too small.
fn xattr_answer(v: Vec<u8>, size: u32) -> Answer<Reply> {
    if size == 0 {
        Ok(Reply::XattrSize(v.len() as u32))
    } else if v.len() > size as usize {
        Err(libc::ERANGE)
    } else {
        Ok(Reply::Data(v))
    }
}

/// The errno of a failure, logging the ones that are not the caller's doing.
pub fn errno(e: &FsError) -> i32 {
    let errno = e.errno();
    match e {
        FsError::Errno(_) => {}
        // A full store refuses the write and stays writable: an answer, not a failure (the
        // store logs its reclaims, and a failure that turned it read-only when it happened).
        _ if errno == libc::ENOSPC => tracing::debug!("file system operation refused: {e}"),
        _ => tracing::error!("file system operation failed: {e}"),
    }
    errno
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_xattr_answer_is_its_size_its_bytes_or_erange() {
        assert!(matches!(
            xattr_answer(b"abc".to_vec(), 0),
            Ok(Reply::XattrSize(3))
        ));
        assert!(matches!(xattr_answer(b"abc".to_vec(), 3), Ok(Reply::Data(d)) if d == b"abc"));
        assert!(matches!(
            xattr_answer(b"abc".to_vec(), 2),
            Err(libc::ERANGE)
        ));
        assert_eq!(xattr_list(vec![b"a".to_vec(), b"bc".to_vec()]), b"a\0bc\0");
    }

    /// A log for the syncer to sync: commits are counted, and each sync, once the test lets it
    /// finish, makes durable what was committed when it started.
    struct Log {
        committed: std::sync::atomic::AtomicU64,
        durable: std::sync::atomic::AtomicU64,
        started: std::sync::mpsc::SyncSender<()>,
        finish: Mutex<std::sync::mpsc::Receiver<()>>,
    }

    impl Log {
        /// A log, where each sync's start is told, and where each waits to be let finish.
        fn new() -> (
            Arc<Log>,
            std::sync::mpsc::Receiver<()>,
            std::sync::mpsc::SyncSender<()>,
        ) {
            let (started_tx, started) = std::sync::mpsc::sync_channel(8);
            let (finish, finish_rx) = std::sync::mpsc::sync_channel(8);
            let log = Arc::new(Log {
                committed: 0.into(),
                durable: 0.into(),
                started: started_tx,
                finish: Mutex::new(finish_rx),
            });
            (log, started, finish)
        }

        fn commit(&self) {
            self.committed.fetch_add(1, Ordering::SeqCst);
        }

        fn sync(&self) -> Answer<()> {
            // One sync at a time: the one that told it started is the one `finish` ends.
            let finish = self.finish.lock();
            let upto = self.committed.load(Ordering::SeqCst);
            self.started.send(()).unwrap();
            finish.recv().unwrap();
            self.durable.fetch_max(upto, Ordering::SeqCst);
            Ok(())
        }
    }

    use std::sync::atomic::Ordering;

    /// An FSYNC handed over while a sync runs is answered by the next round, whose sync
    /// covers the commits made before it: each FSYNC's answer finds its commits durable.
    #[test]
    fn an_fsync_is_answered_once_the_commits_before_it_are_durable() {
        let (log, started, finish) = Log::new();
        let syncer = {
            let log = log.clone();
            Syncer::start(move || log.sync())
        };
        // Each FSYNC's answer reports how much was durable when it came.
        let (answers_tx, answers) = std::sync::mpsc::channel();
        let fsync = |name: &'static str, committed: u64| {
            let (log, tx) = (log.clone(), answers_tx.clone());
            syncer.sync(Box::new(move |a| {
                assert!(matches!(a, Ok(Reply::Empty)));
                let durable = log.durable.load(Ordering::SeqCst);
                tx.send((name, committed, durable)).unwrap();
            }));
        };

        log.commit();
        fsync("a", 1);
        started.recv().unwrap(); // round 1 runs, covering commit 1
        log.commit();
        fsync("b", 2); // waits for round 2
        log.commit();
        fsync("c", 3);
        finish.send(()).unwrap();
        started.recv().unwrap(); // round 2, for b and c
        finish.send(()).unwrap();
        let got: Vec<_> = answers.iter().take(3).collect();
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), ["a", "b", "c"]);
        for (name, committed, durable) in got {
            assert!(
                durable >= committed,
                "{name}: {durable} durable of {committed}"
            );
        }
        // Answered in two rounds: b and c shared one.
        assert!(started.try_recv().is_err());

        // Finishing answers what waits with a last round; later FSYNCs sync on the caller.
        log.commit();
        fsync("d", 4);
        started.recv().unwrap();
        finish.send(()).unwrap();
        syncer.finish();
        finish.send(()).unwrap();
        fsync("e", 4);
        let got: Vec<_> = answers.iter().take(2).collect();
        assert_eq!(got, [("d", 4, 4), ("e", 4, 4)]);
    }

    /// A lone FSYNC syncs on its caller's thread; one arriving while it syncs is handed to the
    /// syncer, whose round starts after it: each finds its commits durable.
    #[test]
    fn a_lone_fsync_syncs_on_its_caller_and_others_are_handed_over() {
        let (log, started, finish) = Log::new();
        let syncer = Arc::new({
            let log = log.clone();
            Syncer::start(move || log.sync())
        });
        let handed = |tx: std::sync::mpsc::Sender<u64>| -> Synced {
            let log = log.clone();
            Box::new(move |a| {
                assert!(matches!(a, Ok(Reply::Empty)));
                tx.send(log.durable.load(Ordering::SeqCst)).unwrap();
            })
        };

        log.commit();
        let alone = {
            let syncer = syncer.clone();
            std::thread::spawn(move || {
                syncer.sync_alone(|| -> Synced { panic!("a lone FSYNC is not handed over") })
            })
        };
        started.recv().unwrap(); // the caller's own sync, covering commit 1
        log.commit();
        let (tx, answer) = std::sync::mpsc::channel();
        assert!(syncer.sync_alone(|| handed(tx)).is_none());
        finish.send(()).unwrap();
        assert!(matches!(alone.join().unwrap(), Some(Ok(()))));
        assert_eq!(log.durable.load(Ordering::SeqCst), 1);
        started.recv().unwrap(); // the syncer's round, covering commit 2
        finish.send(()).unwrap();
        assert_eq!(answer.recv().unwrap(), 2);
        assert_eq!(syncer.counts(), (2, 2));
        syncer.finish();
    }
}
