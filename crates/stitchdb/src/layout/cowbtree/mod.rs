//! The copy-on-write B+tree layout (Goby's versioned B+tree): `--layout cow-btree`.
//!
//! [`CowBTree`] is a table's data in this layout. Writers shadow the path they change
//! (`tree`); a commit's writes go into a Goby transaction derived from the blessed version
//! (`txn`), which the end of the commit blesses at the commit's sequence number
//! ([`CowBTree::publish`]): one atomic swap of the [`versions::Versions`] readers load without a lock.
//! Readers at an older sequence number read the newest root at or below it, kept for them
//! as long as the engine's oldest reader needs it (`versions`). The engine sequences commits
//! (the write lock, the log, conflict checks): commits reach the tree one at a time, so the
//! merge at blessing is a fast-forward there; the graft-or-replay merge serves transactions
//! run on the tree concurrently (`txn`, tested by concurrent writers).
//!
//! The tree lives in memory, every node of it; a checkpoint writes the nodes made since the
//! last one as extents of kind 6 and the manifest names the root (`store`: reference counts,
//! the release handler, the walk at open that rebuilds the counts and loads the tree). A
//! named snapshot pins a written root (one reference). Node size: `cow-btree(node=N)`,
//! 4 KiB by default (docs/cow-btree.md says why).

pub(crate) mod node;
pub(crate) mod store;
pub(crate) mod tree;
pub(crate) mod txn;
pub(crate) mod versions;

use super::vtree::dtable::DTable;
use super::vtree::run::Run;
use super::{TableData, WriteOut, Written};
use crate::entry::Value;
use crate::Result;
use node::{Node, Slot};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use stitch_patch::PatchId;
use stitch_zone::ExtentAddr;
use txn::Txn;
pub(crate) use versions::Blessed;

/// The node size when the layout names none.
pub const DEFAULT_NODE_SIZE: usize = 4096;

/// A root written out: what the manifest's table record (or a named snapshot) names.
#[derive(Clone, Debug)]
pub(crate) struct Durable {
    pub addr: ExtentAddr,
    pub root: Arc<Node>,
}

/// What the table's writers and readers share (every copy of the table's state holds it).
struct Shared {
    blessed: Blessed,
    node_size: usize,
    /// The transaction of the commit being applied: its writes, blessed at its end.
    pending: Mutex<Option<(u64, Txn)>>,
    /// Bytes written since the last freeze (what a checkpoint is due by).
    unfrozen: AtomicUsize,
    /// Written roots replaced since the last manifest: that manifest, once durable, drops
    /// their references.
    retiring: Mutex<Vec<ExtentAddr>>,
}

/// One table's data: its versions (shared), and what of it is written out.
#[derive(Clone)]
pub(crate) struct CowBTree {
    shared: Arc<Shared>,
    /// The version frozen for the checkpoint writing it out.
    frozen: Option<Arc<Node>>,
    /// The root the manifest names.
    durable: Option<Durable>,
}

impl CowBTree {
    /// A table of nodes of `node_size` bytes holding the version at `durable` (a written
    /// root, loaded) or nothing.
    pub fn new(node_size: usize, durable: Option<Durable>) -> CowBTree {
        let root = durable
            .as_ref()
            .map_or_else(|| Arc::new(Node::empty_leaf()), |d| d.root.clone());
        CowBTree {
            shared: Arc::new(Shared {
                blessed: Blessed::new(root),
                node_size,
                pending: Mutex::new(None),
                unfrozen: AtomicUsize::new(0),
                retiring: Mutex::new(Vec::new()),
            }),
            frozen: None,
            durable,
        }
    }

    /// The root the manifest names, if one is written.
    pub fn durable(&self) -> Option<&Durable> {
        self.durable.as_ref()
    }

    /// The versions readers see now.
    #[cfg(test)]
    pub fn versions(&self) -> Arc<versions::Versions> {
        self.shared.blessed.load()
    }

    /// Applies `f` to the transaction of the commit at `seq`, begun from the blessed version
    /// if this is the commit's first write here.
    fn in_commit(&self, seq: u64, f: impl FnOnce(&mut Txn)) {
        let mut pending = self.shared.pending.lock();
        if pending.as_ref().is_some_and(|(s, _)| *s != seq) {
            // A commit's writes are blessed at its end; one left pending (a replayed
            // commit's) is blessed before the next begins.
            if let Some((s, txn)) = pending.take() {
                self.bless(s, &txn, s);
            }
        }
        let (_, txn) =
            pending.get_or_insert_with(|| (seq, self.shared.blessed.begin(self.shared.node_size)));
        f(txn);
    }

