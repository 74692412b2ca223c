//! `compact` and `defrag`: reorganize a store's runs and zones (contents never change).

use crate::error::{CliError, CliResult};
use crate::output;
use crate::progress::Progress;
use crate::store::{self, StoreArg};
use clap::Args;
use std::time::Instant;

/// Merges every table's runs into one, then shows the store's statistics.
pub fn compact(args: StoreArg) -> CliResult {
    let db = store::open(&args.path)?;
    let started = Instant::now();
    let bar = Progress::spinner("merging runs");
    db.compact()?;
    bar.finish();
    let report = format!(
        "compacted in {:.2} s\n{}",
        started.elapsed().as_secs_f64(),
        db.stats()
    );
    // Reported once closing has made it durable, so a failed close is not preceded by a
    // report of success.
    db.close()?;
    output::print(report)
}

#[derive(Args)]
pub struct DefragArgs {
    #[command(flatten)]
    pub store: StoreArg,
    /// Evacuate zones whose live data fills less than this fraction of the zone
    #[arg(long, default_value_t = 0.5)]
    pub max_live: f64,
}

/// Evacuates under-used zones, with a progress bar over the runs rewritten.
pub fn defrag(args: DefragArgs) -> CliResult {
    if !(args.max_live > 0.0 && args.max_live <= 1.0) {
        return Err(CliError::usage(format!(
            "--max-live {} must be in (0, 1]",
            args.max_live
        )));
    }
    let db = store::open(&args.store.path)?;
    let before = db.stats().zones;
    let started = Instant::now();
    let mut bar: Option<Progress> = None;
    let report = db.defrag(args.max_live, |done, total| {
        bar.get_or_insert_with(|| Progress::items(total, "runs rewritten"))
            .set_position(done);
    })?;
    if let Some(bar) = bar {
        bar.finish();
    }
    // Flushing lets the evacuated zones go once no reader holds the old runs.
    db.flush()?;
    let after = db.stats().zones;
    // Reported once closing has made it durable, like `compact`.
    let report = format!(
        "evacuated {} zones: moved {} blocks ({} bytes), rewrote {} runs in {:.2} s\n\
         dead bytes in extent zones: {} -> {}; free zones: {} -> {}\n",
        report.zones.len(),
        report.blocks_moved,
        report.bytes_moved,
        report.runs_rewritten,
        started.elapsed().as_secs_f64(),
        before.dead_bytes,
        after.dead_bytes,
        before.free_zones,
        after.free_zones,
    );
    db.close()?;
    output::print(report)
}
