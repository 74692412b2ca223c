//! [`Fs`]: a file system over a store. Every call that changes something is one operation
//! committed as one atomic write, in the order the calls finish, so after a crash the file
//! system is a prefix of the completed calls; [`Fs::fsync`] makes everything before it durable.

use crate::atime::AtimePolicy;
use crate::cache::MetaCache;
use crate::creds::Caller;
use crate::error::{FsError, FsResult};
use crate::kv::{Batch, Kv};
use crate::ops::{DirEntry, Op, SetAttr};
use crate::perm::{permit, Check, R, W, X};
use crate::schema::{
    check_super, decode_ino_key, encode_attr, encode_super, ino_key, Attr, Kind, Tables, Timespec,
    FIRST_COOKIE, NAME_MAX, ROOT_INO, SUPER_KEY,
};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;
use stitchdb::{Db, Durability};

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
    /// The caller holds on to inode numbers and says when it lets one go ([`Fs::forget`]),
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

/// What only the writer may touch: inode numbers to hand out, the open files, and the
/// deleted inodes the caller still holds.
struct Writer {
    next_ino: u64,
    open: HashMap<u64, u32>,
    /// The last attributes of deleted inodes not yet forgotten (only with
    /// [`FsOptions::keep_deleted`]); inode numbers are never reused within a mount.
    deleted: HashMap<u64, Attr>,
}

/// A file system in a store.
pub struct Fs {
    db: Db,
    tables: Tables,
    opts: FsOptions,
    /// Recent inode records and names. Every operation reads and commits through it
    /// (`op_with`); nothing else may write the file system's tables while it is
    /// mounted.
    cache: MetaCache,
    /// Held for each changing operation from its first read to its commit: operations are
    /// atomic and commit in the order they run.
    writer: Mutex<Writer>,
}

impl Fs {
    /// Opens the file system in `db`, creating it if the store holds none; unlinked files
    /// that were still open when the store was last closed (or crashed) are deleted.
    pub fn mount(db: Db, opts: FsOptions) -> FsResult<Fs> {
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
        let cache = MetaCache::new(vec![tables.names, tables.inodes]);
        let fs = Fs {
            db,
            tables,
            opts,
            cache,
            writer: Mutex::new(Writer {
                next_ino,
                open: HashMap::new(),
                deleted: HashMap::new(),
            }),
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
        let open = HashMap::new();
        let root = Caller::root();
        let mut op = self.op_with(&root, &open);
        for ino in orphans {
            op.purge(ino)?;
        }
        op.kv.commit(Durability::Sync)
    }

    /// The store. Reading it is safe; a write through it to the file system's tables would
    /// go around the metadata cache, which would then answer with what it replaced: the file
    /// system's tables change only through this handle's operations.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The file system's tables.
    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// Makes everything durable and closes the store.
    pub fn close(self) -> FsResult<()> {
        self.db.sync()?;
        self.db.close()?;
        Ok(())
    }

    fn op_with<'a>(&'a self, caller: &'a Caller, open: &'a HashMap<u64, u32>) -> Op<'a, Batch<'a>> {
        Op {
            kv: Batch::cached(&self.db, &self.cache),
            t: &self.tables,
            now: (self.opts.clock)(),
            file_now: self.opts.file_clock.as_ref().map(|clock| clock()),
            caller,
            open,
            deleted: Vec::new(),
        }
    }

    /// Runs a reading operation (no lock: each read sees one committed state).
    fn read_op<R>(
        &self,
        caller: &Caller,
        f: impl FnOnce(&mut Op<'_, Batch<'_>>) -> FsResult<R>,
    ) -> FsResult<R> {
        let open = HashMap::new();
        let mut op = self.op_with(caller, &open);
        f(&mut op)
    }

    /// Runs a read of `ino`'s contents (by root: the kernel checked the caller at open),
    /// then writes `ino`'s access time if [`FsOptions::atime`] says this read should. As
    /// Linux's `touch_atime`, failing to write it does not fail the read (a store that
    /// failed a write says so at the next one).
    fn read_noting_access<R>(
        &self,
        ino: u64,
        f: impl FnOnce(&mut Op<'_, Batch<'_>>) -> FsResult<R>,
    ) -> FsResult<R> {
        let root = Caller::root();
        let policy = &self.opts.atime;
        // Asked first without the writer lock, from what the read saw: most reads write
        // nothing (`relatime`), and they should not wait for writers to find that out. The
        // inode may be deleted between the two reads: the read still succeeded.
        let (r, due) = self.read_op(&root, |op| {
            let r = f(op)?;
            Ok((
                r,
                !self.opts.read_only && op.access_due(ino, policy).unwrap_or(false),
            ))
        })?;
        if due {
            let w = self.writer.lock();
            let mut op = self.op_with(&root, &w.open);
            // Committed `Async`: durable with the next commit that is (the log keeps the
            // order) or the next sync, so reads alone never have the log written and the
            // device flushed (`Ordered` would, every `ordered_flush_interval_ms` while
            // files are read). A crash may lose the newest access times, as ext4 keeps
            // them in memory until it writes the inode back.
            if op.note_access(ino, policy).is_ok() {
                let _ = op.kv.commit(Durability::Async);
            }
        }
        Ok(r)
    }

