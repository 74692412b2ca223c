//! Compaction: when a level holds `level_runs` runs they are merged, with stitching, into one
//! run, carrying through the levels below that the run would fill in turn (see
//! [`plan_level_merge`]). The merge reads only immutable runs and holds no lock; installing it
//! takes the checkpoint lock (a compaction changes no data: the next manifest lists it).
//!
//! Merges of different tables, or of levels no running merge claimed, run at once (one per
//! compaction thread, each appending to a stream of its own). Their installs commute: each
//! removes its own inputs and puts its output at the front of the level below them, whatever
//! the other did meanwhile.

use super::checkpoint::{install_deferred, write_deferred};
use super::Inner;
use crate::batch::TableId;
use crate::layout::vtree::run::{merge_runs, BlockLayout, MergeSpec, MergeStats, Run};
use crate::layout::{FormatSpec, LayoutSpec, TableData};
use crate::options::Stitching;
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

/// One merge to do: these runs of a table (newest first) into one run at `level`.
struct Plan {
    table: TableId,
    inputs: Vec<Arc<Run>>,
    /// The first level whose runs are merged; the inputs are the runs of `first..level`.
    first: u32,
    level: u32,
    stitching: Stitching,
    layout: Arc<LayoutSpec>,
    /// See `MergeSpec::seq_bound`.
    seq_bound: u64,
    /// No run older than the inputs exists: tombstones can go.
    bottom: bool,
}

/// A level of a table: the key under which a merge claims the level it merges.
pub(crate) type LevelKey = (TableId, usize);

/// A merge carries into levels below only while its output stays within this many times the
/// bytes of the level it started from. A merge claims the levels it merges, so a carry from
/// level 0 all the way down would leave level 0 to pile up (and readers to visit every run
/// piled there) for as long as the whole store takes to rewrite; bounded, a carry from level
/// 0 spans the few small levels below it and deeper levels carry on their own, beside it.
const CARRY_FACTOR: u64 = 32;

/// The first level, of any table, holding too many runs and not already being merged, with
/// its carry (see [`carry`]).
fn plan_level_merge(
    version: &Version,
    level_runs: usize,
    busy: &HashSet<LevelKey>,
) -> Option<Plan> {
    for t in version.tables.values() {
        let loads: Vec<LevelLoad> = t
            .data
            .levels
            .iter()
            .enumerate()
            .map(|(i, level)| LevelLoad {
                runs: level.len(),
                bytes: level.iter().map(|r| r.meta.data_bytes).sum(),
                busy: busy.contains(&(t.id, i)),
            })
            .collect();
        let Some(first) = loads.iter().position(|l| l.runs >= level_runs && !l.busy) else {
            continue;
        };
        let limit = loads[first].bytes.saturating_mul(CARRY_FACTOR);
        let last = carry(&loads, first, level_runs, limit);
        let levels = &t.data.levels;
        let inputs: Vec<Arc<Run>> = levels[first..=last].iter().flatten().cloned().collect();
        return Some(Plan {
            table: t.id,
            seq_bound: t.data.seq_bound_before(inputs.first()),
            inputs,
            first: first as u32,
            level: last as u32 + 1,
            stitching: t.data.merge_stitching(&t.layout),
            layout: t.layout.clone(),
            bottom: levels[last + 1..].iter().all(Vec::is_empty),
        });
    }
    None
}

/// What the planner needs of a level.
#[derive(Debug, Clone, Copy)]
struct LevelLoad {
    runs: usize,
    bytes: u64,
    /// A running merge claimed it.
    busy: bool,
}

/// The last level a merge of full level `first` takes runs from. The merge *carries*: each
/// level below that the merged run would fill in turn (it holds `level_runs - 1` runs) joins
/// it, and the run lands in the first level it does not fill. The levels keep their shape (at
/// most `level_runs - 1` runs each at rest, level i holding about R * level_runs^i: after n
/// flushes the runs per level are the digits of n in base `level_runs`), but a tuple is
/// written once per carry instead of once per level it passes: random inserts, which stitch
/// nothing until their spans grow, are copied less often. The carry stops at a level another
/// merge claimed and before the output would pass `limit` bytes.
fn carry(levels: &[LevelLoad], first: usize, level_runs: usize, limit: u64) -> usize {
    let mut bytes = levels[first].bytes;
    let mut last = first;
    while let Some(next) = levels.get(last + 1) {
        if next.runs + 1 < level_runs || next.busy || bytes + next.bytes > limit {
            break;
        }
        bytes += next.bytes;
        last += 1;
    }
    last
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
        let inputs: Vec<_> = t.data.runs().cloned().collect();
        // A lone run is rewritten only into a specialized format (it may hold linear blocks
        // an ingest or a transaction wrote); otherwise it is what a merge would make.
        let specialized = t.layout.format != FormatSpec::Linear;
        if inputs.len() < 2 && !(specialized && inputs.len() == 1) {
            continue;
        }
        let level = (t.data.levels.len() as u32).saturating_sub(1).max(1);
        let plan = Plan {
            table: t.id,
            seq_bound: t.data.seq_bound_before(inputs.first()),
            inputs,
            first: 0,
            level,
            stitching: t.data.merge_stitching(&t.layout),
            layout: t.layout.clone(),
            bottom: true,
        };
        run_plan(inner, &plan, Stream::Merge)?;
    }
    let r = write_deferred(inner);
    inner.guard(r)
}

