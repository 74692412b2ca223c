//! The writing side of the log: the [`Wal`] and its state (the group commit's [`SyncState`]
//! included), creating a log, appending records, moving to the next segment, and giving back
//! segments a checkpoint no longer needs.

use crate::record::{encode_parts, Flags, RECORD_HEADER_LEN};
use crate::segment::{SegmentHeader, SEGMENT_HEADER_LEN, WAL_FORMAT_VERSION};
use crate::{LogPosition, Lsn, OpId, Result, TxnId, WalError};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use stitch_patch::{PatchId, PatchState};
use stitch_zone::{ZoneId, ZoneStore};

/// One segment of the live log.
#[derive(Debug, Clone, Copy)]
struct Segment {
    zone: ZoneId,
    seq: u64,
    header_patch: PatchId,
}

/// What appending changes, under one lock so records enter the cache in LSN order.
struct Writer {
    /// The segments not yet released, oldest first; the last is the one being written.
    segments: VecDeque<Segment>,
    /// The zone preallocated for the next segment.
    next_zone: ZoneId,
    /// Where the next record goes in the current segment.
    offset: u64,
    next_lsn: Lsn,
    /// Record patches not yet handed to a flush.
    pending: Vec<PatchId>,
    /// The newest LSN whose record was written into the cache (`first_lsn - 1` before any).
    moved: Lsn,
    /// Records appended with [`Wal::append_buffered`] and not yet written into the cache, in
    /// pieces of up to [`piece_capacity`](Self::piece_capacity) bytes (each within one
    /// segment), oldest first; the last piece, if it is in the current segment, ends at
    /// `offset`. They go into the cache when a flush or a caller needing a patch asks; a
    /// checkpoint that overtakes them first drops them, so they never cost the cache or the
    /// device anything, and frees their memory piece by piece.
    buffered: VecDeque<Buffered>,
    /// Buffers of pieces written or dropped, emptied, for the next pieces
    /// ([`Writer::recycle`]).
    spares: Vec<Vec<u8>>,
    /// The capacity a piece is given up front: a [`PIECES_PER_SEGMENT`]th of a segment (a
    /// record larger than that gets a piece of its own size).
    piece_capacity: usize,
    /// [`Wal::rounds`] when the current segment began.
    rounds_at_segment_start: u64,
}

/// The most bytes a log may make durable per sync, on average over a segment, for zeros
/// written ahead into its next zones to pay (see [`Wal::next_segment`]).
const ZEROS_PAY_UP_TO: u64 = 64 << 10;

/// How many emptied piece buffers a log keeps (each of [`Writer::piece_capacity`] bytes).
const MAX_SPARES: usize = 2;

/// How many pieces a segment's buffered records are cut into. A piece is freed whole once a
/// checkpoint overtakes all of it, so the buffer holds about the records a checkpoint has not
/// yet overtaken (an `Async` log's two memtables' worth) plus one piece, not whole segments;
/// pieces of a fixed size, reserved up front and reused, never grow by doubling.
const PIECES_PER_SEGMENT: usize = 8;

/// Buffered records of one segment: `bytes` belong at `start` in it. The first `obsolete`
/// bytes were overtaken by a checkpoint and are never written (skipped, not removed: moving
/// the rest to the front would copy a memtable's worth of records at every checkpoint).
struct Buffered {
    segment: Segment,
    start: u64,
    bytes: Vec<u8>,
    obsolete: usize,
}

impl Buffered {
    /// Where in the segment the bytes still to write start, and those bytes.
    fn unwritten(&self) -> (u64, &[u8]) {
        (
            self.start + self.obsolete as u64,
            &self.bytes[self.obsolete..],
        )
    }
}

impl Writer {
    fn current(&self) -> Segment {
        // The writer always holds at least its current segment: `release_before` keeps the
        // segment it is given and everything after it.
        self.segments[self.segments.len() - 1]
    }

