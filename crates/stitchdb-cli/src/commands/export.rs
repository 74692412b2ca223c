//! `export`: write a table's pairs, in key order, to a file or stdout.

use super::dump::KeyRange;
use crate::error::{CliResult, IoContext};
use crate::format::{Format, RecordWriter};
use crate::store::{self, SnapshotArg, Source, StoreArg, TableArg};
use clap::Args;
use std::ffi::OsString;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

#[derive(Args)]
pub struct ExportArgs {
    #[command(flatten)]
    store: StoreArg,
    /// File to write (replaced if it exists); stdout if absent or `-`
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
}

pub fn run(args: ExportArgs) -> CliResult {
    let source = Source::open(&args.store.path, &args.snapshot)?;
    let table = args.table.resolve_in(&source)?;
    let file = args.file.filter(|f| f.as_os_str() != "-");
    let format = Format::choose(args.format, file.as_deref());
    let (out, destination): (Box<dyn Write>, String) = match &file {
        Some(path) => {
            let f = File::create(path).context(format_args!("creating {}", path.display()))?;
            (Box::new(f), path.display().to_string())
        }
        None => (Box::new(std::io::stdout().lock()), "stdout".into()),
    };
    let mut out = RecordWriter::new(BufWriter::new(out), format, destination);
    let range = KeyRange {
        prefix: args.prefix.map(store::arg_bytes).unwrap_or_default(),
        ..KeyRange::default()
    };
    range.write_to(&source, table, None, &mut out)?;
    out.finish()
}
