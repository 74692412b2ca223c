//! The schema catalog: table `:ctables`, one record per column table, keyed by its name
//! (docs/format.md, "Column tables").
//!
//! Making tables is not transactional (each `create_table` commits on its own), so a cTable
//! is made in three durable steps: its record, saying *being created*; its tables; the record
//! again, saying *finished*. A crash between them leaves a record naming tables that may not
//! all exist: opening the cTable by name (or creating it again with the same definition)
//! makes the missing ones and finishes it. Until then it is listed as unfinished and is never
//! read or written half-made. The names of its tables are fixed by its own, so a table found
//! in place is the one an interrupted creation made (or, if someone made a table of that
//! name meanwhile with another layout, the creation stops with an error naming it).

use super::{CTableInfo, CTableKind};
use crate::codec::{put_bytes, put_varint, Reader};
use crate::layout::LayoutSpec;
use crate::{Db, Durability, Error, Isolation, Result, TableId};

/// The catalog table's name. No cTable's table starts with `:` (a cTable's name is not
/// empty), so the catalog is never one of them.
pub const CATALOG: &str = ":ctables";

/// The record's format version; a reader refuses another.
const VERSION: u8 = 1;
const CREATING: u8 = 0;
const FINISHED: u8 = 1;

/// A cTable's name and a column's name, in bytes: together with the `:` between them they
/// fit the 255 bytes of a table name.
const MAX_CTABLE_NAME: usize = 128;
const MAX_COLUMN_NAME: usize = 126;
/// Columns a cTable may have.
pub const MAX_COLUMNS: usize = 1024;

/// How many times a catalog write that conflicted with another's is tried again.
const TRIES: usize = 8;

/// The suffix of a row cTable's one table (`NAME:rows`).
const ROWS: &str = "rows";

/// Checks a definition (names, columns, layouts) and fills in its tables: one per column,
/// `NAME:COLUMN` (column kind), or `NAME:rows` (row kind). `layouts`: one per column, or the
/// row table's. Nothing is made here.
pub fn define(
    name: &str,
    kind: CTableKind,
    columns: &[&str],
    layouts: &[&str],
) -> Result<CTableInfo> {
    let bad = |why: String| Err(Error::BadColumns(format!("column table {name:?}: {why}")));
    if name.is_empty() || name.len() > MAX_CTABLE_NAME {
        return bad(format!("the name must be 1 to {MAX_CTABLE_NAME} bytes"));
    }
    if columns.is_empty() || columns.len() > MAX_COLUMNS {
        return bad(format!(
            "it needs 1 to {MAX_COLUMNS} columns, not {}",
            columns.len()
        ));
    }
    for (i, column) in columns.iter().enumerate() {
        if column.is_empty() || column.len() > MAX_COLUMN_NAME || column.contains(':') {
            return bad(format!(
                "column name {column:?} must be 1 to {MAX_COLUMN_NAME} bytes without ':'"
            ));
        }
        if columns[..i].contains(column) {
            return bad(format!("column {column:?} is named twice"));
        }
    }
    let mut canonical = Vec::with_capacity(layouts.len());
    for (i, layout) in layouts.iter().enumerate() {
        let spec = parse_layout(layout).map_err(|e| match kind {
            CTableKind::Column => Error::BadLayout(format!(
                "column table {name:?}, column {:?}: {e}",
                columns[i]
            )),
            CTableKind::Row => Error::BadLayout(format!("column table {name:?}: {e}")),
        })?;
        canonical.push(spec.to_string());
    }
    Ok(CTableInfo {
        name: name.to_string(),
        kind,
        columns: columns.iter().map(|c| c.to_string()).collect(),
        tables: table_names(name, kind, columns)
            .into_iter()
            .zip(canonical)
            .collect(),
        finished: false,
    })
}

/// A layout string as `Db::create_table_with_layout` reads it (empty: the default).
pub fn parse_layout(layout: &str) -> Result<LayoutSpec> {
    match layout.trim() {
        "" => Ok(LayoutSpec::default()),
        text => LayoutSpec::parse(text).map_err(|e| Error::BadLayout(e.to_string())),
    }
}

/// The tables a cTable's data lives in. Distinct cTables never share one: the part after the
/// last `:` (a column name has none) is the column, or `rows`, and the part before it the
/// cTable, which has one kind.
fn table_names(name: &str, kind: CTableKind, columns: &[impl AsRef<str>]) -> Vec<String> {
    match kind {
        CTableKind::Row => vec![format!("{name}:{ROWS}")],
        CTableKind::Column => columns
            .iter()
            .map(|c| format!("{name}:{}", c.as_ref()))
            .collect(),
    }
}