    /// The buffer the next record, of `len` bytes, goes into: the current segment's last
    /// piece if the record fits in what it reserved, else a new piece.
    fn buffer(&mut self, len: usize) -> &mut Vec<u8> {
        let segment = self.current();
        if self.buffered.back().is_none_or(|b| {
            b.segment.zone != segment.zone || b.bytes.len() + len > b.bytes.capacity()
        }) {
            let bytes = match self.spares.pop() {
                Some(spare) if len <= spare.capacity() => spare,
                _ => Vec::with_capacity(self.piece_capacity.max(len)),
            };
            self.buffered.push_back(Buffered {
                segment,
                start: self.offset,
                bytes,
                obsolete: 0,
            });
        }
        let last = self.buffered.len() - 1;
        &mut self.buffered[last].bytes
    }

    /// Keeps the buffer of a piece written or dropped for a next piece, up to
    /// [`MAX_SPARES`] of the usual capacity (a piece made larger for one large record is
    /// freed): allocating a piece faults in fresh pages, a share of a writer's time with
    /// large values.
    fn recycle(&mut self, piece: Buffered) {
        let mut bytes = piece.bytes;
        if self.spares.len() < MAX_SPARES && bytes.capacity() == self.piece_capacity {
            bytes.clear();
            self.spares.push(bytes);
        }
    }
}

/// Shared by the callers of `sync_to` and `flush_async` (group commit, in `group`).
#[derive(Debug, Default)]
pub(crate) struct SyncState {
    /// A leader is flushing now.
    pub(crate) flushing: bool,
}

/// A write-ahead log being written. Thread-safe: share it in an `Arc`.
pub struct Wal {
    pub(crate) zones: Arc<ZoneStore>,
    epoch: u64,
    start: LogPosition,
    start_patch: PatchId,
    max_payload: usize,
    writer: Mutex<Writer>,
    /// `next_lsn - 1`, readable without the writer lock.
    last: AtomicU64,
    pub(crate) durable: AtomicU64,
    /// The newest LSN up to which every record is in the operating system's hands (written
    /// into the store's file, maybe not synced): see [`write_through`](Self::write_through).
    pub(crate) written: AtomicU64,
    /// Held by the one caller of `write_through` handing records to the operating system.
    pub(crate) writing: Mutex<()>,
    pub(crate) sync: Mutex<SyncState>,
    pub(crate) synced: Condvar,
    /// Flushes that made records durable (group-commit rounds with something to write).
    pub(crate) rounds: AtomicU64,
    failure: OnceLock<WalError>,
}

impl fmt::Debug for Wal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Wal")
            .field("epoch", &self.epoch)
            .field("start", &self.start)
            .field("last_lsn", &self.last_lsn())
            .field("durable_lsn", &self.durable_lsn())
            .field("failure", &self.failure.get())
            .finish_non_exhaustive()
    }
}

