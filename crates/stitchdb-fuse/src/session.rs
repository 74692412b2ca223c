//! [`KvFuse`]: the transport through `/dev/fuse`, by way of the `fuser` crate's session. It
//! turns each of `fuser`'s calls into a [`Request`] of the table and sends the table's
//! [`Reply`] back through `fuser`'s reply; it also answers INIT (and starts the io_uring
//! queues, the other transport, when the kernel offers them) and DESTROY.

use crate::attr::{file_attr, file_type, timespec};
use crate::bdi::{BdiSettings, PendingBdi};
use crate::nodeid;
use crate::options::ServeOptions;
use crate::poll::Poller;
use crate::table::{
    Answer, Op, Reply, Request, Served, Synced, INLINE_MAX, READ_SPIN_LIMIT, WRITE_KILL_SUIDGID,
};
use fuser::{
    consts, Filesystem, KernelConfig, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyLseek, ReplyOpen, ReplyStatfs, ReplyWrite,
    ReplyXattr, TimeOrNow,
};
use parking_lot::Mutex;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};
use stitchdb_fs::{Attr, DirEntry, Fs, SetAttr, TimeSet};

/// The largest read and write request (1 MiB): the kernel sends up to this much in one.
pub const MAX_REQUEST: u32 = 1 << 20;

/// The most file data the kernel's write-back WRITEs held together make (see
/// [`HeldWrites`]): one commit, one ingested run.
pub const HOLD_MAX: usize = 4 << 20;

/// The shortest WRITE held for the next one (see [`HeldWrites`]): a stretch the engine would
/// ingest as a run of its own (`Options::ingest_min_bytes`), i.e. the kernel's large
/// write-back requests, not a small file's.
const HOLD_MIN: usize = 256 << 10;

/// How long held WRITEs wait at most for the request behind them (see [`HeldWrites`]): only
/// a request `fuser` answers itself (an INTERRUPT, an IOCTL) can leave them waiting.
const HOLD_WAIT: Duration = Duration::from_millis(2);

/// How long the session thread naps after a FORGET while the io_uring queues serve (see
/// [`KvFuse::gather_forgets`]): at most 500 wake-ups a second for FORGETs.
const FORGET_NAP: Duration = Duration::from_millis(2);

/// `FUSE_HANDLE_KILLPRIV_V2` (protocol 7.33, not among `fuser`'s constants): the file system
/// clears set-user-id, set-group-id and `security.capability` on write, truncate and chown
/// itself (`stitchdb-fs` does, as ext4 would), so the kernel stops asking for
/// `security.capability` before every write and stops reading attributes before every chown.
const FUSE_HANDLE_KILLPRIV_V2: u64 = 1 << 28;

/// The FUSE file system served through `/dev/fuse` (and the io_uring queues' start): every
/// request is served by the table (`table::Served`). Requests that change something are served in
/// the order they arrive, on the session's thread (each is one commit); reads of file data
/// are handed to worker threads, so a slow read (a cold block) does not hold up the requests
/// behind it; except a short read of file data when the session thread polls and no request
/// is waiting, which it serves itself, polling for the device too (see [`KvFuse::read`]).
/// FSYNC and FSYNCDIR (and with `-o sync` every change) are answered by the syncer thread
/// (`Served::fsync`), which makes the store durable once for all the FSYNCs waiting, while
/// this thread serves on; a lone one, this thread syncs itself (see
/// `KvFuse::answer_durable`). A
/// read runs against committed state, so it sees a change the kernel sent before it, and the
/// kernel orders what must be ordered by waiting for replies.
pub struct KvFuse {
    served: Arc<Served>,
    /// Set once the session's device exists (see [`KvFuse::poller`]); empty when polling is
    /// off.
    poller: Arc<OnceLock<Poller>>,
    /// The io_uring queues' rings, made once the device is open (see
    /// [`KvFuse::offer_queues`]), until INIT takes them.
    prepared: Arc<Mutex<Option<fuse_uring::Prepared>>>,
    /// The running queues, once INIT started them.
    queues: Option<fuse_uring::Queues>,
    /// Backing-device settings to write once the kernel has taken the INIT reply, which sets
    /// the readahead again: on the first request after it (see [`KvFuse::set_bdi`]).
    bdi: Arc<PendingBdi>,
    /// The kernel's write-back WRITEs held to be committed together (see [`HeldWrites`]).
    held: Arc<HeldWrites>,
}

