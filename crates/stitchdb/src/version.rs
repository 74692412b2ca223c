//! The version: an immutable picture of every table (its memtables, its runs by level, and
//! the read view over them), replaced whole when a table is made, a memtable frozen or runs
//! installed, so readers never lock out writers.

use crate::batch::TableId;
use crate::dtable::{filtered_run, DTable, Overlay};
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
    pub mem: Arc<Memtable>,
    pub imm: Option<Arc<Memtable>>,
    pub levels: Vec<Vec<Arc<Run>>>,
    /// The table's read view: an overlay of the memtables and runs, newest first, each run
    /// behind its quotient filter. Rebuilt whenever the layers change.
    pub view: Arc<Overlay>,
}

impl TableState {
    pub fn new(id: TableId, name: String, stitching: Stitching) -> TableState {
        let mut t = TableState {
            id,
            name,
            stitching,
            mem: Arc::default(),
            imm: None,
            levels: Vec::new(),
            view: Arc::default(),
        };
        t.rebuild_view();
        t
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
        layers.extend(self.runs().map(filtered_run));
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

    pub fn add_table(&mut self, id: TableId, name: String, stitching: Stitching) {
        self.names.insert(name.clone(), id);
        self.tables
            .insert(id, Arc::new(TableState::new(id, name, stitching)));
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
