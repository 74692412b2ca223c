//! GlueSQL storage over StitchDB tables: SQL (GlueSQL 0.20's parser, planner and executor)
//! with StitchDB holding the tables, transactions and durability.
//!
//! ```no_run
//! use std::sync::Arc;
//! use stitchdb_sql::{Session, StitchStorage};
//! let db = Arc::new(stitchdb::Db::create("/tmp/sql.store", stitchdb::Options::default())?);
//! let mut sql = Session::new(StitchStorage::new(db)?);
//! sql.execute("CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT, price FLOAT)")?;
//! sql.execute("BEGIN; INSERT INTO item VALUES (1, 'pen', 1.5), (2, 'ink', 4.0); COMMIT;")?;
//! let rows = sql.execute_with_params("SELECT name FROM item WHERE id = $1", [2])?;
//! println!("{rows:?}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`StitchStorage`] implements GlueSQL's storage traits (`Store`, `StoreMut`,
//! `Transaction`, and the optional ones with GlueSQL's defaults: no secondary indexes, no
//! custom functions; `ALTER TABLE` through GlueSQL's generic implementation). [`Session`]
//! wraps GlueSQL's `Glue`: it narrows `UPDATE`/`DELETE ... WHERE pk = constant` to one row
//! (GlueSQL alone scans the whole table for them), and parses each statement text once
//! (GlueSQL has no prepared statements; its parse is most of a short statement's time).
//!
//! # Transactions
//!
//! `BEGIN` opens one StitchDB transaction (snapshot isolation) that every statement up to
//! `COMMIT` or `ROLLBACK` reads and writes through; `COMMIT` commits it with
//! `Durability::Sync` (durable when it returns), `ROLLBACK` drops it. A statement outside
//! `BEGIN` runs in a transaction of its own, committed (durably) when it succeeds and
//! dropped when it fails. Two sessions writing the same row concurrently: the later commit
//! fails (`transaction conflict ... retry the transaction`). A failed statement inside
//! `BEGIN` leaves the transaction open with whatever the statement wrote before failing
//! (GlueSQL has no statement savepoints); `ROLLBACK` drops it all. Creating a table creates
//! its StitchDB table at once, outside the transaction (StitchDB's DDL is not
//! transactional): a rolled-back `CREATE TABLE` leaves an empty StitchDB table that a later
//! table of that name uses; `DROP TABLE` deletes the rows and the catalog entry in the
//! transaction and leaves the StitchDB table, empty.
//!
//! # Stored format (version 1)
//!
//! * **Catalog**: StitchDB table `sql.schema`, key = the SQL table's name (UTF-8), value = a
//!   JSON object `{"version": 1, "table": "sql.t.NAME", "ddl": "CREATE TABLE ...",
//!   "schema": {...}}`: the format version (of the entry, keys and rows), the StitchDB table
//!   holding the rows, the schema as SQL (`Schema::to_ddl`), and the schema in
//!   gluesql-core's own serde form (read first; the DDL is the fallback should a later
//!   gluesql-core change that form).
//! * **Rows**: StitchDB table `sql.t.NAME`, one pair per row.
//! * **Keys**: the primary key's value, encoded so that byte order is key order, without a
//!   type tag (the column's type is in the schema): signed integers big-endian with the
//!   sign bit flipped (`INTEGER` is 8 bytes, so such a table's keys suit the `array`
//!   layout); unsigned integers and UUIDs big-endian; floats as their bits, all flipped when
//!   negative, else the sign bit (IEEE total order, -0.0 as 0.0 and one NaN); `DECIMAL` as
//!   its integer part (i128) then its fraction in units of 10^-28 (i128), each sign-flipped
//!   (32 bytes); `TEXT` and `BYTEA` as their bytes; `BOOLEAN` one byte; `DATE` days from
//!   0001-01-01 (i32, sign-flipped); `TIME` seconds from midnight and nanoseconds (u32, u32);
//!   `TIMESTAMP` the date's then the time's; `INET` 4 or 6 then the octets; `INTERVAL` 0 and
//!   microseconds (i64) or 1 and months (i32). gluesql-core's own `Key::to_cmp_be_bytes`
//!   is not used: it cannot be decoded back into a `Key` (no type, signed and unsigned
//!   alike), does not keep `DECIMAL` order (0.5 after 0.25) and refuses floats. A table
//!   without a primary key is keyed by row numbers (u64, big-endian) this storage assigns
//!   in insertion order.
//! * **Row values**: a varint count of values, then each value as a tag byte and a payload:
//!   numbers, dates and times little-endian at fixed widths (so rows of the same types and
//!   string lengths are the same size, which the `fixed` and `array` layouts need), `TEXT`
//!   and `BYTEA` a varint length then the bytes, `DECIMAL` rust_decimal's 16-byte form,
//!   `MAP` and `LIST` a varint count then their entries (a map's keys as length-prefixed
//!   text). An encoding of our own rather than a serde format: serde's data model of
//!   gluesql-core's `Value` is not a stable format of its own, bincode 1 is no longer
//!   maintained, and postcard writes integers as varints (rows change size with their
//!   numbers).
//!
//! # Layouts
//!
//! Each SQL table's StitchDB table may get a layout (`docs/layouts.md`) before it is
//! created: [`StitchStorage::set_layout`]. A row is one StitchDB value, so the specialized
//! formats only help a table whose encoded rows all have one size (`fixed`), and keyed by
//! 8-byte integers too (`array`); with `exception -> ... -> linear` rows of other sizes
//! still fit.
//!
//! # Interior layers
//!
//! Bottom up; a module imports only from modules before it:
//!
//! 1. `codec`: key and row encodings.
//! 2. `catalog`: catalog entries.
//! 3. `storage`: [`StitchStorage`], GlueSQL's storage traits.
//! 4. `session`: [`Session`], GlueSQL's `Glue` with primary-key `UPDATE`/`DELETE` and
//!    parsed statements kept.

mod catalog;
mod codec;
mod session;
mod storage;

pub use catalog::{CATALOG_TABLE, FORMAT_VERSION, TABLE_PREFIX};
pub use gluesql_core;
pub use session::Session;
pub use storage::StitchStorage;

/// The bytes a row of `values` takes as a StitchDB value: what a `fixed(size)` or
/// `array(size)` layout for its table must name.
pub fn row_len(values: &[gluesql_core::data::Value]) -> usize {
    codec::encode_row(values).len()
}
