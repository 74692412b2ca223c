//! Hash commands: `HSET`, `HGET`, `HINCRBYFLOAT`, `HRANDFIELD`, `HSCAN` ... Each field is a
//! member record (tag `FIELD`) whose value is the field's value, so a command reads and
//! writes only the fields it names, plus the key's metadata record.

use super::collection::{self, Coll, Record};
use super::longdouble::{self, Num};
use super::{args, single_key, CmdResult, Failure, Spec};
use crate::keyspace::encoding::{tag::FIELD, Kind};
use crate::keyspace::Ctx;
use crate::resp::reply::Reply;
use std::collections::BTreeMap;

/// The family's commands.
pub const COMMANDS: &[Spec] = &[
    single_key("hset", -4, &["write", "denyoom", "fast"], hset),
    single_key("hmset", -4, &["write", "denyoom", "fast"], hmset),
    single_key("hsetnx", 4, &["write", "denyoom", "fast"], hsetnx),
    single_key("hget", 3, &["readonly", "fast"], hget),
    single_key("hmget", -3, &["readonly", "fast"], hmget),
    single_key("hdel", -3, &["write", "fast"], hdel),
    single_key("hlen", 2, &["readonly", "fast"], hlen),
    single_key("hexists", 3, &["readonly", "fast"], hexists),
    single_key("hstrlen", 3, &["readonly", "fast"], hstrlen),
    single_key("hgetall", 2, &["readonly"], hgetall),
    single_key("hkeys", 2, &["readonly"], hkeys),
    single_key("hvals", 2, &["readonly"], hvals),
    single_key("hincrby", 4, &["write", "denyoom", "fast"], hincrby),
    single_key(
        "hincrbyfloat",
        4,
        &["write", "denyoom", "fast"],
        hincrbyfloat,
    ),
    single_key("hrandfield", -2, &["readonly"], hrandfield),
    single_key("hscan", -3, &["readonly"], hscan),
];

/// The hash at `a[1]` (`None`: no such key).
fn load<'k>(ctx: &mut Ctx<'_>, a: &'k [Vec<u8>]) -> Result<Option<Coll<'k>>, Failure> {
    Coll::load(ctx, &a[1], Kind::Hash)
}

/// The value of `field` in the hash at `a[1]`.
fn field(ctx: &mut Ctx<'_>, a: &[Vec<u8>], field: &[u8]) -> Result<Option<Vec<u8>>, Failure> {
    match load(ctx, a)? {
        Some(h) => h.get(ctx, FIELD, field),
        None => Ok(None),
    }
}

fn hset(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Int(set_fields(ctx, a, "hset")?))
}

fn hmset(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    set_fields(ctx, a, "hmset")?;
    Ok(Reply::Ok)
}

/// Sets the field-value pairs after the key; how many fields are new.
fn set_fields(ctx: &mut Ctx<'_>, a: &[Vec<u8>], name: &str) -> Result<i64, Failure> {
    if a.len() % 2 != 0 {
        return Err(args::err(args::arity_error(name)));
    }
    let mut h = Coll::load_or_create(ctx, &a[1], Kind::Hash)?;
    // A later pair of the same field wins.
    let pairs: BTreeMap<&[u8], &[u8]> = a[2..]
        .chunks_exact(2)
        .map(|p| (p[0].as_slice(), p[1].as_slice()))
        .collect();
    for f in pairs.keys() {
        collection::check_member(&a[1], f)?;
    }
    // The longest value goes first: if the store refuses it as too large, nothing was
    // written yet, and it takes every shorter one.
    let mut pairs: Vec<_> = pairs.into_iter().collect();
    pairs.sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
    let mut added = 0;
    for (f, v) in pairs {
        added += i64::from(h.insert(ctx, FIELD, f, v)?);
    }
    h.save(ctx)?;
    Ok(added)
}

fn hsetnx(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let mut h = Coll::load_or_create(ctx, &a[1], Kind::Hash)?;
    collection::check_member(&a[1], &a[2])?;
    let added = h.insert_if_absent(ctx, FIELD, &a[2], &a[3])?;
    h.save(ctx)?;
    Ok(Reply::Int(i64::from(added)))
}

fn hget(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::opt_bulk(field(ctx, a, &a[2])?))
}

fn hmget(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let h = load(ctx, a)?;
    let mut out = Vec::with_capacity(a.len() - 2);
    for f in &a[2..] {
        let v = match &h {
            Some(h) => h.get(ctx, FIELD, f)?,
            None => None,
        };
        out.push(Reply::opt_bulk(v));
    }
    Ok(Reply::Array(out))
}

