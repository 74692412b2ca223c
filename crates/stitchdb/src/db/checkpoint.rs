//! Checkpoints: freeze the memtables, write them out as level-0 runs, write a manifest naming
//! every run and where the log now starts, and point the superblock at it. The ordering is
//! declared as patch dependencies (runs before manifest, manifest before superblock), and what
//! the old checkpoint alone referenced (the old manifest, merged runs, log segments) is
//! released once the new superblock is durable; the zones it lies in are reused only once the
//! superblock after that one is (the zone store holds them: the older superblock slot, what
//! repair falls back to, may still name them). Checkpoints also wake the writers that the
//! background pacing holds back while a frozen memtable waits to be written out
//! (`notify_flushed`).

use super::{log, Inner, WriteState};
use crate::batch::TableId;
use crate::layout::vtree::run::Run;
use crate::layout::{TableData, WriteOut};
use crate::manifest::{Manifest, TableMeta};
use crate::version::Version;
use crate::Result;
use parking_lot::{Mutex, MutexGuard};
use std::sync::Arc;
use stitch_patch::PatchId;
use stitch_wal::{LogPosition, Wal};
use stitch_zone::{ExtentKind, Stream};

/// Why a checkpoint runs. Only `Open` always writes one (it moves the store to a new log);
/// the others skip it when nothing changed since the last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trigger {
    Open,
    MemtableFull,
    Background,
    Explicit,
    Close,
}

/// Runs a checkpoint and returns the superblock patch (committed when this returns). A failure
/// turns the store read-only.
pub(crate) fn checkpoint(inner: &Arc<Inner>, trigger: Trigger) -> Result<PatchId> {
    let r = run_checkpoint(inner, trigger, None);
    notify_flushed(inner);
    let patch = inner.guard(r)?;
    // A sweep that fails frees nothing more; the store goes on.
    if let Err(e) = super::large::after_checkpoint(inner, patch) {
        tracing::warn!("sweeping large values after a checkpoint: {e}");
    }
    Ok(patch)
}

/// Runs a checkpoint that also links `link`'s runs into their tables as one commit (a large
/// transaction's private runs: see `db::link`). Their data is not written again.
pub(crate) fn checkpoint_linking(inner: &Arc<Inner>, link: &mut dyn Link) -> Result<PatchId> {
    let r = run_checkpoint(inner, Trigger::Explicit, Some(&mut *link));
    notify_flushed(inner);
    // A refused link (a conflict, or no room) is the caller's error, not the store's failure.
    match r {
        Err(e) if link.refused() => Err(e),
        r => inner.guard(r),
    }
}

/// Wakes writers held back by
/// [`wait_while_backlogged`](super::background::wait_while_backlogged): a frozen memtable is
/// gone (or the checkpoint that was to write it out failed).
fn notify_flushed(inner: &Inner) {
    let _s = inner.signal.lock();
    inner.flushed.notify_all();
}

/// Runs to put in front of level 0 of their tables, newest first.
pub(crate) type LinkedRuns = Vec<(TableId, Vec<Arc<Run>>)>;

/// What a linking checkpoint asks of its caller, under the write lock.
pub(crate) trait Link {
    /// Validates the commit and appends its log records; returns, per table, the runs to
    /// put in front of level 0 (newest first) and the sequence number of the last record.
    fn commit(
        &mut self,
        writer: &mut super::WriteState,
        wal: &stitch_wal::Wal,
    ) -> Result<(LinkedRuns, u64)>;

    /// Whether [`commit`](Self::commit) refused the link with nothing of it applied (a
    /// conflict, or a store without room for it): the store goes on as it was.
    fn refused(&self) -> bool;
}

/// Where the log stood when memtables were frozen: what the checkpoint writing them out
/// records in its manifest.
pub(crate) struct FreezePoint {
    /// The tables just after the freeze (the frozen memtables are their `imm`).
    frozen: Version,
    last_seq: u64,
    log_pos: LogPosition,
    /// The patch of the log segment header `log_pos` lies in.
    log_dep: PatchId,
    next_table_id: u32,
    oldest_reader: u64,
}

