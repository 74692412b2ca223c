//! ARIES-style recovery over one log: analysis, redo, undo. It writes nothing (no compensation
//! records, no appends), so a crash during recovery just means running it again; see the
//! contract for redo and undo functions in [`OpRegistry`].
//!
//! * **Analysis** reads every valid record from the start position. A log that ends in
//!   damage (valid records past a bad one vouch that it was durable: see [`LogEnd`]) is an
//!   error, [`WalError::Damaged`]; [`Wal::recover_salvaging`] (for repair) reads on past it
//!   instead. Winners: each AUTOCOMMIT
//!   record (a transaction by itself) and each transaction with a COMMIT record. Losers: every
//!   other transaction (ABORT, or no end record before the log's end). Every record's op must
//!   be registered (or be [`OP_NOOP`]): an unknown op is an error before
//!   anything is redone.
//! * **Redo** reads the log again in LSN order. An op with an undo function is redone for every
//!   transaction (ARIES repeats history); a redo-only op (applied by the upper layer only at
//!   commit) is redone for winners only.
//! * **Undo** runs the undo functions of the losers' records in reverse LSN order.
//!
//! Transaction ids must be unique within a log (AUTOCOMMIT records aside: their txn field is
//! not used).

use crate::end::LogEnd;
use crate::reader::{LogReader, SkippedDamage};
use crate::registry::{OpRegistry, OP_NOOP};
use crate::{LogPosition, LogRecord, Lsn, Result, TxnId, Wal, WalError};
use std::collections::{HashMap, HashSet};
use stitch_zone::{ZoneId, ZoneStore};

/// What recovery found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Where reading started.
    pub start: LogPosition,
    /// Where the next record would go: just after the last valid one.
    pub end: LogPosition,
    /// Why the log ends at `end` (clean, or a torn/corrupt record: normal after a crash).
    pub end_reason: LogEnd,
    /// The last valid record's LSN; `None` for an empty log.
    pub last_lsn: Option<Lsn>,
    /// The LSN a new log should start at to keep LSNs increasing (`last_lsn + 1`).
    pub next_lsn: Lsn,
    /// Valid records read.
    pub records: u64,
    /// Committed transactions (AUTOCOMMIT records count one each).
    pub winners: u64,
    /// Transactions that did not commit (aborted, or cut off by the log's end).
    pub losers: u64,
    /// The losers' ids, ascending.
    pub loser_txns: Vec<TxnId>,
    /// Redo functions run.
    pub redone: u64,
    /// Undo functions run.
    pub undone: u64,
    /// The zones of the log, in order, including the preallocated next one. They were
    /// claimed in the zone store; release them once a checkpoint no longer names this log.
    pub zones: Vec<ZoneId>,
    /// Salvage only: the damaged stretches read past, in log order.
    pub skipped: Vec<SkippedDamage>,
    /// Salvage only: committed transactions not redone because damage may have taken some
    /// of their records (a damaged stretch lies between their first record read and their
    /// commit), ascending.
    pub incomplete_txns: Vec<TxnId>,
}

/// What the analysis pass learns.
struct Analysis {
    end: LogPosition,
    end_reason: LogEnd,
    records: u64,
    autocommits: u64,
    committed: HashSet<TxnId>,
    losers: Vec<TxnId>,
    /// The losers' records that have an undo function, in LSN order.
    to_undo: Vec<LogRecord>,
    zones: Vec<ZoneId>,
    skipped: Vec<SkippedDamage>,
    incomplete: Vec<TxnId>,
}

impl Wal {
    /// Recovers the log of epoch `epoch` starting at `start` (from the last checkpoint):
    /// claims its zones in `zones`, then runs analysis, redo and undo with the operations of
    /// `registry`. Call it once per opened zone store, before `finish_open`.
    pub fn recover(
        zones: &ZoneStore,
        start: LogPosition,
        epoch: u64,
        registry: &OpRegistry,
    ) -> Result<RecoveryReport> {
        Self::recover_reading(zones, start, epoch, registry, false)
    }

    /// [`recover`](Self::recover) for repair: damage does not stop it. Reading resumes at the
    /// first valid record past each damaged stretch; what was read past and the committed
    /// transactions not redone because damage may have taken part of them are in the report.
    pub fn recover_salvaging(
        zones: &ZoneStore,
        start: LogPosition,
        epoch: u64,
        registry: &OpRegistry,
    ) -> Result<RecoveryReport> {
        Self::recover_reading(zones, start, epoch, registry, true)
    }

    fn recover_reading(
        zones: &ZoneStore,
        start: LogPosition,
        epoch: u64,
        registry: &OpRegistry,
        salvage: bool,
    ) -> Result<RecoveryReport> {
        let analysis = analyze(zones, start, epoch, registry, salvage)?;
        for &zone in &analysis.zones {
            zones.claim_zone(zone)?;
        }
        let redone = redo(zones, start, epoch, registry, &analysis, salvage)?;
        let mut undone = 0;
        for record in analysis.to_undo.iter().rev() {
            registry.undo(record)?;
            undone += 1;
        }
        let last_lsn = (analysis.end.lsn > start.lsn).then(|| analysis.end.lsn - 1);
        let report = RecoveryReport {
            start,
            end: analysis.end,
            end_reason: analysis.end_reason,
            last_lsn,
            next_lsn: analysis.end.lsn,
            records: analysis.records,
            winners: analysis.autocommits + analysis.committed.len() as u64,
            losers: analysis.losers.len() as u64,
            loser_txns: analysis.losers,
            redone,
            undone,
            zones: analysis.zones,
            skipped: analysis.skipped,
            incomplete_txns: analysis.incomplete,
        };
        tracing::info!(
            records = report.records,
            winners = report.winners,
            losers = report.losers,
            redone = report.redone,
            undone = report.undone,
            end = %report.end_reason,
            "log recovered"
        );
        Ok(report)
    }
}

