//! Ingesting: a batch's long sorted stretch of puts to one table (a file system's write of
//! many consecutive 4 KiB blocks) is written straight into a new level-0 run, and the log
//! gets a small record naming that run instead of the values. The values are written once
//! (the run) instead of twice (the log, then the memtable's flush), and merges later stitch
//! the run's blocks without copying them.
//!
//! Ordering and crashes:
//! * The record depends on the patch writing the run's extents, so a durable record never
//!   names a run that is not on the disk; a crash before the record is durable loses the
//!   commit whole (it was not acknowledged as durable), and the run's extents, named by
//!   nothing durable, are free space at the next open. The writer does not wait for the
//!   run's sync: readers read its blocks through the block cache until they are written, and
//!   a merge makes them durable before stitching them.
//! * The record also carries the batch's other operations (and range deletes), so the
//!   commit stays one record: atomic, and in the log's order with every other commit.
//! * Until a manifest whose checkpoint covers the record is durable, recovery replays the
//!   record and adopts the run again, so the run's extents must stay intact that long even if
//!   a merge retires the run: `CheckpointState::log_named` holds such runs back (see
//!   `checkpoint::write_manifest`), and a checkpoint is asked for once [`LOGGED_RUNS_LIMIT`]
//!   runs are waiting, which bounds both that and replay.
//! * Readers take the first layer holding a key (memtable, frozen memtable, runs newest
//!   first). The run goes in front of level 0, behind the memtables, so it holds none of the
//!   keys the memtables hold a version of: those few (after random writes, the memtable holds
//!   keys all over a file) go through the memtable with the rest of the batch, in front of
//!   their older versions; with more than an eighth of the stretch held, the batch is written
//!   the ordinary way. Every run holds only older versions. Replay copies the run's entries
//!   into the replayed memtable instead (see `recover::redo_ingest`).

use super::Inner;
use crate::batch::{decode_ops, OpsPayload, RangeOp, TableId};
use crate::codec::{put_varint, Reader};
use crate::entry::Value;
use crate::layout::vtree;
use crate::layout::vtree::run::{Run, RunMeta};
use crate::layout::TableData;
use crate::Result;
use std::ops::Range;
use std::sync::Arc;
use stitch_patch::PatchId;

/// Runs named only by log records (not yet by a durable manifest) past which a checkpoint
/// is due.
pub(crate) const LOGGED_RUNS_LIMIT: usize = 64;

/// The stretch of `ops` worth ingesting, if any: consecutive puts to one table, keys strictly
/// increasing, at least `min_bytes` of keys and values (`Options::ingest_min_bytes`; the
/// largest such stretch).
pub(crate) fn find_stretch(
    ops: &[(TableId, Vec<u8>, Value)],
    min_bytes: usize,
) -> Option<Range<usize>> {
    let mut best: Option<(Range<usize>, usize)> = None;
    let mut i = 0;
    while i < ops.len() {
        let (table, key, value) = &ops[i];
        let Some(v) = value else {
            i += 1;
            continue;
        };
        let (start, mut bytes, mut last) = (i, key.len() + v.len(), key);
        i += 1;
        while let Some((t, k, Some(v))) = ops.get(i) {
            if t != table || k <= last {
                break;
            }
            bytes += k.len() + v.len();
            last = k;
            i += 1;
        }
        if bytes >= min_bytes && best.as_ref().is_none_or(|(_, b)| bytes > *b) {
            best = Some((start..i, bytes));
        }
    }
    best.map(|(r, _)| r)
}

/// Writes `puts` (sorted, all puts to one table, which `holder` holds: it or, for a
/// partitioned one, the region of every key) as a level-0 run of `holder` whose entries have
/// sequence number `seq` into the block cache (`None` for no puts); returns it and the patch
/// writing it, which the record naming the run must follow. The caller holds the writer lock
/// (`seq` is the next record's LSN).
pub(crate) fn write_run<'a>(
    inner: &Inner,
    holder: TableId,
    puts: impl IntoIterator<Item = &'a (TableId, Vec<u8>, Value)>,
    seq: u64,
) -> Result<Option<(Arc<Run>, PatchId)>> {
    let (filter, window) = {
        let version = inner.version.read();
        let stack = version.table(holder)?.layout.stack();
        (inner.filter_choice(stack), stack.window)
    };
    let puts = puts
        .into_iter()
        .map(|(_, key, value)| (key.as_slice(), value.as_deref()));
    vtree::ingest::write_run(
        &inner.storage,
        inner.next_run_id(),
        (filter, window),
        puts,
        seq,
    )
}

/// The record of an ingest: the table, the run's manifest entry, then the batch's other
/// operations as a batch record encodes them (`OpsPayload`).
pub(crate) fn record_head(table: TableId, run: &RunMeta) -> Vec<u8> {
    let mut meta = Vec::new();
    run.encode(&mut meta, true);
    let mut head = Vec::with_capacity(meta.len() + 12);
    put_varint(&mut head, u64::from(table.0));
    put_varint(&mut head, meta.len() as u64);
    head.extend_from_slice(&meta);
    head
}

/// An ingest record's contents.
pub(crate) struct IngestRecord {
    pub table: TableId,
    pub run: RunMeta,
    pub ops: Vec<(TableId, Vec<u8>, Value)>,
    pub ranges: Vec<RangeOp>,
}

/// Decodes an ingest record's payload.
pub(crate) fn decode_record(payload: &[u8]) -> std::result::Result<IngestRecord, String> {
    let mut r = Reader::new(payload);
    let table = TableId(u32::try_from(r.varint()?).map_err(|_| "table id out of range")?);
    let meta_len = r.len()?;
    let mut meta = Reader::new(r.take(meta_len)?);
    let run = RunMeta::decode(&mut meta, crate::manifest::MANIFEST_VERSION)?;
    if !meta.is_empty() {
        return Err("trailing bytes after the run's entry".into());
    }
    if run.level != 0 || run.seq_override.is_some() || run.index.is_empty() {
        return Err(format!("run {} is not an ingested run", run.id));
    }
    let (ops, ranges) = decode_ops(&payload[r.pos()..], true)?;
    Ok(IngestRecord {
        table,
        run,
        ops,
        ranges,
    })
}

/// The pieces of an ingest record for `head` and the batch's other operations.
pub(crate) fn with_record_pieces<R>(
    head: &[u8],
    rest: &OpsPayload,
    f: impl FnOnce(&[&[u8]]) -> R,
) -> R {
    rest.with_pieces(|pieces| {
        let mut all = Vec::with_capacity(pieces.len() + 1);
        all.push(head);
        all.extend_from_slice(pieces);
        f(&all)
    })
}

/// Puts an ingested `run` (its record at `lsn`) in front of level 0 of `table`, and holds
/// its extents until a manifest covering `lsn` is durable. The caller holds the writer lock.
pub(crate) fn install(inner: &Inner, table: TableId, run: Arc<Run>, lsn: u64) {
    let mut ck = inner.checkpoint.lock();
    ck.ingested_runs += 1;
    ck.ingested_bytes += run.meta.data_bytes;
    ck.log_named.insert(run.meta.id, lsn);
    inner
        .logged_runs
        .store(ck.log_named.len(), std::sync::atomic::Ordering::Release);
    let mut version = inner.version.write();
    let mut v = (**version).clone();
    // Only a VT-tree takes an ingested run (`LayoutData::memtable_keys_in`), and keeps it.
    v.update(table, |t| {
        t.data.link(&[run]);
    });
    *version = Arc::new(v);
}