/// Freezes every non-empty memtable, as of `last_seq`. The caller holds the write lock (`w`),
/// and no table has a frozen memtable.
fn freeze_locked(inner: &Inner, w: &WriteState, wal: &Wal, last_seq: u64) -> FreezePoint {
    let mut version = inner.version.write();
    let mut v = (**version).clone();
    let full: Vec<_> = v
        .tables
        .values()
        .filter(|t| t.data.has_unfrozen())
        .map(|t| t.id)
        .collect();
    for id in full {
        v.update(id, |t| t.data.freeze());
    }
    *version = Arc::new(v.clone());
    drop(version);
    let (log_pos, log_dep) = wal.position();
    FreezePoint {
        frozen: v,
        last_seq,
        log_pos,
        log_dep,
        next_table_id: w.next_table_id,
        oldest_reader: inner.oldest_reader_locked(w),
    }
}

/// For a writer that filled a memtable: freezes the memtables now, if one is still full and
/// none is frozen already, and leaves writing them out to the next checkpoint. The writer
/// goes on into fresh memtables while the flusher may still be busy with the previous
/// checkpoint's manifest (as RocksDB switches memtables in the write path), and memtables
/// stay the configured size. Returns whether it froze.
pub(crate) fn freeze_full(inner: &Inner) -> bool {
    let Ok(wal) = inner.wal() else {
        return false;
    };
    let w = inner.write.lock();
    let mut pending = inner.frozen.lock();
    let (busy, full) = {
        let v = inner.version.read();
        let busy = v.tables.values().any(|t| t.data.is_freezing());
        (busy, inner.checkpoint_due(&v))
    };
    // A checkpoint may have frozen the full memtable since the writer saw it full: what
    // filled up again since is not frozen early (runs stay the configured size).
    if pending.is_some() || busy || !full {
        return false;
    }
    *pending = Some(freeze_locked(inner, &w, wal, w.last_seq));
    true
}

fn run_checkpoint(
    inner: &Arc<Inner>,
    trigger: Trigger,
    mut link: Option<&mut dyn Link>,
) -> Result<PatchId> {
    // One checkpoint at a time; the checkpoint lock (manifests) is taken only at the end, so
    // merges finish and install while the memtables are written out.
    let _flushing = inner.flushing.lock();
    let wal = inner.wal()?;
    // Memtables a writer froze are written out first. A background checkpoint stops there;
    // the others go on to freeze and write out the rest (a linking one must: its runs go in
    // front of every memtable's).
    let everything =
        link.is_some() || !matches!(trigger, Trigger::MemtableFull | Trigger::Background);
    loop {
        let mut w = inner.write.lock();
        // Taken out first: the guard of an `if let` scrutinee would be held through the
        // writing out below, and a writer freezing (under `write`) would wait for all of it.
        let writer_frozen = inner.frozen.lock().take();
        if let Some(point) = writer_frozen {
            drop(w);
            let superblock = write_out(inner, wal, trigger, point, None, Vec::new())?;
            if !everything {
                return Ok(superblock);
            }
            continue;
        }
        // A background checkpoint is asked for by a writer that filled a memtable; if a
        // writer or an earlier checkpoint froze it meanwhile, the memtables are not frozen
        // again before they fill.
        if !everything && !inner.checkpoint_due(&inner.version.read()) {
            return Ok(inner.zones.superblock_patch());
        }
        let mut last_seq = w.last_seq;
        let mut linked = Vec::new();
        if let Some(link) = link.take() {
            let (runs, seq) = link.commit(&mut w, wal)?;
            linked = runs;
            last_seq = seq;
        }
        let point = freeze_locked(inner, &w, wal, last_seq);
        // A linking checkpoint keeps the write lock to the end: no commit can come after the
        // linked one (and be made durable or visible) before the manifest holding it is durable.
        let held = (!linked.is_empty()).then_some(w);
        return write_out(inner, wal, trigger, point, held, linked);
    }
}

