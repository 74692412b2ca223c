//! Who calls an operation, and the permission checks ext4 makes for them.

use crate::error::{err, FsResult};
use crate::schema::{Attr, Kind};

/// Read permission.
pub const R: u32 = 4;
/// Write permission.
pub const W: u32 = 2;
/// Execute (search, for a directory) permission.
pub const X: u32 = 1;

/// The credentials of the process making a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// Effective user id (file system uid).
    pub uid: u32,
    /// Effective group id.
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
}

impl Caller {
    /// The superuser.
    pub fn root() -> Caller {
        Caller {
            uid: 0,
            gid: 0,
            groups: Vec::new(),
        }
    }

    /// Whether the caller is the superuser (who passes every check but execute).
    pub fn is_root(&self) -> bool {
        self.uid == 0
    }

    /// Whether the caller is in group `gid`.
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }

    /// Whether the caller owns the inode (or is root).
    pub fn owns(&self, a: &Attr) -> bool {
        self.is_root() || self.uid == a.uid
    }
}

/// Fails with `EACCES` unless `caller` may access `a` as `mask` (a combination of [`R`],
/// [`W`], [`X`]) asks.
pub fn check(a: &Attr, caller: &Caller, mask: u32) -> FsResult<()> {
    if allowed(a, caller, mask) {
        Ok(())
    } else {
        err(libc::EACCES)
    }
}

/// Whether `caller` may access `a` as `mask` asks.
pub fn allowed(a: &Attr, caller: &Caller, mask: u32) -> bool {
    if caller.is_root() {
        // Root may read and write anything, and execute what anyone may execute (and search
        // every directory).
        return mask & X == 0 || a.kind == Kind::Dir || a.perm & 0o111 != 0;
    }
    let bits = if caller.uid == a.uid {
        a.perm >> 6
    } else if caller.in_group(a.gid) {
        a.perm >> 3
    } else {
        a.perm
    } & 7;
    bits & mask == mask
}

/// Fails with `EPERM` if `dir` is sticky and `caller` owns neither it nor `victim` (the
/// inode whose name is removed or replaced).
pub fn check_sticky(dir: &Attr, victim: &Attr, caller: &Caller) -> FsResult<()> {
    if dir.perm & libc::S_ISVTX != 0
        && !caller.is_root()
        && caller.uid != dir.uid
        && caller.uid != victim.uid
    {
        return err(libc::EPERM);
    }
    Ok(())
}
