//! [`KvFuse`]: the FUSE requests served by a [`Fs`].

use crate::attr::{file_attr, file_type, timespec};
use crate::bdi::BdiSettings;
use crate::poll::Poller;
use crate::serve::{self, errno, Served, Xattr};
use fuser::{
    consts, Filesystem, KernelConfig, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyLseek, ReplyOpen, ReplyStatfs, ReplyWrite,
    ReplyXattr, Request, TimeOrNow,
};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};
use stitchdb_fs::{Caller, Fs, FsError, SetAttr, TimeSet};

/// The largest read and write request (1 MiB): the kernel sends up to this much in one.
pub const MAX_REQUEST: u32 = 1 << 20;

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

/// How long the session thread naps after a FORGET while the io_uring queues serve (see
/// [`KvFuse::gather_forgets`]): at most 500 wake-ups a second for FORGETs. Unlinks of 20,000
/// files took 41-43 us a file with 2 ms, 44-47 with 200 us and 48 without napping
/// (`bench/fs/metaops.sh`).
const FORGET_NAP: Duration = Duration::from_millis(2);

/// `FUSE_HANDLE_KILLPRIV_V2` (protocol 7.33, not among `fuser`'s constants): the file system
/// clears set-user-id, set-group-id and `security.capability` on write, truncate and chown
/// itself (`stitchdb-fs` does, as ext4 would), so the kernel stops asking for
/// `security.capability` before every write and stops reading attributes before every chown.
const FUSE_HANDLE_KILLPRIV_V2: u64 = 1 << 28;

/// The FUSE file system served through `/dev/fuse` (and the io_uring queues' start): every
/// request becomes a call on the [`Fs`]. Requests that change something are served in the
/// order they arrive, on the session's thread (each is one commit); reads of file data are
/// handed to worker threads, so a slow read (a cold block) does not hold up the requests
/// behind it; except a short read of file data when
/// the session thread polls and no request is waiting, which it serves itself, polling for
/// the device too (see [`KvFuse::read`]). A read runs against committed state, so
/// it sees a change the kernel sent before it, and the kernel orders what must be ordered by
/// waiting for replies.
pub struct KvFuse {
    served: Arc<Served>,
    /// Set once the session's device exists (see [`KvFuse::poller`]); empty when polling is
    /// off.
    poller: Arc<OnceLock<Poller>>,
    /// The io_uring queues' rings, made once the device is open (see
    /// [`KvFuse::offer_queues`]), until INIT takes them.
    prepared: Arc<parking_lot::Mutex<Option<fuse_uring::Prepared>>>,
    /// The running queues, once INIT started them.
    queues: Option<fuse_uring::Queues>,
}

impl KvFuse {
    /// Serves `fs`.
    pub fn new(fs: Arc<Fs>, opts: AdapterOptions) -> KvFuse {
        KvFuse {
            served: Arc::new(Served::new(fs, opts)),
            poller: Arc::new(OnceLock::new()),
            prepared: Arc::new(parking_lot::Mutex::new(None)),
            queues: None,
        }
    }

    /// Where the session puts its [`Poller`] once the device is open: the adapter is moved
    /// into the session before the session's descriptor exists.
    pub fn poller(&self) -> Arc<OnceLock<Poller>> {
        self.poller.clone()
    }

    /// Where the session puts the io_uring queues' rings, which INIT offers the kernel (see
    /// `fuse_uring`): the adapter is moved into the session before the device exists.
    pub fn offer_queues(&self) -> Arc<parking_lot::Mutex<Option<fuse_uring::Prepared>>> {
        self.prepared.clone()
    }

    /// Writes `settings` into the backing device of the mount at `mountpoint` (canonical)
    /// when the first request after INIT comes.
    pub fn set_bdi(&self, settings: BdiSettings, mountpoint: PathBuf) {
        self.served.set_bdi(settings, mountpoint);
    }

    /// At the start of every request: marks the mount busy, so the session thread polls for
    /// the next one; the first writes the backing-device settings. Not while the io_uring
    /// queues serve: then only FORGET and INTERRUPT come here, which nobody waits for, and a
    /// session thread polling for them would take CPU from the queues' own polling.
    fn busy(&self) {
        if self.queues.is_none() {
            if let Some(p) = self.poller.get() {
                p.busy();
            }
        }
        self.served.request_started();
    }

