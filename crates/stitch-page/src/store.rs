//! The page store: the buffer pool under the write-ahead log, transactions, nested top
//! actions, rollback, checkpoints and ARIES recovery. See `docs/pagestore.md`.
//!
//! Everything runs under one latch (the store's mutex): operations of concurrent
//! transactions interleave one at a time, which is all logical undo needs; keys are locked
//! by the structures (no-wait), so no transaction changes a key another one has changed and
//! not yet committed.

use crate::change::{decode_changes, encode_changes, Images, PageChange};
use crate::checkpoint::{Checkpoint, UndoEntry, CHECKPOINT_KIND};
use crate::file::PageFile;
use crate::ops::{
    images_of, undo_payload, OP_COMMIT, OP_COMPENSATE, OP_PAGE_WRITE, OP_ROLLED_BACK,
};
use crate::page::{PageKind, BODY_LEN, PAGE_SIZE};
use crate::pool::{Load, Pool, PoolStats};
use crate::{PageError, PageId, Result};
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use stitch_patch::PatchId;
use stitch_wal::TxnId;
use stitch_wal::{Flags, Lsn, OpId, Wal};
use stitch_zone::{ExtentAddr, ZoneStore};

/// Undoes a logical operation: called with the transaction, the LSN of the record undone
/// (which the compensation record names) and its payload.
pub(crate) type LogicalUndo = fn(&mut Inner, TxnId, Lsn, &[u8]) -> Result<()>;

/// How a page store is run.
#[derive(Debug, Clone)]
pub struct PageStoreConfig {
    /// Frames in the buffer pool (at least 4).
    pub frames: usize,
    /// A commit that finds the log holding more than this many segments (zones) takes a
    /// checkpoint, which releases them (0: only explicit checkpoints and the page file's
    /// growth take one).
    pub checkpoint_log_zones: usize,
}

impl Default for PageStoreConfig {
    fn default() -> Self {
        PageStoreConfig {
            frames: 1024,
            checkpoint_log_zones: 64,
        }
    }
}

/// A page store over a [`ZoneStore`] it owns the superblock root of.
pub struct PageStore {
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for PageStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageStore").finish_non_exhaustive()
    }
}

/// A lock on a key of a structure (its meta page).
pub(crate) type LockKey = (PageId, Vec<u8>);

#[derive(Default)]
struct TxnState {
    undo: Vec<UndoEntry>,
    locks: Vec<LockKey>,
}

/// The store's state under its latch.
pub struct Inner {
    zones: Arc<ZoneStore>,
    wal: Arc<Wal>,
    pool: Pool,
    /// Pages logged whole since the last checkpoint: later changes are logged as diffs.
    logged_whole: HashSet<PageId>,
    /// Pages allocated and not yet written (not read: their bytes on disk are garbage).
    fresh: HashSet<PageId>,
    txns: HashMap<TxnId, TxnState>,
    next_txn: u64,
    /// The extents of the newest checkpoint record.
    checkpoint: Vec<ExtentAddr>,
    /// The newest checkpoint record.
    named: Option<Checkpoint>,
    checkpoint_log_zones: usize,
    locks: HashMap<LockKey, TxnId>,
    failed: Option<String>,
}

impl PageStore {
    /// Makes a new, empty page store in a zone store just created (its superblock root
    /// becomes the page store's checkpoint record).
    pub fn create(zones: Arc<ZoneStore>, config: PageStoreConfig) -> Result<Arc<PageStore>> {
        let mut file = PageFile::new(zones.clone(), Vec::new());
        file.grow()?;
        // Page 0 is written and synced before any checkpoint names the page file: its zone
        // may hold an earlier user's bytes, and a crash before the first logged change must
        // leave a page file that opens.
        let mut pool = Pool::new(file, config.frames);
        let mut header = vec![0u8; BODY_LEN];
        header[0] = PageKind::FileHeader as u8;
        header[1..5].copy_from_slice(&1u32.to_le_bytes());
        let f = pool.pin(0, Load::Fresh, None)?;
        pool.write(f, 0, &header, 0);
        pool.unpin(f);
        pool.flush_all()?;
        let wal = Arc::new(Wal::create(zones.clone(), zones.superblock().seq + 1, 1)?);
        let mut inner = Inner::new(zones, wal, pool, Vec::new(), &config);
        inner.checkpoint()?;
        Ok(Arc::new(PageStore {
            inner: Mutex::new(inner),
        }))
    }

