//! A linear hash table over the page store (Litwin's linear hashing, as Stasis composes it).
//!
//! * **Pages.** A meta page (level, split pointer, bytes and entries stored, the directory
//!   pages), directory pages (each bucket's primary page number) and bucket pages (see
//!   [`bucket`]), a bucket's primary page chained to overflow pages.
//! * **Addressing.** A key hashes (CRC32C) to `h`; its bucket is `h mod 2^level`, or
//!   `h mod 2^(level+1)` when that is below the split pointer. The table starts with one
//!   bucket; when the bytes stored pass [`FILL`] of the buckets' capacity, bucket `next`
//!   is split into itself and bucket `next + 2^level`, one bucket at a time.
//! * **Transactions.** A put or delete locks its key (no-wait) and is logged as one record of
//!   op [`OP_HASH_SET`]: physical redo (the page changes) and *logical* undo (the key's old
//!   value put back, or the key deleted, wherever it lives by then). Splits and overflow
//!   pages are nested top actions: they commit at once, so a transaction that aborts after a
//!   split never unwinds it under another transaction that put keys into the new bucket.
//!   Emptied overflow pages stay in their chain, reused by later puts.
//!
//! Limits: a key of at most [`MAX_KEY`] bytes, key and value together at most
//! [`MAX_ENTRY`] bytes; at most [`MAX_BUCKETS`] buckets.

pub mod bucket;

use crate::change::{decode_changes, Cursor, Images};
use crate::ops::{OP_COMPENSATE, OP_PAGE_WRITE};
use crate::page::{PageKind, BODY_LEN};
use crate::recovery::{collect_undo, Redone};
use crate::store::{Inner, LogicalUndo};
use crate::{PageError, PageId, PageStore, Result};
use bucket::{entry_len, Bucket, BUCKET_CAPACITY};
use parking_lot::Mutex;
use std::sync::Arc;
use stitch_wal::{LogRecord, Lsn, OpId, OpRegistry, TxnId};

/// Log op 40: a linear hash put or delete (physical redo, logical undo).
pub const OP_HASH_SET: OpId = 40;
/// The longest key.
pub const MAX_KEY: usize = 1024;
/// The most bytes a key and its value take together.
pub const MAX_ENTRY: usize = BUCKET_CAPACITY - bucket::ENTRY_OVERHEAD;
/// The share of the buckets' capacity stored before the next split.
pub const FILL: f64 = 0.85;
const META_HEADER: usize = 29;
const DIR_SLOTS: usize = (BODY_LEN - 4) / 4;
const MAX_DIR_PAGES: usize = (BODY_LEN - META_HEADER) / 4;
/// The most buckets a table has.
pub const MAX_BUCKETS: usize = DIR_SLOTS * MAX_DIR_PAGES;

/// The meta page, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Meta {
    level: u32,
    next: u32,
    bytes: u64,
    entries: u64,
    directory: Vec<PageId>,
}

impl Meta {
    fn decode(body: &[u8]) -> Result<Meta> {
        let mut c = Cursor::new(body, "hash meta page");
        if PageKind::of(body) != Some(PageKind::HashMeta) {
            return Err(c.bad(format!("page kind {} is not a hash meta page", body[0])));
        }
        c.u8()?;
        let level = c.u32()?;
        let next = c.u32()?;
        let bytes = c.u64()?;
        let entries = c.u64()?;
        let n = c.u32()? as usize;
        if n > MAX_DIR_PAGES || level > 31 {
            return Err(c.bad(format!("{n} directory pages, level {level}")));
        }
        let directory = (0..n).map(|_| c.u32()).collect::<Result<_>>()?;
        Ok(Meta {
            level,
            next,
            bytes,
            entries,
            directory,
        })
    }

    fn encode(&self) -> Vec<u8> {
        let mut body = vec![0u8; BODY_LEN];
        body[0] = PageKind::HashMeta as u8;
        body[1..5].copy_from_slice(&self.level.to_le_bytes());
        body[5..9].copy_from_slice(&self.next.to_le_bytes());
        body[9..17].copy_from_slice(&self.bytes.to_le_bytes());
        body[17..25].copy_from_slice(&self.entries.to_le_bytes());
        body[25..29].copy_from_slice(&(self.directory.len() as u32).to_le_bytes());
        for (i, p) in self.directory.iter().enumerate() {
            body[META_HEADER + 4 * i..META_HEADER + 4 * i + 4].copy_from_slice(&p.to_le_bytes());
        }
        body
    }