/// The record: version, state, kind (0 row, 1 column), the column count and names, then the
/// layout of each table (one per column, or the row table's), each a varint length and bytes.
fn encode(info: &CTableInfo) -> Vec<u8> {
    let mut out = vec![
        VERSION,
        if info.finished { FINISHED } else { CREATING },
        match info.kind {
            CTableKind::Row => 0,
            CTableKind::Column => 1,
        },
    ];
    put_varint(&mut out, info.columns.len() as u64);
    for column in &info.columns {
        put_bytes(&mut out, column.as_bytes());
    }
    for (_, layout) in &info.tables {
        put_bytes(&mut out, layout.as_bytes());
    }
    out
}

fn decode(name: &str, bytes: &[u8]) -> Result<CTableInfo> {
    decode_fields(name, bytes).map_err(|detail| Error::Corrupt {
        what: "column table schema",
        place: format!("table {CATALOG:?} key {name:?}"),
        detail,
    })
}

fn decode_fields(name: &str, bytes: &[u8]) -> std::result::Result<CTableInfo, String> {
    let mut r = Reader::new(bytes);
    let version = r.u8()?;
    if version != VERSION {
        return Err(format!(
            "schema version {version}, this build reads {VERSION}"
        ));
    }
    let finished = match r.u8()? {
        CREATING => false,
        FINISHED => true,
        state => return Err(format!("unknown state {state}")),
    };
    let kind = match r.u8()? {
        0 => CTableKind::Row,
        1 => CTableKind::Column,
        kind => return Err(format!("unknown kind {kind}")),
    };
    let count = r.len()?;
    if count == 0 || count > MAX_COLUMNS {
        return Err(format!("{count} columns"));
    }
    let text = |r: &mut Reader| -> std::result::Result<String, String> {
        String::from_utf8(r.bytes()?.to_vec()).map_err(|_| "a name that is not UTF-8".to_string())
    };
    let mut columns = Vec::with_capacity(count);
    for _ in 0..count {
        columns.push(text(&mut r)?);
    }
    let names = table_names(name, kind, &columns);
    let mut tables = Vec::with_capacity(names.len());
    for table in names {
        tables.push((table, text(&mut r)?));
    }
    if !r.is_empty() {
        return Err(format!("{} bytes after the record", bytes.len() - r.pos()));
    }
    Ok(CTableInfo {
        name: name.to_string(),
        kind,
        columns,
        tables,
        finished,
    })
}

