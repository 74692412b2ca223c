//! Compaction, the engine's half: when a table's layout has a merge to do (for the VT-tree, a
//! level holding `level_runs` runs, carried through the levels below that the run would fill:
//! `layout::vtree::compaction`), its levels are claimed, the merge runs with the oldest
//! reader's sequence number, and the result is installed. The merge reads only immutable
//! runs and holds no lock; installing it takes the checkpoint lock (a compaction changes no
//! data: the next manifest lists it).
//!
//! Merges of different tables, or of levels no running merge claimed, run at once (one per
//! compaction thread, each appending to a stream of its own). Their installs commute: each
//! removes its own inputs and puts its output at the front of the level below them, whatever
//! the other did meanwhile.

use super::checkpoint::{install_deferred, write_deferred};
use super::Inner;
use crate::batch::TableId;
use crate::layout::vtree::compaction::Merge;
use crate::layout::vtree::run::{MergeStats, Run};
use crate::layout::TableLayout;
use crate::layout::WriteOut;
use crate::version::{TableState, Version};
use crate::Result;
use parking_lot::RwLockWriteGuard;
use std::collections::HashSet;
use std::sync::Arc;
use stitch_zone::Stream;

/// What merges did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactionStats {
    pub merges: u64,
    /// Merges that started while another was running (on the other compaction thread).
    pub alongside: u64,
    /// Bytes of blocks merges wrote anew, and of blocks they stitched in without rewriting.
    pub copied_bytes: u64,
    pub stitched_bytes: u64,
    /// Merges whose new run lists its inputs' index extents instead of writing its own.
    pub shared_indexes: u64,
}

/// One merge to do: which table, and its layout's merge.
struct Plan {
    table: TableId,
    layout: Arc<TableLayout>,
    merge: Merge,
}

/// A level of a table: the key under which a merge claims the level it merges.
pub(crate) type LevelKey = (TableId, usize);

/// The first table with a level merge to do, not on levels already being merged.
fn plan_level_merge(
    version: &Version,
    level_runs: usize,
    busy: &HashSet<LevelKey>,
) -> Option<Plan> {
    version.tables.values().find_map(|t| {
        let claimed = |level| busy.contains(&(t.id, level));
        // A B+tree has no runs to merge.
        let merge = t
            .data
            .vtree()?
            .plan_level_merge(t.layout.stack(), level_runs, claimed)?;
        Some(Plan {
            table: t.id,
            layout: t.layout.clone(),
            merge,
        })
    })
}

/// Does one level merge if some level not already being merged is full, appending to
/// `stream`; returns whether it did.
pub(crate) fn compact_once(inner: &Arc<Inner>, stream: Stream) -> Result<bool> {
    let _merges_may_run = inner.compacting.read();
    let plan = {
        // Planned and claimed under one lock, so two threads never pick the same level.
        let mut busy = inner.merging.lock();
        let version = inner.version.read().clone();
        let Some(plan) = plan_level_merge(&version, inner.opts.level_runs, &busy) else {
            return Ok(false);
        };
        if !busy.is_empty() {
            inner.compaction.lock().alongside += 1;
        }
        busy.extend(plan.claims());
        plan
    };
    let _claimed = Claimed(inner, plan.claims());
    run_plan(inner, &plan, stream)?;
    Ok(true)
}

/// Levels claimed for a merge; dropped, they are free again (also if the merge failed).
struct Claimed<'a>(&'a Inner, Vec<LevelKey>);

impl Drop for Claimed<'_> {
    fn drop(&mut self) {
        let mut busy = self.0.merging.lock();
        for key in &self.1 {
            busy.remove(key);
        }
    }
}

/// Merges every run of every table into one (`stitchdb compact`).
pub(crate) fn compact_all(inner: &Arc<Inner>) -> Result<()> {
    compact_all_alone(inner, &inner.compacting.write())
}

/// [`compact_all`] for a caller that holds `compacting` exclusively (`no_other_merges`).
pub(crate) fn compact_all_alone(
    inner: &Arc<Inner>,
    _no_other_merges: &RwLockWriteGuard<'_, ()>,
) -> Result<()> {
    let version = inner.version.read().clone();
    for t in version.tables.values() {
        let full = t
            .data
            .vtree()
            .and_then(|v| v.plan_full_merge(t.layout.stack()));
        let Some(merge) = full else {
            continue;
        };
        let plan = Plan {
            table: t.id,
            layout: t.layout.clone(),
            merge,
        };
        run_plan(inner, &plan, Stream::Merge)?;
    }
    let r = write_deferred(inner);
    inner.guard(r)
}

impl Plan {
    /// The levels whose runs the plan merges.
    fn claims(&self) -> Vec<LevelKey> {
        (self.merge.first..self.merge.level)
            .map(|l| (self.table, l as usize))
            .collect()
    }
}

/// Merges the plan's runs and installs the result. A merge that finds no room for its output
/// is given up and leaves the store as it was (its builder gives back what it wrote), so
/// the store stays writable; a failure after that, or of another kind, turns it read-only.
fn run_plan(inner: &Arc<Inner>, plan: &Plan, stream: Stream) -> Result<()> {
    let merged = inner.guard_space(merge(inner, plan, stream))?;
    let r = install(inner, plan, merged);
    inner.guard(r)
}

type Merged = Option<(Arc<Run>, stitch_patch::PatchId, MergeStats)>;

fn merge(inner: &Arc<Inner>, plan: &Plan, stream: Stream) -> Result<Merged> {
    plan.merge.run(&WriteOut {
        storage: &inner.storage,
        run_id: inner.next_run_id(),
        oldest_reader: inner.oldest_reader(),
        spec: plan.layout.stack(),
        filter: inner.filter_choice(plan.layout.stack()),
        stream,
        nodes: &inner.nodes,
    })
}

fn install(inner: &Arc<Inner>, plan: &Plan, merged: Merged) -> Result<()> {
    let (output, patch, stats) = match merged {
        Some((run, patch, stats)) => (Some(run), patch, stats),
        None => (None, stitch_patch::PatchId::NONE, Default::default()),
    };
    let replace = |t: &mut TableState| {
        if let Some(v) = t.data.vtree_mut() {
            v.replace_merged(&plan.merge, output.as_ref());
        }
    };
    let change = |v: &mut Version| v.update(plan.table, replace);
    install_deferred(inner, change, &[patch], plan.merge.inputs.clone())?;
    tracing::debug!(
        "merged table {} levels {}..{} ({} runs, {} bytes, sequence numbers {}): {} bytes stitched, {} copied",
        plan.table.0,
        plan.merge.first,
        plan.merge.level,
        plan.merge.inputs.len(),
        plan.merge.inputs.iter().map(|r| r.meta.data_bytes).sum::<u64>(),
        plan.merge
            .inputs
            .iter()
            .map(|r| format!("{}-{}", r.meta.min_seq, r.meta.max_seq))
            .collect::<Vec<_>>()
            .join(" "),
        stats.stitched_bytes,
        stats.copied_bytes
    );
    let mut c = inner.compaction.lock();
    c.merges += 1;
    c.copied_bytes += stats.copied_bytes;
    c.stitched_bytes += stats.stitched_bytes;
    c.shared_indexes += u64::from(stats.index_shared);
    Ok(())
}
