//! `check`: reads and verifies every structure of the store.
//!
//! Opening already verified the superblock, the manifest, every run index and the log (a torn
//! log tail is normal; anything else is an error). This reads every data block too: checksum,
//! order, agreement with the index, and a partitioned table's region holding only keys of
//! its region; then that each table's runs are layered newest first (a
//! key's versions in a run are all newer than its versions in the runs after it, and no
//! version is in two runs); then that every extent the runs list holds a reference for each
//! run listing it (else it could be freed under one of them); then that no two live extents
//! overlap.

use super::Db;
use crate::batch::TableId;
use crate::entry::RangeTombstone;
use crate::layout::cowbtree::store;
use crate::layout::vtree::run::{Run, RunIter};
use crate::layout::TableData;
use crate::version::{is_region, table_label};
use crate::{Error, Result};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use stitch_zone::ExtentAddr;

/// What `check` looked at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// Tables checked.
    pub tables: usize,
    /// Runs checked (the mainline's and those only named snapshots hold).
    pub runs: usize,
    /// Data blocks read and verified.
    pub blocks: u64,
    /// Entries in those blocks.
    pub entries: u64,
    /// Extents whose checksums were verified.
    pub extents: usize,
    /// Chunks of large values read and verified against their references.
    pub large_chunks: u64,
    /// B+tree nodes read and verified (the mainline's and those only snapshots hold).
    pub nodes: usize,
}

impl Db {
    /// Verifies every checksum and structure; the first problem found is returned as an error
    /// that names the structure and its place.
    pub fn check(&self) -> Result<CheckReport> {
        let version = self.inner.version.read().clone();
        let mut report = CheckReport {
            tables: (version.names.keys())
                .filter(|n| !is_region(n) && !super::large::is_hidden(n))
                .count(),
            ..Default::default()
        };
        let mut extents: Vec<ExtentAddr> =
            self.inner.checkpoint.lock().manifest.into_iter().collect();
        // The mainline's runs, then those only snapshots hold (each run once).
        let mut runs: Vec<(TableId, Arc<Run>)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for t in version.tables.values() {
            runs.extend(t.data.runs().map(|r| (t.id, r.clone())));
        }
        for snap in self.inner.checkpoint.lock().snapshots.values() {
            for t in &snap.tables {
                runs.extend(t.levels.iter().flatten().map(|r| (t.id, r.clone())));
            }
        }
        runs.retain(|(_, r)| seen.insert(r.meta.id));
        {
            for (id, run) in &runs {
                let table = self.inner.table_label(*id);
                let region = version.region_keys(*id);
                let stray_range = |t: &&RangeTombstone| {
                    region.is_some_and(|(first, end)| {
                        t.start.as_slice() < first || end.is_some_and(|end| t.end.as_slice() > end)
                    })
                };
                if let Some(range) = run.meta.ranges.iter().find(stray_range) {
                    return Err(Error::corrupt(
                        "run",
                        format!("table {table} run {}", run.meta.id),
                        format!(
                            "range delete {:?}..{:?} reaches outside the region",
                            range.start, range.end
                        ),
                    ));
                }
                report.runs += 1;
                let mut prev: Option<(Vec<u8>, Reverse<u64>)> = None;
                for i in 0..run.blocks().len() {
                    let entries = run.read_block(i)?;
                    report.blocks += 1;
                    report.entries += entries.len() as u64;
                    let first = entries.first().map(|e| (e.key.clone(), Reverse(e.seq)));
                    if prev.is_some() && first <= prev {
                        return Err(Error::corrupt(
                            "run",
                            format!("table {table} run {} block {i}", run.meta.id),
                            "block starts before the end of the block before it",
                        ));
                    }
                    prev = entries.last().map(|e| (e.key.clone(), Reverse(e.seq)));
                    let strays = entries
                        .iter()
                        .find(|e| region.is_some_and(|keys| outside(&e.key, keys)));
                    if let Some(stray) = strays {
                        return Err(Error::corrupt(
                            "run",
                            format!("table {table} run {} block {i}", run.meta.id),
                            format!("key {:?} is outside the region", stray.key),
                        ));
                    }
                }
                extents.extend(run.extents().map(|(addr, _)| addr));
            }
        }
        for t in version.tables.values() {
            check_layer_order(&table_label(&t.name), t.data.runs())?;
        }
        // B+tree nodes: every written node of the mainline's and the snapshots' roots read
        // back, and counted against the references it holds (one per parent and root).
        let mut nodes = std::collections::HashMap::new();
        let mut seen = std::collections::HashSet::new();
        let roots = version
            .tables
            .values()
            .map(|t| {
                (
                    t.name.clone(),
                    t.data.cow_btree().and_then(|c| c.durable()).cloned(),
                )
            })
            .chain(
                self.inner
                    .checkpoint
                    .lock()
                    .snapshots
                    .iter()
                    .flat_map(|(n, s)| {
                        s.tables
                            .iter()
                            .map(move |t| (format!("snapshot {n}, {}", t.name), t.root.clone()))
                    }),
            )
            .collect::<Vec<_>>();
        for (table, root) in roots {
            if let Some(root) = root {
                let zones = &self.inner.zones;
                store::check_tree(zones, &root.root, &mut nodes, &mut seen)
                    .map_err(|e| e.placed_in(format!("table {}", table_label(&table))))?;
            }
        }
        report.nodes = seen.len();
        for (addr, count) in &nodes {
            let refs = self.inner.zones.ref_count(*addr);
            if refs < *count {
                return Err(Error::corrupt(
                    "zone map",
                    addr,
                    format!("{count} B+tree parents or roots name the node but it holds {refs} references"),
                ));
            }
        }
        extents.extend(seen);
        let mut listed: std::collections::HashMap<ExtentAddr, u32> = Default::default();
        for (_, run) in &runs {
            for (addr, _) in run.extents() {
                *listed.entry(addr).or_default() += 1;
            }
        }
        for (addr, count) in listed {
            let refs = self.inner.zones.ref_count(addr);
            if refs < count {
                return Err(Error::corrupt(
                    "zone map",
                    addr,
                    format!("{count} runs list the extent but it holds {refs} references"),
                ));
            }
        }
        extents.sort();
        extents.dedup();
        for pair in extents.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if a.zone == b.zone && a.offset + a.len > b.offset {
                return Err(Error::corrupt("zone map", a, format!("overlaps {b}")));
            }
        }
        report.extents = extents.len();
        report.large_chunks = super::large::check(&self.inner, &version)?;
        Ok(report)
    }
}

