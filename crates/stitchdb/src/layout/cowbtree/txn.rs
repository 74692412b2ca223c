//! Goby's transactions over the tree: a transaction derives from the blessed version, shadows
//! what it writes into a version of its own and logs its writes; committing merges that version
//! with whatever was blessed meanwhile and swaps it in (see `versions::Blessed::bless`).
//!
//! The merge grafts first (Goby's `merge_fast`): walking the base, the transaction's version
//! and the blessed one together, a subtree only one side changed is taken from that side
//! whole. Where both changed the same leaf, or one side split or grew a node (the shapes no
//! longer line up), the transaction's log is replayed over the blessed version instead
//! (`merge_with_log`), which shadows only the paths the log names. A nested transaction
//! derives from its parent's version and commits into it the same way.

use super::node::{Body, Node, Slot};
use super::tree;
use std::sync::Arc;

/// A transaction on the tree.
pub(crate) struct Txn {
    /// The version it derived from.
    base: Arc<Node>,
    /// Its own version: `base` with its writes.
    root: Arc<Node>,
    /// Its writes, in order, for replay.
    log: Vec<Slot>,
    node_size: usize,
    /// Tombstones at or below this may go (see `tree::put`).
    horizon: u64,
}

impl Txn {
    pub fn begin(base: Arc<Node>, node_size: usize, horizon: u64) -> Txn {
        Txn {
            root: base.clone(),
            base,
            log: Vec::new(),
            node_size,
            horizon,
        }
    }

    /// Writes `slot` (a value or a tombstone) into the transaction's version.
    pub fn put(&mut self, slot: Slot) {
        tree::put(&mut self.root, slot.clone(), self.node_size, self.horizon);
        self.log.push(slot);
    }

    /// The transaction's version (what its own reads see).
    pub fn root(&self) -> &Arc<Node> {
        &self.root
    }

    /// Whether it wrote anything.
    pub fn is_empty(&self) -> bool {
        self.log.is_empty()
    }

    /// A transaction nested in this one: it sees this one's writes, and commits into it.
    /// (The engine's savepoints live in its write sets; the tree's own nesting is what a
    /// caller of the tree alone uses, and its tests.)
    #[cfg(test)]
    pub fn nested(&self) -> Txn {
        Txn::begin(self.root.clone(), self.node_size, self.horizon)
    }

    /// Commits nested transaction `child` into this one, merging with what this one wrote
    /// since `child` began.
    #[cfg(test)]
    pub fn commit_nested(&mut self, child: Txn) {
        self.root = child.merge_onto(&self.root);
        self.log.extend(child.log);
    }

    /// This transaction's version merged onto `theirs`, a version derived from its base:
    /// grafted where the two changed different subtrees, else its log replayed over `theirs`.
    pub fn merge_onto(&self, theirs: &Arc<Node>) -> Arc<Node> {
        if Arc::ptr_eq(theirs, &self.base) {
            return self.root.clone();
        }
        if let Some(grafted) = graft(&self.base, &self.root, theirs) {
            return grafted;
        }
        let mut merged = theirs.clone();
        for slot in &self.log {
            tree::put(&mut merged, slot.clone(), self.node_size, self.horizon);
        }
        merged
    }
}

/// The three-way merge of subtrees `mine` and `theirs`, both derived from `base`, by taking
/// whole each subtree only one of them changed; `None` where both changed one leaf or the
/// shapes differ.
fn graft(base: &Arc<Node>, mine: &Arc<Node>, theirs: &Arc<Node>) -> Option<Arc<Node>> {
    if Arc::ptr_eq(mine, base) {
        return Some(theirs.clone());
    }
    if Arc::ptr_eq(theirs, base) || Arc::ptr_eq(mine, theirs) {
        return Some(mine.clone());
    }
    let (
        Body::Interior {
            keys: kb,
            children: cb,
        },
        Body::Interior {
            keys: km,
            children: cm,
        },
        Body::Interior {
            keys: kt,
            children: ct,
        },
    ) = (&base.body, &mine.body, &theirs.body)
    else {
        return None;
    };
    if kb != km || kb != kt {
        return None;
    }
    let children = (0..cb.len())
        .map(|i| graft(&cb[i], &cm[i], &ct[i]))
        .collect::<Option<Vec<_>>>()?;
    Some(Arc::new(Node::new(Body::Interior {
        keys: kb.clone(),
        children,
    })))
}