/// An error if a table `def` needs exists already (before anything is made).
fn check_free(db: &Db, def: &CTableInfo) -> Result<()> {
    for (table, _) in &def.tables {
        match db.table(table) {
            Ok(_) => return Err(Error::TableExists(table.clone())),
            Err(Error::NoSuchTable(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The catalog table, made if `make` and missing (`None` if missing and not `make`).
fn catalog(db: &Db, make: bool) -> Result<Option<TableId>> {
    match db.table(CATALOG) {
        Err(Error::NoSuchTable(_)) if make => match db.create_table(CATALOG) {
            // Made meanwhile by another creator.
            Err(Error::TableExists(_)) => db.table(CATALOG).map(Some),
            made => made.map(Some),
        },
        Err(Error::NoSuchTable(_)) => Ok(None),
        found => found.map(Some),
    }
}

/// Makes the cTable `def` describes (see the module docs), or finishes an interrupted
/// creation of the same definition; returns it with the ids of its tables, in order.
pub fn create(db: &Db, def: CTableInfo) -> Result<(CTableInfo, Vec<TableId>)> {
    if let Some(catalog) = catalog(db, false)? {
        if let Some(bytes) = db.get(catalog, def.name.as_bytes())? {
            return resume(db, catalog, def, &bytes);
        }
    }
    check_free(db, &def)?;
    let Some(catalog) = catalog(db, true)? else {
        return Err(Error::NoSuchTable(CATALOG.to_string()));
    };
    let mut tries = 0;
    loop {
        let mut txn = db.begin(Isolation::Snapshot)?;
        if let Some(bytes) = txn.get_for_update(catalog, def.name.as_bytes())? {
            drop(txn);
            return resume(db, catalog, def, &bytes);
        }
        // Checked again now that the name is ours to take: a table made since the first
        // check is refused before the record promises it.
        check_free(db, &def)?;
        txn.put(catalog, def.name.as_bytes(), encode(&def))?;
        match txn.commit_with(Durability::Sync) {
            Ok(()) => return finish(db, catalog, def),
            // Another creator wrote the record meanwhile: read it.
            Err(Error::Conflict { .. }) if tries + 1 < TRIES => tries += 1,
            Err(e) => return Err(e),
        }
    }
}

/// Creating `def` when the catalog has a record of its name: an interrupted creation of the
/// same definition is finished (a retry after a crash); anything else is a name in use.
fn resume(
    db: &Db,
    catalog: TableId,
    def: CTableInfo,
    bytes: &[u8],
) -> Result<(CTableInfo, Vec<TableId>)> {
    let found = decode(&def.name, bytes)?;
    let same = found.kind == def.kind && found.columns == def.columns && found.tables == def.tables;
    if found.finished || !same {
        return Err(Error::CTableExists(def.name));
    }
    finish(db, catalog, found)
}

/// The cTable called `name`, finished first if its creation was interrupted.
pub fn open(db: &Db, name: &str) -> Result<(CTableInfo, Vec<TableId>)> {
    let missing = || Error::NoSuchCTable(name.to_string());
    let catalog = catalog(db, false)?.ok_or_else(missing)?;
    let bytes = db.get(catalog, name.as_bytes())?.ok_or_else(missing)?;
    finish(db, catalog, decode(name, &bytes)?)
}

/// Every cTable, by name, finished or not (nothing is made or finished).
pub fn list(db: &Db) -> Result<Vec<CTableInfo>> {
    let Some(catalog) = catalog(db, false)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for pair in db.scan_prefix(catalog, b"")? {
        let (key, bytes) = pair?;
        let name = String::from_utf8(key).map_err(|e| Error::Corrupt {
            what: "column table schema",
            place: format!("table {CATALOG:?}"),
            detail: format!("a key that is not UTF-8: {:?}", e.as_bytes()),
        })?;
        out.push(decode(&name, &bytes)?);
    }
    Ok(out)
}

/// Makes whichever of `info`'s tables are missing, checks that each has its layout, and
/// marks the record finished (a finished cTable's tables all exist: nothing is made).
fn finish(db: &Db, catalog: TableId, mut info: CTableInfo) -> Result<(CTableInfo, Vec<TableId>)> {
    let mut ids = Vec::with_capacity(info.tables.len());
    for (table, layout) in &info.tables {
        let id = match db.table(table) {
            Err(Error::NoSuchTable(_)) if !info.finished => {
                match db.create_table_with_layout(table, layout) {
                    // Made meanwhile by another opener finishing the same cTable.
                    Err(Error::TableExists(_)) => db.table(table)?,
                    made => made?,
                }
            }
            Err(Error::NoSuchTable(_)) => {
                return Err(Error::Corrupt {
                    what: "column table schema",
                    place: format!("table {CATALOG:?} key {:?}", info.name),
                    detail: format!("finished, but its table {table:?} does not exist"),
                })
            }
            found => found?,
        };
        let has = db.table_layout(id)?;
        if has != *layout {
            return Err(Error::BadColumns(format!(
                "column table {:?} cannot be finished: table {table:?} exists with layout \
                 {has}, not {layout}",
                info.name
            )));
        }
        ids.push(id);
    }
    if !info.finished {
        mark_finished(db, catalog, &info)?;
        info.finished = true;
    }
    Ok((info, ids))
}

/// Rewrites `info`'s record as finished, unless another opener did.
fn mark_finished(db: &Db, catalog: TableId, info: &CTableInfo) -> Result<()> {
    let mut tries = 0;
    loop {
        let mut txn = db.begin(Isolation::Snapshot)?;
        let now = txn.get_for_update(catalog, info.name.as_bytes())?;
        let now = now.map(|bytes| decode(&info.name, &bytes)).transpose()?;
        if now.is_some_and(|now| now.finished) {
            return Ok(());
        }
        let done = CTableInfo {
            finished: true,
            ..info.clone()
        };
        txn.put(catalog, info.name.as_bytes(), encode(&done))?;
        match txn.commit_with(Durability::Sync) {
            // Another opener finishing it meanwhile: read what it wrote.
            Err(Error::Conflict { .. }) if tries + 1 < TRIES => tries += 1,
            done => return done,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_and_damage_is_an_error() {
        let def = define(
            "t",
            CTableKind::Column,
            &["a", "b"],
            &["", "managed -> btree -> fixed(8)"],
        )
        .unwrap();
        let bytes = encode(&def);
        assert_eq!(decode("t", &bytes).unwrap(), def);
        for cut in 0..bytes.len() {
            assert!(decode("t", &bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(decode("t", &long).is_err());
        for (at, bad) in [(0, 2), (1, 2), (2, 2)] {
            let mut b = bytes.clone();
            b[at] = bad;
            assert!(decode("t", &b).is_err(), "byte {at} = {bad}");
        }
    }

    #[test]
    fn tables_of_distinct_ctables_never_share_a_name() {
        let row = table_names("a:b", CTableKind::Row, &["x"]);
        let col = table_names("a", CTableKind::Column, &["b", "rows"]);
        assert_eq!(row, vec!["a:b:rows"]);
        assert_eq!(col, vec!["a:b", "a:rows"]);
        assert!(define("a", CTableKind::Column, &["b:rows"], &[""]).is_err());
    }

    proptest::proptest! {
        /// Any bytes decode to a schema or an error, never a panic.
        #[test]
        fn any_bytes_are_a_schema_or_an_error(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
        ) {
            let _ = decode("t", &bytes);
            // Past the version, state and kind bytes.
            for head in [[1, 0, 0], [1, 1, 1]] {
                let _ = decode("t", &[&head[..], &bytes[..]].concat());
            }
        }
    }
}
