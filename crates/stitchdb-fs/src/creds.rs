//! Who calls an operation: a [`Caller`], with the credentials Linux decides permissions by.
//!
//! A FUSE request names only the caller's file-system uid and gid and its thread id. The rest
//! of what Linux decides by, the supplementary groups and the effective capabilities, is read
//! from `/proc/TID/status` when a decision needs it (most do not: an owner's access to its own
//! file needs neither), at most once per request. What is read must name the request's uid
//! and gid as the thread's file-system ids (or as its real ids, with which `access(2)` asks),
//! or it belongs to another process (the thread exited and its id was reused) or the thread's
//! credentials changed since: then, as when the
//! thread has exited or its id is 0 (a process this mount's PID namespace cannot see), the
//! credentials are *unknown*, and every decision that depends on them takes the answer that
//! grants the least (see [`Membership::Unknown`] and [`Caller::capable`]).

use std::sync::OnceLock;

/// Linux's `NGROUPS_MAX`: a process has at most this many supplementary groups.
pub const NGROUPS_MAX: usize = 65536;

/// The capabilities that override file permission checks (Linux's numbers, bits of
/// `CapEff`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cap {
    /// Change any file's owner and group.
    Chown = 0,
    /// Bypass read, write and execute checks (execute needs some execute bit).
    DacOverride = 1,
    /// Bypass read checks on files, and read and search checks on directories.
    DacReadSearch = 2,
    /// Act as the owner of any file (chmod, utimes, sticky directories).
    Fowner = 3,
    /// Keep set-user-id and set-group-id bits when writing or changing a file.
    Fsetid = 4,
    /// Extended attributes of the `trusted.` namespace, and of `security.` but
    /// `security.capability`.
    SysAdmin = 21,
    /// Make device nodes.
    Mknod = 27,
    /// Set and remove a file's capabilities (`security.capability`).
    Setfcap = 31,
}

/// Every capability: what `uid` 0 has when its credentials are given rather than read.
const ALL_CAPS: u64 = u64::MAX;

/// A caller's supplementary groups and effective capabilities.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// Supplementary groups.
    pub groups: Vec<u32>,
    /// Effective capabilities: bit `n` is capability `n` ([`Cap`]).
    pub caps: u64,
}

/// Whether a caller is in a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Membership {
    /// In it: the group is its gid or one of its supplementary groups.
    Yes,
    /// Not in it.
    No,
    /// The caller's supplementary groups are unknown. A decision that would go one way for a
    /// member and the other for a non-member grants only what both would be granted.
    Unknown,
}

/// Where a caller's supplementary groups and capabilities come from.
#[derive(Debug, Clone)]
enum Source {
    /// Given.
    Known(Credentials),
    /// Read from the status of this thread when first needed (0: none can be read).
    Thread(u32),
}

/// The credentials of the process making a call.
#[derive(Debug, Clone)]
pub struct Caller {
    /// File-system user id (the effective one, unless changed with `setfsuid`).
    pub uid: u32,
    /// File-system group id.
    pub gid: u32,
    source: Source,
    /// What a [`Source::Thread`] read: `None` when unknown.
    read: OnceLock<Option<Credentials>>,
    /// Capabilities whose presence is given ([`Caller::knowing`]): bit `n` for capability
    /// `n`, which the caller has if its bit in `given_caps_held` is set.
    given_caps: u64,
    given_caps_held: u64,
}

impl Caller {
    /// The superuser, with every capability.
    pub fn root() -> Caller {
        Caller::new(0, 0, Vec::new())
    }

    /// A caller whose supplementary groups are given: user 0 has every capability, any other
    /// none (as a library or server caller, who is not a process the kernel vouches for).
    pub fn new(uid: u32, gid: u32, groups: Vec<u32>) -> Caller {
        let caps = if uid == 0 { ALL_CAPS } else { 0 };
        Caller {
            uid,
            gid,
            source: Source::Known(Credentials { groups, caps }),
            read: OnceLock::new(),
            given_caps: 0,
            given_caps_held: 0,
        }
    }

    /// The thread `tid` (as a FUSE request names it) with file-system ids `uid` and `gid`;
    /// its supplementary groups and capabilities are read from `/proc/TID/status` when a
    /// decision first needs them.
    pub fn thread(uid: u32, gid: u32, tid: u32) -> Caller {
        Caller {
            uid,
            gid,
            source: Source::Thread(tid),
            read: OnceLock::new(),
            given_caps: 0,
            given_caps_held: 0,
        }
    }

