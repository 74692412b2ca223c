//! The write path: validate, append to the log, apply to memtables, then make durable as the
//! write's durability asks.

use super::tables::{check_bound, check_op};
use super::{background, checkpoint, compact, ingest, log, space, Db, Inner};
use crate::batch::{range_refs, OpsPayload, RangeOp, TableId, WriteBatch};
use crate::concurrency::{HeldLocks, LockMode, Oracle};
use crate::entry::Value;
use crate::options::Durability;
use crate::{Error, Result};
use std::borrow::Cow;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use stitch_patch::PatchContext;
use stitch_wal::Flags;
use stitch_zone::Stream;

/// In inline mode (no background thread) `Ordered` writes are flushed every this many.
const INLINE_ORDERED_FLUSH_EVERY: u64 = 8;

impl Db {
    /// Sets `key` to `value` in `table` with the store's default durability.
    pub fn put(
        &self,
        table: TableId,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put(table, key.as_ref(), value.as_ref());
        self.write_owned(b, self.inner.opts.durability)
    }

    /// Removes `key` from `table` (a no-op if absent) with the store's default durability.
    pub fn delete(&self, table: TableId, key: impl AsRef<[u8]>) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(table, key.as_ref());
        self.write_owned(b, self.inner.opts.durability)
    }

    /// Deletes every key from `start` (inclusive) to `end` (exclusive) in `table` with one
    /// range tombstone, however many keys the range holds (nothing if `start >= end`).
    pub fn delete_range(
        &self,
        table: TableId,
        start: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
    ) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete_range(table, start.as_ref(), end.as_ref());
        self.write_owned(b, self.inner.opts.durability)
    }

    /// Applies a batch atomically: after a crash all of it or none of it is present.
    pub fn write(&self, batch: &WriteBatch, durability: Durability) -> Result<()> {
        write_batch(&self.inner, Cow::Borrowed(batch), durability)
    }

    /// [`write`](Self::write) of a batch the store takes: its values move into the memtable
    /// instead of being copied.
    pub fn write_owned(&self, batch: WriteBatch, durability: Durability) -> Result<()> {
        write_batch(&self.inner, Cow::Owned(batch), durability)
    }
}

fn validate(inner: &Inner, batch: &WriteBatch) -> Result<()> {
    let version = inner.version.read().clone();
    for (table, key, value) in &batch.ops {
        check_op(inner, &version, *table, key, value.as_deref())?;
    }
    for (table, start, end) in &batch.ranges {
        check_bound(&version, *table, start)?;
        check_bound(&version, *table, end)?;
    }
    Ok(())
}

/// Splits a batch into log payloads that each fit in a record: range deletes first, then the
/// other operations. (Replay gives each record its own sequence number, so a range delete must
/// come before the batch's puts it must not hide.)
fn chunks(batch: &WriteBatch, max_payload: usize) -> Vec<OpsPayload<'_>> {
    let range_size = |(_, s, e): &RangeOp| s.len() + e.len() + 24;
    let op_size =
        |(_, k, v): &(TableId, Vec<u8>, Value)| k.len() + v.as_ref().map_or(0, Vec::len) + 24;
    let mut out: Vec<OpsPayload> = split(&batch.ranges, max_payload, range_size)
        .map(|ranges| OpsPayload::new(&[], ranges))
        .collect();
    out.extend(split(&batch.ops, max_payload, op_size).map(|ops| OpsPayload::new(ops, &[])));
    out
}

/// Cuts `items` into runs of consecutive items whose sizes add up to at most `max` (an item
/// larger than that alone).
fn split<'a, T>(
    items: &'a [T],
    max: usize,
    size: impl Fn(&T) -> usize + 'a,
) -> impl Iterator<Item = &'a [T]> + 'a {
    let mut start = 0;
    std::iter::from_fn(move || {
        if start == items.len() {
            return None;
        }
        let (mut end, mut total) = (start, 16);
        while end < items.len() && (end == start || total + size(&items[end]) <= max) {
            total += size(&items[end]);
            end += 1;
        }
        let piece = &items[start..end];
        start = end;
        Some(piece)
    })
}

