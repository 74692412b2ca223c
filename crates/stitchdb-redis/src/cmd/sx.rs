//! StitchDB's own commands (`docs/redis.md`): ordered ranges, interactive transactions,
//! snapshots, durability and patchgroups per connection.

use super::subs::{find_sub, help, Sub};
use super::{args, CmdResult, Failure, Keys, Run, Session, Spec};
use crate::keyspace::encoding::{Body, Meta};
use crate::keyspace::{Ctx, Table};
use crate::resp::reply::Reply;
use std::ops::Bound;

/// A command the connection runs. `no_multi`: each changes how the connection's later
/// commands run, which a queued transaction cannot take back.
const fn sx_session(name: &'static str, arity: i32, s: Session) -> Spec {
    super::session(name, arity, &["noscript", "fast", "no_multi"], s)
}

/// The family's commands.
pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "sx.range",
        arity: -4,
        flags: &["readonly"],
        keys: Keys::None,
        run: Run::Data(range),
    },
    Spec {
        name: "sx.snapshot",
        arity: -2,
        flags: &["admin", "noscript"],
        keys: Keys::None,
        run: Run::Data(snapshot),
    },
    sx_session("sx.begin", -1, Session::SxBegin),
    sx_session("sx.commit", 1, Session::SxCommit),
    sx_session("sx.abort", 1, Session::SxAbort),
    sx_session("sx.durability", -1, Session::SxDurability),
    sx_session("sx.readat", 2, Session::SxReadAt),
    sx_session("sx.patchgroup", -2, Session::SxPatchgroup),
];

const SX_FLAGS: &[&str] = &["admin", "noscript"];

/// `SX.SNAPSHOT`'s subcommands.
pub const SNAPSHOT_SUBS: &[Sub] = &[
    Sub {
        name: "sx.snapshot|create",
        arity: 3,
        flags: SX_FLAGS,
        help: &[
            "CREATE <name>",
            "    Take a named snapshot of the whole store, durably.",
        ],
    },
    Sub {
        name: "sx.snapshot|list",
        arity: 2,
        flags: SX_FLAGS,
        help: &["LIST", "    List the store's named snapshots."],
    },
    Sub {
        name: "sx.snapshot|drop",
        arity: 3,
        flags: SX_FLAGS,
        help: &["DROP <name>", "    Drop a named snapshot, durably."],
    },
    Sub {
        name: "sx.snapshot|help",
        arity: 2,
        flags: SX_FLAGS,
        help: &[],
    },
];

/// `SX.PATCHGROUP`'s subcommands (run by the connection, `conn::sx`).
pub const PATCHGROUP_SUBS: &[Sub] = &[
    Sub {
        name: "sx.patchgroup|create",
        arity: 2,
        flags: SX_FLAGS,
        help: &["CREATE", "    Make a patchgroup; returns its id."],
    },
    Sub {
        name: "sx.patchgroup|depend",
        arity: 4,
        flags: SX_FLAGS,
        help: &[
            "DEPEND <after> <before>",
            "    <after>'s writes reach the disk only after <before>'s (seals <before>).",
        ],
    },
    Sub {
        name: "sx.patchgroup|engage",
        arity: 3,
        flags: SX_FLAGS,
        help: &[
            "ENGAGE <id>",
            "    This connection's commits belong to the group until DISENGAGE.",
        ],
    },
    Sub {
        name: "sx.patchgroup|disengage",
        arity: 3,
        flags: SX_FLAGS,
        help: &[
            "DISENGAGE <id>",
            "    End this connection's engagement of the group.",
        ],
    },
    Sub {
        name: "sx.patchgroup|sync",
        arity: 3,
        flags: SX_FLAGS,
        help: &["SYNC <id>", "    Make every write of the group durable."],
    },
    Sub {
        name: "sx.patchgroup|release",
        arity: 3,
        flags: SX_FLAGS,
        help: &[
            "RELEASE <id>",
            "    Forget the group (its writes still reach the disk in order).",
        ],
    },
    Sub {
        name: "sx.patchgroup|help",
        arity: 2,
        flags: SX_FLAGS,
        help: &[],
    },
];

