//! `compact` and `defrag`: reorganize a store's runs and zones (contents never change).

use crate::error::{CliError, CliResult, IoContext};
use crate::progress::Progress;
use crate::store::{self, StoreArg};
use clap::Args;
use std::io::Write;
use std::time::Instant;
use stitchdb::Db;

/// Merges every table's runs into one, then shows the store's statistics.
pub fn compact(args: StoreArg) -> CliResult {
    let db = store::open(&args.path)?;
    compact_store(db, &mut std::io::stdout().lock())
}

/// Compacts `db`, closes it, and only then writes the report to `out`.
fn compact_store(db: Db, out: &mut dyn Write) -> CliResult {
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
    write!(out, "{report}").context("writing to stdout")
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
    defrag_store(db, args.max_live, &mut std::io::stdout().lock())
}

/// Defragments `db`, closes it, and only then writes the report to `out`.
fn defrag_store(db: Db, max_live: f64, out: &mut dyn Write) -> CliResult {
    let before = db.stats().zones;
    let started = Instant::now();
    let mut bar: Option<Progress> = None;
    let report = db.defrag(max_live, |done, total| {
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
    write!(out, "{report}").context("writing to stdout")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use stitchdb::{Options, SimConfig, SimDisk};

    /// A store with several runs and dead space (keys written over), on a simulated disk.
    fn store() -> (Arc<SimDisk>, Db) {
        let disk = Arc::new(SimDisk::new(SimConfig {
            seed: 1,
            len: 0,
            capacity: None,
        }));
        let opts = Options {
            zone_size: 64 * 1024,
            memtable_size: 16 * 1024,
            background: false,
            ..Options::default()
        };
        let db = Db::create_on(disk.clone(), opts).unwrap();
        let t = db.default_table();
        for round in 0..4u32 {
            for i in 0..300u32 {
                let value = format!("{round}-{i}-{}", "v".repeat(100));
                db.put(t, format!("key{i:05}"), value).unwrap();
            }
            db.flush().unwrap();
        }
        // The rounds' merges may leave a single run; a last flush leaves a second one, so
        // that compacting has runs to merge and writes.
        for i in 0..50u32 {
            db.put(t, format!("key{i:05}"), "last").unwrap();
        }
        db.flush().unwrap();
        let runs: usize = db.stats().tables[0].levels.iter().sum();
        assert!(runs >= 2, "compaction has runs to merge: {runs}");
        (disk, db)
    }

    /// Runs `command` on the store with its `n`th sync, then with its `n`th write, failing,
    /// for every sync and a spread of the writes a healthy run makes: a run that fails writes
    /// nothing to its output; one that succeeds reports, and the store reopens intact. (Today
    /// closing a store right after these commands has nothing left to write, so no injected
    /// failure lands in the close itself; the report is written after it all the same, and a
    /// failure anywhere before it must leave the output empty.)
    fn reports_only_what_succeeded(command: impl Fn(Db, &mut dyn Write) -> CliResult) {
        let (disk, db) = store();
        let (syncs, writes) = (disk.stats().syncs, disk.stats().writes);
        let mut out = Vec::new();
        command(db, &mut out).unwrap();
        assert!(!out.is_empty(), "a healthy run reports");
        let (syncs, writes) = (disk.stats().syncs - syncs, disk.stats().writes - writes);
        assert!(syncs > 0 && writes > 0, "{syncs} syncs, {writes} writes");
        let sync_faults = (1..=syncs).map(|n| (n, 0));
        let write_faults = (1..=writes)
            .step_by((writes as usize / 20).max(1))
            .map(|n| (0, n));
        let (mut failed, mut succeeded) = (0, 0);
        for (sync, write) in sync_faults.chain(write_faults) {
            let (disk, db) = store();
            disk.fail_nth_sync(sync);
            disk.fail_nth_write(write);
            let mut out = Vec::new();
            match command(db, &mut out) {
                Ok(()) => {
                    assert!(!out.is_empty(), "sync {sync} write {write}: no report");
                    succeeded += 1;
                }
                Err(e) => {
                    assert!(
                        out.is_empty(),
                        "sync {sync} write {write} failed ({e}) but reported: {}",
                        String::from_utf8_lossy(&out)
                    );
                    failed += 1;
                }
            }
        }
        assert!(
            failed > 0,
            "no injected failure made the command fail ({succeeded} succeeded)"
        );
    }

    #[test]
    fn compact_writes_its_report_only_when_everything_succeeded() {
        reports_only_what_succeeded(|db, out| compact_store(db, out));
    }

    #[test]
    fn defrag_writes_its_report_only_when_everything_succeeded() {
        reports_only_what_succeeded(|db, out| defrag_store(db, 0.9, out));
    }
}
