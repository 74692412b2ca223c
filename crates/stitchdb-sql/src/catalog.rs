//! The catalog: one StitchDB table (`sql.schema`) holding each SQL table's schema, keyed by
//! the SQL table's name.
//!
//! An entry is a JSON object (readable with any JSON tool, and extended without breaking
//! older readers' fields):
//!
//! ```json
//! {"version": 1, "table": "sql.t.orders", "ddl": "CREATE TABLE \"orders\" (...)",
//!  "schema": { ...gluesql-core's serde form of its Schema... }}
//! ```
//!
//! `version` is the format of the entry and of the table's keys and rows (`codec`);
//! `table` the StitchDB table holding the rows; `schema` what GlueSQL works from, and `ddl`
//! the same schema as SQL (`Schema::to_ddl`), read instead of `schema` should a later
//! gluesql-core's serde form of `Schema` no longer read this one.

use crate::codec::key_type_supported;
use gluesql_core::ast::{ColumnDef, ColumnUniqueOption, DataType};
use gluesql_core::data::Schema;
use serde::{Deserialize, Serialize};
use stitchdb::TableId;

/// The StitchDB table of the catalog.
pub const CATALOG_TABLE: &str = "sql.schema";

/// The prefix of the StitchDB tables holding SQL tables' rows.
pub const TABLE_PREFIX: &str = "sql.t.";

/// The version of the catalog entry, key and row formats this crate writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// A catalog entry as stored.
#[derive(Serialize, Deserialize)]
struct Stored {
    version: u32,
    table: String,
    ddl: String,
    schema: serde_json::Value,
}

/// A SQL table, as the catalog describes it.
#[derive(Debug)]
pub struct TableEntry {
    /// The entry's bytes (to tell whether a cached entry is still the stored one).
    pub raw: Vec<u8>,
    /// GlueSQL's schema.
    pub schema: Schema,
    /// The StitchDB table of the rows.
    pub table: TableId,
    /// The name of that table.
    pub table_name: String,
    /// The primary key: its column's position and type (`None`: the table has none, and
    /// its rows are keyed by generated row numbers).
    pub primary_key: Option<(usize, DataType)>,
}

/// The StitchDB table name of SQL table `name`.
pub fn table_name_of(name: &str) -> String {
    format!("{TABLE_PREFIX}{name}")
}

/// The primary key column of `schema`, if it has one.
pub fn primary_key(schema: &Schema) -> Option<(usize, &ColumnDef)> {
    schema
        .column_defs
        .as_ref()?
        .iter()
        .enumerate()
        .find(|(_, c)| matches!(c.unique, Some(ColumnUniqueOption { is_primary: true })))
}

/// Checks that `schema` can be stored: its primary key's type has a key encoding.
pub fn check_schema(schema: &Schema) -> Result<(), String> {
    if let Some((_, column)) = primary_key(schema) {
        if !key_type_supported(&column.data_type) {
            return Err(format!(
                "table {}: a {} column ({}) cannot be a primary key",
                schema.table_name, column.data_type, column.name
            ));
        }
    }
    Ok(())
}

/// The entry's bytes for `schema`, its rows in StitchDB table `table`.
pub fn encode_entry(schema: &Schema, table: &str) -> Result<Vec<u8>, String> {
    let stored = Stored {
        version: FORMAT_VERSION,
        table: table.to_owned(),
        ddl: schema.to_ddl(),
        schema: serde_json::to_value(schema).map_err(|e| e.to_string())?,
    };
    serde_json::to_vec(&stored).map_err(|e| e.to_string())
}

/// Reads an entry; `resolve` gives the StitchDB table of a table name.
pub fn decode_entry(
    raw: Vec<u8>,
    resolve: impl FnOnce(&str) -> Result<TableId, String>,
) -> Result<TableEntry, String> {
    let stored: Stored =
        serde_json::from_slice(&raw).map_err(|e| format!("catalog entry is not JSON: {e}"))?;
    if stored.version != FORMAT_VERSION {
        return Err(format!(
            "catalog entry of format version {} (this build reads version {FORMAT_VERSION})",
            stored.version
        ));
    }
    let schema = match serde_json::from_value::<Schema>(stored.schema) {
        Ok(schema) => schema,
        Err(_) => Schema::from_ddl(&stored.ddl).map_err(|e| format!("catalog DDL: {e}"))?,
    };
    let table = resolve(&stored.table)?;
    let primary_key = primary_key(&schema).map(|(i, c)| (i, c.data_type.clone()));
    Ok(TableEntry {
        raw,
        schema,
        table,
        table_name: stored.table,
        primary_key,
    })
}
