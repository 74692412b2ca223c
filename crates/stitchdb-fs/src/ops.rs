//! The file system's operations over a [`Kv`]: what each call reads and writes, and the
//! errors ext4 gives. An [`Op`] is one operation; whoever made it commits its writes (or
//! drops them on an error), so every operation is atomic.

use crate::atime::AtimePolicy;
use crate::creds::Caller;
use crate::error::{err, FsError, FsResult};
use crate::kv::Kv;
use crate::perm::{self, permit, Change, Check, CAPABILITY_XATTR, W, X};
use crate::schema::{
    decode_attr, decode_dirent, decode_name, decode_name_key, decode_pair_key, encode_attr,
    encode_dirent, encode_name, ino_key, ino_range, name_key, pair_key, Attr, Entry, Kind, Tables,
    Timespec, BLOCK_SIZE, FIRST_COOKIE, LINK_MAX, MAX_FILE_SIZE, MAX_INO, NAME_MAX, ROOT_INO,
};

/// `renameat2`'s `RENAME_NOREPLACE`.
pub const RENAME_NOREPLACE: u32 = 1;
/// `renameat2`'s `RENAME_EXCHANGE`.
pub const RENAME_EXCHANGE: u32 = 2;
/// `setxattr`'s `XATTR_CREATE`.
pub const XATTR_CREATE: u32 = 1;
/// `setxattr`'s `XATTR_REPLACE`.
pub const XATTR_REPLACE: u32 = 2;
/// Deleting up to this many blocks writes a tombstone per block; more, one range tombstone.
const POINT_DELETE_BLOCKS: u64 = 256;
/// Reads of up to this many blocks look each block up (through the runs' filters) rather
/// than scan for them; longer reads scan.
const POINT_READ_BLOCKS: u64 = 16;
/// Blocks `seek` reads at a time while it looks for a hole.
const SEEK_BATCH: usize = 256;
/// The longest symlink target (`PATH_MAX` less its NUL).
pub const SYMLINK_MAX: usize = 4095;
/// The longest extended attribute name and value (Linux's `XATTR_NAME_MAX`, `XATTR_SIZE_MAX`).
pub const XATTR_NAME_MAX: usize = 255;
/// See [`XATTR_NAME_MAX`].
pub const XATTR_SIZE_MAX: usize = 65536;

/// A time to set with `utimensat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeSet {
    /// The current time (`UTIME_NOW`).
    Now,
    /// This time.
    At(Timespec),
}

/// What `setattr` changes (`None`: unchanged).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetAttr {
    /// New permission bits (`chmod`).
    pub mode: Option<u32>,
    /// New owner (`chown`).
    pub uid: Option<u32>,
    /// New group (`chown`).
    pub gid: Option<u32>,
    /// New size (`truncate`).
    pub size: Option<u64>,
    /// New access time.
    pub atime: Option<TimeSet>,
    /// New modification time.
    pub mtime: Option<TimeSet>,
    /// The change comes through an open file (`ftruncate`): its open mode was checked then.
    pub through_handle: bool,
    /// The change time, when the caller keeps the file's times itself: the kernel does with
    /// FUSE's write-back cache, and writes back its modification and change times (no access
    /// time) after writes, through the writer's open file, and after changes of names, in
    /// the name of whoever made them. So a modification time with a change time and no access
    /// time is taken through an open file from anyone who may write the file, or from anyone
    /// at all when it is unchanged; utimensat's rules apply otherwise. `None`: the change
    /// time is now.
    pub ctime: Option<Timespec>,
}

/// One entry read from a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The inode its name links to.
    pub ino: u64,
    /// What the inode is.
    pub kind: Kind,
    /// The name.
    pub name: Vec<u8>,
    /// The offset to continue reading after this entry: stable while the directory changes.
    pub offset: u64,
}

/// One operation: its reads and writes, the time it happens at, and who makes it.
pub struct Op<'a, K: Kv> {
    /// Where the operation reads and writes.
    pub kv: K,
    /// The file system's tables.
    pub t: &'a Tables,
    /// The time stamps it sets.
    pub now: Timespec,
    /// When the caller keeps regular files' times itself (see
    /// [`crate::FsOptions::file_clock`]): the time stamps of a regular file it makes, from the
    /// caller's clock; and writes leave the times to the caller, which sends them later.
    pub file_now: Option<Timespec>,
    /// Who makes it.
    pub caller: &'a Caller,
    /// Whether an inode is open: one that loses its last name while open is kept (as an
    /// orphan) until its last close.
    pub open: &'a dyn Fn(u64) -> bool,
    /// The last attributes of the inodes this operation deleted (see
    /// [`crate::FsOptions::keep_deleted`]).
    pub deleted: Vec<Attr>,
}

/// Fails with `ENAMETOOLONG` over 255 bytes, `EINVAL` for a name no path can hold.
pub fn check_name(name: &[u8]) -> FsResult<()> {
    if name.len() > NAME_MAX {
        return err(libc::ENAMETOOLONG);
    }
    if name.is_empty() || name.contains(&b'/') || name.contains(&0) {
        return err(libc::EINVAL);
    }
    Ok(())
}

fn is_dot(name: &[u8]) -> bool {
    name == b"." || name == b".."
}