    fn buckets(&self) -> u64 {
        (1u64 << self.level) + u64::from(self.next)
    }

    fn bucket_of(&self, key: &[u8]) -> u64 {
        let h = u64::from(crc32c::crc32c(key));
        let b = h & ((1u64 << self.level) - 1);
        if b < u64::from(self.next) {
            h & ((1u64 << (self.level + 1)) - 1)
        } else {
            b
        }
    }

    /// Whether `more` more bytes take the table past its fill factor.
    fn wants_split(&self, more: usize) -> bool {
        (self.bytes + more as u64) as f64 > FILL * (self.buckets() * BUCKET_CAPACITY as u64) as f64
            && (self.buckets() as usize) < MAX_BUCKETS
    }
}

fn dir_get(body: &[u8], slot: usize) -> PageId {
    let at = 4 + 4 * slot;
    u32::from_le_bytes([body[at], body[at + 1], body[at + 2], body[at + 3]])
}

fn dir_set(body: &mut [u8], slot: usize, page: PageId) {
    body[4 + 4 * slot..8 + 4 * slot].copy_from_slice(&page.to_le_bytes());
}

fn empty_directory() -> Vec<u8> {
    let mut body = vec![0u8; BODY_LEN];
    body[0] = PageKind::HashDirectory as u8;
    body
}

/// How a put or delete is logged.
#[derive(Debug, Clone, Copy)]
enum Mode {
    /// A transaction's own change: the key locked, logical undo logged.
    Do,
    /// The undo of the record at this LSN: a compensation record.
    Undo(Lsn),
}

/// A linear hash table in a page store: its meta page's number names it.
#[derive(Debug, Clone)]
pub struct LinearHash {
    store: Arc<PageStore>,
    meta: PageId,
}

impl LinearHash {
    /// Makes a new, empty table (a nested top action: it stays whatever becomes of the
    /// transactions running).
    pub fn create(store: &Arc<PageStore>) -> Result<LinearHash> {
        let meta = store.with(|s| {
            s.nested(|s, t| {
                let meta = s.alloc_page(t)?;
                let dir = s.alloc_page(t)?;
                let first = s.alloc_page(t)?;
                let mut dir_body = empty_directory();
                dir_set(&mut dir_body, 0, first);
                let m = Meta {
                    level: 0,
                    next: 0,
                    bytes: 0,
                    entries: 0,
                    directory: vec![dir],
                };
                let zero = vec![0u8; BODY_LEN];
                s.log_pages(
                    t,
                    OP_PAGE_WRITE,
                    &[],
                    &[
                        (first, &zero, &Bucket::default().encode()),
                        (dir, &zero, &dir_body),
                        (meta, &zero, &m.encode()),
                    ],
                    &[],
                )?;
                Ok(meta)
            })
        })?;
        Ok(LinearHash {
            store: store.clone(),
            meta,
        })
    }

    /// The table whose meta page is `meta`.
    pub fn open(store: &Arc<PageStore>, meta: PageId) -> Result<LinearHash> {
        store.with(|s| Meta::decode(&s.body(meta)?))?;
        Ok(LinearHash {
            store: store.clone(),
            meta,
        })
    }

    /// The meta page's number (what a catalogue records to open the table again).
    pub fn meta_page(&self) -> PageId {
        self.meta
    }

    /// The value of `key`, as `txn` sees it (its own changes, and committed ones: a key
    /// another live transaction changed is [`PageError::Locked`]).
    pub fn get(&self, txn: TxnId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.store.with(|s| {
            s.check_unlocked(txn, &(self.meta, key.to_vec()))?;
            Ok(find(s, self.meta, key)?.map(|f| f.value))
        })
    }

    /// Sets `key` to `value` in `txn`.
    pub fn put(&self, txn: TxnId, key: &[u8], value: &[u8]) -> Result<()> {
        check_sizes(key, value)?;
        self.store
            .with(|s| set(s, txn, self.meta, key, Some(value), Mode::Do).map(|_| ()))
    }

