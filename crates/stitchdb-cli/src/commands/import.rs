//! `import`: load pairs from a TSV or JSON lines file, committing them in batches.
//!
//! Batches are written with `Durability::Async` and made durable by a sync every
//! `--sync-every` bytes of batches and one at the end: a sync per batch would cost a disk
//! flush each, and the log keeps batches in order anyway, so a crash midway leaves a prefix of
//! the input, never a patchwork. What an import that fails reports as imported is what the last
//! successful sync made durable, never more: batches committed after it may be lost with the
//! store's failure (a full disk turns the store read-only before they reach the disk).

use crate::error::{CliError, CliResult, IoContext};
use crate::format::{Format, Record, RecordReader};
use crate::output;
use crate::progress::Progress;
use crate::store::{self, StoreArg, TableArg};
use clap::Args;
use indicatif::HumanBytes;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::time::Instant;
use stitchdb::{Db, Durability, TableId, WriteBatch, MAX_KEY_LEN};

/// A batch is also committed once it holds this many bytes, so that lines of large values do
/// not pile up gigabytes in memory before a commit.
const MAX_BATCH_BYTES: usize = 16 << 20;

#[derive(Args)]
pub struct ImportArgs {
    #[command(flatten)]
    store: StoreArg,
    /// File to read; `-` for stdin
    file: PathBuf,
    #[command(flatten)]
    table: TableArg,
    /// Line format [default: jsonl for a FILE ending in .jsonl or .json, else tsv]
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// Lines per committed batch (a batch is also committed once it reaches 16 MiB)
    #[arg(long, value_name = "N", default_value_t = 1000)]
    #[arg(value_parser = clap::value_parser!(u64).range(1..))]
    batch: u64,
    /// Make the committed batches durable each time this many bytes of them have been
    /// committed since the last sync (and at the end). If the import fails, what it reports
    /// as imported is what a sync made durable, so this bounds what is left in doubt; each
    /// sync costs a log write that a checkpoint would otherwise make unnecessary
    #[arg(long, value_name = "BYTES", default_value_t = 16 << 20)]
    #[arg(value_parser = clap::value_parser!(u64).range(1..))]
    sync_every: u64,
}

pub fn run(args: ImportArgs) -> CliResult {
    let stdin = args.file.as_os_str() == "-";
    let (input, size): (Box<dyn BufRead>, Option<u64>) = if stdin {
        (Box::new(std::io::stdin().lock()), None)
    } else {
        let file =
            File::open(&args.file).context(format_args!("opening {}", args.file.display()))?;
        // A FIFO or device has no meaningful length: show a spinner for those, like stdin.
        let size = file
            .metadata()
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len());
        (Box::new(BufReader::with_capacity(1 << 16, file)), size)
    };
    let format = Format::choose(args.format, (!stdin).then_some(args.file.as_path()));
    let mut reader = RecordReader::new(input, format);

    let started = Instant::now();
    let db = store::open(&args.store.path)?;
    let table = args.table.resolve(&db)?;
    let mut importer = Importer::new(&db, table, args.batch, args.sync_every);
    let progress = Progress::bytes(size);
    let outcome = importer.run(&mut reader, &progress);
    progress.finish();
    // Whether or not the import stopped early, what was committed is made durable if the
    // store still can; what is reported is what was. A store that failed (turned read-only)
    // can sync nothing more, and the import's error already says why.
    let store_failed = outcome.is_err() && db.failure().is_some();
    let synced = if store_failed {
        Ok(())
    } else {
        importer.sync()
    };
    let (summary, lines) = (importer.durable_summary(), importer.durable.records);
    let closed = synced.and_then(|()| {
        let closed = db.close();
        if store_failed {
            // Its error is the store's failure, which the import's error already reports.
            return Ok(());
        }
        closed.map_err(|e| CliError::from(e).prefix("closing the store"))
    });
    match (outcome, closed) {
        (Ok(()), Ok(())) => {}
        (Ok(()), Err(e)) | (Err(e), Ok(())) => return Err(e.note(summary)),
        (Err(e), Err(then)) => return Err(e.note(summary).note(format_args!("and then {then}"))),
    }

    let seconds = started.elapsed().as_secs_f64();
    output::print(format_args!(
        "imported {} ({}) into {} in {seconds:.2} s ({:.0} lines/s)\n",
        count(lines),
        HumanBytes(reader.bytes_read()),
        args.table,
        lines as f64 / seconds.max(1e-9),
    ))
}

/// "1 line", "2 lines".
fn count(lines: u64) -> String {
    match lines {
        1 => "1 line".into(),
        n => format!("{n} lines"),
    }
}

/// How far through the input some state of the import reaches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Mark {
    /// Records (non-empty lines) up to here.
    records: u64,
    /// The input line the last of them was on.
    line: u64,
}