/// Writes the memtables frozen at `point` out as runs, installs them (with `linked` runs in
/// front) and writes a manifest; `held` is the write lock of a linking checkpoint, released
/// once its commit is durable and visible.
fn write_out(
    inner: &Arc<Inner>,
    wal: &Wal,
    trigger: Trigger,
    point: FreezePoint,
    held: Option<MutexGuard<'_, WriteState>>,
    linked: LinkedRuns,
) -> Result<PatchId> {
    let (epoch, last_log_start, merges_deferred) = {
        let ck = inner.checkpoint.lock();
        (ck.epoch, ck.log_start.lsn, !ck.deferred.is_empty())
    };
    let FreezePoint {
        frozen,
        last_seq: checkpoint_lsn,
        log_pos,
        log_dep,
        next_table_id,
        oldest_reader,
    } = point;
    let anything_frozen = frozen.tables.values().any(|t| t.data.is_freezing());
    if trigger != Trigger::Open
        && !anything_frozen
        && linked.is_empty()
        && !merges_deferred
        && log_pos.lsn == last_log_start
    {
        return Ok(inner.zones.superblock_patch());
    }
    let mut patches = vec![log_dep];
    let mut flushed = Vec::new();
    let mut flushed_bytes = 0;
    for t in frozen.tables.values().filter(|t| t.data.is_freezing()) {
        let run = t.data.write_frozen(&WriteOut {
            storage: &inner.storage,
            run_id: inner.next_run_id(),
            oldest_reader,
            spec: t.layout.stack(),
            filter: inner.filter_choice(t.layout.stack()),
            stream: Stream::Flush,
            nodes: &inner.nodes,
        })?;
        if let Some((written, patch)) = &run {
            flushed_bytes += written.data_bytes();
            patches.push(*patch);
        }
        flushed.push((t.id, Mutex::new(run.map(|(written, _)| written))));
    }
    // The frozen memtables become their runs, in front of level 0; linked runs are newer
    // than everything frozen, so in front of those. Applied under the checkpoint lock to the
    // tables as they are then (merges may have reshaped them meanwhile), for the manifest
    // and then for readers, as a merge's change is.
    // Linked runs a table does not keep (a B+tree absorbed their entries at the link's
    // commit) are retired by the manifest.
    let unkept = Mutex::new(Vec::new());
    let change = |v: &mut Version| {
        for (table, written) in &flushed {
            v.update(*table, |t| t.data.install_frozen(written.lock().take()));
        }
        for (table, runs) in &linked {
            for (holder, runs) in v.holders(*table, runs) {
                v.update(holder, |t| unkept.lock().extend(t.data.link(&runs)));
            }
        }
    };
    // Readers read installed runs straight from the disk: the runs' blocks are made durable
    // first. Then the runs replace the frozen memtables at once, so writers held back by a
    // full memtable go on while the manifest listing the runs is written and synced (two more
    // sync rounds: manifest, then superblock). Until that manifest is durable the log still
    // holds everything the runs do, so a crash meanwhile loses nothing.
    let blocks = inner.cache.empty(&patches)?;
    inner.cache.flush_patch(blocks)?;
    let mut ck = inner.checkpoint.lock();
    ck.run_bytes_written += flushed_bytes;
    if !linked.is_empty() {
        ck.linked_commits += 1;
        ck.linked_bytes += linked
            .iter()
            .flat_map(|(_, runs)| runs.iter().map(|r| r.meta.data_bytes))
            .sum::<u64>();
    }
    ck.checkpoint_lsn = checkpoint_lsn;
    ck.log_start = log::to_start(log_pos, epoch);
    ck.next_table_id = next_table_id;
    apply_to_live(inner, change);
    ck.deferred.extend(unkept.into_inner());
    notify_flushed(inner);
    let superblock = write_live_manifest(inner, &mut ck)?;
    drop(ck);
    if let Some(mut w) = held {
        // The linked commit becomes visible, and the next commit may follow it.
        w.last_seq = checkpoint_lsn;
        // Told only once the manifest holding the link is durable: a link that fails before
        // is never visible, so it was no commit.
        if !w.observers.is_empty() {
            let commit = super::Commit::linked(checkpoint_lsn, &linked);
            w.observers.committing(&commit);
        }
        inner
            .visible_seq
            .store(checkpoint_lsn, std::sync::atomic::Ordering::Release);
        if !w.observers.is_empty() {
            w.observers.committed(checkpoint_lsn);
        }
    }
    // The runs cover every record before `log_pos`: those still only in the cache (an
    // `Async` write's) are dropped unwritten, and the segments before it released.
    wal.release_before(log_pos, superblock)
        .map_err(log::log_err)?;
    if anything_frozen {
        inner.flush_times.lock().push(inner.opened.elapsed());
    }
    Ok(superblock)
}

