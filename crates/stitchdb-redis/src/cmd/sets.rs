//! Set commands: `SADD`, `SISMEMBER`, `SPOP`, `SINTER` ... Each member is a member record
//! (tag `MEMBER`, empty value), so a command reads and writes only the members it names,
//! plus the key's metadata record; the set operations walk the smallest (or first) set and
//! look its members up in the others, as Redis does.

use super::collection::{self, Coll};
use super::{args, single_key, CmdResult, Failure, Keys, Run, Spec};
use crate::keyspace::encoding::{tag::MEMBER, Kind};
use crate::keyspace::Ctx;
use crate::resp::reply::Reply;
use std::collections::BTreeSet;

/// Every argument from the first on is a key.
const FROM_FIRST: Keys = Keys::Range {
    first: 1,
    last: -1,
    step: 1,
};

/// The family's commands.
pub const COMMANDS: &[Spec] = &[
    single_key("sadd", -3, &["write", "denyoom", "fast"], sadd),
    single_key("srem", -3, &["write", "fast"], srem),
    single_key("smembers", 2, &["readonly"], smembers),
    single_key("sismember", 3, &["readonly", "fast"], sismember),
    single_key("smismember", -3, &["readonly", "fast"], smismember),
    single_key("scard", 2, &["readonly", "fast"], scard),
    single_key("spop", -2, &["write", "fast"], spop),
    single_key("srandmember", -2, &["readonly"], srandmember),
    Spec {
        name: "smove",
        arity: 4,
        flags: &["write", "fast"],
        keys: Keys::Range {
            first: 1,
            last: 2,
            step: 1,
        },
        run: Run::Data(smove),
    },
    Spec {
        name: "sinter",
        arity: -2,
        flags: &["readonly"],
        keys: FROM_FIRST,
        run: Run::Data(sinter),
    },
    Spec {
        name: "sunion",
        arity: -2,
        flags: &["readonly"],
        keys: FROM_FIRST,
        run: Run::Data(sunion),
    },
    Spec {
        name: "sdiff",
        arity: -2,
        flags: &["readonly"],
        keys: FROM_FIRST,
        run: Run::Data(sdiff),
    },
    Spec {
        name: "sinterstore",
        arity: -3,
        flags: &["write", "denyoom"],
        keys: FROM_FIRST,
        run: Run::Data(sinterstore),
    },
    Spec {
        name: "sunionstore",
        arity: -3,
        flags: &["write", "denyoom"],
        keys: FROM_FIRST,
        run: Run::Data(sunionstore),
    },
    Spec {
        name: "sdiffstore",
        arity: -3,
        flags: &["write", "denyoom"],
        keys: FROM_FIRST,
        run: Run::Data(sdiffstore),
    },
    Spec {
        name: "sintercard",
        arity: -3,
        flags: &["readonly", "movablekeys"],
        keys: Keys::Custom(sintercard_keys, 0, 0, 0),
        run: Run::Data(sintercard),
    },
    single_key("sscan", -3, &["readonly"], sscan),
];

/// The set at `key` (`None`: no such key).
fn load<'k>(ctx: &mut Ctx<'_>, key: &'k [u8]) -> Result<Option<Coll<'k>>, Failure> {
    Coll::load(ctx, key, Kind::Set)
}

fn contains(ctx: &mut Ctx<'_>, set: &Coll<'_>, member: &[u8]) -> Result<bool, Failure> {
    Ok(set.get(ctx, MEMBER, member)?.is_some())
}

/// Members as a RESP3 set.
fn set_reply(members: Vec<Vec<u8>>) -> Reply {
    Reply::Set(members.into_iter().map(Reply::Bulk).collect())
}

fn sadd(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let mut set = Coll::load_or_create(ctx, &a[1], Kind::Set)?;
    for m in &a[2..] {
        collection::check_member(&a[1], m)?;
    }
    let mut added = 0;
    for m in &a[2..] {
        added += i64::from(set.insert_if_absent(ctx, MEMBER, m, b"")?);
    }
    set.save(ctx)?;
    Ok(Reply::Int(added))
}

fn srem(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let Some(mut set) = load(ctx, &a[1])? else {
        return Ok(Reply::Int(0));
    };
    let mut removed = 0;
    for m in &a[2..] {
        removed += i64::from(set.remove(ctx, MEMBER, m)?);
    }
    set.save(ctx)?;
    Ok(Reply::Int(removed))
}

fn smembers(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let members = match load(ctx, &a[1])? {
        Some(set) => set.all(ctx, MEMBER)?.into_iter().map(|(m, _)| m).collect(),
        None => Vec::new(),
    };
    Ok(set_reply(members))
}

