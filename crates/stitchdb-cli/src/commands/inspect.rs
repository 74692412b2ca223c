//! `check` and `stats`: look at a store without changing it.

use crate::error::{CliError, CliResult, Exit};
use crate::output;
use crate::store::{self, StoreArg};
use stitchdb::{CheckReport, Db, Options};

/// Verifies every checksum and structure, reporting every damaged structure (both superblock
/// slots, the manifest, each run's index, filter and blocks, the log, a cut file) with its
/// place, one per line, and the key ranges the damage put out of reach; exit status 4
/// ([`Exit::Corrupt`]) if anything is damaged. Works on a store that no longer opens.
pub fn check(args: StoreArg) -> CliResult {
    let found = Db::check_store(&args.path, Options::default())?;
    if found.is_ok() {
        return output::print(format_args!("ok: {}\n", describe(&found.report)));
    }
    for damage in &found.damage {
        output::print(format_args!("{damage}\n"))?;
    }
    for lost in &found.lost {
        output::print(format_args!("lost: {lost}\n"))?;
    }
    Err(CliError::with_exit(
        Exit::Corrupt,
        format!(
            "{} found damaged in {} ({}); `stitchdb repair` salvages what is readable",
            plural(found.damage.len(), "structure"),
            args.path.display(),
            describe(&found.report)
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
