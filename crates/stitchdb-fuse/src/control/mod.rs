//! The control namespace `/.stitch` (view `nodeid::CONTROL`): a directory of the mainline
//! root that LOOKUP finds and READDIR does not list (as ZFS's `.zfs`), holding
//!
//! - `control` (0666): the command file, see `protocol` and docs/kvfs.md;
//! - `groups` (0444): the open patchgroups, a line each;
//! - `transactions` (0444): the open transactions the reader may see, a line each;
//! - `snapshots/`: a directory per named snapshot of the store, its read-only tree
//!   (`mkdir` takes one, `rmdir` drops it: root only);
//! - `txns/`: a directory per open transaction (its owner's and root's to see), the whole
//!   file system as the transaction sees it (see `views`).
//!
//! [`NODES`] is the one list of its entries: a new entry is a line there (and, for a file
//! with contents, an arm in [`Control::read`]). The table (`table`) routes every request on
//! a control node here, and asks [`Control::context`] in which patchgroup context to serve
//! a mainline request.

pub mod processes;
pub mod protocol;
pub mod views;

use crate::invalidate::{Invalidator, Stale};
use crate::nodeid::{join, CONTROL};
use parking_lot::Mutex;
use processes::Tracker;
use protocol::{Command, CommandError, PgCommand, TxnCommand};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use stitchdb::{Db, GroupId, PatchContext};
use stitchdb_fs::{Attr, DirEntry, FileTree, Fs, FsError, Kind, Timespec, ROOT_INO};
use views::{Owner, Views};

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
/// `/.stitch/snapshots`.
const SNAPSHOTS_DIR: u64 = 4;
/// `/.stitch/txns`.
const TXNS_DIR: u64 = 5;
/// `/.stitch/transactions`.
const TRANSACTIONS_FILE: u64 = 6;

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
        ino: SNAPSHOTS_DIR,
        parent: DIR,
        name: b"snapshots",
        kind: Kind::Dir,
        perm: 0o755,
    },
    Node {
        ino: TXNS_DIR,
        parent: DIR,
        name: b"txns",
        kind: Kind::Dir,
        perm: 0o555,
    },
    Node {
        ino: TRANSACTIONS_FILE,
        parent: DIR,
        name: b"transactions",
        kind: Kind::File,
        perm: 0o444,
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
    /// The trees of open transactions and of snapshots.
    views: Views,
    /// Tells the kernel what a transaction's commit, or the end of a view, changed.
    invalidator: Arc<Invalidator>,
}

impl Control {
    /// The namespace of a mount made at `born`, telling the kernel of changes through
    /// `invalidator`.
    pub fn new(born: Timespec, invalidator: Arc<Invalidator>) -> Control {
        Control {
            engaged: AtomicBool::new(false),
            tracker: Mutex::new(Tracker::default()),
            handles: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            born,
            views: Views::default(),
            invalidator,
        }
    }

