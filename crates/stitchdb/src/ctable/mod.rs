//! Column tables: Anvil's cTables ("Modular Data Storage with Anvil", §3.3.3), tables of
//! named columns over ordinary tables, read with a *projection* (the columns wanted).
//!
//! * A **row** cTable packs each row's values into one blob in one table (`NAME:rows`): a
//!   scan reads every column's bytes and unpacks only the projected ones.
//! * A **column** cTable keeps each column in a table of its own (`NAME:COLUMN`), each with
//!   its own layout: a scan reads only the projected columns' tables, merged by key.
//!
//! Both are built on the public [`Db`], [`Transaction`] and [`Snapshot`] API only (this
//! module imports nothing of `db/` or `txn/` but what the crate exports). A row has a value
//! or none (`None`, SQL's NULL) in each column, and exists while some column has a value:
//! a get or a scan yields a row if one of its *projected* columns has a value. Every write
//! of a row is checked whole (its width, its columns, each value against its column's
//! layout, the key and value limits) before anything is written, so a refused write leaves
//! nothing behind, in a transaction too. Schemas live in the catalog (`catalog`).

mod catalog;
mod row;

use crate::layout::LayoutSpec;
use crate::{
    max_value_len, Db, DbIter, Error, Isolation, Result, Snapshot, TableId, Transaction, TxnIter,
    MAX_KEY_LEN,
};
use std::ops::Bound;

pub use catalog::MAX_COLUMNS;

/// How a cTable lays its columns out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CTableKind {
    /// Each row's values packed into one blob, in one table.
    Row,
    /// One table per column, each with its own layout.
    Column,
}

/// What the catalog says of a cTable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CTableInfo {
    /// Its name.
    pub name: String,
    /// Row or column.
    pub kind: CTableKind,
    /// Its columns' names, in order.
    pub columns: Vec<String>,
    /// The tables holding its data and their layouts (canonical form): one per column, in
    /// column order, or a row cTable's one.
    pub tables: Vec<(String, String)>,
    /// False while a creation a crash interrupted is not finished yet (opening it by name
    /// finishes it).
    pub finished: bool,
}

/// A row's values, one per column asked for (`None`: the row has no value there).
pub type Values = Vec<Option<Vec<u8>>>;

/// An open column table: what the catalog says of it and its tables. Cheap to clone; it
/// holds no store, so each call names what it reads ([`CTableRead`]) or writes
/// ([`CTableWrite`]).
///
/// ```
/// use std::ops::Bound;
/// use std::sync::Arc;
/// use stitchdb::{Db, Isolation, MemDisk, Options};
/// let db = Db::create_on(Arc::new(MemDisk::new(0)), Options::default())?;
/// let t = db.create_column_ctable(
///     "items",
///     &[("price", "managed -> btree -> fixed(8)"), ("name", "")],
/// )?;
/// t.insert(&db, b"a", &[Some(&7u64.to_be_bytes()), Some(b"apple")])?;
/// let mut txn = db.begin(Isolation::Snapshot)?;
/// t.update(&mut txn, b"b", &[("name", Some(b"bean"))])?;
/// txn.commit()?;
/// // A scan of one column reads only that column's table.
/// let names: Vec<_> = t
///     .scan(&db, Bound::Unbounded, Bound::Unbounded, &["name"])?
///     .collect::<stitchdb::Result<_>>()?;
/// assert_eq!(names[1], (b"b".to_vec(), vec![Some(b"bean".to_vec())]));
/// // A 3-byte price is refused whole: nothing of the row is written.
/// assert!(t.insert(&db, b"c", &[Some(b"abc"), Some(b"corn")]).is_err());
/// assert_eq!(t.get(&db, b"c", &["name"])?, None);
/// # Ok::<(), stitchdb::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct CTable {
    info: CTableInfo,
    /// The tables of `info.tables`, in order.
    ids: Vec<TableId>,
    /// Their layouts, to check each write before any of it is made.
    specs: Vec<LayoutSpec>,
    /// The largest value the store takes.
    max_value: usize,
}

mod sealed {
    use super::Pairs;
    use crate::{Result, TableId, Transaction};
    use std::ops::Bound;

