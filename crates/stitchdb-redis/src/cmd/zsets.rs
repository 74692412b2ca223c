//! Sorted-set commands: `ZADD`, `ZRANGE`, `ZRANK`, `ZPOPMIN`, `BZPOPMIN`, `ZSCAN` ...
//!
//! Two records per member: tag `ZMEMBER` member -> its score (`score_key`'s 8 bytes), for
//! lookups by member; tag `ZSCORE` score ++ member -> empty, ordered by score then member
//! as Redis orders them, for ranges. A range by score, or by member among equal scores, is
//! one seek; a rank is counted from the nearer end of the index, so `ZRANK` and a `ZRANGE`
//! by rank are O(distance to the nearer end), and `ZCOUNT` O(count), where Redis's
//! skiplist is O(log N).
//! `ZUNIONSTORE` and its kin are in `zstore`.

use super::collection::{self, Coll};
use super::ordered::{self, Mpop, KEYS_THEN_TIMEOUT, SRC_DST};
use super::zrange::{self, LexRange, RangeArgs, ScoreRange, Select};
use super::{args, data, floats, single_key, CmdResult, Failure, Keys, Spec};
use crate::keyspace::encoding::{self, tag, Kind};
use crate::keyspace::{Ctx, Table};
use crate::resp::reply::{self, Reply};
use std::ops::Bound;

/// The family's commands.
pub const COMMANDS: &[Spec] = &[
    single_key("zadd", -4, &["write", "denyoom", "fast"], zadd),
    single_key("zincrby", 4, &["write", "denyoom", "fast"], zincrby),
    single_key("zrem", -3, &["write", "fast"], zrem),
    single_key("zcard", 2, &["readonly", "fast"], zcard),
    single_key("zcount", 4, &["readonly", "fast"], zcount),
    single_key("zlexcount", 4, &["readonly", "fast"], zlexcount),
    single_key("zscore", 3, &["readonly", "fast"], zscore),
    single_key("zmscore", -3, &["readonly", "fast"], zmscore),
    single_key("zrank", 3, &["readonly", "fast"], zrank),
    single_key("zrevrank", 3, &["readonly", "fast"], zrevrank),
    single_key("zrange", -4, &["readonly"], zrange),
    single_key("zrangebyscore", -4, &["readonly"], zrangebyscore),
    single_key("zrevrangebyscore", -4, &["readonly"], zrevrangebyscore),
    single_key("zrangebylex", -4, &["readonly"], zrangebylex),
    single_key("zrevrangebylex", -4, &["readonly"], zrevrangebylex),
    single_key("zrevrange", -4, &["readonly"], zrevrange),
    data(
        "zrangestore",
        -5,
        &["write", "denyoom"],
        SRC_DST,
        zrangestore,
    ),
    single_key("zremrangebyscore", 4, &["write"], zremrangebyscore),
    single_key("zremrangebyrank", 4, &["write"], zremrangebyrank),
    single_key("zremrangebylex", 4, &["write"], zremrangebylex),
    single_key("zpopmin", -2, &["write", "fast"], zpopmin),
    single_key("zpopmax", -2, &["write", "fast"], zpopmax),
    single_key("zscan", -3, &["readonly"], zscan),
    data(
        "zmpop",
        -4,
        &["write", "movablekeys"],
        Keys::Custom(zmpop_keys, 0, 0, 0),
        zmpop,
    ),
    data(
        "bzpopmin",
        -3,
        &["write", "noscript", "blocking", "fast"],
        KEYS_THEN_TIMEOUT,
        bzpopmin,
    ),
    data(
        "bzpopmax",
        -3,
        &["write", "noscript", "blocking", "fast"],
        KEYS_THEN_TIMEOUT,
        bzpopmax,
    ),
    data(
        "bzmpop",
        -5,
        &["write", "blocking", "movablekeys"],
        Keys::Custom(bzmpop_keys, 0, 0, 0),
        bzmpop,
    ),
    single_key("zrandmember", -2, &["readonly"], zrandmember),
];

