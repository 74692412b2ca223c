//! The VT-tree's half of defragmentation: a run rewritten so that none of its blocks lies in
//! the zones being evacuated (those blocks copied out, the others shared), and the rewritten
//! runs swapped in. The engine's half (`crate::db`'s defrag: choosing the zones, excluding
//! merges, the manifest that swaps the runs in, freeing the zones) calls these.

use super::run::{BlockHandle, Run, RunBuilder, RunFilter, Storage};
use super::VTree;
use crate::{Error, Result};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use stitch_filter::QuotientFilter;
use stitch_patch::PatchId;
use stitch_zone::{ExtentAddr, ExtentKind, Stream, ZoneId};

/// The blocks copied out of the zones being evacuated so far, by their old place: a block
/// runs share is copied once and stays shared.
#[derive(Default)]
pub(crate) struct BlockCopies {
    moved: HashMap<ExtentAddr, ExtentAddr>,
    /// The writes of the copies and of the rewritten runs, which the manifest swapping them
    /// in must follow.
    pub patches: Vec<PatchId>,
    pub blocks_moved: u64,
    pub bytes_moved: u64,
}

impl BlockCopies {
    /// `old` rewritten as run `id` with its blocks in `zones` copied out (appended to the
    /// merge stream) and its other blocks shared.
    pub fn rewrite(
        &mut self,
        storage: &Arc<Storage>,
        old: &Arc<Run>,
        id: u64,
        zones: &HashSet<ZoneId>,
        filter_fp_rate: Option<f64>,
    ) -> Result<Arc<Run>> {
        let mut builder = RunBuilder::new(storage, id, old.meta.level, Stream::Merge);
        for h in old.blocks() {
            if !zones.contains(&h.addr.zone) {
                builder.stitch(old, std::slice::from_ref(h))?;
                continue;
            }
            let handle = |addr| BlockHandle { addr, ..h.clone() };
            match self.moved.get(&h.addr) {
                Some(&new) => builder.stitch(old, &[handle(new)])?,
                None => {
                    let payload = storage.zones.read(h.addr, ExtentKind::RUN_BLOCK)?;
                    let (new, patch) = storage.zones.append_to(
                        Stream::Merge,
                        ExtentKind::RUN_BLOCK,
                        &payload,
                        &[],
                    )?;
                    self.patches.push(patch);
                    self.moved.insert(h.addr, new);
                    self.blocks_moved += 1;
                    self.bytes_moved += new.len as u64;
                    builder.adopt(old, &handle(new))?;
                }
            }
        }
        let (new, patch) = builder
            .finish(one_filter(old, filter_fp_rate))?
            .ok_or_else(|| Error::corrupt("run", old.meta.id, "has no blocks"))?;
        self.patches.push(patch);
        Ok(new)
    }
}

impl VTree {
    /// Puts each rewritten run (`(old, new)`) in the place of the one it replaces.
    pub fn swap_runs(&mut self, runs: &[(Arc<Run>, Arc<Run>)]) {
        for level in &mut self.levels {
            for run in level.iter_mut() {
                if let Some((_, new)) = runs.iter().find(|(old, _)| Arc::ptr_eq(old, run)) {
                    *run = new.clone();
                }
            }
        }
    }
}

/// `run`'s filter as one part (a rewritten run's index and filter are written anew, so the
/// zones its old parts lie in can be freed): the run's one part as it is, or its parts merged.
fn one_filter(run: &Run, rate: Option<f64>) -> Option<RunFilter> {
    let mut parts = run.filter_parts();
    match (parts.next(), parts.next()) {
        (None, _) => None,
        (Some((_, one)), None) => Some((*one).clone()),
        // Parts come of merges that shared their inputs' filters: quotient filters.
        _ => {
            let merged = QuotientFilter::merge(&run.quotient_filters()?, rate?).ok()?;
            Some(RunFilter::Quotient(merged))
        }
    }
}
