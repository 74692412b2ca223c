//! `ZUNIONSTORE`, `ZINTERSTORE`, `ZDIFFSTORE`, `ZUNION`, `ZINTER`, `ZDIFF`, `ZINTERCARD`:
//! sorted sets (and sets, each member scored 1) combined as Redis's
//! `zunionInterDiffGenericCommand` combines them, down to the order it adds scores in (the
//! inputs by size, ascending), so sums round as Redis's do.

use super::collection::Coll;
use super::ordered;
use super::zsets::{self, Entry, ZSet};
use super::{args, data, floats, CmdResult, Failure, Keys, Spec};
use crate::keyspace::encoding::{self, tag, Kind};
use crate::keyspace::{Ctx, KsError};
use crate::resp::reply::Reply;
use std::collections::HashMap;

/// The family's commands: sorted sets combined (`zsets` has the rest).
pub const COMMANDS: &[Spec] = &[
    ZUNIONSTORE,
    ZINTERSTORE,
    ZDIFFSTORE,
    ZUNION,
    ZINTER,
    ZDIFF,
    ZINTERCARD,
];

/// `ZUNIONSTORE dst numkeys key ... [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX]`.
pub const ZUNIONSTORE: Spec = data(
    "zunionstore",
    -4,
    &["write", "denyoom", "movablekeys"],
    Keys::Custom(store_keys, 1, 1, 1),
    zunionstore,
);

/// `ZINTERSTORE`, as `ZUNIONSTORE`.
pub const ZINTERSTORE: Spec = data(
    "zinterstore",
    -4,
    &["write", "denyoom", "movablekeys"],
    Keys::Custom(store_keys, 1, 1, 1),
    zinterstore,
);

/// `ZDIFFSTORE dst numkeys key ...`.
pub const ZDIFFSTORE: Spec = data(
    "zdiffstore",
    -4,
    &["write", "denyoom", "movablekeys"],
    Keys::Custom(store_keys, 1, 1, 1),
    zdiffstore,
);

/// `ZUNION numkeys key ... [WEIGHTS ...] [AGGREGATE ...] [WITHSCORES]`.
pub const ZUNION: Spec = data(
    "zunion",
    -3,
    &["readonly", "movablekeys"],
    Keys::Custom(read_keys, 0, 0, 0),
    zunion,
);

/// `ZINTER`, as `ZUNION`.
pub const ZINTER: Spec = data(
    "zinter",
    -3,
    &["readonly", "movablekeys"],
    Keys::Custom(read_keys, 0, 0, 0),
    zinter,
);

/// `ZDIFF numkeys key ... [WITHSCORES]`.
pub const ZDIFF: Spec = data(
    "zdiff",
    -3,
    &["readonly", "movablekeys"],
    Keys::Custom(read_keys, 0, 0, 0),
    zdiff,
);

/// `ZINTERCARD numkeys key ... [LIMIT limit]`.
pub const ZINTERCARD: Spec = data(
    "zintercard",
    -3,
    &["readonly", "movablekeys"],
    Keys::Custom(read_keys, 0, 0, 0),
    zintercard,
);

fn store_keys(a: &[Vec<u8>]) -> Vec<usize> {
    let mut keys = vec![1];
    keys.extend(ordered::keys_after(a, 2));
    keys
}

fn read_keys(a: &[Vec<u8>]) -> Vec<usize> {
    ordered::keys_after(a, 1)
}

/// How inputs combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Union,
    Inter,
    Diff,
}

/// `AGGREGATE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Agg {
    Sum,
    Min,
    Max,
}

impl Agg {
    /// Folds `v` into `target` as Redis's `zunionInterAggregate` does (a sum of `inf` and
    /// `-inf` is 0; a NaN never wins a comparison).
    fn fold(self, target: &mut f64, v: f64) {
        match self {
            Agg::Sum => {
                *target += v;
                if target.is_nan() {
                    *target = 0.0;
                }
            }
            Agg::Min => {
                if v < *target {
                    *target = v;
                }
            }
            Agg::Max => {
                if v > *target {
                    *target = v;
                }
            }
        }
    }
}

/// `score * weight`, 0 if that is NaN (`inf * 0`), as Redis weighs an input's first score.
fn weighted(score: f64, weight: f64) -> f64 {
    let v = score * weight;
    if v.is_nan() {
        0.0
    } else {
        v
    }
}

