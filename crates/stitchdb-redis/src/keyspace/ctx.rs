//! A command's view of the keyspace: reads see its own writes, and its writes go into one
//! engine transaction, committed as one atomic commit (or left in the connection's open
//! transaction, for `SX.BEGIN`). The typed layer over the tables is here too: metadata
//! records with lazy expiry, and members of collections.

use super::encoding::{self, Body, Kind, Meta};
use super::pending::Pending;
use super::{DbTables, Keyspace, Table};
use std::collections::HashMap;
use std::ops::Bound;
use stitchdb::{Durability, Isolation, Snapshot, Transaction};

/// Why a keyspace operation failed.
#[derive(Debug)]
pub enum KsError {
    /// The store failed or refused (a conflict, a value too large, a closed store).
    Store(stitchdb::Error),
    /// The key holds another type than the command works on.
    WrongType,
    /// An error reply, its message whole.
    Msg(String),
}

impl From<stitchdb::Error> for KsError {
    fn from(e: stitchdb::Error) -> Self {
        KsError::Store(e)
    }
}

/// The result of a keyspace operation.
pub type KsResult<T> = Result<T, KsError>;

/// Pairs from a scan.
pub type Pairs = Box<dyn Iterator<Item = stitchdb::Result<(Vec<u8>, Vec<u8>)>>>;

/// What a command's commit changed, for [`Keyspace::apply`].
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    /// Keys written (database, key), repeats possible.
    pub touched: Vec<(usize, Vec<u8>)>,
    /// Change in each database's key count.
    pub deltas: Vec<i64>,
    /// Databases emptied whole (their counts restart from 0 before `deltas`).
    pub flushed: Vec<usize>,
    /// Whether anything was written.
    pub wrote: bool,
}

impl Outcome {
    /// Adds `later`, which committed after this.
    pub fn merge(&mut self, later: Outcome) {
        for &db in &later.flushed {
            if let Some(d) = self.deltas.get_mut(db) {
                *d = 0;
            }
            self.flushed.push(db);
        }
        if self.deltas.len() < later.deltas.len() {
            self.deltas.resize(later.deltas.len(), 0);
        }
        for (i, d) in later.deltas.into_iter().enumerate() {
            self.deltas[i] += d;
        }
        self.touched.extend(later.touched);
        self.wrote |= later.wrote;
    }
}

/// Where a command's writes go.
// A `Slot` lives on the stack for one command; boxing the transaction would cost every
// write command an allocation.
#[allow(clippy::large_enum_variant)]
pub enum Slot<'a> {
    /// A transaction of the command's own, begun when a scan follows its writes (until
    /// then they wait in `Ctx::pending`, committed as one batch).
    Own(Option<Transaction<'static>>),
    /// The connection's open transaction (`SX.BEGIN`, `EXEC`).
    Shared(&'a mut Transaction<'static>),
}

/// Where a write goes: the transaction, or the writes waiting to commit as a batch.
enum Writer<'w> {
    Txn(&'w mut Transaction<'static>),
    Pending(&'w mut Pending),
}

/// A command's view of the keyspace.
pub struct Ctx<'a> {
    /// The keyspace.
    pub ks: &'a Keyspace,
    /// The selected database.
    db: usize,
    /// Its tables (`None`: a snapshot without them, which reads as empty).
    tables: Option<DbTables>,
    txn: Slot<'a>,
    /// With `Slot::Own(None)`: the writes made so far, committed as a batch unless a scan
    /// moves them into a transaction first (see `pending`).
    pending: Pending,
    /// Reads at this snapshot, and refuses writes.
    snapshot: Option<&'a Snapshot>,
    /// The command's clock (Unix milliseconds), fixed for the command as Redis fixes it.
    pub now: u64,
    /// Metadata records as this command has seen or written them (`None`: absent), raw:
    /// expired keys included.
    metas: HashMap<(usize, Vec<u8>), Option<Meta>>,
    outcome: Outcome,
}