/// Whether each of `members` is in the set at `key`.
fn membership(ctx: &mut Ctx<'_>, key: &[u8], members: &[Vec<u8>]) -> Result<Vec<Reply>, Failure> {
    let set = load(ctx, key)?;
    let mut out = Vec::with_capacity(members.len());
    for m in members {
        let yes = match &set {
            Some(s) => contains(ctx, s, m)?,
            None => false,
        };
        out.push(Reply::Int(i64::from(yes)));
    }
    Ok(out)
}

fn sismember(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let mut one = membership(ctx, &a[1], &a[2..])?;
    Ok(one.pop().unwrap_or(Reply::Int(0)))
}

fn smismember(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Array(membership(ctx, &a[1], &a[2..])?))
}

fn scard(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Int(load(ctx, &a[1])?.map_or(0, |s| s.size() as i64)))
}

/// `count` random members of `set` (see [`collection::random_positions`]).
fn pick(
    ctx: &mut Ctx<'_>,
    set: &Coll<'_>,
    count: u64,
    distinct: bool,
) -> Result<Vec<Vec<u8>>, Failure> {
    let positions = collection::random_positions(set.size(), count, distinct)?;
    let picked = set.at_positions(ctx, MEMBER, &positions)?;
    Ok(picked.into_iter().map(|(m, _)| m).collect())
}

fn spop(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    if a.len() > 3 {
        return Err(args::syntax());
    }
    let count = match a.get(2) {
        None => None,
        Some(c) => Some(
            args::int(c)
                .ok()
                .filter(|n| *n >= 0)
                .ok_or_else(|| args::err("ERR value is out of range, must be positive"))?
                as u64,
        ),
    };
    let Some(mut set) = load(ctx, &a[1])? else {
        return Ok(count.map_or(Reply::Nil, |_| set_reply(Vec::new())));
    };
    let popped = pick(ctx, &set, count.unwrap_or(1), true)?;
    if count.unwrap_or(1) >= set.size() {
        set.clear();
    } else {
        for m in &popped {
            set.remove(ctx, MEMBER, m)?;
        }
    }
    set.save(ctx)?;
    Ok(match count {
        None => Reply::opt_bulk(popped.into_iter().next()),
        Some(_) => set_reply(popped),
    })
}

fn srandmember(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    if a.len() > 3 {
        return Err(args::syntax());
    }
    let Some(count) = a.get(2) else {
        let picked = match load(ctx, &a[1])? {
            Some(set) => pick(ctx, &set, 1, true)?,
            None => Vec::new(),
        };
        return Ok(Reply::opt_bulk(picked.into_iter().next()));
    };
    let (count, distinct) = collection::random_count(count)?;
    let picked = match load(ctx, &a[1])? {
        Some(set) => pick(ctx, &set, count, distinct)?,
        None => Vec::new(),
    };
    Ok(Reply::bulks(picked))
}

fn smove(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let (from, to, member) = (&a[1], &a[2], &a[3]);
    let Some(mut src) = load(ctx, from)? else {
        return Ok(Reply::Int(0));
    };
    // Redis checks the destination's type even when there is nothing to move.
    let dst = load(ctx, to)?;
    if from == to {
        return Ok(Reply::Int(i64::from(contains(ctx, &src, member)?)));
    }
    collection::check_member(to, member)?;
    if !src.remove(ctx, MEMBER, member)? {
        return Ok(Reply::Int(0));
    }
    let mut dst = match dst {
        Some(d) => d,
        None => Coll::create(ctx, to, Kind::Set)?,
    };
    dst.insert_if_absent(ctx, MEMBER, member, b"")?;
    src.save(ctx)?;
    dst.save(ctx)?;
    Ok(Reply::Int(1))
}

/// A set operation.
#[derive(Clone, Copy)]
enum Op {
    Inter,
    Union,
    Diff,
}

