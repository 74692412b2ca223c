//! Opening stores and naming tables the way every command does.

use crate::error::{CliError, CliResult};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use stitchdb::{Db, Options, TableId};

/// Opens an existing store for writing. The library's errors (missing file, "locked" when
/// another process has it open) already name the store, so they are shown as they are.
pub fn open(path: &Path) -> CliResult<Db> {
    Ok(Db::open(path, Options::default())?)
}

/// Opens an existing store for reading only: nothing is written, not even recovery.
pub fn open_read_only(path: &Path) -> CliResult<Db> {
    Ok(Db::open_read_only(path, Options::default())?)
}

/// The STORE argument every command takes first.
#[derive(clap::Args)]
pub struct StoreArg {
    /// Path of the store file or block device
    #[arg(value_name = "STORE")]
    pub path: PathBuf,
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
        let Some(name) = &self.name else {
            return Ok(db.default_table());
        };
        db.table(name).map_err(|e| match e {
            stitchdb::Error::NoSuchTable(_) => CliError::new(format!(
                "{e} (see `stitchdb tables` and `stitchdb create-table`)"
            )),
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

/// A key, value or prefix from the command line, as bytes. On Unix these are exactly the
/// bytes the shell passed, so any key can be named (e.g. bash's `$'\x01'`).
pub fn arg_bytes(arg: OsString) -> Vec<u8> {
    arg.into_encoded_bytes()
}
