//! List commands: `LPUSH`, `LPOP`, `LRANGE`, `LINSERT`, `LMOVE`, `BLPOP` ...
//!
//! A list's elements are member records under tag `INDEX`, keyed by absolute index and
//! contiguous from the header's `head` to `tail` (exclusive): element `i` is at `head + i`,
//! so `LINDEX`, `LSET` and the start of an `LRANGE` are one seek. Pushes and pops move
//! `head` or `tail`; `LINSERT` and `LREM` renumber the shorter side of the change, O(N) as
//! Redis's are. A blocking pop that finds nothing fails with `Failure::Blocked`, and the
//! connection runs it again when one of its keys changes.

use super::collection::Coll;
use super::ordered::{self, Mpop, KEYS_THEN_TIMEOUT, SRC_DST};
use super::{args, data, single_key, CmdResult, Failure, Keys, Spec};
use crate::keyspace::encoding::{self, tag, Kind};
use crate::keyspace::{Ctx, Table};
use crate::resp::reply::Reply;
use std::ops::Bound;

/// The family's commands.
pub const COMMANDS: &[Spec] = &[
    single_key("lpush", -3, &["write", "denyoom", "fast"], lpush),
    single_key("rpush", -3, &["write", "denyoom", "fast"], rpush),
    single_key("lpushx", -3, &["write", "denyoom", "fast"], lpushx),
    single_key("rpushx", -3, &["write", "denyoom", "fast"], rpushx),
    single_key("lpop", -2, &["write", "fast"], lpop),
    single_key("rpop", -2, &["write", "fast"], rpop),
    single_key("llen", 2, &["readonly", "fast"], llen),
    single_key("lrange", 4, &["readonly"], lrange),
    single_key("lindex", 3, &["readonly"], lindex),
    single_key("lset", 4, &["write", "denyoom"], lset),
    single_key("linsert", 5, &["write", "denyoom"], linsert),
    single_key("lrem", 4, &["write"], lrem),
    single_key("ltrim", 4, &["write"], ltrim),
    single_key("lpos", -3, &["readonly"], lpos),
    data("lmove", 5, &["write", "denyoom"], SRC_DST, lmove),
    data("rpoplpush", 3, &["write", "denyoom"], SRC_DST, rpoplpush),
    data(
        "lmpop",
        -4,
        &["write", "movablekeys"],
        Keys::Custom(lmpop_keys, 0, 0, 0),
        lmpop,
    ),
    data(
        "blpop",
        -3,
        &["write", "noscript", "blocking"],
        KEYS_THEN_TIMEOUT,
        blpop,
    ),
    data(
        "brpop",
        -3,
        &["write", "noscript", "blocking"],
        KEYS_THEN_TIMEOUT,
        brpop,
    ),
    data(
        "blmove",
        6,
        &["write", "denyoom", "noscript", "blocking"],
        SRC_DST,
        blmove,
    ),
    data(
        "brpoplpush",
        4,
        &["write", "denyoom", "noscript", "blocking"],
        SRC_DST,
        brpoplpush,
    ),
    data(
        "blmpop",
        -5,
        &["write", "blocking", "movablekeys"],
        Keys::Custom(blmpop_keys, 0, 0, 0),
        blmpop,
    ),
];

/// Which end of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Left,
    Right,
}

impl End {
    /// `LEFT` or `RIGHT`, as `LMOVE` takes them.
    fn parse(arg: &[u8]) -> Result<End, Failure> {
        if args::is(arg, "left") {
            Ok(End::Left)
        } else if args::is(arg, "right") {
            Ok(End::Right)
        } else {
            Err(args::syntax())
        }
    }
}

/// A list under `key`: its header, and its elements' records.
struct List<'k> {
    key: &'k [u8],
    c: Coll<'k>,
}

fn no_room() -> Failure {
    args::err("ERR the list has no room left at that end")
}

