//! What `SCAN`, `HSCAN`, `SSCAN` and `ZSCAN` share: their cursor and options, and their reply.
//! Each walks its own ordered source from where the cursor stands (see
//! `keyspace::cursors`).

use super::{args, Failure};
use crate::keyspace::Ctx;
use crate::resp::reply::Reply;

/// A scan call's arguments.
pub struct ScanArgs {
    /// Where to continue: after this position (`None`: from the start).
    pub after: Option<Vec<u8>>,
    /// `MATCH pattern`.
    pub pattern: Option<Vec<u8>>,
    /// `COUNT n` (10): about how many elements to look at.
    pub count: usize,
    /// `TYPE t` (`SCAN` only).
    pub kind: Option<Vec<u8>>,
}

impl ScanArgs {
    /// Reads the cursor at `a[at]` and the options after it (`TYPE` only if `allow_type`).
    pub fn parse(
        ctx: &Ctx<'_>,
        a: &[Vec<u8>],
        at: usize,
        allow_type: bool,
    ) -> Result<ScanArgs, Failure> {
        let cursor = parse_cursor(&a[at]).ok_or_else(|| args::err("ERR invalid cursor"))?;
        let mut out = ScanArgs {
            after: ctx.ks.cursors.resume(cursor),
            pattern: None,
            count: 10,
            kind: None,
        };
        let mut i = at + 1;
        while i < a.len() {
            let value = a.get(i + 1).ok_or_else(args::syntax)?;
            if args::is(&a[i], "count") {
                let n = args::int(value)?;
                if n < 1 {
                    return Err(args::syntax());
                }
                out.count = n as usize;
            } else if args::is(&a[i], "match") {
                // `*` matches everything: skip the matching.
                out.pattern = (value.as_slice() != b"*").then(|| value.clone());
            } else if allow_type && args::is(&a[i], "type") {
                out.kind = Some(value.to_ascii_lowercase());
            } else {
                return Err(args::syntax());
            }
            i += 2;
        }
        Ok(out)
    }

    /// Whether `name` passes `MATCH`.
    pub fn matches(&self, name: &[u8]) -> bool {
        self.pattern
            .as_ref()
            .is_none_or(|p| args::glob(p, name, false))
    }
}

/// A cursor as Redis's `parseScanCursorOrReply` reads one with `strtoul`: an optional sign
/// (a `-` negates modulo 2^64), then digits up to 2^64 - 1; no leading space. An empty
/// argument is cursor 0, as `strtoul` reads it.
fn parse_cursor(arg: &[u8]) -> Option<u64> {
    let (neg, digits) = match arg.first() {
        Some(b'-') => (true, &arg[1..]),
        Some(b'+') => (false, &arg[1..]),
        _ => (false, arg),
    };
    if digits.is_empty() {
        return arg.is_empty().then_some(0);
    }
    let mut n: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(if neg { n.wrapping_neg() } else { n })
}

/// The reply: the next cursor (0 when `resume_after` is `None`: the scan is done) and the
/// elements.
pub fn reply(ctx: &Ctx<'_>, resume_after: Option<Vec<u8>>, items: Vec<Reply>) -> Reply {
    let cursor = resume_after.map_or(0, |p| ctx.ks.cursors.save(p));
    Reply::Array(vec![Reply::bulk(cursor.to_string()), Reply::Array(items)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_read_as_strtoul_reads_them() {
        assert_eq!(parse_cursor(b"0"), Some(0));
        assert_eq!(parse_cursor(b"00"), Some(0));
        assert_eq!(parse_cursor(b""), Some(0));
        assert_eq!(parse_cursor(b"+5"), Some(5));
        assert_eq!(parse_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"18446744073709551616"), None);
        for bad in [&b"abc"[..], b" 0", b"0 ", b"-", b"+", b"1x"] {
            assert_eq!(parse_cursor(bad), None, "{bad:?}");
        }
    }
}
