//! Sorted sets' ranges read as Redis reads them: score ranges (`(1.5`, `-inf`), lex ranges
//! (`[a`, `(b`, `-`, `+`), and the options of `ZRANGE` and its older forms (`BYSCORE`,
//! `BYLEX`, `REV`, `LIMIT`, `WITHSCORES`).

use super::floats::strtod;
use super::{args, Failure};
use crate::keyspace::encoding;
use std::cmp::Ordering;

/// One end of a score range as `zslParseRange` reads it (`(` before the number: exclusive):
/// `strtod` over all of it, leading spaces allowed.
fn score_end(arg: &[u8]) -> Option<(f64, bool)> {
    let (exclusive, num) = match arg.split_first() {
        Some((b'(', rest)) => (true, rest),
        _ => (false, arg),
    };
    let (v, used, _) = strtod(num);
    (used == num.len() && !v.is_nan()).then_some((v, exclusive))
}

/// A range of scores.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoreRange {
    min: f64,
    min_ex: bool,
    max: f64,
    max_ex: bool,
}

/// The next 8-byte score key (the least key past every member of that score).
fn next_key(k: [u8; 8]) -> [u8; 8] {
    u64::from_be_bytes(k).saturating_add(1).to_be_bytes()
}

impl ScoreRange {
    /// `min max`, or `ERR min or max is not a float`.
    pub fn parse(min: &[u8], max: &[u8]) -> Result<ScoreRange, Failure> {
        match (score_end(min), score_end(max)) {
            (Some((min, min_ex)), Some((max, max_ex))) => Ok(ScoreRange {
                min,
                min_ex,
                max,
                max_ex,
            }),
            _ => Err(args::err("ERR min or max is not a float")),
        }
    }

    /// Whether no score can be in it.
    pub fn is_empty(&self) -> bool {
        self.min > self.max || (self.min == self.max && (self.min_ex || self.max_ex))
    }

    /// The score index's keys (after the tag) from the range's first entry (inclusive) to
    /// past its last (exclusive); only for a range that is not empty.
    pub fn index_bounds(&self) -> (Vec<u8>, Vec<u8>) {
        let (lo, hi) = (encoding::score_key(self.min), encoding::score_key(self.max));
        let lo = if self.min_ex { next_key(lo) } else { lo };
        let hi = if self.max_ex { hi } else { next_key(hi) };
        (lo.to_vec(), hi.to_vec())
    }
}

/// One end of a lex range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lex {
    /// `-`: before every string.
    Min,
    /// `+`: after every string.
    Max,
    /// `[a`.
    Incl(Vec<u8>),
    /// `(a`.
    Excl(Vec<u8>),
}

impl Lex {
    fn parse(arg: &[u8]) -> Option<Lex> {
        match arg.split_first()? {
            (b'-', []) => Some(Lex::Min),
            (b'+', []) => Some(Lex::Max),
            (b'[', rest) => Some(Lex::Incl(rest.to_vec())),
            (b'(', rest) => Some(Lex::Excl(rest.to_vec())),
            _ => None,
        }
    }

    /// Orders ends as `sdscmplex` does (`-` below all, `+` above all).
    fn cmp(&self, other: &Lex) -> Ordering {
        let rank = |l: &Lex| match l {
            Lex::Min => 0,
            Lex::Incl(_) | Lex::Excl(_) => 1,
            Lex::Max => 2,
        };
        match (self, other) {
            (Lex::Incl(a) | Lex::Excl(a), Lex::Incl(b) | Lex::Excl(b)) => a.cmp(b),
            _ => rank(self).cmp(&rank(other)),
        }
    }

    fn exclusive(&self) -> bool {
        !matches!(self, Lex::Incl(_))
    }

    /// The score index key (after the tag) this end bounds at, for members of score key
    /// `sk`: as a lower bound (inclusive) or an upper one (exclusive).
    fn index_key(&self, sk: [u8; 8], upper: bool) -> Vec<u8> {
        let at = |m: &[u8], past: bool| {
            let mut k = sk.to_vec();
            k.extend_from_slice(m);
            if past {
                // The least string after `m`.
                k.push(0);
            }
            k
        };
        match self {
            Lex::Min => sk.to_vec(),
            Lex::Max => next_key(sk).to_vec(),
            Lex::Incl(m) => at(m, upper),
            Lex::Excl(m) => at(m, !upper),
        }
    }
}

