//! `put`, `get` and `del`: one key at a time.

use crate::error::{CliError, CliResult, Exit, IoContext};
use crate::format::tsv;
use crate::output;
use crate::store::{self, EscapedArg, SnapshotArg, Source, StoreArg, TableArg};
use clap::Args;
use std::ffi::OsString;

#[derive(Args)]
pub struct PutArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The key: the argument's bytes, or with --escaped its TSV escapes decoded
    key: OsString,
    /// The value, read like KEY
    #[arg(required_unless_present = "from_file", conflicts_with = "from_file")]
    value: Option<OsString>,
    /// Streams the value from FILE instead (a file of any size up to the store's limit on
    /// values, 4 GiB with the default zones; never read into memory whole)
    #[arg(long, value_name = "FILE")]
    from_file: Option<std::path::PathBuf>,
    #[command(flatten)]
    table: TableArg,
    #[command(flatten)]
    escaped: EscapedArg,
}

#[derive(Args)]
pub struct GetArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The key: the argument's bytes, or with --escaped its TSV escapes decoded
    key: OsString,
    #[command(flatten)]
    table: TableArg,
    #[command(flatten)]
    snapshot: SnapshotArg,
    #[command(flatten)]
    escaped: EscapedArg,
    /// Writes only bytes OFFSET..OFFSET+LEN of the value to standard output, as they are
    /// (no newline): those up to the value's end, nothing at or past it
    #[arg(long, value_name = "OFFSET:LEN", value_parser = parse_range, conflicts_with = "escaped")]
    range: Option<(u64, u64)>,
}

/// `OFFSET:LEN`, two byte counts.
fn parse_range(text: &str) -> Result<(u64, u64), String> {
    let (offset, len) = text
        .split_once(':')
        .ok_or_else(|| format!("{text:?} is not OFFSET:LEN"))?;
    let number = |s: &str| {
        s.parse::<u64>()
            .map_err(|e| format!("{s:?} in {text:?}: {e}"))
    };
    Ok((number(offset)?, number(len)?))
}

#[derive(Args)]
pub struct KeyArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The key: the argument's bytes, or with --escaped its TSV escapes decoded
    key: OsString,
    #[command(flatten)]
    table: TableArg,
    #[command(flatten)]
    escaped: EscapedArg,
}

pub fn put(args: PutArgs) -> CliResult {
    let key = args.escaped.bytes("KEY", args.key)?;
    let value = match args.value {
        Some(value) => Some(args.escaped.bytes("VALUE", value)?),
        None => None,
    };
    let db = store::open(&args.store.path)?;
    let table = args.table.resolve(&db)?;
    match (value, &args.from_file) {
        (Some(value), _) => db.put(table, key, value)?,
        (None, Some(path)) => {
            let what = || format!("reading {}", path.display());
            let file = std::fs::File::open(path).context(what())?;
            let len = file.metadata().context(what())?.len();
            db.put_from(table, key, std::io::BufReader::new(file), len)?
        }
        (None, None) => return Err(CliError::usage("give VALUE or --from-file FILE")),
    }
    Ok(db.close()?)
}

/// Prints the value and a newline: as it is, or escaped (one line whatever it holds) with
/// `--escaped`. An absent key is [`Exit::NotFound`], which scripts test for.
pub fn get(args: GetArgs) -> CliResult {
    let key = args.escaped.bytes("KEY", args.key)?;
    let source = Source::open(&args.store.path, &args.snapshot)?;
    let table = args.table.resolve_in(&source)?;
    let value = match args.range {
        Some((offset, len)) => source.get_range(table, &key, offset, len)?,
        None => source.get(table, &key)?,
    };
    let Some(mut value) = value else {
        return Err(CliError::with_exit(
            Exit::NotFound,
            format!("key \"{}\" not found in {}", tsv::escape(&key), args.table),
        ));
    };
    if args.range.is_some() {
        return output::print_bytes(&value);
    }
    if args.escaped.given() {
        value = tsv::escape(&value).into_bytes();
    }
    value.push(b'\n');
    output::print_bytes(&value)
}

pub fn del(args: KeyArgs) -> CliResult {
    let key = args.escaped.bytes("KEY", args.key)?;
    let db = store::open(&args.store.path)?;
    let table = args.table.resolve(&db)?;
    db.delete(table, key)?;
    Ok(db.close()?)
}
