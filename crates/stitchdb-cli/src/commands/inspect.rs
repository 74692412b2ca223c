//! `check` and `stats`: look at a store without changing it.

use crate::error::{CliError, CliResult};
use crate::output;
use crate::store::{self, StoreArg};
use stitchdb::CheckReport;

/// Verifies every checksum and structure. Damage found while opening (superblock, manifest,
/// run indexes, log) or while checking (data blocks, extent overlaps) ends with the library's
/// error, which names the structure and where it is.
/// A store holding a file system (`stitchdb mount`) also has its invariants checked: link
/// counts, reachability, names against dirents, data within sizes; each problem is named.
pub fn check(args: StoreArg) -> CliResult {
    let db = store::open_read_only(&args.path)?;
    let report = db.check()?;
    output::print(format_args!("ok: {}\n", describe(&report)))?;
    let fs_tables = stitchdb_fs::Tables::find(&db).map_err(|e| CliError::new(e.to_string()))?;
    let Some(tables) = fs_tables else {
        return Ok(());
    };
    let fs = stitchdb_fs::check_fs(&db, &tables).map_err(|e| CliError::new(e.to_string()))?;
    if fs.problems.is_empty() {
        return output::print(format_args!(
            "ok: file system: {} inodes, {} names, {} data blocks ({} bytes), {} orphans\n",
            fs.inodes, fs.names, fs.blocks, fs.data_bytes, fs.orphans
        ));
    }
    for p in &fs.problems {
        eprintln!("file system: {p}");
    }
    Err(CliError::new(format!(
        "the file system has {} problems (listed above)",
        fs.problems.len()
    )))
}

pub fn describe(r: &CheckReport) -> String {
    format!(
        "{} tables, {} runs, {} blocks, {} entries, {} extents verified",
        r.tables, r.runs, r.blocks, r.entries, r.extents
    )
}

pub fn stats(args: StoreArg) -> CliResult {
    let db = store::open_read_only(&args.path)?;
    output::print(db.stats())
}