impl<'k> List<'k> {
    fn load(ctx: &mut Ctx<'_>, key: &'k [u8]) -> Result<Option<List<'k>>, Failure> {
        Ok(Coll::load(ctx, key, Kind::List)?.map(|c| List { key, c }))
    }

    fn load_or_create(ctx: &mut Ctx<'_>, key: &'k [u8]) -> Result<List<'k>, Failure> {
        Ok(List {
            key,
            c: Coll::load_or_create(ctx, key, Kind::List)?,
        })
    }

    fn len(&self) -> u64 {
        let h = self.c.header();
        h.tail - h.head
    }

    /// The record of the element at absolute index `at`.
    fn record(&self, at: u64) -> Vec<u8> {
        encoding::member_key(
            self.key,
            self.c.header().version,
            tag::INDEX,
            &encoding::index_key(at),
        )
    }

    /// Element `i` (0 the first).
    fn get(&self, ctx: &mut Ctx<'_>, i: u64) -> Result<Option<Vec<u8>>, Failure> {
        Ok(ctx.get(Table::Members, &self.record(self.c.header().head + i))?)
    }

    /// Elements `lo..hi`, from the last if `rev`: one seek, then a scan of exactly them.
    fn scan(
        &self,
        ctx: &mut Ctx<'_>,
        lo: u64,
        hi: u64,
        rev: bool,
    ) -> Result<impl Iterator<Item = Result<Vec<u8>, Failure>>, Failure> {
        let head = self.c.header().head;
        let (start, end) = (self.record(head + lo), self.record(head + hi));
        let pairs = ctx.scan(
            Table::Members,
            Bound::Included(&start),
            Bound::Excluded(&end),
            rev,
        )?;
        Ok(pairs.map(|p| p.map(|(_, v)| v).map_err(Failure::from)))
    }

    /// Elements `lo..hi`.
    fn range(&self, ctx: &mut Ctx<'_>, lo: u64, hi: u64) -> Result<Vec<Vec<u8>>, Failure> {
        if lo >= hi {
            return Ok(Vec::new());
        }
        self.scan(ctx, lo, hi, false)?.collect()
    }

    /// Writes `values` at absolute indexes from `at` on.
    fn write(&self, ctx: &mut Ctx<'_>, at: u64, values: &[Vec<u8>]) -> Result<(), Failure> {
        for (i, v) in (at..).zip(values) {
            ctx.put(Table::Members, &self.record(i), v)?;
        }
        Ok(())
    }

    /// Removes the records at absolute indexes `from..to`.
    fn clear(&self, ctx: &mut Ctx<'_>, from: u64, to: u64) -> Result<(), Failure> {
        if to == from + 1 {
            ctx.delete(Table::Members, &self.record(from))?;
        } else if to > from {
            ctx.delete_range(Table::Members, &self.record(from), Some(&self.record(to)))?;
        }
        Ok(())
    }

    /// Fails unless `n` more elements fit at `end` of the index space (2^63 each way).
    fn check_room(&self, end: End, n: u64) -> Result<(), Failure> {
        let room = match end {
            End::Left => self.c.header().head,
            End::Right => u64::MAX - self.c.header().tail,
        };
        if room < n {
            return Err(no_room());
        }
        Ok(())
    }

    /// Pushes `values` one after the other at `end` (so `LPUSH` reverses them, as Redis's).
    /// The header is written last, by `save`: an element the store refuses leaves the
    /// list as it was (records written outside `head..tail` are never read, and are
    /// overwritten or dropped with the list).
    fn push(&mut self, ctx: &mut Ctx<'_>, end: End, values: &[Vec<u8>]) -> Result<(), Failure> {
        let n = values.len() as u64;
        self.check_room(end, n)?;
        let c = *self.c.header();
        match end {
            End::Left => {
                for (i, v) in values.iter().enumerate() {
                    ctx.put(Table::Members, &self.record(c.head - 1 - i as u64), v)?;
                }
                self.c.header_mut().head -= n;
            }
            End::Right => {
                self.write(ctx, c.tail, values)?;
                self.c.header_mut().tail += n;
            }
        }
        Ok(())
    }

    /// Pops up to `n` elements from `end`, in the order popped.
    fn pop(&mut self, ctx: &mut Ctx<'_>, end: End, n: u64) -> Result<Vec<Vec<u8>>, Failure> {
        let len = self.len();
        let n = n.min(len);
        let (lo, hi) = match end {
            End::Left => (0, n),
            End::Right => (len - n, len),
        };
        let mut values = self.range(ctx, lo, hi)?;
        if end == End::Right {
            values.reverse();
        }
        // A list emptied is deleted whole by `save`.
        if n < len {
            let head = self.c.header().head;
            self.clear(ctx, head + lo, head + hi)?;
        }
        match end {
            End::Left => self.c.header_mut().head += n,
            End::Right => self.c.header_mut().tail -= n,
        }
        Ok(values)
    }

    /// Replaces elements `lo..hi` with `new`, moving the elements on the shorter side of
    /// them to keep the indexes contiguous. `new` is written first, so a value the store
    /// refuses fails the command before it changed anything.
    fn replace(
        &mut self,
        ctx: &mut Ctx<'_>,
        lo: u64,
        hi: u64,
        new: &[Vec<u8>],
    ) -> Result<(), Failure> {
        let (head, tail, len) = (self.c.header().head, self.c.header().tail, self.len());
        let added = new.len() as u64;
        if lo <= len - hi {
            // The elements before move to end where the new ones start; those end where
            // the replaced ones ended.
            let before = self.range(ctx, 0, lo)?;
            let start = (head + hi).checked_sub(added + lo).ok_or_else(no_room)?;
            self.write(ctx, start + lo, new)?;
            self.write(ctx, start, &before)?;
            self.clear(ctx, head, start)?;
            self.c.header_mut().head = start;
        } else {
            let after = self.range(ctx, hi, len)?;
            let end = (head + lo)
                .checked_add(added + (len - hi))
                .ok_or_else(no_room)?;
            self.write(ctx, head + lo, new)?;
            self.write(ctx, head + lo + added, &after)?;
            self.clear(ctx, end, tail)?;
            self.c.header_mut().tail = end;
        }
        Ok(())
    }

    /// Writes the header back (deleting the key if the list is empty).
    fn save(mut self, ctx: &mut Ctx<'_>) -> Result<(), Failure> {
        self.c.header_mut().size = self.len();
        self.c.save(ctx)
    }
}

