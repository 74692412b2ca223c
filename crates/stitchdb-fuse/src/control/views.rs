//! The trees served besides the mainline, each under a view of node ids of its own
//! (`nodeid`): open transactions (`/.stitch/txns/ID`, begun and ended by the control file's
//! `txn` commands) and named snapshots (`/.stitch/snapshots/NAME`, read-only). A view's node
//! ids are its tree's inode numbers with the view in the top bits, so the kernel keeps a
//! separate cache (entries, attributes, pages) of each view of a file, as KVFS gave each
//! transaction apparent inode numbers of its own.
//!
//! Views are numbered 1 to 0xFFFE and handed out in turn, so a view number comes back into
//! use only after every other one has: by then the kernel has long let go of the node ids of
//! its earlier tree (the end of a view drops its directory entry from the kernel's cache).

use super::protocol::CommandError;
use crate::nodeid::CONTROL;
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};
use stitchdb::{Durability, Isolation};
use stitchdb_fs::{FileTree, Fs, FsError, FsTransaction, SnapshotTree};

/// Transactions open at once through one mount (more: `EMFILE`).
pub const MAX_TRANSACTIONS: usize = 1024;

/// Views at once: every view number but the mainline's and the control namespace's.
const MAX_VIEWS: usize = (CONTROL - 1) as usize;

/// A transaction's owner: the control file handle that began it (its last close aborts the
/// transaction) and the user who did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    /// The control file handle.
    pub fh: u64,
    /// The file-system uid.
    pub uid: u32,
    /// The thread that began it.
    pub pid: u32,
}

/// A tree and what it is.
pub enum View {
    /// An open transaction.
    Txn {
        id: u64,
        owner: Owner,
        isolation: Isolation,
        began: Instant,
        tree: Arc<FsTransaction>,
    },
    /// A named snapshot's tree.
    Snapshot { tree: Arc<SnapshotTree> },
}

impl View {
    /// The tree to serve.
    pub fn tree(&self) -> &dyn FileTree {
        match self {
            View::Txn { tree, .. } => &**tree,
            View::Snapshot { tree } => &**tree,
        }
    }

    /// Whether a request of `uid` may reach this tree: a transaction's only its owner's (and
    /// root's, and the kernel's write-back, which names nobody: its pages were written
    /// through the view by the owner's processes); a snapshot's anyone's, its files' own
    /// permissions deciding.
    pub fn admits(&self, uid: u32) -> bool {
        match self {
            View::Txn { owner, .. } => uid == owner.uid || uid == 0 || uid == u32::MAX,
            View::Snapshot { .. } => true,
        }
    }
}

#[derive(Default)]
struct State {
    by_view: HashMap<u16, Arc<View>>,
    txns: BTreeMap<u64, u16>,
    snapshots: BTreeMap<String, u16>,
    /// Where the search for a free view number starts.
    next_view: u16,
    next_txn: u64,
}

impl State {
    /// A free view number, the next in turn.
    fn free_view(&mut self) -> Result<u16, CommandError> {
        if self.by_view.len() >= MAX_VIEWS {
            return Err(CommandError::new(libc::ENFILE, "no view numbers left"));
        }
        loop {
            self.next_view = if self.next_view >= CONTROL - 1 {
                1
            } else {
                self.next_view + 1
            };
            if !self.by_view.contains_key(&self.next_view) {
                return Ok(self.next_view);
            }
        }
    }
}

/// The views of one mount.
#[derive(Default)]
pub struct Views {
    state: Mutex<State>,
}

impl Views {
    /// The view numbered `view`, if it is open.
    pub fn get(&self, view: u16) -> Option<Arc<View>> {
        self.state.lock().by_view.get(&view).cloned()
    }

    /// The view of transaction `id`, if it is open and `uid` may see it.
    pub fn txn_view(&self, id: u64, uid: u32) -> Option<u16> {
        let s = self.state.lock();
        let view = *s.txns.get(&id)?;
        s.by_view[&view].admits(uid).then_some(view)
    }

    /// The open transactions `uid` may see.
    pub fn txn_ids(&self, uid: u32) -> Vec<u64> {
        let s = self.state.lock();
        s.txns
            .iter()
            .filter(|(_, v)| s.by_view[v].admits(uid))
            .map(|(id, _)| *id)
            .collect()
    }

