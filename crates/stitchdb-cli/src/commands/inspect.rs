//! `check` and `stats`: look at a store without changing it.

use crate::error::{CliError, CliResult, Exit};
use crate::output;
use crate::store::{self, StoreArg};
use stitchdb::{CheckReport, Db};

/// Verifies every checksum and structure, reporting every damaged structure (both superblock
/// slots, the manifest, each run's index, filter and blocks, the log, a cut file) with its
/// place, one per line, and the key ranges the damage put out of reach; exit status 4
/// ([`Exit::Corrupt`]) if anything is damaged. Works on a store that no longer opens.
/// A sound store holding a file system (`stitchdb mount`) also has the file system's
/// invariants checked: link counts, reachability, names against directory entries, data
/// within sizes; each problem is named, and any makes the exit status 4 too.
pub fn check(args: StoreArg) -> CliResult {
    let found = Db::check_store(&args.path, store::options())?;
    if !found.is_ok() {
        for damage in &found.damage {
            output::print(format_args!("{damage}\n"))?;
        }
        for lost in &found.lost {
            output::print(format_args!("lost: {lost}\n"))?;
        }
        return Err(CliError::with_exit(
            Exit::Corrupt,
            format!(
                "{} found damaged in {} ({}); `stitchdb repair` salvages what is readable",
                plural(found.damage.len(), "structure"),
                args.path.display(),
                describe(&found.report)
            ),
        ));
    }
    output::print(format_args!("ok: {}\n", describe(&found.report)))?;
    check_file_system(&args)
}

/// The file system's invariants, if the store holds one.
fn check_file_system(args: &StoreArg) -> CliResult {
    let db = store::open_read_only(&args.path)?;
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
        output::print(format_args!("file system: {p}\n"))?;
    }
    Err(CliError::with_exit(
        Exit::Corrupt,
        format!(
            "the file system in {} has {} (listed above)",
            args.path.display(),
            plural(fs.problems.len(), "problem")
        ),
    ))
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
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
