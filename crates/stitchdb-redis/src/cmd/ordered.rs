//! What the commands over ordered collections (lists and sorted sets) share beyond
//! `collection`: their command tables' key positions, Redis's `start..=end` index ranges,
//! pop counts, blocking timeouts, and the arguments of `LMPOP`/`ZMPOP` and their blocking
//! forms.

use super::{args, floats, longdouble, Failure, Keys};
use std::time::Duration;

/// Keys, then a timeout (`BLPOP`).
pub const KEYS_THEN_TIMEOUT: Keys = Keys::Range {
    first: 1,
    last: -2,
    step: 1,
};

/// A source and a destination key.
pub const SRC_DST: Keys = Keys::Range {
    first: 1,
    last: 2,
    step: 1,
};

/// The `numkeys` keys after argument `at` (as many as there are, whatever `numkeys` says:
/// the command itself refuses a wrong one), for `Keys::Custom`.
pub fn keys_after(a: &[Vec<u8>], at: usize) -> Vec<usize> {
    let n = a.get(at).and_then(|n| args::int(n).ok()).unwrap_or(0);
    (at + 1..a.len())
        .take(usize::try_from(n).unwrap_or(0))
        .collect()
}

/// Redis's range of elements `start..=end` over `len` of them (negative: from the end, -1 the
/// last), clamped to the collection, as a half-open range `lo..hi`; `None` if empty.
pub fn span(start: i64, end: i64, len: u64) -> Option<(u64, u64)> {
    let len = i128::from(len);
    let from_end = |i: i64| {
        let i = i128::from(i);
        if i < 0 {
            len + i
        } else {
            i
        }
    };
    let lo = from_end(start).max(0);
    let hi = from_end(end);
    if lo > hi || lo >= len {
        return None;
    }
    // Both are within 0..=len now, so they fit.
    Some((lo as u64, (hi.min(len - 1) + 1) as u64))
}

/// A count that must not be negative (`LPOP`'s, `ZPOPMIN`'s), as Redis's
/// `getPositiveLongFromObjectOrReply` reads it.
pub fn positive(arg: &[u8]) -> Result<u64, Failure> {
    match args::int(arg) {
        Ok(n) if n >= 0 => Ok(n as u64),
        _ => Err(args::err("ERR value is out of range, must be positive")),
    }
}

/// A blocking command's timeout in seconds (0: none) as Redis's
/// `getTimeoutFromObjectOrReply` reads it: a long double, in whole milliseconds rounded up.
pub fn timeout(arg: &[u8]) -> Result<Option<Duration>, Failure> {
    let not_float = || args::err("ERR timeout is not a float or out of range");
    let secs = match longdouble::parse(arg).ok_or_else(not_float)? {
        longdouble::Num::Infinite => f64::INFINITY,
        // What `strtold` takes is Redis's; the value needs only a double's precision, and
        // where a double overflows the timeout is out of reach all the same, and where it
        // underflows Redis rounds it up to a millisecond.
        longdouble::Num::Finite(_) => match floats::strtod(arg) {
            (v, _, true) if v == 0.0 => f64::MIN_POSITIVE.copysign(v),
            (v, _, _) => v,
        },
    };
    let ms = (secs * 1000.0).ceil();
    // Redis converts to a 64-bit integer: what does not fit comes out negative there.
    if !(0.0..2f64.powi(63)).contains(&ms) {
        return Err(args::err("ERR timeout is negative"));
    }
    Ok((ms > 0.0).then(|| Duration::from_millis(ms as u64)))
}

/// The arguments of `LMPOP`/`ZMPOP` and their blocking forms from `numkeys` at `a[at]` on:
/// `numkeys key ... WHERE [COUNT n]`, as Redis reads them.
pub struct Mpop<T> {
    /// The keys' indexes.
    pub keys: std::ops::Range<usize>,
    /// `WHERE`, as `side` read it.
    pub side: T,
    /// `COUNT` (1).
    pub count: u64,
}