    /// How a cTable reads the tables under it.
    pub trait Read {
        fn get(&mut self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>>;
        fn range(
            &mut self,
            table: TableId,
            start: Bound<&[u8]>,
            end: Bound<&[u8]>,
        ) -> Result<Pairs>;
    }

    /// How a cTable writes: `op` applied in a transaction (run again on a retry).
    pub trait Write {
        fn apply(&mut self, op: &mut dyn FnMut(&mut Transaction<'_>) -> Result<()>) -> Result<()>;
    }
}

/// Where a cTable reads from: `&Db` (the newest commit), `&mut Transaction` (its snapshot
/// with its own writes in place) or `&Snapshot` (a named snapshot).
pub trait CTableRead: sealed::Read {}

/// Where a cTable writes to: `&Db` (each call commits on its own, with the store's default
/// durability) or `&mut Transaction` (at its commit).
pub trait CTableWrite: sealed::Write {}

/// A scan of one underlying table.
type Pairs = Box<dyn Iterator<Item = Result<(Vec<u8>, Vec<u8>)>>>;

impl sealed::Read for &Db {
    fn get(&mut self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Db::get(self, table, key)
    }

    fn range(&mut self, table: TableId, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Result<Pairs> {
        let pairs: DbIter = Db::range(self, table, start, end)?;
        Ok(Box::new(pairs))
    }
}

impl sealed::Read for &Snapshot {
    fn get(&mut self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Snapshot::get(self, table, key)
    }

    fn range(&mut self, table: TableId, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Result<Pairs> {
        let pairs: DbIter = Snapshot::range(self, table, start, end)?;
        Ok(Box::new(pairs))
    }
}

impl sealed::Read for &mut Transaction<'_> {
    fn get(&mut self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Transaction::get(self, table, key)
    }

    fn range(&mut self, table: TableId, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Result<Pairs> {
        let pairs: TxnIter = Transaction::range(self, table, start, end)?;
        Ok(Box::new(pairs))
    }
}

impl CTableRead for &Db {}
impl CTableRead for &Snapshot {}
impl CTableRead for &mut Transaction<'_> {}

/// Times an auto-commit write is tried again after a conflict with a concurrent commit.
const AUTO_COMMIT_TRIES: usize = 16;

impl sealed::Write for &Db {
    fn apply(&mut self, op: &mut dyn FnMut(&mut Transaction<'_>) -> Result<()>) -> Result<()> {
        let mut tries = 0;
        loop {
            // Dropped on an error: nothing of it is applied.
            let mut txn = self.begin(Isolation::Snapshot)?;
            op(&mut txn)?;
            match txn.commit() {
                Err(Error::Conflict { .. }) if tries + 1 < AUTO_COMMIT_TRIES => tries += 1,
                done => return done,
            }
        }
    }
}

impl sealed::Write for &mut Transaction<'_> {
    fn apply(&mut self, op: &mut dyn FnMut(&mut Transaction<'_>) -> Result<()>) -> Result<()> {
        op(self)
    }
}

impl CTableWrite for &Db {}
impl CTableWrite for &mut Transaction<'_> {}

impl Db {
    /// Creates a row cTable: each row's values packed into one blob in one table, laid out
    /// as `layout` (empty: the default VT-tree stack). Durable when it returns. A bad name,
    /// an empty, duplicate or bad column name or a bad layout is an error, and creates
    /// nothing; so is a name in use (`Error::CTableExists`), or a table the cTable needs
    /// (`NAME:rows`) that exists already (`Error::TableExists`).
    pub fn create_row_ctable(&self, name: &str, columns: &[&str], layout: &str) -> Result<CTable> {
        let def = catalog::define(name, CTableKind::Row, columns, &[layout])?;
        let (info, ids) = catalog::create(self, def)?;
        CTable::new(self, info, ids)
    }

