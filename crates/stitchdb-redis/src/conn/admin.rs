//! The connection and server commands: `AUTH`, `HELLO`, `CLIENT`, `COMMAND`, `INFO`,
//! `CONFIG`, `SAVE`, `BGSAVE`, `LASTSAVE`, `SHUTDOWN`.

mod client;
mod command;
mod config;
mod info;

use super::Conn;
use crate::cmd::{args, CmdResult, Failure, Session};
use crate::keyspace::ctx::now_ms;
use crate::resp::reply::Reply;
use std::sync::atomic::Ordering;

/// Runs one of the family's commands.
pub(super) fn run(conn: &mut Conn<'_>, s: Session, a: &[Vec<u8>]) -> CmdResult {
    match s {
        Session::Auth => auth(conn, a),
        Session::Hello => hello(conn, a),
        Session::Client => client::run(conn, a),
        Session::Command => command::run(conn, a),
        Session::Info => Ok(info::run(conn, a)),
        Session::Config => config::run(conn, a),
        Session::Save => save(conn, a),
        Session::LastSave => Ok(Reply::Int(
            conn.shared.last_save.load(Ordering::Relaxed) as i64
        )),
        _ => Err(args::err("ERR unexpected server command")),
    }
}

/// Records the subcommand a command ran, as `CLIENT LIST` shows it (`client|list`).
fn ran(conn: &Conn<'_>, full_name: &str) {
    let mut info = conn.info.lock();
    info.last_cmd.clear();
    info.last_cmd.push_str(full_name);
}

/// `SAVE`, `BGSAVE [SCHEDULE]`: every commit is in the store already; this makes them all
/// durable (a connection at a durability below `sync` may have left some in memory).
fn save(conn: &mut Conn<'_>, a: &[Vec<u8>]) -> CmdResult {
    let background = args::is(&a[0], "bgsave");
    if background && a.len() == 2 && !args::is(&a[1], "schedule") || a.len() > 2 {
        return Err(args::syntax());
    }
    conn.shared.ks.db.sync().map_err(Failure::Store)?;
    conn.shared
        .last_save
        .store(now_ms() / 1000, Ordering::Relaxed);
    Ok(if background {
        Reply::Simple("Background saving started".into())
    } else {
        Reply::Ok
    })
}

/// `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]`: stops the whole server (which makes every
/// commit durable as it stops, `NOSAVE` or not). No reply: the connection closes.
pub(super) fn shutdown(conn: &mut Conn<'_>, a: &[Vec<u8>]) -> Option<Reply> {
    let (mut save, mut nosave, mut abort, mut other) = (false, false, false, false);
    for w in &a[1..] {
        match args::text(w).to_ascii_lowercase().as_str() {
            "save" => save = true,
            "nosave" => nosave = true,
            "abort" => abort = true,
            "now" | "force" => other = true,
            _ => return Some(args::syntax().reply()),
        }
    }
    if (save && nosave) || (abort && (save || nosave || other)) {
        return Some(args::syntax().reply());
    }
    if abort {
        return Some(Reply::Error("ERR No shutdown in progress.".into()));
    }
    if let Err(e) = conn.shared.ks.db.sync() {
        tracing::error!("SHUTDOWN: syncing the store: {e}");
        return Some(Reply::Error(
            "ERR Errors trying to SHUTDOWN. Check logs.".into(),
        ));
    }
    tracing::info!("SHUTDOWN from client {}", conn.id());
    conn.closing = true;
    conn.shared.stop();
    None
}

/// Whether `user`/`pass` is the default user with the configured password.
fn check_password(conn: &Conn<'_>, user: &[u8], pass: &[u8]) -> CmdResult {
    let want = conn.shared.config.read().requirepass.clone();
    match want {
        Some(p) if user == b"default" && pass == p.as_bytes() => Ok(Reply::Ok),
        None if user == b"default" => Ok(Reply::Ok),
        _ => Err(args::err(
            "WRONGPASS invalid username-password pair or user is disabled.",
        )),
    }
}

fn auth(conn: &mut Conn<'_>, a: &[Vec<u8>]) -> CmdResult {
    let (user, pass) = match a.len() {
        2 => (&b"default"[..], &a[1]),
        3 => (&a[1][..], &a[2]),
        _ => return Err(args::syntax()),
    };
    if a.len() == 2 && conn.shared.config.read().requirepass.is_none() {
        return Err(args::err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"));
    }
    check_password(conn, user, pass)?;
    conn.authenticated = true;
    Ok(Reply::Ok)
}

fn hello(conn: &mut Conn<'_>, a: &[Vec<u8>]) -> CmdResult {
    let mut resp = conn.resp;
    let mut i = 1;
    if let Some(v) = a.get(1) {
        let v = args::int(v)
            .map_err(|_| args::err("ERR Protocol version is not an integer or out of range"))?;
        if !(2..=3).contains(&v) {
            return Err(args::err("NOPROTO unsupported protocol version"));
        }
        resp = v as u8;
        i = 2;
    }
    let mut name = None;
    while i < a.len() {
        if args::is(&a[i], "auth") && i + 2 < a.len() {
            check_password(conn, &a[i + 1], &a[i + 2])?;
            conn.authenticated = true;
            i += 3;
        } else if args::is(&a[i], "setname") && i + 1 < a.len() {
            name = Some(args::text(&a[i + 1]));
            i += 2;
        } else {
            return Err(args::err(format!(
                "ERR Syntax error in HELLO option '{}'",
                args::text(&a[i])
            )));
        }
    }
    if !conn.authenticated {
        return Err(args::err(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
        ));
    }
    conn.resp = resp;
    let id = {
        let mut info = conn.info.lock();
        info.resp = resp;
        if name.is_some() {
            info.name = name;
        }
        info.id
    };
    Ok(Reply::Map(vec![
        (Reply::bulk("server"), Reply::bulk("redis")),
        (Reply::bulk("version"), Reply::bulk(crate::REDIS_VERSION)),
        (Reply::bulk("proto"), Reply::Int(i64::from(resp))),
        (Reply::bulk("id"), Reply::Int(id as i64)),
        (Reply::bulk("mode"), Reply::bulk("standalone")),
        (Reply::bulk("role"), Reply::bulk("master")),
        (Reply::bulk("modules"), Reply::Array(vec![])),
    ]))
}
