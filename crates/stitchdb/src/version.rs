//! The version: an immutable picture of every table (its name, layout and data, see
//! `crate::layout`), replaced whole when a table is made, its writes frozen or written out
//! installed, so readers never lock out writers.

use crate::batch::TableId;
use crate::entry::Value;
use crate::layout::vtree::VTree;
use crate::layout::{LayoutSpec, TableData};
use crate::options::Stitching;
use crate::{Error, Result};
use std::collections::BTreeMap;
use std::sync::Arc;

/// One table: its name, its layout, and its data in that layout (`crate::layout`).
#[derive(Clone)]
pub(crate) struct TableState {
    pub id: TableId,
    pub name: String,
    /// How the table's data is laid out (its runs' filter, block size and format), and what
    /// writes it refuses (see `crate::layout`). Fixed when the table is made.
    pub layout: Arc<LayoutSpec>,
    pub data: VTree,
}

/// An immutable picture of every table; replaced whole (copy on write) when a table is made,
/// writes frozen or written out, so readers never lock out writers.
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
        let data = VTree::new(&layout, stitching, Vec::new());
        let table = TableState {
            id,
            name,
            layout,
            data,
        };
        self.tables.insert(id, Arc::new(table));
    }

    /// Applies one commit's writes to the tables' data, every one at `seq` (readers see
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
            self.table(table)?.data.delete_range(start, end, seq);
        }
        for (table, key, value) in ops {
            self.table(table)?.data.write(key.as_ref(), seq, value);
        }
        Ok(())
    }

    /// Replaces table `id` with a changed copy.
    pub fn update(&mut self, id: TableId, change: impl FnOnce(&mut TableState)) {
        if let Some(t) = self.tables.get_mut(&id) {
            let mut changed = (**t).clone();
            change(&mut changed);
            changed.data.refresh_view();
            *t = Arc::new(changed);
        }
    }
}