impl Wal {
    /// Starts a brand-new log of epoch `epoch` whose first record will be `first_lsn` (at
    /// least 1), in a fresh zone, preallocating the zone of its second segment.
    ///
    /// `epoch` must be larger than that of any log written before in this store (the db passes
    /// the sequence number of the superblock it is about to write). Nothing may be appended
    /// until the checkpoint naming [`start_position`](Self::start_position), which must depend
    /// on [`start_patch`](Self::start_patch), is durable.
    pub fn create(zones: Arc<ZoneStore>, epoch: u64, first_lsn: Lsn) -> Result<Wal> {
        if first_lsn == 0 {
            return Err(WalError::Invalid(
                "a log's first lsn must be at least 1".into(),
            ));
        }
        let zone_size = zones.zone_size() as usize;
        let max_payload = zone_size
            .checked_sub(SEGMENT_HEADER_LEN + RECORD_HEADER_LEN)
            .ok_or_else(|| {
                WalError::Invalid(format!(
                    "zones of {zone_size} bytes cannot hold a log record"
                ))
            })?;
        let zone = zones.alloc_zone()?;
        zones.zone_ready(zone);
        let next_zone = match zones.alloc_zone() {
            Ok(z) => z,
            Err(e) => {
                // Nothing was written into `zone`: hand it straight back.
                let _ = zones.release_zone(zone, PatchId::NONE);
                return Err(e.into());
            }
        };
        let header = SegmentHeader {
            version: WAL_FORMAT_VERSION,
            epoch,
            seq: 0,
            first_lsn,
            next_zone,
        };
        let header_patch =
            match zones
                .cache()
                .write_append(zones.zone_offset(zone), &header.encode(), &[])
            {
                Ok(p) => p,
                Err(e) => {
                    let _ = zones.release_zone(zone, PatchId::NONE);
                    let _ = zones.release_zone(next_zone, PatchId::NONE);
                    return Err(e.into());
                }
            };
        let start = LogPosition {
            zone,
            offset: SEGMENT_HEADER_LEN as u32,
            lsn: first_lsn,
        };
        let writer = Writer {
            segments: VecDeque::from([Segment {
                zone,
                seq: 0,
                header_patch,
            }]),
            next_zone,
            offset: SEGMENT_HEADER_LEN as u64,
            next_lsn: first_lsn,
            pending: Vec::new(),
            moved: first_lsn - 1,
            buffered: VecDeque::new(),
            spares: Vec::new(),
            piece_capacity: (zone_size / PIECES_PER_SEGMENT).max(1),
            rounds_at_segment_start: 0,
        };
        Ok(Wal {
            zones,
            epoch,
            start,
            start_patch: header_patch,
            max_payload,
            writer: Mutex::new(writer),
            last: AtomicU64::new(first_lsn - 1),
            durable: AtomicU64::new(first_lsn - 1),
            written: AtomicU64::new(first_lsn - 1),
            writing: Mutex::new(()),
            sync: Mutex::new(SyncState::default()),
            synced: Condvar::new(),
            rounds: AtomicU64::new(0),
            failure: OnceLock::new(),
        })
    }

    /// The log's epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Where this log's first record goes: what the first checkpoint naming the log stores.
    pub fn start_position(&self) -> LogPosition {
        self.start
    }

    /// The patch writing the first segment's header; a checkpoint naming
    /// [`start_position`](Self::start_position) must depend on it.
    pub fn start_patch(&self) -> PatchId {
        self.start_patch
    }

    /// The largest payload a record can carry (what fits in an empty segment).
    pub fn max_payload(&self) -> usize {
        self.max_payload
    }

    /// Where the next record goes, and the patch a checkpoint naming that position must depend
    /// on (the current segment's header, which depends on every earlier segment's header).
    pub fn position(&self) -> (LogPosition, PatchId) {
        let w = self.writer.lock();
        let seg = w.current();
        (
            LogPosition {
                zone: seg.zone,
                offset: w.offset as u32,
                lsn: w.next_lsn,
            },
            seg.header_patch,
        )
    }

    /// The LSN of the newest record appended (`first_lsn - 1` before any).
    pub fn last_lsn(&self) -> Lsn {
        self.last.load(Ordering::Acquire)
    }

    /// The memory the log's buffer holds: the capacity of the pieces of records waiting to be
    /// written into the cache, and of the emptied pieces kept for reuse.
    pub fn buffer_bytes(&self) -> usize {
        let w = self.writer.lock();
        let pieces: usize = w.buffered.iter().map(|b| b.bytes.capacity()).sum();
        pieces + w.spares.iter().map(Vec::capacity).sum::<usize>()
    }

    /// The zones the log holds, oldest first, ending with the preallocated next one.
    pub fn zones(&self) -> Vec<ZoneId> {
        let w = self.writer.lock();
        w.segments
            .iter()
            .map(|s| s.zone)
            .chain([w.next_zone])
            .collect()
    }

