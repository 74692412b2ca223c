//! `MULTI`, `EXEC`, `DISCARD`, `WATCH`, `UNWATCH` with Redis's semantics: commands queue
//! (an error while queueing makes `EXEC` fail with `EXECABORT`); `EXEC` runs them as one
//! commit, under the locks of every key they name and every key watched, so it is atomic
//! and isolated without making every `EXEC` wait for all others; a watched key changed since
//! `WATCH` makes `EXEC` reply nil and run nothing.

use super::{Conn, RETRIES};
use crate::cmd::{args, CmdResult, Failure, Keys, Run, Session, Spec};
use crate::keyspace::ctx::Slot;
use crate::keyspace::Ctx;
use crate::resp::reply::Reply;
use crate::shared::Shared;
use std::sync::atomic::Ordering;

/// Commands queued by `MULTI`.
#[derive(Default)]
pub(super) struct Queued {
    cmds: Vec<(&'static Spec, Vec<Vec<u8>>)>,
    /// A command was refused while queueing: `EXEC` will fail.
    failed: bool,
}

/// Whether `spec` runs at once even inside `MULTI`, as in Redis.
pub(super) fn runs_at_once(spec: &Spec) -> bool {
    matches!(
        spec.run,
        Run::Session(
            Session::Exec
                | Session::Discard
                | Session::Multi
                | Session::Watch
                | Session::Quit
                | Session::Reset
        )
    )
}

impl Conn<'_> {
    /// Queues a command inside `MULTI`.
    pub(super) fn queue(&mut self, spec: &'static Spec, args: Vec<Vec<u8>>) -> Reply {
        if spec.flags.contains(&"no_multi") {
            self.queue_failed();
            return Reply::Error("ERR Command not allowed inside a transaction".into());
        }
        if self.read_at.is_some() && spec.writes() {
            self.queue_failed();
            return Reply::Error("READONLY You can't write against a snapshot.".into());
        }
        if let Some(q) = &mut self.multi {
            q.cmds.push((spec, args));
            self.info.lock().multi = Some(q.cmds.len());
        }
        Reply::Simple("QUEUED".into())
    }

    /// Marks the transaction being queued, if any, as failed.
    pub(super) fn queue_failed(&mut self) {
        if let Some(q) = &mut self.multi {
            q.failed = true;
        }
    }
}

/// Runs one of the family's commands.
pub(super) fn run(conn: &mut Conn<'_>, s: Session, a: &[Vec<u8>]) -> CmdResult {
    match s {
        Session::Multi => {
            if conn.multi.is_some() {
                return Err(args::err("ERR MULTI calls can not be nested"));
            }
            conn.multi = Some(Queued::default());
            conn.info.lock().multi = Some(0);
            Ok(Reply::Ok)
        }
        Session::Discard => {
            if conn.multi.take().is_none() {
                return Err(args::err("ERR DISCARD without MULTI"));
            }
            conn.info.lock().multi = None;
            conn.unwatch_all();
            Ok(Reply::Ok)
        }
        Session::Watch => {
            if conn.multi.is_some() {
                return Err(args::err("ERR WATCH inside MULTI is not allowed"));
            }
            let mut ctx = Ctx::new(&conn.shared.ks, conn.db, Slot::Own(None))?;
            for key in &a[1..] {
                let k = (conn.db, key.clone());
                if !conn.watched.contains(&k) {
                    conn.shared.ks.watches.watch(conn.db, key, &conn.dirty);
                    if ctx.lookup(key)?.is_some() {
                        conn.watched_live.push(k.clone());
                    }
                    conn.watched.push(k);
                }
            }
            conn.info.lock().watching = conn.watched.len();
            Ok(Reply::Ok)
        }
        Session::Unwatch => {
            conn.unwatch_all();
            Ok(Reply::Ok)
        }
        Session::Exec => exec(conn),
        _ => Err(args::err("ERR unexpected transaction command")),
    }
}

