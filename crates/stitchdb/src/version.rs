//! The version: an immutable picture of every table (its name, layout and data, see
//! `crate::layout`), replaced whole when a table is made, its writes frozen or written out
//! installed, so readers never lock out writers.
//!
//! A partitioned table (`crate::layout::partition`) is a table whose own data stays empty,
//! and whose regions are tables of their own, made with it: region `i` has the id after the
//! table's plus `i` and a name no user's table can have ([`region_name`]). Each region is
//! flushed, merged, snapshotted and recovered as any table; writes reach them only through
//! [`Version::apply_commit`], which routes each by key, and reads through [`Version::view`].

use crate::batch::TableId;
use crate::entry::Value;
use crate::layout::partition::PartitionView;
use crate::layout::vtree::dtable::DTable;
use crate::layout::vtree::run::Run;
use crate::layout::{LayoutData, PartitionSpec, TableData, TableLayout};
use crate::options::Stitching;
use crate::{Error, Result};
use std::collections::BTreeMap;
use std::sync::Arc;

/// One table: its name, its layout, and its data in that layout (`crate::layout`).
#[derive(Clone)]
pub(crate) struct TableState {
    pub id: TableId,
    pub name: String,
    /// How the table's data is laid out (its runs' filter, block size and format, or its
    /// regions), and what writes it refuses (see `crate::layout`). Fixed when the table is
    /// made.
    pub layout: Arc<TableLayout>,
    pub data: LayoutData,
}

/// An immutable picture of every table; replaced whole (copy on write) when a table is made,
/// writes frozen or written out, so readers never lock out writers.
#[derive(Clone, Default)]
pub(crate) struct Version {
    pub tables: BTreeMap<TableId, Arc<TableState>>,
    pub names: BTreeMap<String, TableId>,
}

/// The id of region `i` (from 0) of the partitioned table `table`.
pub(crate) fn region_id(table: TableId, i: usize) -> TableId {
    TableId(table.0 + 1 + i as u32)
}

/// The name of region `i` (from 0) of the partitioned table `table`: its name, a NUL and the
/// region's number from 1. A user's table name has no NUL ([`is_region`]).
pub(crate) fn region_name(table: &str, i: usize) -> String {
    format!("{table}\u{0}{}", i + 1)
}

/// Whether `name` is a region's: such tables are the partitioned table's, never the user's.
pub(crate) fn is_region(name: &str) -> bool {
    name.contains('\u{0}')
}

/// A table as messages name it: a region as its table's name and its number.
pub(crate) fn table_label(name: &str) -> String {
    match name.split_once('\u{0}') {
        Some((table, region)) => format!("{table} (region {region})"),
        None => name.to_string(),
    }
}

/// The user's table `name` is or is a region of.
pub(crate) fn owner_name(name: &str) -> &str {
    name.split_once('\u{0}').map_or(name, |(table, _)| table)
}

/// How many table ids a table of `layout` takes: its own, and one per region.
pub(crate) fn ids_taken(layout: &TableLayout) -> u32 {
    1 + layout.partition().map_or(0, |p| p.regions.len() as u32)
}

/// The read view of the partitioned table `table` of `spec`, of its regions' views.
pub(crate) fn partition_view(
    table: TableId,
    spec: &Arc<PartitionSpec>,
    region_view: impl Fn(TableId) -> Result<Arc<dyn DTable>>,
) -> Result<Arc<dyn DTable>> {
    let regions = (0..spec.regions.len())
        .map(|i| region_view(region_id(table, i)))
        .collect::<Result<_>>()?;
    Ok(Arc::new(PartitionView::new(spec.clone(), regions)))
}

impl Version {
    pub fn table(&self, id: TableId) -> Result<&Arc<TableState>> {
        self.tables
            .get(&id)
            .ok_or_else(|| Error::NoSuchTable(format!("#{}", id.0)))
    }

    /// Table `id` if a user may name it: not a partitioned table's region, which only
    /// routing reaches.
    pub fn user_table(&self, id: TableId) -> Result<&Arc<TableState>> {
        let t = self.table(id)?;
        match is_region(&t.name) {
            true => Err(Error::NoSuchTable(format!("#{}", id.0))),
            false => Ok(t),
        }
    }

    /// The keys table `id` may hold, if it is a region: its first key, and where it ends
    /// (`None`: at the end).
    pub fn region_keys(&self, id: TableId) -> Option<(&[u8], Option<&[u8]>)> {
        let (table, number) = self.table(id).ok()?.name.split_once('\u{0}')?;
        let parent = self.table(*self.names.get(table)?).ok()?;
        let i = number.parse::<usize>().ok()?.checked_sub(1)?;
        let p = parent.layout.partition()?;
        (i < p.regions.len()).then(|| p.region_range(i))
    }

    /// User table `id` and, if it is partitioned, its regions.
    pub fn with_regions(&self, id: TableId) -> Result<Vec<TableId>> {
        let t = self.user_table(id)?;
        let regions = t.layout.partition().map_or(0, |p| p.regions.len());
        Ok(std::iter::once(id)
            .chain((0..regions).map(|i| region_id(id, i)))
            .collect())
    }