    /// Appends a record and returns its LSN and where it starts. The record is in the block
    /// cache at once (readable, not yet durable: see [`sync_to`](Self::sync_to)).
    ///
    /// `flags` holds at most one of AUTOCOMMIT, COMMIT, ABORT. A payload larger than
    /// [`max_payload`](Self::max_payload) is rejected. Running out of space for the next
    /// segment is an error the log survives; a failed write into the cache fails the log
    /// for good.
    pub fn append(
        &self,
        txn: TxnId,
        op: OpId,
        flags: Flags,
        payload: &[u8],
    ) -> Result<(Lsn, LogPosition)> {
        let (lsn, position, _) = self.append_with_deps(txn, op, flags, payload, &[])?;
        Ok((lsn, position))
    }

    /// [`append`](Self::append), with write-before dependencies of the caller's own (the
    /// engaged patchgroups' tails) and the patch that writes the record returned, so the
    /// caller can make its groups depend on it.
    pub fn append_with_deps(
        &self,
        txn: TxnId,
        op: OpId,
        flags: Flags,
        payload: &[u8],
        extra_deps: &[PatchId],
    ) -> Result<(Lsn, LogPosition, PatchId)> {
        let (lsn, position, patch) =
            self.append_parts(txn, op, flags, &[payload], Some(extra_deps))?;
        Ok((lsn, position, patch.unwrap_or(PatchId::NONE)))
    }

    /// [`append`](Self::append) for a caller that needs no patch back: the record waits in
    /// the log's memory (across segment changes) until a flush ([`sync_to`](Self::sync_to),
    /// [`flush_async`](Self::flush_async)) or a later
    /// [`append_with_deps`](Self::append_with_deps) writes it into the cache, in order with
    /// every other record. If a checkpoint overtakes it first
    /// ([`release_before`](Self::release_before)), it is never written at all.
    pub fn append_buffered(
        &self,
        txn: TxnId,
        op: OpId,
        flags: Flags,
        payload: &[u8],
    ) -> Result<(Lsn, LogPosition)> {
        let (lsn, position, _) = self.append_parts(txn, op, flags, &[payload], None)?;
        Ok((lsn, position))
    }

    /// Appends a record whose payload is `payload`'s pieces laid end to end (copied straight
    /// into the log, so a caller need not join them first): with `deps`, as
    /// [`append_with_deps`](Self::append_with_deps) does (the buffered records are written
    /// into the cache after `deps`, and the patch writing this one returned); without, as
    /// [`append_buffered`](Self::append_buffered) does.
    pub fn append_parts(
        &self,
        txn: TxnId,
        op: OpId,
        flags: Flags,
        payload: &[&[u8]],
        deps: Option<&[PatchId]>,
    ) -> Result<(Lsn, LogPosition, Option<PatchId>)> {
        self.check_failed()?;
        if !flags.is_valid() {
            return Err(WalError::Invalid(format!(
                "record flags {:#04x}: at most one of AUTOCOMMIT, COMMIT, ABORT",
                flags.0
            )));
        }
        let payload_len: usize = payload.iter().map(|p| p.len()).sum();
        if payload_len > self.max_payload {
            return Err(WalError::TooLarge {
                len: payload_len,
                max: self.max_payload,
            });
        }
        let len = (RECORD_HEADER_LEN + payload_len) as u64;
        let mut w = self.writer.lock();
        self.check_failed()?;
        self.room_for(&mut w, len)?;
        let lsn = w.next_lsn;
        let position = LogPosition {
            zone: w.current().zone,
            offset: w.offset as u32,
            lsn,
        };
        // The record vouches for every record already durable: a reader finding it past a bad
        // one it vouches for knows that one was damaged after its sync, not torn by a crash.
        let durable = self.durable_lsn();
        encode_parts(
            w.buffer(len as usize),
            self.epoch,
            (lsn, durable),
            txn,
            op,
            flags,
            payload,
        );
        w.offset += len;
        w.next_lsn += 1;
        self.last.store(lsn, Ordering::Release);
        let patch = match deps {
            Some(deps) => self.write_buffered(&mut w, deps)?,
            None => None,
        };
        Ok((lsn, position, patch))
    }

