//! String commands: `GET`, `SET` and its options, `SETNX`, `SETEX`, `PSETEX`, `GETSET`,
//! `GETDEL`, `GETEX`, `MGET`, `MSET`, `MSETNX`, `APPEND`, `STRLEN`, `GETRANGE`/`SUBSTR`,
//! `SETRANGE`, `INCR`/`DECR` and their `BY`s, `INCRBYFLOAT`. A string lives inline in its
//! key's metadata record, so every write of one is one record; what the store takes (a key
//! of `MAX_KEY_LEN`, a record of `Keyspace::max_value`) is checked before the first write.

use super::args::check_key;
use super::expiry::{self, MILLIS, SECONDS};
use super::longdouble;
use super::single_key;
use super::{args, CmdResult, Failure, Keys, Run, Spec};
use crate::keyspace::encoding::{Body, Kind, Meta};
use crate::keyspace::Ctx;
use crate::resp::reply::Reply;

/// The family's commands.
pub const COMMANDS: &[Spec] = &[
    single_key("get", 2, &["readonly", "fast"], get),
    single_key("set", -3, &["write", "denyoom"], set),
    single_key("setnx", 3, &["write", "denyoom", "fast"], setnx),
    single_key("setex", 4, &["write", "denyoom"], setex),
    single_key("psetex", 4, &["write", "denyoom"], psetex),
    single_key("getset", 3, &["write", "denyoom", "fast"], getset),
    single_key("getdel", 2, &["write", "fast"], getdel),
    single_key("getex", -2, &["write", "fast"], getex),
    Spec {
        name: "mget",
        arity: -2,
        flags: &["readonly", "fast"],
        keys: Keys::Range {
            first: 1,
            last: -1,
            step: 1,
        },
        run: Run::Data(mget),
    },
    Spec {
        name: "mset",
        arity: -3,
        flags: &["write", "denyoom"],
        keys: Keys::Range {
            first: 1,
            last: -1,
            step: 2,
        },
        run: Run::Data(mset),
    },
    Spec {
        name: "msetnx",
        arity: -3,
        flags: &["write", "denyoom"],
        keys: Keys::Range {
            first: 1,
            last: -1,
            step: 2,
        },
        run: Run::Data(msetnx),
    },
    single_key("append", 3, &["write", "denyoom", "fast"], append),
    single_key("strlen", 2, &["readonly", "fast"], strlen),
    single_key("getrange", 4, &["readonly"], getrange),
    single_key("substr", 4, &["readonly"], getrange),
    single_key("setrange", 4, &["write", "denyoom"], setrange),
    single_key("incr", 2, &["write", "denyoom", "fast"], incr),
    single_key("decr", 2, &["write", "denyoom", "fast"], decr),
    single_key("incrby", 3, &["write", "denyoom", "fast"], incrby),
    single_key("decrby", 3, &["write", "denyoom", "fast"], decrby),
    single_key("incrbyfloat", 3, &["write", "denyoom", "fast"], incrbyfloat),
];

/// Redis's largest string (`proto-max-bulk-len`, 512 MiB), which `APPEND`, `SETRANGE` and
/// `SETBIT` refuse to grow a string past with Redis's own errors.
pub const REDIS_MAX_STRING: u64 = 512 << 20;

// ----- what the store takes -----

/// Fails unless the store takes a string of `len` bytes (its metadata record holds it).
pub fn check_len(ctx: &Ctx<'_>, len: u64) -> Result<(), Failure> {
    let header = Meta::string(Vec::new()).encode().len();
    let limit = ctx.ks.max_value.saturating_sub(header);
    if len <= limit as u64 {
        return Ok(());
    }
    Err(args::err(format!(
        "ERR string of {len} bytes is over this store's limit of {limit} bytes"
    )))
}

/// Fails as Redis does for a string grown to `len` bytes (`checkStringLength`), then as
/// the store would: before the longer string is built.
pub fn check_grow(ctx: &Ctx<'_>, len: u64) -> Result<(), Failure> {
    if len > REDIS_MAX_STRING {
        return Err(args::err(
            "ERR string exceeds maximum allowed size (proto-max-bulk-len)",
        ));
    }
    check_len(ctx, len)
}

// ----- reading and writing strings -----

/// A string's value and deadline.
pub type Entry = (Vec<u8>, Option<u64>);

