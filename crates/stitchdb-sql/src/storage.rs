//! [`StitchStorage`]: GlueSQL's storage traits over a StitchDB store.

use crate::catalog::{self, TableEntry, CATALOG_TABLE};
use crate::codec::{decode_key, decode_row, encode_key, encode_row, generated_key};
use gluesql_core::data::{Key, Schema, Value};
use gluesql_core::error::{Error, Result};
use gluesql_core::store::{
    AlterTable, CustomFunction, CustomFunctionMut, Index, IndexMut, Metadata, Planner, RowIter,
    Store, StoreMut, Transaction,
};
use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::Bound;
use std::rc::Rc;
use std::sync::Arc;
use stitchdb::{Db, Durability, Isolation, TableId};

/// A StitchDB error as a GlueSQL one.
fn db_err(e: stitchdb::Error) -> Error {
    Error::StorageMsg(format!("stitchdb: {e}"))
}

/// An error of this crate's own as a GlueSQL one.
fn msg(e: impl std::fmt::Display) -> Error {
    Error::StorageMsg(format!("stitchdb-sql: {e}"))
}

/// Key bytes as hex, for error messages.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What changes while the storage is used (behind a `RefCell`: GlueSQL reads through `&self`).
#[derive(Default)]
struct State {
    /// The open StitchDB transaction: an explicit SQL transaction's, or one statement's.
    txn: Option<stitchdb::Transaction<'static>>,
    /// Whether `txn` was begun for one statement (GlueSQL's autocommit).
    autocommit: bool,
    /// Parsed catalog entries, checked against the stored bytes on every use.
    entries: HashMap<String, Rc<TableEntry>>,
    /// The next generated key of tables without a primary key, per SQL table.
    next_row: HashMap<String, u64>,
    /// A primary key the next scan of a table may be narrowed to (see `Session`).
    hint: Option<(String, Key)>,
}

/// Rows read by full-table scans so far (shared with the scans' iterators).
type Counter = Rc<std::cell::Cell<u64>>;

/// GlueSQL storage over a StitchDB store: one catalog table (`sql.schema`) and one StitchDB
/// table per SQL table (`sql.t.NAME`); see the crate docs for the encodings.
///
/// Every statement runs in a StitchDB [`Transaction`](stitchdb::Transaction) (snapshot
/// isolation by default): an explicit SQL transaction's, from `BEGIN` to `COMMIT` or
/// `ROLLBACK`, or else one of its own, committed when the statement ends. Commits use the
/// durability set with [`with_durability`](Self::with_durability), `Durability::Sync` by
/// default: durable against power loss when `COMMIT` (or an autocommitted statement)
/// returns.
pub struct StitchStorage {
    db: Arc<Db>,
    catalog: TableId,
    durability: Durability,
    isolation: Isolation,
    /// Layouts for SQL tables created later (by name); others get the store's default.
    layouts: HashMap<String, String>,
    state: RefCell<State>,
    scanned: Counter,
}

impl StitchStorage {
    /// Storage over `db`, its catalog table created if the store has none yet.
    pub fn new(db: Arc<Db>) -> Result<StitchStorage> {
        let catalog = db.open_table(CATALOG_TABLE).map_err(db_err)?;
        Ok(StitchStorage {
            db,
            catalog,
            durability: Durability::Sync,
            isolation: Isolation::Snapshot,
            layouts: HashMap::new(),
            state: RefCell::new(State::default()),
            scanned: Counter::default(),
        })
    }

    /// Commits with `durability` from now on (`Durability::Sync` by default).
    pub fn with_durability(mut self, durability: Durability) -> StitchStorage {
        self.durability = durability;
        self
    }

    /// Runs transactions at `isolation` from now on (`Isolation::Snapshot` by default).
    pub fn with_isolation(mut self, isolation: Isolation) -> StitchStorage {
        self.isolation = isolation;
        self
    }

    /// Lays out the StitchDB table of SQL table `table`, when `CREATE TABLE` creates it, as
    /// `layout` (docs/layouts.md: e.g. `managed -> btree -> exception -> fixed(40) -> linear`).
    /// A table's layout is fixed once its StitchDB table exists.
    pub fn set_layout(&mut self, table: &str, layout: &str) {
        self.layouts.insert(table.to_owned(), layout.to_owned());
    }

    /// The store.
    pub fn db(&self) -> &Arc<Db> {
        &self.db
    }

    /// Rows GlueSQL has read by scanning whole tables (`scan_data`) through this storage.
    pub fn rows_scanned(&self) -> u64 {
        self.scanned.get()
    }