/// Makes `change` to the tables durable and visible: under the checkpoint lock (manifests are
/// written one at a time, and no flush can change runs meanwhile) it is applied to a copy of
/// the current tables, a manifest of that copy is written after `deps`, and then the same
/// change is applied to the live version. `retired` runs go as [`write_manifest`] says.
pub(crate) fn commit_change(
    inner: &Inner,
    change: impl Fn(&mut Version),
    deps: &[PatchId],
    retired: Vec<Arc<Run>>,
) -> Result<PatchId> {
    let mut ck = inner.checkpoint.lock();
    let mut listed = (**inner.version.read()).clone();
    change(&mut listed);
    let superblock = write_manifest(inner, &mut ck, &listed, deps, retired)?;
    apply_to_live(inner, change);
    Ok(superblock)
}

/// Retired runs of deferred merges held past this many data bytes make the next merge write a
/// manifest at once: what merges free is not kept from reuse for long.
const DEFERRED_LIMIT: u64 = 64 << 20;

/// Installs a merge's `change` (it replaces `retired` runs by one holding the same entries)
/// now and makes it durable with the next manifest, whoever writes it: a checkpoint, another
/// merge, or the compactor once it has been out of work a while ([`write_deferred`]). A crash
/// before then reopens the store with the retired runs, which stay intact until a durable
/// manifest no longer lists them: the same contents. So a merge costs no manifest,
/// superblock or sync of its own, and one that stitched its inputs whole writes nothing at
/// all. Readers read installed runs straight from the disk, so the new run's writes (`deps`)
/// are made durable first.
pub(crate) fn install_deferred(
    inner: &Inner,
    change: impl Fn(&mut Version),
    deps: &[PatchId],
    retired: Vec<Arc<Run>>,
) -> Result<()> {
    let written = inner.cache.empty(deps)?;
    inner.cache.flush_patch(written)?;
    let mut ck = inner.checkpoint.lock();
    apply_to_live(inner, change);
    ck.deferred.extend(retired);
    if ck.deferred.iter().map(|r| r.meta.data_bytes).sum::<u64>() >= DEFERRED_LIMIT {
        write_live_manifest(inner, &mut ck)?;
    }
    Ok(())
}

/// Writes a manifest of the tables as they are if merges were installed since the last one.
pub(crate) fn write_deferred(inner: &Inner) -> Result<()> {
    let mut ck = inner.checkpoint.lock();
    if !ck.deferred.is_empty() {
        write_live_manifest(inner, &mut ck)?;
    }
    Ok(())
}

/// A manifest of the tables as readers see them now (under the checkpoint lock, so every
/// change installed so far is in it).
fn write_live_manifest(inner: &Inner, ck: &mut super::CheckpointState) -> Result<PatchId> {
    let listed = (**inner.version.read()).clone();
    write_manifest(inner, ck, &listed, &[], Vec::new())
}

/// Applies `change` to the version readers see.
fn apply_to_live(inner: &Inner, change: impl Fn(&mut Version)) {
    let mut version = inner.version.write();
    let mut live = (**version).clone();
    change(&mut live);
    *version = Arc::new(live);
}

