//! Commands over keys of any type: `DEL`, `UNLINK`, `EXISTS`, `TYPE`, `RENAME`,
//! `RENAMENX`, `COPY`, `MOVE`, `KEYS`, `SCAN`, `RANDOMKEY`. (The `EXPIRE` family is in
//! `expiry`.)
//!
//! Renaming, copying or moving a collection rewrites its members under the new key (their
//! keys start with the key's name): O(members), where Redis's `RENAME` and `MOVE` are O(1).
//! `COPY` and `MOVE` run alone (as `FLUSHDB` does), since the connection locks keys of the
//! selected database only, and a key of another database written without its lock could
//! be overwritten by a command that read it just before (a lost update). So `COMMAND`
//! reports no key positions for them (Redis: `1 2 1` and `1 1 1`).
//! `SWAPDB` is not here: a database is its tables, found by name (`redis.N.*`), so swapping
//! two would take a durable indirection from database numbers to tables, which the keyspace
//! does not have.

use super::args::check_key;
use super::scan::{self, ScanArgs};
use super::{args, data, single_key, CmdResult, DataFn, Failure, Keys, Spec};
use crate::keyspace::ctx::{decode_meta, Pairs};
use crate::keyspace::encoding::{members_prefix, prefix_end, Meta};
use crate::keyspace::{Ctx, Table};
use crate::resp::reply::Reply;
use rand::seq::SliceRandom;
use std::ops::Bound;

/// A command whose keys are its arguments from the first to `last`.
const fn key_list(
    name: &'static str,
    arity: i32,
    flags: &'static [&'static str],
    last: i32,
    run: DataFn,
) -> Spec {
    data(
        name,
        arity,
        flags,
        Keys::Range {
            first: 1,
            last,
            step: 1,
        },
        run,
    )
}

/// The family's commands.
pub const COMMANDS: &[Spec] = &[
    key_list("del", -2, &["write"], -1, del),
    key_list("unlink", -2, &["write", "fast"], -1, del),
    key_list("exists", -2, &["readonly", "fast"], -1, exists),
    single_key("type", 2, &["readonly", "fast"], type_),
    key_list("rename", 3, &["write"], 2, rename),
    key_list("renamenx", 3, &["write", "fast"], 2, renamenx),
    // Another database's key is not among those the connection locks (they are the
    // selected database's): these two run alone instead.
    data("copy", -3, &["write", "denyoom"], Keys::All, copy),
    data("move", 3, &["write", "fast"], Keys::All, move_),
    data("keys", 2, &["readonly"], Keys::None, keys),
    data("scan", -2, &["readonly"], Keys::None, scan),
    data("randomkey", 1, &["readonly"], Keys::None, randomkey),
];

/// `DEL` and `UNLINK` (a collection's delete is one range delete already: O(1)).
fn del(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let mut n = 0;
    for key in &a[1..] {
        if ctx.delete_key(key)? {
            n += 1;
        }
    }
    Ok(Reply::Int(n))
}

/// Counts the keys that exist, a key named twice twice.
fn exists(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let mut n = 0;
    for key in &a[1..] {
        if ctx.lookup(key)?.is_some() {
            n += 1;
        }
    }
    Ok(Reply::Int(n))
}

fn type_(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Simple(
        ctx.lookup(&a[1])?.map_or("none", |m| m.kind.name()).into(),
    ))
}

// ----- renaming, copying, moving -----