    /// The view of snapshot `name`, opened on first use. A view whose snapshot was dropped
    /// by another surface of the store (`SX.SNAPSHOT DROP` over Redis) is closed here, at the
    /// next lookup of its name.
    pub fn snapshot_view(&self, fs: &Arc<Fs>, name: &str) -> Result<u16, FsError> {
        let mut s = self.state.lock();
        if let Some(&v) = s.snapshots.get(name) {
            if fs.db().snapshots().iter().any(|i| i.name == name) {
                return Ok(v);
            }
            s.snapshots.remove(name);
            s.by_view.remove(&v);
        }
        let tree = Arc::new(fs.snapshot_tree(name)?);
        let view = s.free_view().map_err(|e| FsError::Errno(e.errno))?;
        s.by_view.insert(view, Arc::new(View::Snapshot { tree }));
        s.snapshots.insert(name.to_string(), view);
        Ok(view)
    }

    /// Closes the view of snapshot `name` (the snapshot was dropped): its node ids answer
    /// `ESTALE` from now on. Returns its view number, if it had one.
    pub fn drop_snapshot(&self, name: &str) -> Option<u16> {
        let mut s = self.state.lock();
        let view = s.snapshots.remove(name)?;
        s.by_view.remove(&view);
        Some(view)
    }

    /// What transaction `id` of `owner` changed so far, as `txn summary` prints it.
    pub fn summary(&self, id: u64, owner: Owner) -> Result<String, CommandError> {
        let view = self.owned(id, owner.uid)?;
        let View::Txn { tree, .. } = &*view else {
            return Err(no_such(id));
        };
        let c = tree.changes().map_err(|e| fs_error(&e))?;
        Ok(summary(&c))
    }

    /// Commits transaction `id` of `owner`, durably: the reply's value, and what it changed
    /// (named before it committed), of which the kernel is to be told.
    pub fn commit(
        &self,
        id: u64,
        owner: Owner,
    ) -> Result<(String, stitchdb_fs::Changes), CommandError> {
        let tree = self.end(id, owner.uid)?;
        let changes = tree.changes().map_err(|e| fs_error(&e))?;
        let committed = tree.commit(Durability::Sync).map_err(|e| fs_error(&e))?;
        let reply = format!(
            "{} names, {} inodes, {} bytes",
            committed.names, committed.inodes, committed.data_bytes
        );
        Ok((reply, changes))
    }

    /// Aborts transaction `id` of `owner`.
    pub fn abort(&self, id: u64, owner: Owner) -> Result<(), CommandError> {
        self.end(id, owner.uid)?.abort();
        Ok(())
    }

    /// Begins a transaction of `owner`: its id.
    pub fn begin(
        &self,
        fs: &Arc<Fs>,
        owner: Owner,
        isolation: Isolation,
    ) -> Result<u64, CommandError> {
        let mut s = self.state.lock();
        if s.txns.len() >= MAX_TRANSACTIONS {
            return Err(CommandError::new(
                libc::EMFILE,
                format!("{MAX_TRANSACTIONS} transactions are open already"),
            ));
        }
        let view = s.free_view()?;
        let tree = Arc::new(fs.begin(isolation).map_err(|e| fs_error(&e))?);
        s.next_txn += 1;
        let id = s.next_txn;
        s.by_view.insert(
            view,
            Arc::new(View::Txn {
                id,
                owner,
                isolation,
                began: Instant::now(),
                tree,
            }),
        );
        s.txns.insert(id, view);
        Ok(id)
    }

    /// Transaction `id`'s view, if `uid` owns it (or is root).
    fn owned(&self, id: u64, uid: u32) -> Result<Arc<View>, CommandError> {
        let s = self.state.lock();
        let view = s.txns.get(&id).ok_or_else(|| no_such(id))?;
        let v = &s.by_view[view];
        match &**v {
            View::Txn { owner, .. } if owner.uid == uid || uid == 0 => Ok(v.clone()),
            _ => Err(no_such(id)),
        }
    }

    /// Takes transaction `id` out of the views (its node ids answer `ESTALE` from now on)
    /// and hands it over once the requests still being served in it are done.
    fn end(&self, id: u64, uid: u32) -> Result<FsTransaction, CommandError> {
        self.owned(id, uid)?;
        let view = {
            let mut s = self.state.lock();
            let view = s.txns.remove(&id).ok_or_else(|| no_such(id))?;
            s.by_view.remove(&view).ok_or_else(|| no_such(id))?
        };
        let View::Txn { tree, .. } =
            Arc::into_inner(wait_alone(view)).ok_or_else(|| no_such(id))?
        else {
            return Err(no_such(id));
        };
        Arc::into_inner(wait_alone(tree)).ok_or_else(|| no_such(id))
    }

