//! [`KvFuse`]: the FUSE requests served by a [`Fs`].

use crate::attr::{file_attr, file_type, timespec};
use crate::bdi::BdiSettings;
use crate::poll::Poller;
use fuser::{
    consts, Filesystem, KernelConfig, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyLseek, ReplyOpen, ReplyStatfs, ReplyWrite,
    ReplyXattr, Request, TimeOrNow,
};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};
use stitchdb_fs::{Caller, DirEntry, Fs, FsError, SetAttr, TimeSet, BLOCK_SIZE};

/// The largest read and write request (1 MiB): the kernel sends up to this much in one.
pub const MAX_REQUEST: u32 = 1 << 20;
/// Entries read from the store per batch while filling a readdir reply.
const READDIR_BATCH: usize = 128;

/// How the adapter talks to the kernel.
#[derive(Debug, Clone)]
pub struct AdapterOptions {
    /// How long the kernel may cache attributes and names. Every change goes through this
    /// mount (the store is locked to one process), so the kernel's own invalidation on each
    /// call keeps its caches right; the timeout only bounds how stale `stitchdb` readers of
    /// other snapshots could make them.
    pub ttl: Duration,
    /// The kernel's write-back cache: writes are gathered in its page cache and sent in large
    /// requests (on close, fsync, or memory pressure).
    pub writeback_cache: bool,
    /// Where the store lives, for `statfs`'s free space.
    pub store_path: PathBuf,
}

/// `FUSE_HANDLE_KILLPRIV_V2` (protocol 7.33, not among `fuser`'s constants): the file system
/// clears set-user-id, set-group-id and `security.capability` on write, truncate and chown
/// itself (`stitchdb-fs` does, as ext4 would), so the kernel stops asking for
/// `security.capability` before every write and stops reading attributes before every chown.
const FUSE_HANDLE_KILLPRIV_V2: u64 = 1 << 28;

/// Threads serving requests that only read (lookups, getattr, reads, readdir, xattrs).
const READERS: usize = 4;

/// The largest data read the session thread serves itself when nothing waits behind it:
/// about one device request (a random 4 KiB read and its neighbours), not the kernel's
/// read-ahead of a sequential reader, whose requests gain from overlapping on the readers.
const INLINE_READ_MAX: u32 = 64 << 10;

/// How long the session thread polls for the device during a read it serves itself before
/// sleeping: a few times a cold read's latency on a solid-state disk.
const READ_SPIN_LIMIT: Duration = Duration::from_micros(500);

type Job = Box<dyn FnOnce() + Send>;

