//! [`Served`]: what the FUSE requests do to the file system, apart from how they arrive and
//! how their answers travel. The `fuser` session (`adapter`) and the io_uring queues
//! (`uring`) both serve requests through it.

use crate::adapter::AdapterOptions;
use crate::bdi::BdiSettings;
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use stitchdb_fs::{Caller, DirEntry, Fs, FsError, BLOCK_SIZE};

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

/// A request to serve on a worker thread.
pub type Job = Box<dyn FnOnce() + Send>;

/// A request's outcome: its answer, or the errno the kernel gets.
pub type Answer<T> = Result<T, i32>;

/// The file system as both transports serve it.
pub struct Served {
    pub fs: Arc<Fs>,
    pub opts: AdapterOptions,
    pub workers: Workers,
    /// Backing-device settings to write once the kernel has taken the INIT reply, which sets
    /// the readahead again: on the first request after it (see [`Served::set_bdi`]).
    bdi: Mutex<Option<(BdiSettings, PathBuf)>>,
    bdi_pending: AtomicBool,
}

/// `statfs`'s answer, in `struct statfs`'s terms.
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

/// A getxattr or listxattr answer: the size when the caller asked for it (size 0), else the
/// bytes.
pub enum Xattr<'a> {
    Size(u32),
    Data(&'a [u8]),
}

impl Served {
    pub fn new(fs: Arc<Fs>, opts: AdapterOptions) -> Served {
        Served {
            fs,
            opts,
            workers: Workers::start(WORKERS),
            bdi: Mutex::new(None),
            bdi_pending: AtomicBool::new(false),
        }
    }

    /// Writes `settings` into the backing device of the mount at `mountpoint` (canonical)
    /// when the first request after INIT comes.
    pub fn set_bdi(&self, settings: BdiSettings, mountpoint: PathBuf) {
        *self.bdi.lock() = Some((settings, mountpoint));
        self.bdi_pending.store(true, Ordering::Release);
    }

    /// At the start of every request: the first writes the backing-device settings.
    pub fn request_started(&self) {
        if self.bdi_pending.load(Ordering::Acquire) {
            if let Some((settings, mountpoint)) = self.bdi.lock().take() {
                settings.apply(&mountpoint);
            }
            self.bdi_pending.store(false, Ordering::Release);
        }
    }

    /// Where a WRITE lands: with the write-back cache the kernel places appends itself;
    /// without it, `O_APPEND` writes go at the end.
    pub fn write_offset(&self, ino: u64, offset: i64, open_flags: i32) -> Answer<u64> {
        let offset = u64::try_from(offset).map_err(|_| libc::EINVAL)?;
        if !self.opts.writeback_cache && open_flags & libc::O_APPEND != 0 {
            return self.fs.getattr(ino).map(|a| a.size).map_err(|e| errno(&e));
        }
        Ok(offset)
    }

    /// OPENDIR: a directory the caller may read (and write, if it asks).
    pub fn opendir(&self, caller: &Caller, ino: u64, flags: i32) -> Answer<()> {
        let a = self.fs.getattr(ino).map_err(|e| errno(&e))?;
        if a.kind != stitchdb_fs::Kind::Dir {
            return Err(libc::ENOTDIR);
        }
        let mask = match flags & libc::O_ACCMODE {
            libc::O_RDONLY => stitchdb_fs::R,
            _ => stitchdb_fs::R | stitchdb_fs::W,
        };
        self.fs.access(caller, a.ino, mask).map_err(|e| errno(&e))
    }

    /// STATFS: the store grows into its device's free space.
    pub fn statfs(&self) -> Statfs {
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
    pub fn lseek(&self, ino: u64, offset: i64, whence: i32) -> Answer<u64> {
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
        self.fs.seek(ino, offset, data).map_err(|e| errno(&e))
    }

    /// Hands the entries of directory `ino` from `offset` on to `add`, a batch at a time,
    /// until the directory ends or `add` answers that the kernel's reply buffer is full.
    pub fn entries_from(
        &self,
        ino: u64,
        offset: i64,
        mut add: impl FnMut(DirEntry) -> Result<bool, FsError>,
    ) -> Answer<()> {
        let mut offset = offset.max(0) as u64;
        loop {
            let batch = self
                .fs
                .readdir(ino, offset, READDIR_BATCH)
                .map_err(|e| errno(&e))?;
            if batch.is_empty() {
                return Ok(());
            }
            for entry in batch {
                let next = entry.offset;
                if add(entry).map_err(|e| errno(&e))? {
                    return Ok(());
                }
                offset = next;
            }
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

/// A LISTXATTR answer's bytes: each name followed by a NUL.
pub fn xattr_list(names: Vec<Vec<u8>>) -> Vec<u8> {
    let mut v = Vec::new();
    for n in names {
        v.extend_from_slice(&n);
        v.push(0);
    }
    v
}

/// Answers a getxattr or listxattr of `v` into a buffer of `size` bytes: the size when asked
/// for it (size 0), `ERANGE` when the caller's buffer is too small.
pub fn xattr_answer(v: &[u8], size: u32) -> Answer<Xattr<'_>> {
    if size == 0 {
        Ok(Xattr::Size(v.len() as u32))
    } else if v.len() > size as usize {
        Err(libc::ERANGE)
    } else {
        Ok(Xattr::Data(v))
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

/// The credentials of a request: its uid and gid; the thread's supplementary groups and
/// capabilities are read from /proc when a decision needs them.
pub fn caller(uid: u32, gid: u32, pid: u32) -> Caller {
    Caller::thread(uid, gid, pid)
}