/// Commits records in batches and counts what it committed and what of that is durable.
struct Importer<'a> {
    db: &'a Db,
    table: TableId,
    batch_lines: u64,
    max_value: usize,
    batch: WriteBatch,
    /// Where the committed batches end.
    committed: Mark,
    /// Where the batches the last successful sync made durable end.
    durable: Mark,
    /// Bytes of batches committed since the last sync.
    unsynced_bytes: u64,
    /// How many such bytes call for a sync.
    sync_every: u64,
}

impl<'a> Importer<'a> {
    fn new(db: &'a Db, table: TableId, batch_lines: u64, sync_every: u64) -> Self {
        let max_value = stitchdb::max_value_len(db.stats().zones.zone_size);
        Importer {
            db,
            table,
            batch_lines,
            max_value,
            batch: WriteBatch::new(),
            committed: Mark::default(),
            durable: Mark::default(),
            unsynced_bytes: 0,
            sync_every,
        }
    }

    fn run<R: BufRead>(&mut self, reader: &mut RecordReader<R>, progress: &Progress) -> CliResult {
        while let Some(record) = reader.next_record()? {
            self.check_size(&record)?;
            self.batch.put(self.table, record.key, record.value);
            if self.batch.len() as u64 >= self.batch_lines || self.batch.size() >= MAX_BATCH_BYTES {
                self.commit(record.line)?;
                progress.set_position(reader.bytes_read());
            }
        }
        self.commit(reader.line())
    }

    /// Refuses an oversized key or value here, where the error can still name its line.
    fn check_size(&self, record: &Record) -> CliResult {
        let too_large = |what: &str, len: usize, limit: usize| {
            CliError::new(format!(
                "line {}: {what} of {len} bytes is over the limit of {limit} bytes",
                record.line
            ))
        };
        if record.key.len() > MAX_KEY_LEN {
            return Err(too_large("key", record.key.len(), MAX_KEY_LEN));
        }
        if record.value.len() > self.max_value {
            return Err(too_large("value", record.value.len(), self.max_value));
        }
        Ok(())
    }

    fn commit(&mut self, last_line: u64) -> CliResult {
        if self.batch.is_empty() {
            return Ok(());
        }
        self.db.write(&self.batch, Durability::Async).map_err(|e| {
            CliError::from(e).prefix(format_args!(
                "committing the batch ending at line {last_line}"
            ))
        })?;
        self.committed = Mark {
            records: self.committed.records + self.batch.len() as u64,
            line: last_line,
        };
        self.unsynced_bytes += self.batch.size() as u64;
        self.batch.clear();
        if self.unsynced_bytes >= self.sync_every {
            self.sync()?;
        }
        Ok(())
    }

    /// Makes every committed batch durable.
    fn sync(&mut self) -> CliResult {
        self.db.sync().map_err(|e| {
            CliError::from(e).prefix(format_args!(
                "syncing the batches up to line {}",
                self.committed.line
            ))
        })?;
        self.durable = self.committed;
        self.unsynced_bytes = 0;
        Ok(())
    }

    /// What of the input is durable in the store, for the error of a failed import.
    fn durable_summary(&self) -> String {
        durable_summary(self.durable, self.committed)
    }
}

/// What of the input is durable, given where the durable and the committed batches end.
fn durable_summary(durable: Mark, committed: Mark) -> String {
    let Mark { records, line } = durable;
    match (records, durable == committed) {
        (0, true) => "no line was imported".to_string(),
        (0, false) => format!(
            "no line is durably imported; lines 1 to {} were committed but the store could \
             not make them durable: some or all may be lost",
            committed.line
        ),
        (_, true) => format!(
            "{} up to line {line} imported and durable; no later line was imported",
            count(records)
        ),
        (_, false) => format!(
            "{} up to line {line} imported and durable; lines {} to {} were committed but the \
             store could not make them durable: some or all may be lost",
            count(records),
            line + 1,
            committed.line
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_says_what_is_durable_and_what_is_in_doubt() {
        let mark = |records, line| Mark { records, line };
        assert_eq!(
            durable_summary(mark(0, 0), mark(0, 0)),
            "no line was imported"
        );
        assert_eq!(
            durable_summary(mark(1, 3), mark(1, 3)),
            "1 line up to line 3 imported and durable; no later line was imported"
        );
        assert_eq!(
            durable_summary(mark(0, 0), mark(1000, 1002)),
            "no line is durably imported; lines 1 to 1002 were committed but the store could \
             not make them durable: some or all may be lost"
        );
        assert_eq!(
            durable_summary(mark(2000, 2000), mark(3000, 3000)),
            "2000 lines up to line 2000 imported and durable; lines 2001 to 3000 were \
             committed but the store could not make them durable: some or all may be lost"
        );
    }
}