/// Commits a plain batch, reclaiming space if the store is full (see [`commit_reclaiming`]).
pub(crate) fn write_batch(
    inner: &Arc<Inner>,
    mut batch: Cow<WriteBatch>,
    durability: Durability,
) -> Result<()> {
    let written = super::large::externalize(inner, &mut batch)?;
    let commit = || {
        commit_batch(
            inner,
            &mut batch,
            durability,
            Committer::Plain,
            |_: &mut Oracle| Ok(()),
        )
    };
    let r = commit_reclaiming(inner, commit, || true);
    if let (Err(_), Some(written)) = (&r, written) {
        written.discard(inner);
    }
    r
}

/// Runs `commit`. If the store refuses it for want of space, reclaims space (see
/// [`space::reclaim`]), and runs it once more if that may have made room and `may_retry`
/// says the refused commit can run again (a transaction can only before its validation).
/// Otherwise the refusal stands, and the reclaim has made room for the caller's next try.
pub(crate) fn commit_reclaiming(
    inner: &Arc<Inner>,
    mut commit: impl FnMut() -> Result<()>,
    may_retry: impl Fn() -> bool,
) -> Result<()> {
    let reclaims = space::reclaims(inner);
    match commit() {
        Err(e) if e.is_out_of_zones() => {
            if space::reclaim(inner, reclaims)? && may_retry() {
                commit()
            } else {
                Err(e)
            }
        }
        r => r,
    }
}

/// Who commits a batch: what is still to be checked, and whether it holds its locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Committer {
    /// A plain write: its operations are checked here.
    Plain,
    /// A transaction, which checked each write as it was made; a locking one holds exclusive
    /// locks on everything it writes.
    Transaction { holds_locks: bool },
}

