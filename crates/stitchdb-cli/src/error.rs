//! The tool's errors and its exit statuses, defined once here: `--help` and the README list
//! [`Exit::ALL`], and a test holds the README to it.

use std::fmt;
use std::io;

/// What a script can tell from the exit status. Statuses are stable: new kinds of failure get
/// new numbers, and any failure without its own number is [`Exit::Failed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Success,
    /// `get`: the key is not in the table (the store itself is fine).
    NotFound,
    /// The command line is wrong: an unknown command or option, a bad value or escape.
    Usage,
    /// Any other failure: an input file's bad line, a disk error, a full disk ...
    Failed,
    /// The store is damaged, or the file is not a StitchDB store.
    Corrupt,
    /// Another process has the store open (a writer, or readers when writing).
    Locked,
    /// The operating system refused access to the store or a file.
    Permission,
    /// The store, the table, the snapshot or an input file does not exist.
    Missing,
    /// `txn run`: the transaction conflicted with a commit made since it began, and was
    /// aborted.
    Conflict,
}

impl Exit {
    /// Every status, in order, for the documentation.
    pub const ALL: [Exit; 9] = [
        Exit::Success,
        Exit::NotFound,
        Exit::Usage,
        Exit::Failed,
        Exit::Corrupt,
        Exit::Locked,
        Exit::Permission,
        Exit::Missing,
        Exit::Conflict,
    ];

    /// The process exit status.
    pub fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::NotFound => 1,
            // clap exits 2 on the usage errors it finds itself; ours follow it.
            Exit::Usage => 2,
            Exit::Failed => 3,
            Exit::Corrupt => 4,
            Exit::Locked => 5,
            Exit::Permission => 6,
            Exit::Missing => 7,
            Exit::Conflict => 8,
        }
    }

    /// What the status means, one line for `--help` and the README.
    pub fn meaning(self) -> &'static str {
        match self {
            Exit::Success => "success",
            Exit::NotFound => "get: the key is not in the table",
            Exit::Usage => "usage: a bad command, option, value or escape",
            Exit::Failed => "any other failure (bad input line, disk error, full disk ...)",
            Exit::Corrupt => "the store is damaged, or is not a StitchDB store",
            Exit::Locked => {
                "another process has the store open (after waiting 3 s for it to let go)"
            }
            Exit::Permission => "permission denied (the store or a file)",
            Exit::Missing => "no such store, table, snapshot or input file",
            Exit::Conflict => "txn run: the transaction conflicted with another commit",
        }
    }
}

/// The exit status table that `--help` shows, one `  N  meaning` line per status.
pub fn exit_status_help() -> String {
    let mut help = String::from("Exit status:\n");
    for exit in Exit::ALL {
        help += &format!("  {}  {}\n", exit.code(), exit.meaning());
    }
    help
}

/// Why a command failed.
#[derive(Debug)]
pub enum CliError {
    /// Printed as `stitchdb: error: <message>`, exiting with `exit`'s status.
    Failed { exit: Exit, message: String },
    /// Whoever read our output stopped reading (`stitchdb scan ... | head`): not worth a
    /// message, and exit status 0 like the rest of a pipeline expects.
    OutputClosed,
}

pub type CliResult<T = ()> = Result<T, CliError>;

impl CliError {
    /// A failure with no status of its own ([`Exit::Failed`]).
    pub fn new(message: impl Into<String>) -> CliError {
        CliError::with_exit(Exit::Failed, message)
    }

    /// A failure a script can tell apart by its status.
    pub fn with_exit(exit: Exit, message: impl Into<String>) -> CliError {
        CliError::Failed {
            exit,
            message: message.into(),
        }
    }

    /// A bad command line that clap could not see (a bad escape, a value out of range).
    pub fn usage(message: impl Into<String>) -> CliError {
        CliError::with_exit(Exit::Usage, message)
    }

    /// The status the process exits with.
    pub fn exit(&self) -> Exit {
        match self {
            CliError::Failed { exit, .. } => *exit,
            CliError::OutputClosed => Exit::Success,
        }
    }

    /// Puts `doing` and a colon before the message (a closed output stays quiet).
    pub fn prefix(self, doing: impl fmt::Display) -> CliError {
        match self {
            CliError::Failed { exit, message } => CliError::Failed {
                exit,
                message: format!("{doing}: {message}"),
            },
            CliError::OutputClosed => CliError::OutputClosed,
        }
    }

    /// Adds `note` in parentheses after the message (a closed output stays quiet).
    pub fn note(self, note: impl fmt::Display) -> CliError {
        match self {
            CliError::Failed { exit, message } => CliError::Failed {
                exit,
                message: format!("{message} ({note})"),
            },
            CliError::OutputClosed => CliError::OutputClosed,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Failed { message, .. } => f.write_str(message),
            CliError::OutputClosed => f.write_str("the output was closed"),
        }
    }
}

/// Library errors already say what went wrong and where; their kind picks the status.
impl From<stitchdb::Error> for CliError {
    fn from(e: stitchdb::Error) -> CliError {
        CliError::with_exit(engine_exit(&e), e.to_string())
    }
}