    /// Moves to the next segment now if a record of `payload_len` bytes (at most
    /// [`max_payload`](Self::max_payload)) would not fit in this one. A caller that cannot
    /// take a refusal after some step (a transaction's validation ends it) learns before it
    /// whether the log has room for its record. Running out of space is an error the log
    /// survives, as in [`append`](Self::append).
    pub fn make_room(&self, payload_len: usize) -> Result<()> {
        self.check_failed()?;
        let len = (RECORD_HEADER_LEN + payload_len.min(self.max_payload)) as u64;
        let mut w = self.writer.lock();
        self.check_failed()?;
        self.room_for(&mut w, len)
    }

    /// Moves to the next segment if `len` bytes do not fit in this one.
    fn room_for(&self, w: &mut Writer, len: u64) -> Result<()> {
        if w.offset + len > self.zones.zone_size() {
            self.next_segment(w)?;
        }
        Ok(())
    }

    /// Writes the buffered records into the cache, oldest first, each after `extra_deps`, and
    /// returns the patch that writes the newest (`None` if nothing was buffered). A failure
    /// fails the log for good: the records are appended already.
    fn write_buffered(&self, w: &mut Writer, extra_deps: &[PatchId]) -> Result<Option<PatchId>> {
        let extra = self.live(extra_deps);
        let mut last = None;
        while let Some(b) = w.buffered.pop_front() {
            // No record of a segment may become durable before the header that makes the
            // segment part of the log: a sync covering it then covers the header too. (A
            // piece after the segment's first may land in blocks of its own.)
            let (start, bytes) = b.unwritten();
            let mut deps = self.live(&[b.segment.header_patch]);
            deps.extend_from_slice(&extra);
            let offset = self.zones.zone_offset(b.segment.zone) + start;
            let patch = self
                .zones
                .cache()
                .write_append(offset, bytes, &deps)
                .map_err(|e| self.fail(e.into()))?;
            if w.pending.last() != Some(&patch) {
                w.pending.push(patch);
            }
            w.moved = w.next_lsn - 1;
            last = Some(patch);
            w.recycle(b);
        }
        Ok(last)
    }

    /// Continues the log in the preallocated zone: writes its header (depending on the current
    /// header, so headers become durable in order) and preallocates the zone after it.
    ///
    /// A zone never written before gets zeros from a background thread until the log
    /// reaches it (see `ZoneStore::alloc_zone`): they spare each sync of a few records the
    /// change of the file's block map that writing into new blocks makes. A log made durable
    /// in large syncs (an `Ordered` log taking a steady stream of writes syncs every few
    /// milliseconds, hundreds of KiB at a time) gains next to nothing from them and would
    /// write every byte twice, so the zone after next gets none when the segment just
    /// filled averaged more than [`ZEROS_PAY_UP_TO`] a sync.
    fn next_segment(&self, w: &mut Writer) -> Result<()> {
        // Allocate first: running out of space leaves the log as it was.
        let after_next = self.zones.alloc_zone()?;
        let rounds = self.rounds.load(Ordering::Relaxed);
        let segment_rounds = rounds - std::mem::replace(&mut w.rounds_at_segment_start, rounds);
        if self.zones.zone_size() > ZEROS_PAY_UP_TO.saturating_mul(segment_rounds) {
            // `zone_ready` ends the zeros of a zone: here, before any were written.
            self.zones.zone_ready(after_next);
        }
        let cur = w.current();
        let zone = w.next_zone;
        self.zones.zone_ready(zone);
        let header = SegmentHeader {
            version: WAL_FORMAT_VERSION,
            epoch: self.epoch,
            seq: cur.seq + 1,
            first_lsn: w.next_lsn,
            next_zone: after_next,
        };
        let deps = self.live(&[cur.header_patch]);
        let header_patch = match self.zones.cache().write_append(
            self.zones.zone_offset(zone),
            &header.encode(),
            &deps,
        ) {
            Ok(p) => p,
            Err(e) => {
                let _ = self.zones.release_zone(after_next, PatchId::NONE);
                return Err(self.fail(e.into()));
            }
        };
        w.segments.push_back(Segment {
            zone,
            seq: header.seq,
            header_patch,
        });
        w.next_zone = after_next;
        w.offset = SEGMENT_HEADER_LEN as u64;
        tracing::debug!(
            zone,
            seq = header.seq,
            first_lsn = header.first_lsn,
            "log moved to a new segment"
        );
        Ok(())
    }