/// A range of members by their bytes (`ZRANGEBYLEX`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LexRange {
    min: Lex,
    max: Lex,
}

impl LexRange {
    /// `min max`, or `ERR min or max not valid string range item`.
    pub fn parse(min: &[u8], max: &[u8]) -> Result<LexRange, Failure> {
        match (Lex::parse(min), Lex::parse(max)) {
            (Some(min), Some(max)) => Ok(LexRange { min, max }),
            _ => Err(args::err("ERR min or max not valid string range item")),
        }
    }

    /// Whether no member can be in it.
    pub fn is_empty(&self) -> bool {
        match self.min.cmp(&self.max) {
            Ordering::Greater => true,
            Ordering::Equal => self.min.exclusive() || self.max.exclusive(),
            Ordering::Less => false,
        }
    }

    /// Whether `m` is past the lower end.
    pub fn above_min(&self, m: &[u8]) -> bool {
        match &self.min {
            Lex::Min => true,
            Lex::Max => false,
            Lex::Incl(x) => m >= x.as_slice(),
            Lex::Excl(x) => m > x.as_slice(),
        }
    }

    /// Whether `m` is before the upper end.
    pub fn below_max(&self, m: &[u8]) -> bool {
        match &self.max {
            Lex::Min => false,
            Lex::Max => true,
            Lex::Incl(x) => m <= x.as_slice(),
            Lex::Excl(x) => m < x.as_slice(),
        }
    }

    /// The score index's keys (after the tag) bounding the range among members of score
    /// key `sk`, as [`ScoreRange::index_bounds`]; only for a range that is not empty.
    pub fn index_bounds(&self, sk: [u8; 8]) -> (Vec<u8>, Vec<u8>) {
        (self.min.index_key(sk, false), self.max.index_key(sk, true))
    }
}

/// What a `ZRANGE` selects.
#[derive(Debug, Clone, PartialEq)]
pub enum Select {
    /// Ranks `start..=end` (negative: from the end).
    Rank(i64, i64),
    /// Scores.
    Score(ScoreRange),
    /// Members' bytes.
    Lex(LexRange),
}

/// How a `ZRANGE` selects: `BYSCORE`, `BYLEX` or neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    /// By rank.
    Rank,
    /// `BYSCORE`.
    Score,
    /// `BYLEX`.
    Lex,
}

/// A `ZRANGE`'s arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct RangeArgs {
    /// What it selects.
    pub select: Select,
    /// From the highest down (`REV`, and the `ZREV...` commands).
    pub rev: bool,
    /// `LIMIT offset count`: entries to skip (negative: all of them, as in Redis).
    pub offset: i64,
    /// Entries to return at most (negative: no limit).
    pub limit: i64,
    /// `WITHSCORES`.
    pub withscores: bool,
}