    /// Deletes `key` in `txn`; returns whether it was there.
    pub fn delete(&self, txn: TxnId, key: &[u8]) -> Result<bool> {
        self.store
            .with(|s| set(s, txn, self.meta, key, None, Mode::Do))
    }

    /// The bucket `key` hashes to now (splits move keys to higher buckets).
    pub fn bucket_of(&self, key: &[u8]) -> Result<u64> {
        self.store
            .with(|s| locate(s, self.meta, key).map(|(bucket, _)| bucket))
    }

    /// Entries stored (committed or not) and buckets.
    pub fn stats(&self) -> Result<(u64, u64)> {
        self.store.with(|s| {
            let m = Meta::decode(&s.body(self.meta)?)?;
            Ok((m.entries, m.buckets()))
        })
    }

    /// Every entry stored (committed or not), unordered: for checks and tests.
    pub fn entries(&self) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.store.with(|s| {
            let mut out = Vec::new();
            walk(s, self.meta, |_, _, _, bucket| out.extend(bucket.entries))?;
            Ok(out)
        })
    }

    /// Checks the table's structure: every key lies in the bucket it hashes to, and once, and
    /// the meta page's counts are what the buckets hold. Returns the problems found; a page
    /// failing its checks, or a chain that loops, ends the walk with that error.
    pub fn check(&self) -> Result<Vec<String>> {
        self.store.with(|s| {
            let mut problems = Vec::new();
            let (mut entries, mut bytes) = (0u64, 0u64);
            let mut seen = std::collections::HashSet::new();
            let m = walk(s, self.meta, |m, b, page, bucket| {
                for (k, v) in bucket.entries {
                    let home = m.bucket_of(&k);
                    if home != b {
                        problems.push(format!("page {page}: a key of bucket {home} in bucket {b}"));
                    }
                    entries += 1;
                    bytes += entry_len(&k, &v) as u64;
                    if !seen.insert(k) {
                        problems.push(format!("page {page}: a key stored twice"));
                    }
                }
            })?;
            if (entries, bytes) != (m.entries, m.bytes) {
                problems.push(format!(
                    "meta page {}: counts {} entries of {} bytes, the buckets hold {entries} of {bytes}",
                    self.meta, m.entries, m.bytes
                ));
            }
            Ok(problems)
        })
    }
}

/// Calls `f` with the meta page, the bucket, the page and its contents for every page of
/// every bucket's chain, in bucket order; returns the meta page.
fn walk(
    s: &mut Inner,
    meta: PageId,
    mut f: impl FnMut(&Meta, u64, PageId, Bucket),
) -> Result<Meta> {
    let m = Meta::decode(&s.body(meta)?)?;
    for b in 0..m.buckets() {
        for page in chain(s, &m, b)? {
            f(&m, b, page, Bucket::decode(&s.body(page)?)?);
        }
    }
    Ok(m)
}

fn check_sizes(key: &[u8], value: &[u8]) -> Result<()> {
    if key.len() > MAX_KEY || key.len() + value.len() > MAX_ENTRY {
        return Err(PageError::TooLarge {
            key: key.len(),
            value: value.len(),
            max: MAX_ENTRY,
            max_key: MAX_KEY,
        });
    }
    Ok(())
}

fn primary(s: &mut Inner, m: &Meta, bucket: u64) -> Result<PageId> {
    let dir = *m
        .directory
        .get(bucket as usize / DIR_SLOTS)
        .ok_or_else(|| PageError::Corrupt {
            what: "hash meta page",
            detail: format!("no directory page for bucket {bucket}"),
        })?;
    s.read(dir, |body| dir_get(body, bucket as usize % DIR_SLOTS))
}

/// The pages of `bucket`'s chain, primary first.
fn chain(s: &mut Inner, m: &Meta, bucket: u64) -> Result<Vec<PageId>> {
    let mut pages = vec![primary(s, m, bucket)?];
    loop {
        let last = pages[pages.len() - 1];
        let next = s.read(last, bucket::next_of)?;
        if next == 0 {
            return Ok(pages);
        }
        if pages.contains(&next) || pages.len() > 1 << 20 {
            return Err(PageError::Corrupt {
                what: "hash bucket chain",
                detail: format!("bucket {bucket}'s chain loops at page {next}"),
            });
        }
        pages.push(next);
    }
}