    /// Whether an explicit SQL transaction is open.
    pub fn in_transaction(&self) -> bool {
        let state = self.state.borrow();
        state.txn.is_some() && !state.autocommit
    }

    /// The StitchDB table (and its name) holding SQL table `table`'s rows.
    pub fn stitch_table(&self, table: &str) -> Result<Option<(TableId, String)>> {
        Ok(self.entry(table)?.map(|e| (e.table, e.table_name.clone())))
    }

    /// Narrows the next scan of `table` to the row of primary key `key` (the executor still
    /// filters what the scan yields, so the statement must not match any other row).
    pub(crate) fn set_hint(&self, table: &str, key: Key) {
        self.state.borrow_mut().hint = Some((table.to_owned(), key));
    }

    /// Drops a hint no scan took.
    pub(crate) fn clear_hint(&self) {
        self.state.borrow_mut().hint = None;
    }

    /// The value of `key` in `table`: through the open transaction, or the newest commit.
    fn read(&self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut state = self.state.borrow_mut();
        match state.txn.as_mut() {
            Some(txn) => txn.get(table, key),
            None => self.db.get(table, key),
        }
        .map_err(db_err)
    }

    /// The pairs of `table` in key order (from `start`), through the open transaction or at
    /// the newest commit.
    fn scan(&self, table: TableId, start: Bound<&[u8]>) -> Result<RawIter> {
        let mut state = self.state.borrow_mut();
        Ok(match state.txn.as_mut() {
            Some(txn) => Box::new(txn.range(table, start, Bound::Unbounded).map_err(db_err)?),
            None => Box::new(
                self.db
                    .range(table, start, Bound::Unbounded)
                    .map_err(db_err)?,
            ),
        })
    }

    /// Runs `f` on the open transaction, or (when none is: a write from outside a statement,
    /// as `AlterTable`'s defaults make) on one committed right after.
    fn write<T>(
        &self,
        f: impl FnOnce(&mut stitchdb::Transaction<'static>) -> stitchdb::Result<T>,
    ) -> Result<T> {
        let mut state = self.state.borrow_mut();
        if let Some(txn) = state.txn.as_mut() {
            return f(txn).map_err(db_err);
        }
        drop(state);
        let mut txn = self.db.begin_owned(self.isolation).map_err(db_err)?;
        let out = f(&mut txn).map_err(db_err)?;
        txn.commit_with(self.durability).map_err(db_err)?;
        Ok(out)
    }

    /// The catalog entry of SQL table `name` as stored now (parsed once per change).
    fn entry(&self, name: &str) -> Result<Option<Rc<TableEntry>>> {
        let Some(raw) = self.read(self.catalog, name.as_bytes())? else {
            return Ok(None);
        };
        if let Some(entry) = self.state.borrow().entries.get(name) {
            if entry.raw == raw {
                return Ok(Some(entry.clone()));
            }
        }
        let entry =
            catalog::decode_entry(raw, |table| self.db.table(table).map_err(|e| e.to_string()))
                .map_err(|e| msg(format!("table {name}: {e}")))?;
        let entry = Rc::new(entry);
        self.state
            .borrow_mut()
            .entries
            .insert(name.to_owned(), entry.clone());
        Ok(Some(entry))
    }

    /// The catalog entry of SQL table `name`, which must exist.
    fn existing(&self, name: &str) -> Result<Rc<TableEntry>> {
        self.entry(name)?
            .ok_or_else(|| msg(format!("table {name} does not exist")))
    }

    /// A row's key and values from its stored pair.
    fn decode(entry: &TableEntry, key: &[u8], row: &[u8]) -> Result<(Key, Vec<Value>)> {
        let data_type = entry.primary_key.as_ref().map(|(_, t)| t);
        let k = decode_key(data_type, key).map_err(|e| {
            msg(format!(
                "table {}: key {}: {e}",
                entry.schema.table_name,
                hex(key)
            ))
        })?;
        let values = decode_row(row).map_err(|e| {
            msg(format!(
                "table {}: row of key {}: {e}",
                entry.schema.table_name,
                hex(key)
            ))
        })?;
        Ok((k, values))
    }

    /// `key`'s bytes in `entry`'s table (which must be of the table's key type).
    fn key_bytes(entry: &TableEntry, key: &Key) -> Result<Vec<u8>> {
        let bytes =
            encode_key(key).map_err(|e| msg(format!("table {}: {e}", entry.schema.table_name)))?;
        // A key of another type than the primary key's would not read back as itself.
        let data_type = entry.primary_key.as_ref().map(|(_, t)| t);
        match decode_key(data_type, &bytes) {
            Ok(back) if &back == key => Ok(bytes),
            _ => Err(msg(format!(
                "table {}: key {key:?} is not of the table's key type ({})",
                entry.schema.table_name,
                data_type.map_or_else(|| "row number".to_owned(), ToString::to_string)
            ))),
        }
    }

    /// The first of `n` generated keys for `entry`'s table (a table without a primary key):
    /// past every key committed so far and every key this storage handed out. A key another
    /// session commits after this transaction's snapshot conflicts at commit; one committed
    /// before it is below what the newest commit shows.
    fn next_rows(&self, name: &str, entry: &TableEntry, n: u64) -> Result<u64> {
        let last = self
            .db
            .range_rev(entry.table, Bound::Unbounded, Bound::Unbounded)
            .map_err(db_err)?
            .next()
            .transpose()
            .map_err(db_err)?;
        let committed_next = match last {
            Some((key, _)) => match decode_key(None, &key) {
                Ok(Key::U64(n)) => n.saturating_add(1),
                _ => {
                    return Err(msg(format!(
                        "table {name}: key {} is not a row number",
                        hex(&key)
                    )))
                }
            },
            None => 1,
        };
        let mut state = self.state.borrow_mut();
        let handed_out = state.next_row.get(name).copied().unwrap_or(1);
        let first = committed_next.max(handed_out);
        state
            .next_row
            .insert(name.to_owned(), first.saturating_add(n));
        Ok(first)
    }
}

/// A scan of raw pairs.
type RawIter = Box<dyn Iterator<Item = stitchdb::Result<(Vec<u8>, Vec<u8>)>>>;

impl Store for StitchStorage {
    fn fetch_schema(&self, table_name: &str) -> Result<Option<Schema>> {
        Ok(self.entry(table_name)?.map(|e| e.schema.clone()))
    }

