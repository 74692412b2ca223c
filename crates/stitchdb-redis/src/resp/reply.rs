//! Replies, and their encoding in RESP2 or RESP3 (which a connection picks with `HELLO`).
//! A reply is built once, as RESP3 types; RESP2 flattens maps to arrays, sets to arrays,
//! doubles to bulk strings and booleans to integers, as Redis 7.0 does.

use std::io::Write;

/// A reply to one command.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+OK`.
    Ok,
    /// A simple string (`+PONG`, `+QUEUED`).
    Simple(String),
    /// An error, its message whole (`ERR syntax error`, `WRONGTYPE ...`).
    Error(String),
    /// An integer.
    Int(i64),
    /// A bulk string.
    Bulk(Vec<u8>),
    /// No value: `$-1` in RESP2, `_` in RESP3.
    Nil,
    /// No array: `*-1` in RESP2 (`EXEC` aborted by `WATCH`, `BLPOP` timing out), `_` in RESP3.
    NilArray,
    /// An array.
    Array(Vec<Reply>),
    /// A map (`HGETALL`, `HELLO`, `CONFIG GET`): a flat array of keys and values in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// A set (`SMEMBERS`): an array in RESP2.
    Set(Vec<Reply>),
    /// Pairs whose order matters (`ZRANGE ... WITHSCORES`, `HRANDFIELD ... WITHVALUES`): a
    /// flat array in RESP2, an array of two-element arrays in RESP3, as Redis 7.0 replies.
    Pairs(Vec<(Reply, Reply)>),
    /// A double (`ZSCORE`): a bulk string in RESP2, formatted as C's `%.17g`.
    Double(f64),
    /// A boolean: `1` or `0` in RESP2.
    Bool(bool),
    /// Text to show as is (`INFO`, `CLIENT LIST`): a bulk string in RESP2.
    Verbatim(String),
}

impl Reply {
    /// A bulk string.
    pub fn bulk(b: impl Into<Vec<u8>>) -> Reply {
        Reply::Bulk(b.into())
    }

    /// A bulk string, or nil.
    pub fn opt_bulk(b: Option<Vec<u8>>) -> Reply {
        b.map_or(Reply::Nil, Reply::Bulk)
    }

    /// An array of bulk strings.
    pub fn bulks<I: IntoIterator<Item = Vec<u8>>>(items: I) -> Reply {
        Reply::Array(items.into_iter().map(Reply::Bulk).collect())
    }

    /// Whether this is an error.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// Appends the reply's encoding in protocol version `resp` (2 or 3) to `out`.
    pub fn encode(&self, resp: u8, out: &mut Vec<u8>) {
        let v3 = resp >= 3;
        match self {
            Reply::Ok => out.extend_from_slice(b"+OK\r\n"),
            Reply::Simple(s) => line(out, b'+', s.as_bytes()),
            Reply::Error(e) => {
                // An error is one line: Redis replaces newlines with spaces.
                let clean: Vec<u8> = e
                    .bytes()
                    .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b })
                    .collect();
                line(out, b'-', &clean)
            }
            Reply::Int(n) => header(out, b':', *n),
            Reply::Bulk(b) => bulk(out, b),
            Reply::Nil if v3 => out.extend_from_slice(b"_\r\n"),
            Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
            Reply::NilArray if v3 => out.extend_from_slice(b"_\r\n"),
            Reply::NilArray => out.extend_from_slice(b"*-1\r\n"),
            Reply::Array(items) => {
                header(out, b'*', items.len() as i64);
                for r in items {
                    r.encode(resp, out);
                }
            }
            Reply::Set(items) => {
                header(out, if v3 { b'~' } else { b'*' }, items.len() as i64);
                for r in items {
                    r.encode(resp, out);
                }
            }
            Reply::Map(pairs) => {
                if v3 {
                    header(out, b'%', pairs.len() as i64);
                } else {
                    header(out, b'*', 2 * pairs.len() as i64);
                }
                for (k, v) in pairs {
                    k.encode(resp, out);
                    v.encode(resp, out);
                }
            }
            Reply::Pairs(pairs) => {
                if v3 {
                    header(out, b'*', pairs.len() as i64);
                } else {
                    header(out, b'*', 2 * pairs.len() as i64);
                }
                for (a, b) in pairs {
                    if v3 {
                        header(out, b'*', 2);
                    }
                    a.encode(resp, out);
                    b.encode(resp, out);
                }
            }
            Reply::Double(d) => {
                let s = format_double(*d);
                if v3 {
                    line(out, b',', s.as_bytes());
                } else {
                    bulk(out, s.as_bytes());
                }
            }
            Reply::Bool(b) if v3 => out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
            Reply::Bool(b) => header(out, b':', i64::from(*b)),
            Reply::Verbatim(s) if v3 => {
                header(out, b'=', s.len() as i64 + 4);
                out.extend_from_slice(b"txt:");
                out.extend_from_slice(s.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            Reply::Verbatim(s) => bulk(out, s.as_bytes()),
        }
    }
}

