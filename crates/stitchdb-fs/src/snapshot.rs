//! [`SnapshotTree`]: the file system as a named snapshot holds it, read-only.

use crate::creds::Caller;
use crate::error::{FsError, FsResult};
use crate::fs::Fs;
use crate::handles::Handles;
use crate::schema::TABLE_NAMES;
use crate::tree::{FileTree, OpFn, Run};
use parking_lot::Mutex;
use std::sync::Arc;
use stitchdb::Snapshot;

/// The tree of a named snapshot of the store (`Db::snapshot`): every read sees the file
/// system as it was when the snapshot was taken, and every change fails with `EROFS`.
pub struct SnapshotTree {
    fs: Arc<Fs>,
    snapshot: Snapshot,
    /// Opens are counted as on any tree (nothing here is ever deleted, so they keep
    /// nothing alive).
    handles: Mutex<Handles>,
}

impl Fs {
    /// The read-only tree of the named snapshot `name` (`ENOENT` if there is none;
    /// `NoFileSystem` if it was taken before the file system was made).
    pub fn snapshot_tree(self: &Arc<Fs>, name: &str) -> FsResult<SnapshotTree> {
        let snapshot = match self.db().open_snapshot(name) {
            Err(stitchdb::Error::NoSuchSnapshot(_)) => return Err(FsError::Errno(libc::ENOENT)),
            r => r?,
        };
        // The snapshot's tables are the store's, by the same ids, if it holds them at all.
        for table in TABLE_NAMES {
            if snapshot.table(table).is_err() {
                return Err(FsError::NoFileSystem(format!(
                    "snapshot {name:?} has no table {table}"
                )));
            }
        }
        Ok(SnapshotTree {
            fs: self.clone(),
            snapshot,
            handles: Mutex::new(Handles::default()),
        })
    }
}

impl SnapshotTree {
    /// The snapshot it reads.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }
}

impl FileTree for SnapshotTree {
    fn fs(&self) -> &Fs {
        &self.fs
    }

    fn handles(&self) -> &Mutex<Handles> {
        &self.handles
    }

    fn run(&self, caller: &Caller, how: Run, f: &mut OpFn<'_>) -> FsResult<()> {
        match how {
            Run::Read | Run::Ordered => {
                let mut kv = &self.snapshot;
                f(&mut self.fs.op(caller, &mut kv, &|_| false))
            }
            Run::Change => Err(FsError::Errno(libc::EROFS)),
            Run::NoteAccess => Ok(()),
        }
    }

    fn fsync(&self) -> FsResult<()> {
        Ok(())
    }

    /// Counts the close; nothing is deleted (a file unlinked while open when the snapshot
    /// was taken stays in it).
    fn release(&self, ino: u64) -> FsResult<()> {
        self.handles.lock().closed(ino);
        Ok(())
    }
}