struct Found {
    page: PageId,
    value: Vec<u8>,
}

/// The bucket `key` hashes to and its primary page, read from the meta page in place.
fn locate(s: &mut Inner, meta: PageId, key: &[u8]) -> Result<(u64, PageId)> {
    let (bucket, dir) = s.read(meta, |body| {
        let field =
            |at: usize| u32::from_le_bytes([body[at], body[at + 1], body[at + 2], body[at + 3]]);
        let bad = |detail: String| PageError::Corrupt {
            what: "hash meta page",
            detail,
        };
        if PageKind::of(body) != Some(PageKind::HashMeta) || field(1) > 31 {
            return Err(bad(format!("page {meta} is not a hash meta page")));
        }
        let (level, next, dirs) = (field(1), field(5), field(25) as usize);
        let h = u64::from(crc32c::crc32c(key));
        let mut bucket = h & ((1u64 << level) - 1);
        if bucket < u64::from(next) {
            bucket = h & ((1u64 << (level + 1)) - 1);
        }
        let slot = bucket as usize / DIR_SLOTS;
        if slot >= dirs.min(MAX_DIR_PAGES) {
            return Err(bad(format!("no directory page for bucket {bucket}")));
        }
        Ok((bucket, field(META_HEADER + 4 * slot)))
    })??;
    let primary = s.read(dir, |body| dir_get(body, bucket as usize % DIR_SLOTS))?;
    Ok((bucket, primary))
}

fn find(s: &mut Inner, meta: PageId, key: &[u8]) -> Result<Option<Found>> {
    let (b, mut page) = locate(s, meta, key)?;
    let mut seen = 0usize;
    while page != 0 {
        let (hit, next) = s.read(page, |body| {
            bucket::lookup(body, key).map(|v| (v, bucket::next_of(body)))
        })??;
        if let Some(value) = hit {
            return Ok(Some(Found { page, value }));
        }
        page = next;
        seen += 1;
        if seen > 1 << 20 {
            return Err(PageError::Corrupt {
                what: "hash bucket chain",
                detail: format!("bucket {b}'s chain loops"),
            });
        }
    }
    Ok(None)
}

