//! `put`, `get` and `del`: one key at a time.

use crate::error::{CliError, CliResult};
use crate::format::tsv;
use crate::output;
use crate::store::{self, SnapshotArg, Source, StoreArg, TableArg};
use clap::Args;
use std::ffi::OsString;

#[derive(Args)]
pub struct PutArgs {
    #[command(flatten)]
    store: StoreArg,
    key: OsString,
    value: OsString,
    #[command(flatten)]
    table: TableArg,
}

#[derive(Args)]
pub struct GetArgs {
    #[command(flatten)]
    store: StoreArg,
    key: OsString,
    #[command(flatten)]
    table: TableArg,
    #[command(flatten)]
    snapshot: SnapshotArg,
}

#[derive(Args)]
pub struct KeyArgs {
    #[command(flatten)]
    store: StoreArg,
    key: OsString,
    #[command(flatten)]
    table: TableArg,
}

pub fn put(args: PutArgs) -> CliResult {
    let db = store::open(&args.store.path)?;
    let table = args.table.resolve(&db)?;
    db.put(
        table,
        store::arg_bytes(args.key),
        store::arg_bytes(args.value),
    )?;
    Ok(db.close()?)
}

pub fn get(args: GetArgs) -> CliResult {
    let source = Source::open(&args.store.path, &args.snapshot)?;
    let table = args.table.resolve_in(&source)?;
    let key = store::arg_bytes(args.key);
    let Some(mut value) = source.get(table, &key)? else {
        return Err(CliError::new(format!(
            "key \"{}\" not found in {}",
            tsv::escape(&key),
            args.table
        )));
    };
    value.push(b'\n');
    output::print_bytes(&value)
}

pub fn del(args: KeyArgs) -> CliResult {
    let db = store::open(&args.store.path)?;
    let table = args.table.resolve(&db)?;
    db.delete(table, store::arg_bytes(args.key))?;
    Ok(db.close()?)
}