/// A member and its score.
pub(crate) type Entry = (Vec<u8>, f64);

/// Entries in index order (or reversed).
pub(crate) type Entries = Box<dyn Iterator<Item = Result<Entry, Failure>>>;

fn no_entries() -> Entries {
    Box::new(std::iter::empty())
}

/// A sorted set under `key`.
pub(crate) struct ZSet<'k> {
    key: &'k [u8],
    c: Coll<'k>,
    /// Records written: `Coll::save` tells `WATCH` of the header's changes, and of these.
    wrote: bool,
}

impl<'k> ZSet<'k> {
    /// `key`'s sorted set (`None`: no such key; `WrongType` if another type).
    pub(crate) fn load(ctx: &mut Ctx<'_>, key: &'k [u8]) -> Result<Option<ZSet<'k>>, Failure> {
        let c = Coll::load(ctx, key, Kind::ZSet)?;
        Ok(c.map(|c| ZSet {
            key,
            c,
            wrote: false,
        }))
    }

    /// A new empty sorted set for `key` (written by `save`).
    fn create(ctx: &Ctx<'_>, key: &'k [u8]) -> Result<ZSet<'k>, Failure> {
        Ok(ZSet {
            key,
            c: Coll::create(ctx, key, Kind::ZSet)?,
            wrote: false,
        })
    }

    /// Members.
    pub(crate) fn len(&self) -> u64 {
        self.c.size()
    }

    fn version(&self) -> u64 {
        self.c.header().version
    }

    /// `member`'s score, if it is one.
    pub(crate) fn score(&self, ctx: &mut Ctx<'_>, member: &[u8]) -> Result<Option<f64>, Failure> {
        let v = self.c.get(ctx, tag::ZMEMBER, member)?;
        Ok(v.filter(|b| b.len() == 8)
            .map(|b| encoding::score_from_key(&b)))
    }

    /// The score index's suffix for `member` at `score`.
    fn index_key(score: f64, member: &[u8]) -> Vec<u8> {
        let mut k = encoding::score_key(score).to_vec();
        k.extend_from_slice(member);
        k
    }

    /// Sets `member`'s score to `new` (its score now is `old`).
    fn set(
        &mut self,
        ctx: &mut Ctx<'_>,
        member: &[u8],
        old: Option<f64>,
        new: f64,
    ) -> Result<(), Failure> {
        let v = self.version();
        match old {
            Some(o) => ctx.delete_member(self.key, v, tag::ZSCORE, &Self::index_key(o, member))?,
            None => self.c.header_mut().size += 1,
        }
        let sk = encoding::score_key(new);
        ctx.put_member(self.key, v, tag::ZMEMBER, member, &sk)?;
        ctx.put_member(self.key, v, tag::ZSCORE, &Self::index_key(new, member), b"")?;
        self.wrote = true;
        Ok(())
    }

    /// Removes `member`, whose score is `score`.
    fn remove(&mut self, ctx: &mut Ctx<'_>, member: &[u8], score: f64) -> Result<(), Failure> {
        let v = self.version();
        ctx.delete_member(self.key, v, tag::ZMEMBER, member)?;
        ctx.delete_member(self.key, v, tag::ZSCORE, &Self::index_key(score, member))?;
        self.c.header_mut().size -= 1;
        self.wrote = true;
        Ok(())
    }

    /// Removes each of `entries` (members with their scores).
    fn remove_all(&mut self, ctx: &mut Ctx<'_>, entries: &[Entry]) -> Result<(), Failure> {
        for (m, s) in entries {
            self.remove(ctx, m, *s)?;
        }
        Ok(())
    }

    /// Writes the header back (deleting the key if the set is empty), and tells `WATCH`
    /// if records were written.
    fn save(self, ctx: &mut Ctx<'_>) -> Result<(), Failure> {
        let (key, wrote) = (self.key, self.wrote);
        self.c.save(ctx)?;
        if wrote {
            ctx.touch(key);
        }
        Ok(())
    }

    /// The entries of the score index from suffix `lo` (inclusive) to `hi` (exclusive;
    /// `None`: to the end), ascending or, if `rev`, descending.
    fn walk(
        &self,
        ctx: &mut Ctx<'_>,
        lo: &[u8],
        hi: Option<&[u8]>,
        rev: bool,
    ) -> Result<Entries, Failure> {
        if hi.is_some_and(|h| h <= lo) {
            return Ok(no_entries());
        }
        let prefix = encoding::tag_prefix(self.key, self.version(), tag::ZSCORE);
        let with_prefix = |s: &[u8]| [prefix.as_slice(), s].concat();
        let start = with_prefix(lo);
        let end = match hi {
            Some(h) => Some(with_prefix(h)),
            None => encoding::prefix_end(&prefix),
        };
        let end_bound = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let pairs = ctx.scan(Table::Members, Bound::Included(&start), end_bound, rev)?;
        let skip = prefix.len();
        Ok(Box::new(pairs.map(move |p| entry(&p?.0[skip..]))))
    }

    /// The entries at `positions` (0 the highest score, so that every position is the whole
    /// set highest first, as Redis replies then), in the order of `positions`.
    fn pick(&self, ctx: &mut Ctx<'_>, positions: &[u64]) -> Result<Vec<Entry>, Failure> {
        let size = self.len();
        let from_lowest: Vec<u64> = positions.iter().map(|p| size - 1 - p).collect();
        self.c
            .at_positions(ctx, tag::ZSCORE, &from_lowest)?
            .iter()
            .map(|(k, _)| entry(k))
            .collect()
    }

    /// Every entry, ascending or, if `rev`, descending.
    pub(crate) fn all(&self, ctx: &mut Ctx<'_>, rev: bool) -> Result<Entries, Failure> {
        self.walk(ctx, b"", None, rev)
    }

    /// The lowest entry, or the highest if `rev`.
    fn end(&self, ctx: &mut Ctx<'_>, rev: bool) -> Result<Option<Entry>, Failure> {
        self.all(ctx, rev)?.next().transpose()
    }

    /// The entries scored in `r`, from the lowest (highest if `rev`), less the first `skip`.
    fn by_score(
        &self,
        ctx: &mut Ctx<'_>,
        r: &ScoreRange,
        rev: bool,
        skip: usize,
    ) -> Result<Entries, Failure> {
        if r.is_empty() {
            return Ok(no_entries());
        }
        let (lo, hi) = r.index_bounds();
        Ok(Box::new(self.walk(ctx, &lo, Some(&hi), rev)?.skip(skip)))
    }

    /// The entries whose members are in `r`, as Redis finds them: a lex range assumes every
    /// score is equal (then it is one seek); with unequal scores, Redis's answer is what its
    /// scan in score order gives (first a member past the lower end, then members while
    /// before the upper end), and so is ours. The first `skip` are left out (unchecked, as
    /// Redis skips them).
    fn by_lex(
        &self,
        ctx: &mut Ctx<'_>,
        r: &LexRange,
        rev: bool,
        skip: usize,
    ) -> Result<Entries, Failure> {
        let (Some(first), Some(last)) = (self.end(ctx, false)?, self.end(ctx, true)?) else {
            return Ok(no_entries());
        };
        if r.is_empty() || !r.above_min(&last.0) || !r.below_max(&first.0) {
            return Ok(no_entries());
        }
        if first.1 == last.1 {
            let (lo, hi) = r.index_bounds(encoding::score_key(first.1));
            return Ok(Box::new(self.walk(ctx, &lo, Some(&hi), rev)?.skip(skip)));
        }
        let (r1, r2) = (r.clone(), r.clone());
        let starts = move |m: &[u8]| {
            if rev {
                r1.below_max(m)
            } else {
                r1.above_min(m)
            }
        };
        let stays = move |m: &[u8]| {
            if rev {
                r2.above_min(m)
            } else {
                r2.below_max(m)
            }
        };
        let mut from_first = self
            .all(ctx, rev)?
            .skip_while(move |e| e.as_ref().is_ok_and(|(m, _)| !starts(m)))
            .peekable();
        if from_first
            .peek()
            .is_some_and(|e| e.as_ref().is_ok_and(|(m, _)| !stays(m)))
        {
            return Ok(no_entries());
        }
        Ok(Box::new(from_first.skip(skip).take_while(move |e| {
            e.as_ref().map_or(true, |(m, _)| stays(m))
        })))
    }

    /// The entries of ranks `lo..hi` (ascending ranks), lowest first or, if `rev`, highest
    /// first; walked from the nearer end of the index.
    fn by_rank(
        &self,
        ctx: &mut Ctx<'_>,
        lo: u64,
        hi: u64,
        rev: bool,
    ) -> Result<Vec<Entry>, Failure> {
        let len = self.len();
        let n = to_usize(hi - lo);
        let mut out: Vec<Entry> = if lo <= len - hi {
            self.all(ctx, false)?
                .skip(to_usize(lo))
                .take(n)
                .collect::<Result<_, _>>()?
        } else {
            let mut v: Vec<Entry> = self
                .all(ctx, true)?
                .skip(to_usize(len - hi))
                .take(n)
                .collect::<Result<_, _>>()?;
            v.reverse();
            v
        };
        if rev {
            out.reverse();
        }
        Ok(out)
    }

    /// `member`'s rank (from the highest if `rev`), counted from the nearer end of the
    /// index: the entries below it and those above it are walked in step, and the first
    /// walk to run out has counted its side.
    fn rank(&self, ctx: &mut Ctx<'_>, member: &[u8], rev: bool) -> Result<Option<u64>, Failure> {
        let Some(score) = self.score(ctx, member)? else {
            return Ok(None);
        };
        let mut at = Self::index_key(score, member);
        let mut below = self.walk(ctx, b"", Some(&at), false)?;
        at.push(0);
        let mut above = self.walk(ctx, &at, None, true)?;
        let last = self.len().saturating_sub(1);
        let mut n = 0;
        let rank = loop {
            if below.next().transpose()?.is_none() {
                break n;
            }
            if above.next().transpose()?.is_none() {
                break last.saturating_sub(n);
            }
            n += 1;
        };
        Ok(Some(if rev { last - rank } else { rank }))
    }

    /// What a `ZRANGE` selects, in its order.
    fn select(&self, ctx: &mut Ctx<'_>, r: &RangeArgs) -> Result<Vec<Entry>, Failure> {
        let len = self.len();
        // A rank range ignores `LIMIT` (allowed there only as `count` -1, and its offset
        // is not looked at).
        let limited = !matches!(r.select, Select::Rank(..));
        let (skip, take) = match usize::try_from(r.offset) {
            Ok(skip) => (skip, usize::try_from(r.limit).unwrap_or(usize::MAX)),
            // Redis skips a negative offset's "count" of entries: all of them.
            Err(_) if limited => return Ok(Vec::new()),
            Err(_) => (0, usize::MAX),
        };
        match &r.select {
            Select::Rank(start, end) => match ordered::span(*start, *end, len) {
                Some((lo, hi)) if r.rev => self.by_rank(ctx, len - hi, len - lo, true),
                Some((lo, hi)) => self.by_rank(ctx, lo, hi, false),
                None => Ok(Vec::new()),
            },
            Select::Score(s) => self.by_score(ctx, s, r.rev, skip)?.take(take).collect(),
            Select::Lex(l) => self.by_lex(ctx, l, r.rev, skip)?.take(take).collect(),
        }
    }
}

