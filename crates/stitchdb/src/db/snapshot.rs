//! Named snapshots: the tables as they were at one commit, kept across restarts until
//! dropped. Taking one checkpoints (so every commit up to it is in runs) and records, in the
//! manifest, the runs each table had. Those runs are the mainline's own: the snapshot holds
//! references to them, not copies, so it costs nothing until merges retire them from the
//! mainline, and then only the extents no newer run shares (stitched blocks stay shared).

use super::checkpoint::{self, Trigger};
use super::read::{scan_view, DbIter, LargeLookup};
use super::Db;
use crate::batch::TableId;
use crate::layout::cowbtree::Durable;
use crate::layout::vtree::dtable::DTable;
use crate::layout::vtree::run::Run;
use crate::layout::LayoutData;
use crate::layout::TableData;
use crate::layout::TableLayout;
use crate::manifest::{SnapshotMeta, TableMeta};
use crate::options::Stitching;
use crate::version::{is_region, partition_view};
use crate::{Error, Result};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use stitch_zone::ExtentAddr;

const MAX_SNAPSHOT_NAME: usize = 255;

/// What a snapshot holds: for each table, its runs by level (as the mainline had them).
#[derive(Debug)]
pub(crate) struct NamedSnapshot {
    pub seq: u64,
    pub tables: Vec<SnapshotTable>,
}

#[derive(Debug)]
pub(crate) struct SnapshotTable {
    pub id: TableId,
    pub name: String,
    pub stitching: Stitching,
    pub layout: Arc<TableLayout>,
    pub levels: Vec<Vec<Arc<Run>>>,
    /// A B+tree's written root, pinned by one reference of the snapshot's own.
    pub root: Option<Durable>,
}

impl NamedSnapshot {
    /// Every run the snapshot holds.
    pub fn runs(&self) -> impl Iterator<Item = &Arc<Run>> {
        self.tables.iter().flat_map(|t| t.levels.iter().flatten())
    }

    /// The B+tree roots the snapshot pins.
    pub fn roots(&self) -> impl Iterator<Item = ExtentAddr> + '_ {
        self.tables
            .iter()
            .filter_map(|t| t.root.as_ref().map(|r| r.addr))
    }

    pub fn meta(&self, name: &str) -> SnapshotMeta {
        SnapshotMeta {
            name: name.to_string(),
            seq: self.seq,
            tables: self
                .tables
                .iter()
                .map(|t| TableMeta {
                    id: t.id,
                    name: t.name.clone(),
                    stitching: t.stitching,
                    layout: t.layout.to_string(),
                    runs: t.levels.iter().flatten().map(|r| r.meta.clone()).collect(),
                    root: t.root.as_ref().map(|r| r.addr),
                })
                .collect(),
        }
    }

    fn info(&self, name: &str) -> SnapshotInfo {
        let runs = || self.runs();
        SnapshotInfo {
            name: name.to_string(),
            seq: self.seq,
            tables: self
                .tables
                .iter()
                .filter(|t| !is_region(&t.name))
                .map(|t| t.name.clone())
                .collect(),
            runs: runs().count(),
            entries: runs().map(|r| r.meta.entries).sum(),
            data_bytes: runs().map(|r| r.meta.data_bytes).sum(),
        }
    }
}

/// A named snapshot, as [`Db::snapshots`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotInfo {
    /// The snapshot's name.
    pub name: String,
    /// Every commit up to this sequence number, and none after, is in the snapshot.
    pub seq: u64,
    /// Its tables' names, sorted.
    pub tables: Vec<String>,
    /// Runs it holds.
    pub runs: usize,
    /// Entries and key and value bytes in its runs (old versions included).
    pub entries: u64,
    /// Key and value bytes in its runs.
    pub data_bytes: u64,
}

/// A named snapshot opened for reading: the tables as they were when it was taken. It keeps
/// what it reads alive even if the snapshot is dropped meanwhile.
pub struct Snapshot {
    name: String,
    held: Arc<NamedSnapshot>,
    views: BTreeMap<TableId, Arc<dyn DTable>>,
    inner: Arc<super::Inner>,
}

impl Snapshot {
    /// The snapshot's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every commit up to this sequence number, and none after, is in the snapshot.
    pub fn seq(&self) -> u64 {
        self.held.seq
    }