    fn fetch_all_schemas(&self) -> Result<Vec<Schema>> {
        let mut names = Vec::new();
        for pair in self.scan(self.catalog, Bound::Unbounded)? {
            let (key, _) = pair.map_err(db_err)?;
            names.push(String::from_utf8(key).map_err(|_| msg("catalog key is not UTF-8"))?);
        }
        let mut schemas = Vec::with_capacity(names.len());
        for name in names {
            if let Some(entry) = self.entry(&name)? {
                schemas.push(entry.schema.clone());
            }
        }
        Ok(schemas)
    }

    fn fetch_data(&self, table_name: &str, key: &Key) -> Result<Option<Vec<Value>>> {
        let entry = self.existing(table_name)?;
        let key = Self::key_bytes(&entry, key)?;
        match self.read(entry.table, &key)? {
            Some(row) => Ok(Some(Self::decode(&entry, &key, &row)?.1)),
            None => Ok(None),
        }
    }

    fn scan_data<'a>(&'a self, table_name: &str) -> Result<RowIter<'a>> {
        let entry = self.existing(table_name)?;
        let hint = {
            let mut state = self.state.borrow_mut();
            match &state.hint {
                Some((table, _)) if table == table_name => state.hint.take().map(|(_, k)| k),
                _ => None,
            }
        };
        if let Some(key) = hint {
            let row = self.fetch_data(table_name, &key)?;
            return Ok(Box::new(row.map(|values| Ok((key, values))).into_iter()));
        }
        let pairs = self.scan(entry.table, Bound::Unbounded)?;
        let scanned = self.scanned.clone();
        Ok(Box::new(pairs.map(move |pair| {
            scanned.set(scanned.get() + 1);
            let (key, row) = pair.map_err(db_err)?;
            Self::decode(&entry, &key, &row)
        })))
    }
}

impl StoreMut for StitchStorage {
    fn insert_schema(&mut self, schema: &Schema) -> Result<()> {
        catalog::check_schema(schema).map_err(msg)?;
        let name = &schema.table_name;
        let table_name = match self.entry(name)? {
            Some(entry) => entry.table_name.clone(),
            None => catalog::table_name_of(name),
        };
        // StitchDB creates tables outside transactions (durably, at once): a table whose
        // CREATE TABLE is rolled back stays, empty, and is used again by the next one.
        if let Err(stitchdb::Error::NoSuchTable(_)) = self.db.table(&table_name) {
            let layout = self.layouts.get(name).map_or("", String::as_str);
            match self.db.create_table_with_layout(&table_name, layout) {
                Ok(_) | Err(stitchdb::Error::TableExists(_)) => {}
                Err(e) => return Err(db_err(e)),
            }
        }
        let raw = catalog::encode_entry(schema, &table_name).map_err(msg)?;
        let catalog = self.catalog;
        self.write(|txn| txn.put(catalog, name.as_bytes(), &raw))
    }