    /// Runs a changing operation and commits it; an error leaves nothing written.
    fn write_op<R>(
        &self,
        caller: &Caller,
        f: impl FnOnce(&mut Op<'_, Batch<'_>>, &mut u64) -> FsResult<R>,
    ) -> FsResult<R> {
        self.write_op_locked(&mut self.writer.lock(), caller, f)
    }

    /// [`write_op`](Self::write_op) with the writer lock already held.
    fn write_op_locked<R>(
        &self,
        w: &mut Writer,
        caller: &Caller,
        f: impl FnOnce(&mut Op<'_, Batch<'_>>, &mut u64) -> FsResult<R>,
    ) -> FsResult<R> {
        let Writer {
            next_ino,
            open,
            deleted,
        } = w;
        let mut op = self.op_with(caller, open);
        let mut ino = *next_ino;
        let r = f(&mut op, &mut ino)?;
        self.commit(op, deleted)?;
        *next_ino = ino;
        Ok(r)
    }

    /// Commits `op`; with [`FsOptions::keep_deleted`], remembers the inodes it deleted.
    fn commit(&self, op: Op<'_, Batch<'_>>, deleted: &mut HashMap<u64, Attr>) -> FsResult<()> {
        op.kv.commit(self.opts.durability)?;
        if self.opts.keep_deleted {
            deleted.extend(op.deleted.into_iter().map(|a| (a.ino, a)));
        }
        Ok(())
    }

    /// The attributes of the file `name` in directory `parent`.
    pub fn lookup(&self, caller: &Caller, parent: u64, name: &[u8]) -> FsResult<Attr> {
        self.read_op(caller, |op| op.lookup(parent, name))
    }

    /// The attributes of `ino`.
    pub fn getattr(&self, ino: u64) -> FsResult<Attr> {
        let r = self.read_op(&Caller::root(), |op| op.attr(ino));
        if let Err(FsError::Errno(libc::ENOENT)) = r {
            if let Some(a) = self.writer.lock().deleted.get(&ino) {
                return Ok(a.clone());
            }
        }
        r
    }

    /// Changes attributes (chmod, chown, truncate, utimens).
    pub fn setattr(&self, caller: &Caller, ino: u64, s: &SetAttr) -> FsResult<Attr> {
        let mut w = self.writer.lock();
        let Writer { open, deleted, .. } = &mut *w;
        if let Some(ghost) = deleted.get_mut(&ino) {
            // Deleted but not yet forgotten: the kernel sets the change time of every file
            // it unlinks, after the unlink.
            return self.setattr_deleted(caller, open, ghost, s);
        }
        self.write_op_locked(&mut w, caller, |op, _| op.setattr(ino, s))
    }

    /// `setattr` of a deleted inode not yet forgotten: the same checks and changes, on its
    /// attributes in memory (nothing of it is left in the store to change).
    fn setattr_deleted(
        &self,
        caller: &Caller,
        open: &HashMap<u64, u32>,
        ghost: &mut Attr,
        s: &SetAttr,
    ) -> FsResult<Attr> {
        let ino = ghost.ino;
        // The operation runs against its own uncommitted write of the attributes, and its
        // writes are dropped with it.
        let mut op = self.op_with(caller, open);
        op.kv
            .put(self.tables.inodes, &ino_key(ino), encode_attr(ghost));
        *ghost = op.setattr(ino, s)?;
        Ok(ghost.clone())
    }

    /// The caller no longer holds inode `ino` (the kernel's `forget`): a deleted inode is
    /// gone for good.
    pub fn forget(&self, ino: u64) {
        let mut w = self.writer.lock();
        if !w.deleted.is_empty() {
            w.deleted.remove(&ino);
        }
    }

    /// Makes a file, device node, FIFO or socket (`mode` holds kind and permissions).
    pub fn mknod(
        &self,
        caller: &Caller,
        parent: u64,
        name: &[u8],
        mode: u32,
        rdev: u32,
    ) -> FsResult<Attr> {
        let kind = Kind::from_mode(mode).unwrap_or(Kind::File);
        if kind == Kind::Dir || kind == Kind::Symlink {
            return Err(FsError::Errno(libc::EINVAL));
        }
        self.make(caller, parent, name, kind, mode, rdev)
    }