fn push_cmd(ctx: &mut Ctx<'_>, a: &[Vec<u8>], end: End, only_existing: bool) -> CmdResult {
    let key = &a[1];
    let mut list = if only_existing {
        match List::load(ctx, key)? {
            Some(l) => l,
            None => return Ok(Reply::Int(0)),
        }
    } else {
        List::load_or_create(ctx, key)?
    };
    list.push(ctx, end, &a[2..])?;
    let len = list.len();
    list.save(ctx)?;
    Ok(Reply::Int(len as i64))
}

fn lpush(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    push_cmd(ctx, a, End::Left, false)
}

fn rpush(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    push_cmd(ctx, a, End::Right, false)
}

fn lpushx(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    push_cmd(ctx, a, End::Left, true)
}

fn rpushx(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    push_cmd(ctx, a, End::Right, true)
}

/// `LPOP`/`RPOP key [count]`: one element (nil if none), or with a count an array (a nil
/// array if no such key), as Redis 7.0 replies.
fn pop_cmd(ctx: &mut Ctx<'_>, a: &[Vec<u8>], end: End, name: &str) -> CmdResult {
    if a.len() > 3 {
        return Err(args::err(args::arity_error(name)));
    }
    let count = a.get(2).map(|c| ordered::positive(c)).transpose()?;
    let Some(mut list) = List::load(ctx, &a[1])? else {
        return Ok(match count {
            Some(_) => Reply::NilArray,
            None => Reply::Nil,
        });
    };
    if count == Some(0) {
        return Ok(Reply::Array(Vec::new()));
    }
    let values = list.pop(ctx, end, count.unwrap_or(1))?;
    list.save(ctx)?;
    Ok(match count {
        Some(_) => Reply::bulks(values),
        None => Reply::opt_bulk(values.into_iter().next()),
    })
}

fn lpop(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    pop_cmd(ctx, a, End::Left, "lpop")
}

fn rpop(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    pop_cmd(ctx, a, End::Right, "rpop")
}

fn llen(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let len = List::load(ctx, &a[1])?.map_or(0, |l| l.len());
    Ok(Reply::Int(len as i64))
}

