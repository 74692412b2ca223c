//! One interface over the two SQL engines: GlueSQL over StitchDB (`stitchdb_sql::Session`)
//! and SQLite (`rusqlite`). Both get the same SQL text; placeholders are written `$1`, `$2`,
//! ... (GlueSQL's form) and become `?1`, `?2`, ... for SQLite.

use rusqlite::types::{ToSqlOutput, Value as SqliteValue, ValueRef};
use rusqlite::ToSql;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use stitchdb::{Db, Durability, Options};
use stitchdb_sql::gluesql_core::data::Value as GlueValue;
use stitchdb_sql::gluesql_core::prelude::Payload;
use stitchdb_sql::gluesql_core::translate::{IntoParamLiteral, ParamLiteral};
use stitchdb_sql::{Session, StitchStorage};

pub type Result<T> = std::result::Result<T, String>;

/// A parameter or a column value.
#[derive(Debug, Clone, PartialEq)]
pub enum V {
    I(i64),
    F(f64),
    T(String),
    Null,
}

impl V {
    pub fn int(&self) -> Result<i64> {
        match self {
            V::I(n) => Ok(*n),
            other => Err(format!("expected an integer, got {other:?}")),
        }
    }
    pub fn float(&self) -> Result<f64> {
        match self {
            V::F(f) => Ok(*f),
            V::I(n) => Ok(*n as f64),
            other => Err(format!("expected a float, got {other:?}")),
        }
    }
    pub fn text(&self) -> Result<&str> {
        match self {
            V::T(s) => Ok(s),
            other => Err(format!("expected text, got {other:?}")),
        }
    }
}

/// A SQL connection.
pub trait Client {
    /// Runs one statement; rows changed (0 for others).
    fn exec(&mut self, sql: &str, params: &[V]) -> Result<usize>;
    /// The first row of a query, if any.
    fn row(&mut self, sql: &str, params: &[V]) -> Result<Option<Vec<V>>>;
    /// Runs statements without parameters (the load's).
    fn batch(&mut self, sql: &str) -> Result<()>;
    /// Closes the store (so its size on disk is final).
    fn close(self: Box<Self>) -> Result<()>;
    /// Rows the SQL engine read by scanning whole tables, where it counts them.
    fn rows_scanned(&self) -> Option<u64> {
        None
    }
    /// What the store holds, where it can tell (after writing everything out).
    fn report(&mut self) -> Result<Option<String>> {
        Ok(None)
    }
}

/// GlueSQL over StitchDB.
pub struct Glue {
    session: Session,
}

impl Glue {
    /// A new store in `dir`: default options (4 MiB memtables, 64 MiB of cached run
    /// blocks, 1% filters); commits `Durability::Sync` (`Written` without `sync`).
    /// `layouts`: StitchDB layouts of SQL tables; `pushdown`: whether primary-key UPDATEs
    /// read only their row; `parse_cache`: whether statement texts are parsed once.
    pub fn create(
        dir: &Path,
        layouts: &[(&str, String)],
        pushdown: bool,
        parse_cache: bool,
        sync: bool,
    ) -> Result<Glue> {
        let db = Db::create(dir.join("stitchdb.store"), Options::default()).map_err(err)?;
        let durability = if sync {
            Durability::Sync
        } else {
            Durability::Written
        };
        let mut storage = StitchStorage::new(Arc::new(db))
            .map_err(err)?
            .with_durability(durability);
        for (table, layout) in layouts {
            storage.set_layout(table, layout);
        }
        let mut session = Session::new(storage);
        session.set_pushdown(pushdown);
        session.set_parse_cache(parse_cache);
        Ok(Glue { session })
    }
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn glue_params(params: &[V]) -> Vec<ParamLiteral> {
    params
        .iter()
        .map(|p| match p {
            V::I(n) => n.into_param_literal(),
            V::F(f) => f.into_param_literal(),
            V::T(s) => s.as_str().into_param_literal(),
            V::Null => None::<i64>.into_param_literal(),
        })
        .collect()
}

fn from_glue(v: GlueValue) -> Result<V> {
    Ok(match v {
        GlueValue::I64(n) => V::I(n),
        GlueValue::F64(f) => V::F(f),
        GlueValue::Str(s) => V::T(s),
        GlueValue::Null => V::Null,
        other => return Err(format!("unexpected value {other:?}")),
    })
}

impl Client for Glue {
    fn exec(&mut self, sql: &str, params: &[V]) -> Result<usize> {
        let mut out = self
            .session
            .execute_with_params(sql, glue_params(params))
            .map_err(|e| format!("{sql}: {e}"))?;
        Ok(match out.pop() {
            Some(Payload::Insert(n) | Payload::Update(n) | Payload::Delete(n)) => n,
            _ => 0,
        })
    }