    /// The trees of transactions and snapshots.
    pub fn views(&self) -> &Views {
        &self.views
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

    /// READ of control file `ino` through handle `fh` by `uid`: `control` gives the last
    /// reply, `groups` the list of groups, `transactions` the transactions `uid` may see.
    pub fn read(
        &self,
        ino: u64,
        (fh, uid): (u64, u32),
        offset: u64,
        size: usize,
    ) -> Result<Vec<u8>, i32> {
        let text = match ino {
            CONTROL_FILE => self.handles.lock().get(&fh).cloned().ok_or(libc::EBADF)?,
            GROUPS_FILE => self.tracker.lock().listing(),
            TRANSACTIONS_FILE => self.views.listing(uid),
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
        fs: &Arc<Fs>,
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
            protocol::parse(data).and_then(|c| self.run(fs, Owner { fh, uid, pid }, c))
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

    /// RELEASE of handle `fh` of control node `ino`: the transactions begun through it and
    /// still open are aborted.
    pub fn release(&self, db: &Db, ino: u64, fh: u64) {
        if ino == CONTROL_FILE {
            self.handles.lock().remove(&fh);
            let ended = self.views.abort_owned_by(fh);
            if !ended.is_empty() {
                self.forget_txn_entries(&ended);
            }
            // A process's last close of its handle is often its exit: look for the exited.
            let mut t = self.tracker.lock();
            t.sweep_if_due(db);
            self.engaged.store(t.any_engaged(), Ordering::Release);
        }
    }

    /// The one dispatcher of commands.
    fn run(&self, fs: &Arc<Fs>, owner: Owner, c: Command) -> Result<Option<String>, CommandError> {
        let (db, uid, pid) = (fs.db(), owner.uid, owner.pid);
        let c = match c {
            Command::Txn(t) => return self.run_txn(fs, owner, t),
            Command::Pg(c) => c,
        };
        let mut t = self.tracker.lock();
        t.sweep_if_due(db);
        let r = match c {
            PgCommand::Create { detached } => t.create(db, uid, pid, detached).map(Some),
            PgCommand::Depend { after, before } => t.depend(db, uid, after, before).map(|()| None),
            PgCommand::Engage(g) => t.engage(db, uid, pid, g).map(|()| None),
            PgCommand::Disengage(g) => t.disengage(db, uid, pid, g).map(|()| None),
            PgCommand::Close(g) => t.close(db, uid, g).map(|()| None),
            PgCommand::Sync(g) => {
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
        r.map(|v| v.map(|g| g.to_string()))
    }

    /// Runs a `txn` command. A commit returns once the kernel has been told to drop what it
    /// caches of the files the commit changed (for a bounded time: see `invalidate`).
    fn run_txn(
        &self,
        fs: &Arc<Fs>,
        owner: Owner,
        c: TxnCommand,
    ) -> Result<Option<String>, CommandError> {
        let v = &self.views;
        match c {
            TxnCommand::Begin { serializable } => {
                let isolation = if serializable {
                    stitchdb::Isolation::Serializable
                } else {
                    stitchdb::Isolation::Snapshot
                };
                v.begin(fs, owner, isolation).map(|id| Some(id.to_string()))
            }
            TxnCommand::Summary(id) => v.summary(id, owner).map(Some),
            TxnCommand::Abort(id) => {
                let r = v.abort(id, owner);
                self.forget_txn_entries(&[id]);
                r.map(|()| None)
            }
            TxnCommand::Commit(id) => {
                let r = v.commit(id, owner);
                self.forget_txn_entries(&[id]);
                let (reply, changes) = r?;
                self.invalidator.push(stale_after(fs, &changes));
                self.invalidator.wait();
                Ok(Some(reply))
            }
        }
    }

    /// Tells the kernel that transactions `ended` are gone (their directories in `txns/`
    /// are stale).
    fn forget_txn_entries(&self, ended: &[u64]) {
        self.invalidator.push(
            ended
                .iter()
                .map(|id| Stale::Entry(join(CONTROL, TXNS_DIR), id.to_string().into_bytes())),
        );
    }

    /// LOOKUP of `name` in the directories whose entries are trees (`txns/`, `snapshots/`),
    /// by `uid`: `None` if `parent` is not one of them.
    pub fn lookup_tree(
        &self,
        fs: &Arc<Fs>,
        parent: u64,
        name: &[u8],
        uid: u32,
    ) -> Option<Result<Attr, i32>> {
        let name = std::str::from_utf8(name).map_err(|_| libc::ENOENT);
        let view = match parent {
            TXNS_DIR => name.and_then(|n| {
                let id = n.parse::<u64>().map_err(|_| libc::ENOENT)?;
                self.views.txn_view(id, uid).ok_or(libc::ENOENT)
            }),
            SNAPSHOTS_DIR => {
                name.and_then(|n| self.views.snapshot_view(fs, n).map_err(|e| fs_errno(&e)))
            }
            _ => return None,
        };
        Some(view.and_then(|v| self.tree_root(v)))
    }

    /// The root directory of view `view`, by its node id.
    fn tree_root(&self, view: u16) -> Result<Attr, i32> {
        let v = self.views.get(view).ok_or(libc::ENOENT)?;
        let mut a = v.tree().getattr(ROOT_INO).map_err(|e| fs_errno(&e))?;
        a.ino = join(view, ROOT_INO);
        Ok(a)
    }

    /// The entries of `txns/` or `snapshots/` for `uid`, after `.` and `..` (offsets from
    /// 3); `None` if `ino` is neither.
    pub fn tree_entries(&self, fs: &Arc<Fs>, ino: u64, uid: u32) -> Option<Vec<DirEntry>> {
        let names: Vec<String> = match ino {
            TXNS_DIR => self
                .views
                .txn_ids(uid)
                .into_iter()
                .map(|id| id.to_string())
                .collect(),
            SNAPSHOTS_DIR => fs.db().snapshots().into_iter().map(|s| s.name).collect(),
            _ => return None,
        };
        let mut entries = Vec::new();
        for name in names {
            // The entry carries the tree root's node id, as LOOKUP answers it.
            if let Some(Ok(root)) = self.lookup_tree(fs, ino, name.as_bytes(), uid) {
                let offset = 3 + entries.len() as u64;
                entries.push(DirEntry {
                    ino: root.ino,
                    kind: Kind::Dir,
                    name: name.into_bytes(),
                    offset,
                });
            }
        }
        Some(entries)
    }

    /// MKDIR of `name` in `snapshots/` by `uid`: takes a named snapshot of the store (root
    /// only, as `stitchdb snapshot create`, which needs the store file).
    pub fn take_snapshot(&self, fs: &Arc<Fs>, name: &[u8], uid: u32) -> Result<Attr, i32> {
        if uid != 0 {
            return Err(libc::EPERM);
        }
        let name = std::str::from_utf8(name).map_err(|_| libc::EINVAL)?;
        fs.db().snapshot(name).map_err(|e| snapshot_errno(&e))?;
        let view = self
            .views
            .snapshot_view(fs, name)
            .map_err(|e| fs_errno(&e))?;
        self.tree_root(view)
    }

    /// RMDIR of `name` in `snapshots/` by `uid`: drops the named snapshot (root only).
    pub fn drop_snapshot(&self, fs: &Arc<Fs>, name: &[u8], uid: u32) -> Result<(), i32> {
        if uid != 0 {
            return Err(libc::EPERM);
        }
        let name = std::str::from_utf8(name).map_err(|_| libc::ENOENT)?;
        fs.db()
            .drop_snapshot(name)
            .map_err(|e| snapshot_errno(&e))?;
        self.views.drop_snapshot(name);
        Ok(())
    }
}

/// What the kernel may hold of the mainline that a committed transaction's `changes` made
/// stale. Besides each inode the commit wrote (which the store's observer names), the names
/// of the files it changed: dropping a file's names lets the kernel evict its inode, and a
/// regular file's size is taken from the daemon only for an inode the kernel makes anew
/// (with the write-back cache it keeps the size it has).
fn stale_after(fs: &Fs, changes: &stitchdb_fs::Changes) -> Vec<Stale> {
    let root = stitchdb_fs::Caller::root();
    let mut stale = Vec::new();
    let paths = changes
        .added
        .iter()
        .chain(&changes.changed)
        .chain(&changes.removed);
    for path in paths {
        let mut parts: Vec<&[u8]> = path
            .split(|&b| b == b'/')
            .filter(|p| !p.is_empty())
            .collect();
        let Some(name) = parts.pop() else { continue };
        // The parent as the mainline has it now; gone with the commit: nothing cached below.
        let mut dir = ROOT_INO;
        let found = parts.iter().all(|part| match fs.lookup(&root, dir, part) {
            Ok(a) => {
                dir = a.ino;
                true
            }
            Err(_) => false,
        });
        if found {
            stale.push(Stale::Inode(dir));
            stale.push(Stale::Entry(dir, name.to_vec()));
        }
    }
    stale
}

/// `txns/` and `snapshots/` are the directories whose entries are trees.
pub fn holds_trees(ino: u64) -> bool {
    ino == TXNS_DIR || ino == SNAPSHOTS_DIR
}

/// `snapshots/`.
pub fn is_snapshots(ino: u64) -> bool {
    ino == SNAPSHOTS_DIR
}

fn fs_errno(e: &FsError) -> i32 {
    e.errno()
}

/// The errno of the store's refusal to take or drop a snapshot.
fn snapshot_errno(e: &stitchdb::Error) -> i32 {
    match e {
        stitchdb::Error::SnapshotExists(_) => libc::EEXIST,
        stitchdb::Error::NoSuchSnapshot(_) => libc::ENOENT,
        stitchdb::Error::BadSnapshotName(..) => libc::EINVAL,
        _ => {
            tracing::error!("snapshot: {e}");
            libc::EIO
        }
    }
}