/// One input.
enum Source<'k> {
    /// No such key: empty.
    Missing,
    ZSet(ZSet<'k>),
    /// A set: its members score 1.
    Set(Coll<'k>),
}

impl<'k> Source<'k> {
    fn load(ctx: &mut Ctx<'_>, key: &'k [u8]) -> Result<Source<'k>, Failure> {
        match ctx.lookup(key)?.map(|m| m.kind) {
            None => Ok(Source::Missing),
            Some(Kind::ZSet) => Ok(ZSet::load(ctx, key)?.map_or(Source::Missing, Source::ZSet)),
            Some(Kind::Set) => {
                Ok(Coll::load(ctx, key, Kind::Set)?.map_or(Source::Missing, Source::Set))
            }
            Some(_) => Err(KsError::WrongType.into()),
        }
    }

    fn len(&self) -> u64 {
        match self {
            Source::Missing => 0,
            Source::ZSet(z) => z.len(),
            Source::Set(s) => s.size(),
        }
    }

    fn entries(&self, ctx: &mut Ctx<'_>) -> Result<Vec<Entry>, Failure> {
        match self {
            Source::Missing => Ok(Vec::new()),
            Source::ZSet(z) => z.all(ctx, false)?.collect(),
            Source::Set(s) => s
                .records(ctx, tag::MEMBER, b"")?
                .map(|r| Ok((r?.0, 1.0)))
                .collect(),
        }
    }

    fn score(&self, ctx: &mut Ctx<'_>, member: &[u8]) -> Result<Option<f64>, Failure> {
        match self {
            Source::Missing => Ok(None),
            Source::ZSet(z) => z.score(ctx, member),
            Source::Set(s) => Ok(s.get(ctx, tag::MEMBER, member)?.map(|_| 1.0)),
        }
    }
}

/// A combining command's arguments.
struct Combine<'k> {
    op: Op,
    /// The inputs with their weights.
    sources: Vec<(Source<'k>, f64)>,
    agg: Agg,
    withscores: bool,
    /// `ZINTERCARD`'s `LIMIT` (0: none).
    limit: u64,
}

/// Which of the family a command is.
struct Form {
    op: Op,
    name: &'static str,
    /// The index of `numkeys`.
    at: usize,
    /// It stores its result (no `WITHSCORES`).
    store: bool,
    /// `ZINTERCARD`: only `LIMIT`.
    card: bool,
}

impl<'k> Combine<'k> {
    /// Reads the arguments as Redis does: the inputs are looked up (and their types
    /// checked) before the options are read.
    fn parse(ctx: &mut Ctx<'_>, a: &'k [Vec<u8>], f: &Form) -> Result<Combine<'k>, Failure> {
        let n = args::int(&a[f.at])?;
        if n < 1 {
            return Err(args::err(format!(
                "ERR at least 1 input key is needed for '{}' command",
                f.name
            )));
        }
        let first = f.at + 1;
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        if n > a.len() - first {
            return Err(args::syntax());
        }
        let sources = a[first..first + n]
            .iter()
            .map(|k| Ok((Source::load(ctx, k)?, 1.0)))
            .collect::<Result<Vec<_>, Failure>>()?;
        let mut c = Combine {
            op: f.op,
            sources,
            agg: Agg::Sum,
            withscores: false,
            limit: 0,
        };
        let mut j = first + n;
        let scored = f.op != Op::Diff && !f.card;
        while j < a.len() {
            let left = a.len() - j;
            if scored && left > n && args::is(&a[j], "weights") {
                for (i, w) in a[j + 1..=j + n].iter().enumerate() {
                    c.sources[i].1 = floats::parse_score(w)
                        .ok_or_else(|| args::err("ERR weight value is not a float"))?;
                }
                j += n + 1;
            } else if scored && left >= 2 && args::is(&a[j], "aggregate") {
                c.agg = match a[j + 1].to_ascii_lowercase().as_slice() {
                    b"sum" => Agg::Sum,
                    b"min" => Agg::Min,
                    b"max" => Agg::Max,
                    _ => return Err(args::syntax()),
                };
                j += 2;
            } else if !f.store && !f.card && args::is(&a[j], "withscores") {
                c.withscores = true;
                j += 1;
            } else if f.card && left >= 2 && args::is(&a[j], "limit") {
                c.limit = match args::int(&a[j + 1]) {
                    Ok(l) if l >= 0 => l as u64,
                    _ => return Err(args::err("ERR LIMIT can't be negative")),
                };
                j += 2;
            } else {
                return Err(args::syntax());
            }
        }
        Ok(c)
    }

    /// The inputs' indexes by size, smallest first (stable, as glibc's `qsort` sorts).
    fn by_size(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.sources.len()).collect();
        order.sort_by_key(|&i| self.sources[i].0.len());
        order
    }

    /// The result, in no order; `ZINTERCARD` stops at its limit.
    fn run(&self, ctx: &mut Ctx<'_>) -> Result<Vec<Entry>, Failure> {
        match self.op {
            Op::Union => self.union(ctx),
            Op::Inter => self.inter(ctx),
            Op::Diff => self.diff(ctx),
        }
    }

    fn union(&self, ctx: &mut Ctx<'_>) -> Result<Vec<Entry>, Failure> {
        let mut acc: HashMap<Vec<u8>, f64> = HashMap::new();
        for i in self.by_size() {
            let (src, w) = &self.sources[i];
            for (m, s) in src.entries(ctx)? {
                let v = weighted(s, *w);
                acc.entry(m)
                    .and_modify(|t| self.agg.fold(t, v))
                    .or_insert(v);
            }
        }
        Ok(acc.into_iter().collect())
    }

    fn inter(&self, ctx: &mut Ctx<'_>) -> Result<Vec<Entry>, Failure> {
        let order = self.by_size();
        let Some((&first, rest)) = order.split_first() else {
            return Ok(Vec::new());
        };
        let (src, w) = &self.sources[first];
        let mut out = Vec::new();
        'members: for (m, s) in src.entries(ctx)? {
            let mut score = weighted(s, *w);
            for &j in rest {
                let (other, wj) = &self.sources[j];
                match other.score(ctx, &m)? {
                    Some(v) => self.agg.fold(&mut score, v * wj),
                    None => continue 'members,
                }
            }
            out.push((m, score));
            if self.limit > 0 && out.len() as u64 >= self.limit {
                break;
            }
        }
        Ok(out)
    }

    fn diff(&self, ctx: &mut Ctx<'_>) -> Result<Vec<Entry>, Failure> {
        let Some(((first, _), rest)) = self.sources.split_first() else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        'members: for (m, s) in first.entries(ctx)? {
            for (other, _) in rest {
                if other.score(ctx, &m)?.is_some() {
                    continue 'members;
                }
            }
            out.push((m, s));
        }
        Ok(out)
    }
}