/// The members of `op` over the sets at `keys`, in order, passed to `each` until it says
/// stop (`SINTERCARD`'s `LIMIT`). Every key's type is checked first, as Redis checks them.
fn combine(
    ctx: &mut Ctx<'_>,
    keys: &[Vec<u8>],
    op: Op,
    mut each: impl FnMut(Vec<u8>) -> bool,
) -> Result<(), Failure> {
    let mut sets = Vec::with_capacity(keys.len());
    for k in keys {
        sets.push(load(ctx, k)?);
    }
    match op {
        Op::Inter => {
            // An absent key is an empty set, and so is the intersection.
            let Some(mut sets) = sets.into_iter().collect::<Option<Vec<_>>>() else {
                return Ok(());
            };
            sets.sort_by_key(Coll::size);
            let Some((first, rest)) = sets.split_first() else {
                return Ok(());
            };
            filter_first(ctx, first, &rest.iter().collect::<Vec<_>>(), true, each)
        }
        Op::Diff => {
            let Some(Some(first)) = sets.first() else {
                return Ok(());
            };
            let rest: Vec<&Coll<'_>> = sets[1..].iter().flatten().collect();
            filter_first(ctx, first, &rest, false, each)
        }
        Op::Union => {
            let mut all = BTreeSet::new();
            for set in sets.iter().flatten() {
                for r in set.records(ctx, MEMBER, b"")? {
                    all.insert(r?.0);
                }
            }
            for m in all {
                if !each(m) {
                    break;
                }
            }
            Ok(())
        }
    }
}

/// The members of `first` that are in every one of `rest` (`all`), or in none of them.
fn filter_first(
    ctx: &mut Ctx<'_>,
    first: &Coll<'_>,
    rest: &[&Coll<'_>],
    all: bool,
    mut each: impl FnMut(Vec<u8>) -> bool,
) -> Result<(), Failure> {
    'members: for r in first.records(ctx, MEMBER, b"")? {
        let (m, _) = r?;
        for other in rest {
            if contains(ctx, other, &m)? != all {
                continue 'members;
            }
        }
        if !each(m) {
            break;
        }
    }
    Ok(())
}

/// The members of `op` over the sets at `keys`.
fn members_of(ctx: &mut Ctx<'_>, keys: &[Vec<u8>], op: Op) -> Result<Vec<Vec<u8>>, Failure> {
    let mut out = Vec::new();
    combine(ctx, keys, op, |m| {
        out.push(m);
        true
    })?;
    Ok(out)
}

fn sinter(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    Ok(set_reply(members_of(ctx, &a[1..], Op::Inter)?))
}

fn sunion(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    Ok(set_reply(members_of(ctx, &a[1..], Op::Union)?))
}

fn sdiff(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    Ok(set_reply(members_of(ctx, &a[1..], Op::Diff)?))
}

/// Stores the members of `op` over the sets at `a[2..]` as the set at `a[1]`, replacing
/// whatever it held (deleting it if they are none); how many.
fn store(ctx: &mut Ctx<'_>, a: &[Vec<u8>], op: Op) -> CmdResult {
    // All read before the destination (perhaps one of the sources) is written.
    let members = members_of(ctx, &a[2..], op)?;
    for m in &members {
        collection::check_member(&a[1], m)?;
    }
    let mut dst = Coll::create(ctx, &a[1], Kind::Set)?;
    for m in &members {
        dst.insert_new(ctx, MEMBER, m, b"")?;
    }
    dst.save(ctx)?;
    Ok(Reply::Int(members.len() as i64))
}

fn sinterstore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    store(ctx, a, Op::Inter)
}

fn sunionstore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    store(ctx, a, Op::Union)
}

fn sdiffstore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    store(ctx, a, Op::Diff)
}

/// `SINTERCARD numkeys key ...`: how many keys, as Redis checks it.
fn numkeys(a: &[Vec<u8>]) -> Result<usize, Failure> {
    let n = args::int(&a[1])
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| args::err("ERR numkeys should be greater than 0"))?;
    if n as u64 > (a.len() - 2) as u64 {
        return Err(args::err(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    Ok(n as usize)
}

/// `SINTERCARD`'s keys (none if `numkeys` is wrong: the command fails).
fn sintercard_keys(a: &[Vec<u8>]) -> Vec<usize> {
    numkeys(a).map_or_else(|_| Vec::new(), |n| (2..2 + n).collect())
}

fn sintercard(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let n = numkeys(a)?;
    let mut limit = 0u64;
    let mut i = 2 + n;
    while i < a.len() {
        if !args::is(&a[i], "limit") || i + 1 >= a.len() {
            return Err(args::syntax());
        }
        limit = args::int(&a[i + 1])
            .ok()
            .filter(|l| *l >= 0)
            .ok_or_else(|| args::err("ERR LIMIT can't be negative"))? as u64;
        i += 2;
    }
    let mut count = 0u64;
    combine(ctx, &a[2..2 + n], Op::Inter, |_| {
        count += 1;
        limit == 0 || count < limit
    })?;
    Ok(Reply::Int(count as i64))
}

fn sscan(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    collection::scan_records(ctx, a, Kind::Set, MEMBER, |(m, _), out| {
        out.push(Reply::Bulk(m))
    })
}
