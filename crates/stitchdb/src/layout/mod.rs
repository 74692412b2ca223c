//! Table layouts: how a table's data is stored, and the seam between them and the engine.
//!
//! A layout is the stack of Anvil dTable modules a table's data goes through ("Modular Data
//! Storage with Anvil", SOSP 2009), written as a short string such as
//! `managed -> bloom(bits=10) -> btree(node=4096) -> linear`, parsed and checked by `spec`
//! ([`LayoutSpec`]: pure code, no I/O). The grammar, every module with its parameters, and the
//! stacking rules: `docs/layouts.md`.
//!
//! The engine (`db/`) sequences commits: the write lock, the log, visibility, snapshots,
//! transactions, when to checkpoint, manifests, locks. What it needs of a table's data is
//! [`TableData`]: apply a commit's writes at its sequence number, the read view, how much is
//! in memory, freeze, write the frozen part out and install it, and what the manifest lists.
//! Each layout is a folder implementing it: the VT-tree (`vtree/`: memtables and levels of
//! stitched runs) and Goby's copy-on-write B+tree (`cowbtree/`). `crate::version::TableState`
//! holds a [`LayoutData`], an enum over them whose arms forward to each one's `TableData`;
//! what only one layout has (runs to merge, stitching, a record cache) the engine reaches
//! through [`LayoutData::vtree`], and says there what the other layout does. A partition
//! (`partition/`) is not one: it cuts a table into regions that are tables of their own, each
//! with its stack, and gives the routing and the read view over them (`crate::version`).
//!
//! Imports go one way: `db/` imports `layout/`, never the reverse; what a layout needs of the
//! engine it is given as parameters ([`WriteOut`]).

pub(crate) mod cowbtree;
mod data;
pub(crate) mod partition;
mod spec;
pub(crate) mod vtree;

pub(crate) use data::LayoutData;

pub use partition::{PartitionSpec, TableLayout};
pub use spec::*;

use crate::entry::Value;
use crate::Result;
use std::sync::Arc;
use stitch_patch::PatchId;
use stitch_zone::Stream;
use vtree::dtable::DTable;
use vtree::run::{FilterChoice, Run, Storage};

/// What the engine needs of one table's data, whatever its layout. The value is copied on
/// write with its `Version`: changes are made to a copy, then
/// [`refresh_view`](Self::refresh_view)ed and published whole.
pub(crate) trait TableData: Clone + Send + Sync {
    /// Applies a range delete of `start..end` at `seq`. A commit's range deletes are applied
    /// before its point writes, which they do not hide (`crate::entry::RangeTombstone`).
    fn delete_range(&self, start: &[u8], end: &[u8], seq: u64);

    /// Applies a put (or, for `None`, a delete) of `key` at `seq`.
    fn write(&self, key: &[u8], seq: u64, value: Value);

    /// The table's read view: every version it holds, to be read at a sequence number.
    fn view(&self) -> Arc<dyn DTable>;

    /// Bytes of writes not yet frozen: a checkpoint is due once a table's reach
    /// `Options::memtable_size`.
    fn unfrozen_bytes(&self) -> usize;

    /// Bytes the table's writes hold in memory, frozen or not.
    fn memory_bytes(&self) -> usize;

    /// Whether there are writes to freeze.
    fn has_unfrozen(&self) -> bool;

    /// Whether writes are frozen and not yet written out.
    fn is_freezing(&self) -> bool;

    /// Freezes the writes so far: they are what the next [`write_frozen`](Self::write_frozen)
    /// writes out, and new writes go on beside them. Only when not [`is_freezing`](Self::is_freezing).
    fn freeze(&mut self);

    /// Writes the frozen writes out (not yet durable: the returned patch writes them), with
    /// what a reader at `out.oldest_reader` or newer cannot see left out; `None` if nothing
    /// is left to write.
    fn write_frozen(&self, out: &WriteOut<'_>) -> Result<Option<(Written, PatchId)>>;

    /// Replaces the frozen writes by what [`write_frozen`](Self::write_frozen) wrote of them.
    fn install_frozen(&mut self, written: Option<Written>);

    /// Takes `runs` (newest first), written elsewhere (a transaction's, or an ingest), in
    /// front of everything written out so far. Returns those of them it does not keep (a
    /// layout without runs has their entries in its own data by then): the next manifest
    /// retires them.
    fn link(&mut self, runs: &[Arc<Run>]) -> Vec<Arc<Run>>;

    /// The runs the table's data is written out in, newest first: what the manifest lists of
    /// it, and what holds its extents (for snapshots, `check`, defragmentation). None for a
    /// layout without runs.
    fn runs(&self) -> impl Iterator<Item = &Arc<Run>>;

    /// Rebuilds the read view after a change.
    fn refresh_view(&mut self);
}

/// What [`TableData::write_frozen`] wrote: a run, or a tree's new root.
pub(crate) enum Written {
    Run(Arc<Run>),
    Root(cowbtree::Durable),
}

impl Written {
    /// Bytes of data written (a run's data blocks; a tree's are counted as its root only).
    pub fn data_bytes(&self) -> u64 {
        match self {
            Written::Run(run) => run.meta.data_bytes,
            Written::Root(root) => root.addr.len as u64,
        }
    }
}

/// What a layout needs of the engine to write a run: a table's frozen writes, or a merge.
pub(crate) struct WriteOut<'a> {
    pub storage: &'a Arc<Storage>,
    /// The id of the run written.
    pub run_id: u64,
    /// The oldest sequence number an open reader may ask for: older versions a newer one
    /// shadows can go.
    pub oldest_reader: u64,
    pub spec: &'a LayoutSpec,
    /// The filter to build, as the store's options resolve the layout's.
    pub filter: FilterChoice,
    /// The zone stream the run is appended to (a merge's: one no other merge appends to
    /// meanwhile).
    pub stream: Stream,
    /// The written B+tree nodes' children, for their release handler.
    pub nodes: &'a Arc<cowbtree::store::NodeRefs>,
}