/// Unix milliseconds now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl<'a> Ctx<'a> {
    /// A view of database `db` whose writes go to `txn`.
    pub fn new(ks: &'a Keyspace, db: usize, txn: Slot<'a>) -> KsResult<Ctx<'a>> {
        let tables = Some(ks.tables(db)?);
        Ok(Ctx {
            ks,
            db,
            tables,
            txn,
            pending: Pending::default(),
            snapshot: None,
            now: now_ms(),
            metas: HashMap::new(),
            outcome: Outcome {
                deltas: vec![0; ks.databases()],
                ..Outcome::default()
            },
        })
    }

    /// A read-only view of database `db` as `snap` holds it.
    pub fn at_snapshot(ks: &'a Keyspace, db: usize, snap: &'a Snapshot) -> KsResult<Ctx<'a>> {
        if db >= ks.databases() {
            return Err(KsError::Msg("ERR DB index is out of range".into()));
        }
        Ok(Ctx {
            ks,
            db,
            tables: DbTables::in_snapshot(snap, db),
            txn: Slot::Own(None),
            pending: Pending::default(),
            snapshot: Some(snap),
            now: now_ms(),
            metas: HashMap::new(),
            outcome: Outcome {
                deltas: vec![0; ks.databases()],
                ..Outcome::default()
            },
        })
    }

    /// The selected database.
    pub fn db(&self) -> usize {
        self.db
    }

    /// Selects database `db` for the calls that follow (`MOVE`, `COPY ... DB`).
    pub fn select(&mut self, db: usize) -> KsResult<()> {
        self.tables = match self.snapshot {
            Some(s) => {
                if db >= self.ks.databases() {
                    return Err(KsError::Msg("ERR DB index is out of range".into()));
                }
                DbTables::in_snapshot(s, db)
            }
            None => Some(self.ks.tables(db)?),
        };
        self.db = db;
        Ok(())
    }

    /// Commits the command's own transaction with `durability` (the connection makes it
    /// durable before replying; see `conn`), or, for a shared one, leaves it open. Returns
    /// what changed, for [`Keyspace::apply`] once committed.
    pub fn finish(self, durability: Durability) -> KsResult<Outcome> {
        match self.txn {
            Slot::Own(Some(txn)) => txn.commit_with(durability)?,
            Slot::Own(None) if !self.pending.is_empty() => self
                .ks
                .db
                .write_owned(self.pending.into_batch(), durability)?,
            _ => {}
        }
        Ok(self.outcome)
    }

    // ----- tables -----

    fn id(&self, table: Table) -> Option<stitchdb::TableId> {
        self.tables.map(|t| t.id(table))
    }

    /// Where writes to `table` go, and the table's id.
    fn writer(&mut self, table: Table) -> KsResult<(stitchdb::TableId, Writer<'_>)> {
        let id = self.id(table);
        if self.snapshot.is_some() {
            return Err(KsError::Msg(
                "READONLY You can't write against a snapshot.".into(),
            ));
        }
        self.outcome.wrote = true;
        // Only a snapshot's view lacks tables, and it was refused above.
        let id = id.ok_or_else(|| KsError::Msg("ERR the database has no tables".into()))?;
        let w = match &mut self.txn {
            Slot::Shared(t) => Writer::Txn(t),
            Slot::Own(Some(t)) => Writer::Txn(t),
            Slot::Own(None) => Writer::Pending(&mut self.pending),
        };
        Ok((id, w))
    }

    /// Moves the writes made so far into a transaction of the command's own, which a scan
    /// then reads through.
    fn move_to_txn(&mut self) -> KsResult<()> {
        if let Slot::Own(slot @ None) = &mut self.txn {
            let mut txn = self.ks.db.begin_owned(Isolation::Snapshot)?;
            std::mem::take(&mut self.pending).replay(&mut txn)?;
            *slot = Some(txn);
        }
        Ok(())
    }

    /// The value of `key` in `table`.
    pub fn get(&mut self, table: Table, key: &[u8]) -> KsResult<Option<Vec<u8>>> {
        let Some(id) = self.id(table) else {
            return Ok(None);
        };
        Ok(match (&mut self.txn, self.snapshot) {
            (_, Some(s)) => s.get(id, key)?,
            (Slot::Shared(t), None) => t.get(id, key)?,
            (Slot::Own(Some(t)), None) => t.get(id, key)?,
            (Slot::Own(None), None) => match self.pending.get(id, key) {
                Some(decided) => decided,
                None => self.ks.db.get(id, key)?,
            },
        })
    }

    /// The pairs of `table` within the bounds, in key order (descending if `rev`).
    pub fn scan(
        &mut self,
        table: Table,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        rev: bool,
    ) -> KsResult<Pairs> {
        let Some(id) = self.id(table) else {
            return Ok(Box::new(std::iter::empty()));
        };
        if self.pending.touches(id) {
            self.move_to_txn()?;
        }
        let pairs: Pairs = match (&mut self.txn, self.snapshot) {
            (_, Some(s)) if rev => Box::new(s.range_rev(id, start, end)?),
            (_, Some(s)) => Box::new(s.range(id, start, end)?),
            (Slot::Own(None), None) if rev => Box::new(self.ks.db.range_rev(id, start, end)?),
            (Slot::Own(None), None) => Box::new(self.ks.db.range(id, start, end)?),
            (Slot::Shared(t), None) => txn_scan(t, id, start, end, rev)?,
            (Slot::Own(Some(t)), None) => txn_scan(t, id, start, end, rev)?,
        };
        Ok(pairs)
    }

    /// Sets `key` in `table`.
    pub fn put(&mut self, table: Table, key: &[u8], value: &[u8]) -> KsResult<()> {
        let max_value = self.ks.max_value;
        match self.writer(table)? {
            (id, Writer::Txn(t)) => t.put(id, key, value)?,
            (id, Writer::Pending(p)) => {
                // Refused now, as a transaction's put refuses it, not at the commit: a
                // command checks what it writes by writing it first.
                check_size("key", key.len(), stitchdb::MAX_KEY_LEN)?;
                check_size("value", value.len(), max_value)?;
                p.put(id, key, Some(value))
            }
        }
        Ok(())
    }

    /// Removes `key` from `table`.
    pub fn delete(&mut self, table: Table, key: &[u8]) -> KsResult<()> {
        match self.writer(table)? {
            (id, Writer::Txn(t)) => t.delete(id, key)?,
            (id, Writer::Pending(p)) => {
                check_size("key", key.len(), stitchdb::MAX_KEY_LEN)?;
                p.put(id, key, None)
            }
        }
        Ok(())
    }

    /// Removes every key of `table` from `start` to `end` (exclusive; `None`: to the end).
    pub fn delete_range(&mut self, table: Table, start: &[u8], end: Option<&[u8]>) -> KsResult<()> {
        let last;
        let (end, last) = match end {
            Some(e) => (e, None),
            None => {
                // To the end: up to the table's last key, and that key. A bound above every
                // possible key would be MAX_KEY_LEN bytes long, and range deletes that long
                // pile up in a memtable (a client flushing over and over) until a run's
                // extent of them no longer fits a zone.
                let found = self
                    .scan(table, Bound::Included(start), Bound::Unbounded, true)?
                    .next();
                match found {
                    None => return Ok(()),
                    Some(pair) => last = pair?.0,
                }
                (last.as_slice(), Some(last.as_slice()))
            }
        };
        match self.writer(table)? {
            (id, Writer::Txn(t)) => {
                t.delete_range(id, start, end)?;
                if let Some(k) = last {
                    t.delete(id, k)?;
                }
            }
            (id, Writer::Pending(p)) => {
                p.delete_range(id, start, end);
                if let Some(k) = last {
                    p.put(id, k, None);
                }
            }
        }
        Ok(())
    }

    // ----- metadata records -----

    /// `key`'s metadata record, expired or not.
    pub fn raw_meta(&mut self, key: &[u8]) -> KsResult<Option<Meta>> {
        let slot = (self.db, key.to_vec());
        if let Some(m) = self.metas.get(&slot) {
            return Ok(m.clone());
        }
        let meta = match self.get(Table::Keys, key)? {
            Some(b) => Some(decode_meta(key, &b)?),
            None => None,
        };
        self.metas.insert(slot, meta.clone());
        Ok(meta)
    }

    /// `key`'s metadata if the key exists (has not expired).
    pub fn lookup(&mut self, key: &[u8]) -> KsResult<Option<Meta>> {
        let now = self.now;
        Ok(self.raw_meta(key)?.filter(|m| !m.expired(now)))
    }

    /// `key`'s metadata if it exists and holds `kind` (`WrongType` if another kind).
    pub fn lookup_kind(&mut self, key: &[u8], kind: Kind) -> KsResult<Option<Meta>> {
        match self.lookup(key)? {
            Some(m) if m.kind != kind => Err(KsError::WrongType),
            m => Ok(m),
        }
    }

    /// Writes `key`'s metadata record. If the key held another object (another type or
    /// collection version, expired or not), that object's members are removed; the expiry
    /// index follows `meta.expire_at`.
    pub fn put_meta(&mut self, key: &[u8], meta: &Meta) -> KsResult<()> {
        let old = self.raw_meta(key)?;
        match &old {
            None => self.outcome.deltas[self.db] += 1,
            Some(o) => {
                let same = match (o.coll(), meta.coll()) {
                    (Some(a), Some(b)) => a.version == b.version,
                    _ => false,
                };
                if !same {
                    self.drop_members(key, o)?;
                }
            }
        }
        let old_expiry = old.as_ref().and_then(|o| o.expire_at);
        if old_expiry != meta.expire_at {
            if let Some(at) = old_expiry {
                self.delete(Table::Expires, &encoding::expiry_key(at, key))?;
            }
            if let Some(at) = meta.expire_at {
                self.put(Table::Expires, &encoding::expiry_key(at, key), b"")?;
            }
        }
        self.put(Table::Keys, key, &meta.encode())?;
        self.metas
            .insert((self.db, key.to_vec()), Some(meta.clone()));
        self.touch(key);
        Ok(())
    }

    /// Removes `key`, expired or not, with its members (one range delete, whatever their
    /// number) and its expiry entry. Returns whether it existed (had not expired).
    pub fn delete_key(&mut self, key: &[u8]) -> KsResult<bool> {
        let Some(old) = self.raw_meta(key)? else {
            return Ok(false);
        };
        self.drop_members(key, &old)?;
        if let Some(at) = old.expire_at {
            self.delete(Table::Expires, &encoding::expiry_key(at, key))?;
        }
        self.delete(Table::Keys, key)?;
        self.outcome.deltas[self.db] -= 1;
        self.metas.insert((self.db, key.to_vec()), None);
        self.touch(key);
        Ok(!old.expired(self.now))
    }

    fn drop_members(&mut self, key: &[u8], old: &Meta) -> KsResult<()> {
        if let Body::Collection(c) = &old.body {
            let prefix = encoding::members_prefix(key, c.version);
            let end = encoding::prefix_end(&prefix);
            self.delete_range(Table::Members, &prefix, end.as_deref())?;
        }
        Ok(())
    }

    /// Empties the selected database: three range deletes.
    pub fn flush_db(&mut self) -> KsResult<()> {
        // Watchers of the keys it held are told, as Redis's `touchAllWatchedKeysInDb` tells
        // them (not those of keys that were not there).
        for key in self.ks.watches.watched_in(self.db) {
            if self.raw_meta(&key)?.is_some() {
                self.touch(&key);
            }
        }
        for t in [Table::Keys, Table::Members, Table::Expires] {
            self.delete_range(t, b"", None)?;
        }
        let db = self.db;
        self.metas.retain(|(d, _), _| *d != db);
        self.outcome.deltas[db] = 0;
        self.outcome.flushed.push(db);
        Ok(())
    }

    /// Records that `key` changed (for `WATCH`) when only its members were written.
    pub fn touch(&mut self, key: &[u8]) {
        self.outcome.touched.push((self.db, key.to_vec()));
    }

    // ----- members -----

    /// A member record of `key`'s collection at `version`.
    pub fn member(
        &mut self,
        key: &[u8],
        version: u64,
        tag: u8,
        member: &[u8],
    ) -> KsResult<Option<Vec<u8>>> {
        self.get(
            Table::Members,
            &encoding::member_key(key, version, tag, member),
        )
    }

    /// Sets a member record.
    pub fn put_member(
        &mut self,
        key: &[u8],
        version: u64,
        tag: u8,
        member: &[u8],
        value: &[u8],
    ) -> KsResult<()> {
        self.put(
            Table::Members,
            &encoding::member_key(key, version, tag, member),
            value,
        )
    }

    /// Removes a member record.
    pub fn delete_member(
        &mut self,
        key: &[u8],
        version: u64,
        tag: u8,
        member: &[u8],
    ) -> KsResult<()> {
        self.delete(
            Table::Members,
            &encoding::member_key(key, version, tag, member),
        )
    }

    /// The member records of one `tag` of a collection from `from` (a member suffix,
    /// inclusive; empty: the first), ascending, or descending from the last if `rev`; as
    /// (member suffix, value).
    pub fn members(
        &mut self,
        key: &[u8],
        version: u64,
        tag: u8,
        from: &[u8],
        rev: bool,
    ) -> KsResult<impl Iterator<Item = KsResult<(Vec<u8>, Vec<u8>)>>> {
        let prefix = encoding::tag_prefix(key, version, tag);
        let end = encoding::prefix_end(&prefix);
        let mut start = prefix.clone();
        start.extend_from_slice(from);
        let end_bound = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let pairs = if rev {
            let upper = if from.is_empty() {
                end_bound
            } else {
                Bound::Included(start.as_slice())
            };
            self.scan(Table::Members, Bound::Included(&prefix), upper, true)?
        } else {
            self.scan(Table::Members, Bound::Included(&start), end_bound, false)?
        };
        let skip = prefix.len();
        Ok(pairs.map(move |p| {
            let (k, v) = p?;
            Ok((k[skip..].to_vec(), v))
        }))
    }
}

