//! The page store's recovery over stitch-wal's ([`Wal::recover`]): analysis and redo there,
//! with redo functions that apply a record's page changes only to pages older than it (the
//! page LSN decides, so a record redone twice, or one whose page was written back before
//! the crash, changes nothing), and undo functions that *collect* the losers' records
//! instead of applying them. Recovery thus writes nothing to the log, as stitch-wal's
//! contract asks, and the page store then rolls the losers back under a new log with
//! compensation records (see [`PageStore::open`](crate::PageStore::open)).
//!
//! A page that fails its checks when redo reads it was torn by the crash (or damaged): it
//! is kept as torn, and the first record to change it after the checkpoint, which is logged
//! whole, rebuilds it. A page still torn when redo ends is damage, named.

use crate::change::decode_compensation;
use crate::change::{decode_changes, PageChange};
use crate::checkpoint::{Checkpoint, UndoEntry};
use crate::ops::{
    images_of, undo_payload, OP_COMMIT, OP_COMPENSATE, OP_PAGE_WRITE, OP_ROLLED_BACK,
};
use crate::pool::{Load, Pool};
use crate::{PageId, Result};
use parking_lot::Mutex;
use std::collections::HashSet;
use std::sync::Arc;
use stitch_wal::{LogRecord, Lsn, OpFn, OpRegistry, RecoveryReport, TxnId, Wal};
use stitch_zone::ZoneStore;

/// What redo leaves: the pool with history repeated, the losers' undo information, the LSNs
/// already compensated, and the transactions that committed or finished rolling back.
pub(crate) struct Redone {
    pub(crate) pool: Pool,
    pub(crate) undo: Vec<UndoEntry>,
    pub(crate) compensated: HashSet<Lsn>,
    pub(crate) committed: HashSet<TxnId>,
    pub(crate) rolled_back: HashSet<TxnId>,
}

impl Redone {
    /// Applies `record`'s page changes to every page whose LSN is older than it.
    pub(crate) fn redo(&mut self, record: &LogRecord) -> std::result::Result<(), String> {
        let payload = if record.op == OP_COMPENSATE {
            record.payload.get(8..).unwrap_or_default()
        } else {
            &record.payload
        };
        let (changes, _) =
            decode_changes(payload, images_of(record.op)).map_err(|e| e.to_string())?;
        // A record may change a page in several places: whether the page is older than the
        // record is decided at its first change.
        let mut applying = Vec::new();
        for c in &changes {
            self.apply(record.lsn, c, &mut applying)
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn apply(&mut self, lsn: Lsn, c: &PageChange, applying: &mut Vec<PageId>) -> Result<()> {
        let f = self.pool.pin(c.page, Load::Redo, None)?;
        if self.pool.lsn(f) < lsn {
            applying.push(c.page);
        }
        let result = if !applying.contains(&c.page) {
            Ok(())
        } else if let (Some(why), false) = (self.pool.torn(f), c.is_full()) {
            Err(crate::PageError::CorruptPage {
                page: c.page,
                offset: self.pool.file().offset(c.page)?,
                detail: format!("{why}; the log's change at lsn {lsn} needs its old contents"),
            })
        } else {
            self.pool.write(f, c.offset as usize, &c.after, lsn);
            Ok(())
        };
        self.pool.unpin(f);
        result
    }
}

/// An undo function that records the loser's record for the rollback after recovery.
pub(crate) fn collect_undo(state: &Arc<Mutex<Redone>>) -> OpFn {
    let s = state.clone();
    Box::new(move |r: &LogRecord| {
        let payload = undo_payload(r.op, r.payload.clone()).map_err(|e| e.to_string())?;
        s.lock().undo.push(UndoEntry {
            txn: r.txn,
            lsn: r.lsn,
            op: r.op,
            payload,
        });
        Ok(())
    })
}

/// Runs stitch-wal's recovery of the log `cp` names with the page store's operations and
/// those of the structures over it, redoing into `pool`.
pub(crate) fn redo(
    zones: &ZoneStore,
    cp: &Checkpoint,
    pool: Pool,
) -> Result<(Redone, RecoveryReport)> {
    let state = Arc::new(Mutex::new(Redone {
        pool,
        undo: Vec::new(),
        compensated: HashSet::new(),
        committed: HashSet::new(),
        rolled_back: HashSet::new(),
    }));
    let mut registry = OpRegistry::new();
    register_ops(&mut registry, &state)?;
    crate::register_structure_ops(&mut registry, &state)?;
    let report = Wal::recover(zones, cp.log_start, cp.epoch, &registry)?;
    drop(registry);
    let redone = Arc::try_unwrap(state)
        .map_err(|_| crate::PageError::Invalid("recovery state still shared".into()))?
        .into_inner();
    // Undo functions ran newest first; rollback wants them in log order.
    let mut redone = redone;
    redone.undo.sort_unstable_by_key(|e| e.lsn);
    Ok((redone, report))
}

/// Registers the page store's own operations in `registry`, their redo and undo acting on
/// `state` (recovery's): see [`crate::recovery`].
fn register_ops(registry: &mut OpRegistry, state: &Arc<Mutex<Redone>>) -> Result<()> {
    let s = state.clone();
    registry.register(
        OP_PAGE_WRITE,
        "page: physical write",
        Box::new(move |r: &LogRecord| s.lock().redo(r)),
        Some(collect_undo(state)),
    )?;
    let s = state.clone();
    // Registered with an undo (that does nothing) so it is redone for losers too: a
    // compensation is history to repeat, whoever logged it.
    registry.register(
        OP_COMPENSATE,
        "page: compensation",
        Box::new(move |r: &LogRecord| {
            let mut st = s.lock();
            let (lsn, _) = decode_compensation(&r.payload).map_err(|e| e.to_string())?;
            st.compensated.insert(lsn);
            st.redo(r)
        }),
        Some(Box::new(|_| Ok(()))),
    )?;
    let s = state.clone();
    registry.register(
        OP_COMMIT,
        "page: commit",
        Box::new(move |r: &LogRecord| {
            s.lock().committed.insert(r.txn);
            Ok(())
        }),
        None,
    )?;
    let s = state.clone();
    // With an undo (that does nothing), so it is redone although its transaction is a loser.
    registry.register(
        OP_ROLLED_BACK,
        "page: rolled back",
        Box::new(move |r: &LogRecord| {
            s.lock().rolled_back.insert(r.txn);
            Ok(())
        }),
        Some(Box::new(|_| Ok(()))),
    )?;
    Ok(())
}