/// What the holding of write-back WRITEs (see [`HeldWrites`]) did since the mount, counted
/// so that tests can tell whether WRITEs were held at all (whether one is depends on what
/// the kernel has queued when it comes). Not an interface: see [`KvFuse::held_counts`].
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct HeldCounts {
    /// Holdings committed, each as one write (one commit).
    pub commits: AtomicU64,
    /// WRITEs answered by those commits.
    pub writes: AtomicU64,
    /// Of those, the WRITEs answered with an error (none of their bytes written).
    pub failed: AtomicU64,
}

/// Consecutive WRITEs of one file's write-back, committed as one write. The kernel writes
/// back a sequentially written file in 1 MiB WRITEs, up to 16 at a time; committed one by
/// one, each is a commit and an ingested run of its own, and the runs, 1,024 for a GiB,
/// outnumber what merges keep up with (writers are then paced). So a large WRITE of the
/// kernel's write-back (no caller waits for it by itself) that has a request queued behind
/// it is held, unanswered; the WRITEs that continue it join it, up to [`HOLD_MAX`] bytes;
/// the first request that does not continue it, or that finds it full, commits it (one
/// commit, one run) and answers each of its WRITEs, before being served itself. So every
/// request is still served after those the kernel sent before it. Requests `fuser` answers
/// itself never reach the adapter, so a thread also commits what was held for
/// [`HOLD_WAIT`].
struct HeldWrites {
    held: Mutex<Option<Held>>,
    /// What the holdings committed so far did.
    counts: Arc<HeldCounts>,
    /// Tells the committing thread that WRITEs are held, or (`true`) to stop.
    wake: parking_lot::Condvar,
    stop: std::sync::atomic::AtomicBool,
}

/// WRITEs held: of node `ino` from `offset`, `data` back to back, each one's reply and
/// length.
struct Held {
    ino: u64,
    fh: u64,
    flags: i32,
    uid: u32,
    gid: u32,
    offset: i64,
    data: Vec<u8>,
    replies: Vec<(ReplyWrite, u32)>,
    /// Which holding this is, so the committing thread's wait for one does not commit the
    /// next early.
    serial: u64,
}

impl Held {
    /// Whether a WRITE of `len` bytes at `offset` of `ino` continues these and fits.
    fn continued_by(&self, ino: u64, fh: u64, flags: i32, offset: i64, len: usize) -> bool {
        self.ino == ino
            && self.fh == fh
            && self.flags == flags
            && offset == self.offset + self.data.len() as i64
            && self.data.len() + len <= HOLD_MAX
    }

    /// Commits the WRITEs held as one and answers each; counts them in `counts`.
    fn commit(self, served: &Served, counts: &HeldCounts) {
        counts.commits.fetch_add(1, Ordering::Relaxed);
        counts
            .writes
            .fetch_add(self.replies.len() as u64, Ordering::Relaxed);
        let op = Op::Write {
            fh: self.fh,
            offset: self.offset,
            data: &self.data,
            flags: self.flags,
            kill_suidgid: false,
        };
        let req = Request {
            ino: self.ino,
            uid: self.uid,
            gid: self.gid,
            pid: 0,
            op,
        };
        let answers = held_answers(served.serve(req), self.replies.iter().map(|r| r.1));
        for ((reply, _), answer) in self.replies.into_iter().zip(answers) {
            match answer {
                Ok(n) => reply.written(n),
                Err(e) => {
                    counts.failed.fetch_add(1, Ordering::Relaxed);
                    reply.error(e)
                }
            }
        }
    }
}