impl<K: Kv> Op<'_, K> {
    /// The attributes of `ino` (`ENOENT` if there is no such inode).
    pub fn attr(&mut self, ino: u64) -> FsResult<Attr> {
        match self.kv.get(self.t.inodes, &ino_key(ino))? {
            Some(v) => decode_attr(ino, &v),
            None => err(libc::ENOENT),
        }
    }

    fn put_attr(&mut self, a: &Attr) -> FsResult<()> {
        self.kv.put(self.t.inodes, &ino_key(a.ino), encode_attr(a))
    }

    /// The attributes of directory `ino` (`ENOTDIR` if it is not one).
    fn dir(&mut self, ino: u64) -> FsResult<Attr> {
        let a = self.attr(ino)?;
        if a.kind != Kind::Dir {
            return err(libc::ENOTDIR);
        }
        Ok(a)
    }

    /// The attributes of directory `ino`, which the caller may search: a path's walk through
    /// it to a name in it needs that (`EACCES`).
    fn searchable_dir(&mut self, ino: u64) -> FsResult<Attr> {
        let d = self.dir(ino)?;
        permit(self.caller, Check::Access(&d, X))?;
        Ok(d)
    }

    fn entry(&mut self, parent: u64, name: &[u8]) -> FsResult<Option<Entry>> {
        match self.kv.get(self.t.names, &name_key(parent, name))? {
            Some(v) => decode_name(parent, name, &v).map(Some),
            None => Ok(None),
        }
    }

    fn add_entry(&mut self, dir: &mut Attr, name: &[u8], ino: u64, kind: Kind) -> FsResult<()> {
        let cookie = dir.next_cookie.max(FIRST_COOKIE);
        dir.next_cookie = cookie + 1;
        let e = Entry { ino, kind, cookie };
        self.kv
            .put(self.t.names, &name_key(dir.ino, name), encode_name(&e))?;
        self.kv.put(
            self.t.dirents,
            &pair_key(dir.ino, cookie),
            encode_dirent(ino, kind, name),
        )
    }

    fn remove_entry(&mut self, dir: u64, name: &[u8], e: &Entry) -> FsResult<()> {
        self.kv.delete(self.t.names, &name_key(dir, name))?;
        self.kv.delete(self.t.dirents, &pair_key(dir, e.cookie))
    }

    fn touch_dir(&mut self, d: &mut Attr) {
        d.mtime = self.now;
        d.ctime = self.now;
    }

    /// `lookup`: the inode `name` links to in directory `parent`.
    pub fn lookup(&mut self, parent: u64, name: &[u8]) -> FsResult<Attr> {
        let d = self.searchable_dir(parent)?;
        if name == b"." {
            return Ok(d);
        }
        if name == b".." {
            let up = if d.ino == ROOT_INO {
                ROOT_INO
            } else {
                d.parent
            };
            return self.attr(up);
        }
        check_name(name)?;
        match self.entry(parent, name)? {
            Some(e) => self.attr(e.ino),
            None => err(libc::ENOENT),
        }
    }

    /// `mknod`, `mkdir` and `create`: a new inode of `kind` named `name` in `parent`, its
    /// number from `new_ino`, asked only once every check passed (a failed call uses up no
    /// inode number).
    pub fn make(
        &mut self,
        parent: u64,
        name: &[u8],
        kind: Kind,
        perm_bits: u32,
        rdev: u32,
        new_ino: &dyn Fn() -> u64,
    ) -> FsResult<Attr> {
        check_name(name)?;
        let mut d = self.searchable_dir(parent)?;
        if is_dot(name) || self.entry(parent, name)?.is_some() {
            return err(libc::EEXIST);
        }
        permit(self.caller, Check::AddName(&d))?;
        if matches!(kind, Kind::CharDev | Kind::BlockDev) {
            permit(self.caller, Check::MakeDevice)?;
        }
        let (gid, perm_bits) = perm::new_inode_group(&d, self.caller, kind, perm_bits);
        let now = self.stamp_for(kind);
        let is_dir = kind == Kind::Dir;
        if is_dir {
            if d.nlink >= LINK_MAX {
                return err(libc::EMLINK);
            }
            d.nlink += 1;
        }
        let ino = new_ino();
        if ino > MAX_INO {
            return err(libc::ENOSPC);
        }
        let a = Attr {
            ino,
            kind,
            perm: perm_bits,
            uid: self.caller.uid,
            gid,
            nlink: if is_dir { 2 } else { 1 },
            size: 0,
            rdev: if matches!(kind, Kind::CharDev | Kind::BlockDev) {
                rdev
            } else {
                0
            },
            atime: now,
            mtime: now,
            ctime: now,
            crtime: now,
            parent: if is_dir { parent } else { 0 },
            next_cookie: if is_dir { FIRST_COOKIE } else { 0 },
            no_xattrs: true,
        };
        self.add_entry(&mut d, name, ino, kind)?;
        self.touch_dir(&mut d);
        self.put_attr(&d)?;
        self.put_attr(&a)?;
        Ok(a)
    }

    /// `symlink`: a new symbolic link named `name` in `parent` pointing at `target` (its
    /// number from `new_ino`, as for [`make`](Self::make)).
    pub fn symlink(
        &mut self,
        parent: u64,
        name: &[u8],
        target: &[u8],
        new_ino: &dyn Fn() -> u64,
    ) -> FsResult<Attr> {
        if target.len() > SYMLINK_MAX {
            return err(libc::ENAMETOOLONG);
        }
        if target.is_empty() {
            return err(libc::ENOENT);
        }
        let mut a = self.make(parent, name, Kind::Symlink, 0o777, 0, new_ino)?;
        a.size = target.len() as u64;
        self.put_attr(&a)?;
        self.kv
            .put(self.t.symlinks, &ino_key(a.ino), target.to_vec())?;
        Ok(a)
    }

    /// `readlink`: a symbolic link's target.
    pub fn readlink(&mut self, ino: u64) -> FsResult<Vec<u8>> {
        if self.attr(ino)?.kind != Kind::Symlink {
            return err(libc::EINVAL);
        }
        self.kv
            .get(self.t.symlinks, &ino_key(ino))?
            .ok_or_else(|| FsError::Corrupt(format!("symlink {ino} has no target")))
    }

    /// Drops one link of `a` (whose name is already gone): deletes it with its data once the
    /// last link is gone, unless it is open, when it becomes an orphan until its last close.
    fn drop_link(&mut self, mut a: Attr) -> FsResult<()> {
        a.nlink = if a.kind == Kind::Dir {
            0
        } else {
            a.nlink.saturating_sub(1)
        };
        a.ctime = self.now;
        if a.nlink > 0 {
            self.put_attr(&a)?;
        } else if (self.open)(a.ino) {
            self.put_attr(&a)?;
            self.kv.put(self.t.orphans, &ino_key(a.ino), Vec::new())?;
        } else {
            // It had a name until now, so it is no orphan.
            self.delete_inode(a.ino, Some(&a), false)?;
            self.deleted.push(a);
        }
        Ok(())
    }

    /// Deletes inode `ino` and everything it holds, its entry in `fs.orphans` included.
    pub fn purge(&mut self, ino: u64) -> FsResult<()> {
        let a = self.attr(ino).ok();
        self.delete_inode(ino, a.as_ref(), true)
    }

    /// Deletes inode `ino`, whose attributes are `a` (`None`: it has none left), everything
    /// it holds, and with `orphan` its entry in `fs.orphans`.
    fn delete_inode(&mut self, ino: u64, a: Option<&Attr>, orphan: bool) -> FsResult<()> {
        let key = ino_key(ino);
        self.kv.delete(self.t.inodes, &key)?;
        if orphan {
            self.kv.delete(self.t.orphans, &key)?;
        }
        match a.map(|a| a.kind) {
            Some(Kind::File) => {
                let blocks = a.map_or(0, |a| a.size.div_ceil(BLOCK_SIZE));
                self.delete_blocks(ino, 0, blocks)?;
            }
            Some(Kind::Symlink) => self.kv.delete(self.t.symlinks, &key)?,
            // A directory is empty when it goes: it has no dirents to delete.
            _ => {}
        }
        if a.is_some_and(|a| a.no_xattrs) {
            return Ok(());
        }
        let (lo, hi) = ino_range(ino);
        for (k, _) in self.kv.scan(self.t.xattrs, &lo, &hi, usize::MAX)? {
            self.kv.delete(self.t.xattrs, &k)?;
        }
        Ok(())
    }

    /// Deletes file `ino`'s blocks `from..to`: one tombstone each for a few, one range
    /// tombstone for many (every range tombstone is a cost to later reads until merged away,
    /// so deleting small files by range would make a tree full of them slow to read).
    fn delete_blocks(&mut self, ino: u64, from: u64, to: u64) -> FsResult<()> {
        if to <= from {
            return Ok(());
        }
        if to - from <= POINT_DELETE_BLOCKS {
            for b in from..to {
                self.kv.delete(self.t.data, &pair_key(ino, b))?;
            }
            Ok(())
        } else {
            self.kv
                .delete_range(self.t.data, &pair_key(ino, from), &pair_key(ino, to))
        }
    }

    /// The entry `name` in directory `d` and the attributes of its inode, if the caller may
    /// remove it (`ENOENT`, `EACCES`, `EPERM` for a sticky directory).
    fn removable(&mut self, d: &Attr, name: &[u8]) -> FsResult<(Entry, Attr)> {
        let e = self
            .entry(d.ino, name)?
            .ok_or(FsError::Errno(libc::ENOENT))?;
        let victim = self.attr(e.ino)?;
        permit(
            self.caller,
            Check::RemoveName {
                dir: d,
                victim: &victim,
            },
        )?;
        Ok((e, victim))
    }

    /// `unlink`: removes the name `name` of a non-directory from `parent`.
    pub fn unlink(&mut self, parent: u64, name: &[u8]) -> FsResult<()> {
        check_name(name)?;
        let mut d = self.searchable_dir(parent)?;
        if is_dot(name) {
            return err(libc::EISDIR);
        }
        let (e, a) = self.removable(&d, name)?;
        if a.kind == Kind::Dir {
            return err(libc::EISDIR);
        }
        self.remove_entry(parent, name, &e)?;
        self.touch_dir(&mut d);
        self.put_attr(&d)?;
        self.drop_link(a)?;
        Ok(())
    }

    fn is_empty_dir(&mut self, ino: u64) -> FsResult<bool> {
        let (lo, hi) = ino_range(ino);
        Ok(self.kv.scan(self.t.dirents, &lo, &hi, 1)?.is_empty())
    }

    /// `rmdir`: removes the empty directory `name` from `parent`.
    pub fn rmdir(&mut self, parent: u64, name: &[u8]) -> FsResult<()> {
        let mut d = self.searchable_dir(parent)?;
        if name == b"." {
            return err(libc::EINVAL);
        }
        if name == b".." {
            return err(libc::ENOTEMPTY);
        }
        check_name(name)?;
        let (e, a) = self.removable(&d, name)?;
        if a.kind != Kind::Dir {
            return err(libc::ENOTDIR);
        }
        if !self.is_empty_dir(a.ino)? {
            return err(libc::ENOTEMPTY);
        }
        self.remove_entry(parent, name, &e)?;
        d.nlink -= 1;
        self.touch_dir(&mut d);
        self.put_attr(&d)?;
        self.drop_link(a)?;
        Ok(())
    }

    /// `link`: a new name `name` in `parent` for the non-directory `ino`.
    pub fn link(&mut self, ino: u64, parent: u64, name: &[u8]) -> FsResult<Attr> {
        check_name(name)?;
        let mut a = self.attr(ino)?;
        let mut d = self.searchable_dir(parent)?;
        if is_dot(name) || self.entry(parent, name)?.is_some() {
            return err(libc::EEXIST);
        }
        permit(self.caller, Check::Link(&a))?;
        permit(self.caller, Check::AddName(&d))?;
        if a.kind == Kind::Dir {
            return err(libc::EPERM);
        }
        if a.nlink == 0 {
            return err(libc::ENOENT);
        }
        if a.nlink >= LINK_MAX {
            return err(libc::EMLINK);
        }
        self.add_entry(&mut d, name, ino, a.kind)?;
        self.touch_dir(&mut d);
        self.put_attr(&d)?;
        a.nlink += 1;
        a.ctime = self.now;
        self.put_attr(&a)?;
        Ok(a)
    }

    /// Whether directory `anc` is `ino` or one of its ancestors.
    fn is_ancestor(&mut self, anc: u64, mut ino: u64) -> FsResult<bool> {
        // A tree deeper than this is damage (a cycle of parents), not a tree.
        for _ in 0..1_000_000 {
            if ino == anc {
                return Ok(true);
            }
            if ino == ROOT_INO {
                return Ok(false);
            }
            ino = self.attr(ino)?.parent;
        }
        Err(FsError::Corrupt(format!(
            "directory {ino}: its parents form a cycle"
        )))
    }

    /// `rename` and `renameat2` (flags [`RENAME_NOREPLACE`], [`RENAME_EXCHANGE`]).
    pub fn rename(
        &mut self,
        parent: u64,
        name: &[u8],
        new_parent: u64,
        new_name: &[u8],
        flags: u32,
    ) -> FsResult<()> {
        if flags & !(RENAME_NOREPLACE | RENAME_EXCHANGE) != 0
            || flags == RENAME_NOREPLACE | RENAME_EXCHANGE
        {
            return err(libc::EINVAL);
        }
        check_name(name)?;
        check_name(new_name)?;
        let old_dir = self.searchable_dir(parent)?;
        let new_dir = self.searchable_dir(new_parent)?;
        if is_dot(name) || is_dot(new_name) {
            return err(libc::EBUSY);
        }
        let src_e = self
            .entry(parent, name)?
            .ok_or(FsError::Errno(libc::ENOENT))?;
        let dst_e = self.entry(new_parent, new_name)?;
        let exchange = flags & RENAME_EXCHANGE != 0;
        if exchange && dst_e.is_none() {
            return err(libc::ENOENT);
        }
        if flags & RENAME_NOREPLACE != 0 && dst_e.is_some() {
            return err(libc::EEXIST);
        }
        let src = self.attr(src_e.ino)?;
        let dst = match &dst_e {
            Some(e) => Some(self.attr(e.ino)?),
            None => None,
        };
        if parent != new_parent {
            // Moving a directory under itself would cut it off from the tree; so would
            // replacing a directory holding the source (it is not empty).
            if src.kind == Kind::Dir && self.is_ancestor(src.ino, new_parent)? {
                return err(libc::EINVAL);
            }
            if let Some(d) = dst.as_ref().filter(|d| d.kind == Kind::Dir) {
                if self.is_ancestor(d.ino, parent)? {
                    return err(if exchange {
                        libc::EINVAL
                    } else {
                        libc::ENOTEMPTY
                    });
                }
            }
        }
        if dst.as_ref().is_some_and(|d| d.ino == src.ino) {
            // Two names of one inode: POSIX says rename does nothing (Linux returns before
            // it checks permissions).
            return Ok(());
        }
        permit(
            self.caller,
            Check::RemoveName {
                dir: &old_dir,
                victim: &src,
            },
        )?;
        match &dst {
            None => permit(self.caller, Check::AddName(&new_dir))?,
            Some(d) => {
                permit(
                    self.caller,
                    Check::RemoveName {
                        dir: &new_dir,
                        victim: d,
                    },
                )?;
                if !exchange {
                    match (src.kind == Kind::Dir, d.kind == Kind::Dir) {
                        (true, false) => return err(libc::ENOTDIR),
                        (false, true) => return err(libc::EISDIR),
                        _ => {}
                    }
                }
            }
        }
        // A directory moving to another parent rewrites its `..`.
        if parent != new_parent {
            if src.kind == Kind::Dir {
                permit(self.caller, Check::Reparent(&src))?;
            }
            if let Some(d) = dst.as_ref().filter(|d| exchange && d.kind == Kind::Dir) {
                permit(self.caller, Check::Reparent(d))?;
            }
        }
        if exchange {
            let (Some(dst), Some(dst_e)) = (dst, dst_e) else {
                return err(libc::ENOENT);
            };
            return self.exchange(parent, name, src_e, src, new_parent, new_name, dst_e, dst);
        }
        if let Some(d) = dst.as_ref().filter(|d| d.kind == Kind::Dir) {
            if !self.is_empty_dir(d.ino)? {
                return err(libc::ENOTEMPTY);
            }
        }
        let moves_dir = src.kind == Kind::Dir && parent != new_parent;
        // The new parent gains a subdirectory unless it loses the one replaced.
        if moves_dir && !dst.as_ref().is_some_and(|d| d.kind == Kind::Dir) {
            let np = self.attr(new_parent)?;
            if np.nlink >= LINK_MAX {
                return err(libc::EMLINK);
            }
        }
        self.remove_entry(parent, name, &src_e)?;
        if let (Some(victim), Some(victim_e)) = (dst, dst_e) {
            self.remove_entry(new_parent, new_name, &victim_e)?;
            if victim.kind == Kind::Dir {
                let mut np = self.attr(new_parent)?;
                np.nlink -= 1;
                self.put_attr(&np)?;
            }
            self.drop_link(victim)?;
        }
        let mut np = self.attr(new_parent)?;
        self.add_entry(&mut np, new_name, src.ino, src.kind)?;
        if moves_dir {
            np.nlink += 1;
        }
        self.touch_dir(&mut np);
        self.put_attr(&np)?;
        let mut p = self.attr(parent)?;
        if moves_dir {
            p.nlink -= 1;
        }
        self.touch_dir(&mut p);
        self.put_attr(&p)?;
        let mut moved = self.attr(src.ino)?;
        if moves_dir {
            moved.parent = new_parent;
        }
        moved.ctime = self.now;
        self.put_attr(&moved)?;
        Ok(())
    }

    /// `RENAME_EXCHANGE`: swaps two names.
    #[allow(clippy::too_many_arguments)]
    fn exchange(
        &mut self,
        parent: u64,
        name: &[u8],
        src_e: Entry,
        src: Attr,
        new_parent: u64,
        new_name: &[u8],
        dst_e: Entry,
        dst: Attr,
    ) -> FsResult<()> {
        self.remove_entry(parent, name, &src_e)?;
        self.remove_entry(new_parent, new_name, &dst_e)?;
        let mut p = self.attr(parent)?;
        self.add_entry(&mut p, name, dst.ino, dst.kind)?;
        self.touch_dir(&mut p);
        self.put_attr(&p)?;
        let mut np = self.attr(new_parent)?;
        self.add_entry(&mut np, new_name, src.ino, src.kind)?;
        self.touch_dir(&mut np);
        self.put_attr(&np)?;
        if parent != new_parent {
            let (sd, dd) = (src.kind == Kind::Dir, dst.kind == Kind::Dir);
            if sd != dd {
                // One directory changes parent: the `..` link moves with it.
                let (gains, loses) = if sd {
                    (new_parent, parent)
                } else {
                    (parent, new_parent)
                };
                let mut g = self.attr(gains)?;
                g.nlink += 1;
                self.put_attr(&g)?;
                let mut l = self.attr(loses)?;
                l.nlink -= 1;
                self.put_attr(&l)?;
            }
        }
        for (ino, to) in [(src.ino, new_parent), (dst.ino, parent)] {
            let mut a = self.attr(ino)?;
            if a.kind == Kind::Dir {
                a.parent = to;
            }
            a.ctime = self.now;
            self.put_attr(&a)?;
        }
        Ok(())
    }

    /// `setattr`: truncate, chown, chmod, utimens (checked in that order, as Linux checks
    /// them; nothing changes unless every check passes).
    pub fn setattr(&mut self, ino: u64, s: &SetAttr) -> FsResult<Attr> {
        let mut a = self.attr(ino)?;
        let caller = self.caller;
        if let Some(size) = s.size {
            match a.kind {
                Kind::File => {}
                Kind::Dir => return err(libc::EISDIR),
                _ => return err(libc::EINVAL),
            }
            if !s.through_handle {
                permit(caller, Check::Access(&a, W))?;
            }
            if size > MAX_FILE_SIZE {
                return err(libc::EFBIG);
            }
        }
        if s.uid.is_some() || s.gid.is_some() {
            let (uid, gid) = (s.uid, s.gid);
            permit(
                caller,
                Check::Chown {
                    inode: &a,
                    uid,
                    gid,
                },
            )?;
        }
        if s.mode.is_some() {
            permit(caller, Check::Chmod(&a))?;
        }
        // The kernel's own time updates need no permission (Linux checks only times a caller
        // sets): those of a truncate, sent with its size; and the write-back of times it
        // keeps (mtime and ctime, never atime) after a write, through the writer's handle
        // (utimensat never comes through one), or after a change of names, by whoever made
        // it, with the modification time unchanged.
        let written_back = s.ctime.is_some()
            && s.atime.is_none()
            && s.mode.is_none()
            && matches!(s.mtime, Some(TimeSet::At(t)) if t == a.mtime
                || s.through_handle && permit(caller, Check::Access(&a, W)).is_ok());
        let kernels_own = s.size.is_some() || written_back;
        if (s.atime.is_some() || s.mtime.is_some()) && !kernels_own {
            // "Now" is also the change time the kernel sends with a time it set to now itself
            // (with the write-back cache it sends `utimensat(UTIME_NOW, UTIME_NOW)`'s
            // modification time so): setting a time to the time of the change is setting it
            // to now, whoever chose the value.
            let now = |t: Option<TimeSet>| match t {
                Some(TimeSet::Now) => true,
                Some(TimeSet::At(t)) => s.ctime == Some(t),
                None => false,
            };
            let touch = now(s.atime) && now(s.mtime);
            permit(caller, Check::SetTimes { inode: &a, touch })?;
        }
        if let Some(size) = s.size {
            self.truncate(&a, size)?;
            a.size = size;
            a.mtime = self.now;
            self.drop_privileges(&mut a)?;
        }
        if s.uid.is_some() || s.gid.is_some() {
            // Decided on the file as it was (its group before the change).
            let kept = perm::bits_kept(&a, caller, Change::Owner);
            a.uid = s.uid.unwrap_or(a.uid);
            a.gid = s.gid.unwrap_or(a.gid);
            a.perm = kept;
            if a.kind != Kind::Dir {
                self.drop_capabilities(&a)?;
            }
        }
        if let Some(mode) = s.mode {
            a.perm = perm::chmod_bits(caller, a.gid, mode);
        }
        let time = |t: TimeSet| match t {
            TimeSet::Now => self.now,
            TimeSet::At(t) => t,
        };
        if let Some(t) = s.atime {
            a.atime = time(t);
        }
        if let Some(t) = s.mtime {
            a.mtime = time(t);
        }
        a.ctime = s.ctime.unwrap_or(self.now);
        self.put_attr(&a)?;
        Ok(a)
    }

    /// What writing or truncating a regular file takes away, as Linux's `file_remove_privs`
    /// does (the file system does it itself: the FUSE adapter asks the kernel for
    /// `HANDLE_KILLPRIV_V2`, so the kernel no longer reads `security.capability` before every
    /// write): see [`perm::bits_kept`]; and the file's capabilities, whoever writes.
    fn drop_privileges(&mut self, a: &mut Attr) -> FsResult<()> {
        if a.kind != Kind::File {
            return Ok(());
        }
        a.perm = perm::bits_kept(a, self.caller, Change::Contents);
        self.drop_capabilities(a)
    }

    /// Deletes `security.capability` of `a`, if it has one.
    fn drop_capabilities(&mut self, a: &Attr) -> FsResult<()> {
        if a.no_xattrs {
            return Ok(());
        }
        let key = name_key(a.ino, CAPABILITY_XATTR);
        if self.kv.get(self.t.xattrs, &key)?.is_some() {
            self.kv.delete(self.t.xattrs, &key)?;
        }
        Ok(())
    }

    /// Cuts or extends file `a`'s data to `size` bytes: blocks past it go, the block it ends
    /// in is cut (so no block holds bytes past the size, and growing reads zeros).
    fn truncate(&mut self, a: &Attr, size: u64) -> FsResult<()> {
        if size >= a.size {
            return Ok(());
        }
        let first_gone = size.div_ceil(BLOCK_SIZE);
        self.delete_blocks(a.ino, first_gone, a.size.div_ceil(BLOCK_SIZE))?;
        let tail = size % BLOCK_SIZE;
        if tail != 0 {
            let key = pair_key(a.ino, size / BLOCK_SIZE);
            if let Some(mut block) = self.kv.get(self.t.data, &key)? {
                if block.len() as u64 > tail {
                    block.truncate(tail as usize);
                    self.kv.put(self.t.data, &key, block)?;
                }
            }
        }
        Ok(())
    }

    /// `write`: `data` at `offset` of file `ino`; returns the bytes written (fewer than asked
    /// only at the maximum file size).
    pub fn write(&mut self, ino: u64, offset: u64, data: &[u8]) -> FsResult<usize> {
        let mut a = self.attr(ino)?;
        match a.kind {
            Kind::File => {}
            Kind::Dir => return err(libc::EISDIR),
            _ => return err(libc::EINVAL),
        }
        if data.is_empty() {
            return Ok(0);
        }
        if offset >= MAX_FILE_SIZE {
            return err(libc::EFBIG);
        }
        let n = data.len().min((MAX_FILE_SIZE - offset) as usize);
        let end = offset + n as u64;
        let mut pos = offset;
        while pos < end {
            let block = pos / BLOCK_SIZE;
            let within = (pos % BLOCK_SIZE) as usize;
            let take = ((BLOCK_SIZE as usize) - within).min((end - pos) as usize);
            let src = &data[(pos - offset) as usize..][..take];
            let key = pair_key(ino, block);
            let value = if within == 0 && take == BLOCK_SIZE as usize {
                src.to_vec()
            } else {
                let mut b = if block * BLOCK_SIZE < a.size {
                    self.kv.get(self.t.data, &key)?.unwrap_or_default()
                } else {
                    Vec::new()
                };
                if b.len() < within + take {
                    b.resize(within + take, 0);
                }
                b[within..within + take].copy_from_slice(src);
                b
            };
            self.kv.put(self.t.data, &key, value)?;
            pos += take as u64;
        }
        a.size = a.size.max(end);
        if self.file_now.is_none() {
            a.mtime = self.now;
            a.ctime = self.now;
        }
        self.drop_privileges(&mut a)?;
        self.put_attr(&a)?;
        Ok(n)
    }

    /// Writes `ino`'s access time for a read that just read it, if `policy` says this read
    /// should (see [`crate::AtimePolicy`]). Regular files are stamped from the
    /// clock of their other times ([`Op::file_now`]). The change time stays: an access is not
    /// a change of the inode.
    pub fn note_access(&mut self, ino: u64, policy: &AtimePolicy) -> FsResult<()> {
        let mut a = self.attr(ino)?;
        let now = self.stamp_for(a.kind);
        if policy.due(&a, now) {
            a.atime = now;
            self.put_attr(&a)?;
        }
        Ok(())
    }

    /// Whether a read of `ino` now should write its access time (see
    /// [`note_access`](Self::note_access)).
    pub fn access_due(&mut self, ino: u64, policy: &AtimePolicy) -> FsResult<bool> {
        let a = self.attr(ino)?;
        Ok(policy.due(&a, self.stamp_for(a.kind)))
    }

    /// The time this operation stamps an inode of `kind` with.
    fn stamp_for(&self, kind: Kind) -> Timespec {
        match self.file_now {
            Some(t) if kind == Kind::File => t,
            _ => self.now,
        }
    }

    /// `read`: up to `len` bytes at `offset` of file `ino` (holes read as zeros).
    pub fn read(&mut self, ino: u64, offset: u64, len: usize) -> FsResult<Vec<u8>> {
        let a = self.attr(ino)?;
        match a.kind {
            Kind::File => {}
            Kind::Dir => return err(libc::EISDIR),
            _ => return err(libc::EINVAL),
        }
        if offset >= a.size || len == 0 {
            return Ok(Vec::new());
        }
        let end = a.size.min(offset.saturating_add(len as u64));
        let mut out = vec![0u8; (end - offset) as usize];
        let first = offset / BLOCK_SIZE;
        let last = (end - 1) / BLOCK_SIZE;
        let blocks = if last - first < POINT_READ_BLOCKS {
            // A point read asks each run's filter and reads only the runs that may hold the
            // block; a scan reads, in every run whose keys span the offset, the block that
            // would hold it (after random writes, most runs span most of the file).
            let mut found = Vec::new();
            for block in first..=last {
                if let Some(v) = self.kv.get(self.t.data, &pair_key(ino, block))? {
                    found.push((block, v));
                }
            }
            found
        } else {
            let scanned = self.kv.scan(
                self.t.data,
                &pair_key(ino, first),
                &pair_key(ino, last + 1),
                usize::MAX,
            )?;
            scanned
                .into_iter()
                .map(|(k, v)| Ok((decode_pair_key(&k)?.1, v)))
                .collect::<FsResult<Vec<_>>>()?
        };
        for (block, v) in blocks {
            let start = block * BLOCK_SIZE;
            let (lo, hi) = (start.max(offset), (start + v.len() as u64).min(end));
            if lo < hi {
                out[(lo - offset) as usize..(hi - offset) as usize]
                    .copy_from_slice(&v[(lo - start) as usize..(hi - start) as usize]);
            }
        }
        Ok(out)
    }

    /// The attributes of `ino` if `fallocate` applies to it: a regular file (ext4 answers
    /// EISDIR for a directory and ENODEV for anything else).
    fn fallocate_target(&mut self, ino: u64) -> FsResult<Attr> {
        let a = self.attr(ino)?;
        match a.kind {
            Kind::File => Ok(a),
            Kind::Dir => err(libc::EISDIR),
            _ => err(libc::ENODEV),
        }
    }

    /// `fallocate` with `FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE`: zeros `[offset,
    /// offset + len)` of file `ino`, deleting the blocks wholly inside it (a range reaching
    /// past the end reaches to the end of its last block).
    pub fn punch_hole(&mut self, ino: u64, offset: u64, len: u64) -> FsResult<()> {
        let mut a = self.fallocate_target(ino)?;
        let end = offset.saturating_add(len).min(a.size);
        if offset >= end {
            return Ok(());
        }
        let first_whole = offset.div_ceil(BLOCK_SIZE);
        // As ext4: a range past the end frees the block the end is in too.
        let end_whole = if offset.saturating_add(len) > a.size {
            a.size.div_ceil(BLOCK_SIZE)
        } else {
            end / BLOCK_SIZE
        };
        self.delete_blocks(ino, first_whole, end_whole)?;
        // The partial blocks at either end are zeroed in place.
        let mut edges = vec![(offset, end.min(first_whole * BLOCK_SIZE))];
        if end_whole >= first_whole {
            edges.push(((end_whole * BLOCK_SIZE).max(offset), end));
        }
        for (lo, hi) in edges {
            if lo >= hi {
                continue;
            }
            let key = pair_key(ino, lo / BLOCK_SIZE);
            if let Some(mut b) = self.kv.get(self.t.data, &key)? {
                let base = (lo / BLOCK_SIZE) * BLOCK_SIZE;
                let (s, e) = ((lo - base) as usize, ((hi - base) as usize).min(b.len()));
                if s < e {
                    b[s..e].fill(0);
                    self.kv.put(self.t.data, &key, b)?;
                }
            }
        }
        a.mtime = self.now;
        a.ctime = self.now;
        self.put_attr(&a)?;
        Ok(())
    }

    /// `fallocate` with `FALLOC_FL_ZERO_RANGE` (and `FALLOC_FL_KEEP_SIZE` if `keep_size`):
    /// zeros `[offset, offset + len)` as a punched hole does, then, unless `keep_size`, makes
    /// the file at least `offset + len` bytes long, as ext4 does (which also preallocates
    /// the range; the store allocates when written).
    pub fn zero_range(&mut self, ino: u64, offset: u64, len: u64, keep_size: bool) -> FsResult<()> {
        if !keep_size {
            let end = offset.checked_add(len).ok_or(FsError::Errno(libc::EFBIG))?;
            if end > MAX_FILE_SIZE {
                return err(libc::EFBIG);
            }
        }
        self.punch_hole(ino, offset, len)?;
        if keep_size {
            Ok(())
        } else {
            self.allocate(ino, offset, len)
        }
    }

    /// `fallocate` mode 0: makes the file at least `offset + len` bytes long (the store
    /// allocates when written, so nothing is reserved).
    pub fn allocate(&mut self, ino: u64, offset: u64, len: u64) -> FsResult<()> {
        let mut a = self.fallocate_target(ino)?;
        let end = offset.checked_add(len).ok_or(FsError::Errno(libc::EFBIG))?;
        if end > MAX_FILE_SIZE {
            return err(libc::EFBIG);
        }
        if end > a.size {
            a.size = end;
            a.ctime = self.now;
            self.put_attr(&a)?;
        }
        Ok(())
    }

    /// `readdir`: up to `limit` entries of directory `ino` after `offset` (0 to start; each
    /// entry's `offset` to continue after it). Entries added while reading come after those
    /// already there, and an entry is never returned twice.
    pub fn readdir(&mut self, ino: u64, offset: u64, limit: usize) -> FsResult<Vec<DirEntry>> {
        let d = self.dir(ino)?;
        let mut out = Vec::new();
        if offset < 1 && out.len() < limit {
            out.push(DirEntry {
                ino,
                kind: Kind::Dir,
                name: b".".to_vec(),
                offset: 1,
            });
        }
        if offset < 2 && out.len() < limit {
            let up = if ino == ROOT_INO { ROOT_INO } else { d.parent };
            out.push(DirEntry {
                ino: up,
                kind: Kind::Dir,
                name: b"..".to_vec(),
                offset: 2,
            });
        }
        let from = offset.saturating_add(1).max(FIRST_COOKIE);
        let (_, hi) = ino_range(ino);
        let rest = limit - out.len();
        for (k, v) in self
            .kv
            .scan(self.t.dirents, &pair_key(ino, from), &hi, rest)?
        {
            let (_, cookie) = decode_pair_key(&k)?;
            let (child, kind, name) = decode_dirent(ino, cookie, &v)?;
            out.push(DirEntry {
                ino: child,
                kind,
                name,
                offset: cookie,
            });
        }
        Ok(out)
    }

    fn xattr_access(&mut self, a: &Attr, name: &[u8], write: bool) -> FsResult<()> {
        if name.is_empty() || name.len() > XATTR_NAME_MAX {
            return err(libc::ERANGE);
        }
        permit(
            self.caller,
            Check::Xattr {
                inode: a,
                name,
                write,
            },
        )
    }

    /// `setxattr` (flags [`XATTR_CREATE`], [`XATTR_REPLACE`]).
    pub fn setxattr(&mut self, ino: u64, name: &[u8], value: &[u8], flags: u32) -> FsResult<()> {
        let mut a = self.attr(ino)?;
        self.xattr_access(&a, name, true)?;
        if value.len() > XATTR_SIZE_MAX {
            return err(libc::E2BIG);
        }
        let key = name_key(ino, name);
        let exists = !a.no_xattrs && self.kv.get(self.t.xattrs, &key)?.is_some();
        if flags & XATTR_CREATE != 0 && exists {
            return err(libc::EEXIST);
        }
        if flags & XATTR_REPLACE != 0 && !exists {
            return err(libc::ENODATA);
        }
        self.kv.put(self.t.xattrs, &key, value.to_vec())?;
        a.ctime = self.now;
        a.no_xattrs = false;
        self.put_attr(&a)?;
        Ok(())
    }

    /// `getxattr`.
    pub fn getxattr(&mut self, ino: u64, name: &[u8]) -> FsResult<Vec<u8>> {
        let a = self.attr(ino)?;
        self.xattr_access(&a, name, false)?;
        if a.no_xattrs {
            return err(libc::ENODATA);
        }
        self.kv
            .get(self.t.xattrs, &name_key(ino, name))?
            .ok_or(FsError::Errno(libc::ENODATA))
    }

    /// `listxattr`: the names of `ino`'s attributes the caller may see, in order.
    pub fn listxattr(&mut self, ino: u64) -> FsResult<Vec<Vec<u8>>> {
        let mut names = Vec::new();
        if self.attr(ino)?.no_xattrs {
            return Ok(names);
        }
        let (lo, hi) = ino_range(ino);
        for (k, _) in self.kv.scan(self.t.xattrs, &lo, &hi, usize::MAX)? {
            let (_, name) = decode_name_key(&k)?;
            if !perm::lists_xattr(self.caller, name) {
                continue;
            }
            names.push(name.to_vec());
        }
        Ok(names)
    }

    /// `removexattr` (of a file's capabilities, by anyone who may write it: see
    /// [`Check::DropCapabilities`]).
    pub fn removexattr(&mut self, ino: u64, name: &[u8]) -> FsResult<()> {
        let mut a = self.attr(ino)?;
        if name == CAPABILITY_XATTR && a.kind == Kind::File {
            permit(self.caller, Check::DropCapabilities(&a))?;
        } else {
            self.xattr_access(&a, name, true)?;
        }
        let key = name_key(ino, name);
        if a.no_xattrs || self.kv.get(self.t.xattrs, &key)?.is_none() {
            return err(libc::ENODATA);
        }
        self.kv.delete(self.t.xattrs, &key)?;
        a.ctime = self.now;
        self.put_attr(&a)?;
        Ok(())
    }

    /// `SEEK_DATA` / `SEEK_HOLE`: the first offset at or after `offset` in data (or in a
    /// hole) of file `ino`, as Linux answers: `ENXIO` at or past the end, which is a hole.
    /// Data is whole 4 KiB blocks, every stored block (holes are blocks never written, or
    /// deleted by a truncate or a punched hole), as ext4 reports its blocks.
    pub fn seek(&mut self, ino: u64, offset: u64, data: bool) -> FsResult<u64> {
        let a = self.attr(ino)?;
        if offset >= a.size {
            return err(libc::ENXIO);
        }
        let end = pair_key(ino, a.size.div_ceil(BLOCK_SIZE));
        let from = |block| pair_key(ino, block);
        if data {
            // The first stored block at or after the offset's, if it starts before the end.
            return match self
                .kv
                .scan(self.t.data, &from(offset / BLOCK_SIZE), &end, 1)?
                .first()
            {
                Some((k, _)) => Ok((decode_pair_key(k)?.1 * BLOCK_SIZE).max(offset)),
                None => err(libc::ENXIO),
            };
        }
        // The first block missing from the run of stored ones from the offset's on.
        let mut block = offset / BLOCK_SIZE;
        loop {
            let stored = self.kv.scan(self.t.data, &from(block), &end, SEEK_BATCH)?;
            let full = stored.len() == SEEK_BATCH;
            for (k, _) in stored {
                if decode_pair_key(&k)?.1 != block {
                    return Ok((block * BLOCK_SIZE).max(offset));
                }
                block += 1;
            }
            if !full {
                return Ok((block * BLOCK_SIZE).clamp(offset, a.size));
            }
        }
    }
}
