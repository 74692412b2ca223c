//! The control namespace `/.stitch` (view `nodeid::CONTROL`): a directory of the mainline
//! root that LOOKUP finds and READDIR does not list (as ZFS's `.zfs`), holding
//!
//! - `control` (0666): the command file, see `protocol` and docs/kvfs.md;
//! - `groups` (0444): the open patchgroups, a line each;
//! - `snapshots/` and `txns/`: empty for now (the trees of snapshots and transactions).
//!
//! [`NODES`] is the one list of its entries: a new entry is a line there (and, for a file
//! with contents, an arm in [`Control::read`]). The table (`table`) routes every request on
//! a control node here, and asks [`Control::context`] in which patchgroup context to serve
//! a mainline request.

pub mod processes;
pub mod protocol;

use crate::nodeid::{join, CONTROL};
use parking_lot::Mutex;
use processes::Tracker;
use protocol::{Command, CommandError, PgCommand};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use stitchdb::{Db, GroupId, PatchContext};
use stitchdb_fs::{Attr, DirEntry, Kind, Timespec, ROOT_INO};

/// The name of the control directory in the mainline root.
pub const NAME: &[u8] = b".stitch";

/// Open handles of the control files at once (more: `ENFILE`).
pub const MAX_HANDLES: usize = 4096;

/// A node of the namespace: its inode number in the view, its parent's (0: the mainline
/// root), its name, kind and permission bits.
pub struct Node {
    ino: u64,
    parent: u64,
    name: &'static [u8],
    kind: Kind,
    perm: u32,
}

/// `/.stitch` itself.
const DIR: u64 = 1;
/// `/.stitch/control`.
const CONTROL_FILE: u64 = 2;
/// `/.stitch/groups`.
const GROUPS_FILE: u64 = 3;

/// Every node of the namespace.
pub const NODES: &[Node] = &[
    Node {
        ino: DIR,
        parent: 0,
        name: NAME,
        kind: Kind::Dir,
        perm: 0o555,
    },
    Node {
        ino: CONTROL_FILE,
        parent: DIR,
        name: b"control",
        kind: Kind::File,
        perm: 0o666,
    },
    Node {
        ino: GROUPS_FILE,
        parent: DIR,
        name: b"groups",
        kind: Kind::File,
        perm: 0o444,
    },
    Node {
        ino: 4,
        parent: DIR,
        name: b"snapshots",
        kind: Kind::Dir,
        perm: 0o555,
    },
    Node {
        ino: 5,
        parent: DIR,
        name: b"txns",
        kind: Kind::Dir,
        perm: 0o555,
    },
];

fn node(ino: u64) -> Option<&'static Node> {
    NODES.iter().find(|n| n.ino == ino)
}

/// Who writes a command: the writing thread's file-system uid and thread id.
#[derive(Debug, Clone, Copy)]
pub struct Writer {
    /// The file-system uid.
    pub uid: u32,
    /// The thread id.
    pub pid: u32,
}

/// The control namespace of one mount.
pub struct Control {
    /// Whether some process has a group engaged: the one check a request pays otherwise.
    engaged: AtomicBool,
    tracker: Mutex<Tracker>,
    /// Each open handle of `control`: the reply to its last command.
    handles: Mutex<HashMap<u64, Vec<u8>>>,
    next_fh: AtomicU64,
    /// The nodes' times: the mount's.
    born: Timespec,
}

impl Control {
    /// The namespace of a mount made at `born`.
    pub fn new(born: Timespec) -> Control {
        Control {
            engaged: AtomicBool::new(false),
            tracker: Mutex::new(Tracker::default()),
            handles: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            born,
        }
    }

    /// The context to serve a mainline request of thread `pid` in: its process's while it
    /// has patchgroups engaged; `None` (after one atomic load, when no process has) else.
    pub fn context(&self, db: &Db, pid: u32) -> Option<Arc<PatchContext>> {
        if pid == 0 || !self.engaged.load(Ordering::Acquire) {
            return None;
        }
        let mut t = self.tracker.lock();
        let ctx = t.context(db, pid);
        self.engaged.store(t.any_engaged(), Ordering::Release);
        ctx
    }

    /// The attributes of control node `ino`.
    pub fn getattr(&self, ino: u64) -> Option<Attr> {
        let n = node(ino)?;
        let subdirs = NODES
            .iter()
            .filter(|c| c.parent == n.ino && c.kind == Kind::Dir)
            .count() as u32;
        Some(Attr {
            ino: join(CONTROL, n.ino),
            kind: n.kind,
            perm: n.perm,
            uid: 0,
            gid: 0,
            nlink: if n.kind == Kind::Dir { 2 + subdirs } else { 1 },
            size: 0,
            rdev: 0,
            atime: self.born,
            mtime: self.born,
            ctime: self.born,
            crtime: self.born,
            parent: if n.parent == 0 {
                ROOT_INO
            } else {
                join(CONTROL, n.parent)
            },
            next_cookie: 0,
            no_xattrs: true,
        })
    }

    /// `/.stitch`'s attributes (LOOKUP of its name in the mainline root).
    pub fn root(&self) -> Option<Attr> {
        self.getattr(DIR)
    }

    /// The entry `name` of control directory `parent`.
    pub fn lookup(&self, parent: u64, name: &[u8]) -> Option<Attr> {
        let n = NODES
            .iter()
            .find(|n| n.parent == parent && n.name == name)?;
        self.getattr(n.ino)
    }

