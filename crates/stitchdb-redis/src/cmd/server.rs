//! Server and connection commands: the ones over data (`PING`, `DBSIZE`, `FLUSHDB` ...) run
//! here; the rest are tags the connection runs (`conn`).

use super::{args, CmdResult, Keys, Run, Session, Spec};
use crate::keyspace::Ctx;
use crate::resp::reply::Reply;

/// A command the connection runs.
const fn session(
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
