//! `stitchdb`: create, fill, query, export and check StitchDB stores from the shell.
//!
//! Every command is `stitchdb COMMAND STORE [ARGS]`; `src/commands` holds one module per
//! command. Line formats for import, export and scan are in [`format`](mod@format).

mod commands;
mod error;
mod format;
mod logging;
mod output;
mod progress;
mod replace;
mod store;

use clap::Parser;
use error::CliError;
use std::process::ExitCode;

// The engine allocates a node per memtable entry and a buffer per block, many small short-lived
// allocations, which mimalloc serves with less CPU time than glibc's allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Create, fill, query, export and check StitchDB stores.
///
/// STORE is the path of a store file or block device.
#[derive(Parser)]
#[command(name = "stitchdb", version, after_help = format!("{}\n\n{}", format::FORMATS_HELP, error::exit_status_help()))]
struct Cli {
    /// Diagnostics on stderr: a level (error, warn, info, debug, trace) or a filter such as
    /// `stitchdb=debug`; overrides RUST_LOG [default: warn]
    #[arg(long, global = true, value_name = "LEVEL", value_parser = logging::parse_filter)]
    log: Option<String>,
    #[command(subcommand)]
    command: commands::Command,
}

/// Turns transparent huge pages off for this process. mimalloc asks for them on the memory it
/// maps, and the kernel then zeroes a whole 2 MiB page at the first touch of each: memory the
/// engine allocates and frees at a high rate (a log buffer per segment, block lists, the
/// cache's tables) made that zeroing a visible share of a flush's time.
///
/// The flag belongs to the process's memory map, so every thread started later has it too.
/// Failing (a kernel without it) leaves huge pages on, which costs speed only.
fn disable_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    let _ = rustix::thread::disable_transparent_huge_pages(true);
}

fn main() -> ExitCode {
    disable_transparent_huge_pages();
    // Usage errors clap finds exit here with status 2, `Exit::Usage`.
    let cli = Cli::parse();
    logging::init(cli.log.as_deref());
    match cli.command.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if let CliError::Failed { message, .. } = &e {
                eprintln!("stitchdb: error: {message}");
            }
            ExitCode::from(e.exit().code())
        }
    }
}
