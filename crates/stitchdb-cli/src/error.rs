//! The tool's error type: a message for the user, or the quiet end of a closed output pipe.

use std::fmt;
use std::io;

/// Why a command failed.
#[derive(Debug)]
pub enum CliError {
    /// Printed as `stitchdb: error: <message>`, exit status 1.
    Failed(String),
    /// Whoever read our output stopped reading (`stitchdb scan ... | head`): not worth a
    /// message, and exit status 0 like the rest of a pipeline expects.
    OutputClosed,
}

pub type CliResult<T = ()> = Result<T, CliError>;

impl CliError {
    pub fn new(message: impl Into<String>) -> CliError {
        CliError::Failed(message.into())
    }

    /// Adds `note` in parentheses after the message (a closed output stays quiet).
    pub fn note(self, note: impl fmt::Display) -> CliError {
        match self {
            CliError::Failed(message) => CliError::Failed(format!("{message} ({note})")),
            CliError::OutputClosed => CliError::OutputClosed,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Failed(message) => f.write_str(message),
            CliError::OutputClosed => f.write_str("the output was closed"),
        }
    }
}

/// Library errors already say what went wrong and where.
impl From<stitchdb::Error> for CliError {
    fn from(e: stitchdb::Error) -> CliError {
        CliError::Failed(e.to_string())
    }
}

/// Adds what was being done to an I/O error, which alone rarely says which file it was about.
pub trait IoContext<T> {
    fn context(self, doing: impl fmt::Display) -> CliResult<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn context(self, doing: impl fmt::Display) -> CliResult<T> {
        self.map_err(|e| match e.kind() {
            io::ErrorKind::BrokenPipe => CliError::OutputClosed,
            _ => CliError::Failed(format!("{doing}: {e}")),
        })
    }
}