fn line(out: &mut Vec<u8>, kind: u8, body: &[u8]) {
    out.push(kind);
    out.extend_from_slice(body);
    out.extend_from_slice(b"\r\n");
}

fn header(out: &mut Vec<u8>, kind: u8, n: i64) {
    out.push(kind);
    let _ = write!(out, "{n}");
    out.extend_from_slice(b"\r\n");
}

fn bulk(out: &mut Vec<u8>, b: &[u8]) {
    header(out, b'$', b.len() as i64);
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// A double as Redis 7.0 replies with one: C's `%.17g`, and `inf`/`-inf`/`nan`.
pub fn format_double(d: f64) -> String {
    if d.is_infinite() {
        return if d > 0.0 { "inf" } else { "-inf" }.into();
    }
    if d.is_nan() {
        return "nan".into();
    }
    format_g(d, 17)
}

/// C's `%.{precision}g`: `precision` significant digits, trailing zeros dropped, exponent
/// form when the exponent is below -4 or at least `precision`.
pub fn format_g(d: f64, precision: usize) -> String {
    if d == 0.0 {
        return if d.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let sci = format!("{:.*e}", precision - 1, d);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= precision as i32 {
        let m = trim_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{m}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (precision as i32 - 1 - exp).max(0) as usize;
        trim_zeros(&format!("{d:.decimals$}")).to_string()
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(r: &Reply, resp: u8) -> String {
        let mut out = Vec::new();
        r.encode(resp, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn resp2_flattens_what_resp3_types() {
        let m = Reply::Map(vec![(Reply::bulk("a"), Reply::Int(1))]);
        assert_eq!(enc(&m, 2), "*2\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(enc(&m, 3), "%1\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(enc(&Reply::Nil, 2), "$-1\r\n");
        assert_eq!(enc(&Reply::NilArray, 2), "*-1\r\n");
        assert_eq!(enc(&Reply::Nil, 3), "_\r\n");
        assert_eq!(enc(&Reply::Double(1.5), 2), "$3\r\n1.5\r\n");
        assert_eq!(enc(&Reply::Double(1.5), 3), ",1.5\r\n");
        assert_eq!(enc(&Reply::Bool(true), 2), ":1\r\n");
        let p = Reply::Pairs(vec![(Reply::bulk("a"), Reply::Double(1.0))]);
        assert_eq!(enc(&p, 2), "*2\r\n$1\r\na\r\n$1\r\n1\r\n");
        assert_eq!(enc(&p, 3), "*1\r\n*2\r\n$1\r\na\r\n,1\r\n");
        assert_eq!(enc(&Reply::Error("ERR a\nb".into()), 2), "-ERR a b\r\n");
    }

    #[test]
    fn doubles_format_as_c_g17() {
        assert_eq!(format_double(1.1), "1.1000000000000001");
        assert_eq!(format_double(3.0), "3");
        assert_eq!(format_double(-2.5), "-2.5");
        assert_eq!(format_double(1e20), "1e+20");
        assert_eq!(format_double(1.5e-7), "1.4999999999999999e-07");
        assert_eq!(format_double(0.0001), "0.0001");
        assert_eq!(
            format_double(123456789012345678.0),
            "1.2345678901234568e+17"
        );
        assert_eq!(format_double(f64::INFINITY), "inf");
    }
}
