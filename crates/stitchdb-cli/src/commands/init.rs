//! `init`: create a store.

use crate::error::{CliError, CliResult};
use clap::Args;
use std::path::PathBuf;
use stitchdb::{Db, Options};

#[derive(Args)]
pub struct InitArgs {
    /// Where to create the store: a new file, or a block device
    store: PathBuf,
    /// Bytes per zone: a multiple of 4096 from 64 KiB to 4 GiB. Values can be up to a
    /// quarter of this (at most 4 MiB) [default: 8 MiB]
    #[arg(long, value_name = "BYTES")]
    zone_size: Option<u64>,
}

/// Creates the store, or fails leaving no file behind: `Db::create` removes a file it made
/// and could not fill, and a store whose first close fails (a full disk) is removed here, so
/// `init` can simply be run again.
pub fn run(args: InitArgs) -> CliResult {
    // The library refuses to overwrite a file too, but with the bare OS error ("File exists").
    if args.store.is_file() {
        return Err(CliError::new(format!(
            "{} already exists; init only creates new stores",
            args.store.display()
        )));
    }
    let mut opts = Options::default();
    if let Some(zone_size) = args.zone_size {
        opts.zone_size = zone_size;
    }
    let db = Db::create(&args.store, opts)?;
    // Made by `create_new` just now, so ours to remove; a block device is left alone.
    let made_file = args.store.is_file();
    db.close().map_err(|e| {
        let e = CliError::from(e);
        if !made_file {
            return e;
        }
        match std::fs::remove_file(&args.store) {
            Ok(()) => e.note("the unfinished store was removed"),
            Err(removing) => e.note(format_args!(
                "removing the unfinished store failed too: {removing}"
            )),
        }
    })
}