/// Runs `body` with database `db` selected, then selects the current one again whatever
/// `body` returned (inside `EXEC` the commands after this one run in it).
fn in_db<T>(
    ctx: &mut Ctx<'_>,
    db: usize,
    body: impl FnOnce(&mut Ctx<'_>) -> Result<T, Failure>,
) -> Result<T, Failure> {
    let home = ctx.db();
    ctx.select(db)?;
    let out = body(ctx);
    ctx.select(home)?;
    out
}

/// Writes the value `meta` describes, `src`'s in database `from`, as `dst` in the selected
/// database, deadline included: a collection's members are copied under a new version.
/// Checks first that the store takes every record it will write.
fn copy_value(
    ctx: &mut Ctx<'_>,
    from: usize,
    src: &[u8],
    meta: &Meta,
    dst: &[u8],
) -> Result<(), Failure> {
    check_key(dst, meta.expire_at.is_some())?;
    let mut copy = meta.clone();
    if let Some(c) = copy.coll_mut() {
        let old = members_prefix(src, c.version);
        c.version = ctx.ks.new_version();
        let new = members_prefix(dst, c.version);
        let members = in_db(ctx, from, |ctx| {
            if new.len() > old.len() {
                check_members_fit(ctx, &old, new.len() - old.len())?;
            }
            members_of(ctx, &old)
        })?;
        for pair in members {
            let (k, v) = pair?;
            let mut moved = new.clone();
            moved.extend_from_slice(&k[old.len()..]);
            ctx.put(Table::Members, &moved, &v)?;
        }
    }
    ctx.put_meta(dst, &copy)?;
    Ok(())
}

/// Every member record under `prefix` (one collection's), whole keys and values.
fn members_of(ctx: &mut Ctx<'_>, prefix: &[u8]) -> Result<Pairs, Failure> {
    let end = prefix_end(prefix);
    let upper = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
    Ok(ctx.scan(Table::Members, Bound::Included(prefix), upper, false)?)
}

/// Fails unless every member record under `prefix` still fits the store's key limit once
/// its key is `growth` bytes longer.
fn check_members_fit(ctx: &mut Ctx<'_>, prefix: &[u8], growth: usize) -> Result<(), Failure> {
    for pair in members_of(ctx, prefix)? {
        let (k, _) = pair?;
        if k.len() + growth > stitchdb::MAX_KEY_LEN {
            return Err(args::err(format!(
                "ERR a member's record would be {} bytes under the new key, over this store's limit of {} bytes",
                k.len() + growth,
                stitchdb::MAX_KEY_LEN
            )));
        }
    }
    Ok(())
}

/// `RENAME` (`nx` false) and `RENAMENX`: the source's value and deadline under the new
/// name, whatever the new name held before gone.
fn rename_generic(ctx: &mut Ctx<'_>, a: &[Vec<u8>], nx: bool) -> CmdResult {
    let (src, dst) = (&a[1], &a[2]);
    let Some(meta) = ctx.lookup(src)? else {
        return Err(args::err("ERR no such key"));
    };
    let done = |renamed: bool| {
        if nx {
            Reply::Int(i64::from(renamed))
        } else {
            Reply::Ok
        }
    };
    if src == dst {
        return Ok(done(false));
    }
    if nx && ctx.lookup(dst)?.is_some() {
        return Ok(done(false));
    }
    copy_value(ctx, ctx.db(), src, &meta, dst)?;
    ctx.delete_key(src)?;
    Ok(done(true))
}

fn rename(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    rename_generic(ctx, a, false)
}

fn renamenx(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    rename_generic(ctx, a, true)
}

/// A database number argument, as `MOVE` and `COPY ... DB` read it (a C `int`, with
/// Redis's `getIntFromObjectOrReply` errors).
fn db_index(ctx: &Ctx<'_>, arg: &[u8]) -> Result<usize, Failure> {
    let n = i32::try_from(args::int(arg)?).map_err(|_| {
        args::err("ERR value is out of range, value must between -2147483648 and 2147483647")
    })?;
    usize::try_from(n)
        .ok()
        .filter(|&n| n < ctx.ks.databases())
        .ok_or_else(|| args::err("ERR DB index is out of range"))
}

/// Redis's error for a copy or move onto itself.
fn same_object() -> Failure {
    args::err("ERR source and destination objects are the same")
}

/// Copies `meta`, `src`'s value in the selected database, to `dst` in database `db` unless
/// `dst` exists there (and `replace` is not given); whether it did.
fn copy_to_db(
    ctx: &mut Ctx<'_>,
    src: &[u8],
    meta: &Meta,
    db: usize,
    dst: &[u8],
    replace: bool,
) -> Result<bool, Failure> {
    let from = ctx.db();
    in_db(ctx, db, |ctx| {
        if !replace && ctx.lookup(dst)?.is_some() {
            return Ok(false);
        }
        copy_value(ctx, from, src, meta, dst)?;
        Ok(true)
    })
}

/// `COPY source destination [DB n] [REPLACE]`.
fn copy(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let (src, dst) = (&a[1], &a[2]);
    let (mut db, mut replace) = (ctx.db(), false);
    let mut i = 3;
    while i < a.len() {
        if args::is(&a[i], "replace") {
            replace = true;
        } else if args::is(&a[i], "db") && i + 1 < a.len() {
            db = db_index(ctx, &a[i + 1])?;
            i += 1;
        } else {
            return Err(args::syntax());
        }
        i += 1;
    }
    if db == ctx.db() && src == dst {
        return Err(same_object());
    }
    let Some(meta) = ctx.lookup(src)? else {
        return Ok(Reply::Int(0));
    };
    let copied = copy_to_db(ctx, src, &meta, db, dst, replace)?;
    Ok(Reply::Int(i64::from(copied)))
}

/// `MOVE key db`: to database `db` unless the key exists there.
fn move_(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let key = &a[1];
    let db = db_index(ctx, &a[2])?;
    if db == ctx.db() {
        return Err(same_object());
    }
    let Some(meta) = ctx.lookup(key)? else {
        return Ok(Reply::Int(0));
    };
    let moved = copy_to_db(ctx, key, &meta, db, key, false)?;
    if moved {
        ctx.delete_key(key)?;
    }
    Ok(Reply::Int(i64::from(moved)))
}

// ----- walking the keys -----

/// The part of `pattern` before its first wildcard or escape: every key it matches starts
/// with it, so a walk need only visit the keys that do.
fn literal_prefix(pattern: &[u8]) -> &[u8] {
    let end = pattern
        .iter()
        .position(|c| matches!(c, b'*' | b'?' | b'[' | b'\\'))
        .unwrap_or(pattern.len());
    &pattern[..end]
}

/// The keys table's records from `lower` up to the end of the keys starting with `prefix`,
/// as (key, metadata), expired keys included.
fn walk(
    ctx: &mut Ctx<'_>,
    lower: Bound<&[u8]>,
    prefix: &[u8],
) -> Result<impl Iterator<Item = Result<(Vec<u8>, Meta), Failure>>, Failure> {
    let end = prefix_end(prefix);
    let upper = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
    let pairs = ctx.scan(Table::Keys, lower, upper, false)?;
    Ok(pairs.map(|p| {
        let (k, v) = p?;
        let meta = decode_meta(&k, &v)?;
        Ok((k, meta))
    }))
}

fn keys(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let pattern = &a[1];
    let prefix = literal_prefix(pattern);
    let now = ctx.now;
    let mut out = Vec::new();
    for item in walk(ctx, Bound::Included(prefix), prefix)? {
        let (key, meta) = item?;
        if !meta.expired(now) && args::glob(pattern, &key, false) {
            out.push(Reply::Bulk(key));
        }
    }
    Ok(Reply::Array(out))
}

/// `SCAN cursor [MATCH pattern] [COUNT n] [TYPE t]`: the keys in key order from where the
/// cursor stands, `COUNT` of them looked at per call (expired ones and ones the filters
/// refuse included, so a call's work is bounded).
fn scan(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let opts = ScanArgs::parse(ctx, a, 1, true)?;
    let prefix = opts.pattern.as_deref().map_or(&[][..], literal_prefix);
    let lower = match &opts.after {
        Some(after) if after.as_slice() >= prefix => Bound::Excluded(after.as_slice()),
        _ => Bound::Included(prefix),
    };
    let now = ctx.now;
    let mut items = Vec::new();
    let mut last = None;
    let mut walked = walk(ctx, lower, prefix)?.peekable();
    for _ in 0..opts.count {
        let Some(item) = walked.next() else {
            break;
        };
        let (key, meta) = item?;
        let kind_ok = opts
            .kind
            .as_ref()
            .is_none_or(|k| k.as_slice() == meta.kind.name().as_bytes());
        if !meta.expired(now) && kind_ok && opts.matches(&key) {
            items.push(Reply::Bulk(key.clone()));
        }
        last = Some(key);
    }
    let resume = if walked.peek().is_some() { last } else { None };
    Ok(scan::reply(ctx, resume, items))
}

/// Up to `n` keys within the bounds that have not expired, in order.
fn live_keys(
    ctx: &mut Ctx<'_>,
    lower: Bound<&[u8]>,
    upper: Bound<&[u8]>,
    n: usize,
) -> Result<Vec<Vec<u8>>, Failure> {
    let now = ctx.now;
    let mut out = Vec::new();
    for pair in ctx.scan(Table::Keys, lower, upper, false)? {
        if out.len() == n {
            break;
        }
        let (k, v) = pair?;
        if !decode_meta(&k, &v)?.expired(now) {
            out.push(k);
        }
    }
    Ok(out)
}

/// Subtrees of the key space of at most this many keys are drawn from directly.
const RANDOM_LEAF: usize = 32;

/// What follows `prefix` in the keys that start with it: each distinct next byte (`None`:
/// `prefix` is itself a key), with its keys counted up to `RANDOM_LEAF + 1` (one seek per
/// byte, then at most that many keys read).
fn branches(ctx: &mut Ctx<'_>, prefix: &[u8]) -> Result<Vec<(Option<u8>, usize)>, Failure> {
    let end = prefix_end(prefix);
    let upper = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
    let mut out: Vec<(Option<u8>, usize)> = Vec::new();
    let mut from = prefix.to_vec();
    'seek: loop {
        for pair in ctx.scan(Table::Keys, Bound::Included(&from), upper, false)? {
            let (key, _) = pair?;
            let next = key.get(prefix.len()).copied();
            match out.last_mut() {
                Some((b, n)) if *b == next => *n += 1,
                _ => out.push((next, 1)),
            }
            if let (Some(b), Some((_, n))) = (next, out.last()) {
                if *n > RANDOM_LEAF {
                    // Enough of this byte's keys: on to the next byte.
                    if b == 0xff {
                        break;
                    }
                    from.truncate(prefix.len());
                    from.push(b + 1);
                    continue 'seek;
                }
            }
        }
        return Ok(out);
    }
}

