//! `import`: load pairs from a TSV or JSON lines file, committing them in batches.
//!
//! Batches are written with `Durability::Async` and made durable by one sync at the end: a
//! sync per batch would cost a disk flush each, and the log keeps batches in order anyway, so
//! a crash midway leaves a prefix of the input, never a patchwork.

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
    let mut importer = Importer::new(&db, table, args.batch);
    let progress = Progress::bytes(size);
    let outcome = importer.run(&mut reader, &progress);
    progress.finish();
    let lines = importer.committed;
    let outcome = outcome.map_err(|e| {
        e.note(format_args!(
            "import stopped after committing {} in whole batches; later lines were not imported",
            count(lines)
        ))
    });
    // Whether or not the import stopped early, what was committed is made durable.
    let closed = db.sync().and_then(|()| db.close()).map_err(CliError::from);
    match (outcome, closed) {
        (Ok(()), Ok(())) => {}
        (Err(e), Ok(())) | (Ok(()), Err(e)) => return Err(e),
        (Err(e), Err(closing)) => {
            return Err(e.note(format_args!("closing the store failed too: {closing}")))
        }
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

/// Commits records in batches and counts what it committed.
struct Importer<'a> {
    db: &'a Db,
    table: TableId,
    batch_lines: u64,
    max_value: usize,
    batch: WriteBatch,
    /// Records in committed batches.
    committed: u64,
}

impl<'a> Importer<'a> {
    fn new(db: &'a Db, table: TableId, batch_lines: u64) -> Self {
        let max_value = stitchdb::max_value_len(db.stats().zones.zone_size);
        Importer {
            db,
            table,
            batch_lines,
            max_value,
            batch: WriteBatch::new(),
            committed: 0,
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
            CliError::new(format!(
                "committing the batch ending at line {last_line}: {e}"
            ))
        })?;
        self.committed += self.batch.len() as u64;
        self.batch.clear();
        Ok(())
    }
}