    /// After a FORGET, while the io_uring queues serve: naps before reading the device again.
    /// Then FORGET and INTERRUPT are all that come here, and the kernel wakes a thread asleep
    /// in `read` for each FORGET it queues: one per file an unlink evicts, a wake-up of the
    /// other CPU (on this VM, out of its halt) paid by the unlinking caller. Napping, the
    /// thread is not waiting on the device, so the kernel only queues the FORGETs, and the
    /// next read takes them all in one BATCH_FORGET. INTERRUPTs wait as long (the file system
    /// answers none: each request it serves ends on its own).
    fn gather_forgets(&self) {
        if self.queues.is_some() {
            std::thread::sleep(FORGET_NAP);
        }
    }

    /// Starts the io_uring queues if the session made their rings, and takes them in the
    /// INIT reply if the kernel offers them. They are started first: once the kernel has the
    /// reply, it holds every request until the queues are registered.
    fn start_queues(&mut self, config: &mut KernelConfig) {
        let Some(prepared) = self.prepared.lock().take() else {
            return;
        };
        let handler: Arc<dyn fuse_uring::Handler> = self.served.clone();
        let queues = match prepared.start(handler, MAX_REQUEST as usize) {
            Ok(q) => q,
            Err(e) => {
                tracing::warn!("starting the io_uring queues: {e}; serving /dev/fuse");
                return;
            }
        };
        if config
            .add_capabilities(fuse_uring::abi::FUSE_OVER_IO_URING)
            .is_err()
        {
            // Not offered: the queues could not have registered yet (the kernel refuses
            // them until it has the INIT reply), and now never will.
            tracing::info!(
                "the kernel does not offer FUSE over io_uring (as root: echo Y > \
                 /sys/module/fuse/parameters/enable_uring): serving /dev/fuse"
            );
            queues.stop();
            return;
        }
        tracing::info!("serving through io_uring queues");
        self.queues = Some(queues);
    }

    fn entry_reply(&self, r: Result<stitchdb_fs::Attr, FsError>, reply: ReplyEntry) {
        match r {
            Ok(a) => reply.entry(&self.served.opts.ttl, &file_attr(&a), 0),
            Err(e) => reply.error(errno(&e)),
        }
    }
}