    /// Opens the page store of a zone store just opened (before its `finish_open`, which
    /// this calls): recovers the log (analysis, redo of every record newer than its page,
    /// the losers' undo information collected), writes the recovered pages back, starts a
    /// new log under a new checkpoint, then rolls the losers back as ordinary aborts, logged.
    /// A crash anywhere in here recovers again from the same or the new checkpoint.
    pub fn open(zones: Arc<ZoneStore>, config: PageStoreConfig) -> Result<Arc<PageStore>> {
        let addr = zones.superblock().root.ok_or_else(|| {
            PageError::Invalid("the store's superblock names no page store checkpoint".into())
        })?;
        let (cp, extents) = Checkpoint::read(&zones, addr)?;
        for &e in &extents {
            zones.mark_live(e, CHECKPOINT_KIND)?;
        }
        for &z in &cp.zones {
            zones.claim_zone(z)?;
        }
        let pool = Pool::new(
            PageFile::new(zones.clone(), cp.zones.clone()),
            config.frames,
        );
        let (redone, report) = crate::recovery::redo(&zones, &cp, pool)?;
        let mut pool = redone.pool;
        if let Some((page, detail)) = pool.torn_pages().into_iter().next() {
            return Err(PageError::CorruptPage {
                page,
                offset: pool.file().offset(page)?,
                detail: format!("{detail}; no full-page image in the log rebuilds it"),
            });
        }
        let mut losers: Vec<UndoEntry> = cp
            .pending
            .into_iter()
            .filter(|e| !redone.committed.contains(&e.txn))
            .chain(redone.undo)
            .filter(|e| {
                !redone.compensated.contains(&e.lsn) && !redone.rolled_back.contains(&e.txn)
            })
            .collect();
        losers.sort_unstable_by_key(|e| e.lsn);
        pool.flush_all()?;
        zones.finish_open()?;
        let wal = Arc::new(Wal::create(
            zones.clone(),
            zones.superblock().seq + 1,
            report.next_lsn,
        )?);
        let mut inner = Inner::new(zones.clone(), wal, pool, extents, &config);
        for e in &losers {
            inner.txns.entry(e.txn).or_default().undo.push(e.clone());
        }
        inner.checkpoint()?;
        let after = zones.superblock_patch();
        for z in report.zones {
            zones.release_zone(z, after)?;
        }
        let txns: Vec<TxnId> = inner.txns.keys().copied().collect();
        for e in losers.iter().rev() {
            inner.undo_one(e)?;
        }
        for txn in txns {
            inner.end(txn, Flags::ABORT)?;
        }
        tracing::info!(
            losers_undone = losers.len(),
            next_lsn = report.next_lsn,
            "page store recovered"
        );
        Ok(Arc::new(PageStore {
            inner: Mutex::new(inner),
        }))
    }

    /// Runs `f` under the latch. An I/O or log failure leaves the store failed: it must be
    /// reopened (recovery then repairs what the failure left half done).
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut Inner) -> Result<R>) -> Result<R> {
        let mut inner = self.inner.lock();
        if let Some(why) = &inner.failed {
            return Err(PageError::Failed(why.clone()));
        }
        let result = f(&mut inner);
        if let Err(e) = &result {
            if matches!(
                e,
                PageError::Wal(_) | PageError::Zone(_) | PageError::Patch(_) | PageError::Failed(_)
            ) {
                inner.failed = Some(e.to_string());
            }
        }
        result
    }

    /// Begins a transaction.
    pub fn begin(&self) -> Result<TxnId> {
        self.with(|s| Ok(s.begin_txn()))
    }

    /// Commits `txn`: its commit record is durable on return (no-force: its pages are not
    /// written).
    pub fn commit(&self, txn: TxnId) -> Result<()> {
        self.with(|s| {
            s.end(txn, Flags::COMMIT)?;
            if s.checkpoint_log_zones > 0 && s.wal.zones().len() > s.checkpoint_log_zones {
                s.checkpoint()?;
            }
            Ok(())
        })
    }

    /// Aborts `txn`: each of its changes is undone, newest first (logical operations
    /// logically), each undo logged as a compensation record.
    pub fn abort(&self, txn: TxnId) -> Result<()> {
        self.with(|s| {
            let undo = s
                .txns
                .get(&txn)
                .ok_or(PageError::NoSuchTxn(txn))?
                .undo
                .clone();
            for e in undo.iter().rev() {
                s.undo_one(e)?;
            }
            s.end(txn, Flags::ABORT)
        })
    }

    /// Writes every dirty page back and names the log's current end in a new checkpoint, so
    /// recovery starts there (live transactions' undo information goes into the record).
    pub fn checkpoint(&self) -> Result<()> {
        self.with(|s| s.checkpoint())
    }

    /// Where `page` lies on the device (for tools and tests that look at it there).
    pub fn page_offset(&self, page: PageId) -> Result<u64> {
        self.inner.lock().pool.file().offset(page)
    }

    /// Checks every allocated page as the device holds it, after a checkpoint has written the
    /// pool's dirty pages back (pages the block cache holds clean are read from it): returns
    /// the pages failing their checks, each error naming the page and its device offset.
    pub fn check_pages(&self) -> Result<Vec<PageError>> {
        self.with(|s| {
            s.checkpoint()?;
            let pages = s.read(0, |b| u32::from_le_bytes([b[1], b[2], b[3], b[4]]))?;
            let mut bad = Vec::new();
            let mut image = vec![0u8; PAGE_SIZE];
            for page in 0..pages {
                let offset = s.pool.file().offset(page)?;
                s.zones.cache().read(offset, &mut image)?;
                if let Err(e) = crate::page::open(page, offset, &image) {
                    bad.push(e);
                }
            }
            Ok(bad)
        })
    }

    /// The buffer pool's counters.
    pub fn pool_stats(&self) -> PoolStats {
        self.inner.lock().pool.stats()
    }
}

