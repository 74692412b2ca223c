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
    /// The modules its data goes through, e.g. 'managed -> btree -> fixed(8)'
    /// (docs/layouts.md); the default is the VT-tree, 'managed -> quotient -> btree ->
    /// linear'
    #[arg(long, value_name = "LAYOUT", default_value = "")]
    layout: String,
}

pub fn create(args: CreateTableArgs) -> CliResult {
    let db = store::open(&args.store.path)?;
    db.create_table_with_layout(&args.name, &args.layout)?;
    Ok(db.close()?)
}

/// One line a table: its name, a tab, its layout.
pub fn list(args: StoreArg) -> CliResult {
    let db = store::open_read_only(&args.path)?;
    let mut out = String::new();
    for name in db.tables() {
        let layout = db.table_layout(db.table(&name)?)?;
        out += &format!("{name}\t{layout}\n");
    }
    output::print(out)
}