/// Runs a storing form: the result replaces `a[1]`.
fn store_cmd(ctx: &mut Ctx<'_>, a: &[Vec<u8>], op: Op, name: &'static str) -> CmdResult {
    let form = Form {
        op,
        name,
        at: 2,
        store: true,
        card: false,
    };
    let result = Combine::parse(ctx, a, &form)?.run(ctx)?;
    zsets::store(ctx, &a[1], &result)
}

/// Runs a replying form: the result in score order, then member order.
fn reply_cmd(ctx: &mut Ctx<'_>, a: &[Vec<u8>], op: Op, name: &'static str) -> CmdResult {
    let form = Form {
        op,
        name,
        at: 1,
        store: false,
        card: false,
    };
    let c = Combine::parse(ctx, a, &form)?;
    let mut result = c.run(ctx)?;
    result.sort_by(|x, y| (encoding::score_key(x.1), &x.0).cmp(&(encoding::score_key(y.1), &y.0)));
    Ok(zsets::entries_reply(result, c.withscores))
}

fn zunionstore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    store_cmd(ctx, a, Op::Union, "zunionstore")
}

fn zinterstore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    store_cmd(ctx, a, Op::Inter, "zinterstore")
}

fn zdiffstore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    store_cmd(ctx, a, Op::Diff, "zdiffstore")
}

fn zunion(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    reply_cmd(ctx, a, Op::Union, "zunion")
}

fn zinter(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    reply_cmd(ctx, a, Op::Inter, "zinter")
}

fn zdiff(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    reply_cmd(ctx, a, Op::Diff, "zdiff")
}

fn zintercard(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let form = Form {
        op: Op::Inter,
        name: "zintercard",
        at: 1,
        store: false,
        card: true,
    };
    let n = Combine::parse(ctx, a, &form)?.run(ctx)?.len();
    Ok(Reply::Int(n as i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numkeys_names_the_keys_it_can() {
        let a = |s: &str| -> Vec<Vec<u8>> { s.split(' ').map(|w| w.as_bytes().to_vec()).collect() };
        assert_eq!(
            store_keys(&a("zunionstore d 2 a b weights 1 2")),
            vec![1, 3, 4]
        );
        assert_eq!(store_keys(&a("zunionstore d 9 a")), vec![1, 3]);
        assert_eq!(store_keys(&a("zunionstore d x a")), vec![1]);
        assert_eq!(read_keys(&a("zunion -1 a")), Vec::<usize>::new());
        assert_eq!(read_keys(&a("zunion 1 a b")), vec![2]);
    }

    #[test]
    fn aggregates_fold_as_redis() {
        let mut t = f64::INFINITY;
        Agg::Sum.fold(&mut t, f64::NEG_INFINITY);
        assert_eq!(t, 0.0);
        let mut t = 1.0;
        Agg::Min.fold(&mut t, f64::NAN);
        assert_eq!(t, 1.0);
        Agg::Max.fold(&mut t, 3.0);
        assert_eq!(t, 3.0);
        assert_eq!(weighted(f64::INFINITY, 0.0), 0.0);
    }
}