    /// The same caller, known to have capability `cap` (or not) whatever its credentials
    /// say: the kernel tells whether a writer has `CAP_FSETID` with each write, and writes
    /// back cached pages without naming the thread that wrote them.
    pub fn knowing(mut self, cap: Cap, has: bool) -> Caller {
        let bit = 1u64 << cap as u32;
        self.given_caps |= bit;
        if has {
            self.given_caps_held |= bit;
        } else {
            self.given_caps_held &= !bit;
        }
        self
    }

    /// The supplementary groups and capabilities, `None` if they cannot be known.
    fn credentials(&self) -> Option<&Credentials> {
        match &self.source {
            Source::Known(c) => Some(c),
            Source::Thread(tid) => self
                .read
                .get_or_init(|| read_thread(*tid, self.uid, self.gid))
                .as_ref(),
        }
    }

    /// Whether the caller is in group `gid`.
    pub fn in_group(&self, gid: u32) -> Membership {
        if gid == self.gid {
            return Membership::Yes;
        }
        match self.credentials() {
            Some(c) if c.groups.contains(&gid) => Membership::Yes,
            Some(_) => Membership::No,
            None => Membership::Unknown,
        }
    }

    /// Whether the caller is certainly in group `gid` (what a grant to members needs).
    pub fn surely_in_group(&self, gid: u32) -> bool {
        self.in_group(gid) == Membership::Yes
    }

    /// Whether the caller has capability `cap` (never when its capabilities are unknown).
    pub fn capable(&self, cap: Cap) -> bool {
        let bit = 1u64 << cap as u32;
        if self.given_caps & bit != 0 {
            return self.given_caps_held & bit != 0;
        }
        self.credentials().is_some_and(|c| c.caps & bit != 0)
    }
}

/// The supplementary groups and effective capabilities of thread `tid`, if its status can be
/// read and names `uid` and `gid` as its file-system ids.
fn read_thread(tid: u32, uid: u32, gid: u32) -> Option<Credentials> {
    if tid == 0 {
        return None;
    }
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    parse_status(&status, uid, gid)
}