impl Inner {
    fn new(
        zones: Arc<ZoneStore>,
        wal: Arc<Wal>,
        pool: Pool,
        checkpoint: Vec<ExtentAddr>,
        config: &PageStoreConfig,
    ) -> Inner {
        Inner {
            zones,
            wal,
            pool,
            logged_whole: HashSet::new(),
            fresh: HashSet::new(),
            txns: HashMap::new(),
            next_txn: 1,
            checkpoint,
            named: None,
            checkpoint_log_zones: config.checkpoint_log_zones,
            locks: HashMap::new(),
            failed: None,
        }
    }

    /// A new transaction id: the log's epoch above, a counter below, so ids never repeat
    /// across logs.
    pub(crate) fn begin_txn(&mut self) -> TxnId {
        let txn = (self.wal.epoch() << 32) | self.next_txn;
        self.next_txn += 1;
        self.txns.insert(txn, TxnState::default());
        txn
    }

    /// Logs `txn`'s end (`COMMIT`, made durable, or `ABORT` once its rollback is logged)
    /// and releases its locks.
    pub(crate) fn end(&mut self, txn: TxnId, flags: Flags) -> Result<()> {
        let state = self.txns.remove(&txn).ok_or(PageError::NoSuchTxn(txn))?;
        for key in state.locks {
            self.locks.remove(&key);
        }
        if state.undo.is_empty() {
            return Ok(());
        }
        let op = if flags == Flags::COMMIT {
            OP_COMMIT
        } else {
            OP_ROLLED_BACK
        };
        let (lsn, _) = self.wal.append_buffered(txn, op, flags, &[])?;
        if flags == Flags::COMMIT {
            self.wal.sync_to(lsn)?;
        }
        Ok(())
    }

    /// Runs `f` as a nested top action: a transaction of its own that commits at once
    /// (without waiting for the log), whatever becomes of the transaction that caused it.
    /// On an error its changes are rolled back physically.
    pub(crate) fn nested<R>(
        &mut self,
        f: impl FnOnce(&mut Inner, TxnId) -> Result<R>,
    ) -> Result<R> {
        let txn = self.begin_txn();
        match f(self, txn) {
            Ok(r) => {
                let state = self.txns.remove(&txn).unwrap_or_default();
                if !state.undo.is_empty() {
                    self.wal
                        .append_buffered(txn, OP_COMMIT, Flags::COMMIT, &[])?;
                }
                Ok(r)
            }
            Err(e) => {
                let undo = self
                    .txns
                    .get(&txn)
                    .map(|s| s.undo.clone())
                    .unwrap_or_default();
                let rolled = undo
                    .iter()
                    .rev()
                    .try_for_each(|u| self.undo_one(u))
                    .and_then(|()| self.end(txn, Flags::ABORT));
                if let Err(r) = rolled {
                    self.failed = Some(format!("{e}; rolling back a nested top action: {r}"));
                }
                Err(e)
            }
        }
    }

