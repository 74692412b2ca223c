//! [`Fs`]: a file system over a store. Every call that changes something is one operation
//! committed as one atomic write, in the order the calls finish, so after a crash the file
//! system is a prefix of the completed calls; [`FileTree::fsync`](crate::FileTree::fsync) makes everything before it durable.

use crate::atime::AtimePolicy;
use crate::cache::MetaCache;
use crate::creds::Caller;
use crate::error::{FsError, FsResult};
use crate::handles::Handles;
use crate::kv::{Batch, Kv};
use crate::observe::{Observer, OutsideChange};
use crate::ops::Op;
use crate::perm::{R, W, X};
use crate::schema::{
    check_super, decode_ino_key, encode_attr, encode_super, ino_key, Attr, Kind, Tables, Timespec,
    FIRST_COOKIE, NAME_MAX, ROOT_INO, SUPER_KEY,
};
use parking_lot::Mutex;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use stitchdb::{Db, Durability, ObserverGuard};

/// Where an operation's time stamps come from.
pub type Clock = Arc<dyn Fn() -> Timespec + Send + Sync>;

/// The system clock.
pub fn system_clock() -> Clock {
    Arc::new(|| {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Timespec {
            secs: d.as_secs() as i64,
            nanos: d.subsec_nanos(),
        }
    })
}

/// How a file system is opened.
#[derive(Clone)]
pub struct FsOptions {
    /// How each operation's commit is written: `Ordered` (the default) makes it durable
    /// within the store's `ordered_flush_interval_ms`, never out of order.
    pub durability: Durability,
    /// Owner, group and permission bits of the root directory of a new file system.
    pub root_owner: (u32, u32, u32),
    /// Where time stamps come from.
    pub clock: Clock,
    /// The caller's clock, when it keeps regular files' modification and change times
    /// itself and sends them (FUSE's write-back cache): new regular files are stamped from it,
    /// so that the times the kernel sets later never go back before them, and writes leave
    /// the times as they are, so that the file system's times stay the kernel's (which its
    /// write-back of times, made in the name of whoever caused it, is checked against: see
    /// `SetAttr::ctime`). `None`: `clock` stamps everything.
    pub file_clock: Option<Clock>,
    /// Mount without writing anything (the store may be open read-only): the file system
    /// must exist, and orphans are left for the next read-write mount.
    pub read_only: bool,
    /// The caller holds on to inode numbers and says when it lets one go ([`FileTree::forget`](crate::FileTree::forget)),
    /// as the kernel does over FUSE: an inode deleted (last name removed, last open closed)
    /// then still answers `getattr` and `setattr`, from memory, until forgotten, as a
    /// deleted inode the kernel still holds does on ext4. (The kernel writes a file's times
    /// back after its last close, and a failed write-back fails `syncfs`.)
    pub keep_deleted: bool,
    /// Which reads write an access time (`relatime` by default, as Linux mounts).
    pub atime: AtimePolicy,
}

impl Default for FsOptions {
    fn default() -> Self {
        FsOptions {
            durability: Durability::Ordered,
            root_owner: (0, 0, 0o755),
            clock: system_clock(),
            file_clock: None,
            read_only: false,
            keep_deleted: false,
            atime: AtimePolicy::default(),
        }
    }
}

/// What `statfs` reports of the file system itself (the adapter adds the device's space).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsStat {
    /// Live bytes in the store.
    pub used_bytes: u64,
    /// Inode numbers handed out so far (an upper bound on the inodes in use).
    pub inodes: u64,
    /// The longest name.
    pub name_max: u32,
}

/// A file system in a store: its mainline tree, where every changing operation is one
/// commit (the operations are [`FileTree`](crate::FileTree)'s methods, `mainline`).
pub struct Fs {
    /// Shared with whoever else serves the store (a host's other surfaces).
    pub(crate) db: Arc<Db>,
    tables: Tables,
    pub(crate) opts: FsOptions,
    /// Recent inode records and names. Every mainline operation reads through it; every
    /// commit of the store, whoever makes it, updates it (`observe`).
    pub(crate) cache: Arc<MetaCache>,
    observer: Arc<Observer>,
    /// Keeps `observer` registered with the store while mounted.
    _observing: ObserverGuard,
    /// Held by each changing operation of the mainline from its first read to its commit
    /// (not while the commit is made durable): operations are atomic and commit in the
    /// order they run.
    pub(crate) writer: Mutex<()>,
    /// The mainline's open files and deleted inodes still held.
    pub(crate) handles: Mutex<Handles>,
    /// The next inode number to hand out, to the mainline and every transaction alike (never
    /// reused within a mount; an operation that fails or a transaction that aborts leaves a
    /// gap).
    next_ino: AtomicU64,
}

