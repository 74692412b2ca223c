//! StitchDB's connection commands (`docs/redis.md`): interactive transactions
//! (`SX.BEGIN` ... `SX.COMMIT`), reads at a snapshot, durability and patchgroups.

use super::{Conn, Open};
use crate::cmd::subs::{find_sub, help};
use crate::cmd::sx::engine_err;
use crate::cmd::{args, CmdResult, DataFn, Failure, Session};
use crate::keyspace::ctx::Slot;
use crate::keyspace::{Ctx, Keyspace, Outcome};
use crate::resp::reply::Reply;
use std::sync::Arc;
use stitchdb::{Db, Durability, GroupId, Isolation, PatchContext};

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
        Session::SxReadAt => read_at(conn, &a[1]),
        Session::SxPatchgroup => patchgroup(conn, a),
        _ => Err(args::err("ERR unexpected SX command")),
    }
}

fn begin(conn: &mut Conn<'_>, a: &[Vec<u8>]) -> CmdResult {
    if conn.open.is_some() {
        return Err(args::err("ERR SX.BEGIN inside a transaction"));
    }
    if conn.read_at.is_some() {
        return Err(args::err(
            "ERR SX.BEGIN while reading at a snapshot: SX.READAT LIVE first",
        ));
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
    // those keys runs; alone if it emptied a database, as `FLUSHDB` runs.
    let (_whole_shared, _whole_alone);
    if open.outcome.flushed.is_empty() {
        _whole_shared = ks.whole.read();
    } else {
        _whole_alone = ks.whole.write();
    }
    let _held = ks
        .locks
        .lock(open.outcome.touched.iter().map(|(d, k)| (*d, k.as_slice())));
    open.txn
        .commit_with(conn.commit_durability())
        .map_err(Failure::from)?;
    ks.apply(&open.outcome);
    conn.owe(open.outcome.wrote);
    Ok(Reply::Ok)
}

/// The names `SX.DURABILITY` takes and replies with.
const LEVELS: [(&str, Durability); 4] = [
    ("sync", Durability::Sync),
    ("written", Durability::Written),
    ("ordered", Durability::Ordered),
    ("async", Durability::Async),
];

fn durability(conn: &mut Conn<'_>, a: &[Vec<u8>]) -> CmdResult {
    let Some(level) = a.get(1) else {
        let name = LEVELS
            .iter()
            .find(|(_, d)| *d == conn.durability)
            .map_or("sync", |(n, _)| n);
        return Ok(Reply::bulk(name));
    };
    if a.len() > 2 {
        return Err(args::syntax());
    }
    conn.durability = LEVELS
        .iter()
        .find(|(n, _)| args::is(level, n))
        .map(|(_, d)| *d)
        .ok_or_else(args::syntax)?;
    Ok(Reply::Ok)
}

/// `SX.READAT name`: the connection's reads see snapshot `name`, and its writes are refused,
/// until `SX.READAT LIVE`.
fn read_at(conn: &mut Conn<'_>, name: &[u8]) -> CmdResult {
    if conn.open.is_some() {
        return Err(args::err("ERR SX.READAT inside a transaction"));
    }
    if args::is(name, "live") {
        conn.read_at = None;
        return Ok(Reply::Ok);
    }
    let name =
        std::str::from_utf8(name).map_err(|_| args::err("ERR snapshot names are UTF-8 text"))?;
    let snap = conn.shared.ks.db.open_snapshot(name).map_err(engine_err)?;
    conn.read_at = Some(snap);
    Ok(Reply::Ok)
}

/// The patchgroups a connection made and engaged. Engagements are in the connection
/// thread's own patch context: the connection commits on its own thread, so its commits
/// carry the groups engaged there and no other client's do. Dropped with the connection (or
/// by `RESET`), it ends its engagements and closes the groups it made; their writes still
/// reach the disk in order.
#[derive(Default)]
pub(super) struct Groups {
    db: Option<Arc<Db>>,
    /// Groups this connection made and has not released.
    made: Vec<GroupId>,
    /// One entry per engagement open here.
    engaged: Vec<GroupId>,
}

impl Drop for Groups {
    fn drop(&mut self) {
        let Some(db) = &self.db else { return };
        let ctx = PatchContext::current();
        for g in self.engaged.drain(..) {
            let _ = db.pg_disengage(&ctx, g);
        }
        for g in self.made.drain(..) {
            let _ = db.pg_close(g);
        }
    }
}

fn group_id(arg: &[u8]) -> Result<GroupId, Failure> {
    let n = args::int(arg)?;
    u64::try_from(n)
        .map(GroupId)
        .map_err(|_| args::not_integer())
}

/// `SX.PATCHGROUP CREATE | DEPEND after before | ENGAGE id | DISENGAGE id | SYNC id |
/// RELEASE id`.
fn patchgroup(conn: &mut Conn<'_>, a: &[Vec<u8>]) -> CmdResult {
    let sub = find_sub("sx.patchgroup", a)?;
    let db = conn.shared.ks.db.clone();
    let groups = &mut conn.groups;
    groups.db.get_or_insert_with(|| db.clone());
    let ctx = PatchContext::current();
    match sub.name {
        "sx.patchgroup|create" => {
            let g = db.pg_create();
            groups.made.push(g);
            return Ok(Reply::Int(g.0 as i64));
        }
        "sx.patchgroup|depend" => {
            db.pg_depend(group_id(&a[2])?, group_id(&a[3])?)
                .map_err(engine_err)?;
        }
        "sx.patchgroup|engage" => {
            let g = group_id(&a[2])?;
            db.pg_engage(&ctx, g).map_err(engine_err)?;
            groups.engaged.push(g);
        }
        "sx.patchgroup|disengage" => {
            let g = group_id(&a[2])?;
            db.pg_disengage(&ctx, g).map_err(engine_err)?;
            if let Some(i) = groups.engaged.iter().position(|&e| e == g) {
                groups.engaged.remove(i);
            }
        }
        "sx.patchgroup|sync" => {
            db.pg_sync(group_id(&a[2])?).map_err(engine_err)?;
        }
        "sx.patchgroup|release" => {
            let g = group_id(&a[2])?;
            for _ in groups.engaged.iter().filter(|&&e| e == g) {
                db.pg_disengage(&ctx, g).map_err(engine_err)?;
            }
            groups.engaged.retain(|&e| e != g);
            db.pg_close(g).map_err(engine_err)?;
            groups.made.retain(|&m| m != g);
        }
        _ => return Ok(help("sx.patchgroup")),
    }
    Ok(Reply::Ok)
}
