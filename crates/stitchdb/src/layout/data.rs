//! [`LayoutData`]: a table's data in whichever layout it was made with, forwarding the
//! engine's [`TableData`] calls to that layout.

use super::cowbtree::{CowBTree, Durable};
use super::vtree::dtable::DTable;
use super::vtree::run::Run;
use super::vtree::VTree;
use super::{TableData, TableLayout, WriteOut, Written};
use crate::entry::Value;
use crate::options::Stitching;
use crate::Result;
use std::collections::BTreeSet;
use std::sync::Arc;
use stitch_patch::PatchId;

/// One table's data, in its layout.
#[derive(Clone)]
pub(crate) enum LayoutData {
    VTree(VTree),
    CowBTree(CowBTree),
}

impl LayoutData {
    /// An empty table of `layout`.
    pub fn new(layout: &TableLayout, stitching: Stitching) -> LayoutData {
        match layout.cow_btree() {
            Some(spec) => LayoutData::CowBTree(CowBTree::new(spec.node, None)),
            None => LayoutData::VTree(VTree::new(layout.stack(), stitching, Vec::new())),
        }
    }

    /// A table of `layout` holding what a manifest or a named snapshot lists: `levels` of
    /// runs for a VT-tree, a written root for a B+tree.
    pub fn opened(
        layout: &TableLayout,
        stitching: Stitching,
        levels: Vec<Vec<Arc<Run>>>,
        root: Option<Durable>,
    ) -> LayoutData {
        match layout.cow_btree() {
            Some(spec) => LayoutData::CowBTree(CowBTree::new(spec.node, root)),
            None => LayoutData::VTree(VTree::new(layout.stack(), stitching, levels)),
        }
    }

    /// The VT-tree, for what only it has (runs by level, merges, stitching, a record cache).
    pub fn vtree(&self) -> Option<&VTree> {
        match self {
            LayoutData::VTree(v) => Some(v),
            LayoutData::CowBTree(_) => None,
        }
    }

    pub fn vtree_mut(&mut self) -> Option<&mut VTree> {
        match self {
            LayoutData::VTree(v) => Some(v),
            LayoutData::CowBTree(_) => None,
        }
    }

    /// The B+tree, for what only it has (versions, a written root).
    pub fn cow_btree(&self) -> Option<&CowBTree> {
        match self {
            LayoutData::VTree(_) => None,
            LayoutData::CowBTree(c) => Some(c),
        }
    }

    /// How the table's merges stitch, as the manifest lists it (a B+tree merges nothing: it
    /// lists the default).
    pub fn stitching(&self) -> Stitching {
        match self {
            LayoutData::VTree(v) => v.stitching,
            LayoutData::CowBTree(_) => Stitching::default(),
        }
    }

    /// Runs waiting to be merged (a B+tree has none).
    pub fn merge_debt(&self, at_rest: usize) -> usize {
        self.vtree().map_or(0, |v| v.merge_debt(at_rest))
    }

    /// The keys written in `first..=last` not yet in runs, if at most `limit`; `None` also
    /// for a layout that takes no ingested run (a B+tree: the batch is written the ordinary
    /// way).
    pub fn memtable_keys_in(
        &self,
        first: &[u8],
        last: &[u8],
        limit: usize,
    ) -> Option<BTreeSet<Vec<u8>>> {
        self.vtree()?.memtable_keys_in(first, last, limit)
    }

    /// Ends the commit at `seq` whose writes were just applied: a B+tree blesses them as its
    /// new version, keeping those a reader at `oldest_reader` may read. A VT-tree's writes
    /// are in its memtable already.
    pub fn publish(&self, seq: u64, oldest_reader: u64) {
        if let LayoutData::CowBTree(c) = self {
            c.publish(seq, oldest_reader);
        }
    }

    /// Takes a linked transaction's runs (oldest first, each with its commit's sequence
    /// number) into the table's data now, for a layout that keeps no runs (`true`: a B+tree,
    /// see [`CowBTree::absorb`]); a VT-tree keeps the runs themselves, linked later.
    pub fn absorb(&self, runs: &[(u64, Arc<Run>)], oldest_reader: u64) -> Result<bool> {
        match self {
            LayoutData::VTree(_) => Ok(false),
            LayoutData::CowBTree(c) => c.absorb(runs, oldest_reader).map(|()| true),
        }
    }
}

impl TableData for LayoutData {
    fn delete_range(&self, start: &[u8], end: &[u8], seq: u64) {
        match self {
            LayoutData::VTree(v) => v.delete_range(start, end, seq),
            LayoutData::CowBTree(c) => c.delete_range(start, end, seq),
        }
    }

    fn write(&self, key: &[u8], seq: u64, value: Value) {
        match self {
            LayoutData::VTree(v) => v.write(key, seq, value),
            LayoutData::CowBTree(c) => c.write(key, seq, value),
        }
    }

    fn view(&self) -> Arc<dyn DTable> {
        match self {
            LayoutData::VTree(v) => v.view(),
            LayoutData::CowBTree(c) => c.view(),
        }
    }

    fn unfrozen_bytes(&self) -> usize {
        match self {
            LayoutData::VTree(v) => v.unfrozen_bytes(),
            LayoutData::CowBTree(c) => c.unfrozen_bytes(),
        }
    }

    fn memory_bytes(&self) -> usize {
        match self {
            LayoutData::VTree(v) => v.memory_bytes(),
            LayoutData::CowBTree(c) => c.memory_bytes(),
        }
    }

    fn has_unfrozen(&self) -> bool {
        match self {
            LayoutData::VTree(v) => v.has_unfrozen(),
            LayoutData::CowBTree(c) => c.has_unfrozen(),
        }
    }

    fn is_freezing(&self) -> bool {
        match self {
            LayoutData::VTree(v) => v.is_freezing(),
            LayoutData::CowBTree(c) => c.is_freezing(),
        }
    }

    fn freeze(&mut self) {
        match self {
            LayoutData::VTree(v) => v.freeze(),
            LayoutData::CowBTree(c) => c.freeze(),
        }
    }

    fn write_frozen(&self, out: &WriteOut<'_>) -> Result<Option<(Written, PatchId)>> {
        match self {
            LayoutData::VTree(v) => v.write_frozen(out),
            LayoutData::CowBTree(c) => c.write_frozen(out),
        }
    }

    fn install_frozen(&mut self, written: Option<Written>) {
        match self {
            LayoutData::VTree(v) => v.install_frozen(written),
            LayoutData::CowBTree(c) => c.install_frozen(written),
        }
    }

    fn link(&mut self, runs: &[Arc<Run>]) -> Vec<Arc<Run>> {
        match self {
            LayoutData::VTree(v) => v.link(runs),
            LayoutData::CowBTree(c) => c.link(runs),
        }
    }

    fn runs(&self) -> impl Iterator<Item = &Arc<Run>> {
        let runs: Box<dyn Iterator<Item = &Arc<Run>>> = match self {
            LayoutData::VTree(v) => Box::new(v.runs()),
            LayoutData::CowBTree(c) => Box::new(c.runs()),
        };
        runs
    }

    fn refresh_view(&mut self) {
        match self {
            LayoutData::VTree(v) => v.refresh_view(),
            LayoutData::CowBTree(c) => c.refresh_view(),
        }
    }
}