/// The credentials in a `/proc/TID/status` text for a request made as `uid` and `gid`, if
/// the text is the thread's that made it: its `Uid:` and `Gid:` lines (real, effective, saved
/// and file-system ids) name `uid` and `gid` as the file-system ids, and the effective
/// capabilities apply; or as the real ids, as `access(2)` makes its requests (with the real
/// ids, and with the permitted capabilities for user 0, none for any other user). `None`
/// when neither matches or a field does not parse.
pub fn parse_status(status: &str, uid: u32, gid: u32) -> Option<Credentials> {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    let ids = |name: &str| -> Option<Vec<u32>> {
        let ids: Vec<u32> = field(name)?
            .split_whitespace()
            .map(|n| n.parse().ok())
            .collect::<Option<_>>()?;
        (ids.len() == 4).then_some(ids)
    };
    let caps = |name: &str| u64::from_str_radix(field(name)?, 16).ok();
    let (uids, gids) = (ids("Uid:")?, ids("Gid:")?);
    let caps = if (uids[3], gids[3]) == (uid, gid) {
        caps("CapEff:")?
    } else if (uids[0], gids[0]) == (uid, gid) {
        if uid == 0 {
            caps("CapPrm:")?
        } else {
            0
        }
    } else {
        return None;
    };
    let mut groups = Vec::new();
    for g in field("Groups:")?.split_whitespace() {
        if groups.len() == NGROUPS_MAX {
            return None;
        }
        groups.push(g.parse().ok()?);
    }
    Some(Credentials { groups, caps })
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Name:\tcat\nUmask:\t0022\nState:\tR (running)\nTgid:\t77\n\
        Uid:\t1000\t1002\t1000\t1001\nGid:\t100\t102\t100\t101\nFDSize:\t64\n\
        Groups:\t4 24 27 \nCapInh:\t0000000000000000\nCapPrm:\t00000000000000ff\n\
        CapEff:\t0000000000000009\n";

    #[test]
    fn a_status_is_read_only_for_the_ids_the_request_names() {
        let c = parse_status(STATUS, 1001, 101).unwrap();
        assert_eq!(c.groups, vec![4, 24, 27]);
        assert_eq!(c.caps, 0b1001);
        // The real ids, as access(2) asks: no capabilities for a user other than 0.
        let access = parse_status(STATUS, 1000, 100).unwrap();
        assert_eq!((access.groups.len(), access.caps), (3, 0));
        let root = STATUS
            .replace("Uid:\t1000", "Uid:\t0")
            .replace("Gid:\t100", "Gid:\t0");
        assert_eq!(parse_status(&root, 0, 0).unwrap().caps, 0xff, "permitted");
        // Effective or mixed ids are no request's.
        assert_eq!(parse_status(STATUS, 1002, 102), None);
        assert_eq!(parse_status(STATUS, 1001, 100), None);
        assert_eq!(parse_status(STATUS, 1000, 101), None);
    }

    #[test]
    fn a_damaged_or_oversized_status_gives_no_credentials() {
        for bad in [
            STATUS.replace("Groups:\t4 24 27 ", "Groups:\t4 x"),
            STATUS.replace("CapEff:\t0000000000000009", "CapEff:\tzz"),
            STATUS.replace("Uid:\t1000\t1002\t1000\t1001", "Uid:\t1001"),
            STATUS.replace("CapEff", "CapXXX"),
            String::new(),
        ] {
            assert_eq!(parse_status(&bad, 1001, 101), None, "{bad}");
        }
        let many: Vec<String> = (0..=NGROUPS_MAX).map(|g| g.to_string()).collect();
        let long = STATUS.replace("4 24 27 ", &many.join(" "));
        assert_eq!(parse_status(&long, 1001, 101), None);
        let most = STATUS.replace("4 24 27 ", &many[..NGROUPS_MAX].join(" "));
        assert_eq!(
            parse_status(&most, 1001, 101).map(|c| c.groups.len()),
            Some(NGROUPS_MAX)
        );
    }

    #[test]
    fn unknown_credentials_grant_nothing_they_would_decide() {
        // Thread 0 is never read: no groups but the request's gid, no capabilities.
        let c = Caller::thread(0, 0, 0);
        assert_eq!(c.in_group(0), Membership::Yes);
        assert_eq!(c.in_group(5), Membership::Unknown);
        assert!(!c.capable(Cap::DacOverride));
        // A given root has every capability; a given user none.
        assert!(Caller::root().capable(Cap::Chown));
        let user = Caller::new(7, 8, vec![9]);
        assert!(!user.capable(Cap::Fowner));
        // A capability the kernel vouches for, either way.
        assert!(user.clone().knowing(Cap::Fsetid, true).capable(Cap::Fsetid));
        assert!(!Caller::root()
            .knowing(Cap::Fsetid, false)
            .capable(Cap::Fsetid));
        assert!(Caller::root()
            .knowing(Cap::Fsetid, false)
            .capable(Cap::Chown));
        assert_eq!(user.in_group(9), Membership::Yes);
        assert_eq!(user.in_group(10), Membership::No);
    }

    #[test]
    fn this_threads_own_credentials_are_read() {
        let uid = rustix::process::getuid().as_raw();
        let gid = rustix::process::getgid().as_raw();
        let tid = rustix::thread::gettid().as_raw_nonzero().get() as u32;
        let me = Caller::thread(uid, gid, tid);
        let groups = rustix::process::getgroups().unwrap();
        for g in groups {
            assert_eq!(me.in_group(g.as_raw()), Membership::Yes);
        }
        // A thread that has exited: nothing left to read. Its id may be taken at once by a
        // thread another test starts: take one that is still free after the join.
        let gone = (0..100)
            .map(|_| {
                std::thread::spawn(|| rustix::thread::gettid().as_raw_nonzero().get() as u32)
                    .join()
                    .unwrap()
            })
            .find(|t| !std::path::Path::new(&format!("/proc/self/task/{t}")).exists())
            .expect("a thread id not reused at once");
        let exited = Caller::thread(uid, gid, gone);
        assert_eq!(
            exited.in_group(gid.wrapping_add(12345)),
            Membership::Unknown
        );
        assert!(!exited.capable(Cap::DacOverride));
        // Another uid than the thread's: the status is not this caller's.
        let other = Caller::thread(uid.wrapping_add(1), gid, tid);
        assert_eq!(other.in_group(gid.wrapping_add(12345)), Membership::Unknown);
    }
}
