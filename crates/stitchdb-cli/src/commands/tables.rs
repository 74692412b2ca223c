//! `create-table` and `tables`.

use crate::error::CliResult;
use crate::output;
use crate::store::{self, StoreArg};
use clap::Args;

#[derive(Args)]
pub struct CreateTableArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The new table's name (1 to 255 bytes)
    name: String,
}

pub fn create(args: CreateTableArgs) -> CliResult {
    let db = store::open(&args.store.path)?;
    db.create_table(&args.name)?;
    Ok(db.close()?)
}

pub fn list(args: StoreArg) -> CliResult {
    let db = store::open_read_only(&args.path)?;
    let names: String = db.tables().into_iter().map(|name| name + "\n").collect();
    output::print(names)
}
