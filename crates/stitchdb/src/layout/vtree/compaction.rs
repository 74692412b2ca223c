//! The VT-tree's half of compaction: which runs of a table to merge (a full level, carrying
//! through the levels below it that the new run would fill), merging them with stitching
//! (`run::stitch`), and putting the new run in their place. The engine's half
//! (`crate::db`'s compaction: claiming levels so two merges never pick the same one, the
//! oldest reader, installing under the checkpoint lock, the manifest) hands this what it
//! needs as parameters.

use super::run::{merge_runs, BlockLayout, MergeSpec, MergeStats, Run};
use super::{TableData, VTree};
use crate::layout::{LayoutSpec, WriteOut};
use crate::options::Stitching;
use crate::Result;
use std::sync::Arc;
use stitch_patch::PatchId;

/// One merge to do: these runs of a table (newest first) into one run at `level`.
pub(crate) struct Merge {
    pub inputs: Vec<Arc<Run>>,
    /// The first level whose runs are merged; the inputs are the runs of `first..level`.
    pub first: u32,
    pub level: u32,
    stitching: Stitching,
    /// See `MergeSpec::seq_bound`.
    seq_bound: u64,
    /// No run older than the inputs exists: tombstones can go.
    bottom: bool,
}

/// A merge carries into levels below only while its output stays within this many times the
/// bytes of the level it started from. A merge claims the levels it merges, so a carry from
/// level 0 all the way down would leave level 0 to pile up (and readers to visit every run
/// piled there) for as long as the whole store takes to rewrite; bounded, a carry from level
/// 0 spans the few small levels below it and deeper levels carry on their own, beside it.
const CARRY_FACTOR: u64 = 32;

impl VTree {
    /// A merge of the first level holding `level_runs` runs that no running merge claimed
    /// (`claimed(level)`), with its carry (see [`carry`]).
    pub fn plan_level_merge(
        &self,
        spec: &LayoutSpec,
        level_runs: usize,
        claimed: impl Fn(usize) -> bool,
    ) -> Option<Merge> {
        let loads: Vec<LevelLoad> = self
            .levels
            .iter()
            .enumerate()
            .map(|(i, level)| LevelLoad {
                runs: level.len(),
                bytes: level.iter().map(|r| r.meta.data_bytes).sum(),
                busy: claimed(i),
            })
            .collect();
        let first = loads.iter().position(|l| l.runs >= level_runs && !l.busy)?;
        let limit = loads[first].bytes.saturating_mul(CARRY_FACTOR);
        let last = carry(&loads, first, level_runs, limit);
        let inputs: Vec<Arc<Run>> = self.levels[first..=last]
            .iter()
            .flatten()
            .cloned()
            .collect();
        Some(Merge {
            seq_bound: self.seq_bound_before(inputs.first()),
            inputs,
            first: first as u32,
            level: last as u32 + 1,
            stitching: self.merge_stitching(spec),
            bottom: self.levels[last + 1..].iter().all(Vec::is_empty),
        })
    }

    /// A merge of every run into one (`stitchdb compact`), if there is anything to merge.
    pub fn plan_full_merge(&self, spec: &LayoutSpec) -> Option<Merge> {
        let inputs: Vec<_> = self.runs().cloned().collect();
        // A lone run is rewritten only into a specialized format (it may hold linear blocks
        // an ingest or a transaction wrote); otherwise it is what a merge would make.
        let specialized = spec.format != crate::layout::FormatSpec::Linear;
        if inputs.len() < 2 && !(specialized && inputs.len() == 1) {
            return None;
        }
        Some(Merge {
            seq_bound: self.seq_bound_before(inputs.first()),
            inputs,
            first: 0,
            level: (self.levels.len() as u32).saturating_sub(1).max(1),
            stitching: self.merge_stitching(spec),
            bottom: true,
        })
    }

    /// Puts a merge's output (`None`: the inputs held nothing to keep) in place of its
    /// inputs. Merges commute: each removes its own inputs and puts its output at the front
    /// of its level, whatever another did meanwhile.
    pub fn replace_merged(&mut self, merge: &Merge, output: Option<&Arc<Run>>) {
        for level in &mut self.levels {
            level.retain(|r| !merge.inputs.iter().any(|i| Arc::ptr_eq(i, r)));
        }
        if let Some(run) = output {
            self.add_run(run.clone());
        }
        while self.levels.last().is_some_and(Vec::is_empty) {
            self.levels.pop();
        }
    }
}

impl Merge {
    /// Merges the inputs into a new run (not yet durable: the patch writes it).
    pub fn run(&self, out: &WriteOut<'_>) -> Result<Option<(Arc<Run>, PatchId, MergeStats)>> {
        let spec = MergeSpec {
            id: out.run_id,
            level: self.level,
            stitching: self.stitching,
            oldest_snapshot: out.oldest_reader,
            bottom: self.bottom,
            filter: out.filter,
            stream: out.stream,
            blocks: BlockLayout::of(out.spec),
            seq_bound: self.seq_bound,
        };
        merge_runs(out.storage, &self.inputs, spec)
    }
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