/// What each of the WRITEs held together (of `lens` bytes, in order) is answered once their
/// commit as one write answered `committed`: the bytes it took, or the errno. A commit that
/// fails fails every one of them; one that wrote fewer bytes than held (it stopped at the
/// largest file size) gives the first WRITEs theirs and `EFBIG` to those that got nothing.
fn held_answers(committed: Answer<Reply>, lens: impl Iterator<Item = u32>) -> Vec<Answer<u32>> {
    match committed {
        Ok(Reply::Written(mut n)) => lens
            .map(|len| {
                let took = len.min(n);
                n -= took;
                match took {
                    0 => Err(libc::EFBIG),
                    took => Ok(took),
                }
            })
            .collect(),
        Ok(r) => {
            let e = mismatch(&r);
            lens.map(|_| Err(e)).collect()
        }
        Err(e) => lens.map(|_| Err(e)).collect(),
    }
}

impl HeldWrites {
    /// Nothing held; starts the thread that commits what waits too long. It holds `served`
    /// only while it commits, so that the file system is closed once the session ends (see
    /// `Mount::wait`), and stops at [`stop`](Self::stop).
    fn start(served: std::sync::Weak<Served>) -> Arc<HeldWrites> {
        let h = Arc::new(HeldWrites {
            held: Mutex::new(None),
            counts: Arc::default(),
            wake: parking_lot::Condvar::new(),
            stop: std::sync::atomic::AtomicBool::new(false),
        });
        let me = h.clone();
        let spawned = std::thread::Builder::new()
            .name("kvfs-held".into())
            .spawn(move || me.commit_late(&served));
        if let Err(e) = spawned {
            // Without it nothing is held (see `may_hold`).
            tracing::warn!("starting the thread committing held WRITEs: {e}");
            h.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        h
    }

    /// Whether WRITEs may be held: the committing thread runs.
    fn may_hold(&self) -> bool {
        !self.stop.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Commits what is held, if anything, and answers its WRITEs.
    fn commit(&self, served: &Served) {
        let mut held = self.held.lock();
        if let Some(h) = held.take() {
            // Under the lock: a request served after this returns is served after them.
            h.commit(served, &self.counts);
        }
    }

    /// The committing thread: commits each holding still there [`HOLD_WAIT`] after it began.
    fn commit_late(&self, served: &std::sync::Weak<Served>) {
        let mut held = self.held.lock();
        loop {
            if self.stop.load(std::sync::atomic::Ordering::Relaxed) {
                return;
            }
            let Some(serial) = held.as_ref().map(|h| h.serial) else {
                self.wake.wait(&mut held);
                continue;
            };
            let deadline = std::time::Instant::now() + HOLD_WAIT;
            while held.as_ref().is_some_and(|h| h.serial == serial)
                && !self.stop.load(std::sync::atomic::Ordering::Relaxed)
            {
                if self.wake.wait_until(&mut held, deadline).timed_out() {
                    break;
                }
            }
            if held.as_ref().is_some_and(|h| h.serial == serial) {
                let Some(served) = served.upgrade() else {
                    return;
                };
                if let Some(h) = held.take() {
                    h.commit(&served, &self.counts);
                }
                // Let go of it before the lock: once `stop` has the lock, nothing here holds
                // the file system.
                drop(served);
            }
        }
    }

    /// Commits what is held and stops the committing thread (once this returns, it commits
    /// nothing more).
    fn stop(&self, served: &Served) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.commit(served);
        self.wake.notify_all();
    }
}

impl Drop for KvFuse {
    /// A session that ends without DESTROY (the connection aborted) still answers the WRITEs
    /// held, and stops the thread committing them.
    fn drop(&mut self) {
        self.held.stop(&self.served);
    }
}

impl KvFuse {
    /// Serves `fs`.
    pub fn new(fs: Arc<Fs>, opts: ServeOptions) -> KvFuse {
        let served = Arc::new(Served::new(fs, opts));
        KvFuse {
            held: HeldWrites::start(Arc::downgrade(&served)),
            served,
            poller: Arc::new(OnceLock::new()),
            prepared: Arc::new(Mutex::new(None)),
            queues: None,
            bdi: Arc::new(PendingBdi::default()),
        }
    }

    /// What the holding of write-back WRITEs has done so far, for tests (see
    /// [`HeldCounts`]).
    #[doc(hidden)]
    pub fn held_counts(&self) -> Arc<HeldCounts> {
        self.held.counts.clone()
    }