    /// Blesses the writes of the commit at `seq`, keeping the versions a reader at
    /// `oldest_reader` or later may read. Called once the commit's writes are all applied.
    pub fn publish(&self, seq: u64, oldest_reader: u64) {
        let taken = {
            let mut pending = self.shared.pending.lock();
            match pending.as_ref() {
                Some((s, _)) if *s == seq => pending.take(),
                _ => None,
            }
        };
        if let Some((seq, txn)) = taken {
            self.bless(seq, &txn, oldest_reader);
        }
    }

    fn bless(&self, seq: u64, txn: &Txn, oldest_reader: u64) {
        if txn.is_empty() {
            return;
        }
        self.shared.blessed.bless(txn, Some(seq), oldest_reader);
        self.shared
            .unfrozen
            .fetch_add(self.shared.node_size, Ordering::Relaxed);
    }

    /// Written roots this table replaced since the last manifest (taken: the manifest being
    /// written drops their references once durable).
    pub fn take_retiring(&self) -> Vec<ExtentAddr> {
        std::mem::take(&mut *self.shared.retiring.lock())
    }

    /// Applies `runs` (a linked transaction's spills, oldest first, each with the sequence
    /// number of its commit record) as one commit each, keeping the versions a reader at
    /// `oldest_reader` may read. Every run is read before anything is applied: a run that
    /// cannot be read fails the link with the tree unchanged.
    pub fn absorb(&self, runs: &[(u64, Arc<Run>)], oldest_reader: u64) -> Result<()> {
        let mut read = Vec::with_capacity(runs.len());
        for (seq, run) in runs {
            let entries = run.iter_from(&[]).collect::<Result<Vec<_>>>()?;
            read.push((*seq, run, entries));
        }
        for (seq, run, entries) in read {
            for t in &run.meta.ranges {
                self.delete_range(&t.start, &t.end, seq);
            }
            for entry in entries {
                self.write(&entry.key, seq, entry.value);
            }
            self.publish(seq, oldest_reader);
        }
        Ok(())
    }
}

impl TableData for CowBTree {
    fn delete_range(&self, start: &[u8], end: &[u8], seq: u64) {
        self.in_commit(seq, |txn| {
            for key in tree::live_keys(txn.root(), start, end) {
                txn.put(Slot {
                    key: key.into(),
                    seq,
                    value: None,
                });
            }
        });
    }

    fn write(&self, key: &[u8], seq: u64, value: Value) {
        let slot = Slot {
            key: key.into(),
            seq,
            value: value.map(Into::into),
        };
        self.shared
            .unfrozen
            .fetch_add(slot.encoded_len(), Ordering::Relaxed);
        self.in_commit(seq, |txn| txn.put(slot));
    }

    /// The versions as they are now: a reader keeps them, however far writers go on.
    fn view(&self) -> Arc<dyn DTable> {
        self.shared.blessed.load()
    }

    fn unfrozen_bytes(&self) -> usize {
        self.shared.unfrozen.load(Ordering::Relaxed)
    }

    /// What was written since the last freeze: the tree is resident whole, and what a
    /// checkpoint has written out is the store's, not the table's memory to flush.
    fn memory_bytes(&self) -> usize {
        self.unfrozen_bytes()
    }

    fn has_unfrozen(&self) -> bool {
        self.unfrozen_bytes() > 0
    }

    fn is_freezing(&self) -> bool {
        self.frozen.is_some()
    }

    /// Freezes the blessed version for the next checkpoint to write out.
    fn freeze(&mut self) {
        self.frozen = Some(self.shared.blessed.load().head().clone());
        self.shared.unfrozen.store(0, Ordering::Relaxed);
    }

    /// Writes the frozen version's new nodes out (see `store`): its root, as written.
    fn write_frozen(&self, out: &WriteOut<'_>) -> Result<Option<(Written, PatchId)>> {
        let Some(root) = &self.frozen else {
            return Ok(None);
        };
        let (addr, patch) = store::write_tree(&out.storage.zones, out.nodes, root, out.stream)?;
        let durable = Durable {
            addr,
            root: root.clone(),
        };
        Ok(Some((Written::Root(durable), patch)))
    }

    /// The written root replaces the frozen version; the one it replaces is retired.
    fn install_frozen(&mut self, written: Option<Written>) {
        self.frozen = None;
        if let Some(Written::Root(written)) = written {
            if let Some(old) = self.durable.replace(written) {
                self.shared.retiring.lock().push(old.addr);
            }
        }
    }

    /// None is kept: the runs' entries were absorbed when the link committed
    /// ([`CowBTree::absorb`]).
    fn link(&mut self, runs: &[Arc<Run>]) -> Vec<Arc<Run>> {
        runs.to_vec()
    }

    fn runs(&self) -> impl Iterator<Item = &Arc<Run>> {
        std::iter::empty()
    }

    /// The view is loaded afresh by every reader: nothing to rebuild.
    fn refresh_view(&mut self) {}
}

#[cfg(test)]
mod tests;
