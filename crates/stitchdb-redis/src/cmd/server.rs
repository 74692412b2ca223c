//! Server and connection commands: the ones over data (`PING`, `DBSIZE`, `FLUSHDB` ...) run
//! here; the rest are tags the connection runs (`conn`). The subcommands of the commands
//! that have them (`CLIENT SETNAME`, `CONFIG GET` ...) are tables here too, for their arity
//! errors, their `HELP` and `COMMAND INFO`.

use super::subs::Sub;
use super::{args, session, CmdResult, Keys, Run, Session, Spec};
use crate::keyspace::Ctx;
use crate::resp::reply::Reply;

/// The family's commands.
pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "ping",
        arity: -1,
        flags: &["fast"],
        keys: Keys::None,
        run: Run::Data(ping),
    },
    Spec {
        name: "echo",
        arity: 2,
        flags: &["fast"],
        keys: Keys::None,
        run: Run::Data(echo),
    },
    Spec {
        name: "dbsize",
        arity: 1,
        flags: &["readonly", "fast"],
        keys: Keys::None,
        run: Run::Data(dbsize),
    },
    Spec {
        name: "flushdb",
        arity: -1,
        flags: &["write"],
        keys: Keys::All,
        run: Run::Data(flushdb),
    },
    Spec {
        name: "flushall",
        arity: -1,
        flags: &["write"],
        keys: Keys::All,
        run: Run::Data(flushall),
    },
    Spec {
        name: "time",
        arity: 1,
        flags: &["fast"],
        keys: Keys::None,
        run: Run::Data(time),
    },
    session(
        "auth",
        -2,
        &["noscript", "loading", "stale", "fast", "no_auth"],
        Session::Auth,
    ),
    session(
        "hello",
        -1,
        &["noscript", "loading", "stale", "fast", "no_auth"],
        Session::Hello,
    ),
    session("select", 2, &["loading", "stale", "fast"], Session::Select),
    session(
        "quit",
        -1,
        &["noscript", "loading", "stale", "fast", "no_auth"],
        Session::Quit,
    ),
    session(
        "reset",
        1,
        &["noscript", "loading", "stale", "fast", "no_auth"],
        Session::Reset,
    ),
    session(
        "multi",
        1,
        &["noscript", "loading", "stale", "fast"],
        Session::Multi,
    ),
    session(
        "exec",
        1,
        &["noscript", "loading", "stale", "skip_slowlog"],
        Session::Exec,
    ),
    session(
        "discard",
        1,
        &["noscript", "loading", "stale", "fast"],
        Session::Discard,
    ),
    Spec {
        name: "watch",
        arity: -2,
        flags: &["noscript", "loading", "stale", "fast"],
        keys: Keys::Range {
            first: 1,
            last: -1,
            step: 1,
        },
        run: Run::Session(Session::Watch),
    },
    session(
        "unwatch",
        1,
        &["noscript", "loading", "stale", "fast"],
        Session::Unwatch,
    ),
    session("client", -2, &[], Session::Client),
    session("command", -1, &["loading", "stale"], Session::Command),
    session("info", -1, &["loading", "stale"], Session::Info),
    session("config", -2, &[], Session::Config),
    session(
        "shutdown",
        -1,
        &["admin", "noscript", "loading", "stale", "no_multi"],
        Session::Shutdown,
    ),
    session(
        "save",
        1,
        &["admin", "noscript", "no_async_loading", "no_multi"],
        Session::Save,
    ),
    session(
        "bgsave",
        -1,
        &["admin", "noscript", "no_async_loading"],
        Session::Save,
    ),
    session(
        "lastsave",
        1,
        &["loading", "stale", "fast"],
        Session::LastSave,
    ),
];

const ADMIN: &[&str] = &["admin", "noscript", "loading", "stale"];
const PLAIN: &[&str] = &["noscript", "loading", "stale"];
const HELPS: &[&str] = &["loading", "stale"];

