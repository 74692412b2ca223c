//! The VT-tree layout: a memtable, then levels of sorted runs merged by stitching.
//!
//! [`VTree`] is a table's data in this layout: the live memtable, the frozen one being
//! written out, the runs by level, and the read view over them. It is a value, copied on
//! write with the rest of the [`crate::version::Version`] (the memtables and runs are shared
//! through `Arc`s), so readers never lock out writers.
//!
//! * `memtable`: the concurrent skip list a table's writes go into.
//! * `run/`: sorted runs on disk (blocks, index, filters, read cache, builder, the stitching
//!   merge).
//! * `dtable/`: the dTable interface, filters in front of runs, the overlay read view.
//! * `compaction`, `defrag`, `ingest`: the layout's halves of merging, of evacuating zones
//!   (which runs, and how they are merged or rewritten) and of ingesting a batch as a run;
//!   `db/` keeps the locks, the oldest reader, installing and the manifest.

pub(crate) mod compaction;
pub(crate) mod defrag;
pub(crate) mod dtable;
pub(crate) mod ingest;
pub(crate) mod memtable;
pub(crate) mod run;

use super::{LayoutSpec, TableData, WriteOut, Written};
use crate::entry::Value;
use crate::merge_iter::VersionFilter;
use crate::options::Stitching;
use crate::Result;
use dtable::{filtered_run, DTable, Overlay, RecordCache};
use memtable::{MemIter, Memtable};
use run::{BlockLayout, Run, RunBuilder};
use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::Arc;
use stitch_patch::PatchId;

/// One table's data: its live memtable, the one being written out (if a checkpoint is
/// running), and its runs by level (level 0 first; newest first within a level, and every run
/// of a level is newer than every run of the levels below it).
#[derive(Clone)]
pub(crate) struct VTree {
    /// How the table's merges stitch (`Options::stitching` when it was made, changed by
    /// `Db::set_stitching`); listed in the manifest.
    pub stitching: Stitching,
    mem: Arc<Memtable>,
    imm: Option<Arc<Memtable>>,
    pub levels: Vec<Vec<Arc<Run>>>,
    /// Point lookups found in the runs, if the layout has a `cache` (shared by every copy
    /// of the table's state: entries stay valid while the runs they came from are read).
    pub cache: Option<Arc<RecordCache>>,
    /// The read view: an overlay of the memtables and runs, newest first, each run behind its
    /// filter. Rebuilt whenever the layers change.
    view: Arc<Overlay>,
}

impl VTree {
    /// A table laid out as `spec` of `levels` of runs and empty memtables: a new table, or
    /// one opened from a manifest or a named snapshot.
    pub fn new(spec: &LayoutSpec, stitching: Stitching, levels: Vec<Vec<Arc<Run>>>) -> VTree {
        let mut t = VTree {
            stitching,
            mem: Arc::default(),
            imm: None,
            levels,
            cache: spec.cache.map(|c| Arc::new(RecordCache::new(c.keys))),
            view: Arc::default(),
        };
        t.rebuild_view();
        t
    }

    /// How merges of the table stitch: as set, unless its layout's filter cannot be merged
    /// from its inputs' (a Bloom filter), when every merge copies.
    pub fn merge_stitching(&self, spec: &LayoutSpec) -> Stitching {
        match spec.stitches() {
            true => self.stitching,
            false => Stitching::Never,
        }
    }

    /// The newest sequence number a run replacing the layers from `first` on (the frozen
    /// memtable, for `None`) may give versions it stores without their own: below every
    /// version in front of them (the live memtable, and for a merge the frozen one and the
    /// runs before `first`). A layer in front may hold versions older than some behind it
    /// (an ingested or linked run is newer than memtable versions of other keys), and a
    /// scan orders a key's versions by sequence number across layers (see `run::format`).
    pub fn seq_bound_before(&self, first: Option<&Arc<Run>>) -> u64 {
        let mut bound = self.mem.min_seq();
        if let Some(first) = first {
            bound = self.imm.as_ref().map_or(bound, |m| bound.min(m.min_seq()));
            for run in self.runs().take_while(|r| !Arc::ptr_eq(r, first)) {
                bound = bound.min(run.meta.seq_override.unwrap_or(run.meta.min_seq));
            }
        }
        bound.saturating_sub(1)
    }