/// The entry a score index record's suffix (score, then member) holds.
fn entry(suffix: &[u8]) -> Result<Entry, Failure> {
    match suffix.split_at_checked(8) {
        Some((sk, m)) => Ok((m.to_vec(), encoding::score_from_key(sk))),
        None => Err(args::err("ERR a sorted set's score index is damaged")),
    }
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// Entries as Redis replies with them: members, or with scores (`[member, score]` pairs in
/// RESP3).
pub(crate) fn entries_reply(entries: Vec<Entry>, withscores: bool) -> Reply {
    if withscores {
        Reply::Pairs(
            entries
                .into_iter()
                .map(|(m, s)| (Reply::Bulk(m), Reply::Double(s)))
                .collect(),
        )
    } else {
        Reply::bulks(entries.into_iter().map(|(m, _)| m))
    }
}

/// Fails as the store would for `member`'s longest record in `key`'s set (its score index
/// record: 8 bytes of score, then the member), before a command's first write.
fn check_member(key: &[u8], member: &[u8]) -> Result<(), Failure> {
    collection::check_member(key, &ZSet::index_key(0.0, member))
}

/// Replaces `dst` with a sorted set of `entries` (distinct members), or deletes it if there
/// are none, as Redis stores results (any old value and expiry gone). Returns their number.
pub(crate) fn store(ctx: &mut Ctx<'_>, dst: &[u8], entries: &[Entry]) -> CmdResult {
    for (m, _) in entries {
        check_member(dst, m)?;
    }
    if entries.is_empty() {
        ctx.delete_key(dst)?;
        return Ok(Reply::Int(0));
    }
    let mut z = ZSet::create(ctx, dst)?;
    for (m, s) in entries {
        z.set(ctx, m, None, *s)?;
    }
    let n = z.len();
    z.save(ctx)?;
    Ok(Reply::Int(n as i64))
}

/// `ZADD`'s options.
#[derive(Default)]
struct Zadd {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

/// `ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member ...`, and `ZINCRBY` (`incr` set, no
/// options), as Redis's `zaddGenericCommand` runs them.
fn zadd_generic(ctx: &mut Ctx<'_>, a: &[Vec<u8>], incr: bool) -> CmdResult {
    let mut o = Zadd {
        incr,
        ..Zadd::default()
    };
    let mut i = 2;
    while let Some(word) = a.get(i) {
        let flag = match word.to_ascii_lowercase().as_slice() {
            b"nx" => &mut o.nx,
            b"xx" => &mut o.xx,
            b"gt" => &mut o.gt,
            b"lt" => &mut o.lt,
            b"ch" => &mut o.ch,
            b"incr" => &mut o.incr,
            _ => break,
        };
        *flag = true;
        i += 1;
    }
    let rest = &a[i..];
    if rest.is_empty() || rest.len() % 2 == 1 {
        return Err(args::syntax());
    }
    if o.nx && o.xx {
        return Err(args::err(
            "ERR XX and NX options at the same time are not compatible",
        ));
    }
    // Any two of them.
    if [o.gt, o.lt, o.nx].iter().filter(|&&f| f).count() > 1 {
        return Err(args::err(
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if o.incr && rest.len() > 2 {
        return Err(args::err(
            "ERR INCR option supports a single increment-element pair",
        ));
    }
    let pairs: Vec<(f64, &[u8])> = rest
        .chunks(2)
        .map(|p| Ok((floats::score(&p[0])?, p[1].as_slice())))
        .collect::<Result<_, Failure>>()?;
    for (_, m) in &pairs {
        check_member(&a[1], m)?;
    }
    let mut z = match ZSet::load(ctx, &a[1])? {
        Some(z) => z,
        None if o.xx => return Ok(if o.incr { Reply::Nil } else { Reply::Int(0) }),
        None => ZSet::create(ctx, &a[1])?,
    };
    let (mut added, mut updated, mut last) = (0, 0, None);
    for (score, member) in pairs {
        let old = z.score(ctx, member)?;
        let new = match old {
            Some(_) if o.nx => continue,
            None if o.xx => continue,
            Some(cur) if o.incr => cur + score,
            _ => score,
        };
        if new.is_nan() {
            return Err(args::err("ERR resulting score is not a number (NaN)"));
        }
        if let Some(cur) = old {
            if (o.lt && new >= cur) || (o.gt && new <= cur) {
                continue;
            }
        }
        last = Some(new);
        if old == Some(new) {
            continue;
        }
        if old.is_some() {
            updated += 1;
        } else {
            added += 1;
        }
        z.set(ctx, member, old, new)?;
    }
    if added + updated > 0 {
        z.save(ctx)?;
    }
    Ok(if o.incr {
        last.map_or(Reply::Nil, Reply::Double)
    } else {
        Reply::Int(if o.ch { added + updated } else { added })
    })
}

fn zadd(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    zadd_generic(ctx, a, false)
}

fn zincrby(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    zadd_generic(ctx, a, true)
}

fn zrem(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let Some(mut z) = ZSet::load(ctx, &a[1])? else {
        return Ok(Reply::Int(0));
    };
    let mut removed = 0;
    for m in &a[2..] {
        if let Some(s) = z.score(ctx, m)? {
            z.remove(ctx, m, s)?;
            removed += 1;
        }
    }
    if removed > 0 {
        z.save(ctx)?;
    }
    Ok(Reply::Int(removed))
}

fn zcard(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let n = ZSet::load(ctx, &a[1])?.map_or(0, |z| z.len());
    Ok(Reply::Int(n as i64))
}

/// The entries counted.
fn count(entries: Entries) -> CmdResult {
    let mut n = 0;
    for e in entries {
        e?;
        n += 1;
    }
    Ok(Reply::Int(n))
}

fn zcount(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let r = ScoreRange::parse(&a[2], &a[3])?;
    match ZSet::load(ctx, &a[1])? {
        Some(z) => count(z.by_score(ctx, &r, false, 0)?),
        None => Ok(Reply::Int(0)),
    }
}

fn zlexcount(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let r = LexRange::parse(&a[2], &a[3])?;
    match ZSet::load(ctx, &a[1])? {
        Some(z) => count(z.by_lex(ctx, &r, false, 0)?),
        None => Ok(Reply::Int(0)),
    }
}

fn zscore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let score = match ZSet::load(ctx, &a[1])? {
        Some(z) => z.score(ctx, &a[2])?,
        None => None,
    };
    Ok(score.map_or(Reply::Nil, Reply::Double))
}

fn zmscore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let z = ZSet::load(ctx, &a[1])?;
    let mut out = Vec::with_capacity(a.len() - 2);
    for m in &a[2..] {
        let s = match &z {
            Some(z) => z.score(ctx, m)?,
            None => None,
        };
        out.push(s.map_or(Reply::Nil, Reply::Double));
    }
    Ok(Reply::Array(out))
}

fn rank_cmd(ctx: &mut Ctx<'_>, a: &[Vec<u8>], rev: bool) -> CmdResult {
    let rank = match ZSet::load(ctx, &a[1])? {
        Some(z) => z.rank(ctx, &a[2], rev)?,
        None => None,
    };
    Ok(rank.map_or(Reply::Nil, |r| Reply::Int(r as i64)))
}

fn zrank(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    rank_cmd(ctx, a, false)
}

fn zrevrank(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    rank_cmd(ctx, a, true)
}

/// The `ZRANGE` family: `by` and `rev` as the command fixes them.
fn range_cmd(
    ctx: &mut Ctx<'_>,
    a: &[Vec<u8>],
    by: Option<zrange::By>,
    rev: Option<bool>,
) -> CmdResult {
    let r = RangeArgs::parse(a, 2, by, rev, false)?;
    let entries = match ZSet::load(ctx, &a[1])? {
        Some(z) => z.select(ctx, &r)?,
        None => Vec::new(),
    };
    Ok(entries_reply(entries, r.withscores))
}

fn zrange(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    range_cmd(ctx, a, None, None)
}

fn zrangebyscore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    range_cmd(ctx, a, Some(zrange::By::Score), Some(false))
}

fn zrevrangebyscore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    range_cmd(ctx, a, Some(zrange::By::Score), Some(true))
}

fn zrangebylex(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    range_cmd(ctx, a, Some(zrange::By::Lex), Some(false))
}

fn zrevrangebylex(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    range_cmd(ctx, a, Some(zrange::By::Lex), Some(true))
}

fn zrevrange(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    range_cmd(ctx, a, Some(zrange::By::Rank), Some(true))
}

fn zrangestore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let r = RangeArgs::parse(a, 3, None, None, true)?;
    let entries = match ZSet::load(ctx, &a[2])? {
        Some(z) => z.select(ctx, &r)?,
        None => Vec::new(),
    };
    store(ctx, &a[1], &entries)
}