    /// Where the session puts its notifier once it exists (the adapter is moved into the
    /// session first): commits made around the mainline are told to the kernel through it.
    pub fn notifier(&self) -> Arc<OnceLock<fuser::Notifier>> {
        self.served.notifier.clone()
    }

    /// Where the session puts its [`Poller`] once the device is open: the adapter is moved
    /// into the session before the session's descriptor exists.
    pub fn poller(&self) -> Arc<OnceLock<Poller>> {
        self.poller.clone()
    }

    /// Where the session puts the io_uring queues' rings, which INIT offers the kernel (see
    /// `fuse_uring`): the adapter is moved into the session before the device exists.
    pub fn offer_queues(&self) -> Arc<Mutex<Option<fuse_uring::Prepared>>> {
        self.prepared.clone()
    }

    /// Writes `settings` into the backing device of the mount at `mountpoint` (canonical)
    /// when the first request after INIT comes.
    pub fn set_bdi(&self, settings: BdiSettings, mountpoint: PathBuf) {
        self.bdi.set(settings, mountpoint);
    }

    /// At the start of every request: marks the mount busy, so the session thread polls for
    /// the next one; the first writes the backing-device settings. Not while the io_uring
    /// queues serve: then only FORGET and INTERRUPT come here, which nobody waits for, and a
    /// session thread polling for them would take CPU from the queues' own polling (the
    /// queues' first request writes the settings, through the handler).
    fn busy(&self) {
        self.held.commit(&self.served);
        if self.queues.is_none() {
            if let Some(p) = self.poller.get() {
                p.busy();
            }
        }
        self.bdi.apply();
    }

    /// After a FORGET, while the io_uring queues serve: naps before reading the device again.
    /// Then FORGET and INTERRUPT are all that come here, and the kernel wakes a thread asleep
    /// in `read` for each FORGET it queues: one per file an unlink evicts, a wake-up of the
    /// other CPU (on a VM, out of its halt) paid by the unlinking caller. Napping, the
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
        let handler: Arc<dyn fuse_uring::Handler> = Arc::new(crate::uring::Queued {
            served: self.served.clone(),
            bdi: self.bdi.clone(),
        });
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

    /// FSYNC and FSYNCDIR: answered once the store is durable (see `answer_durable`).
    fn fsync_later(&self, reply: ReplyEmpty) {
        self.busy();
        self.answer_durable(Ok(Reply::Empty), reply);
    }

    /// Sends `answer` once the store is durable. A lone request (nothing waiting behind it on
    /// the device, no other sync waiting or running) syncs here: the hand-over's two thread
    /// wake-ups cost more than a flush alone takes. Otherwise the syncer answers it (see
    /// `Served::fsync`), while this thread serves what waits, and concurrent ones share a sync.
    fn answer_durable(&self, answer: Answer<Reply>, reply: impl Send2Kernel) {
        let lone = self.poller.get().is_some_and(|p| !p.request_waiting());
        let served = self.served.clone();
        let mut pending = Some((answer, reply));
        let later = || -> Synced {
            let (answer, reply) = pending.take().expect("taken once");
            Box::new(move |synced| reply.send(&served.opts, synced.and(answer)))
        };
        if !lone {
            return self.served.fsync(later());
        }
        if let Some(synced) = self.served.fsync_alone(later) {
            let (answer, reply) = pending.take().expect("not handed over");
            reply.send(&self.served.opts, synced.and(answer));
        }
    }

    /// Serves `op` on inode `ino` for the caller of `req` and sends the answer.
    fn run(&self, req: &fuser::Request<'_>, ino: u64, op: Op<'_>, reply: impl Send2Kernel) {
        self.busy();
        let changes = op.changes();
        let answer = self.served.serve(request(req, ino, op));
        if self.served.needs_sync(changes, &answer) {
            // `-o sync`: answered once durable, as an FSYNC.
            return self.answer_durable(answer, reply);
        }
        reply.send(&self.served.opts, answer);
    }
}

/// The table's request for `op` on `ino`, from the caller of `req`.
fn request<'a>(req: &fuser::Request<'_>, ino: u64, op: Op<'a>) -> Request<'a> {
    Request {
        ino,
        uid: req.uid(),
        gid: req.gid(),
        pid: req.pid(),
        op,
    }
}

fn time_set(t: Option<TimeOrNow>) -> Option<TimeSet> {
    t.map(|t| match t {
        TimeOrNow::Now => TimeSet::Now,
        TimeOrNow::SpecificTime(t) => TimeSet::At(timespec(t)),
    })
}

impl Filesystem for KvFuse {
    fn init(
        &mut self,
        _req: &fuser::Request<'_>,
        config: &mut KernelConfig,
    ) -> Result<(), libc::c_int> {
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
            stitchdb::spin_for_reads(READ_SPIN_LIMIT);
        }
        Ok(())
    }

