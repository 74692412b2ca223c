//! Committing a transaction larger than memory: its private runs (written as it spilled, each
//! with private sequence numbers) become part of their tables without being written again.
//!
//! The commit is a checkpoint that, under the writer lock, validates the transaction, appends
//! one `OP_TXN_LINK` record per spill (whose LSNs are the runs' sequence numbers, in spill
//! order, so a later spill's version of a key stays the newer one), flushes the memtables
//! and writes a manifest with the linked runs in front of level 0. The writer lock is held
//! until that manifest is durable, so no later commit can become durable or visible first.

use super::checkpoint::{checkpoint_linking, Link, LinkedRuns};
use super::{log, space, Inner, WriteState};
use crate::batch::{RangeOp, TableId};
use crate::concurrency::Oracle;
use crate::layout::vtree::run::Run;
use crate::{Error, Result};
use std::sync::Arc;
use stitch_patch::PatchContext;
use stitch_wal::{Flags, Wal};

/// A transaction's private runs by table, newest first, each with its spill number (1 for
/// the first spill).
pub(crate) type PrivateRuns = Vec<(TableId, Vec<(u64, Arc<Run>)>)>;

struct Linking<'a, F> {
    inner: &'a Arc<Inner>,
    runs: &'a PrivateRuns,
    spills: u64,
    validate: Option<F>,
    /// Whether `commit` refused the link with nothing of it written (see [`Link::refused`]).
    refused: bool,
}

impl<F: FnOnce(&mut Oracle) -> Result<()>> Linking<'_, F> {
    /// What may refuse the link before any of it is written: a full store (which must keep
    /// room for the checkpoint that installs the link, and the log's room for its records)
    /// and validation.
    fn admit(&mut self, w: &mut WriteState, wal: &Wal) -> Result<()> {
        space::admit_link(self.inner)?;
        // The link's records are a few bytes each: all of them fit where the first does
        // unless there are many.
        let records = self.spills as usize * (stitch_wal::RECORD_HEADER_LEN + 10);
        self.inner
            .guard_space(wal.make_room(records).map_err(log::log_err))?;
        match self.validate.take() {
            Some(validate) => validate(&mut w.oracle),
            None => Ok(()),
        }
    }
}

impl<F: FnOnce(&mut Oracle) -> Result<()>> Link for Linking<'_, F> {
    fn commit(&mut self, w: &mut WriteState, wal: &Wal) -> Result<(LinkedRuns, u64)> {
        self.inner.check_writable()?;
        if let Err(e) = self.admit(w, wal) {
            self.refused = e.is_out_of_zones() || matches!(e, Error::Conflict { .. });
            return Err(e);
        }
        let engaged = PatchContext::with_current(|ctx| self.inner.groups.engaged(ctx));
        // No group tails: the log's order already puts this record after every write the
        // groups follow (see `write::commit_batch`).
        let deps: &[stitch_patch::PatchId] = &[];
        let txn = w.next_txn;
        w.next_txn += 1;
        let mut lsns = Vec::with_capacity(self.spills as usize);
        for spill in 1..=self.spills {
            let flags = match (self.spills, spill == self.spills) {
                (1, _) => Flags::AUTOCOMMIT,
                (_, true) => Flags::COMMIT,
                _ => Flags::NONE,
            };
            let mut payload = Vec::new();
            crate::codec::put_varint(&mut payload, spill);
            let appended = wal
                .append_with_deps(txn, log::OP_TXN_LINK, flags, &payload, deps)
                .map_err(log::log_err);
            // Refused (a later record of several), the commit's records so far have no
            // commit record: recovery drops them.
            let (lsn, _, patch) = match self.inner.guard_space(appended) {
                Err(e) if e.is_out_of_zones() => {
                    self.refused = true;
                    return Err(e);
                }
                r => r?,
            };
            if let Some(engaged) = &engaged {
                self.inner.groups.adopt(engaged, patch, lsn);
            }
            lsns.push(lsn);
        }
        let last = lsns.last().copied().unwrap_or(w.last_seq);
        let linked: LinkedRuns = self
            .runs
            .iter()
            .map(|(table, runs)| {
                let runs = runs
                    .iter()
                    .map(|(spill, run)| {
                        let linked = run.linked(lsns[(*spill - 1) as usize]);
                        // The linked run owns the references now.
                        run.keep();
                        linked
                    })
                    .collect();
                (*table, runs)
            })
            .collect();
        // A table that keeps no runs (a B+tree) takes their entries now, under the write
        // lock: the checkpoint this link is part of freezes it next, so its manifest holds
        // them; the runs are then retired (`TableData::link`).
        let version = self.inner.version.read().clone();
        let oldest = self.inner.oldest_reader_locked(w);
        for (table, runs) in self.runs {
            let oldest_first: Vec<_> = runs
                .iter()
                .rev()
                .map(|(spill, run)| (lsns[(*spill - 1) as usize], run.clone()))
                .collect();
            version.table(*table)?.data.absorb(&oldest_first, oldest)?;
        }
        // Other open transactions validate against what this commit wrote: its keys (read
        // back from its runs: the write set is gone) and its range deletes.
        if w.oracle.tracking() {
            let mut keys = Vec::new();
            let mut ranges: Vec<RangeOp> = Vec::new();
            for (table, runs) in &linked {
                for run in runs {
                    for entry in run.iter_from(&[]) {
                        keys.push((*table, entry?.key));
                    }
                    ranges.extend(
                        run.meta
                            .ranges
                            .iter()
                            .map(|t| (*table, t.start.clone(), t.end.clone())),
                    );
                }
            }
            w.oracle.record(last, keys, ranges);
        }
        Ok((linked, last))
    }

    fn refused(&self) -> bool {
        self.refused
    }
}

/// Links `runs` (from `spills` spills) as one commit, if `validate` (called under the writer
/// lock) accepts it.
pub(crate) fn link_transaction(
    inner: &Arc<Inner>,
    runs: &PrivateRuns,
    spills: u64,
    validate: impl FnOnce(&mut Oracle) -> Result<()>,
) -> Result<()> {
    let mut linking = Linking {
        inner,
        runs,
        spills,
        validate: Some(validate),
        refused: false,
    };
    checkpoint_linking(inner, &mut linking).map(|_| ())
}
