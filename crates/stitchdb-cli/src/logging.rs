//! Diagnostics from the library and the tool, as `tracing` events on stderr.

use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

/// Warnings and errors only, unless asked for more.
const DEFAULT_FILTER: &str = "warn";

/// Checks a `--log` value when the arguments are parsed, so a bad one is a usage error.
pub fn parse_filter(filter: &str) -> Result<String, String> {
    EnvFilter::try_new(filter)
        .map(|_| filter.to_string())
        .map_err(|e| e.to_string())
}

/// Logs to stderr at `--log`'s level if given, else `RUST_LOG`'s, else warnings; in colour
/// only on a terminal (a daemon's log file gets plain text).
pub fn init(filter: Option<&str>) {
    let filter = match filter {
        Some(f) => EnvFilter::new(f),
        None => {
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER))
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}
