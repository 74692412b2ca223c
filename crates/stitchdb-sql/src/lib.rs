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
//! A catalog table `sql.schema` (one JSON entry per SQL table: format version, the StitchDB
//! table holding its rows, its DDL and gluesql-core's serde form of its schema), and one
//! StitchDB table `sql.t.NAME` per SQL table: keys encoded so that byte order is key order,
//! rows with fixed-width numbers (so rows of one shape are one size, as the `fixed` and
//! `array` layouts need). Specified in `docs/format.md` ("SQL tables"); why an encoding of
//! our own: gluesql-core's `Key::to_cmp_be_bytes` cannot be decoded back, does not keep
//! `DECIMAL` order and refuses floats, and serde formats either are unmaintained (bincode 1),
//! not stable for `Value`, or size integers by value (postcard).
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