    /// Takes the lock on `key` for `txn` (no-wait: held by another is [`PageError::Locked`]).
    pub(crate) fn lock(&mut self, txn: TxnId, key: LockKey) -> Result<()> {
        let state = self.txns.get_mut(&txn).ok_or(PageError::NoSuchTxn(txn))?;
        match self.locks.get(&key) {
            Some(&holder) if holder != txn => Err(PageError::Locked { holder }),
            Some(_) => Ok(()),
            None => {
                state.locks.push(key.clone());
                self.locks.insert(key, txn);
                Ok(())
            }
        }
    }

    /// Fails if another transaction holds `key` (a read must not see uncommitted data).
    pub(crate) fn check_unlocked(&self, txn: TxnId, key: &LockKey) -> Result<()> {
        if !self.txns.contains_key(&txn) {
            return Err(PageError::NoSuchTxn(txn));
        }
        match self.locks.get(key) {
            Some(&holder) if holder != txn => Err(PageError::Locked { holder }),
            _ => Ok(()),
        }
    }

    /// A copy of `page`'s body.
    pub(crate) fn body(&mut self, page: PageId) -> Result<Vec<u8>> {
        let wal = self.wal.clone();
        let f = self.pool.pin(page, Load::Verify, Some(&wal))?;
        let body = self.pool.body(f).to_vec();
        self.pool.unpin(f);
        Ok(body)
    }

    /// Calls `f` on `page`'s body, pinned (no copy).
    pub(crate) fn read<R>(&mut self, page: PageId, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        let wal = self.wal.clone();
        let frame = self.pool.pin(page, Load::Verify, Some(&wal))?;
        let r = f(self.pool.body(frame));
        self.pool.unpin(frame);
        Ok(r)
    }

    /// Logs the changes of `pages` (page, old body, new body) as one record of `txn` with op
    /// `op` (payload: `prefix`, the changes, `tail`) and applies them to the pool. The first
    /// change of a page since the last checkpoint is logged whole. Records of every op but
    /// compensation join `txn`'s undo list. Returns the record's LSN, `None` if nothing
    /// changed.
    pub(crate) fn log_pages(
        &mut self,
        txn: TxnId,
        op: OpId,
        prefix: &[u8],
        pages: &[(PageId, &[u8], &[u8])],
        tail: &[u8],
    ) -> Result<Option<Lsn>> {
        if !self.txns.contains_key(&txn) {
            return Err(PageError::NoSuchTxn(txn));
        }
        let changes: Vec<PageChange> = pages
            .iter()
            .flat_map(|&(p, old, new)| {
                PageChange::between(p, old, new, !self.logged_whole.contains(&p))
            })
            .collect();
        // A compensation is logged even when it changes nothing: recovery must know the
        // record it names is undone.
        if changes.is_empty() && op != OP_COMPENSATE {
            return Ok(None);
        }
        let mut payload = prefix.to_vec();
        encode_changes(&changes, images_of(op), &mut payload);
        payload.extend_from_slice(tail);
        let (lsn, _) = self.wal.append_buffered(txn, op, Flags::NONE, &payload)?;
        if let Err(e) = self.apply(&changes, lsn) {
            // Logged and not applied: only recovery can make the pages agree with the log.
            self.failed = Some(format!("applying the changes of lsn {lsn}: {e}"));
            return Err(e);
        }
        if op != OP_COMPENSATE {
            let payload = undo_payload(op, payload)?;
            if let Some(state) = self.txns.get_mut(&txn) {
                state.undo.push(UndoEntry {
                    txn,
                    lsn,
                    op,
                    payload,
                });
            }
        }
        Ok(Some(lsn))
    }

    /// Writes the changes of the record `lsn` into the pool.
    fn apply(&mut self, changes: &[PageChange], lsn: Lsn) -> Result<()> {
        let wal = self.wal.clone();
        for c in changes {
            let load = if self.fresh.remove(&c.page) {
                Load::Fresh
            } else {
                Load::Verify
            };
            let f = self.pool.pin(c.page, load, Some(&wal))?;
            self.pool.write(f, c.offset as usize, &c.after, lsn);
            self.pool.unpin(f);
            self.logged_whole.insert(c.page);
        }
        Ok(())
    }