/// Puts (`value` some) or deletes `key`; returns whether the key was there. One record:
/// the page changes (the entry's page, maybe a second page it moves to, the meta page's
/// counts) and, when `mode` is [`Mode::Do`], what logical undo needs.
fn set(
    s: &mut Inner,
    txn: TxnId,
    meta: PageId,
    key: &[u8],
    value: Option<&[u8]>,
    mode: Mode,
) -> Result<bool> {
    if let Mode::Do = mode {
        s.lock(txn, (meta, key.to_vec()))?;
    }
    let adding = value.map_or(0, |v| entry_len(key, v));
    if value.is_some() && Meta::decode(&s.body(meta)?)?.wants_split(adding) {
        s.nested(|s, t| split(s, t, meta))?;
    }
    // Looked up after the split, which may have moved the key.
    let old = find(s, meta, key)?;
    if old.is_none() && value.is_none() {
        if let Mode::Undo(lsn) = mode {
            s.log_pages(txn, OP_COMPENSATE, &lsn.to_le_bytes(), &[], &[])?;
        }
        return Ok(false);
    }
    // Where the new entry goes, decided (and any overflow page linked, a nested top action)
    // before the bodies changed below are read.
    let target = match value {
        None => None,
        Some(_) => {
            let in_place = match &old {
                Some(found) => {
                    let b = Bucket::decode(&s.body(found.page)?)?;
                    b.used().saturating_sub(entry_len(key, &found.value)) + adding
                        <= BUCKET_CAPACITY
                }
                None => false,
            };
            match &old {
                Some(found) if in_place => Some(found.page),
                _ => {
                    let m = Meta::decode(&s.body(meta)?)?;
                    Some(room_in_chain(s, &m, m.bucket_of(key), adding)?)
                }
            }
        }
    };
    let meta_old = s.body(meta)?;
    let mut m = Meta::decode(&meta_old)?;
    let mut pages: Vec<(PageId, Vec<u8>, Bucket)> = Vec::new();
    if let Some(found) = &old {
        let body = s.body(found.page)?;
        let mut b = Bucket::decode(&body)?;
        b.entries.retain(|(k, _)| k != key);
        // Saturating: a damaged count must not panic (`check` is where it would be reported).
        m.bytes = m.bytes.saturating_sub(entry_len(key, &found.value) as u64);
        m.entries = m.entries.saturating_sub(1);
        pages.push((found.page, body, b));
    }
    if let (Some(v), Some(target)) = (value, target) {
        let i = match pages.iter().position(|(p, _, _)| *p == target) {
            Some(i) => i,
            None => {
                let body = s.body(target)?;
                let b = Bucket::decode(&body)?;
                pages.push((target, body, b));
                pages.len() - 1
            }
        };
        pages[i].2.entries.push((key.to_vec(), v.to_vec()));
        m.bytes += adding as u64;
        m.entries += 1;
    }
    let news: Vec<Vec<u8>> = pages.iter().map(|(_, _, b)| b.encode()).collect();
    let meta_new = m.encode();
    let mut changes: Vec<(PageId, &[u8], &[u8])> = pages
        .iter()
        .zip(&news)
        .map(|((p, old, _), new)| (*p, &old[..], &new[..]))
        .collect();
    changes.push((meta, &meta_old, &meta_new));
    match mode {
        Mode::Do => {
            let mut tail = meta.to_le_bytes().to_vec();
            tail.extend_from_slice(&(key.len() as u16).to_le_bytes());
            tail.extend_from_slice(key);
            match &old {
                Some(f) => {
                    tail.push(1);
                    tail.extend_from_slice(&(f.value.len() as u32).to_le_bytes());
                    tail.extend_from_slice(&f.value);
                }
                None => tail.push(0),
            }
            s.log_pages(txn, OP_HASH_SET, &[], &changes, &tail)?;
        }
        Mode::Undo(lsn) => {
            s.log_pages(txn, OP_COMPENSATE, &lsn.to_le_bytes(), &changes, &[])?;
        }
    }
    Ok(old.is_some())
}

/// A page of `bucket`'s chain with room for `len` bytes, or a new overflow page linked at
/// its end (a nested top action).
fn room_in_chain(s: &mut Inner, m: &Meta, bucket: u64, len: usize) -> Result<PageId> {
    let pages = chain(s, m, bucket)?;
    for &p in &pages {
        if Bucket::decode(&s.body(p)?)?.fits(len) {
            return Ok(p);
        }
    }
    let last = pages[pages.len() - 1];
    s.nested(|s, t| {
        let page = s.alloc_page(t)?;
        let old = s.body(last)?;
        let mut b = Bucket::decode(&old)?;
        b.next = page;
        let zero = vec![0u8; BODY_LEN];
        s.log_pages(
            t,
            OP_PAGE_WRITE,
            &[],
            &[
                (page, &zero, &Bucket::default().encode()),
                (last, &old, &b.encode()),
            ],
            &[],
        )?;
        Ok(page)
    })
}