fn lrange(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let (start, end) = (args::int(&a[2])?, args::int(&a[3])?);
    let Some(list) = List::load(ctx, &a[1])? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let values = match ordered::span(start, end, list.len()) {
        Some((lo, hi)) => list.range(ctx, lo, hi)?,
        None => Vec::new(),
    };
    Ok(Reply::bulks(values))
}

/// Index `i` (negative: from the end) of a list of `len` elements, if it has one.
fn position(i: i64, len: u64) -> Option<u64> {
    let i = if i < 0 {
        i128::from(len) + i128::from(i)
    } else {
        i128::from(i)
    };
    (0..i128::from(len)).contains(&i).then_some(i as u64)
}

fn lindex(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    // The key first, as Redis: a missing key is nil whatever the index says.
    let Some(list) = List::load(ctx, &a[1])? else {
        return Ok(Reply::Nil);
    };
    let i = args::int(&a[2])?;
    Ok(match position(i, list.len()) {
        Some(i) => Reply::opt_bulk(list.get(ctx, i)?),
        None => Reply::Nil,
    })
}

fn lset(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let list = List::load(ctx, &a[1])?.ok_or_else(|| args::err("ERR no such key"))?;
    let i = args::int(&a[2])?;
    let i = position(i, list.len()).ok_or_else(|| args::err("ERR index out of range"))?;
    ctx.put(
        Table::Members,
        &list.record(list.c.header().head + i),
        &a[3],
    )?;
    ctx.touch(&a[1]);
    Ok(Reply::Ok)
}

fn linsert(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let after = if args::is(&a[2], "after") {
        true
    } else if args::is(&a[2], "before") {
        false
    } else {
        return Err(args::syntax());
    };
    let Some(mut list) = List::load(ctx, &a[1])? else {
        return Ok(Reply::Int(0));
    };
    let len = list.len();
    let mut pivot = None;
    for (i, v) in (0..).zip(list.scan(ctx, 0, len, false)?) {
        if v? == a[3] {
            pivot = Some(i);
            break;
        }
    }
    let Some(p) = pivot else {
        return Ok(Reply::Int(-1));
    };
    let at = if after { p + 1 } else { p };
    list.replace(ctx, at, at, std::slice::from_ref(&a[4]))?;
    let len = list.len();
    list.save(ctx)?;
    Ok(Reply::Int(len as i64))
}

fn lrem(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let count = args::int(&a[2])?;
    let Some(mut list) = List::load(ctx, &a[1])? else {
        return Ok(Reply::Int(0));
    };
    let (len, rev, limit) = (list.len(), count < 0, count.unsigned_abs());
    // From the first match to the last, in scan order: (index, value, matched).
    let mut window: Vec<(u64, Vec<u8>, bool)> = Vec::new();
    let mut removed = 0;
    for (k, v) in (0..).zip(list.scan(ctx, 0, len, rev)?) {
        let v = v?;
        let i = if rev { len - 1 - k } else { k };
        let matched = v == a[3];
        if matched || !window.is_empty() {
            window.push((i, v, matched));
        }
        if matched {
            removed += 1;
            if removed == limit {
                break;
            }
        }
    }
    while window.last().is_some_and(|(_, _, m)| !m) {
        window.pop();
    }
    let (Some(first), Some(last)) = (window.first(), window.last()) else {
        return Ok(Reply::Int(0));
    };
    let (lo, hi) = (first.0.min(last.0), first.0.max(last.0) + 1);
    if rev {
        window.reverse();
    }
    let kept: Vec<Vec<u8>> = window
        .into_iter()
        .filter(|(_, _, m)| !m)
        .map(|(_, v, _)| v)
        .collect();
    list.replace(ctx, lo, hi, &kept)?;
    list.save(ctx)?;
    Ok(Reply::Int(removed as i64))
}

fn ltrim(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let (start, end) = (args::int(&a[2])?, args::int(&a[3])?);
    let Some(mut list) = List::load(ctx, &a[1])? else {
        return Ok(Reply::Ok);
    };
    let c = *list.c.header();
    match ordered::span(start, end, list.len()) {
        Some((lo, hi)) => {
            list.clear(ctx, c.head, c.head + lo)?;
            list.clear(ctx, c.head + hi, c.tail)?;
            list.c.header_mut().head = c.head + lo;
            list.c.header_mut().tail = c.head + hi;
        }
        // Emptied: `save` deletes the key with its records.
        None => list.c.header_mut().tail = c.head,
    }
    list.save(ctx)?;
    // Written even when nothing was trimmed, as Redis signals it (`WATCH`).
    ctx.touch(&a[1]);
    Ok(Reply::Ok)
}

