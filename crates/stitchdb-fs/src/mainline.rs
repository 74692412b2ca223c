//! The mainline as a [`FileTree`]: reads without a lock, each change under the writer lock
//! and one commit (its durability waited for after the lock is released).

use crate::creds::Caller;
use crate::error::FsResult;
use crate::fs::Fs;
use crate::handles::Handles;
use crate::kv::{Batch, Kv};
use crate::tree::{FileTree, OpFn, Run};
use parking_lot::Mutex;
use stitchdb::Durability;

impl FileTree for Fs {
    fn fs(&self) -> &Fs {
        self
    }

    fn handles(&self) -> &Mutex<Handles> {
        &self.handles
    }

    fn run(&self, caller: &Caller, how: Run, f: &mut OpFn<'_>) -> FsResult<()> {
        if how == Run::Read {
            // No lock: each read sees one committed state.
            let mut batch = Batch::cached(&self.db, &self.cache);
            return f(&mut self.op(caller, &mut batch, &|_| false));
        }
        let writer = self.writer.lock();
        let mut batch = Batch::cached(&self.db, &self.cache);
        let open = |ino| self.open_here(ino);
        let mut op = self.op(caller, &mut batch as &mut dyn Kv, &open);
        let r = f(&mut op);
        let deleted = std::mem::take(&mut op.deleted);
        let wrote = !batch.is_empty();
        match how {
            Run::Read | Run::Ordered => r,
            // Committed `Async`: durable with the next commit that is (the log keeps the
            // order) or the next sync, so reads alone never have the log written and the
            // device flushed (`Ordered` would, every `ordered_flush_interval_ms` while
            // files are read). A crash may lose the newest access times, as ext4 keeps
            // them in memory until it writes the inode back.
            Run::NoteAccess => {
                if r.is_ok() {
                    let _ = batch.commit(Durability::Async);
                }
                Ok(())
            }
            Run::Change => {
                r?;
                // `Sync` commits without waiting for the device while the writer lock is
                // held, then waits after releasing it: concurrent operations asking for
                // durability share one flush (group commit) instead of taking turns.
                let sync = self.opts.durability == Durability::Sync;
                let now = if sync {
                    Durability::Async
                } else {
                    self.opts.durability
                };
                batch.commit(now)?;
                drop(writer);
                if self.opts.keep_deleted && !deleted.is_empty() {
                    self.handles.lock().keep_deleted(deleted);
                }
                if sync && wrote {
                    self.db.sync()?;
                }
                Ok(())
            }
        }
    }

    /// Takes no lock: the log is one sequence, so a file's changes cannot be made durable
    /// without those before them, and syncing it makes every completed operation durable.
    fn fsync(&self) -> FsResult<()> {
        self.db.sync()?;
        Ok(())
    }
}
