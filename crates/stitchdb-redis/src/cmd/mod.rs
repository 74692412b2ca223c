//! The commands: one table of every command the server knows ([`table`]), each with Redis's
//! arity, flags and key positions (which `COMMAND` reports and from which the server takes
//! key locks), and what runs it. Commands over data run in a [`Ctx`]; commands over the
//! connection or the server (`MULTI`, `AUTH`, `CLIENT`, `INFO` ...) are named by a
//! [`Session`] tag and run by the connection.

pub mod args;
pub mod bits;
pub mod collection;
pub mod expiry;
pub mod floats;
pub mod hashes;
pub mod keys;
pub mod lists;
mod longdouble;
pub mod ordered;
pub mod scan;
pub mod server;
pub mod sets;
pub mod strings;
pub mod subs;
pub mod sx;
pub mod zrange;
pub mod zsets;
pub mod zstore;

use crate::keyspace::{Ctx, KsError};
use crate::resp::reply::Reply;
use std::collections::HashMap;
use std::sync::OnceLock;

/// Why a command failed.
#[derive(Debug)]
pub enum Failure {
    /// An error reply, its message whole (`ERR syntax error`).
    Reply(String),
    /// The store failed or refused.
    Store(stitchdb::Error),
    /// Nothing to pop yet (`BLPOP` ...): the connection runs the command again each time
    /// one of its keys changes, until `timeout` (`None`: none) passes and the reply is a
    /// nil array. Where a client cannot wait (`MULTI`, `SX.BEGIN`, a snapshot) the reply is
    /// `now`, at once (Redis's differs by command).
    Blocked {
        /// How long to wait.
        timeout: Option<std::time::Duration>,
        /// The reply if the client cannot wait.
        now: Reply,
    },
}

impl From<KsError> for Failure {
    fn from(e: KsError) -> Self {
        match e {
            KsError::Store(e) => Failure::Store(e),
            KsError::WrongType => Failure::Reply(args::WRONGTYPE.into()),
            KsError::Msg(m) => Failure::Reply(m),
        }
    }
}

impl From<stitchdb::Error> for Failure {
    fn from(e: stitchdb::Error) -> Self {
        Failure::Store(e)
    }
}

impl Failure {
    /// The error reply a client gets.
    pub fn reply(self) -> Reply {
        match self {
            Failure::Reply(m) => Reply::Error(m),
            Failure::Store(stitchdb::Error::TooLarge { what, len, limit }) => Reply::Error(
                format!("ERR {what} of {len} bytes is over this store's limit of {limit} bytes"),
            ),
            Failure::Store(e @ stitchdb::Error::Conflict { .. }) => {
                Reply::Error(format!("CONFLICT {e}"))
            }
            Failure::Store(e) => Reply::Error(format!("ERR store: {e}")),
            Failure::Blocked { now, .. } => now,
        }
    }

    /// Whether this is a conflict with a concurrent transaction (worth a retry).
    pub fn is_conflict(&self) -> bool {
        matches!(self, Failure::Store(stitchdb::Error::Conflict { .. }))
    }
}

/// What a command returns.
pub type CmdResult = Result<Reply, Failure>;

/// A command over data.
pub type DataFn = fn(&mut Ctx<'_>, &[Vec<u8>]) -> CmdResult;

/// Commands the connection runs itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Session {
    /// `AUTH`.
    Auth,
    /// `HELLO`.
    Hello,
    /// `SELECT`.
    Select,
    /// `QUIT`.
    Quit,
    /// `RESET`.
    Reset,
    /// `MULTI`.
    Multi,
    /// `EXEC`.
    Exec,
    /// `DISCARD`.
    Discard,
    /// `WATCH`.
    Watch,
    /// `UNWATCH`.
    Unwatch,
    /// `CLIENT ...`.
    Client,
    /// `COMMAND ...`.
    Command,
    /// `INFO`.
    Info,
    /// `CONFIG ...`.
    Config,
    /// `SHUTDOWN`.
    Shutdown,
    /// `SAVE` and `BGSAVE`.
    Save,
    /// `LASTSAVE`.
    LastSave,
    /// `SX.BEGIN`.
    SxBegin,
    /// `SX.COMMIT`.
    SxCommit,
    /// `SX.ABORT`.
    SxAbort,
    /// `SX.DURABILITY`.
    SxDurability,
    /// `SX.READAT`: reads at a named snapshot, or live again.
    SxReadAt,
    /// `SX.PATCHGROUP ...`.
    SxPatchgroup,
}

/// How a command runs.
#[derive(Clone, Copy)]
pub enum Run {
    /// Over data, in a [`Ctx`].
    Data(DataFn),
    /// By the connection.
    Session(Session),
}

/// Where a command's keys are among its arguments.
#[derive(Clone, Copy)]
pub enum Keys {
    /// It names none.
    None,
    /// Arguments `first`, `first + step` ... up to `last` (negative: from the end, -1 the
    /// last argument), as Redis's legacy key specification says.
    Range {
        /// The first key's index.
        first: i32,
        /// The last key's index.
        last: i32,
        /// The distance between keys.
        step: i32,
    },
    /// Found by a function (`ZUNIONSTORE dest numkeys k1 k2 ...`); the range is what
    /// `COMMAND` reports of it.
    Custom(fn(&[Vec<u8>]) -> Vec<usize>, i32, i32, i32),
    /// Every key of a database (`FLUSHDB`, `SWAPDB`): runs alone.
    All,
}

