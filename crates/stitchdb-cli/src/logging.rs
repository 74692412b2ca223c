//! Diagnostics from the library and the tool, as `tracing` events on stderr.

use std::io::IsTerminal;
use std::sync::OnceLock;
use tracing_subscriber::EnvFilter;

/// The `--log` filter this process was started with, for the daemon `mount` starts.
static GIVEN: OnceLock<String> = OnceLock::new();

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
        Some(f) => {
            let _ = GIVEN.set(f.to_string());
            EnvFilter::new(f)
        }
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

/// The `--log` filter given on the command line, if any.
pub fn given_filter() -> Option<&'static str> {
    GIVEN.get().map(String::as_str)
}
