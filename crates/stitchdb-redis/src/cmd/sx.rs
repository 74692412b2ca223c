//! StitchDB's own commands (`docs/redis.md`): ordered ranges, interactive transactions,
//! snapshots, durability and patchgroups per connection.

use super::{Keys, Run, Session, Spec};

/// A command the connection runs.
const fn session(name: &'static str, arity: i32, s: Session) -> Spec {
    Spec {
        name,
        arity,
        flags: &["noscript", "fast"],
        keys: Keys::None,
        run: Run::Session(s),
    }
}

/// The family's commands.
pub const COMMANDS: &[Spec] = &[
    session("sx.begin", -1, Session::SxBegin),
    session("sx.commit", 1, Session::SxCommit),
    session("sx.abort", 1, Session::SxAbort),
    session("sx.durability", -1, Session::SxDurability),
    session("sx.readat", 2, Session::SxReadAt),
    session("sx.patchgroup", -2, Session::SxPatchgroup),
];