/// `ZREMRANGEBY...`: removes what `select` picks from the set; their number.
fn remove_range(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    select: impl FnOnce(&mut Ctx<'_>, &ZSet<'_>) -> Result<Vec<Entry>, Failure>,
) -> CmdResult {
    let Some(mut z) = ZSet::load(ctx, key)? else {
        return Ok(Reply::Int(0));
    };
    let gone = select(ctx, &z)?;
    if !gone.is_empty() {
        z.remove_all(ctx, &gone)?;
        z.save(ctx)?;
    }
    Ok(Reply::Int(gone.len() as i64))
}

fn zremrangebyscore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let r = ScoreRange::parse(&a[2], &a[3])?;
    remove_range(ctx, &a[1], |ctx, z| {
        z.by_score(ctx, &r, false, 0)?.collect()
    })
}

fn zremrangebylex(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let r = LexRange::parse(&a[2], &a[3])?;
    remove_range(ctx, &a[1], |ctx, z| z.by_lex(ctx, &r, false, 0)?.collect())
}

fn zremrangebyrank(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let (start, end) = (args::int(&a[2])?, args::int(&a[3])?);
    remove_range(ctx, &a[1], |ctx, z| {
        match ordered::span(start, end, z.len()) {
            Some((lo, hi)) => z.by_rank(ctx, lo, hi, false),
            None => Ok(Vec::new()),
        }
    })
}