    /// The table that holds `key` of table `id`: the region it is in, for a partitioned one.
    pub fn route(&self, id: TableId, key: &[u8]) -> Result<&Arc<TableState>> {
        self.route_in(self.table(id)?, key)
    }

    /// The table that holds `key` of table `t`, found already (one lookup less on the paths
    /// every write and point read take).
    pub fn route_in<'a>(
        &'a self,
        t: &'a Arc<TableState>,
        key: &[u8],
    ) -> Result<&'a Arc<TableState>> {
        match t.layout.partition() {
            Some(p) => self.table(region_id(t.id, p.region_of(key))),
            None => Ok(t),
        }
    }

    /// The read view of user table `id`: a partitioned table's regions' views, concatenated.
    pub fn view(&self, id: TableId) -> Result<Arc<dyn DTable>> {
        let t = self.user_table(id)?;
        match t.layout.partition() {
            Some(p) => partition_view(id, p, |region| Ok(self.table(region)?.data.view())),
            None => Ok(t.data.view()),
        }
    }

    /// The read view that answers for `key` of user table `id`: for a partitioned table, its
    /// key's region's alone (a point read need not build the whole table's view).
    pub fn key_view(&self, id: TableId, key: &[u8]) -> Result<Arc<dyn DTable>> {
        Ok(self.route_in(self.user_table(id)?, key)?.data.view())
    }

    /// `runs` (newest first) put in front of table `id`'s, by the table that takes them, in
    /// order: a partitioned table's region holding their keys (a transaction spills a run per
    /// region: `txn::spill`).
    pub fn holders(&self, id: TableId, runs: &[Arc<Run>]) -> Vec<(TableId, Vec<Arc<Run>>)> {
        let Some(p) = self.table(id).ok().and_then(|t| t.layout.partition()) else {
            return vec![(id, runs.to_vec())];
        };
        let mut by_region: BTreeMap<TableId, Vec<Arc<Run>>> = BTreeMap::new();
        for run in runs {
            let region = run.some_key().map_or(0, |key| p.region_of(key));
            by_region
                .entry(region_id(id, region))
                .or_default()
                .push(run.clone());
        }
        by_region.into_iter().collect()
    }

    /// Adds table `id` of `layout`, and for a partitioned one its regions (each a table of its
    /// stack, at the ids after `id`).
    pub fn add_table(
        &mut self,
        id: TableId,
        name: String,
        stitching: Stitching,
        layout: Arc<TableLayout>,
    ) {
        if let Some(p) = layout.partition() {
            for (i, stack) in p.regions.iter().enumerate() {
                let stack = Arc::new(TableLayout::Stack(stack.clone()));
                self.insert(region_id(id, i), region_name(&name, i), stitching, stack);
            }
        }
        self.insert(id, name, stitching, layout);
    }

    fn insert(
        &mut self,
        id: TableId,
        name: String,
        stitching: Stitching,
        layout: Arc<TableLayout>,
    ) {
        self.names.insert(name.clone(), id);
        let data = LayoutData::new(&layout, stitching);
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
    /// replay both apply commits through this; it sends each write of a partitioned table to
    /// the region holding its key, and each range delete to the regions it reaches, cut at
    /// their boundaries. A table whose layout publishes a commit's writes as one new version
    /// (a B+tree) does so at the end, keeping the versions a reader at `oldest_reader()` (asked
    /// only then) may still read.
    pub fn apply_commit<'a, K: AsRef<[u8]>>(
        &self,
        seq: u64,
        ranges: impl IntoIterator<Item = (TableId, &'a [u8], &'a [u8])>,
        ops: impl IntoIterator<Item = (TableId, K, Value)>,
        oldest_reader: impl FnOnce() -> u64,
    ) -> Result<()> {
        // The B+trees written, to publish at the end (few: a commit writes few tables).
        let mut trees: Vec<Arc<TableState>> = Vec::new();
        let mut note = |t: &Arc<TableState>| {
            if t.data.cow_btree().is_some() && !trees.iter().any(|w| Arc::ptr_eq(w, t)) {
                trees.push(t.clone());
            }
        };
        for (table, start, end) in ranges {
            let t = self.table(table)?;
            match t.layout.partition() {
                Some(p) => {
                    for (i, start, end) in p.split_range(start, end) {
                        self.table(region_id(table, i))?
                            .data
                            .delete_range(start, end, seq);
                    }
                }
                None => {
                    t.data.delete_range(start, end, seq);
                    note(t);
                }
            }
        }
        for (table, key, value) in ops {
            let key = key.as_ref();
            let t = self.route(table, key)?;
            t.data.write(key, seq, value);
            note(t);
        }
        if !trees.is_empty() {
            let oldest = oldest_reader();
            for t in trees {
                t.data.publish(seq, oldest);
            }
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