    /// Gives back every segment wholly before `pos.zone` (a segment of this log, typically
    /// from a checkpoint's position). Their zones are freed once `after` (the superblock patch
    /// of the checkpoint that no longer needs them) and every write into them are durable.
    ///
    /// If `after` is already durable, the records before `pos` that are still only in the
    /// cache or in the log's buffer are dropped instead of written (blocks wholly before the
    /// block holding `pos`): nothing will read them again, so an `Async` record a checkpoint
    /// overtakes never costs the device a byte. If it is not, buffered records go into the
    /// cache first, and the zones are freed once `after` and they are durable.
    pub fn release_before(&self, pos: LogPosition, after: PatchId) -> Result<()> {
        let cache = self.zones.cache();
        let obsolete = cache.state(after) == PatchState::Committed;
        let released = {
            let mut w = self.writer.lock();
            let Some(index) = w.segments.iter().position(|s| s.zone == pos.zone) else {
                return Err(WalError::Invalid(format!(
                    "release_before({pos}): zone {} is not a live segment of this log",
                    pos.zone
                )));
            };
            if obsolete {
                // Every record before `pos` is durable through the checkpoint: records
                // appended from now on vouch for them. Repair falling back to the checkpoint
                // before (whose log runs through them) then reads past those this drops
                // unwritten, reporting them, instead of taking them for a torn tail and
                // losing every later commit, synced ones included.
                self.durable
                    .fetch_max(pos.lsn.saturating_sub(1), Ordering::AcqRel);
                // Buffered records in segments before `pos.zone`, and in blocks of it wholly
                // before the one holding `pos`, are dropped unwritten (what stays starts on a
                // block boundary, so writing it later needs no read of the block's old bytes).
                let seq = w.segments[index].seq;
                let zone_start = self.zones.zone_offset(pos.zone);
                let block = cache.block_size() as u64;
                let cut = ((zone_start + u64::from(pos.offset)) / block * block)
                    .saturating_sub(zone_start);
                while let Some(b) = w.buffered.front_mut() {
                    let end = b.start + b.bytes.len() as u64;
                    if b.segment.seq < seq || (b.segment.seq == seq && end <= cut) {
                        if let Some(b) = w.buffered.pop_front() {
                            w.recycle(b);
                        }
                        continue;
                    }
                    if b.segment.seq == seq {
                        b.obsolete = b.obsolete.max(cut.saturating_sub(b.start) as usize);
                    }
                    break;
                }
            } else {
                // A crash before `after` is durable recovers from the log as it was: the
                // records in the segments given back must go into the cache, where freeing
                // their zones waits for them as well as for `after`.
                self.write_buffered(&mut w, &[])?;
            }
            w.segments.drain(..index).collect::<Vec<_>>()
        };
        if obsolete {
            let start = self.zones.zone_offset(pos.zone);
            cache.discard(start, u64::from(pos.offset));
        }
        for seg in released {
            if obsolete {
                cache.discard(self.zones.zone_offset(seg.zone), self.zones.zone_size());
            }
            self.zones.release_zone(seg.zone, after)?;
            tracing::debug!(
                zone = seg.zone,
                seq = seg.seq,
                ?after,
                "log segment released"
            );
        }
        Ok(())
    }