/// A string key's value and deadline (`None`: no such key; `WrongType` if another type).
pub fn string_entry(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<Option<Entry>, Failure> {
    Ok(match ctx.lookup_kind(key, Kind::String)? {
        Some(Meta {
            body: Body::String(v),
            expire_at,
            ..
        }) => Some((v, expire_at)),
        _ => None,
    })
}

/// A string key's value (`None`: no such key; `WrongType` if it holds another type).
pub fn string_value(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<Option<Vec<u8>>, Failure> {
    Ok(string_entry(ctx, key)?.map(|(v, _)| v))
}

/// Sets `key` to the string `value` expiring at `expire_at`, replacing whatever it held;
/// a deadline already passed deletes the key instead.
pub fn put_string(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    value: Vec<u8>,
    expire_at: Option<u64>,
) -> Result<(), Failure> {
    if expire_at.is_some_and(|at| at <= ctx.now) {
        ctx.delete_key(key)?;
        // The key was set (and expired at once): its watchers are told even if it was not
        // there before, as Redis tells them.
        ctx.touch(key);
        return Ok(());
    }
    check_key(key, expire_at.is_some())?;
    check_len(ctx, value.len() as u64)?;
    ctx.put_meta(
        key,
        &Meta {
            kind: Kind::String,
            expire_at,
            body: Body::String(value),
        },
    )?;
    Ok(())
}

// ----- GET, SET and their kin -----

fn get(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::opt_bulk(string_value(ctx, &a[1])?))
}

/// An expiry option: `EX`, `PX`, `EXAT` or `PXAT`.
#[derive(Clone, Copy, PartialEq)]
struct ExpiryOpt {
    unit: i64,
    relative: bool,
}

impl ExpiryOpt {
    fn named(word: &[u8]) -> Option<ExpiryOpt> {
        let (unit, relative) = match args::text(word).to_ascii_lowercase().as_str() {
            "ex" => (SECONDS, true),
            "px" => (MILLIS, true),
            "exat" => (SECONDS, false),
            "pxat" => (MILLIS, false),
            _ => return None,
        };
        Some(ExpiryOpt { unit, relative })
    }
}

/// `SET`'s and `GETEX`'s options, as Redis's `parseExtendedStringArgumentsOrReply` reads
/// them: each may repeat; ones that contradict an earlier one are a syntax error.
#[derive(Default)]
struct StringOpts {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    persist: bool,
    /// The expiry option, and the index of its value among the arguments.
    expiry: Option<(ExpiryOpt, usize)>,
}

impl StringOpts {
    /// Reads `a[from..]`: `SET`'s options if `set`, else `GETEX`'s.
    fn parse(a: &[Vec<u8>], from: usize, set: bool) -> Result<StringOpts, Failure> {
        let mut o = StringOpts::default();
        let mut i = from;
        while i < a.len() {
            let w = &a[i];
            let expiry = ExpiryOpt::named(w);
            if set && args::is(w, "nx") && !o.xx {
                o.nx = true;
            } else if set && args::is(w, "xx") && !o.nx {
                o.xx = true;
            } else if set && args::is(w, "get") {
                o.get = true;
            } else if set && args::is(w, "keepttl") && !o.persist && o.expiry.is_none() {
                o.keepttl = true;
            } else if !set && args::is(w, "persist") && o.expiry.is_none() && !o.keepttl {
                o.persist = true;
            } else if let Some(e) = expiry.filter(|e| {
                !o.keepttl
                    && !o.persist
                    && o.expiry.is_none_or(|(prev, _)| prev == *e)
                    && i + 1 < a.len()
            }) {
                o.expiry = Some((e, i + 1));
                i += 1;
            } else {
                return Err(args::syntax());
            }
            i += 1;
        }
        Ok(o)
    }

    /// The deadline the expiry option names, if any.
    fn deadline(&self, ctx: &Ctx<'_>, a: &[Vec<u8>]) -> Result<Option<u64>, Failure> {
        self.expiry
            .map(|(e, at)| expiry::option_deadline(ctx, a, &a[at], e.unit, e.relative))
            .transpose()
    }
}

/// What `SET` and its kin do: `value` under `key` unless `NX`/`XX` says not, with the
/// deadline (or, with `KEEPTTL`, the key's own). Returns the value it held if `GET` asks
/// (which fails on another type), and whether it was set.
fn set_generic(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    value: &[u8],
    opts: &StringOpts,
    deadline: Option<u64>,
) -> Result<(Option<Vec<u8>>, bool), Failure> {
    let old = if opts.get {
        string_value(ctx, key)?
    } else {
        None
    };
    let found = ctx.lookup(key)?;
    if (opts.nx && found.is_some()) || (opts.xx && found.is_none()) {
        return Ok((old, false));
    }
    let expire_at = if opts.keepttl {
        found.and_then(|m| m.expire_at)
    } else {
        deadline
    };
    put_string(ctx, key, value.to_vec(), expire_at)?;
    Ok((old, true))
}

fn set(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let opts = StringOpts::parse(a, 3, true)?;
    let deadline = opts.deadline(ctx, a)?;
    let (old, done) = set_generic(ctx, &a[1], &a[2], &opts, deadline)?;
    Ok(match (opts.get, done) {
        (true, _) => Reply::opt_bulk(old),
        (false, true) => Reply::Ok,
        (false, false) => Reply::Nil,
    })
}

fn setnx(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let opts = StringOpts {
        nx: true,
        ..StringOpts::default()
    };
    let (_, done) = set_generic(ctx, &a[1], &a[2], &opts, None)?;
    Ok(Reply::Int(i64::from(done)))
}

/// `SETEX` and `PSETEX`: `a[2]` in `unit` from now, then the value.
fn setex_generic(ctx: &mut Ctx<'_>, a: &[Vec<u8>], unit: i64) -> CmdResult {
    let deadline = expiry::option_deadline(ctx, a, &a[2], unit, true)?;
    set_generic(ctx, &a[1], &a[3], &StringOpts::default(), Some(deadline))?;
    Ok(Reply::Ok)
}

fn setex(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    setex_generic(ctx, a, SECONDS)
}

fn psetex(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    setex_generic(ctx, a, MILLIS)
}

fn getset(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let opts = StringOpts {
        get: true,
        ..StringOpts::default()
    };
    let (old, _) = set_generic(ctx, &a[1], &a[2], &opts, None)?;
    Ok(Reply::opt_bulk(old))
}

fn getdel(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let value = string_value(ctx, &a[1])?;
    if value.is_some() {
        ctx.delete_key(&a[1])?;
    }
    Ok(Reply::opt_bulk(value))
}

/// `GETEX key [EX s | PX ms | EXAT t | PXAT t | PERSIST]`: the value, then its deadline
/// changed. A missing key is nil whatever the options' values; a deadline already passed
/// deletes the key.
fn getex(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let opts = StringOpts::parse(a, 2, false)?;
    let key = &a[1];
    let Some((value, expire_at)) = string_entry(ctx, key)? else {
        return Ok(Reply::Nil);
    };
    let deadline = opts.deadline(ctx, a)?;
    let new_expiry = match deadline {
        Some(at) => Some(at),
        None if opts.persist => None,
        None => expire_at,
    };
    if new_expiry != expire_at {
        put_string(ctx, key, value.clone(), new_expiry)?;
    }
    Ok(Reply::Bulk(value))
}

// ----- many keys -----

fn mget(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let mut out = Vec::with_capacity(a.len() - 1);
    for key in &a[1..] {
        out.push(match ctx.lookup(key)?.map(|m| m.body) {
            Some(Body::String(v)) => Reply::Bulk(v),
            _ => Reply::Nil,
        });
    }
    Ok(Reply::Array(out))
}

/// A key and its value.
type Pair<'a> = (&'a [u8], &'a [u8]);

/// `MSET`'s and `MSETNX`'s pairs, each checked to fit the store (so none is written unless
/// all are); Redis's arity error for an odd count.
fn pairs<'a>(ctx: &Ctx<'_>, a: &'a [Vec<u8>]) -> Result<Vec<Pair<'a>>, Failure> {
    if a.len() % 2 == 0 {
        return Err(args::err(args::arity_error(
            &args::text(&a[0]).to_ascii_lowercase(),
        )));
    }
    let pairs: Vec<_> = a[1..]
        .chunks(2)
        .map(|p| (p[0].as_slice(), p[1].as_slice()))
        .collect();
    for (key, value) in &pairs {
        check_key(key, false)?;
        check_len(ctx, value.len() as u64)?;
    }
    Ok(pairs)
}

fn mset(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    for (key, value) in pairs(ctx, a)? {
        put_string(ctx, key, value.to_vec(), None)?;
    }
    Ok(Reply::Ok)
}

fn msetnx(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let pairs = pairs(ctx, a)?;
    for (key, _) in &pairs {
        if ctx.lookup(key)?.is_some() {
            return Ok(Reply::Int(0));
        }
    }
    for (key, value) in pairs {
        put_string(ctx, key, value.to_vec(), None)?;
    }
    Ok(Reply::Int(1))
}

// ----- parts of a string -----

fn append(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let key = &a[1];
    let (value, expire_at) = match string_entry(ctx, key)? {
        Some((mut v, expire_at)) => {
            check_grow(ctx, v.len() as u64 + a[2].len() as u64)?;
            v.extend_from_slice(&a[2]);
            (v, expire_at)
        }
        None => (a[2].clone(), None),
    };
    let len = value.len();
    put_string(ctx, key, value, expire_at)?;
    Ok(Reply::Int(len as i64))
}

fn strlen(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let len = string_value(ctx, &a[1])?.map_or(0, |v| v.len());
    Ok(Reply::Int(len as i64))
}

/// Redis's inclusive range `start..=end` over `len` items, negative indexes counting from
/// the end, clamped to the items (`None`: empty).
pub fn clamp_range(len: i64, start: i64, end: i64) -> Option<(i64, i64)> {
    let start = if start < 0 { len + start } else { start }.max(0);
    let end = if end < 0 { len + end } else { end }.max(0).min(len - 1);
    (start <= end).then_some((start, end))
}

/// `GETRANGE` and `SUBSTR`.
fn getrange(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let start = args::int(&a[2])?;
    let end = args::int(&a[3])?;
    let value = string_value(ctx, &a[1])?.unwrap_or_default();
    // Both from the end and crossed: empty, before clamping could make them meet at 0.
    if start < 0 && end < 0 && start > end {
        return Ok(Reply::bulk(""));
    }
    Ok(Reply::Bulk(
        clamp_range(value.len() as i64, start, end)
            .map_or_else(Vec::new, |(s, e)| value[s as usize..=e as usize].to_vec()),
    ))
}

fn setrange(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let key = &a[1];
    let offset = args::int(&a[2])?;
    if offset < 0 {
        return Err(args::err("ERR offset is out of range"));
    }
    let patch = &a[3];
    let entry = string_entry(ctx, key)?;
    if patch.is_empty() {
        // Nothing to write: a missing key stays missing.
        return Ok(Reply::Int(entry.map_or(0, |(v, _)| v.len() as i64)));
    }
    let end = (offset as u64).saturating_add(patch.len() as u64);
    check_grow(ctx, end)?;
    let (mut value, expire_at) = entry.unwrap_or_default();
    let (offset, end) = (offset as usize, end as usize);
    if value.len() < end {
        value.resize(end, 0);
    }
    value[offset..end].copy_from_slice(patch);
    let len = value.len();
    put_string(ctx, key, value, expire_at)?;
    Ok(Reply::Int(len as i64))
}

// ----- numbers -----

/// Adds `delta` to the integer `key` holds (0 if missing), keeping its deadline.
fn incr_by(ctx: &mut Ctx<'_>, key: &[u8], delta: i64) -> CmdResult {
    let (value, expire_at) = string_entry(ctx, key)?.unwrap_or((b"0".to_vec(), None));
    let n = args::int(&value)?
        .checked_add(delta)
        .ok_or_else(|| args::err("ERR increment or decrement would overflow"))?;
    put_string(ctx, key, n.to_string().into_bytes(), expire_at)?;
    Ok(Reply::Int(n))
}

fn incr(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    incr_by(ctx, &a[1], 1)
}

fn decr(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    incr_by(ctx, &a[1], -1)
}

fn incrby(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let delta = args::int(&a[2])?;
    incr_by(ctx, &a[1], delta)
}

fn decrby(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let delta = args::int(&a[2])?
        .checked_neg()
        .ok_or_else(|| args::err("ERR decrement would overflow"))?;
    incr_by(ctx, &a[1], delta)
}

/// `INCRBYFLOAT`, in Redis's `long double` arithmetic (see `longdouble`).
fn incrbyfloat(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let key = &a[1];
    let (value, expire_at) = string_entry(ctx, key)?.unwrap_or((b"0".to_vec(), None));
    let value = longdouble::parse(&value).ok_or_else(args::not_float)?;
    let incr = longdouble::parse(&a[2]).ok_or_else(args::not_float)?;
    let sum = longdouble::add(value, incr)
        .ok_or_else(|| args::err("ERR increment would produce NaN or Infinity"))?;
    let text = longdouble::format(sum).into_bytes();
    put_string(ctx, key, text.clone(), expire_at)?;
    Ok(Reply::Bulk(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_clamp_as_redis_clamps_them() {
        assert_eq!(clamp_range(5, 0, -1), Some((0, 4)));
        assert_eq!(clamp_range(5, -3, -1), Some((2, 4)));
        assert_eq!(clamp_range(5, -100, 100), Some((0, 4)));
        assert_eq!(clamp_range(5, 5, 10), None);
        assert_eq!(clamp_range(5, 3, 2), None);
        assert_eq!(clamp_range(0, 0, -1), None);
        assert_eq!(clamp_range(5, i64::MIN, i64::MAX), Some((0, 4)));
    }
}