/// The FUSE file system: every request becomes a call on the [`Fs`]. Requests that change
/// something are served in the order they arrive, on the session's thread (each is one
/// commit); requests that only read are handed to reader threads, so a slow read (a cold
/// block) does not hold up the requests behind it; except a short read of file data when
/// the session thread polls and no request is waiting, which it serves itself, polling for
/// the device too (see [`KvFuse::read`]). A read runs against committed state, so
/// it sees a change the kernel sent before it, and the kernel orders what must be ordered by
/// waiting for replies.
pub struct KvFuse {
    fs: Arc<Fs>,
    opts: AdapterOptions,
    /// Set once the session's device exists (see [`KvFuse::poller`]); empty when polling is
    /// off.
    poller: Arc<OnceLock<Poller>>,
    /// Backing-device settings to write once the kernel has taken the INIT reply, which sets
    /// the readahead again: on the first request after it (see [`KvFuse::set_bdi`]).
    bdi: parking_lot::Mutex<Option<(BdiSettings, PathBuf)>>,
    bdi_pending: AtomicBool,
    readers: Option<std::sync::mpsc::Sender<Job>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl KvFuse {
    /// Serves `fs`.
    pub fn new(fs: Arc<Fs>, opts: AdapterOptions) -> KvFuse {
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        let rx = Arc::new(parking_lot::Mutex::new(rx));
        let threads = (0..READERS)
            .filter_map(|i| {
                let rx = rx.clone();
                std::thread::Builder::new()
                    .name(format!("kvfs-read-{i}"))
                    .spawn(move || loop {
                        // The lock is held only to take the next job, not to run it.
                        let job = rx.lock().recv();
                        match job {
                            Ok(job) => job(),
                            Err(_) => return,
                        }
                    })
                    .ok()
            })
            .collect();
        KvFuse {
            fs,
            opts,
            poller: Arc::new(OnceLock::new()),
            bdi: parking_lot::Mutex::new(None),
            bdi_pending: AtomicBool::new(false),
            readers: Some(tx),
            threads,
        }
    }

    /// Where the session puts its [`Poller`] once the device is open: the adapter is moved
    /// into the session before the session's descriptor exists.
    pub fn poller(&self) -> Arc<OnceLock<Poller>> {
        self.poller.clone()
    }

    /// Writes `settings` into the backing device of the mount at `mountpoint` (canonical)
    /// when the first request after INIT comes.
    pub fn set_bdi(&self, settings: BdiSettings, mountpoint: PathBuf) {
        *self.bdi.lock() = Some((settings, mountpoint));
        self.bdi_pending.store(true, Ordering::Release);
    }

    /// At the start of every request: marks the mount busy, so the session thread polls for
    /// the next one; the first writes the backing-device settings.
    fn busy(&self) {
        if let Some(p) = self.poller.get() {
            p.busy();
        }
        if self.bdi_pending.load(Ordering::Acquire) {
            if let Some((settings, mountpoint)) = self.bdi.lock().take() {
                settings.apply(&mountpoint);
            }
            self.bdi_pending.store(false, Ordering::Release);
        }
    }

    /// Runs `job` on a reader thread (on this one if none could be started).
    fn read_job(&self, job: impl FnOnce(&Fs, Duration) + Send + 'static) {
        let fs = self.fs.clone();
        let ttl = self.opts.ttl;
        let job: Job = Box::new(move || job(&fs, ttl));
        match &self.readers {
            Some(tx) if !self.threads.is_empty() => {
                if let Err(e) = tx.send(job) {
                    (e.0)();
                }
            }
            _ => job(),
        }
    }

    fn entry_reply(&self, r: Result<stitchdb_fs::Attr, FsError>, reply: ReplyEntry) {
        match r {
            Ok(a) => reply.entry(&self.opts.ttl, &file_attr(&a), 0),
            Err(e) => reply.error(errno(&e)),
        }
    }
}

/// The errno of a failure, logging the ones that are not the caller's doing.
/// Hands the entries of directory `ino` from `offset` on to `add`, a batch at a time, until
/// the directory ends or `add` answers that the kernel's reply buffer is full.
fn entries_from(
    fs: &Fs,
    ino: u64,
    offset: i64,
    mut add: impl FnMut(DirEntry) -> Result<bool, FsError>,
) -> Result<(), FsError> {
    let mut offset = offset.max(0) as u64;
    loop {
        let batch = fs.readdir(ino, offset, READDIR_BATCH)?;
        if batch.is_empty() {
            return Ok(());
        }
        for entry in batch {
            let next = entry.offset;
            if add(entry)? {
                return Ok(());
            }
            offset = next;
        }
    }
}

fn errno(e: &FsError) -> i32 {
    if !matches!(e, FsError::Errno(_)) {
        tracing::error!("file system operation failed: {e}");
    }
    e.errno()
}

/// The credentials of a request: its uid and gid, and the process's supplementary groups
/// (read from /proc only when a check could need them: root passes every check).
fn caller(req: &Request<'_>) -> Caller {
    let (uid, gid) = (req.uid(), req.gid());
    let groups = if uid == 0 {
        Vec::new()
    } else {
        supplementary_groups(req.pid())
    };
    Caller { uid, gid, groups }
}

fn supplementary_groups(pid: u32) -> Vec<u32> {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return Vec::new();
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|g| {
            g.split_whitespace()
                .filter_map(|n| n.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

fn time_set(t: Option<TimeOrNow>) -> Option<TimeSet> {
    t.map(|t| match t {
        TimeOrNow::Now => TimeSet::Now,
        TimeOrNow::SpecificTime(t) => TimeSet::At(timespec(t)),
    })
}

impl Filesystem for KvFuse {
    fn init(&mut self, _req: &Request<'_>, config: &mut KernelConfig) -> Result<(), libc::c_int> {
        let mut wanted = consts::FUSE_ASYNC_READ
            | consts::FUSE_BIG_WRITES
            | consts::FUSE_DO_READDIRPLUS
            | consts::FUSE_READDIRPLUS_AUTO
            | consts::FUSE_PARALLEL_DIROPS
            | consts::FUSE_CACHE_SYMLINKS
            | FUSE_HANDLE_KILLPRIV_V2;
        if self.opts.writeback_cache {
            wanted |= consts::FUSE_WRITEBACK_CACHE;
        }
        // Ask for each on its own: a kernel without one still gets the others.
        for bit in (0..64).map(|i| 1u64 << i).filter(|b| wanted & b != 0) {
            if config.add_capabilities(bit).is_err() {
                tracing::info!("the kernel does not offer FUSE capability {bit:#x}");
            }
        }
        let _ = config.set_max_write(MAX_REQUEST);
        let _ = config.set_max_readahead(MAX_REQUEST);
        let _ = config.set_time_granularity(Duration::from_nanos(1));
        // This runs on the session thread, which serves lone short reads itself when it polls.
        if self.poller.get().is_some() {
            stitchdb::spin_for_reads(READ_SPIN_LIMIT);
        }
        Ok(())
    }

    fn destroy(&mut self) {
        stitchdb::spin_for_reads(Duration::ZERO);
        // Finish the reads in flight, then make everything durable.
        drop(self.readers.take());
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        if let Err(e) = self.fs.fsync() {
            tracing::error!("sync at unmount failed: {e}");
        }
    }

    fn lookup(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        self.busy();
        let r = self.fs.lookup(&caller(req), parent, name.as_bytes());
        self.entry_reply(r, reply);
    }

    /// The kernel lets go of `ino` (it sends the whole count it held, when it evicts the
    /// inode): a deleted inode it still held is gone for good.
    fn forget(&mut self, _req: &Request<'_>, ino: u64, _nlookup: u64) {
        self.fs.forget(ino);
    }

    fn getattr(&mut self, _req: &Request<'_>, ino: u64, _fh: Option<u64>, reply: ReplyAttr) {
        self.busy();
        match self.fs.getattr(ino) {
            Ok(a) => reply.attr(&self.opts.ttl, &file_attr(&a)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn setattr(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        ctime: Option<SystemTime>,
        fh: Option<u64>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        self.busy();
        let s = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime: time_set(atime),
            mtime: time_set(mtime),
            through_handle: fh.is_some(),
            // Only a kernel keeping the file's times (the write-back cache) sends a change
            // time: see `SetAttr::ctime`.
            ctime: ctime.map(timespec),
        };
        match self.fs.setattr(&caller(req), ino, &s) {
            Ok(a) => reply.attr(&self.opts.ttl, &file_attr(&a)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readlink(&mut self, _req: &Request<'_>, ino: u64, reply: ReplyData) {
        self.busy();
        match self.fs.readlink(ino) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn mknod(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        self.busy();
        let r = self
            .fs
            .mknod(&caller(req), parent, name.as_bytes(), mode, rdev);
        self.entry_reply(r, reply);
    }

    fn mkdir(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        self.busy();
        let r = self.fs.mkdir(&caller(req), parent, name.as_bytes(), mode);
        self.entry_reply(r, reply);
    }

    fn unlink(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        self.busy();
        match self.fs.unlink(&caller(req), parent, name.as_bytes()) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn rmdir(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        self.busy();
        match self.fs.rmdir(&caller(req), parent, name.as_bytes()) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn symlink(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        self.busy();
        let r = self.fs.symlink(
            &caller(req),
            parent,
            link_name.as_bytes(),
            target.as_os_str().as_bytes(),
        );
        self.entry_reply(r, reply);
    }

    fn rename(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
        reply: ReplyEmpty,
    ) {
        self.busy();
        let r = self.fs.rename(
            &caller(req),
            parent,
            name.as_bytes(),
            newparent,
            newname.as_bytes(),
            flags,
        );
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn link(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        newparent: u64,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        self.busy();
        let r = self
            .fs
            .link(&caller(req), ino, newparent, newname.as_bytes());
        self.entry_reply(r, reply);
    }

    fn open(&mut self, req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        self.busy();
        match self.fs.open(&caller(req), ino, flags) {
            // Only this mount changes the files, so the page cache stays valid across opens.
            Ok(_) => reply.opened(ino, consts::FOPEN_KEEP_CACHE),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn read(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyData,
    ) {
        self.busy();
        let Ok(offset) = u64::try_from(offset) else {
            return reply.error(libc::EINVAL);
        };
        let serve = move |fs: &Fs, _| match fs.read(ino, offset, size as usize) {
            Ok(d) => reply.data(&d),
            Err(e) => reply.error(errno(&e)),
        };
        // A lone short read (a random reader's next block) is served here: handing it to a
        // reader thread would add a wake-up on another CPU to the device's latency, and one
        // more when the device completes, each tens of microseconds on a VM whose idle CPUs
        // halt; this thread polls /dev/fuse anyway, and polls the device the same way
        // (`spin_for_reads`, set in `init`). With a request queued behind it, or polling
        // off, the read goes to the readers, so concurrent readers still overlap.
        let lone =
            size <= INLINE_READ_MAX && self.poller.get().is_some_and(|p| !p.request_waiting());
        if lone {
            serve(&self.fs, self.opts.ttl);
        } else {
            self.read_job(serve);
        }
    }

    fn write(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        data: &[u8],
        _write_flags: u32,
        flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyWrite,
    ) {
        self.busy();
        let Ok(mut offset) = u64::try_from(offset) else {
            return reply.error(libc::EINVAL);
        };
        // With the write-back cache the kernel places appends itself; without it, O_APPEND
        // writes go at the end.
        if !self.opts.writeback_cache && flags & libc::O_APPEND != 0 {
            match self.fs.getattr(ino) {
                Ok(a) => offset = a.size,
                Err(e) => return reply.error(errno(&e)),
            }
        }
        match self.fs.write(&caller(req), ino, offset, data) {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn flush(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        _fh: u64,
        _lock_owner: u64,
        reply: ReplyEmpty,
    ) {
        self.busy();
        // Every write request is already a commit and close(2) is not a durability point, so
        // there is nothing to do. ENOSYS tells the kernel so once: it then stops sending a
        // FLUSH on every close (one round trip fewer per file closed), while still writing
        // back a file's dirty pages before close returns. Locks need no FLUSH either: the
        // kernel keeps them itself (see docs/kvfs.md, "Locks").
        reply.error(libc::ENOSYS);
    }

    fn release(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        _flags: i32,
        _lock_owner: Option<u64>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.busy();
        match self.fs.release(ino) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn fsync(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        _fh: u64,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.busy();
        match self.fs.fsync() {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn opendir(&mut self, req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        self.busy();
        match self.fs.getattr(ino) {
            Ok(a) if a.kind != stitchdb_fs::Kind::Dir => reply.error(libc::ENOTDIR),
            Ok(a) => {
                let mask = match flags & libc::O_ACCMODE {
                    libc::O_RDONLY => stitchdb_fs::R,
                    _ => stitchdb_fs::R | stitchdb_fs::W,
                };
                match self.fs.access(&caller(req), a.ino, mask) {
                    Ok(()) => reply.opened(ino, 0),
                    Err(e) => reply.error(errno(&e)),
                }
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readdir(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        mut reply: ReplyDirectory,
    ) {
        self.busy();
        let listed = entries_from(&self.fs, ino, offset, |entry| {
            Ok(reply.add(
                entry.ino,
                entry.offset as i64,
                file_type(entry.kind),
                OsStr::from_bytes(&entry.name),
            ))
        });
        match listed {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readdirplus(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        mut reply: ReplyDirectoryPlus,
    ) {
        self.busy();
        let (fs, ttl) = (&self.fs, &self.opts.ttl);
        let listed = entries_from(fs, ino, offset, |entry| {
            let attr = file_attr(&fs.getattr(entry.ino)?);
            Ok(reply.add(
                entry.ino,
                entry.offset as i64,
                OsStr::from_bytes(&entry.name),
                ttl,
                &attr,
                0,
            ))
        });
        match listed {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn releasedir(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        _fh: u64,
        _flags: i32,
        reply: ReplyEmpty,
    ) {
        self.busy();
        reply.ok();
    }

    fn fsyncdir(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        _fh: u64,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.busy();
        match self.fs.fsync() {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn statfs(&mut self, _req: &Request<'_>, _ino: u64, reply: ReplyStatfs) {
        self.busy();
        let st = self.fs.statfs();
        let dir = self
            .opts
            .store_path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        // The store grows into its device's free space.
        let (free, files_free) = match rustix::fs::statvfs(dir) {
            Ok(v) => (v.f_bavail * v.f_frsize, v.f_ffree),
            Err(_) => (0, 0),
        };
        let used_blocks = st.used_bytes.div_ceil(BLOCK_SIZE);
        let free_blocks = free / BLOCK_SIZE;
        reply.statfs(
            used_blocks + free_blocks,
            free_blocks,
            free_blocks,
            st.inodes + files_free,
            files_free,
            BLOCK_SIZE as u32,
            st.name_max,
            BLOCK_SIZE as u32,
        );
    }

    fn setxattr(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        self.busy();
        match self
            .fs
            .setxattr(&caller(req), ino, name.as_bytes(), value, flags as u32)
        {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn getxattr(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        name: &OsStr,
        size: u32,
        reply: ReplyXattr,
    ) {
        self.busy();
        match self.fs.getxattr(&caller(req), ino, name.as_bytes()) {
            Ok(v) => xattr_reply(&v, size, reply),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn listxattr(&mut self, req: &Request<'_>, ino: u64, size: u32, reply: ReplyXattr) {
        self.busy();
        match self.fs.listxattr(&caller(req), ino) {
            Ok(names) => {
                let mut v = Vec::new();
                for n in names {
                    v.extend_from_slice(&n);
                    v.push(0);
                }
                xattr_reply(&v, size, reply);
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn removexattr(&mut self, req: &Request<'_>, ino: u64, name: &OsStr, reply: ReplyEmpty) {
        self.busy();
        match self.fs.removexattr(&caller(req), ino, name.as_bytes()) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn access(&mut self, req: &Request<'_>, ino: u64, mask: i32, reply: ReplyEmpty) {
        self.busy();
        match self.fs.access(&caller(req), ino, mask as u32) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn create(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        self.busy();
        match self.fs.create(&caller(req), parent, name.as_bytes(), mode) {
            Ok(a) => reply.created(
                &self.opts.ttl,
                &file_attr(&a),
                0,
                a.ino,
                consts::FOPEN_KEEP_CACHE,
            ),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn fallocate(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        length: i64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        self.busy();
        let (Ok(offset), Ok(length)) = (u64::try_from(offset), u64::try_from(length)) else {
            return reply.error(libc::EINVAL);
        };
        match self.fs.fallocate(&caller(req), ino, offset, length, mode) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn lseek(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        self.busy();
        if self.opts.writeback_cache {
            // The kernel holds written pages (and the size they make) that have not reached
            // the store, and sends FUSE_LSEEK without writing them back first, so the store
            // cannot answer for them. ENOSYS makes the kernel answer every later lseek on this
            // mount itself, from its own size: the whole file is data, the hole is at the end
            // (what Linux does for file systems that report no holes).
            return reply.error(libc::ENOSYS);
        }
        let Ok(offset) = u64::try_from(offset) else {
            return reply.error(libc::ENXIO);
        };
        let data = match whence {
            libc::SEEK_DATA => true,
            libc::SEEK_HOLE => false,
            _ => return reply.error(libc::EINVAL),
        };
        match self.fs.seek(ino, offset, data) {
            Ok(o) => reply.offset(o as i64),
            Err(e) => reply.error(errno(&e)),
        }
    }
}

/// Answers a getxattr or listxattr: the size when asked for it (size 0), `ERANGE` when the
/// caller's buffer is too small.
fn xattr_reply(v: &[u8], size: u32, reply: ReplyXattr) {
    if size == 0 {
        reply.size(v.len() as u32);
    } else if v.len() > size as usize {
        reply.error(libc::ERANGE);
    } else {
        reply.data(v);
    }
}