/// The credentials of a request.
fn caller(req: &Request<'_>) -> Caller {
    serve::caller(req.uid(), req.gid(), req.pid())
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
        if self.served.opts.writeback_cache {
            wanted |= consts::FUSE_WRITEBACK_CACHE;
        }
        // Ask for each on its own: a kernel without one still gets the others.
        for bit in (0..64).map(|i| 1u64 << i).filter(|b| wanted & b != 0) {
            if config.add_capabilities(bit).is_err() {
                tracing::info!("the kernel does not offer FUSE capability {bit:#x}");
            }
        }
        self.start_queues(config);
        let _ = config.set_max_write(MAX_REQUEST);
        let _ = config.set_max_readahead(MAX_REQUEST);
        let _ = config.set_time_granularity(Duration::from_nanos(1));
        // This runs on the session thread, which serves lone short reads itself when it polls.
        if self.poller.get().is_some() {
            stitchdb::spin_for_reads(serve::READ_SPIN_LIMIT);
        }
        Ok(())
    }

    fn destroy(&mut self) {
        stitchdb::spin_for_reads(Duration::ZERO);
        if let Some(q) = self.queues.take() {
            q.stop();
        }
        // Finish the reads in flight, then make everything durable.
        self.served.workers.finish();
        if let Err(e) = self.served.fs.fsync() {
            tracing::error!("sync at unmount failed: {e}");
        }
    }

    fn lookup(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        self.busy();
        let r = self.served.fs.lookup(&caller(req), parent, name.as_bytes());
        self.entry_reply(r, reply);
    }

    /// The kernel lets go of `ino` (it sends the whole count it held, when it evicts the
    /// inode): a deleted inode it still held is gone for good.
    fn forget(&mut self, _req: &Request<'_>, ino: u64, _nlookup: u64) {
        self.served.fs.forget(ino);
        self.gather_forgets();
    }

    fn batch_forget(&mut self, _req: &Request<'_>, nodes: &[fuser::fuse_forget_one]) {
        for n in nodes {
            self.served.fs.forget(n.nodeid);
        }
        self.gather_forgets();
    }

    fn getattr(&mut self, _req: &Request<'_>, ino: u64, _fh: Option<u64>, reply: ReplyAttr) {
        self.busy();
        match self.served.fs.getattr(ino) {
            Ok(a) => reply.attr(&self.served.opts.ttl, &file_attr(&a)),
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
        match self.served.fs.setattr(&caller(req), ino, &s) {
            Ok(a) => reply.attr(&self.served.opts.ttl, &file_attr(&a)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readlink(&mut self, _req: &Request<'_>, ino: u64, reply: ReplyData) {
        self.busy();
        match self.served.fs.readlink(ino) {
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
            .served
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
        let r = self
            .served
            .fs
            .mkdir(&caller(req), parent, name.as_bytes(), mode);
        self.entry_reply(r, reply);
    }

    fn unlink(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        self.busy();
        match self.served.fs.unlink(&caller(req), parent, name.as_bytes()) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn rmdir(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        self.busy();
        match self.served.fs.rmdir(&caller(req), parent, name.as_bytes()) {
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
        let r = self.served.fs.symlink(
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
        let r = self.served.fs.rename(
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
            .served
            .fs
            .link(&caller(req), ino, newparent, newname.as_bytes());
        self.entry_reply(r, reply);
    }

    fn open(&mut self, req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        self.busy();
        match self.served.fs.open(&caller(req), ino, flags) {
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
        let serve = move |fs: &Fs| match fs.read(ino, offset, size as usize) {
            Ok(d) => reply.data(&d),
            Err(e) => reply.error(errno(&e)),
        };
        // A lone short read (a random reader's next block) is served here: handing it to a
        // worker would add a wake-up on another CPU to the device's latency, and one
        // more when the device completes, each tens of microseconds on a VM whose idle CPUs
        // halt; this thread polls /dev/fuse anyway, and polls the device the same way
        // (`spin_for_reads`, set in `init`). With a request queued behind it, or polling
        // off, the read goes to the workers, so concurrent readers still overlap.
        let lone =
            size <= serve::INLINE_MAX && self.poller.get().is_some_and(|p| !p.request_waiting());
        if lone {
            serve(&self.served.fs);
        } else {
            let fs = self.served.fs.clone();
            self.served.workers.run(Box::new(move || serve(&fs)));
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
        let offset = match self.served.write_offset(ino, offset, flags) {
            Ok(o) => o,
            Err(e) => return reply.error(e),
        };
        match self.served.fs.write(&caller(req), ino, offset, data) {
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
        match self.served.fs.release(ino) {
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
        match self.served.fs.fsync() {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn opendir(&mut self, req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        self.busy();
        match self.served.opendir(&caller(req), ino, flags) {
            Ok(()) => reply.opened(ino, 0),
            Err(e) => reply.error(e),
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
        let listed = self.served.entries_from(ino, offset, |entry| {
            Ok(reply.add(
                entry.ino,
                entry.offset as i64,
                file_type(entry.kind),
                OsStr::from_bytes(&entry.name),
            ))
        });
        match listed {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
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
        let (fs, ttl) = (&self.served.fs, &self.served.opts.ttl);
        let listed = self.served.entries_from(ino, offset, |entry| {
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
            Err(e) => reply.error(e),
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
        match self.served.fs.fsync() {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn statfs(&mut self, _req: &Request<'_>, _ino: u64, reply: ReplyStatfs) {
        self.busy();
        let st = self.served.statfs();
        reply.statfs(
            st.blocks, st.bfree, st.bavail, st.files, st.ffree, st.bsize, st.namelen, st.frsize,
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
            .served
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
        match self.served.fs.getxattr(&caller(req), ino, name.as_bytes()) {
            Ok(v) => xattr_reply(&v, size, reply),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn listxattr(&mut self, req: &Request<'_>, ino: u64, size: u32, reply: ReplyXattr) {
        self.busy();
        match self.served.fs.listxattr(&caller(req), ino) {
            Ok(names) => xattr_reply(&serve::xattr_list(names), size, reply),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn removexattr(&mut self, req: &Request<'_>, ino: u64, name: &OsStr, reply: ReplyEmpty) {
        self.busy();
        match self
            .served
            .fs
            .removexattr(&caller(req), ino, name.as_bytes())
        {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn access(&mut self, req: &Request<'_>, ino: u64, mask: i32, reply: ReplyEmpty) {
        self.busy();
        match self.served.fs.access(&caller(req), ino, mask as u32) {
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
        match self
            .served
            .fs
            .create(&caller(req), parent, name.as_bytes(), mode)
        {
            Ok(a) => reply.created(
                &self.served.opts.ttl,
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
        match self
            .served
            .fs
            .fallocate(&caller(req), ino, offset, length, mode)
        {
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
        match self.served.lseek(ino, offset, whence) {
            Ok(o) => reply.offset(o as i64),
            Err(e) => reply.error(e),
        }
    }
}

/// Sends a getxattr or listxattr answer.
fn xattr_reply(v: &[u8], size: u32, reply: ReplyXattr) {
    match serve::xattr_answer(v, size) {
        Ok(Xattr::Size(n)) => reply.size(n),
        Ok(Xattr::Data(d)) => reply.data(d),
        Err(e) => reply.error(e),
    }
}
