//! A transaction's writes beyond its memory budget: private runs.
//!
//! When the write set outgrows `Options::txn_memory` it is written out, per table (per region
//! of a partitioned table, cut at its boundaries), as a run whose entries and range
//! tombstones all carry the spill's number (1, 2, ...) as a private sequence number, so a
//! later spill's version of a key is the newer one. Reads of the
//! transaction look at its write set, then these runs (an overlay, newest first), then its
//! snapshot. Commit links the runs into their tables as they are (see `db::link`); abort drops
//! them, and their extents are freed in the background.

use crate::batch::{RangeOp, TableId};
use crate::db::PrivateRuns;
use crate::entry::{EntryRef, RangeTombstone, Value};
use crate::layout::vtree::dtable::{filtered_run, DTable, Overlay};
use crate::layout::vtree::run::{FilterChoice, Run, RunBuilder, Storage};
use crate::layout::PartitionSpec;
use crate::merge_iter::{Newest, Source};
use crate::Result;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use stitch_zone::Stream;

use super::write_set::WriteSet;

/// Nothing until the first spill: most transactions never spill, and they should not pay for
/// the maps.
#[derive(Default)]
pub(crate) struct Spilled(Option<Box<Runs>>);

#[derive(Default)]
struct Runs {
    /// Per table, the private runs, newest first, each with its spill number.
    runs: BTreeMap<TableId, Vec<(u64, Arc<Run>)>>,
    /// Spills so far.
    spills: u64,
    /// Per table, an overlay of its runs (rebuilt at each spill).
    views: BTreeMap<TableId, Arc<Overlay>>,
}

impl Spilled {
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    pub fn spills(&self) -> u64 {
        self.0.as_ref().map_or(0, |r| r.spills)
    }

    /// Writes `writes` and `ranges` (everything private not yet spilled) out as one spill:
    /// all of it, or (an error) none. A table `partition_of` names a partition is written a
    /// run per region, each holding only its region's keys, as the region's own runs do: the
    /// commit links each into its region.
    pub fn spill(
        &mut self,
        storage: &Arc<Storage>,
        next_run_id: impl Fn() -> u64,
        filter: FilterChoice,
        partition_of: impl Fn(TableId) -> Option<Arc<PartitionSpec>>,
        writes: &WriteSet,
        ranges: &[RangeOp],
    ) -> Result<()> {
        let spill = self.spills() + 1;
        let mut tables = writes.tables();
        tables.extend(ranges.iter().map(|(t, _, _)| *t));
        tables.sort_unstable();
        tables.dedup();
        let mut written = Vec::new();
        for table in tables {
            let partition = partition_of(table);
            for region in 0..partition.as_ref().map_or(1, |p| p.regions.len()) {
                // A region's part of each range delete; a plain table's whole.
                let tombstones = ranges
                    .iter()
                    .filter(|(t, _, _)| *t == table)
                    .flat_map(|(_, start, end)| match &partition {
                        Some(p) => p
                            .split_range(start, end)
                            .filter(|(i, _, _)| *i == region)
                            .map(|(_, start, end)| (start, end))
                            .collect(),
                        None => vec![(&start[..], &end[..])],
                    })
                    .map(|(start, end)| RangeTombstone {
                        start: start.to_vec(),
                        end: end.to_vec(),
                        seq: spill,
                    })
                    .collect();
                let pairs = match &partition {
                    Some(p) => {
                        let (first, end) = p.region_range(region);
                        let end = end.map_or(Bound::Unbounded, Bound::Excluded);
                        writes.range(table, Bound::Included(first), end)
                    }
                    None => writes.range(table, Bound::Unbounded, Bound::Unbounded),
                };
                let run_id = next_run_id();
                if let Some(run) = write_spill(storage, run_id, filter, spill, tombstones, pairs)? {
                    written.push((table, run));
                }
            }
        }
        let runs = self.0.get_or_insert_with(Box::default);
        for (table, run) in written {
            runs.runs.entry(table).or_default().insert(0, (spill, run));
        }
        runs.spills = spill;
        runs.views = runs
            .runs
            .iter()
            .map(|(table, list)| {
                let layers = list
                    .iter()
                    .map(|(_, run)| filtered_run(run, None))
                    .collect();
                (*table, Arc::new(Overlay::new(layers)))
            })
            .collect();
        Ok(())
    }