/// `key`'s metadata record read from its bytes `b` (a record that does not decode is
/// corruption, reported with the key).
pub fn decode_meta(key: &[u8], b: &[u8]) -> KsResult<Meta> {
    Meta::decode(b).map_err(|detail| {
        KsError::Store(stitchdb::Error::Corrupt {
            what: "Redis metadata record",
            place: format!("key {:?}", String::from_utf8_lossy(key)),
            detail,
        })
    })
}

/// The engine's error for a key or value over its limit.
fn check_size(what: &'static str, len: usize, limit: usize) -> KsResult<()> {
    if len > limit {
        return Err(KsError::Store(stitchdb::Error::TooLarge {
            what,
            len,
            limit,
        }));
    }
    Ok(())
}

fn txn_scan(
    t: &mut Transaction<'static>,
    id: stitchdb::TableId,
    start: Bound<&[u8]>,
    end: Bound<&[u8]>,
    rev: bool,
) -> KsResult<Pairs> {
    let it = t.range(id, start, end)?;
    if rev {
        // A transaction scans forward only; a reverse scan inside one reads its range whole.
        let mut all = it.collect::<stitchdb::Result<Vec<_>>>()?;
        all.reverse();
        Ok(Box::new(all.into_iter().map(Ok)))
    } else {
        Ok(Box::new(it))
    }
}
