//! The version: an immutable picture of every table (its memtables, its runs by level, and
//! the read view over them), replaced whole when a table is made, a memtable frozen or runs
//! installed, so readers never lock out writers.

use crate::batch::TableId;
use crate::dtable::{filtered_run, DTable, Overlay, RecordCache};
use crate::entry::Value;
use crate::layout::LayoutSpec;
use crate::memtable::Memtable;
use crate::options::Stitching;
use crate::run::Run;
use crate::{Error, Result};
use std::collections::BTreeMap;
use std::sync::Arc;

/// One table: its live memtable, the one being written out (if a checkpoint is running), and
/// its runs by level (level 0 first; newest first within a level, and every run of a level is
/// newer than every run of the levels below it).
#[derive(Clone)]
pub(crate) struct TableState {
    pub id: TableId,
    pub name: String,
    pub stitching: Stitching,
    /// How the table's runs are written (their filter, block size and format), and what
    /// writes it refuses (see `crate::layout`). Fixed when the table is made.
    pub layout: Arc<LayoutSpec>,
    pub mem: Arc<Memtable>,
    pub imm: Option<Arc<Memtable>>,
    pub levels: Vec<Vec<Arc<Run>>>,
    /// Point lookups found in the runs, if the layout has a `cache` (shared by every copy
    /// of the table's state: entries stay valid while the runs they came from are read).
    pub cache: Option<Arc<RecordCache>>,
    /// The table's read view: an overlay of the memtables and runs, newest first, each run
    /// behind its quotient filter. Rebuilt whenever the layers change.
    pub view: Arc<Overlay>,
}

impl TableState {
    pub fn new(
        id: TableId,
        name: String,
        stitching: Stitching,
        layout: Arc<LayoutSpec>,
    ) -> TableState {
        let cache = layout.cache.map(|c| Arc::new(RecordCache::new(c.keys)));
        let mut t = TableState {
            id,
            name,
            stitching,
            layout,
            cache,
            mem: Arc::default(),
            imm: None,
            levels: Vec::new(),
            view: Arc::default(),
        };
        t.rebuild_view();
        t
    }

    /// How merges of the table stitch: as set, unless its layout's filter cannot be merged
    /// from its inputs' (a Bloom filter), when every merge copies.
    pub fn merge_stitching(&self) -> Stitching {
        match self.layout.stitches() {
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

    /// Every run, newest first.
    pub fn runs(&self) -> impl Iterator<Item = &Arc<Run>> {
        self.levels.iter().flatten()
    }

    pub fn rebuild_view(&mut self) {
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

/// An immutable picture of every table; replaced whole (copy on write) when a table is made,
/// a memtable frozen or runs installed, so readers never lock out writers.
#[derive(Clone, Default)]
pub(crate) struct Version {
    pub tables: BTreeMap<TableId, Arc<TableState>>,
    pub names: BTreeMap<String, TableId>,
}

impl Version {
    pub fn table(&self, id: TableId) -> Result<&Arc<TableState>> {
        self.tables
            .get(&id)
            .ok_or_else(|| Error::NoSuchTable(format!("#{}", id.0)))
    }

    pub fn add_table(
        &mut self,
        id: TableId,
        name: String,
        stitching: Stitching,
        layout: Arc<LayoutSpec>,
    ) {
        self.names.insert(name.clone(), id);
        self.tables
            .insert(id, Arc::new(TableState::new(id, name, stitching, layout)));
    }

    /// Applies one commit's writes to the tables' memtables, every one at `seq` (readers see
    /// all or none): its range deletes first, then its puts and deletes, which a range
    /// delete of the same commit does not hide (see `RangeTombstone`). The write path and
    /// replay both apply commits through this.
    pub fn apply_commit<'a, K: AsRef<[u8]>>(
        &self,
        seq: u64,
        ranges: impl IntoIterator<Item = (TableId, &'a [u8], &'a [u8])>,
        ops: impl IntoIterator<Item = (TableId, K, Value)>,
    ) -> Result<()> {
        for (table, start, end) in ranges {
            self.table(table)?.mem.delete_range(start, end, seq);
        }
        for (table, key, value) in ops {
            self.table(table)?.mem.insert(key.as_ref(), seq, value);
        }
        Ok(())
    }

    /// Replaces table `id` with a changed copy.
    pub fn update(&mut self, id: TableId, change: impl FnOnce(&mut TableState)) {
        if let Some(t) = self.tables.get_mut(&id) {
            let mut changed = (**t).clone();
            change(&mut changed);
            changed.rebuild_view();
            *t = Arc::new(changed);
        }
    }
}
