//! StitchDB's connection commands (`docs/redis.md`): interactive transactions
//! (`SX.BEGIN` ... `SX.COMMIT`), reads at a snapshot, durability and patchgroups.

use super::{Conn, Open};
use crate::cmd::{args, CmdResult, DataFn, Failure, Session};
use crate::keyspace::ctx::Slot;
use crate::keyspace::{Ctx, Keyspace, Outcome};
use crate::resp::reply::Reply;
use stitchdb::{Durability, Isolation};

/// Runs one command inside the connection's open transaction, as a nested transaction: a
/// command that fails leaves nothing of itself behind.
pub(super) fn run_in(ks: &Keyspace, db: usize, open: &mut Open, f: DataFn, a: &[Vec<u8>]) -> Reply {
    let mut nested = open.txn.begin_nested();
    let run = Ctx::new(ks, db, Slot::Shared(&mut nested))
        .map_err(Failure::from)
        .and_then(|mut ctx| {
            let reply = f(&mut ctx, a)?;
            Ok((reply, ctx.finish(Durability::Async)?))
        });
    match run {
        Ok((reply, outcome)) => {
            nested.commit();
            open.outcome.merge(outcome);
            reply
        }
        Err(f) => f.reply(),
    }
}

/// Runs one of the family's commands.
pub(super) fn run(conn: &mut Conn<'_>, s: Session, a: &[Vec<u8>]) -> CmdResult {
    match s {
        Session::SxBegin => begin(conn, a),
        Session::SxCommit => commit(conn),
        Session::SxAbort => match conn.open.take() {
            Some(_) => Ok(Reply::Ok),
            None => Err(args::err("ERR SX.ABORT without SX.BEGIN")),
        },
        Session::SxDurability => durability(conn, a),
        _ => Err(args::err(format!(
            "ERR {} is not implemented yet",
            args::text(&a[0])
        ))),
    }
}

fn begin(conn: &mut Conn<'_>, a: &[Vec<u8>]) -> CmdResult {
    if conn.open.is_some() {
        return Err(args::err("ERR SX.BEGIN inside a transaction"));
    }
    if conn.multi.is_some() {
        return Err(args::err("ERR SX.BEGIN inside MULTI is not allowed"));
    }
    let isolation = match a.get(1) {
        None => Isolation::Snapshot,
        Some(w) if args::is(w, "snapshot") => Isolation::Snapshot,
        Some(w) if args::is(w, "serializable") => Isolation::Serializable,
        Some(_) => return Err(args::syntax()),
    };
    if a.len() > 2 {
        return Err(args::syntax());
    }
    let txn = conn.shared.ks.db.begin_owned(isolation)?;
    conn.open = Some(Open {
        txn,
        outcome: Outcome::default(),
    });
    Ok(Reply::Ok)
}

fn commit(conn: &mut Conn<'_>) -> CmdResult {
    let Some(open) = conn.open.take() else {
        return Err(args::err("ERR SX.COMMIT without SX.BEGIN"));
    };
    let ks = &conn.shared.ks;
    // Under the locks of what it changed, so watchers are told before any other command on
    // those keys runs.
    let _whole = ks.whole.read();
    let _held = ks
        .locks
        .lock(open.outcome.touched.iter().map(|(d, k)| (*d, k.as_slice())));
    let (how, later) = match conn.durability {
        Durability::Sync => (Durability::Async, true),
        d => (d, false),
    };
    open.txn.commit_with(how).map_err(Failure::from)?;
    ks.apply(&open.outcome);
    conn.unsynced |= open.outcome.wrote && later;
    Ok(Reply::Ok)
}

fn durability(conn: &mut Conn<'_>, a: &[Vec<u8>]) -> CmdResult {
    let Some(level) = a.get(1) else {
        let name = match conn.durability {
            Durability::Sync => "sync",
            Durability::Written => "written",
            Durability::Ordered => "ordered",
            Durability::Async => "async",
        };
        return Ok(Reply::bulk(name));
    };
    if a.len() > 2 {
        return Err(args::syntax());
    }
    conn.durability = match args::text(level).to_ascii_lowercase().as_str() {
        "sync" => Durability::Sync,
        "written" => Durability::Written,
        "ordered" => Durability::Ordered,
        "async" => Durability::Async,
        _ => return Err(args::syntax()),
    };
    Ok(Reply::Ok)
}