/// Pops up to `n` of `key`'s lowest entries (highest if `max`), if it holds a sorted set.
fn pop(ctx: &mut Ctx<'_>, key: &[u8], max: bool, n: u64) -> Result<Option<Vec<Entry>>, Failure> {
    let Some(mut z) = ZSet::load(ctx, key)? else {
        return Ok(None);
    };
    let popped: Vec<Entry> = z
        .all(ctx, max)?
        .take(to_usize(n))
        .collect::<Result<_, _>>()?;
    if !popped.is_empty() {
        z.remove_all(ctx, &popped)?;
        z.save(ctx)?;
    }
    Ok(Some(popped))
}

/// A key and the entries popped from it.
type Popped = (Vec<u8>, Vec<Entry>);

/// [`pop`] from the first of `keys` holding a sorted set (`None`: every key is empty).
fn pop_first(
    ctx: &mut Ctx<'_>,
    keys: &[Vec<u8>],
    max: bool,
    n: u64,
) -> Result<Option<Popped>, Failure> {
    for key in keys {
        if let Some(popped) = pop(ctx, key, max, n)? {
            return Ok(Some((key.clone(), popped)));
        }
    }
    Ok(None)
}

/// `[member, score, ...]` flat (as `ZPOPMIN` without a count and `BZPOPMIN` reply).
fn flat(entries: Vec<Entry>) -> impl Iterator<Item = Reply> {
    entries
        .into_iter()
        .flat_map(|(m, s)| [Reply::Bulk(m), Reply::Double(s)])
}

