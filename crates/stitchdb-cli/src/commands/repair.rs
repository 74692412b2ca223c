//! `repair`: salvage everything readable of a damaged store into a new one (LevelDB's
//! `RepairDB`), saying what was lost.

use crate::error::{CliError, CliResult};
use crate::output;
use crate::store::{self, StoreArg};
use stitchdb::Db;

/// Repairs STORE in place: the salvaged store replaces it, the damaged file is kept beside
/// it as `STORE.damaged`. Prints the damage found, the key ranges lost, the keys that may
/// now hold an older version, and what the new store holds.
pub fn run(args: StoreArg) -> CliResult {
    // Its refusals (a kept damaged copy in the way, a file it cannot rename) are failures,
    // not usage errors.
    let report = Db::repair(&args.path, store::options()).map_err(|e| match e {
        stitchdb::Error::Config(message) => CliError::new(message),
        e => CliError::from(e),
    })?;
    if report.damaged_copy.is_none() {
        return output::print("ok: nothing to repair: the store passes check\n");
    }
    for damage in &report.salvage.damage {
        output::print(format_args!("{damage}\n"))?;
    }
    for lost in &report.salvage.lost {
        output::print(format_args!("lost: {lost}\n"))?;
    }
    for (table, key) in &report.possibly_older {
        output::print(format_args!(
            "possibly older: table {table}: key {}\n",
            key.escape_ascii()
        ))?;
    }
    let kept = report.damaged_copy.as_ref().map_or(String::new(), |p| {
        format!("; the damaged store is kept as {}", p.display())
    });
    output::print(format_args!(
        "repaired: {} damaged structures, {} key ranges lost; the store holds {} keys in {} tables and {} snapshots{kept}\n",
        report.salvage.damage.len(),
        report.salvage.lost.len(),
        report.keys,
        report.tables,
        report.snapshots,
    ))
}