impl Plan {
    /// The levels whose runs the plan merges.
    fn claims(&self) -> Vec<LevelKey> {
        (self.first..self.level)
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
    let id = inner.next_run_id();
    let oldest_reader = inner.oldest_reader();
    let spec = MergeSpec {
        id,
        level: plan.level,
        stitching: plan.stitching,
        oldest_snapshot: oldest_reader,
        bottom: plan.bottom,
        filter: inner.filter_choice(&plan.layout),
        stream,
        blocks: BlockLayout::of(&plan.layout),
        seq_bound: plan.seq_bound,
    };
    merge_runs(&inner.storage, &plan.inputs, spec)
}

fn install(inner: &Arc<Inner>, plan: &Plan, merged: Merged) -> Result<()> {
    let (output, patch, stats) = match merged {
        Some((run, patch, stats)) => (Some(run), patch, stats),
        None => (None, stitch_patch::PatchId::NONE, Default::default()),
    };
    let replace = |t: &mut TableState| {
        let t = &mut t.data;
        for level in &mut t.levels {
            level.retain(|r| !plan.inputs.iter().any(|i| Arc::ptr_eq(i, r)));
        }
        if let Some(run) = &output {
            t.add_run(run.clone());
        }
        while t.levels.last().is_some_and(Vec::is_empty) {
            t.levels.pop();
        }
    };
    let change = |v: &mut Version| v.update(plan.table, replace);
    install_deferred(inner, change, &[patch], plan.inputs.clone())?;
    tracing::debug!(
        "merged table {} levels {}..{} ({} runs, {} bytes, sequence numbers {}): {} bytes stitched, {} copied",
        plan.table.0,
        plan.first,
        plan.level,
        plan.inputs.len(),
        plan.inputs.iter().map(|r| r.meta.data_bytes).sum::<u64>(),
        plan.inputs
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

#[cfg(test)]
mod tests {
    use super::*;

    fn levels(runs: &[usize]) -> Vec<LevelLoad> {
        runs.iter()
            .enumerate()
            .map(|(i, &runs)| LevelLoad {
                runs,
                bytes: runs as u64 * (1 << i),
                busy: false,
            })
            .collect()
    }

    #[test]
    fn a_merge_carries_through_the_levels_its_run_would_fill() {
        // Two runs per level: levels holding one run carry, an empty one takes the run.
        assert_eq!(carry(&levels(&[2, 1, 1, 0, 1]), 0, 2, u64::MAX), 2);
        assert_eq!(carry(&levels(&[2, 0, 1]), 0, 2, u64::MAX), 0);
        assert_eq!(carry(&levels(&[2, 1, 1]), 0, 2, u64::MAX), 2);
        // Three runs per level: only a level holding two carries.
        assert_eq!(carry(&levels(&[3, 2, 1, 2]), 0, 3, u64::MAX), 1);
        // A full level below carries too (its own merge would come next).
        assert_eq!(carry(&levels(&[2, 2, 0]), 0, 2, u64::MAX), 1);
        // From a deeper full level.
        assert_eq!(carry(&levels(&[0, 2, 1, 1]), 1, 2, u64::MAX), 3);
    }

    #[test]
    fn a_carry_stops_at_a_claimed_level_and_at_the_byte_limit() {
        let mut l = levels(&[2, 1, 1, 1]);
        l[2].busy = true;
        assert_eq!(carry(&l, 0, 2, u64::MAX), 1);
        // Bytes: level 0 holds 2, level 1 holds 2, level 2 holds 4, level 3 holds 8.
        let l = levels(&[2, 1, 1, 1]);
        assert_eq!(carry(&l, 0, 2, 8), 2);
        assert_eq!(carry(&l, 0, 2, 7), 1);
        assert_eq!(carry(&l, 0, 2, 3), 0);
        assert_eq!(carry(&l, 0, 2, 16), 3);
    }
}