/// Applies `batch` as one commit if `validate_commit` (called under the write lock, so no
/// other commit can come between its verdict and this one) accepts it; else returns its error
/// and writes nothing. The oracle's record of this commit is made after `validate_commit`
/// returns, so a transaction that ends itself there is not counted among those it concerns.
/// While a locking transaction is open, a committer without locks first takes exclusive locks
/// on what it writes (waiting as locking transactions do), and releases them once visible.
/// The values of an owned batch move into the memtable; a borrowed one's are copied.
pub(crate) fn commit_batch(
    inner: &Arc<Inner>,
    batch: &mut Cow<WriteBatch>,
    durability: Durability,
    committer: Committer,
    validate_commit: impl FnOnce(&mut Oracle) -> Result<()>,
) -> Result<()> {
    inner.check_writable()?;
    if batch.is_empty() {
        return Ok(());
    }
    super::large::add_hidden_deletes(&inner.version.read(), batch);
    if committer == Committer::Plain {
        validate(inner, batch)?;
    }
    let wal = inner.wal()?;
    // A long sorted stretch of puts to one table is written as a run of its own (see
    // `ingest`); a transaction's writes are not (it may hold locks or spill).
    let mut stretch = match committer {
        Committer::Plain => ingest::find_stretch(&batch.ops, inner.opts.ingest_min_bytes),
        Committer::Transaction { .. } => None,
    };
    let payloads = chunks(batch, wal.max_payload() / 2);
    let engaged = PatchContext::with_current(|ctx| inner.groups.engaged(ctx));
    // An engaged commit's record goes into the cache at once (its patch joins the groups'
    // heads) but carries none of the groups' tails: everything a group can follow was
    // committed before it was first engaged, so is earlier in the log, which recovery reads
    // as a prefix. The tails would only make the cache write the chain of groups a round
    // (and a device flush) per link.
    let deps = engaged.as_ref().map(|_| &[][..]);
    let holds_locks = committer == Committer::Transaction { holds_locks: true };
    let mut locked: Option<HeldLocks> = None;
    let mut validate_commit = Some(validate_commit);
    let (lsn, full, ingested) = loop {
        let mut w = inner.write.lock();
        inner.check_writable()?;
        // Whether a locking transaction is open is asked under the write lock, where they
        // begin: one that begins after this commit reads what it wrote.
        if w.oracle.locking_open() && !holds_locks && locked.is_none() {
            drop(w);
            locked = Some(lock_batch(inner, batch)?);
            continue;
        }
        // A full store takes only what it can flush and merge (see `space`); refused here,
        // before anything is written, the store stays writable.
        space::admit(inner, batch)?;
        if committer != Committer::Plain {
            // Validation ends a transaction whatever follows: the log's room for the first
            // record is found before it, so a full store refuses the transaction while it
            // can still commit after a reclaim (see `commit_reclaiming`). Only one of more
            // records than one (over half a segment) can be refused at the log after it.
            if let Some(first) = payloads.first() {
                let len = first.with_pieces(|p| p.iter().map(|piece| piece.len()).sum());
                inner.guard_space(wal.make_room(len).map_err(log::log_err))?;
            }
        }
        if let Some(validate) = validate_commit.take() {
            validate(&mut w.oracle)?;
        }
        let txn = w.next_txn;
        w.next_txn += 1;
        let mut lsn = 0;
        let ingested = match stretch.take() {
            Some(range) => try_ingest(inner, wal, batch, range, txn, deps)?,
            None => None,
        };
        if let Some(ingest) = &ingested {
            lsn = ingest.lsn;
            if let (Some(patch), Some(engaged)) = (ingest.patch, &engaged) {
                inner.groups.adopt(engaged, patch, lsn);
            }
        }
        for (i, payload) in payloads.iter().enumerate() {
            if ingested.is_some() {
                break;
            }
            let flag = match (payloads.len(), i + 1 == payloads.len()) {
                (1, _) => Flags::AUTOCOMMIT,
                (_, true) => Flags::COMMIT,
                _ => Flags::NONE,
            };
            // With no patchgroup engaged nothing needs the record's patch, so the log may
            // keep the record in memory until a flush (or drop it if a checkpoint comes first).
            let appended = payload.with_pieces(|pieces| {
                wal.append_parts(txn, log::OP_BATCH_RANGES, flag, pieces, deps)
            });
            let (record_lsn, _, patch) = inner.guard_space(appended.map_err(log::log_err))?;
            if let (Some(patch), Some(engaged)) = (patch, &engaged) {
                inner.groups.adopt(engaged, patch, record_lsn);
            }
            lsn = record_lsn;
        }
        // Told before the memtables take an owned batch's values.
        let observed = !w.observers.is_empty();
        if observed {
            let commit = super::Commit::batch(lsn, &batch.ops, &batch.ranges);
            w.observers.committing(&commit);
        }
        // Every op of the batch gets the commit's sequence number: readers see all or none.
        let version = inner.version.read().clone();
        // The ingested stretch is in its run already, but for the keys the memtables held.
        let in_run = |i: &usize| {
            ingested
                .as_ref()
                .is_some_and(|g| g.range.contains(i) && g.held.binary_search(i).is_err())
        };
        match batch {
            Cow::Owned(b) => {
                let ops = b.ops.iter_mut().enumerate().filter(|(i, _)| !in_run(i));
                let ops = ops.map(|(_, (table, key, value))| (*table, &key[..], value.take()));
                version.apply_commit(lsn, range_refs(&b.ranges), ops, || {
                    inner.oldest_reader_locked(&w)
                })?;
            }
            Cow::Borrowed(b) => {
                let ops = b.ops.iter().enumerate().filter(|(i, _)| !in_run(i));
                let ops = ops.map(|(_, (table, key, value))| (*table, &key[..], value.clone()));
                version.apply_commit(lsn, range_refs(&b.ranges), ops, || {
                    inner.oldest_reader_locked(&w)
                })?;
            }
        }
        let ingested = ingested.map(|ingest| ingest::install(inner, ingest.table, ingest.run, lsn));
        if w.oracle.tracking() {
            let keys = batch.ops.iter().map(|(t, k, _)| (*t, k.clone())).collect();
            w.oracle.record(lsn, keys, batch.ranges.clone());
        }
        w.last_seq = lsn;
        inner.visible_seq.store(lsn, Ordering::Release);
        if observed {
            w.observers.committed(lsn);
        }
        if durability == Durability::Ordered {
            w.unflushed_ordered += 1;
        }
        let full = inner.checkpoint_due(&version);
        break (lsn, full, ingested.is_some());
    };
    drop(locked);
    match durability {
        Durability::Sync => inner.sync_log(lsn)?,
        Durability::Written => inner.write_log(lsn)?,
        Durability::Ordered if !inner.opts.background => flush_ordered_inline(inner)?,
        Durability::Ordered => background::ordered_write(inner),
        Durability::Async => {}
    }
    if inner.opts.background {
        background::pace(inner, batch.size());
    }
    if full {
        // The commit itself succeeded; if writing the memtable out fails, the store turns
        // read-only and the next write reports why.
        if let Err(e) = memtable_full(inner) {
            tracing::warn!("writing out a full memtable failed: {e}");
        }
    }
    if ingested {
        // A new level-0 run, as a memtable flush makes: merges may be due.
        if inner.opts.background {
            background::request_compaction(inner);
        } else if let Err(e) = merge_inline(inner) {
            tracing::warn!("merging after an ingest failed: {e}");
        }
    }
    Ok(())
}

