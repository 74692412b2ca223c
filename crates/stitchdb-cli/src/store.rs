//! Opening stores and naming tables the way every command does.

use crate::error::{CliError, CliResult, Exit};
use crate::format::tsv;
use std::ffi::OsString;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use stitchdb::{Db, DbIter, Options, Snapshot, TableId};
use stitchdb_host::OpenOptions;

/// The options every command opens an existing store with: the host's (`stitchdb_host`), which
/// wait as a mount does for another process to let go of the store, which a mount's daemon
/// holds for a moment after `umount` returns (so `umount DIR && stitchdb check STORE` finds it
/// free).
pub fn options() -> Options {
    OpenOptions::default().engine_options()
}

/// Opens an existing store for writing, as a mount or a server does: the errors for a
/// missing store or one in use say what to do.
pub fn open(path: &Path) -> CliResult<Db> {
    Ok(stitchdb_host::open(path, &OpenOptions::default())?)
}

/// Opens an existing store for reading only: nothing is written, not even recovery.
pub fn open_read_only(path: &Path) -> CliResult<Db> {
    let how = OpenOptions {
        read_only: true,
        ..OpenOptions::default()
    };
    Ok(stitchdb_host::open(path, &how)?)
}

/// The STORE argument every command takes first.
#[derive(clap::Args)]
pub struct StoreArg {
    /// Path of the store file or block device
    #[arg(value_name = "STORE")]
    pub path: PathBuf,
}

/// `--snapshot NAME`, which commands that read pairs share.
#[derive(clap::Args)]
pub struct SnapshotArg {
    /// Read the named snapshot instead of the store's current state (see `stitchdb snapshot
    /// list`)
    #[arg(long = "snapshot", value_name = "NAME")]
    snapshot: Option<String>,
}

/// What a read command reads: the store as it is, or one of its named snapshots.
pub enum Source {
    Live(Db),
    Snapshot(Db, Snapshot),
}

impl Source {
    /// Opens the store at `path` read-only, and the snapshot `snapshot` names, if any.
    pub fn open(path: &Path, snapshot: &SnapshotArg) -> CliResult<Source> {
        let db = open_read_only(path)?;
        match &snapshot.snapshot {
            None => Ok(Source::Live(db)),
            Some(name) => {
                let snap = db.open_snapshot(name).map_err(|e| match e {
                    stitchdb::Error::NoSuchSnapshot(_) => CliError::with_exit(
                        Exit::Missing,
                        format!("{e} (see `stitchdb snapshot list`)"),
                    ),
                    other => other.into(),
                })?;
                Ok(Source::Snapshot(db, snap))
            }
        }
    }

    pub fn get(&self, table: TableId, key: &[u8]) -> stitchdb::Result<Option<Vec<u8>>> {
        match self {
            Source::Live(db) => db.get(table, key),
            Source::Snapshot(_, snap) => snap.get(table, key),
        }
    }

    pub fn get_range(
        &self,
        table: TableId,
        key: &[u8],
        offset: u64,
        len: u64,
    ) -> stitchdb::Result<Option<Vec<u8>>> {
        match self {
            Source::Live(db) => db.get_range(table, key, offset, len),
            Source::Snapshot(_, snap) => snap.get_range(table, key, offset, len),
        }
    }

    pub fn range(
        &self,
        table: TableId,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
    ) -> stitchdb::Result<DbIter> {
        match self {
            Source::Live(db) => db.range(table, start, end),
            Source::Snapshot(_, snap) => snap.range(table, start, end),
        }
    }
}

/// `--table T`, which commands that read or write pairs share.
#[derive(clap::Args)]
pub struct TableArg {
    /// The table to use (it must exist) [default: the default table]
    #[arg(long = "table", value_name = "T")]
    name: Option<String>,
}

impl TableArg {
    /// The table named, or the default table.
    pub fn resolve(&self, db: &Db) -> CliResult<TableId> {
        match &self.name {
            None => Ok(db.default_table()),
            Some(name) => Self::found(db.table(name)),
        }
    }

    /// [`resolve`](Self::resolve) in what `source` reads.
    pub fn resolve_in(&self, source: &Source) -> CliResult<TableId> {
        match (source, &self.name) {
            (Source::Live(db), _) => self.resolve(db),
            (Source::Snapshot(db, _), None) => Ok(db.default_table()),
            (Source::Snapshot(_, snap), Some(name)) => Self::found(snap.table(name)),
        }
    }

    fn found(table: stitchdb::Result<TableId>) -> CliResult<TableId> {
        table.map_err(|e| match e {
            stitchdb::Error::NoSuchTable(_) => CliError::with_exit(
                Exit::Missing,
                format!("{e} (see `stitchdb tables` and `stitchdb create-table`)"),
            ),
            other => other.into(),
        })
    }
}

impl std::fmt::Display for TableArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.name {
            Some(name) => write!(f, "table {name:?}"),
            None => f.write_str("the default table"),
        }
    }
}

/// `--escaped`, which commands taking keys, values or key bounds on the command line share.
#[derive(clap::Args)]
pub struct EscapedArg {
    /// Read keys, values and key bounds given on the command line with the TSV escapes
    /// (\\ \t \n \r \xHH), so they can hold any byte, NUL included; `get` prints the value
    /// escaped too. Without it they are the argument's bytes as they are
    #[arg(long)]
    escaped: bool,
}

impl EscapedArg {
    /// The bytes `arg` stands for: on Unix, exactly the bytes the shell passed (any but NUL,
    /// which no argument can hold), or with `--escaped` those bytes unescaped. `what` names the
    /// argument in the error for a bad escape.
    pub fn bytes(&self, what: &str, arg: OsString) -> CliResult<Vec<u8>> {
        let raw = arg.into_encoded_bytes();
        if !self.escaped {
            return Ok(raw);
        }
        tsv::unescape(&raw).map_err(|e| CliError::usage(format!("{what}: {e}")))
    }

    /// Whether `--escaped` was given.
    pub fn given(&self) -> bool {
        self.escaped
    }
}