    /// Control directory `ino`'s entries after `offset` (`.` and `..` first).
    pub fn readdir(&self, ino: u64, offset: u64) -> Option<Vec<DirEntry>> {
        let dir = self.getattr(ino).filter(|a| a.kind == Kind::Dir)?;
        let mut all = vec![
            DirEntry {
                ino: dir.ino,
                kind: Kind::Dir,
                name: b".".to_vec(),
                offset: 1,
            },
            DirEntry {
                ino: dir.parent,
                kind: Kind::Dir,
                name: b"..".to_vec(),
                offset: 2,
            },
        ];
        for n in NODES.iter().filter(|n| n.parent == ino) {
            let offset = all.len() as u64 + 1;
            all.push(DirEntry {
                ino: join(CONTROL, n.ino),
                kind: n.kind,
                name: n.name.to_vec(),
                offset,
            });
        }
        Some(all.into_iter().filter(|e| e.offset > offset).collect())
    }

    /// OPEN of control node `ino`: a handle. Every control file is served with direct I/O:
    /// each write(2) of `control` comes at once as one WRITE, from the writing thread.
    pub fn open(&self, ino: u64, flags: i32) -> Result<u64, i32> {
        let n = node(ino).ok_or(libc::ESTALE)?;
        let writes = flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0;
        match n.kind {
            Kind::Dir if writes => return Err(libc::EISDIR),
            _ if writes && n.perm & 0o222 == 0 => return Err(libc::EACCES),
            _ => {}
        }
        if n.ino != CONTROL_FILE {
            return Ok(0);
        }
        let mut handles = self.handles.lock();
        if handles.len() >= MAX_HANDLES {
            return Err(libc::ENFILE);
        }
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        handles.insert(fh, Vec::new());
        Ok(fh)
    }

    /// READ of control file `ino` through handle `fh`: `control` gives the last reply,
    /// `groups` the list of groups.
    pub fn read(&self, ino: u64, fh: u64, offset: u64, size: usize) -> Result<Vec<u8>, i32> {
        let text = match ino {
            CONTROL_FILE => self.handles.lock().get(&fh).cloned().ok_or(libc::EBADF)?,
            GROUPS_FILE => self.tracker.lock().listing(),
            _ => return Err(libc::EISDIR),
        };
        let start = (offset as usize).min(text.len());
        let end = start.saturating_add(size).min(text.len());
        Ok(text[start..end].to_vec())
    }

    /// WRITE of `data` at `offset` to control file `ino` through handle `fh` by `writer`:
    /// runs the command and keeps its reply for the handle.
    pub fn write(
        &self,
        db: &Db,
        (ino, fh): (u64, u64),
        offset: i64,
        data: &[u8],
        writer: Writer,
    ) -> Result<u32, i32> {
        let Writer { uid, pid } = writer;
        if ino != CONTROL_FILE {
            return Err(libc::EBADF);
        }
        if !self.handles.lock().contains_key(&fh) {
            return Err(libc::EBADF);
        }
        let outcome = if offset != 0 {
            Err(CommandError::new(
                libc::EINVAL,
                "commands are written at offset 0",
            ))
        } else if pid == 0 {
            Err(CommandError::new(
                libc::EINVAL,
                "the writer is not known (write with direct I/O)",
            ))
        } else {
            protocol::parse(data).and_then(|c| self.run(db, uid, pid, c))
        };
        let reply = protocol::reply(&outcome);
        if let Some(r) = self.handles.lock().get_mut(&fh) {
            *r = reply;
        }
        match outcome {
            Ok(_) => Ok(data.len() as u32),
            Err(e) => Err(e.errno),
        }
    }

    /// RELEASE of handle `fh` of control node `ino`.
    pub fn release(&self, db: &Db, ino: u64, fh: u64) {
        if ino == CONTROL_FILE {
            self.handles.lock().remove(&fh);
            // A process's last close of its handle is often its exit: look for the exited.
            let mut t = self.tracker.lock();
            t.sweep_if_due(db);
            self.engaged.store(t.any_engaged(), Ordering::Release);
        }
    }

    /// The one dispatcher of commands.
    fn run(&self, db: &Db, uid: u32, pid: u32, c: Command) -> Result<Option<u64>, CommandError> {
        let mut t = self.tracker.lock();
        t.sweep_if_due(db);
        let r = match c {
            Command::Pg(PgCommand::Create { detached }) => {
                t.create(db, uid, pid, detached).map(Some)
            }
            Command::Pg(PgCommand::Depend { after, before }) => {
                t.depend(db, uid, after, before).map(|()| None)
            }
            Command::Pg(PgCommand::Engage(g)) => t.engage(db, uid, pid, g).map(|()| None),
            Command::Pg(PgCommand::Disengage(g)) => t.disengage(db, uid, pid, g).map(|()| None),
            Command::Pg(PgCommand::Close(g)) => t.close(db, uid, g).map(|()| None),
            Command::Pg(PgCommand::Sync(g)) => {
                t.may_sync(uid, g)?;
                // A sync waits for the device: other processes' commands need not.
                drop(t);
                return db
                    .pg_sync(GroupId(g))
                    .map(|()| None)
                    .map_err(|e| CommandError::from_engine(&e));
            }
        };
        self.engaged.store(t.any_engaged(), Ordering::Release);
        r
    }
}