    fn delete_schema(&mut self, table_name: &str) -> Result<()> {
        let Some(entry) = self.entry(table_name)? else {
            return Ok(());
        };
        let mut keys = Vec::new();
        for pair in self.scan(entry.table, Bound::Unbounded)? {
            keys.push(pair.map_err(db_err)?.0);
        }
        let catalog = self.catalog;
        self.write(|txn| {
            for key in &keys {
                txn.delete(entry.table, key)?;
            }
            txn.delete(catalog, table_name.as_bytes())
        })?;
        let mut state = self.state.borrow_mut();
        state.entries.remove(table_name);
        state.next_row.remove(table_name);
        Ok(())
    }

    fn append_data(&mut self, table_name: &str, rows: Vec<Vec<Value>>) -> Result<()> {
        let entry = self.existing(table_name)?;
        let mut next = match entry.primary_key {
            Some(_) => 0,
            None => self.next_rows(table_name, &entry, rows.len() as u64)?,
        };
        let mut pairs = Vec::with_capacity(rows.len());
        for row in rows {
            let key = if let Some((i, _)) = &entry.primary_key {
                // GlueSQL appends only to tables without a primary key; key one by it anyway.
                let value = row
                    .get(*i)
                    .ok_or_else(|| msg(format!("table {table_name}: row without its key")))?;
                Key::try_from(value)?
            } else {
                next += 1;
                generated_key(next - 1)
            };
            pairs.push((Self::key_bytes(&entry, &key)?, encode_row(&row)));
        }
        self.write(|txn| {
            for (key, row) in &pairs {
                txn.put(entry.table, key, row)?;
            }
            Ok(())
        })
    }

    fn insert_data(&mut self, table_name: &str, rows: Vec<(Key, Vec<Value>)>) -> Result<()> {
        let entry = self.existing(table_name)?;
        let pairs = rows
            .iter()
            .map(|(key, row)| Ok((Self::key_bytes(&entry, key)?, encode_row(row))))
            .collect::<Result<Vec<_>>>()?;
        self.write(|txn| {
            for (key, row) in &pairs {
                txn.put(entry.table, key, row)?;
            }
            Ok(())
        })
    }

    fn delete_data(&mut self, table_name: &str, keys: Vec<Key>) -> Result<()> {
        let entry = self.existing(table_name)?;
        let keys = keys
            .iter()
            .map(|key| Self::key_bytes(&entry, key))
            .collect::<Result<Vec<_>>>()?;
        self.write(|txn| {
            for key in &keys {
                txn.delete(entry.table, key)?;
            }
            Ok(())
        })
    }
}

impl Transaction for StitchStorage {
    fn begin(&mut self, autocommit: bool) -> Result<bool> {
        let state = self.state.get_mut();
        if state.txn.is_some() {
            if autocommit {
                // A statement inside an explicit transaction: it runs in that one.
                return Ok(false);
            }
            return Err(msg(
                "a transaction is already open (nested transactions are not supported)",
            ));
        }
        state.txn = Some(self.db.begin_owned(self.isolation).map_err(db_err)?);
        state.autocommit = autocommit;
        Ok(autocommit)
    }

    fn rollback(&mut self) -> Result<()> {
        let state = self.state.get_mut();
        state.autocommit = false;
        state.hint = None;
        if let Some(txn) = state.txn.take() {
            txn.abort();
        }
        Ok(())
    }

    fn commit(&mut self) -> Result<()> {
        let state = self.state.get_mut();
        state.autocommit = false;
        state.hint = None;
        match state.txn.take() {
            Some(txn) => txn.commit_with(self.durability).map_err(|e| match e {
                stitchdb::Error::Conflict { .. } => {
                    Error::StorageMsg(format!("stitchdb: the transaction was not committed: {e}"))
                }
                e => db_err(e),
            }),
            None => Ok(()),
        }
    }
}

impl AlterTable for StitchStorage {}
impl Index for StitchStorage {}
impl IndexMut for StitchStorage {}
impl Metadata for StitchStorage {}
impl CustomFunction for StitchStorage {}
impl CustomFunctionMut for StitchStorage {}
impl Planner for StitchStorage {}
