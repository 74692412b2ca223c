//! Writing results to stdout without panicking when the reader goes away (`println!` would).

use crate::error::{CliResult, IoContext};
use std::fmt::Display;
use std::io::Write;

/// Writes `text` to stdout.
pub fn print(text: impl Display) -> CliResult {
    write!(std::io::stdout().lock(), "{text}").context("writing to stdout")
}

/// Writes raw bytes to stdout.
pub fn print_bytes(bytes: &[u8]) -> CliResult {
    std::io::stdout()
        .lock()
        .write_all(bytes)
        .context("writing to stdout")
}