impl Fs {
    /// Opens the file system in `db` (a `Db`, or an `Arc<Db>` shared with others serving the
    /// store), creating it if the store holds none; unlinked files that were still open when
    /// the store was last closed (or crashed) are deleted.
    pub fn mount(db: impl Into<Arc<Db>>, opts: FsOptions) -> FsResult<Fs> {
        let db: Arc<Db> = db.into();
        let tables = if opts.read_only {
            Tables::find(&db)?.ok_or_else(|| {
                FsError::NoFileSystem("a first read-write mount creates it".into())
            })?
        } else {
            Tables::open_or_create(&db)?
        };
        match db.get(tables.sup, SUPER_KEY)? {
            Some(v) => check_super(&v)?,
            None if opts.read_only => {
                return Err(FsError::NoFileSystem(
                    "its superblock record is missing".into(),
                ));
            }
            None => create(&db, &tables, &opts)?,
        }
        let next_ino = match db
            .range_rev(tables.inodes, Bound::Unbounded, Bound::Unbounded)?
            .next()
        {
            Some(r) => decode_ino_key(&r?.0)? + 1,
            None => ROOT_INO + 1,
        };
        let cache = Arc::new(MetaCache::new(vec![tables.names, tables.inodes]));
        let observer = Arc::new(Observer::new(cache.clone(), tables));
        let observing = db.observe_commits(observer.clone());
        let fs = Fs {
            db,
            tables,
            opts,
            cache,
            observer,
            _observing: observing,
            writer: Mutex::new(()),
            handles: Mutex::new(Handles::default()),
            next_ino: AtomicU64::new(next_ino),
        };
        if !fs.opts.read_only {
            match fs.purge_orphans() {
                // A full store refuses even deletes once a flush of them would take the room
                // opening needs: the files stay unlinked (no name reaches them) and go at a
                // later mount.
                Err(e) if e.errno() == libc::ENOSPC => {
                    tracing::warn!(
                        "unlinked files still open at the last close are kept for now: {e}"
                    );
                }
                r => r?,
            }
        }
        Ok(fs)
    }

    fn purge_orphans(&self) -> FsResult<()> {
        let orphans: Vec<u64> = self
            .db
            .scan_prefix(self.tables.orphans, b"")?
            .map(|r| {
                r.map_err(FsError::from)
                    .and_then(|(k, _)| decode_ino_key(&k))
            })
            .collect::<FsResult<_>>()?;
        if orphans.is_empty() {
            return Ok(());
        }
        let root = Caller::root();
        let mut batch = Batch::cached(&self.db, &self.cache);
        let mut op = self.op(&root, &mut batch, &|_| false);
        for ino in orphans {
            op.purge(ino)?;
        }
        batch.commit(Durability::Sync)
    }

    /// The store. Records written through it, to any table, keep the file system right (its
    /// metadata cache hears of every commit); writes to the file system's own tables must
    /// keep its invariants (`check_fs`).
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Calls `f` after every commit that changes the file system's tables other than this
    /// handle's own mainline operations (a transaction's commit, a write through the record
    /// API or a server), with what it changed. `f` runs under the store's writer lock, so it
    /// must not block nor touch the store: hand the changes to another thread (the FUSE
    /// adapter queues the kernel's cache invalidations). A later call replaces `f`.
    pub fn on_outside_change(&self, f: OutsideChange) {
        self.observer.on_outside_change(f);
    }

    /// The file system's tables.
    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// The options it was mounted with.
    pub fn options(&self) -> &FsOptions {
        &self.opts
    }

    /// Makes everything durable and closes the store, or, if others still share it, only
    /// makes what this file system wrote durable (the last of them closes it).
    pub fn close(self) -> FsResult<()> {
        match Arc::try_unwrap(self.db) {
            // Closing makes everything durable first.
            Ok(db) => db.close()?,
            // Wrote nothing (and the store may be read-only, which refuses a sync).
            Err(_) if self.opts.read_only => {}
            Err(db) => db.sync()?,
        }
        Ok(())
    }

    /// A fresh inode number.
    pub(crate) fn new_ino(&self) -> u64 {
        self.next_ino.fetch_add(1, Ordering::Relaxed)
    }

    /// An operation by `caller` over `kv`, stamped now.
    pub(crate) fn op<'a, K: Kv>(
        &'a self,
        caller: &'a Caller,
        kv: K,
        open: &'a dyn Fn(u64) -> bool,
    ) -> Op<'a, K> {
        Op {
            kv,
            t: &self.tables,
            now: (self.opts.clock)(),
            file_now: self.opts.file_clock.as_ref().map(|clock| clock()),
            caller,
            open,
            deleted: Vec::new(),
        }
    }

    /// What `statfs` reports of the file system itself.
    pub(crate) fn stat(&self) -> FsStat {
        FsStat {
            used_bytes: self.db.stats().zones.live_bytes,
            inodes: self.next_ino.load(Ordering::Relaxed) - 1,
            name_max: NAME_MAX as u32,
        }
    }

    /// Whether `ino` is open on the mainline.
    pub(crate) fn open_here(&self, ino: u64) -> bool {
        self.handles.lock().is_open(ino)
    }
}

/// `__FMODE_EXEC`: the kernel adds it to the open flags of a file it opens to execute.
const FMODE_EXEC: i32 = 0x20;

/// The access `open(2)` flags ask for: read, write or both; write too to truncate; to execute,
/// execute alone (a program may be executable and unreadable).
pub(crate) fn open_mask(flags: i32) -> u32 {
    if flags & FMODE_EXEC != 0 {
        return X;
    }
    let mask = match flags & libc::O_ACCMODE {
        libc::O_RDONLY => R,
        libc::O_WRONLY => W,
        _ => R | W,
    };
    if flags & libc::O_TRUNC != 0 {
        mask | W
    } else {
        mask
    }
}

/// Writes a new file system's superblock and root directory (durably).
fn create(db: &Db, t: &Tables, opts: &FsOptions) -> FsResult<()> {
    let now = (opts.clock)();
    let (uid, gid, perm) = opts.root_owner;
    let root = Attr {
        ino: ROOT_INO,
        kind: Kind::Dir,
        perm: perm & 0o7777,
        uid,
        gid,
        nlink: 2,
        size: 0,
        rdev: 0,
        atime: now,
        mtime: now,
        ctime: now,
        crtime: now,
        parent: ROOT_INO,
        next_cookie: FIRST_COOKIE,
        no_xattrs: true,
    };
    let mut b = Batch::new(db);
    b.put(t.inodes, &ino_key(ROOT_INO), encode_attr(&root))?;
    b.put(t.sup, SUPER_KEY, encode_super())?;
    b.commit(Durability::Sync)
}