/// `ZPOPMIN`/`ZPOPMAX key [count]`: without a count a flat `[member, score]` array (empty
/// if none), with one `[member, score]` pairs.
fn pop_cmd(ctx: &mut Ctx<'_>, a: &[Vec<u8>], max: bool) -> CmdResult {
    if a.len() > 3 {
        return Err(args::syntax());
    }
    let count = a.get(2).map(|c| ordered::positive(c)).transpose()?;
    let popped = pop(ctx, &a[1], max, count.unwrap_or(1))?.unwrap_or_default();
    Ok(match count {
        Some(_) => entries_reply(popped, true),
        None => Reply::Array(flat(popped).collect()),
    })
}

fn zpopmin(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    pop_cmd(ctx, a, false)
}

fn zpopmax(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    pop_cmd(ctx, a, true)
}

/// `BZPOPMIN`/`BZPOPMAX key ... timeout`: `[key, member, score]`.
fn bzpop(ctx: &mut Ctx<'_>, a: &[Vec<u8>], max: bool) -> CmdResult {
    let (keys, t) = a[1..].split_at(a.len() - 2);
    let timeout = ordered::timeout(&t[0])?;
    match pop_first(ctx, keys, max, 1)? {
        Some((key, popped)) => Ok(Reply::Array(
            std::iter::once(Reply::Bulk(key))
                .chain(flat(popped))
                .collect(),
        )),
        None => Err(Failure::Blocked {
            timeout,
            now: Reply::NilArray,
        }),
    }
}