impl RangeArgs {
    /// `min max [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]` from `a[at]` on, as
    /// Redis's `zrangeGenericCommand` reads them: `by` and `rev` given fix what the older
    /// commands fix (and refuse the words); `store` (`ZRANGESTORE`) refuses `WITHSCORES`.
    pub fn parse(
        a: &[Vec<u8>],
        at: usize,
        by: Option<By>,
        rev: Option<bool>,
        store: bool,
    ) -> Result<RangeArgs, Failure> {
        let (mut by_opt, mut rev_opt) = (by, rev);
        let (mut offset, mut limit, mut withscores) = (0, -1, false);
        let mut j = at + 2;
        while j < a.len() {
            let word = &a[j];
            if !store && args::is(word, "withscores") {
                withscores = true;
            } else if args::is(word, "limit") && j + 2 < a.len() {
                offset = args::int(&a[j + 1])?;
                limit = args::int(&a[j + 2])?;
                j += 2;
            } else if rev_opt.is_none() && args::is(word, "rev") {
                rev_opt = Some(true);
            } else if by_opt.is_none() && args::is(word, "bylex") {
                by_opt = Some(By::Lex);
            } else if by_opt.is_none() && args::is(word, "byscore") {
                by_opt = Some(By::Score);
            } else {
                return Err(args::syntax());
            }
            j += 1;
        }
        let by = by_opt.unwrap_or(By::Rank);
        let rev = rev_opt.unwrap_or(false);
        if limit != -1 && by == By::Rank {
            return Err(args::err("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"));
        }
        if withscores && by == By::Lex {
            return Err(args::err(
                "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
            ));
        }
        let (mut min, mut max) = (&a[at], &a[at + 1]);
        if rev && by != By::Rank {
            // Given as `max min`.
            std::mem::swap(&mut min, &mut max);
        }
        let select = match by {
            By::Rank => Select::Rank(args::int(min)?, args::int(max)?),
            By::Score => Select::Score(ScoreRange::parse(min, max)?),
            By::Lex => Select::Lex(LexRange::parse(min, max)?),
        };
        Ok(RangeArgs {
            select,
            rev,
            offset,
            limit,
            withscores,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_ranges_read_parentheses_and_spaces() {
        let r = ScoreRange::parse(b"(1", b" 2").unwrap();
        assert_eq!((r.min, r.min_ex, r.max, r.max_ex), (1.0, true, 2.0, false));
        assert!(ScoreRange::parse(b"", b"(").is_ok());
        assert!(ScoreRange::parse(b"1 ", b"2").is_err());
        assert!(ScoreRange::parse(b"nan", b"2").is_err());
        assert!(ScoreRange::parse(b"1", b"((2").is_err());
        assert!(ScoreRange::parse(b"(1", b"1").unwrap().is_empty());
        assert!(ScoreRange::parse(b"2", b"1").unwrap().is_empty());
        assert!(!ScoreRange::parse(b"1", b"1").unwrap().is_empty());
    }

    #[test]
    fn lex_ranges_order_their_ends() {
        let r = |a: &str, b: &str| LexRange::parse(a.as_bytes(), b.as_bytes()).unwrap();
        assert!(LexRange::parse(b"a", b"+").is_err());
        assert!(LexRange::parse(b"-x", b"+").is_err());
        assert!(LexRange::parse(b"", b"+").is_err());
        assert!(!r("-", "+").is_empty());
        assert!(r("-", "-").is_empty());
        assert!(r("+", "+").is_empty());
        assert!(r("+", "-").is_empty());
        assert!(r("[b", "[a").is_empty());
        assert!(r("(a", "[a").is_empty());
        assert!(!r("[a", "[a").is_empty());
        let ab = r("(a", "[b");
        assert!(!ab.above_min(b"a") && ab.above_min(b"aa") && ab.below_max(b"b"));
        assert!(!ab.below_max(b"ba"));
    }

    #[test]
    fn zrange_options_follow_redis() {
        let a = |s: &str| -> Vec<Vec<u8>> { s.split(' ').map(|w| w.as_bytes().to_vec()).collect() };
        let parse = |s: &str| RangeArgs::parse(&a(s), 2, None, None, false);
        let r = parse("zrange k (1 5 byscore rev limit 1 2 withscores").unwrap();
        assert!(r.rev && r.withscores && r.offset == 1 && r.limit == 2);
        // REV swaps the ends: the first is the maximum.
        assert!(matches!(r.select, Select::Score(s) if s.min == 5.0 && s.max == 1.0 && s.max_ex));
        assert!(parse("zrange k 0 -1 limit 5 -1").is_ok());
        assert!(parse("zrange k 0 -1 limit 0 1").is_err());
        assert!(parse("zrange k 0 -1 rev rev").is_err());
        assert!(parse("zrange k 0 -1 limit 0").is_err());
        assert!(parse("zrange k [a [b bylex withscores").is_err());
        assert!(
            RangeArgs::parse(&a("zrangestore d k 0 1 withscores"), 3, None, None, true).is_err()
        );
        assert!(RangeArgs::parse(
            &a("zrangebyscore k 1 2 rev"),
            2,
            Some(By::Score),
            Some(false),
            false
        )
        .is_err());
    }
}