/// The status of a library error.
fn engine_exit(e: &stitchdb::Error) -> Exit {
    match e {
        e if e.is_corruption() => Exit::Corrupt,
        stitchdb::Error::NoSuchTable(_) | stitchdb::Error::NoSuchSnapshot(_) => Exit::Missing,
        // Options come from the command line (`init --zone-size`, `create-table --layout`).
        stitchdb::Error::Config(_) | stitchdb::Error::BadLayout(_) => Exit::Usage,
        e => match e.io_error().map(|io| &io.kind) {
            Some(stitchdb::IoErrorKind::Locked) => Exit::Locked,
            Some(stitchdb::IoErrorKind::PermissionDenied) => Exit::Permission,
            Some(stitchdb::IoErrorKind::NotFound) => Exit::Missing,
            _ => Exit::Failed,
        },
    }
}

/// Opening a store (`stitchdb_host::open`): the errors say what to do; their kind picks the
/// status.
impl From<stitchdb_host::OpenError> for CliError {
    fn from(e: stitchdb_host::OpenError) -> CliError {
        use stitchdb_host::OpenError;
        let exit = match &e {
            OpenError::Missing(_) => Exit::Missing,
            OpenError::InUse(_) => Exit::Locked,
            OpenError::Engine(_, engine) => engine_exit(engine),
        };
        CliError::with_exit(exit, e.to_string())
    }
}

/// The status of a failed file operation of the tool's own (input and output files).
fn io_exit(e: &io::Error) -> Exit {
    match e.kind() {
        io::ErrorKind::NotFound => Exit::Missing,
        io::ErrorKind::PermissionDenied => Exit::Permission,
        _ => Exit::Failed,
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
            _ => CliError::with_exit(io_exit(&e), format!("{doing}: {e}")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_distinct_and_listed_in_order() {
        let codes: Vec<u8> = Exit::ALL.iter().map(|e| e.code()).collect();
        assert_eq!(codes, (0..Exit::ALL.len() as u8).collect::<Vec<_>>());
    }

    #[test]
    fn the_readme_lists_every_exit_status() {
        let readme = include_str!("../../../README.md");
        for exit in Exit::ALL {
            let row = format!("| {} | {} |", exit.code(), exit.meaning());
            assert!(readme.contains(&row), "README.md lacks the row {row:?}");
        }
    }

    #[test]
    fn the_locked_status_names_the_wait_every_command_makes() {
        let wait = stitchdb_host::LOCK_WAIT_MS;
        assert_eq!(wait % 1000, 0, "the wait is shown in whole seconds");
        let shown = format!("after waiting {} s", wait / 1000);
        assert!(
            Exit::Locked.meaning().contains(&shown),
            "Exit::Locked's meaning must say {shown:?}"
        );
    }

    #[test]
    fn library_errors_get_the_status_of_their_kind() {
        use stitchdb::{IoError, IoErrorKind, IoOp};
        let io = |kind| stitchdb::Error::Io(IoError::new(IoOp::Open, "file s", 0, 0, kind));
        let cases = [
            (io(IoErrorKind::Locked), Exit::Locked),
            (io(IoErrorKind::PermissionDenied), Exit::Permission),
            (io(IoErrorKind::NotFound), Exit::Missing),
            (io(IoErrorKind::Eio), Exit::Failed),
            (stitchdb::Error::NoSuchTable("t".into()), Exit::Missing),
            (stitchdb::Error::NoSuchSnapshot("s".into()), Exit::Missing),
            (stitchdb::Error::Closed, Exit::Failed),
            (stitchdb::Error::Config("zone size".into()), Exit::Usage),
            (
                stitchdb::Error::BadLayout("layout \"x\"".into()),
                Exit::Usage,
            ),
            (
                stitchdb::Error::Corrupt {
                    what: "manifest",
                    place: "zone 1".into(),
                    detail: "bad checksum".into(),
                },
                Exit::Corrupt,
            ),
        ];
        for (e, exit) in cases {
            assert_eq!(CliError::from(e.clone()).exit(), exit, "{e}");
        }
    }

    #[test]
    fn open_errors_get_the_status_of_their_kind() {
        use stitchdb_host::OpenError;
        let p = || std::path::PathBuf::from("s.store");
        let damaged = stitchdb::Error::Corrupt {
            what: "superblock",
            place: "slot 0".into(),
            detail: "bad checksum".into(),
        };
        let cases = [
            (OpenError::Missing(p()), Exit::Missing),
            (OpenError::InUse(p()), Exit::Locked),
            (OpenError::Engine(p(), damaged), Exit::Corrupt),
        ];
        for (e, exit) in cases {
            let shown = e.to_string();
            let e = CliError::from(e);
            assert_eq!((e.exit(), e.to_string()), (exit, shown));
        }
    }

    #[test]
    fn file_errors_get_the_status_of_their_kind() {
        let status = |kind| {
            Err::<(), _>(io::Error::from(kind))
                .context("reading f")
                .unwrap_err()
                .exit()
        };
        assert_eq!(status(io::ErrorKind::NotFound), Exit::Missing);
        assert_eq!(status(io::ErrorKind::PermissionDenied), Exit::Permission);
        assert_eq!(status(io::ErrorKind::InvalidData), Exit::Failed);
        assert_eq!(status(io::ErrorKind::BrokenPipe), Exit::Success);
    }
}