fn bzpopmin(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    bzpop(ctx, a, false)
}

fn bzpopmax(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    bzpop(ctx, a, true)
}

fn zmpop_keys(a: &[Vec<u8>]) -> Vec<usize> {
    ordered::keys_after(a, 1)
}

fn bzmpop_keys(a: &[Vec<u8>]) -> Vec<usize> {
    ordered::keys_after(a, 2)
}

/// `MIN` or `MAX`: whether the highest.
fn min_or_max(arg: &[u8]) -> Result<bool, Failure> {
    if args::is(arg, "min") {
        Ok(false)
    } else if args::is(arg, "max") {
        Ok(true)
    } else {
        Err(args::syntax())
    }
}

/// `[key, [[member, score] ...]]` (nested in RESP2 too), or a nil array if nothing was
/// popped.
fn mpop_reply(popped: Option<Popped>) -> Reply {
    popped.map_or(Reply::NilArray, |(key, entries)| {
        let pairs = entries
            .into_iter()
            .map(|(m, s)| Reply::Array(vec![Reply::Bulk(m), Reply::Double(s)]))
            .collect();
        Reply::Array(vec![Reply::Bulk(key), Reply::Array(pairs)])
    })
}

fn zmpop(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let m = Mpop::parse(a, 1, min_or_max)?;
    Ok(mpop_reply(pop_first(ctx, &a[m.keys], m.side, m.count)?))
}