fn hdel(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let Some(mut h) = load(ctx, a)? else {
        return Ok(Reply::Int(0));
    };
    let mut removed = 0;
    for f in &a[2..] {
        removed += i64::from(h.remove(ctx, FIELD, f)?);
    }
    h.save(ctx)?;
    Ok(Reply::Int(removed))
}

fn hlen(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Int(load(ctx, a)?.map_or(0, |h| h.size() as i64)))
}

fn hexists(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Int(i64::from(field(ctx, a, &a[2])?.is_some())))
}

fn hstrlen(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Int(
        field(ctx, a, &a[2])?.map_or(0, |v| v.len() as i64),
    ))
}

/// Every field and value, in field order.
fn all_fields(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Result<Vec<Record>, Failure> {
    match load(ctx, a)? {
        Some(h) => h.all(ctx, FIELD),
        None => Ok(Vec::new()),
    }
}

fn hgetall(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let pairs = all_fields(ctx, a)?;
    Ok(Reply::Map(
        pairs
            .into_iter()
            .map(|(f, v)| (Reply::Bulk(f), Reply::Bulk(v)))
            .collect(),
    ))
}

fn hkeys(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::bulks(
        all_fields(ctx, a)?.into_iter().map(|(f, _)| f),
    ))
}

fn hvals(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::bulks(
        all_fields(ctx, a)?.into_iter().map(|(_, v)| v),
    ))
}

fn hincrby(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let by = args::int(&a[3])?;
    let mut h = Coll::load_or_create(ctx, &a[1], Kind::Hash)?;
    let current = match h.get(ctx, FIELD, &a[2])? {
        Some(v) => crate::resp::parse::parse_i64(&v)
            .ok_or_else(|| args::err("ERR hash value is not an integer"))?,
        None => 0,
    };
    let new = current
        .checked_add(by)
        .ok_or_else(|| args::err("ERR increment or decrement would overflow"))?;
    collection::check_member(&a[1], &a[2])?;
    h.insert(ctx, FIELD, &a[2], new.to_string().as_bytes())?;
    h.save(ctx)?;
    Ok(Reply::Int(new))
}

fn hincrbyfloat(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let by = match longdouble::parse(&a[3]) {
        Some(Num::Infinite) => return Err(args::err("ERR value is NaN or Infinity")),
        Some(by) => by,
        None => return Err(args::not_float()),
    };
    let mut h = Coll::load_or_create(ctx, &a[1], Kind::Hash)?;
    let current = match h.get(ctx, FIELD, &a[2])? {
        None => Num::Finite(longdouble::LongDouble::ZERO),
        Some(v) => {
            longdouble::parse(&v).ok_or_else(|| args::err("ERR hash value is not a float"))?
        }
    };
    let sum = longdouble::add(current, by)
        .map(longdouble::format)
        .ok_or_else(|| args::err("ERR increment would produce NaN or Infinity"))?;
    collection::check_member(&a[1], &a[2])?;
    h.insert(ctx, FIELD, &a[2], sum.as_bytes())?;
    h.save(ctx)?;
    Ok(Reply::bulk(sum))
}

fn hrandfield(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    if a.len() == 2 {
        let Some(h) = load(ctx, a)? else {
            return Ok(Reply::Nil);
        };
        let picked = h.at_positions(
            ctx,
            FIELD,
            &collection::random_positions(h.size(), 1, true)?,
        )?;
        return Ok(Reply::opt_bulk(picked.into_iter().next().map(|(f, _)| f)));
    }
    let (count, distinct) = collection::random_count(&a[2])?;
    let with_values = match a.get(3) {
        None => false,
        Some(w) if a.len() == 4 && args::is(w, "withvalues") => true,
        Some(_) => return Err(args::syntax()),
    };
    // Redis's bound, so that field and value together still count below 2^63.
    if with_values && count > i64::MAX as u64 / 2 {
        return Err(args::err("ERR value is out of range"));
    }
    let Some(h) = load(ctx, a)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let positions = collection::random_positions(h.size(), count, distinct)?;
    let picked = h.at_positions(ctx, FIELD, &positions)?;
    Ok(if with_values {
        Reply::Pairs(
            picked
                .into_iter()
                .map(|(f, v)| (Reply::Bulk(f), Reply::Bulk(v)))
                .collect(),
        )
    } else {
        Reply::bulks(picked.into_iter().map(|(f, _)| f))
    })
}

fn hscan(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    collection::scan_records(ctx, a, Kind::Hash, FIELD, |(f, v), out| {
        out.push(Reply::Bulk(f));
        out.push(Reply::Bulk(v));
    })
}
