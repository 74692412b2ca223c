//! Online defragmentation, the engine's half (the VT-tree's, rewriting a run out of the
//! evacuated zones, is `layout::vtree::defrag`): merges leave holes in zones; this evacuates under-used
//! zones. Their live run blocks are copied into the merge stream's open zone (first fit: the
//! zone store appends to the first free space), every run referencing them is rewritten with
//! the new block places (blocks elsewhere are shared, not copied), and one manifest swaps the
//! rewritten runs in. The emptied zones are freed only after that manifest is durable and the
//! last reader of the old runs lets go, so reads and writes go on meanwhile and a crash at any
//! point leaves either the old runs or the new ones.

use super::checkpoint::commit_change;
use super::Inner;
use crate::layout::vtree::defrag::BlockCopies;
use crate::layout::vtree::run::Run;
use crate::layout::TableData;
use crate::version::{TableState, Version};
use crate::Result;
use parking_lot::RwLockWriteGuard;
use std::collections::HashSet;
use std::sync::Arc;
use stitch_zone::ZoneId;

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
    // Merges replace runs too: none may run while runs are being rewritten.
    let _no_merges = inner.compacting.write();
    let zones = inner.zones.evacuation_candidates(max_live_ratio);
    let r = rewrite(inner, zones.into_iter().collect(), progress).and_then(|r| swap_in(inner, r));
    inner.guard(r)
}

/// Evacuates the zones holding least live data (less than half a zone), moving about
/// `budget` bytes at most: how a full store makes room (`space::reclaim`), where moving every
/// candidate at once may not fit. A copy that finds no room leaves everything as it was.
/// The caller holds `compacting` exclusively (`no_merges`).
pub(crate) fn evacuate_sparsest(
    inner: &Arc<Inner>,
    budget: u64,
    _no_merges: &RwLockWriteGuard<'_, ()>,
) -> Result<DefragReport> {
    let candidates: HashSet<ZoneId> = inner.zones.evacuation_candidates(0.5).into_iter().collect();
    let mut live: Vec<(u64, ZoneId)> = (inner.zones.stats().zone_live.into_iter())
        .filter(|(zone, _)| candidates.contains(zone))
        .map(|(zone, live)| (live, zone))
        .collect();
    live.sort_unstable();
    let (mut chosen, mut moving) = (HashSet::new(), 0);
    for (bytes, zone) in live {
        if moving + bytes > budget && !chosen.is_empty() {
            break;
        }
        moving += bytes;
        chosen.insert(zone);
    }
    let rewritten = inner.guard_space(rewrite(inner, chosen, &mut |_, _| {}))?;
    let r = swap_in(inner, rewritten);
    inner.guard(r)
}

/// The runs a defragmentation rewrote, not yet swapped in, and what it did. Dropped before
/// [`swap_in`] disarms it (a copy failed), the new runs give their references back.
struct Rewritten {
    runs: Vec<(Arc<Run>, Arc<Run>)>,
    patches: Vec<stitch_patch::PatchId>,
    report: DefragReport,
}

impl Drop for Rewritten {
    fn drop(&mut self) {
        for (_, new) in &self.runs {
            new.mark_obsolete();
        }
    }
}

/// Copies the live run blocks of `zones` out and rewrites every run referencing them; the
/// caller holds `compacting` exclusively.
fn rewrite(
    inner: &Arc<Inner>,
    zones: HashSet<ZoneId>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Rewritten> {
    let mut report = DefragReport {
        zones: zones.iter().copied().collect(),
        ..Default::default()
    };
    report.zones.sort_unstable();
    let mut out = Rewritten {
        runs: Vec::new(),
        patches: Vec::new(),
        report,
    };
    if zones.is_empty() {
        return Ok(out);
    }
    let version = inner.version.read().clone();
    let affected: Vec<Arc<Run>> = version
        .tables
        .values()
        .flat_map(|t| t.data.runs().cloned())
        .filter(|r| r.extents().any(|(a, _)| zones.contains(&a.zone)))
        .collect();
    let total = affected.len() as u64;
    let mut copies = BlockCopies::default();
    for (done, old) in affected.iter().enumerate() {
        let id = inner.next_run_id();
        let new = copies.rewrite(&inner.storage, old, id, &zones, inner.opts.filter_fp_rate)?;
        out.runs.push((old.clone(), new));
        out.report.runs_rewritten += 1;
        progress(done as u64 + 1, total);
    }
    out.patches = copies.patches;
    out.report.blocks_moved = copies.blocks_moved;
    out.report.bytes_moved = copies.bytes_moved;
    Ok(out)
}

/// Swaps the rewritten runs in with one manifest.
fn swap_in(inner: &Arc<Inner>, mut rewritten: Rewritten) -> Result<DefragReport> {
    // From here the new runs are the store's (a failed manifest fails the store).
    let runs = std::mem::take(&mut rewritten.runs);
    // B+tree nodes are not moved (see docs/cow-btree.md): a zone holding one stays.
    let swap = |t: &mut TableState| {
        if let Some(v) = t.data.vtree_mut() {
            v.swap_runs(&runs);
        }
    };
    let change = |v: &mut Version| {
        let ids: Vec<_> = v.tables.keys().copied().collect();
        for id in ids {
            v.update(id, swap);
        }
    };
    let retired = runs.iter().map(|(old, _)| old.clone()).collect();
    commit_change(inner, change, &rewritten.patches, retired)?;
    Ok(std::mem::take(&mut rewritten.report))
}
