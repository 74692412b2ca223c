//! `check` and `stats`: look at a store without changing it.

use crate::error::CliResult;
use crate::output;
use crate::store::{self, StoreArg};
use stitchdb::CheckReport;

/// Verifies every checksum and structure. Damage found while opening (superblock, manifest,
/// run indexes, log) or while checking (data blocks, extent overlaps) ends with the library's
/// error, which names the structure and where it is.
pub fn check(args: StoreArg) -> CliResult {
    let db = store::open_read_only(&args.path)?;
    let report = db.check()?;
    output::print(format_args!("ok: {}\n", describe(&report)))
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