    /// Makes a directory.
    pub fn mkdir(&self, caller: &Caller, parent: u64, name: &[u8], mode: u32) -> FsResult<Attr> {
        self.make(caller, parent, name, Kind::Dir, mode, 0)
    }

    fn make(
        &self,
        caller: &Caller,
        parent: u64,
        name: &[u8],
        kind: Kind,
        mode: u32,
        rdev: u32,
    ) -> FsResult<Attr> {
        self.write_op(caller, |op, ino| {
            let a = op.make(parent, name, kind, mode, rdev, *ino)?;
            *ino += 1;
            Ok(a)
        })
    }

    /// `create`: makes a regular file `name` (`EEXIST` if the name is taken) and opens it.
    pub fn create(&self, caller: &Caller, parent: u64, name: &[u8], mode: u32) -> FsResult<Attr> {
        let mut w = self.writer.lock();
        let Writer { next_ino, open, .. } = &mut *w;
        let mut op = self.op_with(caller, open);
        let a = op.make(parent, name, Kind::File, mode, 0, *next_ino)?;
        op.kv.commit(self.opts.durability)?;
        *next_ino += 1;
        *open.entry(a.ino).or_insert(0) += 1;
        Ok(a)
    }

    /// Makes a symbolic link.
    pub fn symlink(
        &self,
        caller: &Caller,
        parent: u64,
        name: &[u8],
        target: &[u8],
    ) -> FsResult<Attr> {
        self.write_op(caller, |op, ino| {
            let a = op.symlink(parent, name, target, *ino)?;
            *ino += 1;
            Ok(a)
        })
    }

    /// A symbolic link's target.
    pub fn readlink(&self, ino: u64) -> FsResult<Vec<u8>> {
        self.read_noting_access(ino, |op| op.readlink(ino))
    }

    /// Removes a name of a non-directory.
    pub fn unlink(&self, caller: &Caller, parent: u64, name: &[u8]) -> FsResult<()> {
        self.write_op(caller, |op, _| op.unlink(parent, name))
    }

    /// Removes an empty directory.
    pub fn rmdir(&self, caller: &Caller, parent: u64, name: &[u8]) -> FsResult<()> {
        self.write_op(caller, |op, _| op.rmdir(parent, name))
    }

    /// Renames (flags: `RENAME_NOREPLACE`, `RENAME_EXCHANGE`).
    pub fn rename(
        &self,
        caller: &Caller,
        parent: u64,
        name: &[u8],
        new_parent: u64,
        new_name: &[u8],
        flags: u32,
    ) -> FsResult<()> {
        self.write_op(caller, |op, _| {
            op.rename(parent, name, new_parent, new_name, flags)
        })
    }

    /// A new name for a non-directory.
    pub fn link(&self, caller: &Caller, ino: u64, parent: u64, name: &[u8]) -> FsResult<Attr> {
        self.write_op(caller, |op, _| op.link(ino, parent, name))
    }

    /// Opens `ino` with `open(2)` flags (the access they ask for is checked against its
    /// permissions, as Linux's `may_open` checks it); the file's data stays while it is open,
    /// even after its last name is gone.
    pub fn open(&self, caller: &Caller, ino: u64, flags: i32) -> FsResult<Attr> {
        let mut w = self.writer.lock();
        let a = self.read_op(caller, |op| op.attr(ino))?;
        let mask = open_mask(flags);
        if a.kind == Kind::Dir && mask & W != 0 {
            return Err(FsError::Errno(libc::EISDIR));
        }
        permit(caller, Check::Access(&a, mask))?;
        *w.open.entry(ino).or_insert(0) += 1;
        Ok(a)
    }