impl<T> Mpop<T> {
    /// Reads them, `WHERE` with `side`.
    pub fn parse(
        a: &[Vec<u8>],
        at: usize,
        side: impl Fn(&[u8]) -> Result<T, Failure>,
    ) -> Result<Mpop<T>, Failure> {
        let more_than_zero = |arg: &[u8], msg: &str| match args::int(arg) {
            Ok(n) if n > 0 => Ok(n as u64),
            _ => Err(args::err(msg)),
        };
        let n = more_than_zero(&a[at], "ERR numkeys should be greater than 0")?;
        let first = at + 1;
        let where_at = usize::try_from(n)
            .ok()
            .and_then(|n| first.checked_add(n))
            .filter(|&w| w < a.len())
            .ok_or_else(args::syntax)?;
        let side = side(&a[where_at])?;
        let mut count = None;
        let mut j = where_at + 1;
        while j < a.len() {
            match a.get(j + 1) {
                Some(n) if count.is_none() && args::is(&a[j], "count") => {
                    count = Some(more_than_zero(n, "ERR count should be greater than 0")?);
                }
                _ => return Err(args::syntax()),
            }
            j += 2;
        }
        Ok(Mpop {
            keys: first..where_at,
            side,
            count: count.unwrap_or(1),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<Vec<u8>> {
        s.split(' ').map(|w| w.as_bytes().to_vec()).collect()
    }

    #[test]
    fn timeouts_round_up_to_milliseconds_as_redis_does() {
        let t = |s: &str| timeout(s.as_bytes()).map_err(|f| format!("{:?}", f.reply()));
        assert_eq!(t("0").unwrap(), None);
        assert_eq!(t("-0").unwrap(), None);
        assert_eq!(t("0.0001").unwrap(), Some(Duration::from_millis(1)));
        assert_eq!(t("1.5").unwrap(), Some(Duration::from_millis(1500)));
        assert_eq!(t("1e-400").unwrap(), Some(Duration::from_millis(1)));
        assert!(t("-1").unwrap_err().contains("negative"));
        assert!(t("inf").unwrap_err().contains("negative"));
        assert!(t("9223372036854776").unwrap_err().contains("negative"));
        assert!(t("x").unwrap_err().contains("not a float"));
        assert!(t("nan").unwrap_err().contains("not a float"));
        assert!(t("1e-5000").unwrap_err().contains("not a float"));
        assert!(t(" 1").unwrap_err().contains("not a float"));
    }

    #[test]
    fn mpop_arguments_follow_redis() {
        let side = |w: &[u8]| Ok(w.to_vec());
        let m = Mpop::parse(&words("lmpop 2 a b left count 3"), 1, side).unwrap();
        assert_eq!((m.keys, m.side, m.count), (2..4, b"left".to_vec(), 3));
        assert_eq!(
            Mpop::parse(&words("lmpop 1 a left"), 1, side)
                .unwrap()
                .count,
            1
        );
        for bad in [
            "lmpop 0 a left",
            "lmpop x a left",
            "lmpop 2 a left",
            "lmpop 1 a left count 0",
            "lmpop 1 a left count 1 count 2",
            "lmpop 1 a left count",
            "lmpop 1 a left foo",
            "lmpop 9223372036854775807 a left",
        ] {
            assert!(Mpop::parse(&words(bad), 1, side).is_err(), "{bad}");
        }
    }

    #[test]
    fn spans_follow_redis_index_rules() {
        assert_eq!(span(0, -1, 3), Some((0, 3)));
        assert_eq!(span(-2, -1, 3), Some((1, 3)));
        assert_eq!(span(-100, 1, 3), Some((0, 2)));
        assert_eq!(span(1, 100, 3), Some((1, 3)));
        assert_eq!(span(2, 1, 3), None);
        assert_eq!(span(3, 5, 3), None);
        assert_eq!(span(0, -4, 3), None);
        assert_eq!(span(0, 0, 0), None);
        assert_eq!(span(i64::MIN, i64::MAX, 3), Some((0, 3)));
        assert_eq!(span(0, i64::MIN, 3), None);
    }
}
