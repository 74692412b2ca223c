//! `export`: write a table's pairs, in key order, to a file or stdout.

use super::dump::KeyRange;
use crate::error::{CliResult, IoContext};
use crate::format::{Format, RecordWriter};
use crate::replace::Replacing;
use crate::store::{EscapedArg, SnapshotArg, Source, StoreArg, TableArg};
use clap::Args;
use std::ffi::OsString;
use std::io::BufWriter;
use std::path::PathBuf;

#[derive(Args)]
pub struct ExportArgs {
    #[command(flatten)]
    store: StoreArg,
    /// File to write, replaced whole once every pair is written and synced (a failed export
    /// leaves it as it was); stdout if absent or `-`
    file: Option<PathBuf>,
    #[command(flatten)]
    table: TableArg,
    #[command(flatten)]
    snapshot: SnapshotArg,
    /// Line format [default: from FILE's extension, else tsv]
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// Only keys starting with P
    #[arg(long, value_name = "P")]
    prefix: Option<OsString>,
    #[command(flatten)]
    escaped: EscapedArg,
}

pub fn run(args: ExportArgs) -> CliResult {
    let range = KeyRange {
        prefix: match args.prefix {
            Some(prefix) => args.escaped.bytes("--prefix", prefix)?,
            None => Vec::new(),
        },
        ..KeyRange::default()
    };
    let source = Source::open(&args.store.path, &args.snapshot)?;
    let table = args.table.resolve_in(&source)?;
    let file = args.file.filter(|f| f.as_os_str() != "-");
    let format = Format::choose(args.format, file.as_deref());
    match &file {
        Some(path) => {
            let destination = path.display().to_string();
            let existed = path.exists();
            let file = Replacing::create(path)?;
            let in_place = file.in_place();
            let mut out = RecordWriter::new(BufWriter::new(file), format, destination.clone());
            let written = range
                .write_to(&source, table, None, &mut out)
                .and_then(|_| {
                    out.finish()?
                        .into_inner()
                        .map_err(|e| e.into_error())
                        .context(format_args!("writing {destination}"))?
                        .commit()
                });
            // Say what became of the file, which the pairs' count alone does not.
            written.map_err(|e| match (in_place, existed) {
                (true, _) => e,
                (false, true) => e.note(format_args!("{destination} was left as it was")),
                (false, false) => e.note(format_args!("{destination} was not created")),
            })
        }
        None => {
            let stdout = BufWriter::new(std::io::stdout().lock());
            let mut out = RecordWriter::new(stdout, format, "stdout".into());
            range.write_to(&source, table, None, &mut out)?;
            out.finish().map(drop)
        }
    }
}
