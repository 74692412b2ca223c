//! `snapshot create|list|drop`: named snapshots of the whole store, kept across restarts.

use crate::error::CliResult;
use crate::output;
use crate::store::{self, StoreArg};
use clap::{Args, Subcommand};

#[derive(Subcommand)]
pub enum SnapshotCommand {
    /// Take a snapshot of every table, named NAME
    Create(NameArgs),
    /// List the snapshots: name, sequence number, runs, entries, bytes, tables
    List(StoreArg),
    /// Drop the snapshot NAME (its data goes once the store no longer shares it)
    Drop(NameArgs),
}

#[derive(Args)]
pub struct NameArgs {
    #[command(flatten)]
    store: StoreArg,
    name: String,
}

pub fn run(cmd: SnapshotCommand) -> CliResult {
    match cmd {
        SnapshotCommand::Create(args) => {
            let db = store::open(&args.store.path)?;
            let info = db.snapshot(&args.name)?;
            db.close()?;
            output::print(format!(
                "snapshot {:?} at commit {}: {} runs, {} entries\n",
                info.name, info.seq, info.runs, info.entries
            ))
        }
        SnapshotCommand::List(args) => {
            let db = store::open_read_only(&args.path)?;
            let mut out = String::new();
            for s in db.snapshots() {
                out += &format!(
                    "{}\tseq {}\t{} runs\t{} entries\t{} bytes\ttables {}\n",
                    s.name,
                    s.seq,
                    s.runs,
                    s.entries,
                    s.data_bytes,
                    s.tables.join(",")
                );
            }
            output::print(out)
        }
        SnapshotCommand::Drop(args) => {
            let db = store::open(&args.store.path)?;
            db.drop_snapshot(&args.name)?;
            Ok(db.close()?)
        }
    }
}