/// `LPOS`'s options.
struct Lpos {
    /// Matches to skip before the first one reported.
    skip: u64,
    /// Search from the tail.
    rev: bool,
    /// `COUNT` (0: all matches), if given.
    count: Option<u64>,
    /// Elements to look at (0: all).
    maxlen: u64,
}

impl Lpos {
    fn parse(a: &[Vec<u8>]) -> Result<Lpos, Failure> {
        let mut rank = 1i64;
        let mut out = Lpos {
            skip: 0,
            rev: false,
            count: None,
            maxlen: 0,
        };
        let mut i = 3;
        while i < a.len() {
            let value = a.get(i + 1).ok_or_else(args::syntax)?;
            if args::is(&a[i], "rank") {
                rank = args::int(value)?;
                if rank == 0 {
                    return Err(args::err("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"));
                }
            } else if args::is(&a[i], "count") {
                out.count = Some(non_negative(value, "ERR COUNT can't be negative")?);
            } else if args::is(&a[i], "maxlen") {
                out.maxlen = non_negative(value, "ERR MAXLEN can't be negative")?;
            } else {
                return Err(args::syntax());
            }
            i += 2;
        }
        out.rev = rank < 0;
        // Redis negates a negative rank; i64::MIN stays negative there, which makes every
        // match count as the first.
        out.skip = rank.checked_abs().map_or(0, |r| r as u64 - 1);
        Ok(out)
    }
}

/// An integer that must not be negative, with `msg` as the error if it is not one (as
/// Redis's `getRangeLongFromObjectOrReply` with a message).
fn non_negative(arg: &[u8], msg: &str) -> Result<u64, Failure> {
    match args::int(arg) {
        Ok(n) if n >= 0 => Ok(n as u64),
        _ => Err(args::err(msg)),
    }
}

fn lpos(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let opts = Lpos::parse(a)?;
    let Some(list) = List::load(ctx, &a[1])? else {
        return Ok(match opts.count {
            Some(_) => Reply::Array(Vec::new()),
            None => Reply::Nil,
        });
    };
    let len = list.len();
    let look = if opts.maxlen == 0 {
        len
    } else {
        opts.maxlen.min(len)
    };
    let (lo, hi) = if opts.rev {
        (len - look, len)
    } else {
        (0, look)
    };
    let mut found = Vec::new();
    let mut matches = 0;
    for (k, v) in (0..).zip(list.scan(ctx, lo, hi, opts.rev)?) {
        if v? != a[2] {
            continue;
        }
        matches += 1;
        if matches <= opts.skip {
            continue;
        }
        let i = if opts.rev { len - 1 - k } else { k };
        found.push(Reply::Int(i as i64));
        match opts.count {
            None => break,
            Some(n) if n > 0 && found.len() as u64 >= n => break,
            Some(_) => {}
        }
    }
    Ok(match opts.count {
        Some(_) => Reply::Array(found),
        None => found.pop().unwrap_or(Reply::Nil),
    })
}

/// Pops from `src` at `from` and pushes onto `dst` at `to` (`LMOVE`, `RPOPLPUSH`); the same
/// key rotates the list.
fn move_one(ctx: &mut Ctx<'_>, src: &[u8], dst: &[u8], from: End, to: End) -> CmdResult {
    let Some(mut s) = List::load(ctx, src)? else {
        return Ok(Reply::Nil);
    };
    if src == dst && s.len() == 1 {
        // The only element onto its own list: nothing moves (the key, its TTL included,
        // stays as it is, as in Redis), but the key counts as written.
        ctx.touch(src);
        return Ok(Reply::opt_bulk(s.get(ctx, 0)?));
    }
    // Before the first write: the destination's type, and room at its end.
    if let Some(d) = List::load(ctx, dst)? {
        d.check_room(to, 1)?;
    }
    let Some(value) = s.pop(ctx, from, 1)?.pop() else {
        return Ok(Reply::Nil);
    };
    s.save(ctx)?;
    let mut d = List::load_or_create(ctx, dst)?;
    d.push(ctx, to, std::slice::from_ref(&value))?;
    d.save(ctx)?;
    Ok(Reply::Bulk(value))
}