/// Splits bucket `next` into itself and bucket `next + 2^level` and moves the split
/// pointer: run as a nested top action by `set`. Each page is logged by a record of its own
/// (a record stays far below the log's largest).
fn split(s: &mut Inner, t: TxnId, meta: PageId) -> Result<()> {
    let meta_old = s.body(meta)?;
    let mut m = Meta::decode(&meta_old)?;
    let from = u64::from(m.next);
    let to = from + (1u64 << m.level);
    let old_chain = chain(s, &m, from)?;
    let mut entries = Vec::new();
    let mut olds = Vec::new();
    for &p in &old_chain {
        let body = s.body(p)?;
        entries.extend(Bucket::decode(&body)?.entries);
        olds.push(body);
    }
    let mask = (1u64 << (m.level + 1)) - 1;
    let (moving, staying): (Vec<_>, Vec<_>) = entries
        .into_iter()
        .partition(|(k, _)| u64::from(crc32c::crc32c(k)) & mask == to);
    // The staying entries refill the old chain from its start (pages left empty stay linked).
    let stay_pages = pack(staying, old_chain.len());
    if stay_pages.len() > old_chain.len() {
        return Err(PageError::Corrupt {
            what: "hash bucket chain",
            detail: format!("bucket {from}'s entries do not fit back in its chain"),
        });
    }
    for (i, &p) in old_chain.iter().enumerate() {
        let mut b = Bucket {
            next: old_chain.get(i + 1).copied().unwrap_or(0),
            entries: Vec::new(),
        };
        if let Some(e) = stay_pages.get(i) {
            b.entries = e.clone();
        }
        s.log_pages(t, OP_PAGE_WRITE, &[], &[(p, &olds[i], &b.encode())], &[])?;
    }
    let move_pages = pack(moving, 1);
    let mut new_pages = Vec::new();
    for _ in 0..move_pages.len() {
        new_pages.push(s.alloc_page(t)?);
    }
    let zero = vec![0u8; BODY_LEN];
    for (i, entries) in move_pages.into_iter().enumerate() {
        let b = Bucket {
            next: new_pages.get(i + 1).copied().unwrap_or(0),
            entries,
        };
        s.log_pages(
            t,
            OP_PAGE_WRITE,
            &[],
            &[(new_pages[i], &zero, &b.encode())],
            &[],
        )?;
    }
    let slot = to as usize / DIR_SLOTS;
    if slot == m.directory.len() {
        let dir = s.alloc_page(t)?;
        s.log_pages(
            t,
            OP_PAGE_WRITE,
            &[],
            &[(dir, &zero, &empty_directory())],
            &[],
        )?;
        m.directory.push(dir);
    }
    let dir = m.directory[slot];
    let dir_old = s.body(dir)?;
    let mut dir_new = dir_old.clone();
    dir_set(&mut dir_new, to as usize % DIR_SLOTS, new_pages[0]);
    m.next += 1;
    if u64::from(m.next) == 1u64 << m.level {
        m.level += 1;
        m.next = 0;
    }
    let meta_old = s.body(meta)?;
    s.log_pages(
        t,
        OP_PAGE_WRITE,
        &[],
        &[(dir, &dir_old, &dir_new), (meta, &meta_old, &m.encode())],
        &[],
    )?;
    Ok(())
}

/// Packs entries into as few bucket pages as they fit in, at least `min` pages.
fn pack(entries: Vec<(Vec<u8>, Vec<u8>)>, min: usize) -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut pages: Vec<Vec<(Vec<u8>, Vec<u8>)>> = vec![Vec::new()];
    let mut used = 0;
    for (k, v) in entries {
        let len = entry_len(&k, &v);
        if used + len > BUCKET_CAPACITY {
            pages.push(Vec::new());
            used = 0;
        }
        used += len;
        if let Some(last) = pages.last_mut() {
            last.push((k, v));
        }
    }
    while pages.len() < min {
        pages.push(Vec::new());
    }
    pages
}

/// The logical undo of an [`OP_HASH_SET`] record: the key's old value put back, or the key
/// deleted, wherever it lives now, logged as a compensation record.
fn undo_set(s: &mut Inner, txn: TxnId, lsn: Lsn, payload: &[u8]) -> Result<()> {
    let (_, tail) = decode_changes(payload, Images::After)?;
    let mut c = Cursor::new(tail, "linear hash record");
    let meta = c.u32()?;
    let klen = c.u16()? as usize;
    let key = c.take(klen)?.to_vec();
    let old = match c.u8()? {
        0 => None,
        _ => {
            let len = c.u32()? as usize;
            Some(c.take(len)?.to_vec())
        }
    };
    set(s, txn, meta, &key, old.as_deref(), Mode::Undo(lsn)).map(|_| ())
}

/// The logical undo of `op`, if it is the hash table's.
pub(crate) fn logical_undo(op: OpId) -> Option<LogicalUndo> {
    (op == OP_HASH_SET).then_some(undo_set as LogicalUndo)
}

/// Registers the hash table's operation for recovery: redo applies its page changes, undo
/// collects the record for the logical rollback that follows.
pub(crate) fn register_ops(registry: &mut OpRegistry, state: &Arc<Mutex<Redone>>) -> Result<()> {
    let s = state.clone();
    registry.register(
        OP_HASH_SET,
        "linear hash: set key",
        Box::new(move |r: &LogRecord| s.lock().redo(r)),
        Some(collect_undo(state)),
    )?;
    Ok(())
}
