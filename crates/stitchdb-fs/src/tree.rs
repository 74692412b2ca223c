//! One operation surface over every kind of tree: [`FileTree`]. The mainline ([`Fs`]: one
//! commit per operation), a transaction's private view ([`crate::FsTransaction`]) and a
//! named snapshot's read-only tree ([`crate::SnapshotTree`]) differ only in how they run an
//! operation ([`FileTree::run`]) and where they keep their open files
//! ([`FileTree::handles`]); the operations themselves are this trait's provided methods,
//! written once. The trait is object-safe, so a caller (the FUSE adapter) can serve
//! `&dyn FileTree` whatever the view.

use crate::creds::Caller;
use crate::error::{FsError, FsResult};
use crate::fs::{open_mask, Fs, FsStat};
use crate::handles::Handles;
use crate::kv::Kv;
use crate::ops::{DirEntry, Op, SetAttr};
use crate::perm::{permit, Check, R, W, X};
use crate::schema::{encode_attr, ino_key, Attr, Kind};
use parking_lot::Mutex;
use std::cell::Cell;

/// How an operation runs on a tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Run {
    /// It only reads, and need not be ordered with changes (each read sees one committed
    /// state of the tree).
    Read,
    /// It writes nothing but must not interleave with changes (`open` counts an open of the
    /// inode it read, which an `unlink` running meanwhile would not see).
    Ordered,
    /// It may write: its writes are committed (the mainline) or kept in the transaction as
    /// one step; an error leaves nothing written. A read-only tree fails it with `EROFS`.
    Change,
    /// The access time a read just earned: written on the mainline only, and its failure is
    /// not the read's. A transaction does not write access times (every read of a file would
    /// then write its inode and conflict with any change of it); a snapshot cannot.
    NoteAccess,
}

/// An operation as [`FileTree::run`] takes it: it runs once, over the tree's reads and
/// writes.
pub type OpFn<'f> = dyn FnMut(&mut Op<'_, &mut dyn Kv>) -> FsResult<()> + 'f;

/// A tree of files: the mainline, a transaction's view, or a snapshot. Every operation is a
/// provided method over [`run`](Self::run).
pub trait FileTree: Send + Sync {
    /// The mounted file system this tree is a view of (its tables, options and inode
    /// numbers).
    fn fs(&self) -> &Fs;

    /// This tree's open files (an inode open in a transaction is counted there, not on the
    /// mainline) and deleted inodes the caller still holds.
    fn handles(&self) -> &Mutex<Handles>;