    /// An overlay of `table`'s private runs, newest first, if it has any.
    fn view(&self, table: TableId) -> Option<&Arc<Overlay>> {
        self.0.as_ref()?.views.get(&table)
    }

    /// What the private runs say of `key`: `Some(None)` if they delete it, `None` if they do
    /// not mention it.
    pub fn get(&self, table: TableId, key: &[u8]) -> Result<Option<Value>> {
        let Some(view) = self.view(table) else {
            return Ok(None);
        };
        Ok(view.get(key, u64::MAX)?.map(|(_, value)| value))
    }

    /// The private runs' say on every key in `(start, end)`, in key order: a value, or `None`
    /// for a key they delete (by a tombstone or a range).
    pub fn pairs(
        &self,
        table: TableId,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
    ) -> super::iter::OwnSay {
        let Some(view) = self.view(table) else {
            return Box::new(std::iter::empty());
        };
        let ranges = view.range_deletes();
        let end = end.map(<[u8]>::to_vec);
        let versions: Source = view.cursor(start, end.as_ref().map(Vec::as_slice));
        Box::new(
            Newest::new(versions, u64::MAX, ranges).take_while(move |item| {
                item.as_ref().map_or(true, |(key, _)| {
                    !crate::bounds::past_end(key, end.as_ref().map(Vec::as_slice))
                })
            }),
        )
    }

    /// The ranges the private runs delete from the snapshot beneath them.
    pub fn deleted_ranges(&self, table: TableId) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.view(table).map_or_else(Vec::new, |view| {
            view.range_deletes()
                .tombstones()
                .map(|t| (t.start.clone(), t.end.clone()))
                .collect()
        })
    }

    /// The runs for the commit to link.
    pub fn to_link(&self) -> PrivateRuns {
        self.0.as_ref().map_or_else(Vec::new, |r| {
            r.runs
                .iter()
                .map(|(table, runs)| (*table, runs.clone()))
                .collect()
        })
    }

    /// Frees the runs in the background (many extents: abort should not wait for that).
    pub fn discard(&mut self) {
        let Some(runs) = self.0.take() else {
            return;
        };
        let freeing = std::thread::Builder::new()
            .name("stitchdb-txn-free".into())
            .spawn(move || drop(runs));
        if let Err(e) = freeing {
            tracing::warn!("freeing an aborted transaction's runs inline: {e}");
        }
    }
}

/// Writes one spilled run, `run_id`: `tombstones` and `pairs`, every one at the spill's number
/// `spill`. `None` if there is nothing to write.
fn write_spill<'a>(
    storage: &Arc<Storage>,
    run_id: u64,
    filter: FilterChoice,
    spill: u64,
    tombstones: Vec<RangeTombstone>,
    pairs: impl Iterator<Item = (&'a [u8], &'a Value)>,
) -> Result<Option<Arc<Run>>> {
    // A writer's data, as the log is: in the zones ingested runs take, which stop where the
    // log does, so a spill never takes the room flushes need on a full store.
    let mut builder = RunBuilder::new(storage, run_id, 0, Stream::Ingest);
    builder.set_range_tombstones(tombstones);
    builder.filter_keys(filter);
    for (key, value) in pairs {
        builder.add(EntryRef {
            key,
            seq: spill,
            value: value.as_deref(),
        })?;
    }
    let filter = builder.key_filter();
    let Some((run, patch)) = builder.finish(filter)? else {
        return Ok(None);
    };
    // Until a commit links it, dropping it frees its extents (so do the runs of this spill
    // written before a failure).
    run.mark_obsolete();
    // The transaction reads its runs from the disk.
    storage.zones.cache().flush_patch(patch)?;
    Ok(Some(run))
}