/// Whether `key` is outside a region that holds the keys from `keys.0` up to `keys.1`.
fn outside(key: &[u8], keys: (&[u8], Option<&[u8]>)) -> bool {
    key < keys.0 || keys.1.is_some_and(|end| key >= end)
}

/// Merges `runs` (a table's layers, newest first) and checks that, for every key, its versions
/// come from the layers in order: newest in the first layer holding the key, no version in
/// two layers. Memory is one entry per run, whatever the store's size.
fn check_layer_order<'a>(table: &str, runs: impl Iterator<Item = &'a Arc<Run>>) -> Result<()> {
    type Head = Reverse<(Vec<u8>, Reverse<u64>, usize)>;
    let mut sources: Vec<RunIter> = runs.map(|r| r.iter_from(&[])).collect();
    let next = |sources: &mut [RunIter], layer: usize| -> Result<Option<Head>> {
        let entry = sources[layer].next().transpose()?;
        Ok(entry.map(|e| Reverse((e.key, Reverse(e.seq), layer))))
    };
    // Smallest key first; within a key, newest first.
    let mut heap = BinaryHeap::new();
    for layer in 0..sources.len() {
        heap.extend(next(&mut sources, layer)?);
    }
    let mut prev: Option<(Vec<u8>, u64, usize)> = None;
    while let Some(Reverse((key, Reverse(seq), layer))) = heap.pop() {
        heap.extend(next(&mut sources, layer)?);
        if let Some((prev_key, prev_seq, prev_layer)) = &prev {
            if *prev_key == key && (*prev_seq == seq || *prev_layer > layer) {
                return Err(Error::corrupt(
                    "table layers",
                    format!("table {table}"),
                    format!(
                        "key {:?}: version {seq} (run layer {layer}) sits above version \
                         {prev_seq} (layer {prev_layer}), or is the same version",
                        String::from_utf8_lossy(&key),
                    ),
                ));
            }
        }
        prev = Some((key, seq, layer));
    }
    Ok(())
}