    /// Aborts the transactions begun through control file handle `fh` (closed: its process
    /// ended or let go without committing). Returns their ids.
    pub fn abort_owned_by(&self, fh: u64) -> Vec<u64> {
        let ended: Vec<(u64, u16)> = {
            let s = self.state.lock();
            s.txns
                .iter()
                .filter(
                    |(_, v)| matches!(&*s.by_view[v], View::Txn { owner, .. } if owner.fh == fh),
                )
                .map(|(id, v)| (*id, *v))
                .collect()
        };
        for (id, _) in &ended {
            if let Ok(t) = self.end(*id, 0) {
                t.abort();
            }
        }
        ended.into_iter().map(|(id, _)| id).collect()
    }

    /// `/.stitch/transactions`: a line per open transaction `uid` may see.
    pub fn listing(&self, uid: u32) -> Vec<u8> {
        let s = self.state.lock();
        let mut out = String::from("id\tisolation\tuid\tpid\tseconds\n");
        for view in s.txns.values() {
            let v = &s.by_view[view];
            if let View::Txn {
                id,
                owner,
                isolation,
                began,
                ..
            } = &**v
            {
                if v.admits(uid) {
                    out += &format!(
                        "{id}\t{}\t{}\t{}\t{}\n",
                        match isolation {
                            Isolation::Serializable => "serializable",
                            _ => "snapshot",
                        },
                        owner.uid,
                        owner.pid,
                        began.elapsed().as_secs()
                    );
                }
            }
        }
        out.into_bytes()
    }
}

/// Waits until `arc` is the last reference: the requests that took the view before it was
/// taken out finish (each holds it only while it is served).
fn wait_alone<T>(arc: Arc<T>) -> Arc<T> {
    while Arc::strong_count(&arc) > 1 {
        std::thread::sleep(Duration::from_millis(1));
    }
    arc
}

fn no_such(id: u64) -> CommandError {
    CommandError::new(libc::ENOENT, format!("no open transaction {id}"))
}

/// A file system error as a command's: a conflict says which path.
fn fs_error(e: &FsError) -> CommandError {
    CommandError::new(e.errno(), e.to_string())
}

/// `txn summary`'s lines: `added PATH`, `changed PATH`, `removed PATH`, then `bytes N`.
fn summary(c: &stitchdb_fs::Changes) -> String {
    let mut out = String::new();
    for (what, paths) in [
        ("added", &c.added),
        ("changed", &c.changed),
        ("removed", &c.removed),
    ] {
        for p in paths {
            out += &format!("{what} {}\n", String::from_utf8_lossy(p));
        }
    }
    out += &format!("bytes {}\n", c.data_bytes);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use stitchdb::{Db, Options};
    use stitchdb_fs::FsOptions;

    fn mounted(dir: &tempfile::TempDir) -> Arc<Fs> {
        let db = Db::create(dir.path().join("s.store"), Options::default()).unwrap();
        Arc::new(Fs::mount(db, FsOptions::default()).unwrap())
    }

    fn owner(fh: u64, uid: u32) -> Owner {
        Owner { fh, uid, pid: 1 }
    }

    fn begin(views: &Views, fs: &Arc<Fs>, o: Owner) -> Result<u64, CommandError> {
        views.begin(fs, o, Isolation::Snapshot)
    }

    #[test]
    fn transactions_are_bounded_owned_and_aborted_with_their_handle() {
        let dir = tempfile::tempdir().unwrap();
        let fs = mounted(&dir);
        let views = Views::default();
        let ids: Vec<u64> = (0..MAX_TRANSACTIONS as u64)
            .map(|i| begin(&views, &fs, owner(i % 4, 1000)).unwrap())
            .collect();
        let refused = begin(&views, &fs, owner(9, 1000)).unwrap_err();
        assert_eq!(refused.errno, libc::EMFILE);
        // Another user neither sees nor ends them; root does.
        assert!(views.txn_ids(1001).is_empty());
        assert_eq!(views.txn_ids(0).len(), MAX_TRANSACTIONS);
        let theirs = views.abort(ids[0], owner(9, 1001));
        assert_eq!(theirs.unwrap_err().errno, libc::ENOENT);
        views.abort(ids[0], owner(9, 0)).unwrap();
        begin(&views, &fs, owner(9, 1000)).unwrap();
        // Closing a handle aborts what it began.
        let ended = views.abort_owned_by(1);
        assert_eq!(ended.len(), MAX_TRANSACTIONS / 4);
        assert_eq!(views.txn_ids(1000).len(), MAX_TRANSACTIONS - ended.len());
        // An ended transaction is gone for its commands too.
        let gone = views.commit(ended[0], owner(1, 1000));
        assert_eq!(gone.unwrap_err().errno, libc::ENOENT);
    }
}