    fn row(&mut self, sql: &str, params: &[V]) -> Result<Option<Vec<V>>> {
        let out = self
            .session
            .execute_with_params(sql, glue_params(params))
            .map_err(|e| format!("{sql}: {e}"))?;
        match out.into_iter().next() {
            Some(Payload::Select { rows, .. }) => match rows.into_iter().next() {
                Some(row) => Ok(Some(row.into_iter().map(from_glue).collect::<Result<_>>()?)),
                None => Ok(None),
            },
            other => Err(format!("{sql}: not a query: {other:?}")),
        }
    }

    fn batch(&mut self, sql: &str) -> Result<()> {
        self.session.execute(sql).map_err(err)?;
        Ok(())
    }

    fn rows_scanned(&self) -> Option<u64> {
        Some(self.session.storage().rows_scanned())
    }

    fn report(&mut self) -> Result<Option<String>> {
        let db = self.session.storage().db();
        db.flush().map_err(err)?;
        let stats = db.stats();
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        let mut tables = Vec::new();
        for t in &stats.tables {
            if let Some(name) = t.name.strip_prefix(stitchdb_sql::TABLE_PREFIX) {
                tables.push(format!("{name} {:.2}", mib(t.run_bytes)));
            }
        }
        Ok(Some(format!(
            "live extents {:.1} MiB, {} free zones of {} MiB kept for reuse; run bytes (MiB) \
             by table: {}; since the store was created: {} checkpoints, {} merges ({:.1} MiB \
             copied, {:.1} MiB stitched), {:.1} MiB flushed; writers held back {:.2} s",
            mib(stats.zones.live_bytes),
            stats.zones.recycled_zones,
            stats.zones.zone_size >> 20,
            tables.join(", "),
            stats.checkpoints,
            stats.merges,
            mib(stats.merge_copied_bytes),
            mib(stats.merge_stitched_bytes),
            mib(stats.flushed_bytes),
            (stats.stalls.backlog + stats.stalls.paced).as_secs_f64()
        )))
    }

    fn close(self: Box<Self>) -> Result<()> {
        let db = self.session.into_storage().db().clone();
        Arc::try_unwrap(db)
            .map_err(|_| "store still shared".to_owned())?
            .close()
            .map_err(err)
    }
}

/// SQLite in WAL mode with `synchronous=FULL` (each commit durable when it returns; `NORMAL`
/// without `sync`), a 64 MiB page cache.
pub struct Sqlite {
    conn: rusqlite::Connection,
}

impl Sqlite {
    pub fn create(dir: &Path, sync: bool) -> Result<Sqlite> {
        let path: PathBuf = dir.join("sqlite.db");
        let conn = rusqlite::Connection::open(path).map_err(err)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(err)?;
        let synchronous = if sync { "FULL" } else { "NORMAL" };
        conn.pragma_update(None, "synchronous", synchronous)
            .map_err(err)?;
        conn.pragma_update(None, "cache_size", -65536)
            .map_err(err)?;
        conn.set_prepared_statement_cache_capacity(64);
        Ok(Sqlite { conn })
    }
}

impl ToSql for V {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            V::I(n) => ToSqlOutput::Owned(SqliteValue::Integer(*n)),
            V::F(f) => ToSqlOutput::Owned(SqliteValue::Real(*f)),
            V::T(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
            V::Null => ToSqlOutput::Owned(SqliteValue::Null),
        })
    }
}

/// `$n` placeholders as SQLite's `?n`.
fn sqlite_sql(sql: &str) -> String {
    sql.replace('$', "?")
}

impl Client for Sqlite {
    fn exec(&mut self, sql: &str, params: &[V]) -> Result<usize> {
        let mut stmt = self.conn.prepare_cached(&sqlite_sql(sql)).map_err(err)?;
        stmt.execute(rusqlite::params_from_iter(params.iter()))
            .map_err(|e| format!("{sql}: {e}"))
    }

    fn row(&mut self, sql: &str, params: &[V]) -> Result<Option<Vec<V>>> {
        let mut stmt = self.conn.prepare_cached(&sqlite_sql(sql)).map_err(err)?;
        let n = stmt.column_count();
        let mut rows = stmt
            .query(rusqlite::params_from_iter(params.iter()))
            .map_err(err)?;
        let Some(row) = rows.next().map_err(err)? else {
            return Ok(None);
        };
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            out.push(match row.get_ref(i).map_err(err)? {
                ValueRef::Integer(n) => V::I(n),
                ValueRef::Real(f) => V::F(f),
                ValueRef::Text(t) => V::T(String::from_utf8_lossy(t).into_owned()),
                ValueRef::Null => V::Null,
                ValueRef::Blob(_) => return Err("unexpected blob".to_owned()),
            });
        }
        Ok(Some(out))
    }

    fn batch(&mut self, sql: &str) -> Result<()> {
        self.conn.execute_batch(sql).map_err(err)
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.conn.close().map_err(|(_, e)| err(e))
    }
}
