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
    Db::create(&args.store, opts)?.close()?;
    Ok(())
}
