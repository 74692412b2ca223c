//! The permission decisions Linux makes (its VFS with ext4, no ACLs), for every caller.
//!
//! [`permit`] decides every check an operation makes: each operation names what it is about to
//! do as a [`Check`] and fails with what `permit` answers. The errors and their order follow
//! the kernel's (`generic_permission`, `may_create`, `may_delete`, `setattr_prepare`,
//! `chown_ok`, `xattr_permission` ...). The effects of a change on a file's mode (the
//! set-group-id bit of a new file or a chmod, the set-user-id and set-group-id bits that
//! writes, truncates and chowns take away) are decided here too, so that the rules live in
//! one place.

use crate::creds::{Caller, Cap, Membership};
use crate::error::{err, FsResult};
use crate::schema::{Attr, Kind};
use std::sync::OnceLock;

/// The extended attribute holding a file's capabilities: writes, truncates and chowns take
/// it away.
pub const CAPABILITY_XATTR: &[u8] = b"security.capability";

/// Read permission.
pub const R: u32 = 4;
/// Write permission.
pub const W: u32 = 2;
/// Execute (search, for a directory) permission.
pub const X: u32 = 1;

/// Something an operation is about to do, to be permitted or refused.
#[derive(Debug, Clone, Copy)]
pub enum Check<'a> {
    /// Access an inode as `mask` asks (a combination of [`R`], [`W`], [`X`]): open it, read a
    /// directory, search one (every directory of a path), truncate by path, `access(2)`.
    Access(&'a Attr, u32),
    /// Add a name to a directory (create, mknod, mkdir, symlink, link, a rename's new name).
    AddName(&'a Attr),
    /// Remove the name of `victim` from `dir` (unlink, rmdir, a rename's old name and the
    /// name it replaces).
    RemoveName {
        /// The directory holding the name.
        dir: &'a Attr,
        /// The inode the name links to.
        victim: &'a Attr,
    },
    /// Move a directory to another parent: its `..` entry is rewritten.
    Reparent(&'a Attr),
    /// Change an inode's permission bits.
    Chmod(&'a Attr),
    /// Change an inode's owner and/or group (`None`: left as it is).
    Chown {
        /// The inode.
        inode: &'a Attr,
        /// The new owner.
        uid: Option<u32>,
        /// The new group.
        gid: Option<u32>,
    },
    /// Set an inode's times: `touch` when both are set to the current time (`utimensat` with
    /// `NULL` or `UTIME_NOW` twice), which writers may do; any other setting is the owner's.
    SetTimes {
        /// The inode.
        inode: &'a Attr,
        /// Both times to now.
        touch: bool,
    },
    /// Read (`write` false) or set or remove an extended attribute.
    Xattr {
        /// The inode.
        inode: &'a Attr,
        /// The attribute's full name (`user.x`, `trusted.y` ...).
        name: &'a [u8],
        /// Set or remove rather than read.
        write: bool,
    },
    /// Give an inode another name (`link`): with Linux's `fs.protected_hardlinks` (on by
    /// default), only its owner may, or anyone who may read and write a regular file that is
    /// neither set-user-id nor set-group-id and group-executable (Linux's `may_linkat`).
    Link(&'a Attr),
    /// Remove a regular file's capabilities (`security.capability`), which only takes
    /// privilege away. Linux removes them for a write or truncate in the writer's name,
    /// without a check (its `security_inode_killpriv`), so over FUSE this comes from anyone
    /// who may write the file; a caller's own `removexattr` of them is checked by the kernel
    /// first (`CAP_SETFCAP`), as [`Check::Xattr`] checks it.
    DropCapabilities(&'a Attr),
    /// Make a character or block device node.
    MakeDevice,
}

/// Permits `check` for `caller`, or fails with the errno Linux gives (`EACCES`, `EPERM`,
/// `ENOENT` for a directory removed while in use, `ENODATA` or `EOPNOTSUPP` for extended
/// attributes).
pub fn permit(caller: &Caller, check: Check<'_>) -> FsResult<()> {
    match check {
        Check::Access(a, mask) => need(may_access(a, caller, mask), libc::EACCES),
        Check::AddName(dir) => {
            if dir.nlink == 0 {
                // Removed while someone was in it: nothing may be made there.
                return err(libc::ENOENT);
            }
            need(may_access(dir, caller, W | X), libc::EACCES)
        }
        Check::RemoveName { dir, victim } => {
            need(may_access(dir, caller, W | X), libc::EACCES)?;
            let sticky = dir.perm & libc::S_ISVTX != 0
                && caller.uid != victim.uid
                && caller.uid != dir.uid
                && !caller.capable(Cap::Fowner);
            need(!sticky, libc::EPERM)
        }
        Check::Reparent(dir) => need(may_access(dir, caller, W), libc::EACCES),
        Check::Chmod(a) => need(owner_or_capable(a, caller), libc::EPERM),
        Check::Chown { inode, uid, gid } => {
            let owner = caller.uid == inode.uid;
            let capable = || caller.capable(Cap::Chown);
            // The owner may "change" the owner to itself, and the group to one it is in.
            let uid_ok = uid.is_none_or(|u| owner && u == inode.uid || capable());
            let gid_ok = gid.is_none_or(|g| {
                owner && (g == inode.gid || caller.surely_in_group(g)) || capable()
            });
            need(uid_ok && gid_ok, libc::EPERM)
        }
        Check::SetTimes { inode, touch } => {
            if owner_or_capable(inode, caller) {
                Ok(())
            } else if touch {
                need(may_access(inode, caller, W), libc::EACCES)
            } else {
                err(libc::EPERM)
            }
        }
        Check::Xattr { inode, name, write } => xattr(inode, caller, name, write),
        Check::Link(a) => {
            let safe_source = a.kind == Kind::File
                && a.perm & libc::S_ISUID == 0
                && a.perm & (libc::S_ISGID | 0o010) != libc::S_ISGID | 0o010
                && may_access(a, caller, R | W);
            let ok = !protected_hardlinks() || safe_source || owner_or_capable(a, caller);
            need(ok, libc::EPERM)
        }
        Check::DropCapabilities(a) => need(
            may_access(a, caller, W) || caller.capable(Cap::Setfcap),
            libc::EACCES,
        ),
        Check::MakeDevice => need(caller.capable(Cap::Mknod), libc::EPERM),
    }
}

/// Whether this machine protects hard links (`/proc/sys/fs/protected_hardlinks`, read once;
/// protected when it cannot be read, as Linux's default is).
fn protected_hardlinks() -> bool {
    static PROTECTED: OnceLock<bool> = OnceLock::new();
    *PROTECTED.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/fs/protected_hardlinks")
            .map_or(true, |v| v.trim() != "0")
    })
}

fn need(ok: bool, errno: i32) -> FsResult<()> {
    if ok {
        Ok(())
    } else {
        err(errno)
    }
}

/// Linux's `generic_permission`: the mode bits that apply to the caller (the owner's, else
/// the group's for a member, else the others'), then the capabilities that override them.
fn may_access(a: &Attr, caller: &Caller, mask: u32) -> bool {
    let mask = mask & (R | W | X);
    let mode = a.perm;
    let by_mode = if caller.uid == a.uid {
        mask & !(mode >> 6) == 0
    } else {
        let (group, other) = ((mode >> 3) & 7, mode & 7);
        // Membership matters only where the group's bits and the others' differ.
        let bits = if mask & (group ^ other) == 0 {
            other
        } else {
            match caller.in_group(a.gid) {
                Membership::Yes => group,
                Membership::No => other,
                // Only what members and non-members are both granted.
                Membership::Unknown => group & other,
            }
        };
        mask & !bits == 0
    };
    if by_mode {
        return true;
    }
    if a.kind == Kind::Dir {
        return (mask & W == 0 && caller.capable(Cap::DacReadSearch))
            || caller.capable(Cap::DacOverride);
    }
    // Executing needs some execute bit, whatever the capabilities.
    (mask == R && caller.capable(Cap::DacReadSearch))
        || ((mask & X == 0 || mode & 0o111 != 0) && caller.capable(Cap::DacOverride))
}

/// Whether the caller owns `a` or may act as its owner (Linux's `inode_owner_or_capable`).
fn owner_or_capable(a: &Attr, caller: &Caller) -> bool {
    caller.uid == a.uid || caller.capable(Cap::Fowner)
}

/// Linux's `xattr_permission` and the capability hooks for its namespaces.
fn xattr(a: &Attr, caller: &Caller, name: &[u8], write: bool) -> FsResult<()> {
    if name.starts_with(b"user.") {
        if !matches!(a.kind, Kind::File | Kind::Dir) {
            return err(if write { libc::EPERM } else { libc::ENODATA });
        }
        if write
            && a.kind == Kind::Dir
            && a.perm & libc::S_ISVTX != 0
            && !owner_or_capable(a, caller)
        {
            return err(libc::EPERM);
        }
        return need(
            may_access(a, caller, if write { W } else { R }),
            libc::EACCES,
        );
    }
    if name.starts_with(b"trusted.") {
        return need(
            caller.capable(Cap::SysAdmin),
            if write { libc::EPERM } else { libc::ENODATA },
        );
    }
    if name.starts_with(b"security.") {
        let cap = if name == CAPABILITY_XATTR {
            Cap::Setfcap
        } else {
            Cap::SysAdmin
        };
        return need(!write || caller.capable(cap), libc::EPERM);
    }
    err(libc::EOPNOTSUPP)
}

/// Whether `listxattr` shows the caller attribute `name` (`trusted.` ones only to
/// `CAP_SYS_ADMIN`).
pub fn lists_xattr(caller: &Caller, name: &[u8]) -> bool {
    !name.starts_with(b"trusted.") || caller.capable(Cap::SysAdmin)
}

/// The group and permission bits of a new inode of `kind` made by `caller` in `dir` with
/// `perm_bits` (Linux's `inode_init_owner` and `mode_strip_sgid`): a set-group-id directory
/// gives it its group (and a subdirectory its set-group-id bit); a new file that would be
/// set-group-id and group-executable in a group the caller is not in loses the bit.
pub fn new_inode_group(dir: &Attr, caller: &Caller, kind: Kind, perm_bits: u32) -> (u32, u32) {
    let mut perm_bits = perm_bits & 0o7777;
    if dir.perm & libc::S_ISGID == 0 {
        return (caller.gid, perm_bits);
    }
    if kind == Kind::Dir {
        perm_bits |= libc::S_ISGID;
    } else if perm_bits & (libc::S_ISGID | 0o010) == libc::S_ISGID | 0o010
        && !in_group_or_capable(caller, dir.gid)
    {
        perm_bits &= !libc::S_ISGID;
    }
    (dir.gid, perm_bits)
}

/// The bits a permitted chmod of `a` to `perm_bits` sets: set-group-id is dropped unless the
/// caller is in the file's group (`gid`, the new one if the same change sets it) or may keep
/// it (`CAP_FSETID`).
pub fn chmod_bits(caller: &Caller, gid: u32, perm_bits: u32) -> u32 {
    let p = perm_bits & 0o7777;
    if in_group_or_capable(caller, gid) {
        p
    } else {
        p & !libc::S_ISGID
    }
}

/// What changes a regular file's contents or owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// A write or a truncate.
    Contents,
    /// A chown or chgrp, whoever makes it.
    Owner,
}

/// The permission bits `a` keeps after `change` by `caller` (Linux's
/// `setattr_should_drop_suidgid` and `chown_common`): set-user-id goes, and set-group-id where
/// it means "group execute" or the caller is not in the file's group (before the change);
/// unless, for contents, the caller may keep them (`CAP_FSETID`). A chown takes them from
/// every non-directory; contents changes only from regular files.
pub fn bits_kept(a: &Attr, caller: &Caller, change: Change) -> u32 {
    let applies = match change {
        Change::Contents => a.kind == Kind::File && !caller.capable(Cap::Fsetid),
        Change::Owner => a.kind != Kind::Dir,
    };
    let mut p = a.perm;
    if !applies {
        return p;
    }
    p &= !libc::S_ISUID;
    if p & libc::S_ISGID != 0 && (p & 0o010 != 0 || !in_group_or_capable(caller, a.gid)) {
        p &= !libc::S_ISGID;
    }
    p
}

/// Linux's `in_group_or_capable`: in the group (certainly), or `CAP_FSETID`.
fn in_group_or_capable(caller: &Caller, gid: u32) -> bool {
    caller.surely_in_group(gid) || caller.capable(Cap::Fsetid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Timespec;

    fn inode(kind: Kind, perm: u32, uid: u32, gid: u32) -> Attr {
        let t = Timespec { secs: 0, nanos: 0 };
        Attr {
            ino: 7,
            kind,
            perm,
            uid,
            gid,
            nlink: 1,
            size: 0,
            rdev: 0,
            atime: t,
            mtime: t,
            ctime: t,
            crtime: t,
            parent: 0,
            next_cookie: 0,
            no_xattrs: true,
        }
    }

    const CAPS: [Cap; 8] = [
        Cap::Chown,
        Cap::DacOverride,
        Cap::DacReadSearch,
        Cap::Fowner,
        Cap::Fsetid,
        Cap::SysAdmin,
        Cap::Mknod,
        Cap::Setfcap,
    ];

    /// Every check `permit` makes of one inode (and of a directory holding it).
    fn checks<'a>(a: &'a Attr, dir: &'a Attr) -> Vec<Check<'a>> {
        let mut v: Vec<Check<'a>> = (0..8).map(|mask| Check::Access(a, mask)).collect();
        v.extend([
            Check::AddName(dir),
            Check::RemoveName { dir, victim: a },
            Check::Reparent(a),
            Check::Chmod(a),
            Check::Chown {
                inode: a,
                uid: None,
                gid: Some(50),
            },
            Check::Chown {
                inode: a,
                uid: Some(a.uid),
                gid: Some(a.gid),
            },
            Check::SetTimes {
                inode: a,
                touch: true,
            },
            Check::SetTimes {
                inode: a,
                touch: false,
            },
            Check::Link(a),
            Check::DropCapabilities(a),
            Check::MakeDevice,
        ]);
        for name in [&b"user.x"[..], b"trusted.x", b"security.x"] {
            for write in [false, true] {
                v.push(Check::Xattr {
                    inode: a,
                    name,
                    write,
                });
            }
        }
        v
    }

    /// A caller whose supplementary groups and capabilities cannot be read (an exited
    /// thread, or none named) is never granted what a caller with the same ids would be
    /// refused, whatever its groups and capabilities are: every check of every mode, owner,
    /// group and kind, against callers in and out of the groups, with and without every
    /// capability. The bits kept by writes and chowns are never more than theirs either.
    #[test]
    fn unknown_credentials_are_never_more_permissive_than_any_known_ones() {
        let modes = [
            0o000, 0o604, 0o060, 0o640, 0o707, 0o1777, 0o2775, 0o6755, 0o4711, 0o070,
        ];
        let kinds = [Kind::File, Kind::Dir, Kind::Fifo];
        let mut compared = 0;
        for uid in [0, 10] {
            for gid in [20, 50] {
                let unknown = Caller::thread(uid, gid, 0);
                let known = [
                    Caller::new(uid, gid, vec![]),
                    Caller::new(uid, gid, vec![50, 60]),
                    Caller::new(uid, gid, vec![60]),
                ];
                // With every capability and with none, for each.
                let known: Vec<Caller> = known
                    .iter()
                    .flat_map(|c| {
                        [true, false].map(|has| {
                            CAPS.into_iter()
                                .fold(c.clone(), |c, cap| c.knowing(cap, has))
                        })
                    })
                    .collect();
                for &kind in &kinds {
                    for &perm in &modes {
                        for (owner, group) in [(uid, 50), (99, 50), (99, gid), (99, 60)] {
                            let a = inode(kind, perm, owner, group);
                            let dir = inode(Kind::Dir, perm, owner, group);
                            for (i, check) in checks(&a, &dir).into_iter().enumerate() {
                                if permit(&unknown, check).is_err() {
                                    continue;
                                }
                                for k in &known {
                                    let again = checks(&a, &dir)[i];
                                    assert!(
                                        permit(k, again).is_ok(),
                                        "{check:?} granted with unknown credentials but \
                                         refused to {k:?}"
                                    );
                                    compared += 1;
                                }
                            }
                            for change in [Change::Contents, Change::Owner] {
                                let kept = bits_kept(&a, &unknown, change);
                                for k in &known {
                                    assert_eq!(kept & !bits_kept(&a, k, change), 0);
                                }
                            }
                        }
                    }
                }
            }
        }
        assert!(compared > 1000, "only {compared} grants compared");
    }
}