    /// The names of the snapshot's tables, sorted.
    pub fn tables(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .held
            .tables
            .iter()
            .filter(|t| !is_region(&t.name) && !super::large::is_hidden(&t.name))
            .map(|t| t.name.clone())
            .collect();
        names.sort();
        names
    }

    /// The layout of the snapshot's table called `name` (as `Db::table_layout` gives it).
    pub fn table_layout(&self, name: &str) -> Result<String> {
        self.table(name)?;
        let t = self.held.tables.iter().find(|t| t.name == name);
        Ok(t.map(|t| t.layout.to_string()).unwrap_or_default())
    }

    /// The snapshot's table called `name`.
    pub fn table(&self, name: &str) -> Result<TableId> {
        self.held
            .tables
            .iter()
            .find(|t| t.name == name && !is_region(name))
            .map(|t| t.id)
            .ok_or_else(|| Error::NoSuchTable(format!("{name} (in snapshot {:?})", self.name)))
    }

    fn view(&self, table: TableId) -> Result<&Arc<dyn DTable>> {
        self.views.get(&table).ok_or_else(|| {
            Error::NoSuchTable(format!("#{} (in snapshot {:?})", table.0, self.name))
        })
    }

    /// The value of `key` in `table` as the snapshot holds it.
    pub fn get(&self, table: TableId, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        match self.find(table, key.as_ref())? {
            Some(found) => found.into_bytes(&self.inner).map(Some),
            None => Ok(None),
        }
    }

    /// Bytes `offset..offset + len` of `key`'s value as the snapshot holds it (see
    /// [`Db::get_range`]).
    pub fn get_range(
        &self,
        table: TableId,
        key: impl AsRef<[u8]>,
        offset: u64,
        len: u64,
    ) -> Result<Option<Vec<u8>>> {
        match self.find(table, key.as_ref())? {
            Some(found) => found.range(&self.inner, offset, len).map(Some),
            None => Ok(None),
        }
    }

    /// A reader over `key`'s value as the snapshot holds it.
    pub fn value_reader(
        &self,
        table: TableId,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<super::ValueReader>> {
        let found = self.find(table, key.as_ref())?;
        Ok(found.map(|f| super::ValueReader::new(self.inner.clone(), f)))
    }

    fn find(&self, table: TableId, key: &[u8]) -> Result<Option<super::large::Found>> {
        let views = (&**self.view(table)?, self.hidden_view(table));
        let label = || format!("snapshot {:?}, table #{}", self.name, table.0);
        super::large::find_in(&self.inner, views, key, u64::MAX, label)
    }

    /// The view of `table`'s hidden table of large values, if the snapshot holds one.
    fn hidden_view(&self, table: TableId) -> Option<&Arc<dyn DTable>> {
        let name = super::large::hidden_name(table);
        let t = self.held.tables.iter().find(|t| t.name == name)?;
        self.views.get(&t.id)
    }

    /// The pairs with keys in `(start, end)`, in key order.
    pub fn range(&self, table: TableId, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Result<DbIter> {
        self.scan(table, start, end, false)
    }

    /// The pairs with keys in `(start, end)`, in descending key order.
    pub fn range_rev(
        &self,
        table: TableId,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
    ) -> Result<DbIter> {
        self.scan(table, start, end, true)
    }

    fn scan(
        &self,
        table: TableId,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
    ) -> Result<DbIter> {
        let view = self.view(table)?;
        let iter = scan_view(&**view, start, end, reverse, u64::MAX, None);
        Ok(
            iter.with_large(self.hidden_view(table).map(|hidden| LargeLookup {
                inner: self.inner.clone(),
                hidden: hidden.clone(),
                snapshot: u64::MAX,
            })),
        )
    }
}

fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_SNAPSHOT_NAME {
        return Err(Error::BadSnapshotName(
            name.to_string(),
            "must be 1 to 255 bytes",
        ));
    }
    Ok(())
}

impl Db {
    /// Takes a named snapshot of every table, durable when this returns. Names are unique.
    pub fn snapshot(&self, name: &str) -> Result<SnapshotInfo> {
        check_name(name)?;
        let inner = &self.inner;
        inner.check_writable()?;
        if inner.checkpoint.lock().snapshots.contains_key(name) {
            return Err(Error::SnapshotExists(name.to_string()));
        }
        checkpoint::checkpoint(inner, Trigger::Explicit)?;
        // Under the checkpoint lock the runs hold exactly the commits up to the newest
        // checkpoint: only a checkpoint adds runs with new commits, and merges only reshape.
        let mut ck = inner.checkpoint.lock();
        if ck.snapshots.contains_key(name) {
            return Err(Error::SnapshotExists(name.to_string()));
        }
        let version = inner.version.read().clone();
        let held = Arc::new(NamedSnapshot {
            seq: ck.checkpoint_lsn,
            tables: version
                .tables
                .values()
                .map(|t| SnapshotTable {
                    id: t.id,
                    name: t.name.clone(),
                    stitching: t.data.stitching(),
                    layout: t.layout.clone(),
                    levels: t.data.vtree().map_or_else(Vec::new, |v| v.levels.clone()),
                    root: t.data.cow_btree().and_then(|c| c.durable().cloned()),
                })
                .collect(),
        });
        // A B+tree's root costs the snapshot one reference.
        let pins: Vec<_> = held.roots().collect();
        inner.zones.incref_all(&pins)?;
        ck.snapshots.insert(name.to_string(), held.clone());
        let written = checkpoint::write_manifest(inner, &mut ck, &version, &[], Vec::new());
        if written.is_err() {
            ck.snapshots.remove(name);
            if let Err(e) = inner.zones.decref_all(pins) {
                tracing::error!("unpinning the roots of snapshot {name}: {e}");
            }
        }
        inner.guard(written)?;
        Ok(held.info(name))
    }

