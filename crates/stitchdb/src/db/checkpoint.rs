//! Checkpoints: freeze the memtables, write them out as runs (merging a table's runs when it
//! has too many), write a manifest naming every run and where the log now starts, and point the
//! superblock at it. The ordering is declared as patch dependencies (runs before manifest,
//! manifest before superblock), and what the old checkpoint alone referenced (merged runs, the
//! old manifest, log segments) is released only once the new superblock is durable.

use super::{log, Inner, Version};
use crate::batch::TableId;
use crate::manifest::{Manifest, TableMeta};
use crate::memtable::MemIter;
use crate::merge::{Compacted, MergeIter, Source};
use crate::run::Run;
use crate::Result;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use stitch_patch::PatchId;
use stitch_zone::ExtentKind;

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
    let r = run_checkpoint(inner, trigger);
    inner.flushed.notify_all();
    inner.guard(r)
}

fn run_checkpoint(inner: &Arc<Inner>, trigger: Trigger) -> Result<PatchId> {
    let mut ck = inner.checkpoint.lock();
    let wal = inner.wal()?;
    let (frozen, checkpoint_lsn, log_pos, log_dep, next_table_id) = {
        let w = inner.write.lock();
        let mut version = inner.version.write();
        let mut v = (**version).clone();
        for t in v.tables.values_mut() {
            if !t.mem.is_empty() {
                let mut frozen = (**t).clone();
                frozen.imm = Some(std::mem::take(&mut frozen.mem));
                *t = Arc::new(frozen);
            }
        }
        *version = Arc::new(v.clone());
        let (pos, dep) = wal.position();
        (v, w.last_seq, pos, dep, w.next_table_id)
    };
    let anything_frozen = frozen.tables.values().any(|t| t.imm.is_some());
    let needs_merge = frozen
        .tables
        .values()
        .any(|t| t.runs.len() >= inner.opts.max_runs);
    if trigger != Trigger::Open && !anything_frozen && !needs_merge && log_pos.lsn == ck.log_lsn {
        return Ok(inner.zones.superblock_patch());
    }

    // The runs cover every record before `log_pos`, but those records still sit in the cache
    // as dirty patches until something flushes them (an `Async` write never does): flush them
    // here so the log's memory, and its released segments, are given back.
    wal.flush_async().map_err(log::log_err)?;

    let oldest_reader = inner.oldest_reader();
    let mut patches = vec![log_dep];
    let mut new_runs: BTreeMap<TableId, Vec<Arc<Run>>> = BTreeMap::new();
    let mut retired = Vec::new();
    for t in frozen.tables.values() {
        let mut runs = t.runs.clone();
        if let Some(imm) = &t.imm {
            let source: Source =
                Box::new(MemIter::new(imm.clone(), Bound::Unbounded, Bound::Unbounded).map(Ok));
            let entries = Compacted::new(MergeIter::new(vec![source]), oldest_reader, false);
            if let Some((run, patch)) = Run::build(&inner.zones, ck.next_run_id, entries)? {
                ck.next_run_id += 1;
                ck.run_bytes_written += run.meta.data_bytes;
                patches.push(patch);
                runs.insert(0, run);
            }
        }
        if runs.len() >= inner.opts.max_runs {
            let sources: Vec<Source> = runs
                .iter()
                .map(|r| Box::new(r.iter_from(&[])) as Source)
                .collect();
            let entries = Compacted::new(MergeIter::new(sources), oldest_reader, true);
            let merged = Run::build(&inner.zones, ck.next_run_id, entries)?;
            ck.next_run_id += 1;
            ck.merges += 1;
            retired.append(&mut runs);
            if let Some((run, patch)) = merged {
                ck.run_bytes_written += run.meta.data_bytes;
                patches.push(patch);
                runs.push(run);
            }
        }
        new_runs.insert(t.id, runs);
    }

    let manifest = Manifest {
        checkpoint_lsn,
        log: log::to_start(log_pos, ck.epoch),
        next_table_id,
        next_run_id: ck.next_run_id,
        tables: frozen
            .tables
            .values()
            .map(|t| TableMeta {
                id: t.id,
                name: t.name.clone(),
                runs: new_runs[&t.id].iter().map(|r| r.meta.clone()).collect(),
            })
            .collect(),
    };
    let (manifest_addr, manifest_patch) =
        inner
            .zones
            .append(ExtentKind::MANIFEST, &manifest.encode(), &patches)?;
    let superblock = inner
        .zones
        .write_superblock(Some(manifest_addr), &[manifest_patch])?;
    inner.cache.flush_patch(superblock)?;

    install(inner, &new_runs);
    let old_manifest = ck.manifest.replace(manifest_addr);
    let zones = inner.zones.clone();
    inner.cache.when_committed(
        superblock,
        Box::new(move || {
            for run in &retired {
                run.mark_obsolete();
            }
            if let Some(old) = old_manifest {
                if let Err(e) = zones.decref(old) {
                    tracing::error!("releasing the old manifest {old}: {e}");
                }
            }
        }),
    );
    wal.release_before(log_pos, superblock)
        .map_err(log::log_err)?;
    ck.log_lsn = log_pos.lsn;
    ck.checkpoints += 1;
    Ok(superblock)
}

/// Puts the new runs in place of the frozen memtables (and of merged runs).
fn install(inner: &Inner, new_runs: &BTreeMap<TableId, Vec<Arc<Run>>>) {
    let mut version = inner.version.write();
    let mut v: Version = (**version).clone();
    for (id, runs) in new_runs {
        if let Some(t) = v.tables.get_mut(id) {
            let mut updated = (**t).clone();
            updated.runs = runs.clone();
            updated.imm = None;
            *t = Arc::new(updated);
        }
    }
    *version = Arc::new(v);
}