    /// Runs `f` once as one operation of this tree, as `how` says, by `caller`.
    fn run(&self, caller: &Caller, how: Run, f: &mut OpFn<'_>) -> FsResult<()>;

    /// `fsync`, `fdatasync`, `syncfs`: on the mainline every completed operation is durable
    /// when it returns; a transaction's writes become durable with its commit, a snapshot's
    /// are.
    fn fsync(&self) -> FsResult<()>;

    /// The attributes of the file `name` in directory `parent`.
    fn lookup(&self, caller: &Caller, parent: u64, name: &[u8]) -> FsResult<Attr> {
        call(self, caller, Run::Read, |op| op.lookup(parent, name))
    }

    /// The attributes of `ino`.
    fn getattr(&self, ino: u64) -> FsResult<Attr> {
        let r = call(self, &Caller::root(), Run::Read, |op| op.attr(ino));
        if let Err(FsError::Errno(libc::ENOENT)) = r {
            if let Some(a) = self.handles().lock().deleted.get(&ino) {
                return Ok(a.clone());
            }
        }
        r
    }

    /// Changes attributes (chmod, chown, truncate, utimens).
    fn setattr(&self, caller: &Caller, ino: u64, s: &SetAttr) -> FsResult<Attr> {
        let ghost = self.handles().lock().deleted.get(&ino).cloned();
        let Some(ghost) = ghost else {
            return call(self, caller, Run::Change, |op| op.setattr(ino, s));
        };
        // Deleted but not yet forgotten (the kernel sets the change time of every file it
        // unlinks, after the unlink): the same checks and changes, on its attributes in
        // memory. The operation runs against its own write of them, which is dropped with it
        // (a read runs nothing it writes).
        let t = self.fs().tables().inodes;
        let a = call(self, caller, Run::Read, |op| {
            op.kv.put(t, &ino_key(ino), encode_attr(&ghost))?;
            op.setattr(ino, s)
        })?;
        if let Some(g) = self.handles().lock().deleted.get_mut(&ino) {
            *g = a.clone();
        }
        Ok(a)
    }

    /// The caller no longer holds inode `ino` (the kernel's `forget`): a deleted inode is
    /// gone for good.
    fn forget(&self, ino: u64) {
        let mut h = self.handles().lock();
        if !h.deleted.is_empty() {
            h.deleted.remove(&ino);
        }
    }

    /// Makes a file, device node, FIFO or socket (`mode` holds kind and permissions).
    fn mknod(
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
        let fs = self.fs();
        call(self, caller, Run::Change, |op| {
            op.make(parent, name, kind, mode, rdev, &|| fs.new_ino())
        })
    }

    /// Makes a directory.
    fn mkdir(&self, caller: &Caller, parent: u64, name: &[u8], mode: u32) -> FsResult<Attr> {
        let fs = self.fs();
        call(self, caller, Run::Change, |op| {
            op.make(parent, name, Kind::Dir, mode, 0, &|| fs.new_ino())
        })
    }

    /// `create`: makes a regular file `name` (`EEXIST` if the name is taken) and opens it.
    fn create(&self, caller: &Caller, parent: u64, name: &[u8], mode: u32) -> FsResult<Attr> {
        let fs = self.fs();
        // Counted open inside the operation, so that no change runs between its commit and
        // the count; taken back if the commit fails.
        let counted = Cell::new(None);
        let r = call(self, caller, Run::Change, |op| {
            let a = op.make(parent, name, Kind::File, mode, 0, &|| fs.new_ino())?;
            self.handles().lock().opened(a.ino);
            counted.set(Some(a.ino));
            Ok(a)
        });
        if let (Err(_), Some(ino)) = (&r, counted.get()) {
            self.handles().lock().closed(ino);
        }
        r
    }

    /// Makes a symbolic link.
    fn symlink(&self, caller: &Caller, parent: u64, name: &[u8], target: &[u8]) -> FsResult<Attr> {
        let fs = self.fs();
        call(self, caller, Run::Change, |op| {
            op.symlink(parent, name, target, &|| fs.new_ino())
        })
    }

    /// A symbolic link's target.
    fn readlink(&self, ino: u64) -> FsResult<Vec<u8>> {
        read_noting_access(self, ino, |op| op.readlink(ino))
    }

    /// Removes a name of a non-directory.
    fn unlink(&self, caller: &Caller, parent: u64, name: &[u8]) -> FsResult<()> {
        call(self, caller, Run::Change, |op| op.unlink(parent, name))
    }

    /// Removes an empty directory.
    fn rmdir(&self, caller: &Caller, parent: u64, name: &[u8]) -> FsResult<()> {
        call(self, caller, Run::Change, |op| op.rmdir(parent, name))
    }

    /// Renames (flags: `RENAME_NOREPLACE`, `RENAME_EXCHANGE`).
    fn rename(
        &self,
        caller: &Caller,
        parent: u64,
        name: &[u8],
        new_parent: u64,
        new_name: &[u8],
        flags: u32,
    ) -> FsResult<()> {
        call(self, caller, Run::Change, |op| {
            op.rename(parent, name, new_parent, new_name, flags)
        })
    }

    /// A new name for a non-directory.
    fn link(&self, caller: &Caller, ino: u64, parent: u64, name: &[u8]) -> FsResult<Attr> {
        call(self, caller, Run::Change, |op| op.link(ino, parent, name))
    }

    /// Opens `ino` with `open(2)` flags (the access they ask for is checked against its
    /// permissions, as Linux's `may_open` checks it); the file's data stays while it is open,
    /// even after its last name is gone.
    fn open(&self, caller: &Caller, ino: u64, flags: i32) -> FsResult<Attr> {
        call(self, caller, Run::Ordered, |op| {
            let a = op.attr(ino)?;
            let mask = open_mask(flags);
            if a.kind == Kind::Dir && mask & W != 0 {
                return Err(FsError::Errno(libc::EISDIR));
            }
            permit(op.caller, Check::Access(&a, mask))?;
            self.handles().lock().opened(ino);
            Ok(a)
        })
    }

    /// Closes one open of `ino`: its last close deletes it if it has no name left.
    fn release(&self, ino: u64) -> FsResult<()> {
        if !self.handles().lock().closed(ino) {
            return Ok(());
        }
        call(self, &Caller::root(), Run::Change, |op| {
            // Opened again since the count went to zero: the new open keeps it.
            if (op.open)(ino) {
                return Ok(());
            }
            match op.attr(ino) {
                Ok(a) if a.nlink == 0 => {
                    op.purge(ino)?;
                    op.deleted.push(a);
                    Ok(())
                }
                Ok(_) | Err(FsError::Errno(libc::ENOENT)) => Ok(()),
                Err(e) => Err(e),
            }
        })
    }

    /// Files open now in this tree (inodes and their open counts).
    fn open_files(&self) -> Vec<(u64, u32)> {
        self.handles().lock().open_inodes().collect()
    }

    /// Reads up to `len` bytes at `offset`.
    fn read(&self, ino: u64, offset: u64, len: usize) -> FsResult<Vec<u8>> {
        read_noting_access(self, ino, |op| op.read(ino, offset, len))
    }

    /// Writes `data` at `offset`; returns the bytes written.
    fn write(&self, caller: &Caller, ino: u64, offset: u64, data: &[u8]) -> FsResult<usize> {
        call(self, caller, Run::Change, |op| op.write(ino, offset, data))
    }

    /// `fallocate`: mode 0 extends the size, `FALLOC_FL_KEEP_SIZE` alone changes nothing
    /// (the store allocates when written), `FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE` zeros
    /// a range, `FALLOC_FL_ZERO_RANGE` zeros it and extends the size unless with
    /// `FALLOC_FL_KEEP_SIZE`; other modes are `EOPNOTSUPP` (FUSE passes no others).
    fn fallocate(
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
        let change = Run::Change;
        match mode {
            0 => call(self, caller, change, |op| op.allocate(ino, offset, len)),
            libc::FALLOC_FL_KEEP_SIZE => call(self, caller, change, |op| op.attr(ino).map(|_| ())),
            m if m == libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE => {
                call(self, caller, change, |op| op.punch_hole(ino, offset, len))
            }
            m if m & !libc::FALLOC_FL_KEEP_SIZE == libc::FALLOC_FL_ZERO_RANGE => {
                let keep_size = m & libc::FALLOC_FL_KEEP_SIZE != 0;
                call(self, caller, change, |op| {
                    op.zero_range(ino, offset, len, keep_size)
                })
            }
            _ => Err(FsError::Errno(libc::EOPNOTSUPP)),
        }
    }

    /// `lseek` with `SEEK_DATA` (`data`) or `SEEK_HOLE`.
    fn seek(&self, ino: u64, offset: u64, data: bool) -> FsResult<u64> {
        call(self, &Caller::root(), Run::Read, |op| {
            op.seek(ino, offset, data)
        })
    }

    /// Up to `limit` entries of a directory after `offset` (see [`Op::readdir`]).
    fn readdir(&self, ino: u64, offset: u64, limit: usize) -> FsResult<Vec<DirEntry>> {
        read_noting_access(self, ino, |op| op.readdir(ino, offset, limit))
    }

    /// Sets an extended attribute.
    fn setxattr(
        &self,
        caller: &Caller,
        ino: u64,
        name: &[u8],
        value: &[u8],
        flags: u32,
    ) -> FsResult<()> {
        call(self, caller, Run::Change, |op| {
            op.setxattr(ino, name, value, flags)
        })
    }

    /// An extended attribute's value.
    fn getxattr(&self, caller: &Caller, ino: u64, name: &[u8]) -> FsResult<Vec<u8>> {
        call(self, caller, Run::Read, |op| op.getxattr(ino, name))
    }

    /// The names of the extended attributes.
    fn listxattr(&self, caller: &Caller, ino: u64) -> FsResult<Vec<Vec<u8>>> {
        call(self, caller, Run::Read, |op| op.listxattr(ino))
    }

    /// Removes an extended attribute.
    fn removexattr(&self, caller: &Caller, ino: u64, name: &[u8]) -> FsResult<()> {
        call(self, caller, Run::Change, |op| op.removexattr(ino, name))
    }

    /// Whether `caller` may access `ino` as `access(2)`'s mask asks (`F_OK` is 0).
    fn access(&self, caller: &Caller, ino: u64, mask: u32) -> FsResult<()> {
        let a = self.getattr(ino)?;
        permit(caller, Check::Access(&a, mask & (R | W | X)))
    }

    /// What `statfs` reports of the file system itself.
    fn statfs(&self) -> FsStat {
        self.fs().stat()
    }
}

/// Runs `f` on `tree` as `how` says, and returns what it returned.
pub(crate) fn call<T: FileTree + ?Sized, R>(
    tree: &T,
    caller: &Caller,
    how: Run,
    f: impl FnOnce(&mut Op<'_, &mut dyn Kv>) -> FsResult<R>,
) -> FsResult<R> {
    let mut f = Some(f);
    let mut out = None;
    tree.run(caller, how, &mut |op| {
        if let Some(f) = f.take() {
            out = Some(f(op)?);
        }
        Ok(())
    })?;
    // Every tree runs a read, an ordered read and a change exactly once (or fails).
    out.ok_or_else(|| FsError::Corrupt(format!("a {how:?} operation did not run")))
}

/// Runs a read of `ino`'s contents (by root: the kernel checked the caller at open), then
/// writes `ino`'s access time if [`crate::FsOptions::atime`] says this read should. As
/// Linux's `touch_atime`, failing to write it does not fail the read (a store that failed a
/// write says so at the next one).
fn read_noting_access<T: FileTree + ?Sized, R>(
    tree: &T,
    ino: u64,
    f: impl FnOnce(&mut Op<'_, &mut dyn Kv>) -> FsResult<R>,
) -> FsResult<R> {
    let root = Caller::root();
    let opts = tree.fs().options();
    // Asked first as a plain read: most reads write nothing (`relatime`), and they should
    // not wait for writers to find that out. The inode may be deleted between the two: the
    // read still succeeded.
    let (r, due) = call(tree, &root, Run::Read, |op| {
        let r = f(op)?;
        Ok((
            r,
            !opts.read_only && op.access_due(ino, &opts.atime).unwrap_or(false),
        ))
    })?;
    if due {
        let _ = tree.run(&root, Run::NoteAccess, &mut |op| {
            op.note_access(ino, &opts.atime)
        });
    }
    Ok(r)
}