fn lmove(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let (from, to) = (End::parse(&a[3])?, End::parse(&a[4])?);
    move_one(ctx, &a[1], &a[2], from, to)
}

fn rpoplpush(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    move_one(ctx, &a[1], &a[2], End::Right, End::Left)
}

/// A key and the elements popped from it.
type Popped = (Vec<u8>, Vec<Vec<u8>>);

/// Pops up to `count` elements at `end` from the first of `keys` holding a list (`None`:
/// every key is empty).
fn pop_first(
    ctx: &mut Ctx<'_>,
    keys: &[Vec<u8>],
    end: End,
    count: u64,
) -> Result<Option<Popped>, Failure> {
    for key in keys {
        if let Some(mut list) = List::load(ctx, key)? {
            let values = list.pop(ctx, end, count)?;
            list.save(ctx)?;
            return Ok(Some((key.clone(), values)));
        }
    }
    Ok(None)
}

/// `BLPOP`/`BRPOP key ... timeout`: `[key, element]`.
fn bpop(ctx: &mut Ctx<'_>, a: &[Vec<u8>], end: End) -> CmdResult {
    let (keys, t) = a[1..].split_at(a.len() - 2);
    let timeout = ordered::timeout(&t[0])?;
    match pop_first(ctx, keys, end, 1)? {
        Some((key, values)) => Ok(Reply::Array(
            std::iter::once(key)
                .chain(values)
                .map(Reply::Bulk)
                .collect(),
        )),
        None => Err(Failure::Blocked {
            timeout,
            now: Reply::NilArray,
        }),
    }
}

fn blpop(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    bpop(ctx, a, End::Left)
}

fn brpop(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    bpop(ctx, a, End::Right)
}

/// `BLMOVE`/`BRPOPLPUSH`: `LMOVE` once the source has an element (a nil if the client
/// cannot wait, as Redis replies).
fn block_move(ctx: &mut Ctx<'_>, a: &[Vec<u8>], from: End, to: End, t: &[u8]) -> CmdResult {
    let timeout = ordered::timeout(t)?;
    if List::load(ctx, &a[1])?.is_none() {
        return Err(Failure::Blocked {
            timeout,
            now: Reply::Nil,
        });
    }
    move_one(ctx, &a[1], &a[2], from, to)
}

fn blmove(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let (from, to) = (End::parse(&a[3])?, End::parse(&a[4])?);
    block_move(ctx, a, from, to, &a[5])
}

fn brpoplpush(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    block_move(ctx, a, End::Right, End::Left, &a[3])
}

fn lmpop_keys(a: &[Vec<u8>]) -> Vec<usize> {
    ordered::keys_after(a, 1)
}

fn blmpop_keys(a: &[Vec<u8>]) -> Vec<usize> {
    ordered::keys_after(a, 2)
}

/// `[key, [element ...]]`, or a nil array if nothing was popped.
fn mpop_reply(popped: Option<Popped>) -> Reply {
    popped.map_or(Reply::NilArray, |(key, values)| {
        Reply::Array(vec![Reply::Bulk(key), Reply::bulks(values)])
    })
}

fn lmpop(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let m = Mpop::parse(a, 1, End::parse)?;
    Ok(mpop_reply(pop_first(ctx, &a[m.keys], m.side, m.count)?))
}

fn blmpop(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let m = Mpop::parse(a, 2, End::parse)?;
    let timeout = ordered::timeout(&a[1])?;
    match pop_first(ctx, &a[m.keys], m.side, m.count)? {
        None => Err(Failure::Blocked {
            timeout,
            now: Reply::NilArray,
        }),
        popped => Ok(mpop_reply(popped)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_from_either_end() {
        assert_eq!(position(0, 3), Some(0));
        assert_eq!(position(-1, 3), Some(2));
        assert_eq!(position(-3, 3), Some(0));
        assert_eq!(position(-4, 3), None);
        assert_eq!(position(3, 3), None);
        assert_eq!(position(i64::MIN, 3), None);
        assert_eq!(position(0, 0), None);
    }
}