    /// Closes one open of `ino`: its last close deletes it if it has no name left.
    pub fn release(&self, ino: u64) -> FsResult<()> {
        let mut w = self.writer.lock();
        let Writer { open, deleted, .. } = &mut *w;
        let last = match open.get_mut(&ino) {
            Some(n) if *n > 1 => {
                *n -= 1;
                false
            }
            Some(_) => {
                open.remove(&ino);
                true
            }
            None => false,
        };
        if !last {
            return Ok(());
        }
        let root = Caller::root();
        let mut op = self.op_with(&root, open);
        match op.attr(ino) {
            Ok(a) if a.nlink == 0 => {
                op.purge(ino)?;
                op.deleted.push(a);
                self.commit(op, deleted)
            }
            Ok(_) | Err(FsError::Errno(libc::ENOENT)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Files open now (inodes and their open counts).
    pub fn open_files(&self) -> Vec<(u64, u32)> {
        self.writer
            .lock()
            .open
            .iter()
            .map(|(&i, &n)| (i, n))
            .collect()
    }

    /// Reads up to `len` bytes at `offset`.
    pub fn read(&self, ino: u64, offset: u64, len: usize) -> FsResult<Vec<u8>> {
        self.read_noting_access(ino, |op| op.read(ino, offset, len))
    }

    /// Writes `data` at `offset`; returns the bytes written.
    pub fn write(&self, caller: &Caller, ino: u64, offset: u64, data: &[u8]) -> FsResult<usize> {
        self.write_op(caller, |op, _| op.write(ino, offset, data))
    }

    /// `fallocate`: mode 0 extends the size, `FALLOC_FL_KEEP_SIZE` alone changes nothing
    /// (the store allocates when written), `FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE` zeros
    /// a range, `FALLOC_FL_ZERO_RANGE` zeros it and extends the size unless with
    /// `FALLOC_FL_KEEP_SIZE`; other modes are `EOPNOTSUPP` (FUSE passes no others).
    pub fn fallocate(
        &self,
        caller: &Caller,
        ino: u64,
        offset: u64,
        len: u64,
        mode: i32,
    ) -> FsResult<()> {
        if len == 0 {
            return Err(FsError::Errno(libc::EINVAL));
        }
        match mode {
            0 => self.write_op(caller, |op, _| op.allocate(ino, offset, len)),
            libc::FALLOC_FL_KEEP_SIZE => self.write_op(caller, |op, _| op.attr(ino).map(|_| ())),
            m if m == libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE => {
                self.write_op(caller, |op, _| op.punch_hole(ino, offset, len))
            }
            m if m & !libc::FALLOC_FL_KEEP_SIZE == libc::FALLOC_FL_ZERO_RANGE => {
                let keep_size = m & libc::FALLOC_FL_KEEP_SIZE != 0;
                self.write_op(caller, |op, _| op.zero_range(ino, offset, len, keep_size))
            }
            _ => Err(FsError::Errno(libc::EOPNOTSUPP)),
        }
    }

    /// `lseek` with `SEEK_DATA` (`data`) or `SEEK_HOLE`.
    pub fn seek(&self, ino: u64, offset: u64, data: bool) -> FsResult<u64> {
        self.read_op(&Caller::root(), |op| op.seek(ino, offset, data))
    }

    /// Up to `limit` entries of a directory after `offset` (see [`Op::readdir`]).
    pub fn readdir(&self, ino: u64, offset: u64, limit: usize) -> FsResult<Vec<DirEntry>> {
        self.read_noting_access(ino, |op| op.readdir(ino, offset, limit))
    }

    /// Sets an extended attribute.
    pub fn setxattr(
        &self,
        caller: &Caller,
        ino: u64,
        name: &[u8],
        value: &[u8],
        flags: u32,
    ) -> FsResult<()> {
        self.write_op(caller, |op, _| op.setxattr(ino, name, value, flags))
    }

    /// An extended attribute's value.
    pub fn getxattr(&self, caller: &Caller, ino: u64, name: &[u8]) -> FsResult<Vec<u8>> {
        self.read_op(caller, |op| op.getxattr(ino, name))
    }

    /// The names of the extended attributes.
    pub fn listxattr(&self, caller: &Caller, ino: u64) -> FsResult<Vec<Vec<u8>>> {
        self.read_op(caller, |op| op.listxattr(ino))
    }

    /// Removes an extended attribute.
    pub fn removexattr(&self, caller: &Caller, ino: u64, name: &[u8]) -> FsResult<()> {
        self.write_op(caller, |op, _| op.removexattr(ino, name))
    }

    /// Whether `caller` may access `ino` as `access(2)`'s mask asks (`F_OK` is 0).
    pub fn access(&self, caller: &Caller, ino: u64, mask: u32) -> FsResult<()> {
        let a = self.getattr(ino)?;
        permit(caller, Check::Access(&a, mask & (R | W | X)))
    }

    /// What `statfs` reports of the file system itself.
    pub fn statfs(&self) -> FsStat {
        FsStat {
            used_bytes: self.db.stats().zones.live_bytes,
            inodes: self.writer.lock().next_ino - 1,
            name_max: NAME_MAX as u32,
        }
    }

    /// `fsync`, `fdatasync`, `syncfs`: every completed operation is durable when it returns
    /// (the log is one sequence, so a file's changes cannot be made durable without those
    /// before them).
    pub fn fsync(&self) -> FsResult<()> {
        self.db.sync()?;
        Ok(())
    }
}

/// `__FMODE_EXEC`: the kernel adds it to the open flags of a file it opens to execute.
const FMODE_EXEC: i32 = 0x20;

/// The access `open(2)` flags ask for: read, write or both; write too to truncate; to execute,
/// execute alone (a program may be executable and unreadable).
fn open_mask(flags: i32) -> u32 {
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
    b.put(t.inodes, &ino_key(ROOT_INO), encode_attr(&root));
    b.put(t.sup, SUPER_KEY, encode_super());
    b.commit(Durability::Sync)
}