fn bzmpop(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let m = Mpop::parse(a, 2, min_or_max)?;
    let timeout = ordered::timeout(&a[1])?;
    match pop_first(ctx, &a[m.keys], m.side, m.count)? {
        None => Err(Failure::Blocked {
            timeout,
            now: Reply::NilArray,
        }),
        popped => Ok(mpop_reply(popped)),
    }
}

fn zscan(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    collection::scan_records(ctx, a, Kind::ZSet, tag::ZMEMBER, |(m, v), out| {
        if v.len() == 8 {
            out.push(Reply::Bulk(m));
            out.push(Reply::bulk(reply::format_double(encoding::score_from_key(
                &v,
            ))));
        }
    })
}

fn zrandmember(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let Some(count) = a.get(2) else {
        let Some(z) = ZSet::load(ctx, &a[1])? else {
            return Ok(Reply::Nil);
        };
        let one = z.pick(ctx, &collection::random_positions(z.len(), 1, true)?)?;
        return Ok(Reply::opt_bulk(one.into_iter().next().map(|(m, _)| m)));
    };
    let (n, distinct) = collection::random_count(count)?;
    let withscores = match a.get(3) {
        None => false,
        Some(w) if args::is(w, "withscores") && a.len() == 4 => true,
        Some(_) => return Err(args::syntax()),
    };
    // Redis's bound, so that twice the count (a member and a score each) fits.
    if withscores && n > (i64::MAX / 2) as u64 {
        return Err(args::err("ERR value is out of range"));
    }
    let Some(z) = ZSet::load(ctx, &a[1])? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let positions = collection::random_positions(z.len(), n, distinct)?;
    Ok(entries_reply(z.pick(ctx, &positions)?, withscores))
}
