//! `put`, `get` and `del`: one key at a time.

use crate::error::{CliError, CliResult, Exit};
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
    value: OsString,
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
    let value = args.escaped.bytes("VALUE", args.value)?;
    let db = store::open(&args.store.path)?;
    let table = args.table.resolve(&db)?;
    db.put(table, key, value)?;
    Ok(db.close()?)
}

/// Prints the value and a newline: as it is, or escaped (one line whatever it holds) with
/// `--escaped`. An absent key is [`Exit::NotFound`], which scripts test for.
pub fn get(args: GetArgs) -> CliResult {
    let key = args.escaped.bytes("KEY", args.key)?;
    let source = Source::open(&args.store.path, &args.snapshot)?;
    let table = args.table.resolve_in(&source)?;
    let Some(mut value) = source.get(table, &key)? else {
        return Err(CliError::with_exit(
            Exit::NotFound,
            format!("key \"{}\" not found in {}", tsv::escape(&key), args.table),
        ));
    };
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