    /// The named snapshots, by name.
    pub fn snapshots(&self) -> Vec<SnapshotInfo> {
        let ck = self.inner.checkpoint.lock();
        ck.snapshots.iter().map(|(n, s)| s.info(n)).collect()
    }

    /// Opens the snapshot called `name` for reading.
    pub fn open_snapshot(&self, name: &str) -> Result<Snapshot> {
        let held = self
            .inner
            .checkpoint
            .lock()
            .snapshots
            .get(name)
            .cloned()
            .ok_or_else(|| Error::NoSuchSnapshot(name.to_string()))?;
        let mut views: BTreeMap<TableId, Arc<dyn DTable>> = held
            .tables
            .iter()
            .map(|t| {
                let data =
                    LayoutData::opened(&t.layout, t.stitching, t.levels.clone(), t.root.clone());
                (t.id, data.view())
            })
            .collect();
        // A partitioned table's view is its regions', which the snapshot holds beside it.
        for t in &held.tables {
            if let Some(p) = t.layout.partition() {
                let view = partition_view(t.id, p, |region| {
                    views.get(&region).cloned().ok_or_else(|| Error::Corrupt {
                        what: "snapshot",
                        place: name.to_string(),
                        detail: format!("table {:?} has no region #{}", t.name, region.0),
                    })
                })?;
                views.insert(t.id, view);
            }
        }
        Ok(Snapshot {
            name: name.to_string(),
            held,
            views,
            inner: self.inner.clone(),
        })
    }

    /// Drops the snapshot called `name`, durably. Extents only it held are freed once no
    /// open [`Snapshot`] reads them.
    pub fn drop_snapshot(&self, name: &str) -> Result<()> {
        let inner = &self.inner;
        inner.check_writable()?;
        let mut ck = inner.checkpoint.lock();
        let Some(held) = ck.snapshots.remove(name) else {
            return Err(Error::NoSuchSnapshot(name.to_string()));
        };
        let version = inner.version.read().clone();
        let written = checkpoint::write_manifest(inner, &mut ck, &version, &[], Vec::new());
        if written.is_err() {
            ck.snapshots.insert(name.to_string(), held.clone());
        }
        inner.guard(written)?;
        // Runs the mainline no longer lists go when their last reference does.
        let live: std::collections::HashSet<u64> = version
            .tables
            .values()
            .flat_map(|t| t.data.runs().map(|r| r.meta.id))
            .chain(
                ck.snapshots
                    .values()
                    .flat_map(|s| s.runs().map(|r| r.meta.id)),
            )
            .collect();
        for run in held.runs() {
            if !live.contains(&run.meta.id) {
                run.mark_obsolete();
            }
        }
        // The manifest no longer naming them is durable: the roots' pins go.
        inner.zones.decref_all(held.roots())?;
        Ok(())
    }
}