    fn destroy(&mut self) {
        self.held.stop(&self.served);
        stitchdb::spin_for_reads(Duration::ZERO);
        if let Some(q) = self.queues.take() {
            q.stop();
        }
        self.served.finish();
    }

    fn lookup(&mut self, req: &fuser::Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        let name = name.as_bytes();
        self.run(req, parent, Op::Lookup { name }, reply);
    }

    fn forget(&mut self, _req: &fuser::Request<'_>, ino: u64, _nlookup: u64) {
        // Nobody waits for a FORGET, but held WRITEs should not wait for the request after
        // it.
        self.held.commit(&self.served);
        self.served.forget(ino);
        self.gather_forgets();
    }

    fn batch_forget(&mut self, _req: &fuser::Request<'_>, nodes: &[fuser::fuse_forget_one]) {
        self.held.commit(&self.served);
        for n in nodes {
            self.served.forget(n.nodeid);
        }
        self.gather_forgets();
    }

    fn getattr(&mut self, req: &fuser::Request<'_>, ino: u64, _fh: Option<u64>, reply: ReplyAttr) {
        self.run(req, ino, Op::Getattr, reply);
    }

    fn setattr(
        &mut self,
        req: &fuser::Request<'_>,
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
        self.run(req, ino, Op::Setattr(s), reply);
    }

    fn readlink(&mut self, req: &fuser::Request<'_>, ino: u64, reply: ReplyData) {
        self.run(req, ino, Op::Readlink, reply);
    }

    fn mknod(
        &mut self,
        req: &fuser::Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let name = name.as_bytes();
        self.run(req, parent, Op::Mknod { name, mode, rdev }, reply);
    }

    fn mkdir(
        &mut self,
        req: &fuser::Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let name = name.as_bytes();
        self.run(req, parent, Op::Mkdir { name, mode }, reply);
    }

    fn unlink(&mut self, req: &fuser::Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        let name = name.as_bytes();
        self.run(req, parent, Op::Unlink { name }, reply);
    }

    fn rmdir(&mut self, req: &fuser::Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        let name = name.as_bytes();
        self.run(req, parent, Op::Rmdir { name }, reply);
    }

    fn symlink(
        &mut self,
        req: &fuser::Request<'_>,
        parent: u64,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let op = Op::Symlink {
            name: link_name.as_bytes(),
            target: target.as_os_str().as_bytes(),
        };
        self.run(req, parent, op, reply);
    }

    fn rename(
        &mut self,
        req: &fuser::Request<'_>,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
        reply: ReplyEmpty,
    ) {
        let op = Op::Rename {
            name: name.as_bytes(),
            new_parent: newparent,
            new_name: newname.as_bytes(),
            flags,
        };
        self.run(req, parent, op, reply);
    }

    fn link(
        &mut self,
        req: &fuser::Request<'_>,
        ino: u64,
        newparent: u64,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let op = Op::Link {
            target: ino,
            name: newname.as_bytes(),
        };
        self.run(req, newparent, op, reply);
    }

    fn open(&mut self, req: &fuser::Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        self.run(req, ino, Op::Open { flags }, reply);
    }

    fn read(
        &mut self,
        req: &fuser::Request<'_>,
        ino: u64,
        fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyData,
    ) {
        // A lone short read (a random reader's next block) is served here: handing it to a
        // worker would add a wake-up on another CPU to the device's latency, and one
        // more when the device completes, each tens of microseconds on a VM whose idle CPUs
        // halt; this thread polls /dev/fuse anyway, and polls the device the same way
        // (`spin_for_reads`, set in `init`). With a request queued behind it, or polling
        // off, the read goes to the workers, so concurrent readers still overlap.
        let lone = size <= INLINE_MAX && self.poller.get().is_some_and(|p| !p.request_waiting());
        if lone {
            return self.run(req, ino, Op::Read { fh, offset, size }, reply);
        }
        self.busy();
        let served = self.served.clone();
        let read = request(req, ino, Op::Read { fh, offset, size });
        self.served.workers.run(Box::new(move || {
            let answer = served.serve(read);
            reply.send(&served.opts, answer);
        }));
    }