    /// Creates a column cTable: each column `(name, layout)` in a table of its own,
    /// `NAME:COLUMN`, laid out as its layout says (docs/layouts.md). Errors as
    /// [`create_row_ctable`](Self::create_row_ctable)'s; a column's bad layout is an error
    /// naming the column.
    pub fn create_column_ctable(&self, name: &str, columns: &[(&str, &str)]) -> Result<CTable> {
        let names: Vec<&str> = columns.iter().map(|c| c.0).collect();
        let layouts: Vec<&str> = columns.iter().map(|c| c.1).collect();
        let def = catalog::define(name, CTableKind::Column, &names, &layouts)?;
        let (info, ids) = catalog::create(self, def)?;
        CTable::new(self, info, ids)
    }

    /// The cTable called `name` (`Error::NoSuchCTable` if there is none). One whose creation
    /// a crash interrupted is finished first (which needs a writable store).
    pub fn ctable(&self, name: &str) -> Result<CTable> {
        let (info, ids) = catalog::open(self, name)?;
        CTable::new(self, info, ids)
    }

    /// Every cTable, by name, as the catalog has it (unfinished ones too).
    pub fn ctables(&self) -> Result<Vec<CTableInfo>> {
        catalog::list(self)
    }
}

impl CTable {
    fn new(db: &Db, info: CTableInfo, ids: Vec<TableId>) -> Result<CTable> {
        let specs = info
            .tables
            .iter()
            .map(|(_, layout)| catalog::parse_layout(layout))
            .collect::<Result<_>>()?;
        Ok(CTable {
            info,
            ids,
            specs,
            max_value: max_value_len(db.stats().zones.zone_size),
        })
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// Row or column.
    pub fn kind(&self) -> CTableKind {
        self.info.kind
    }

    /// Its columns' names, in order.
    pub fn columns(&self) -> &[String] {
        &self.info.columns
    }

    /// What the catalog says of it.
    pub fn info(&self) -> &CTableInfo {
        &self.info
    }

    fn bad(&self, why: String) -> Error {
        Error::BadColumns(format!("column table {:?}: {why}", self.info.name))
    }

    /// The index of each column named, in the order named: each a column, none twice, at
    /// least one.
    fn resolve(&self, names: impl Iterator<Item = impl AsRef<str>>) -> Result<Vec<usize>> {
        let mut out: Vec<usize> = Vec::new();
        for name in names {
            let name = name.as_ref();
            let Some(i) = self.info.columns.iter().position(|c| c == name) else {
                return Err(self.bad(format!(
                    "no column {name:?} (columns: {})",
                    self.info.columns.join(", ")
                )));
            };
            if out.contains(&i) {
                return Err(self.bad(format!("column {name:?} is named twice")));
            }
            out.push(i);
        }
        if out.is_empty() {
            return Err(self.bad("no column named".to_string()));
        }
        Ok(out)
    }

    /// Checks a write of `value` (`None`: a delete) at `key` in table `t` as the store would,
    /// so that no part of a row is written when another part would be refused.
    fn check(&self, t: usize, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        if key.len() > MAX_KEY_LEN {
            return Err(Error::TooLarge {
                what: "key",
                len: key.len(),
                limit: MAX_KEY_LEN,
            });
        }
        if let Some(v) = value.filter(|v| v.len() > self.max_value) {
            return Err(Error::TooLarge {
                what: "value",
                len: v.len(),
                limit: self.max_value,
            });
        }
        self.specs[t].check_write(key, value).map_err(|why| {
            let (table, layout) = &self.info.tables[t];
            match self.info.kind {
                CTableKind::Column => Error::ColumnRejects {
                    ctable: self.info.name.clone(),
                    column: self.info.columns[t].clone(),
                    layout: layout.clone(),
                    why,
                },
                CTableKind::Row => Error::LayoutRejects {
                    table: table.clone(),
                    layout: layout.clone(),
                    why,
                },
            }
        })
    }

    /// The projected columns of the row at `key`: `None` if none of them has a value.
    pub fn get(
        &self,
        mut from: impl CTableRead,
        key: impl AsRef<[u8]>,
        projection: &[&str],
    ) -> Result<Option<Values>> {
        let key = key.as_ref();
        let cols = self.resolve(projection.iter())?;
        let values = match self.info.kind {
            CTableKind::Row => match from.get(self.ids[0], key)? {
                Some(blob) => self.unpack(key, &blob, &cols)?,
                None => return Ok(None),
            },
            CTableKind::Column => cols
                .iter()
                .map(|&c| from.get(self.ids[c], key))
                .collect::<Result<_>>()?,
        };
        Ok(values.iter().any(Option::is_some).then_some(values))
    }

    /// The projected values `cols` of a row blob, in the order asked.
    fn unpack(&self, key: &[u8], blob: &[u8], cols: &[usize]) -> Result<Values> {
        let width = self.info.columns.len();
        let mut wanted = vec![false; width];
        for &c in cols {
            wanted[c] = true;
        }
        let mut in_order = row::decode(blob, width, &wanted).map_err(|detail| Error::Corrupt {
            what: "column table row",
            place: format!(
                "table {:?} key {}",
                self.info.tables[0].0,
                key.escape_ascii()
            ),
            detail,
        })?;
        // `in_order` holds the projected columns in column order: put them in the order asked.
        let mut sorted = cols.to_vec();
        sorted.sort_unstable();
        Ok(cols
            .iter()
            .map(|c| {
                let at = sorted.binary_search(c).unwrap_or_default();
                std::mem::take(&mut in_order[at])
            })
            .collect())
    }

    /// The rows with keys in `(start, end)`, in key order, each with its projected values;
    /// only rows with a value in some projected column. A column cTable reads only the
    /// projected columns' tables.
    pub fn scan(
        &self,
        mut from: impl CTableRead,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        projection: &[&str],
    ) -> Result<CTableIter> {
        let cols = self.resolve(projection.iter())?;
        let scan = match self.info.kind {
            CTableKind::Row => Scan::Rows {
                pairs: from.range(self.ids[0], start, end)?,
                table: self.clone(),
                cols,
            },
            CTableKind::Column => Scan::Columns {
                heads: cols
                    .iter()
                    .map(|&c| Head::new(from.range(self.ids[c], start, end)?))
                    .collect::<Result<_>>()?,
            },
        };
        Ok(CTableIter { scan, done: false })
    }

    /// Sets every column of the row at `key`: `row` has one value per column, in column
    /// order (`None`: no value; a row of `None`s is deleted).
    pub fn insert(
        &self,
        mut to: impl CTableWrite,
        key: impl AsRef<[u8]>,
        row: &[Option<&[u8]>],
    ) -> Result<()> {
        let key = key.as_ref();
        let width = self.info.columns.len();
        if row.len() != width {
            return Err(self.bad(format!("a row of {} values, not {width}", row.len())));
        }
        match self.info.kind {
            CTableKind::Row => {
                let blob = row.iter().any(Option::is_some).then(|| row::encode(row));
                self.check(0, key, blob.as_deref())?;
                to.apply(&mut |txn| self.write_blob(txn, key, blob.as_deref()))
            }
            CTableKind::Column => {
                for (c, value) in row.iter().enumerate() {
                    self.check(c, key, *value)?;
                }
                to.apply(&mut |txn| {
                    for (c, value) in row.iter().enumerate() {
                        self.write_column(txn, c, key, *value)?;
                    }
                    Ok(())
                })
            }
        }
    }

    /// Sets the columns named in `values` of the row at `key`, leaving the others as they
    /// are (a row that had none is made; a row left with no value is deleted). A row cTable
    /// reads the row to repack it; a column cTable writes only those columns.
    pub fn update(
        &self,
        mut to: impl CTableWrite,
        key: impl AsRef<[u8]>,
        values: &[(&str, Option<&[u8]>)],
    ) -> Result<()> {
        let key = key.as_ref();
        let cols = self.resolve(values.iter().map(|v| v.0))?;
        match self.info.kind {
            CTableKind::Row => to.apply(&mut |txn| {
                let width = self.info.columns.len();
                let all: Vec<usize> = (0..width).collect();
                let mut row = match txn.get_for_update(self.ids[0], key)? {
                    Some(blob) => self.unpack(key, &blob, &all)?,
                    None => vec![None; width],
                };
                for (&c, (_, value)) in cols.iter().zip(values) {
                    row[c] = value.map(<[u8]>::to_vec);
                }
                let refs: Vec<Option<&[u8]>> = row.iter().map(Option::as_deref).collect();
                let blob = refs.iter().any(Option::is_some).then(|| row::encode(&refs));
                self.check(0, key, blob.as_deref())?;
                self.write_blob(txn, key, blob.as_deref())
            }),
            CTableKind::Column => {
                for (&c, (_, value)) in cols.iter().zip(values) {
                    self.check(c, key, *value)?;
                }
                to.apply(&mut |txn| {
                    for (&c, (_, value)) in cols.iter().zip(values) {
                        self.write_column(txn, c, key, *value)?;
                    }
                    Ok(())
                })
            }
        }
    }

    /// Deletes the row at `key` (every column; nothing if it has no value).
    pub fn delete(&self, mut to: impl CTableWrite, key: impl AsRef<[u8]>) -> Result<()> {
        let key = key.as_ref();
        for t in 0..self.ids.len() {
            self.check(t, key, None)?;
        }
        to.apply(&mut |txn| {
            for &t in &self.ids {
                txn.delete(t, key)?;
            }
            Ok(())
        })
    }

    fn write_blob(&self, txn: &mut Transaction<'_>, key: &[u8], blob: Option<&[u8]>) -> Result<()> {
        match blob {
            Some(blob) => txn.put(self.ids[0], key, blob),
            None => txn.delete(self.ids[0], key),
        }
    }

    fn write_column(
        &self,
        txn: &mut Transaction<'_>,
        c: usize,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<()> {
        match value {
            Some(v) => txn.put(self.ids[c], key, v),
            None => txn.delete(self.ids[c], key),
        }
    }
}

/// A projected scan of a cTable: yields each row's key and projected values, in key order,
/// or the error that ended it.
pub struct CTableIter {
    scan: Scan,
    /// Set after an error: a column scan cannot go on without one of its columns.
    done: bool,
}

enum Scan {
    /// A row cTable's one table, each blob unpacked.
    Rows {
        pairs: Pairs,
        table: CTable,
        cols: Vec<usize>,
    },
    /// A column cTable's projected columns' tables, merged by key.
    Columns { heads: Vec<Head> },
}

/// One projected column's scan and the pair it is at (`None`: at its end).
struct Head {
    pairs: Pairs,
    at: Option<(Vec<u8>, Vec<u8>)>,
}

impl Head {
    fn new(pairs: Pairs) -> Result<Head> {
        let mut head = Head { pairs, at: None };
        head.advance()?;
        Ok(head)
    }

    fn advance(&mut self) -> Result<()> {
        self.at = self.pairs.next().transpose()?;
        Ok(())
    }
}

impl Iterator for CTableIter {
    type Item = Result<(Vec<u8>, Values)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = match &mut self.scan {
            Scan::Rows { pairs, table, cols } => loop {
                let (key, blob) = match pairs.next()? {
                    Ok(pair) => pair,
                    Err(e) => break Err(e),
                };
                match table.unpack(&key, &blob, cols) {
                    Ok(values) if values.iter().all(Option::is_none) => continue,
                    Ok(values) => break Ok((key, values)),
                    Err(e) => break Err(e),
                }
            },
            Scan::Columns { heads } => next_merged(heads)?,
        };
        self.done = item.is_err();
        Some(item)
    }
}

/// The next row of the columns' scans: the smallest key any of them is at, with the value
/// of each column that has it (the key and values move out of the scans, uncopied).
fn next_merged(heads: &mut [Head]) -> Option<Result<(Vec<u8>, Values)>> {
    let least = heads
        .iter()
        .enumerate()
        .filter_map(|(i, h)| h.at.as_ref().map(|(key, _)| (i, key)))
        .min_by(|a, b| a.1.cmp(b.1))
        .map(|(i, _)| i)?;
    let (key, value) = heads[least].at.take()?;
    let mut first = Some(value);
    let mut values = Vec::with_capacity(heads.len());
    for (i, head) in heads.iter_mut().enumerate() {
        let here = i == least || head.at.as_ref().is_some_and(|(k, _)| *k == key);
        if !here {
            values.push(None);
            continue;
        }
        values.push(match i == least {
            true => first.take(),
            false => head.at.take().map(|(_, v)| v),
        });
        if let Err(e) = head.advance() {
            return Some(Err(e));
        }
    }
    Some(Ok((key, values)))
}