    /// Puts `run` in front of its level (the newest run there).
    pub fn add_run(&mut self, run: Arc<Run>) {
        let level = run.meta.level as usize;
        if self.levels.len() <= level {
            self.levels.resize_with(level + 1, Vec::new);
        }
        self.levels[level].insert(0, run);
    }

    /// The keys the memtables hold in `first..=last`, if there are at most `limit`
    /// (`None`: more). A run ingested behind the memtables must not hold these keys: a
    /// reader would find the memtable's older version first.
    pub fn memtable_keys_in(
        &self,
        first: &[u8],
        last: &[u8],
        limit: usize,
    ) -> Option<BTreeSet<Vec<u8>>> {
        let mut keys = BTreeSet::new();
        for mem in std::iter::once(&self.mem).chain(&self.imm) {
            for e in MemIter::new(mem.clone(), Bound::Included(first), Bound::Included(last)) {
                keys.insert(e.key);
                if keys.len() > limit {
                    return None;
                }
            }
        }
        Some(keys)
    }

    /// Runs waiting to be merged: in each level, the runs beyond the `at_rest` a level holds.
    pub fn merge_debt(&self, at_rest: usize) -> usize {
        self.levels
            .iter()
            .map(|l| l.len().saturating_sub(at_rest))
            .sum()
    }

    fn rebuild_view(&mut self) {
        let mut layers: Vec<Arc<dyn DTable>> = vec![Arc::new(self.mem.clone())];
        layers.extend(
            self.imm
                .iter()
                .map(|m| Arc::new(m.clone()) as Arc<dyn DTable>),
        );
        layers.extend(
            self.runs()
                .map(|run| filtered_run(run, self.cache.as_ref())),
        );
        self.view = Arc::new(Overlay::new(layers));
    }
}

impl TableData for VTree {
    fn delete_range(&self, start: &[u8], end: &[u8], seq: u64) {
        self.mem.delete_range(start, end, seq);
    }

    fn write(&self, key: &[u8], seq: u64, value: Value) {
        self.mem.insert(key, seq, value);
    }

    fn view(&self) -> Arc<dyn DTable> {
        self.view.clone()
    }

    fn unfrozen_bytes(&self) -> usize {
        self.mem.bytes()
    }

    fn memory_bytes(&self) -> usize {
        self.mem.bytes() + self.imm.as_ref().map_or(0, |m| m.bytes())
    }

    fn has_unfrozen(&self) -> bool {
        !self.mem.is_empty()
    }

    fn is_freezing(&self) -> bool {
        self.imm.is_some()
    }

    fn freeze(&mut self) {
        self.imm = Some(std::mem::take(&mut self.mem));
    }

    /// The frozen memtable as one level-0 run, without the versions no reader can see.
    fn write_frozen(&self, out: &WriteOut<'_>) -> Result<Option<(Written, PatchId)>> {
        let Some(imm) = &self.imm else {
            return Ok(None);
        };
        let mut builder = RunBuilder::new(out.storage, out.run_id, 0, out.stream);
        builder.expect_bytes(imm.bytes() as u64);
        let ranges = imm.range_deletes();
        builder.set_range_tombstones(ranges.tombstones().cloned().collect());
        let horizon = out.oldest_reader.min(self.seq_bound_before(None));
        builder.set_layout(BlockLayout::of(out.spec), horizon, ranges.clone());
        builder.filter_keys(out.filter);
        let mut versions = VersionFilter::new(out.oldest_reader, false, ranges);
        imm.for_each(|e| {
            if !versions.keep(e.key, e.seq, e.value.is_none()) {
                return Ok(());
            }
            builder.add(e)
        })?;
        let filter = builder.key_filter();
        Ok(builder
            .finish(filter)?
            .map(|(run, patch)| (Written::Run(run), patch)))
    }

    /// The run replaces the frozen memtable, in front of level 0.
    fn install_frozen(&mut self, written: Option<Written>) {
        self.imm = None;
        if let Some(Written::Run(run)) = written {
            self.add_run(run);
        }
    }

    fn link(&mut self, runs: &[Arc<Run>]) -> Vec<Arc<Run>> {
        for run in runs.iter().rev() {
            self.add_run(run.clone());
        }
        Vec::new()
    }

    fn runs(&self) -> impl Iterator<Item = &Arc<Run>> {
        self.levels.iter().flatten()
    }

    fn refresh_view(&mut self) {
        self.rebuild_view();
    }
}