/// Writes a manifest listing `listed`'s runs and what `ck` says of the log, after `deps`;
/// points the superblock at it and waits until that is durable. Then the previous manifest is
/// released, and `retired` runs, and those of merges installed since the last manifest, are
/// marked obsolete (their extents go when their last reader does). Callers hold the
/// checkpoint lock, so manifests are written one at a time; `listed` must include every
/// change installed so far.
pub(crate) fn write_manifest(
    inner: &Inner,
    ck: &mut super::CheckpointState,
    listed: &Version,
    deps: &[PatchId],
    mut retired: Vec<Arc<Run>>,
) -> Result<PatchId> {
    let manifest = Manifest {
        checkpoint_lsn: ck.checkpoint_lsn,
        log: ck.log_start,
        // A table created after the checkpoint's position is listed (its runs are), so the
        // next id must stay beyond it even if the record creating it is lost.
        next_table_id: listed
            .tables
            .keys()
            .map(|t| t.0 + 1)
            .fold(ck.next_table_id, u32::max),
        next_run_id: ck.next_run_id,
        tables: listed
            .tables
            .values()
            .map(|t| TableMeta {
                id: t.id,
                name: t.name.clone(),
                stitching: t.data.stitching(),
                layout: t.layout.to_string(),
                runs: t.data.runs().map(|r| r.meta.clone()).collect(),
                root: t.data.cow_btree().and_then(|c| c.durable()).map(|d| d.addr),
            })
            .collect(),
        snapshots: ck.snapshots.iter().map(|(n, s)| s.meta(n)).collect(),
    };
    // Ingested runs are listed before a checkpoint covers their records: those records are
    // made durable first, or a crash could keep a run without its commit's other writes and
    // without the commits before it. Each record follows its run, so the runs (and the
    // blocks merges stitched from them) are durable then too.
    if let Some(&newest) = ck.log_named.values().max() {
        inner.sync_log(newest)?;
    }
    let (addr, patch) = inner.zones.append_to(
        Stream::Manifest,
        ExtentKind::MANIFEST,
        &manifest.encode(),
        deps,
    )?;
    let superblock = inner.zones.write_superblock(Some(addr), &[patch])?;
    inner.cache.flush_patch(superblock)?;
    retired.append(&mut ck.deferred);
    // An ingested run whose record this manifest's checkpoint does not cover may still be
    // adopted from the log by recovery: it waits for a manifest that covers it.
    retired.append(&mut ck.log_held);
    let covered = manifest.checkpoint_lsn;
    let (held, retired): (Vec<_>, Vec<_>) = retired.into_iter().partition(|r| {
        ck.log_named
            .get(&r.meta.id)
            .is_some_and(|&lsn| lsn > covered)
    });
    ck.log_held = held;
    ck.log_named.retain(|_, lsn| *lsn > covered);
    inner
        .logged_runs
        .store(ck.log_named.len(), std::sync::atomic::Ordering::Release);
    // A run a snapshot still holds is not obsolete: dropping the snapshot retires it.
    let held: std::collections::HashSet<u64> = ck
        .snapshots
        .values()
        .flat_map(|s| s.runs().map(|r| r.meta.id))
        .collect();
    let retired: Vec<Arc<Run>> = retired
        .into_iter()
        .filter(|r| !held.contains(&r.meta.id))
        .collect();
    // B+tree roots this manifest replaced: their references go once it is durable.
    let old_roots: Vec<_> = listed
        .tables
        .values()
        .filter_map(|t| t.data.cow_btree())
        .flat_map(|c| c.take_retiring())
        .collect();
    let old_manifest = ck.manifest.replace(addr);
    ck.checkpoints += 1;
    let zones = inner.zones.clone();
    inner.cache.when_committed(
        superblock,
        Box::new(move || {
            for run in &retired {
                run.mark_obsolete();
            }
            if let Err(e) = zones.decref_all(old_roots) {
                tracing::error!("releasing replaced B+tree roots: {e}");
            }
            if let Some(old) = old_manifest {
                if let Err(e) = zones.decref(old) {
                    tracing::error!("releasing the old manifest {old}: {e}");
                }
            }
        }),
    );
    Ok(superblock)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::EntryRef;
    use crate::layout::vtree::run::RunBuilder;
    use crate::{Db, Options};
    use stitch_io::MemDisk;

    #[test]
    fn a_manifest_written_while_a_run_is_built_does_not_split_its_blocks() {
        // A merge installs (writes a manifest) while a flush is appending its run's blocks;
        // if both used one zone stream, the manifest would land between two of the run's
        // blocks and cut it into spans too short to stitch.
        let db = Db::create_on(Arc::new(MemDisk::new(0)), Options::default()).unwrap();
        let inner = &db.inner;
        let mut builder = RunBuilder::new(&inner.storage, inner.next_run_id(), 0, Stream::Flush);
        let value = vec![7u8; 1000];
        for i in 0..40u32 {
            let key = format!("key{i:04}").into_bytes();
            builder
                .add(EntryRef {
                    key: &key,
                    seq: 1,
                    value: Some(&value),
                })
                .unwrap();
            if i % 10 == 5 {
                commit_change(inner, |_| {}, &[], Vec::new()).unwrap();
            }
        }
        let (run, _) = builder.finish(None).unwrap().unwrap();
        assert!(run.blocks().len() >= 8, "{} blocks", run.blocks().len());
        for pair in run.blocks().windows(2) {
            assert!(pair[1].addr.follows(&pair[0].addr), "{pair:?}");
        }
    }
}