    /// Returns once every record up to `lsn` is in the operating system's hands: written into
    /// the store's file, not synced. A crash of the process then loses none of them; power
    /// loss may lose any not yet durable, but never leaves a gap ([`sync_to`](Self::sync_to)
    /// makes them durable). Concurrent callers share the work: one writes every record
    /// appended so far, the others find theirs covered.
    ///
    /// The records are written into the cache as well (so no flush writes an older image of
    /// their blocks over them) and then handed to the disk while the writer lock is held (so
    /// their segment cannot be released and its zone reused meanwhile). Records that must
    /// not reach the disk before something else is durable are not handed early: when the
    /// segment header a record follows is not durable yet (once a segment), or records went
    /// into the cache another way (after a patchgroup's patches; by a flush still running),
    /// this syncs up to `lsn` instead.
    pub fn write_through(&self, lsn: Lsn) -> Result<()> {
        if lsn > self.last_lsn() {
            return Err(WalError::Invalid(format!(
                "write_through({lsn}): the newest record is lsn {}",
                self.last_lsn()
            )));
        }
        let covered = |wal: &Wal| wal.written.load(Ordering::Acquire).max(wal.durable_lsn()) >= lsn;
        if covered(self) {
            return Ok(());
        }
        let _writing = self.writing.lock();
        if covered(self) {
            return Ok(());
        }
        let mut w = self.writer.lock();
        self.check_failed()?;
        let handed = self.written.load(Ordering::Acquire).max(self.durable_lsn());
        let cache = self.zones.cache();
        let headers_durable = w
            .buffered
            .iter()
            .all(|b| cache.state(b.segment.header_patch) == PatchState::Committed);
        if w.moved > handed || !headers_durable {
            drop(w);
            return self.sync_to(lsn);
        }
        let pieces: Vec<(u64, Vec<u8>)> = w
            .buffered
            .iter()
            .map(|b| {
                let (start, bytes) = b.unwritten();
                (
                    self.zones.zone_offset(b.segment.zone) + start,
                    bytes.to_vec(),
                )
            })
            .collect();
        let upto = w.next_lsn - 1;
        self.write_buffered(&mut w, &[])?;
        for (offset, bytes) in pieces.iter().filter(|(_, bytes)| !bytes.is_empty()) {
            cache
                .write_unsynced(*offset, bytes)
                .map_err(|e| self.fail(e.into()))?;
        }
        self.written.fetch_max(upto, Ordering::AcqRel);
        Ok(())
    }

    /// Why the log refuses work, if an earlier write or flush failed.
    pub fn failure(&self) -> Option<&WalError> {
        self.failure.get()
    }

    pub(crate) fn check_failed(&self) -> Result<()> {
        match self.failure.get() {
            Some(e) => Err(WalError::Failed(Box::new(e.clone()))),
            None => Ok(()),
        }
    }

    /// Fails the log for good (the first failure is kept) and returns `error` for the caller.
    pub(crate) fn fail(&self, error: WalError) -> WalError {
        if self.failure.set(error.clone()).is_ok() {
            tracing::error!(%error, "write-ahead log failed; it accepts no more records");
        }
        error
    }

    /// Writes the buffered records into the cache and takes the record patches not yet
    /// handed to a flush, and the LSN they reach.
    pub(crate) fn take_pending(&self) -> Result<(Vec<PatchId>, Lsn)> {
        let mut w = self.writer.lock();
        self.write_buffered(&mut w, &[])?;
        Ok((std::mem::take(&mut w.pending), w.next_lsn - 1))
    }

    /// The patches of `deps` not yet committed (a committed dependency is no dependency).
    pub(crate) fn live(&self, deps: &[PatchId]) -> Vec<PatchId> {
        let cache = self.zones.cache();
        deps.iter()
            .copied()
            .filter(|&p| p != PatchId::NONE && cache.state(p) != PatchState::Committed)
            .collect()
    }
}