    fn write(
        &mut self,
        req: &fuser::Request<'_>,
        ino: u64,
        fh: u64,
        offset: i64,
        data: &[u8],
        write_flags: u32,
        flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyWrite,
    ) {
        let kill_suidgid = write_flags & WRITE_KILL_SUIDGID != 0;
        // The kernel's write-back of a large stretch (see `HeldWrites`): held while a request
        // waits behind it, joined by the WRITEs that continue it.
        let holdable = req.pid() == 0
            && !kill_suidgid
            && data.len() >= HOLD_MIN
            && offset >= 0
            && nodeid::split(ino).0 == nodeid::MAINLINE
            && self.served.opts.writeback_cache
            && !self.served.opts.sync
            && self.held.may_hold();
        if holdable {
            let mut held = self.held.held.lock();
            if held
                .as_ref()
                .is_some_and(|h| !h.continued_by(ino, fh, flags, offset, data.len()))
            {
                if let Some(h) = held.take() {
                    h.commit(&self.served, &self.held.counts);
                }
            }
            let waiting = self.poller.get().is_some_and(|p| p.request_waiting());
            if waiting || held.is_some() {
                if let Some(p) = self.poller.get() {
                    p.busy();
                }
                let h = held.get_or_insert_with(|| {
                    let serial = HELD_SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    Held {
                        ino,
                        fh,
                        flags,
                        uid: req.uid(),
                        gid: req.gid(),
                        offset,
                        data: Vec::with_capacity(HOLD_MAX),
                        replies: Vec::new(),
                        serial,
                    }
                });
                h.data.extend_from_slice(data);
                h.replies.push((reply, data.len() as u32));
                if !waiting || h.data.len() + HOLD_MIN > HOLD_MAX {
                    if let Some(h) = held.take() {
                        h.commit(&self.served, &self.held.counts);
                    }
                } else {
                    self.held.wake.notify_one();
                }
                return;
            }
        }
        let op = Op::Write {
            fh,
            offset,
            data,
            flags,
            kill_suidgid,
        };
        self.run(req, ino, op, reply);
    }

    fn flush(
        &mut self,
        req: &fuser::Request<'_>,
        ino: u64,
        _fh: u64,
        _lock_owner: u64,
        reply: ReplyEmpty,
    ) {
        self.run(req, ino, Op::Flush, reply);
    }

    fn release(
        &mut self,
        req: &fuser::Request<'_>,
        ino: u64,
        fh: u64,
        _flags: i32,
        _lock_owner: Option<u64>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.run(req, ino, Op::Release { fh }, reply);
    }

    fn fsync(
        &mut self,
        _req: &fuser::Request<'_>,
        _ino: u64,
        _fh: u64,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.fsync_later(reply);
    }

    fn opendir(&mut self, req: &fuser::Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        self.run(req, ino, Op::Opendir { flags }, reply);
    }

