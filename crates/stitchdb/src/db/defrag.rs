//! Online defragmentation (VT-tree): merges leave holes in zones; this evacuates under-used
//! zones. Their live run blocks are copied into the merge stream's open zone (first fit: the
//! zone store appends to the first free space), every run referencing them is rewritten with
//! the new block places (blocks elsewhere are shared, not copied), and one manifest swaps the
//! rewritten runs in. The emptied zones are freed only after that manifest is durable and the
//! last reader of the old runs lets go, so reads and writes go on meanwhile and a crash at any
//! point leaves either the old runs or the new ones.

use super::checkpoint::commit_change;
use super::Inner;
use crate::run::{BlockHandle, Run, RunBuilder};
use crate::version::{TableState, Version};
use crate::{Error, Result};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use stitch_filter::QuotientFilter;
use stitch_zone::{ExtentAddr, ExtentKind, Stream, ZoneId};

/// What a defragmentation did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DefragReport {
    /// Zones whose live data was moved out (freed once no reader needs the old runs).
    pub zones: Vec<ZoneId>,
    /// Data blocks copied out of those zones.
    pub blocks_moved: u64,
    /// Bytes of the blocks copied.
    pub bytes_moved: u64,
    /// Runs rewritten to point at the copies.
    pub runs_rewritten: u64,
}

/// Evacuates zones whose live bytes are below `max_live_ratio` of a zone. `progress` is told
/// (runs done, runs to do).
pub(crate) fn defrag(
    inner: &Arc<Inner>,
    max_live_ratio: f64,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<DefragReport> {
    let r = evacuate(inner, max_live_ratio, progress);
    inner.guard(r)
}

fn evacuate(
    inner: &Arc<Inner>,
    max_live_ratio: f64,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<DefragReport> {
    // Merges replace runs too: none may run while runs are being rewritten.
    let _no_merges = inner.compacting.write();
    let zones: HashSet<ZoneId> = inner
        .zones
        .evacuation_candidates(max_live_ratio)
        .into_iter()
        .collect();
    let mut report = DefragReport {
        zones: zones.iter().copied().collect(),
        ..Default::default()
    };
    report.zones.sort_unstable();
    if zones.is_empty() {
        return Ok(report);
    }
    let version = inner.version.read().clone();
    let affected: Vec<Arc<Run>> = version
        .tables
        .values()
        .flat_map(|t| t.runs().cloned())
        .filter(|r| r.extents().any(|(a, _)| zones.contains(&a.zone)))
        .collect();
    let total = affected.len() as u64;
    let mut moved: HashMap<ExtentAddr, ExtentAddr> = HashMap::new();
    let mut patches = Vec::new();
    let mut rewritten: Vec<(Arc<Run>, Arc<Run>)> = Vec::new();
    for (done, old) in affected.iter().enumerate() {
        let id = inner.next_run_id();
        let mut out = RunBuilder::new(&inner.storage, id, old.meta.level, Stream::Merge);
        for h in old.blocks() {
            if !zones.contains(&h.addr.zone) {
                out.stitch(old, std::slice::from_ref(h))?;
                continue;
            }
            let handle = |addr| BlockHandle { addr, ..h.clone() };
            match moved.get(&h.addr) {
                Some(&new) => out.stitch(old, &[handle(new)])?,
                None => {
                    let payload = inner.zones.read(h.addr, ExtentKind::RUN_BLOCK)?;
                    let (new, patch) = inner.zones.append_to(
                        Stream::Merge,
                        ExtentKind::RUN_BLOCK,
                        &payload,
                        &[],
                    )?;
                    patches.push(patch);
                    moved.insert(h.addr, new);
                    report.blocks_moved += 1;
                    report.bytes_moved += new.len as u64;
                    out.adopt(old, &handle(new))?;
                }
            }
        }
        let (new, patch) = out
            .finish(one_filter(old, inner.opts.filter_fp_rate))?
            .ok_or_else(|| Error::corrupt("run", old.meta.id, "has no blocks"))?;
        patches.push(patch);
        rewritten.push((old.clone(), new));
        report.runs_rewritten += 1;
        progress(done as u64 + 1, total);
    }
    let swap = |t: &mut TableState| {
        for level in &mut t.levels {
            for run in level.iter_mut() {
                if let Some((_, new)) = rewritten.iter().find(|(old, _)| Arc::ptr_eq(old, run)) {
                    *run = new.clone();
                }
            }
        }
    };
    let change = |v: &mut Version| {
        let ids: Vec<_> = v.tables.keys().copied().collect();
        for id in ids {
            v.update(id, swap);
        }
    };
    let retired = rewritten.iter().map(|(old, _)| old.clone()).collect();
    commit_change(inner, change, &patches, retired)?;
    Ok(report)
}

/// `run`'s filter as one part (a rewritten run's index and filter are written anew, so the
/// zones its old parts lie in can be freed): the run's one part as it is, or its parts merged.
fn one_filter(run: &Run, rate: Option<f64>) -> Option<QuotientFilter> {
    let parts: Vec<&QuotientFilter> = run.filters().collect();
    match parts.as_slice() {
        [] => None,
        [one] => Some((*one).clone()),
        _ => QuotientFilter::merge(&parts, rate?).ok(),
    }
}
