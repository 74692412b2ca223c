//! `create-table`, `tables` and `ctables`.

use crate::error::CliResult;
use crate::output;
use crate::store::{self, StoreArg};
use clap::Args;
use stitchdb::CTableKind;

#[derive(Args)]
pub struct CreateTableArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The new table's name (1 to 255 bytes)
    name: String,
    /// The modules its data goes through, e.g. 'managed -> btree -> fixed(8)', or
    /// 'cow-btree' for Goby's copy-on-write B+tree (docs/layouts.md); the default is the
    /// VT-tree, 'managed -> quotient -> btree -> linear'
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

/// One line a column of each column table (cTable, docs/layouts.md): the cTable's name, its
/// kind (`row` or `column`, with ` (unfinished)` while a creation a crash interrupted is not
/// finished), the column, the table holding it and that table's layout, tab-separated.
pub fn list_ctables(args: StoreArg) -> CliResult {
    let db = store::open_read_only(&args.path)?;
    let mut out = String::new();
    for c in db.ctables()? {
        let kind = match c.kind {
            CTableKind::Row => "row",
            CTableKind::Column => "column",
        };
        let state = if c.finished { "" } else { " (unfinished)" };
        for (i, column) in c.columns.iter().enumerate() {
            // A row cTable's columns share its one table.
            if let Some((table, layout)) = c.tables.get(i).or(c.tables.first()) {
                out += &format!("{}\t{kind}{state}\t{column}\t{table}\t{layout}\n", c.name);
            }
        }
    }
    output::print(out)
}