fn exec(conn: &mut Conn<'_>) -> CmdResult {
    let Some(q) = conn.multi.take() else {
        return Err(args::err("ERR EXEC without MULTI"));
    };
    conn.info.lock().multi = None;
    if q.failed {
        conn.unwatch_all();
        return Err(args::err(
            "EXECABORT Transaction discarded because of previous errors.",
        ));
    }
    let shared: &Shared = conn.shared;
    let ks = &shared.ks;
    // The keys it names, in the database selected when each runs, and those watched.
    let mut keys: Vec<(usize, Vec<u8>)> = conn.watched.clone();
    let mut db = conn.db;
    let mut alone = false;
    for (spec, a) in &q.cmds {
        if let Run::Session(Session::Select) = spec.run {
            if let Ok(n) = args::int(&a[1]) {
                db = n.max(0) as usize;
            }
        }
        alone |= matches!(spec.keys, Keys::All);
        keys.extend(
            spec.key_positions(a)
                .into_iter()
                .map(|i| (db, a[i].clone())),
        );
    }
    let _whole_shared;
    let _whole_alone;
    if alone {
        _whole_alone = ks.whole.write();
    } else {
        _whole_shared = ks.whole.read();
    }
    let _held = ks.locks.lock(keys.iter().map(|(d, k)| (*d, k.as_slice())));
    if conn.dirty.load(Ordering::SeqCst) || watched_expired(conn)? {
        conn.unwatch_all();
        return Ok(Reply::NilArray);
    }
    conn.unwatch_all();
    if conn.open.is_some() {
        return Err(args::err(
            "ERR EXEC inside SX.BEGIN: queue nothing, the transaction is already open",
        ));
    }
    match conn.read_at.take() {
        // At a snapshot (`SX.READAT`) the queue holds reads only (writes were refused while
        // queueing): they run there, and there is nothing to commit.
        Some(snap) => {
            let done = Ctx::at_snapshot(ks, conn.db, &snap)
                .map_err(Failure::from)
                .and_then(|mut ctx| Ok((run_each(conn, &mut ctx, &q)?, ctx.db())));
            conn.read_at = Some(snap);
            let (replies, selected) = done?;
            conn.db = selected;
            conn.info.lock().db = selected;
            Ok(Reply::Array(replies))
        }
        None => run_queued(conn, &q),
    }
}

/// Runs the queued commands as one commit, again after a conflict with an interactive
/// transaction.
fn run_queued(conn: &mut Conn<'_>, q: &Queued) -> CmdResult {
    let shared: &Shared = conn.shared;
    let mut last = None;
    for _ in 0..RETRIES {
        let mut ctx = Ctx::new(&shared.ks, conn.db, Slot::Own(None))?;
        let replies = match run_each(conn, &mut ctx, q) {
            Ok(r) => r,
            Err(f) if f.is_conflict() => {
                last = Some(f);
                continue;
            }
            Err(f) => return Err(f),
        };
        let selected = ctx.db();
        match conn.commit(ctx) {
            Ok(()) => {
                conn.db = selected;
                conn.info.lock().db = selected;
                return Ok(Reply::Array(replies));
            }
            Err(f) if f.is_conflict() => last = Some(f),
            Err(f) => return Err(f),
        }
    }
    Err(last.unwrap_or_else(|| args::err("ERR transaction kept conflicting")))
}

/// Runs each queued command in `ctx`; their replies, errors included, or the conflict that
/// stopped them.
fn run_each(conn: &mut Conn<'_>, ctx: &mut Ctx<'_>, q: &Queued) -> Result<Vec<Reply>, Failure> {
    let mut replies = Vec::with_capacity(q.cmds.len());
    for (spec, a) in &q.cmds {
        let r = match spec.run {
            Run::Data(f) => f(ctx, a),
            Run::Session(Session::Select) => select_in(ctx, &a[1]),
            Run::Session(s) => Ok(conn.session(s, a).unwrap_or(Reply::Ok)),
        };
        match r {
            Ok(reply) => replies.push(reply),
            Err(f) if f.is_conflict() => return Err(f),
            Err(f) => replies.push(f.reply()),
        }
    }
    Ok(replies)
}

/// Whether a key that existed when watched is gone now without anyone changing it: it
/// expired (whether or not active expiry removed it yet).
fn watched_expired(conn: &Conn<'_>) -> Result<bool, crate::cmd::Failure> {
    for (db, key) in &conn.watched_live {
        let mut ctx = Ctx::new(&conn.shared.ks, *db, Slot::Own(None))?;
        if ctx.lookup(key)?.is_none() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `SELECT` inside `EXEC`: the commands after it use that database.
fn select_in(ctx: &mut Ctx<'_>, arg: &[u8]) -> CmdResult {
    let n = args::int(arg)?;
    if n < 0 || n as usize >= ctx.ks.databases() {
        return Err(args::err("ERR DB index is out of range"));
    }
    ctx.select(n as usize)?;
    Ok(Reply::Ok)
}