    fn readdir(
        &mut self,
        req: &fuser::Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        mut reply: ReplyDirectory,
    ) {
        self.busy();
        let add = &mut |e: &DirEntry, _: Option<&Attr>| {
            reply.add(
                e.ino,
                e.offset as i64,
                file_type(e.kind),
                OsStr::from_bytes(&e.name),
            )
        };
        let op = Op::Readdir {
            offset,
            plus: false,
            add,
        };
        match self.served.serve(request(req, ino, op)) {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn readdirplus(
        &mut self,
        req: &fuser::Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        mut reply: ReplyDirectoryPlus,
    ) {
        self.busy();
        let ttl = self.served.opts.ttl;
        let add = &mut |e: &DirEntry, a: Option<&Attr>| {
            // The table gives every entry its attributes when asked for them; without them
            // the listing would stop here.
            let Some(attr) = a.map(file_attr) else {
                return true;
            };
            reply.add(
                e.ino,
                e.offset as i64,
                OsStr::from_bytes(&e.name),
                &ttl,
                &attr,
                0,
            )
        };
        let op = Op::Readdir {
            offset,
            plus: true,
            add,
        };
        match self.served.serve(request(req, ino, op)) {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn releasedir(
        &mut self,
        req: &fuser::Request<'_>,
        ino: u64,
        _fh: u64,
        _flags: i32,
        reply: ReplyEmpty,
    ) {
        self.run(req, ino, Op::Releasedir, reply);
    }

    fn fsyncdir(
        &mut self,
        _req: &fuser::Request<'_>,
        _ino: u64,
        _fh: u64,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.fsync_later(reply);
    }

    fn statfs(&mut self, req: &fuser::Request<'_>, ino: u64, reply: ReplyStatfs) {
        self.run(req, ino, Op::Statfs, reply);
    }

    fn setxattr(
        &mut self,
        req: &fuser::Request<'_>,
        ino: u64,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let op = Op::Setxattr {
            name: name.as_bytes(),
            value,
            flags: flags as u32,
        };
        self.run(req, ino, op, reply);
    }

    fn getxattr(
        &mut self,
        req: &fuser::Request<'_>,
        ino: u64,
        name: &OsStr,
        size: u32,
        reply: ReplyXattr,
    ) {
        let name = name.as_bytes();
        self.run(req, ino, Op::Getxattr { name, size }, reply);
    }

    fn listxattr(&mut self, req: &fuser::Request<'_>, ino: u64, size: u32, reply: ReplyXattr) {
        self.run(req, ino, Op::Listxattr { size }, reply);
    }

    fn removexattr(&mut self, req: &fuser::Request<'_>, ino: u64, name: &OsStr, reply: ReplyEmpty) {
        let name = name.as_bytes();
        self.run(req, ino, Op::Removexattr { name }, reply);
    }

    fn access(&mut self, req: &fuser::Request<'_>, ino: u64, mask: i32, reply: ReplyEmpty) {
        let mask = mask as u32;
        self.run(req, ino, Op::Access { mask }, reply);
    }

    fn create(
        &mut self,
        req: &fuser::Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let name = name.as_bytes();
        self.run(req, parent, Op::Create { name, mode }, reply);
    }

    fn fallocate(
        &mut self,
        req: &fuser::Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        length: i64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let op = Op::Fallocate {
            offset,
            length,
            mode,
        };
        self.run(req, ino, op, reply);
    }

    fn lseek(
        &mut self,
        req: &fuser::Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        self.run(req, ino, Op::Lseek { offset, whence }, reply);
    }
}

/// Numbers the holdings of WRITEs (see [`Held::serial`]).
static HELD_SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A `fuser` reply that carries a table's answer to the kernel.
trait Send2Kernel: Send + 'static {
    /// Sends `answer` (`opts` give the time the kernel may cache names and attributes).
    fn send(self, opts: &ServeOptions, answer: Answer<Reply>);
}

/// The errno for a reply the table should not have given to the request: a bug, logged.
fn mismatch(r: &Reply) -> i32 {
    tracing::error!("internal error: the file system answered a request with {r:?}");
    libc::EIO
}

impl Send2Kernel for ReplyEntry {
    fn send(self, opts: &ServeOptions, answer: Answer<Reply>) {
        match answer {
            Ok(Reply::Entry(a)) => self.entry(&opts.ttl, &file_attr(&a), 0),
            Ok(r) => self.error(mismatch(&r)),
            Err(e) => self.error(e),
        }
    }
}

impl Send2Kernel for ReplyAttr {
    fn send(self, opts: &ServeOptions, answer: Answer<Reply>) {
        match answer {
            Ok(Reply::Attr(a)) => self.attr(&opts.ttl, &file_attr(&a)),
            Ok(r) => self.error(mismatch(&r)),
            Err(e) => self.error(e),
        }
    }
}

impl Send2Kernel for ReplyData {
    fn send(self, _: &ServeOptions, answer: Answer<Reply>) {
        match answer {
            Ok(Reply::Data(d)) => self.data(&d),
            Ok(r) => self.error(mismatch(&r)),
            Err(e) => self.error(e),
        }
    }
}

impl Send2Kernel for ReplyEmpty {
    fn send(self, _: &ServeOptions, answer: Answer<Reply>) {
        match answer {
            Ok(Reply::Empty) => self.ok(),
            Ok(r) => self.error(mismatch(&r)),
            Err(e) => self.error(e),
        }
    }
}

impl Send2Kernel for ReplyOpen {
    fn send(self, _: &ServeOptions, answer: Answer<Reply>) {
        match answer {
            Ok(Reply::Opened { fh, flags }) => self.opened(fh, flags),
            Ok(r) => self.error(mismatch(&r)),
            Err(e) => self.error(e),
        }
    }
}

impl Send2Kernel for ReplyWrite {
    fn send(self, _: &ServeOptions, answer: Answer<Reply>) {
        match answer {
            Ok(Reply::Written(n)) => self.written(n),
            Ok(r) => self.error(mismatch(&r)),
            Err(e) => self.error(e),
        }
    }
}

impl Send2Kernel for ReplyCreate {
    fn send(self, opts: &ServeOptions, answer: Answer<Reply>) {
        match answer {
            Ok(Reply::Created { attr, fh, flags }) => {
                self.created(&opts.ttl, &file_attr(&attr), 0, fh, flags)
            }
            Ok(r) => self.error(mismatch(&r)),
            Err(e) => self.error(e),
        }
    }
}

impl Send2Kernel for ReplyStatfs {
    fn send(self, _: &ServeOptions, answer: Answer<Reply>) {
        match answer {
            Ok(Reply::Statfs(s)) => self.statfs(
                s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, s.namelen, s.frsize,
            ),
            Ok(r) => self.error(mismatch(&r)),
            Err(e) => self.error(e),
        }
    }
}

impl Send2Kernel for ReplyXattr {
    fn send(self, _: &ServeOptions, answer: Answer<Reply>) {
        match answer {
            Ok(Reply::XattrSize(n)) => self.size(n),
            Ok(Reply::Data(d)) => self.data(&d),
            Ok(r) => self.error(mismatch(&r)),
            Err(e) => self.error(e),
        }
    }
}

impl Send2Kernel for ReplyLseek {
    fn send(self, _: &ServeOptions, answer: Answer<Reply>) {
        match answer {
            Ok(Reply::Offset(o)) => self.offset(o as i64),
            Ok(r) => self.error(mismatch(&r)),
            Err(e) => self.error(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u32 = 1 << 20;

    #[test]
    fn a_failed_commit_fails_every_held_write() {
        let lens = [MIB, MIB, 256 << 10, MIB];
        for e in [libc::EFBIG, libc::ENOSPC, libc::EROFS, libc::EIO] {
            let answers = held_answers(Err(e), lens.into_iter());
            assert_eq!(answers, vec![Err(e); lens.len()]);
        }
        // An answer that is not a write's is the table's bug: every WRITE still gets EIO.
        let answers = held_answers(Ok(Reply::Empty), lens.into_iter());
        assert_eq!(answers, vec![Err(libc::EIO); lens.len()]);
    }

    #[test]
    fn a_short_commit_answers_what_each_held_write_took_and_efbig_after() {
        let lens = [MIB, MIB, MIB, MIB];
        let all = 4 * MIB;
        let answers = held_answers(Ok(Reply::Written(all)), lens.into_iter());
        assert_eq!(answers, vec![Ok(MIB); 4]);
        // Stopped inside the second WRITE: it took part of its bytes, the rest nothing.
        let answers = held_answers(Ok(Reply::Written(MIB + 4096)), lens.into_iter());
        assert_eq!(
            answers,
            vec![Ok(MIB), Ok(4096), Err(libc::EFBIG), Err(libc::EFBIG)]
        );
        // Stopped at a WRITE's end: the next ones took nothing.
        let answers = held_answers(Ok(Reply::Written(2 * MIB)), lens.into_iter());
        assert_eq!(
            answers,
            vec![Ok(MIB), Ok(MIB), Err(libc::EFBIG), Err(libc::EFBIG)]
        );
    }
}