/// A stretch of a batch written as a run, and the record naming it.
struct Ingested {
    range: std::ops::Range<usize>,
    /// The stretch's ops (indices into the batch, ascending) left out of the run: keys the
    /// memtables held, written through the memtable.
    held: Vec<usize>,
    /// The table the run is of: the batch's, or the region of a partitioned one holding it.
    table: TableId,
    run: Arc<crate::layout::vtree::run::Run>,
    lsn: u64,
    patch: Option<stitch_patch::PatchId>,
}

/// Writes `batch.ops[range]` as a run and appends the commit's one record (the run's entry and
/// the batch's other operations), under the writer lock. Keys of the stretch the memtables
/// hold go with the other operations (see `ingest`). `None` (nothing written) when the
/// memtables hold too many of them, or the rest of the batch does not fit in one record: the
/// batch is then written the ordinary way.
fn try_ingest(
    inner: &Inner,
    wal: &stitch_wal::Wal,
    batch: &WriteBatch,
    range: std::ops::Range<usize>,
    txn: u64,
    deps: Option<&[stitch_patch::PatchId]>,
) -> Result<Option<Ingested>> {
    let stretch = &batch.ops[range.clone()];
    let (Some(first), Some(last)) = (stretch.first(), stretch.last()) else {
        return Ok(None);
    };
    let table = first.0;
    let version = inner.version.read().clone();
    // A partitioned table's stretch is a run of the region holding it, if one region does.
    let holder = version.route(table, &first.1)?;
    if version.route(table, &last.1)?.id != holder.id {
        return Ok(None);
    }
    // The keys the memtables hold are written through them instead: a run ingested behind
    // them must not hold them.
    let Some(in_memtables) = holder
        .data
        .memtable_keys_in(&first.1, &last.1, stretch.len() / 8)
    else {
        return Ok(None);
    };
    let held: Vec<usize> = range
        .clone()
        .filter(|&i| in_memtables.contains(&batch.ops[i].1))
        .collect();
    let outside: Vec<_> = batch.ops[..range.start]
        .iter()
        .chain(&batch.ops[range.end..])
        .collect();
    // Another write of the batch to a key in the stretch's range would sit in the memtable,
    // in front of the run, whatever its place in the batch.
    let inside =
        |(t, k, _): &&(TableId, Vec<u8>, Value)| *t == table && first.1 <= *k && *k <= last.1;
    if outside.iter().any(inside) {
        return Ok(None);
    }
    let rest: Vec<_> = outside
        .into_iter()
        .chain(held.iter().map(|&i| &batch.ops[i]))
        .cloned()
        .collect();
    let rest_bytes: usize = rest
        .iter()
        .map(|(_, k, v)| k.len() + v.as_ref().map_or(0, Vec::len) + 24)
        .chain(batch.ranges.iter().map(|(_, s, e)| s.len() + e.len() + 24))
        .sum();
    // The run's entry (a few addresses) and the rest, in one record.
    if rest_bytes + 4096 > wal.max_payload() / 2 {
        return Ok(None);
    }
    let seq = wal.last_lsn() + 1;
    let into_run = range
        .clone()
        .filter(|i| held.binary_search(i).is_err())
        .map(|i| &batch.ops[i]);
    let written = ingest::write_run(inner, holder.id, into_run, seq);
    let Some((run, written)) = inner.guard_space(written)? else {
        return Ok(None);
    };
    let head = ingest::record_head(holder.id, &run.meta);
    let rest = OpsPayload::new(&rest, &batch.ranges);
    // The record reaches the disk only after the run does.
    let mut after = deps.map_or_else(Vec::new, <[_]>::to_vec);
    after.push(written);
    let appended = ingest::with_record_pieces(&head, &rest, |pieces| {
        wal.append_parts(txn, log::OP_INGEST, Flags::AUTOCOMMIT, pieces, Some(&after))
    });
    let appended = inner.guard_space(appended.map_err(log::log_err));
    let (lsn, patch) = match appended {
        Ok((lsn, _, patch)) if lsn == seq => (lsn, patch),
        other => {
            // Named by nothing: its extents go with it.
            run.mark_obsolete();
            let (lsn, _, _) = other?;
            // Every record is appended under the writer lock, so this cannot happen.
            let e = Error::Corrupt {
                what: "log",
                place: format!("lsn {lsn}"),
                detail: format!("internal error: the ingested run written for LSN {seq} got {lsn}"),
            };
            inner.fail(&e);
            return Err(e);
        }
    };
    Ok(Some(Ingested {
        range,
        held,
        table: holder.id,
        run,
        lsn,
        patch,
    }))
}