/// `RANDOMKEY`: walks down the key space as a trie, each step to one of the bytes that
/// follow the prefix so far, drawn in proportion to its keys (counted up to
/// `RANDOM_LEAF + 1`), until the keys under the prefix are few; then one of them, evenly.
/// Each step costs a seek per distinct byte and a few dozen keys read per byte.
fn randomkey(ctx: &mut Ctx<'_>, _: &[Vec<u8>]) -> CmdResult {
    let mut rng = rand::thread_rng();
    let mut prefix = Vec::new();
    let now = ctx.now;
    loop {
        let under: Vec<(Vec<u8>, Meta)> = walk(ctx, Bound::Included(&prefix), &prefix)?
            .take(RANDOM_LEAF + 1)
            .collect::<Result<_, _>>()?;
        let drawn = if under.len() <= RANDOM_LEAF {
            let live: Vec<Vec<u8>> = under
                .into_iter()
                .filter(|(_, m)| !m.expired(now))
                .map(|(k, _)| k)
                .collect();
            live.choose(&mut rng).cloned()
        } else {
            match branches(ctx, &prefix)?.choose_weighted(&mut rng, |(_, n)| *n) {
                Ok((Some(b), _)) => {
                    prefix.push(*b);
                    continue;
                }
                Ok((None, _)) => ctx.lookup(&prefix)?.map(|_| prefix.clone()),
                // No keys: deleted under us meanwhile.
                Err(_) => None,
            }
        };
        // Only expired keys where the walk ended: the first live key, if any.
        return Ok(Reply::opt_bulk(match drawn {
            Some(k) => Some(k),
            None => live_keys(ctx, Bound::Unbounded, Bound::Unbounded, 1)?.pop(),
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_prefixes_stop_at_the_first_wildcard() {
        assert_eq!(literal_prefix(b"user:*"), b"user:");
        assert_eq!(literal_prefix(b"a?c"), b"a");
        assert_eq!(literal_prefix(b"[ab]"), b"");
        assert_eq!(literal_prefix(b"a\\*"), b"a");
        assert_eq!(literal_prefix(b"exact"), b"exact");
    }
}