/// An engine error a client caused (a snapshot or patchgroup it named wrongly) as an `ERR`
/// reply; the store's own failures stay what they are.
pub fn engine_err(e: stitchdb::Error) -> Failure {
    match e {
        stitchdb::Error::NoSuchSnapshot(_)
        | stitchdb::Error::SnapshotExists(_)
        | stitchdb::Error::BadSnapshotName(..)
        | stitchdb::Error::PatchGroup(_) => args::err(format!("ERR {e}")),
        e => Failure::Store(e),
    }
}

/// `SX.RANGE db start end [LIMIT n] [REV]`: the string keys of database `db` from `start`
/// (inclusive, `-`: the first) to `end` (exclusive, `+`: past the last), in key order (from
/// the last if `REV`), at most `n` of them (negative: all), with their values; expired keys
/// and keys of other types are skipped.
fn range(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let db = args::int(&a[1])?;
    if db < 0 || db as usize >= ctx.ks.databases() {
        return Err(args::err("ERR DB index is out of range"));
    }
    let (mut limit, mut rev) = (None, false);
    let mut i = 4;
    while i < a.len() {
        if args::is(&a[i], "rev") {
            rev = true;
            i += 1;
        } else if args::is(&a[i], "limit") && i + 1 < a.len() {
            let n = args::int(&a[i + 1])?;
            limit = usize::try_from(n).ok();
            i += 2;
        } else {
            return Err(args::syntax());
        }
    }
    let start = match a[2].as_slice() {
        b"-" => Bound::Unbounded,
        s => Bound::Included(s),
    };
    let end = match a[3].as_slice() {
        b"+" => Bound::Unbounded,
        e => Bound::Excluded(e),
    };
    let selected = ctx.db();
    ctx.select(db as usize)?;
    let pairs = string_pairs(ctx, start, end, rev, limit.unwrap_or(usize::MAX));
    ctx.select(selected)?;
    Ok(Reply::Map(
        pairs?
            .into_iter()
            .map(|(k, v)| (Reply::Bulk(k), Reply::Bulk(v)))
            .collect(),
    ))
}

/// A key and its value.
type KeyValue = (Vec<u8>, Vec<u8>);

/// Up to `limit` string keys of the selected database within the bounds, and their values.
fn string_pairs(
    ctx: &mut Ctx<'_>,
    start: Bound<&[u8]>,
    end: Bound<&[u8]>,
    rev: bool,
    limit: usize,
) -> Result<Vec<KeyValue>, Failure> {
    let now = ctx.now;
    let mut out = Vec::new();
    if limit == 0 {
        return Ok(out);
    }
    for pair in ctx.scan(Table::Keys, start, end, rev)? {
        let (key, raw) = pair?;
        let meta = Meta::decode(&raw).map_err(|detail| {
            Failure::Store(stitchdb::Error::Corrupt {
                what: "Redis metadata record",
                place: format!("key {:?}", String::from_utf8_lossy(&key)),
                detail,
            })
        })?;
        if meta.expired(now) {
            continue;
        }
        if let Body::String(v) = meta.body {
            out.push((key, v));
            if out.len() == limit {
                break;
            }
        }
    }
    Ok(out)
}

/// `SX.SNAPSHOT CREATE name | LIST | DROP name`: the store's named snapshots, the same that
/// a mount of the store lists under `/.stitch/snapshots/`.
fn snapshot(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let sub = find_sub("sx.snapshot", a)?;
    let db = &ctx.ks.db;
    let name =
        || std::str::from_utf8(&a[2]).map_err(|_| args::err("ERR snapshot names are UTF-8 text"));
    match sub.name {
        "sx.snapshot|create" => {
            db.snapshot(name()?).map_err(engine_err)?;
            Ok(Reply::Ok)
        }
        "sx.snapshot|drop" => {
            db.drop_snapshot(name()?).map_err(engine_err)?;
            Ok(Reply::Ok)
        }
        "sx.snapshot|list" => Ok(Reply::Array(
            db.snapshots()
                .into_iter()
                .map(|s| {
                    Reply::Map(vec![
                        (Reply::bulk("name"), Reply::bulk(s.name)),
                        (Reply::bulk("seq"), Reply::Int(s.seq as i64)),
                        (Reply::bulk("data_bytes"), Reply::Int(s.data_bytes as i64)),
                    ])
                })
                .collect(),
        )),
        _ => Ok(help("sx.snapshot")),
    }
}