/// Exclusive locks on every key and range `batch` writes, for a committer that is not a
/// locking transaction; released when dropped.
fn lock_batch<'a>(inner: &'a Inner, batch: &WriteBatch) -> Result<HeldLocks<'a>> {
    let ranges: Vec<Span> = batch
        .ranges
        .iter()
        .map(|(t, s, e)| (*t, Bound::Included(&s[..]), Bound::Excluded(&e[..])))
        .collect();
    let keys = batch
        .ops
        .iter()
        .map(|(t, k, _)| (*t, k.as_slice()))
        .collect();
    lock_exclusive(inner, &ranges, keys)
}

/// Keys of a table from one bound to another.
pub(crate) type Span<'a> = (TableId, Bound<&'a [u8]>, Bound<&'a [u8]>);

/// Exclusive locks on `ranges` and `keys` for a committer that is not a locking transaction
/// (a one-off owner, released when the result is dropped), waiting as locking transactions
/// do. Keys are taken in order; deadlocks with others are found and broken as between
/// transactions.
pub(crate) fn lock_exclusive<'a>(
    inner: &'a Inner,
    ranges: &[Span],
    mut keys: Vec<(TableId, &[u8])>,
) -> Result<HeldLocks<'a>> {
    let held = HeldLocks::new(&inner.locks);
    let timeout = inner.opts.lock_timeout;
    for &(table, lo, hi) in ranges {
        inner
            .locks
            .lock_range(held.owner(), table, lo, hi, LockMode::Exclusive, timeout)
            .map_err(|e| inner.lock_refused(e))?;
    }
    keys.sort_unstable();
    keys.dedup();
    for (table, key) in keys {
        inner
            .locks
            .lock_key(held.owner(), table, key, LockMode::Exclusive, timeout)
            .map_err(|e| inner.lock_refused(e))?;
    }
    Ok(held)
}

fn flush_ordered_inline(inner: &Arc<Inner>) -> Result<()> {
    let due = {
        let mut w = inner.write.lock();
        let due = w.unflushed_ordered >= INLINE_ORDERED_FLUSH_EVERY;
        if due {
            w.unflushed_ordered = 0;
        }
        due
    };
    if due {
        let r = inner.wal()?.flush_async().map_err(log::log_err);
        inner.guard(r)?;
    }
    Ok(())
}

/// Runs every merge due, in the writer's thread (inline mode).
fn merge_inline(inner: &Arc<Inner>) -> Result<()> {
    while compact::compact_once(inner, Stream::Merge)? {}
    Ok(())
}

/// A memtable is full: write it out now (inline mode) or ask the background thread to, and
/// hold the writer back while the memtable behind it is also still being written.
fn memtable_full(inner: &Arc<Inner>) -> Result<()> {
    if !inner.opts.background {
        checkpoint::checkpoint(inner, checkpoint::Trigger::MemtableFull)?;
        return merge_inline(inner);
    }
    // Freeze the full memtable and go on into a fresh one; if the one frozen before is still
    // being written out, wait for that first.
    if !checkpoint::freeze_full(inner) {
        background::request_checkpoint(inner);
        background::wait_while_backlogged(inner);
        checkpoint::freeze_full(inner);
    }
    background::request_checkpoint(inner);
    inner.check_writable()
}