    /// Allocates a page for `txn` (a nested top action's) and returns its number; its first
    /// write is a full-page image, and it is never read before it.
    pub(crate) fn alloc_page(&mut self, txn: TxnId) -> Result<PageId> {
        let header = self.body(0)?;
        let next = u32::from_le_bytes([header[1], header[2], header[3], header[4]]);
        let page = next;
        let next = next
            .checked_add(1)
            .ok_or_else(|| PageError::Full("the page file has 2^32 pages".into()))?;
        if u64::from(next) > self.pool.file().capacity() {
            self.pool.file_mut().grow()?;
            // The new zone is named durably before any page in it is written.
            self.name_zones()?;
        }
        let mut new = header.clone();
        new[1..5].copy_from_slice(&next.to_le_bytes());
        self.log_pages(txn, OP_PAGE_WRITE, &[], &[(0, &header, &new)], &[])?;
        self.fresh.insert(page);
        Ok(page)
    }

    /// Undoes one logged change of `e.txn`, logging the compensation.
    pub(crate) fn undo_one(&mut self, e: &UndoEntry) -> Result<()> {
        if e.op != OP_PAGE_WRITE {
            let undo = crate::logical_undo(e.op).ok_or_else(|| {
                PageError::Invalid(format!("no undo for op {} (lsn {})", e.op, e.lsn))
            })?;
            return undo(self, e.txn, e.lsn, &e.payload);
        }
        let (changes, _) = decode_changes(&e.payload, Images::Both)?;
        let mut bodies: Vec<(PageId, Vec<u8>, Vec<u8>)> = Vec::new();
        for c in changes.iter().rev() {
            let i = match bodies.iter().position(|b| b.0 == c.page) {
                Some(i) => i,
                None => {
                    let body = self.body(c.page)?;
                    bodies.push((c.page, body.clone(), body));
                    bodies.len() - 1
                }
            };
            let at = c.offset as usize;
            bodies[i].2[at..at + c.before.len()].copy_from_slice(&c.before);
        }
        let pages: Vec<(PageId, &[u8], &[u8])> = bodies
            .iter()
            .map(|(p, old, new)| (*p, &old[..], &new[..]))
            .collect();
        self.log_pages(e.txn, OP_COMPENSATE, &e.lsn.to_le_bytes(), &pages, &[])?;
        Ok(())
    }

    /// Makes the log durable, writes every dirty page back, and names the log's end (and
    /// the live transactions' undo information) in a new checkpoint record under a new
    /// superblock; the log before it is released.
    pub(crate) fn checkpoint(&mut self) -> Result<()> {
        let last = self.wal.last_lsn();
        if last > self.wal.durable_lsn() {
            self.wal.sync_to(last)?;
        }
        self.pool.flush_all()?;
        let (position, log_patch) = self.wal.position();
        let mut pending: Vec<UndoEntry> = self
            .txns
            .values()
            .flat_map(|t| t.undo.iter().cloned())
            .collect();
        pending.sort_unstable_by_key(|e| e.lsn);
        let record = Checkpoint {
            epoch: self.wal.epoch(),
            log_start: position,
            zones: self.pool.file().owned().to_vec(),
            pending,
        };
        let superblock = self.write_record(&record, log_patch)?;
        self.wal.release_before(position, superblock)?;
        self.named = Some(record);
        self.logged_whole.clear();
        Ok(())
    }

    /// Names the page file's zones, one more now, in a new checkpoint record that is the last
    /// one's otherwise (same log start, same undo information): no page is written back.
    fn name_zones(&mut self) -> Result<()> {
        let mut record = self
            .named
            .clone()
            .ok_or_else(|| PageError::Invalid("no checkpoint to extend".into()))?;
        record.zones = self.pool.file().owned().to_vec();
        self.write_record(&record, PatchId::NONE)?;
        self.named = Some(record);
        Ok(())
    }

    /// Writes `record` (after `log_patch`) under a new superblock, durable on return, and
    /// releases the previous record's extents; returns the superblock's patch.
    fn write_record(&mut self, record: &Checkpoint, log_patch: PatchId) -> Result<PatchId> {
        let (addr, extents, mut patches) = record.write(&self.zones, &[log_patch])?;
        patches.push(log_patch);
        let superblock = self.zones.write_superblock(Some(addr), &patches)?;
        self.zones.cache().flush_patch(superblock)?;
        let old = std::mem::replace(&mut self.checkpoint, extents);
        self.zones.decref_all(old)?;
        Ok(superblock)
    }
}
