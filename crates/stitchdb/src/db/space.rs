//! A store out of space: what a write refused for want of a free zone does next.
//!
//! Running out of zones refuses the write and leaves the store writable: the log, the block
//! cache and the zone store are as they were (see `Inner::guard_space`). The room that
//! deleted and overwritten data holds comes back only as merges drop it, and merges run as
//! levels fill, not as the disk does. So before a refusal stands, the refused writer
//! *reclaims*: it writes the memtables out (which also gives their log segments back),
//! merges every table whole (which drops what deletes and overwrites left behind) and
//! evacuates the sparsest zones (whose dead space the merge's stitching left), then tries
//! once more. A reclaim costs a full compaction, so it runs only if something was
//! committed since the last one: a writer refused again with nothing new to drop gets its
//! error at once, and writers refused together share one reclaim.

use super::checkpoint::{self, Trigger};
use super::{compact, defrag, Inner};
use crate::batch::WriteBatch;
use crate::{Error, Result};
use parking_lot::RwLockWriteGuard;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use stitch_zone::Reserve;

/// Refuses a commit (a no-space error, as a log segment's refusal is) that a store this full
/// could not take without risking the room its flushes and its next open need. While merges
/// have room (more free zones than [`Reserve::merges`] holds back), every commit goes in (the
/// log still stops at [`Reserve::log`] when it needs a segment). Below that nothing can
/// free room but a merge dropping deleted data: a commit that deletes (it may be what lets a
/// reclaim free room) goes in while a flush and a manifest still fit above what opening
/// needs ([`Reserve::extents`]); nothing else does.
///
/// [`Reserve::merges`]: stitch_zone::Reserve::merges
/// [`Reserve::log`]: stitch_zone::Reserve::log
/// [`Reserve::extents`]: stitch_zone::Reserve::extents
pub(crate) fn admit(inner: &Inner, batch: &WriteBatch) -> Result<()> {
    if inner.zones.has_room_beyond(|r| r.merges) {
        return Ok(());
    }
    let deletes = !batch.ranges.is_empty() || batch.ops.iter().any(|(_, _, v)| v.is_none());
    const REFUSED: &str = "merges have no room to free any";
    if deletes {
        require_room(inner, deletes_keep, REFUSED)
    } else {
        Err(full(REFUSED))
    }
}

/// Refuses a transaction's spill (its private writes written out as runs before it commits)
/// where [`admit`] would refuse a commit of them: a spill is a writer's data, as a commit is.
pub(crate) fn admit_spill(inner: &Inner) -> Result<()> {
    require_room(
        inner,
        |r| r.merges,
        "no room for a transaction's spilled writes",
    )
}

/// Refuses the commit of a transaction's spilled runs (`db::link`) unless the checkpoint
/// that installs them (a flush and a manifest) still fits above what opening needs, as for
/// a commit that deletes: their data is written already.
pub(crate) fn admit_link(inner: &Inner) -> Result<()> {
    require_room(
        inner,
        deletes_keep,
        "no room to install a transaction's runs",
    )
}

/// [`full`] unless the store has more free zones than `keep` holds back.
fn require_room(inner: &Inner, keep: impl Fn(&Reserve) -> u64, what: &str) -> Result<()> {
    if inner.zones.has_room_beyond(keep) {
        return Ok(());
    }
    Err(full(what))
}

/// The refusal of a write the full store has no room for (`what`): a no-space error, as a
/// log segment's refusal is, so the writer may reclaim and try again.
fn full(what: &str) -> Error {
    Error::Zone(stitch_zone::ZoneError::NoSpace(format!(
        "the store is full: {what}"
    )))
}

/// The free zones a commit that deletes leaves, and the merges and copies of a reclaim: what
/// opening needs, plus a flush of a few deletes and the manifest after it.
fn deletes_keep(reserve: &Reserve) -> u64 {
    reserve.extents + 2
}

/// What the last reclaim saw.
#[derive(Debug, Default)]
pub(crate) struct Reclaim {
    /// The newest commit's sequence number when it started (`None`: none ran yet).
    seq: Option<u64>,
}

/// How many reclaims have run: read before a write, and handed to [`reclaim`] if the write
/// is refused.
pub(crate) fn reclaims(inner: &Inner) -> u64 {
    inner.reclaims.load(Ordering::Acquire)
}

/// Reclaims space for a write refused after `seen` reclaims had run. Returns whether the
/// write is worth trying again: a reclaim ran since (this one, or another writer's), or not
/// (nothing was committed since the last, so nothing new can be dropped). A merge that finds
/// no room either ends the reclaim early, with what it freed so far; any other failure is
/// the store's (it turns read-only, as it would in a background merge).
pub(crate) fn reclaim(inner: &Arc<Inner>, seen: u64) -> Result<bool> {
    let mut last = inner.reclaim.lock();
    if reclaims(inner) != seen {
        return Ok(true);
    }
    let seq = inner.visible_seq.load(Ordering::Acquire);
    // With no room for a flush above what opening needs, writing the memtables out would
    // fail and turn the store read-only: the refusal stands.
    if last.seq == Some(seq) || !inner.zones.has_room_beyond(deletes_keep) {
        return Ok(false);
    }
    tracing::info!(
        "the store is full: writing the memtables out and merging every table, to reclaim the room of deleted data"
    );
    checkpoint::checkpoint(inner, Trigger::Explicit)?;
    // The memtables are empty now, so the merges and copies below may take the room a flush
    // would: they are the only way to free any. They leave what a flush of deletes takes,
    // as `admit` does. The merges' tier is the zone store's, not theirs alone: no
    // background merge may start while it is lowered, or it could take that room too.
    let no_merges = inner.compacting.write();
    let reserve = inner.zones.reserve();
    inner.zones.set_reserve(stitch_zone::Reserve {
        merges: deletes_keep(&reserve),
        ..reserve
    });
    let freed = free_room(inner, &no_merges);
    inner.zones.set_reserve(reserve);
    drop(no_merges);
    match freed {
        Err(e) if e.is_out_of_zones() => {
            tracing::warn!("reclaiming space: a merge or a copy found no room: {e}");
        }
        r => r?,
    }
    last.seq = Some(seq);
    inner.reclaims.fetch_add(1, Ordering::AcqRel);
    Ok(true)
}

/// Merges every table whole, which drops what deletes and overwrites hid; then, as
/// stitching leaves the blocks kept where they lay, among the dead space of the zones they
/// share, evacuates the sparsest zones a zone's worth of copies at a time
/// ([`EVACUATION_PASSES`] at most), which frees the rest of each.
fn free_room(inner: &Arc<Inner>, no_merges: &RwLockWriteGuard<'_, ()>) -> Result<()> {
    compact::compact_all_alone(inner, no_merges)?;
    for _ in 0..EVACUATION_PASSES {
        let report = defrag::evacuate_sparsest(inner, inner.zones.zone_size(), no_merges)?;
        tracing::debug!(
            zones = ?report.zones,
            bytes_moved = report.bytes_moved,
            "reclaiming space: evacuated"
        );
        if report.zones.is_empty() {
            break;
        }
    }
    Ok(())
}

/// How many rounds of evacuation one reclaim runs.
const EVACUATION_PASSES: usize = 4;