fn analyze(
    zones: &ZoneStore,
    start: LogPosition,
    epoch: u64,
    registry: &OpRegistry,
    salvage: bool,
) -> Result<Analysis> {
    let mut reader = open_reader(zones, start, epoch, salvage)?;
    let mut records = 0;
    let mut autocommits = 0;
    let mut committed = HashSet::new();
    let mut seen = HashSet::new();
    // Undoable records of transactions not known to have committed.
    let mut undoable: HashMap<TxnId, Vec<LogRecord>> = HashMap::new();
    // Each transaction's first record read, and its commit record's LSN.
    let mut first_seen: HashMap<TxnId, Lsn> = HashMap::new();
    let mut commit_lsn: HashMap<TxnId, Lsn> = HashMap::new();
    while let Some((_, record)) = reader.next_record()? {
        records += 1;
        let has_undo = match record.op {
            OP_NOOP => false,
            op => registry.has_undo(op).ok_or(WalError::UnknownOp {
                lsn: record.lsn,
                txn: record.txn,
                op,
            })?,
        };
        if record.flags.contains(crate::Flags::AUTOCOMMIT) {
            autocommits += 1;
            continue;
        }
        seen.insert(record.txn);
        first_seen.entry(record.txn).or_insert(record.lsn);
        if record.flags.contains(crate::Flags::COMMIT) {
            committed.insert(record.txn);
            commit_lsn.insert(record.txn, record.lsn);
            undoable.remove(&record.txn);
        } else if has_undo {
            undoable.entry(record.txn).or_default().push(record);
        }
    }
    let skipped = reader.skipped().to_vec();
    // A damaged stretch between a transaction's first record read and its commit may have
    // held records of it: not redone (a salvaging read only; otherwise nothing is skipped).
    let mut incomplete: Vec<TxnId> = committed
        .iter()
        .copied()
        .filter(|txn| {
            skipped
                .iter()
                .any(|d| d.at.lsn < commit_lsn[txn] && d.resume.lsn >= first_seen[txn])
        })
        .collect();
    incomplete.sort_unstable();
    for txn in &incomplete {
        committed.remove(txn);
    }
    let mut losers: Vec<TxnId> = seen.difference(&committed).copied().collect();
    losers.sort_unstable();
    let mut to_undo: Vec<LogRecord> = undoable.into_values().flatten().collect();
    to_undo.sort_unstable_by_key(|r| r.lsn);
    let end_reason = reader
        .end()
        .cloned()
        .ok_or_else(|| WalError::Invalid("log reader stopped early".into()))?;
    if end_reason.damage.is_some() {
        return Err(WalError::Damaged(Box::new(end_reason)));
    }
    if let (Some(zone), false) = (end_reason.cut, salvage) {
        return Err(WalError::Corrupt {
            what: "store file",
            place: format!("zone {zone} (disk byte {})", zones.zone_offset(zone)),
            detail: end_reason.to_string(),
        });
    }
    Ok(Analysis {
        end: reader.position(),
        end_reason,
        records,
        autocommits,
        committed,
        losers,
        to_undo,
        zones: reader.zones(),
        skipped,
        incomplete,
    })
}

fn open_reader(
    zones: &ZoneStore,
    start: LogPosition,
    epoch: u64,
    salvage: bool,
) -> Result<LogReader<'_>> {
    if salvage {
        LogReader::open_salvaging(zones, start, epoch)
    } else {
        LogReader::open(zones, start, epoch)
    }
}

/// The redo pass: reads the log again, up to where analysis found its end.
fn redo(
    zones: &ZoneStore,
    start: LogPosition,
    epoch: u64,
    registry: &OpRegistry,
    analysis: &Analysis,
    salvage: bool,
) -> Result<u64> {
    let mut reader = open_reader(zones, start, epoch, salvage)?;
    let mut redone = 0;
    while reader.position().lsn < analysis.end.lsn {
        let Some((_, record)) = reader.next_record()? else {
            return Err(WalError::Corrupt {
                what: "log",
                place: reader.position().to_string(),
                detail: format!(
                    "the log changed during recovery: the redo pass ends here, the analysis pass ended at {}",
                    analysis.end
                ),
            });
        };
        if record.op == OP_NOOP {
            continue;
        }
        let winner = record.flags.contains(crate::Flags::AUTOCOMMIT)
            || analysis.committed.contains(&record.txn);
        if winner || registry.has_undo(record.op) == Some(true) {
            registry.redo(&record)?;
            redone += 1;
        }
    }
    Ok(redone)
}