/// `CLIENT`'s subcommands.
pub const CLIENT_SUBS: &[Sub] = &[
    Sub {
        name: "client|getname",
        arity: 2,
        flags: PLAIN,
        help: &["GETNAME", "    Return the name of the current connection."],
    },
    Sub {
        name: "client|id",
        arity: 2,
        flags: PLAIN,
        help: &["ID", "    Return the ID of the current connection."],
    },
    Sub {
        name: "client|info",
        arity: 2,
        flags: PLAIN,
        help: &[
            "INFO",
            "    Return information about the current client connection.",
        ],
    },
    Sub {
        name: "client|kill",
        arity: -3,
        flags: ADMIN,
        help: &[
            "KILL <ip:port>",
            "    Kill connection made from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Kill connections. Options are:",
            "    * ID <client-id>",
            "      Kill connections by client id.",
            "    * ADDR <ip:port>",
            "      Kill connections made from the specified address",
            "    * LADDR <ip:port>",
            "      Kill connections made to specified local address",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Kill connections by type.",
            "    * USER <username>",
            "      Kill connections authenticated by <username>.",
            "    * SKIPME (YES|NO)",
            "      Skip killing current connection (default: yes).",
        ],
    },
    Sub {
        name: "client|list",
        arity: -2,
        flags: ADMIN,
        help: &[
            "LIST [options ...]",
            "    Return information about client connections. Options:",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Return clients of specified type.",
            "    * ID <client-id> [<client-id> ...]",
            "      Return clients with the given ids.",
        ],
    },
    Sub {
        name: "client|setname",
        arity: 3,
        flags: PLAIN,
        help: &[
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
        ],
    },
    Sub {
        name: "client|setinfo",
        arity: 4,
        flags: PLAIN,
        help: &[
            "SETINFO <LIB-NAME|LIB-VER> <value>",
            "    Set client library name or version (accepted, as Redis 7.2 does).",
        ],
    },
    Sub {
        name: "client|no-evict",
        arity: 3,
        flags: ADMIN,
        help: &[
            "NO-EVICT (ON|OFF)",
            "    Accepted; clients are never evicted here.",
        ],
    },
    Sub {
        name: "client|no-touch",
        arity: 3,
        flags: PLAIN,
        help: &[
            "NO-TOUCH (ON|OFF)",
            "    Accepted; keys keep no access times here.",
        ],
    },
    Sub {
        name: "client|help",
        arity: 2,
        flags: HELPS,
        help: &[],
    },
];

/// `CONFIG`'s subcommands.
pub const CONFIG_SUBS: &[Sub] = &[
    Sub {
        name: "config|get",
        arity: -3,
        flags: ADMIN,
        help: &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
        ],
    },
    Sub {
        name: "config|set",
        arity: -4,
        flags: ADMIN,
        help: &[
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
        ],
    },
    Sub {
        name: "config|resetstat",
        arity: 2,
        flags: ADMIN,
        help: &[
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
        ],
    },
    Sub {
        name: "config|rewrite",
        arity: 2,
        flags: ADMIN,
        help: &[
            "REWRITE",
            "    Rewrite the configuration file (there is none here).",
        ],
    },
    Sub {
        name: "config|help",
        arity: 2,
        flags: HELPS,
        help: &[],
    },
];

/// `COMMAND`'s subcommands.
pub const COMMAND_SUBS: &[Sub] = &[
    Sub { name: "command|count", arity: 2, flags: HELPS, help: &["COUNT", "    Return the total number of commands in this Redis server."] },
    Sub {
        name: "command|list",
        arity: -2,
        flags: HELPS,
        help: &[
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "    Filter with FILTERBY MODULE <name>, ACLCAT <category> or PATTERN <pattern>.",
        ],
    },
    Sub {
        name: "command|info",
        arity: -2,
        flags: HELPS,
        help: &["INFO [<command-name> ...]", "    Return details about multiple Redis commands (all if none is given)."],
    },
    Sub {
        name: "command|docs",
        arity: -2,
        flags: HELPS,
        help: &["DOCS [<command-name> ...]", "    Return documentation details about multiple Redis commands (all if none is given)."],
    },
    Sub {
        name: "command|getkeys",
        arity: -4,
        flags: HELPS,
        help: &["GETKEYS <full-command>", "    Return the keys from a full Redis command."],
    },
    Sub { name: "command|help", arity: 2, flags: HELPS, help: &[] },
];

fn ping(_: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    match a.len() {
        1 => Ok(Reply::Simple("PONG".into())),
        2 => Ok(Reply::Bulk(a[1].clone())),
        _ => Err(args::err(args::arity_error("ping"))),
    }
}

fn echo(_: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Bulk(a[1].clone()))
}

fn dbsize(ctx: &mut Ctx<'_>, _: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Int(ctx.ks.dbsize(ctx.db())?))
}

/// `FLUSHDB`/`FLUSHALL` take `ASYNC` or `SYNC`; both are one commit of range deletes here.
fn flush_mode(a: &[Vec<u8>]) -> Result<(), super::Failure> {
    match a.len() {
        1 => Ok(()),
        2 if args::is(&a[1], "async") || args::is(&a[1], "sync") => Ok(()),
        _ => Err(args::syntax()),
    }
}

fn flushdb(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    flush_mode(a)?;
    ctx.flush_db()?;
    Ok(Reply::Ok)
}

fn flushall(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    flush_mode(a)?;
    let selected = ctx.db();
    for db in 0..ctx.ks.databases() {
        ctx.select(db)?;
        ctx.flush_db()?;
    }
    ctx.select(selected)?;
    Ok(Reply::Ok)
}

fn time(_: &mut Ctx<'_>, _: &[Vec<u8>]) -> CmdResult {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Ok(Reply::bulks([
        now.as_secs().to_string().into_bytes(),
        now.subsec_micros().to_string().into_bytes(),
    ]))
}
