//! `scan`: print a range of pairs as TSV.

use super::dump::KeyRange;
use crate::error::CliResult;
use crate::format::{Format, RecordWriter};
use crate::store::{EscapedArg, SnapshotArg, Source, StoreArg, TableArg};
use clap::Args;
use std::ffi::OsString;
use std::io::BufWriter;

#[derive(Args)]
pub struct ScanArgs {
    #[command(flatten)]
    store: StoreArg,
    #[command(flatten)]
    table: TableArg,
    #[command(flatten)]
    snapshot: SnapshotArg,
    /// Only keys starting with P
    #[arg(long, value_name = "P")]
    prefix: Option<OsString>,
    /// Only keys from S on (inclusive)
    #[arg(long, value_name = "S")]
    start: Option<OsString>,
    /// Only keys before E (exclusive)
    #[arg(long, value_name = "E")]
    end: Option<OsString>,
    /// At most N pairs
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    #[command(flatten)]
    escaped: EscapedArg,
}

pub fn run(args: ScanArgs) -> CliResult {
    let escaped = &args.escaped;
    let bound = |what, arg: Option<OsString>| arg.map(|a| escaped.bytes(what, a)).transpose();
    let range = KeyRange {
        prefix: bound("--prefix", args.prefix)?.unwrap_or_default(),
        start: bound("--start", args.start)?,
        end: bound("--end", args.end)?,
    };
    let source = Source::open(&args.store.path, &args.snapshot)?;
    let table = args.table.resolve_in(&source)?;
    let stdout = BufWriter::new(std::io::stdout().lock());
    let mut out = RecordWriter::new(stdout, Format::Tsv, "stdout".into());
    range.write_to(&source, table, args.limit, &mut out)?;
    out.finish().map(drop)
}