/// One command.
pub struct Spec {
    /// Its name, in lower case.
    pub name: &'static str,
    /// Redis's arity: `n` exactly `n` arguments (the name counts), `-n` at least `n`.
    pub arity: i32,
    /// Redis's flags for `COMMAND` (`write`, `readonly`, `fast`, `denyoom` ...).
    pub flags: &'static [&'static str],
    /// Its keys.
    pub keys: Keys,
    /// What runs it.
    pub run: Run,
}

impl Spec {
    /// Whether it changes data (Redis's `write` flag).
    pub fn writes(&self) -> bool {
        self.flags.contains(&"write")
    }

    /// The indexes of its keys among `args`.
    pub fn key_positions(&self, args: &[Vec<u8>]) -> Vec<usize> {
        match self.keys {
            Keys::None | Keys::All => Vec::new(),
            Keys::Custom(f, ..) => f(args),
            Keys::Range { first, last, step } => {
                let n = args.len() as i32;
                let last = if last < 0 { n + last } else { last.min(n - 1) };
                let mut out = Vec::new();
                let mut i = first;
                while first > 0 && i <= last && i < n {
                    out.push(i as usize);
                    i += step.max(1);
                }
                out
            }
        }
    }

    /// The key range `COMMAND` reports: first, last, step.
    pub fn key_range(&self) -> (i32, i32, i32) {
        match self.keys {
            Keys::None | Keys::All => (0, 0, 0),
            Keys::Range { first, last, step } | Keys::Custom(_, first, last, step) => {
                (first, last, step)
            }
        }
    }
}

/// A command over data with its keys where `keys` says.
pub const fn data(
    name: &'static str,
    arity: i32,
    flags: &'static [&'static str],
    keys: Keys,
    run: DataFn,
) -> Spec {
    Spec {
        name,
        arity,
        flags,
        keys,
        run: Run::Data(run),
    }
}

/// A command the connection runs.
pub const fn session(
    name: &'static str,
    arity: i32,
    flags: &'static [&'static str],
    s: Session,
) -> Spec {
    Spec {
        name,
        arity,
        flags,
        keys: Keys::None,
        run: Run::Session(s),
    }
}

/// A command whose one key is its first argument, as most are.
pub const fn single_key(
    name: &'static str,
    arity: i32,
    flags: &'static [&'static str],
    run: DataFn,
) -> Spec {
    let first_only = Keys::Range {
        first: 1,
        last: 1,
        step: 1,
    };
    data(name, arity, flags, first_only, run)
}

/// Every command family's table.
const FAMILIES: &[&[Spec]] = &[
    keys::COMMANDS,
    expiry::COMMANDS,
    strings::COMMANDS,
    bits::COMMANDS,
    hashes::COMMANDS,
    lists::COMMANDS,
    sets::COMMANDS,
    zsets::COMMANDS,
    zstore::COMMANDS,
    server::COMMANDS,
    sx::COMMANDS,
];

/// Every command.
pub fn table() -> impl Iterator<Item = &'static Spec> {
    FAMILIES.iter().flat_map(|f| f.iter())
}

/// The command named `name` (any case).
pub fn lookup(name: &[u8]) -> Option<&'static Spec> {
    static BY_NAME: OnceLock<HashMap<&'static str, &'static Spec>> = OnceLock::new();
    let map = BY_NAME.get_or_init(|| table().map(|s| (s.name, s)).collect());
    let lower = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
    map.get(lower.as_str()).copied()
}

/// The subcommands of command `parent` (none for most commands).
pub fn subcommands(parent: &str) -> &'static [subs::Sub] {
    match parent {
        "client" => server::CLIENT_SUBS,
        "config" => server::CONFIG_SUBS,
        "command" => server::COMMAND_SUBS,
        "sx.snapshot" => sx::SNAPSHOT_SUBS,
        "sx.patchgroup" => sx::PATCHGROUP_SUBS,
        _ => &[],
    }
}

/// Redis's error for a command it does not know.
pub fn unknown_command(args: &[Vec<u8>]) -> String {
    let mut shown = String::new();
    for a in &args[1..] {
        if shown.len() >= 128 {
            break;
        }
        let room = 128 - shown.len();
        let s = String::from_utf8_lossy(a);
        let cut: String = s.chars().take(room).collect();
        shown.push_str(&format!("'{cut}' "));
    }
    let name: String = String::from_utf8_lossy(&args[0])
        .chars()
        .take(128)
        .collect();
    format!("ERR unknown command '{name}', with args beginning with: {shown}")
}

/// Whether `args` fits the command's arity; Redis's error if not.
pub fn check_arity(spec: &Spec, argc: usize) -> Result<(), String> {
    let a = spec.arity;
    let ok = if a >= 0 {
        argc == a as usize
    } else {
        argc >= (-a) as usize
    };
    if ok {
        Ok(())
    } else {
        Err(args::arity_error(spec.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_lower_case_and_found_in_any_case() {
        let mut seen = std::collections::HashSet::new();
        for s in table() {
            assert_eq!(s.name, s.name.to_ascii_lowercase());
            assert!(seen.insert(s.name), "{} twice", s.name);
            assert!(lookup(s.name.to_ascii_uppercase().as_bytes()).is_some());
        }
    }

    #[test]
    fn unknown_commands_name_their_first_arguments() {
        let args: Vec<Vec<u8>> = vec![b"foo".to_vec(), b"a".to_vec(), b"b".to_vec()];
        assert_eq!(
            unknown_command(&args),
            "ERR unknown command 'foo', with args beginning with: 'a' 'b' "
        );
    }
}
