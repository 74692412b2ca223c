//! Requests: arrays of bulk strings (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`), or inline lines
//! (`GET k\r\n`, what `redis-cli` in a pipe and telnet send), read incrementally as Redis's
//! `processMultibulkBuffer` and `processInlineBuffer` read them, with the same limits and the
//! same protocol errors.
//!
//! The parser keeps its place between reads, so a request arriving a byte at a time, or a
//! 512 MiB bulk arriving over many reads, is looked at once per byte at most.

/// What the parser refuses, as Redis does (`proto-max-bulk-len` and its fixed limits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseLimits {
    /// The longest bulk string (`proto-max-bulk-len`, 512 MiB).
    pub max_bulk_len: usize,
    /// The most arguments a request may have (Redis: `INT_MAX`, bounded in practice by the
    /// query buffer).
    pub max_args: usize,
    /// The longest inline request, and the longest count line (64 KiB).
    pub max_inline_len: usize,
    /// Before `AUTH`: the most arguments (10) and the longest bulk (16 KiB), so an
    /// unauthenticated client cannot make the server hold much.
    pub unauth_max_args: usize,
    /// See `unauth_max_args`.
    pub unauth_max_bulk_len: usize,
}

impl Default for ParseLimits {
    fn default() -> Self {
        ParseLimits {
            max_bulk_len: 512 << 20,
            max_args: i32::MAX as usize,
            max_inline_len: 64 << 10,
            unauth_max_args: 10,
            unauth_max_bulk_len: 16 << 10,
        }
    }
}

/// One step of parsing.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A whole request (never empty: empty arrays and blank lines are skipped).
    Request(Vec<Vec<u8>>),
    /// More bytes are needed.
    Incomplete,
    /// The input is not RESP: the message follows `-ERR ` in Redis's reply, after which the
    /// connection is closed.
    Error(String),
}

/// An inline request: the bytes it took, and its arguments.
type Line = (usize, Vec<Vec<u8>>);

/// Where the parser is within a request.
#[derive(Debug, Default)]
enum State {
    /// Between requests.
    #[default]
    Idle,
    /// Inside an array: `left` bulks to go, `len` the next one's length if its header is read.
    Array { left: usize, len: Option<usize> },
}

/// An incremental request parser for one connection.
#[derive(Debug, Default)]
pub struct Parser {
    limits: ParseLimits,
    state: State,
    args: Vec<Vec<u8>>,
}

/// A line's end within `input` (the index of its `\n`, or of its `\r` for count lines),
/// looked for as Redis's `strchr` does: not past a NUL, so a NUL before the line's end
/// leaves the line unfinished (until it is too long), as in Redis.
fn find(input: &[u8], byte: u8) -> Option<usize> {
    input
        .iter()
        .position(|&b| b == byte || b == 0)
        .filter(|&i| input[i] == byte)
}

/// C's `isspace`, which `sdssplitargs` skips between arguments (a vertical tab too).
fn is_space(b: u8) -> bool {
    b.is_ascii_whitespace() || b == 0x0b
}

/// A count as Redis's `string2ll` reads one: an optional `-`, then digits, no sign `+`, no
/// leading zeros, no spaces.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, s),
    };
    if digits.is_empty() || (digits[0] == b'0' && (digits.len() > 1 || neg)) {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        let d = i64::from(d - b'0');
        v = v.checked_mul(10)?;
        v = if neg {
            v.checked_sub(d)?
        } else {
            v.checked_add(d)?
        };
    }
    Some(v)
}

impl Parser {
    /// A parser enforcing `limits`.
    pub fn new(limits: ParseLimits) -> Parser {
        Parser {
            limits,
            ..Parser::default()
        }
    }

    /// Whether a request is half read.
    pub fn in_request(&self) -> bool {
        !matches!(self.state, State::Idle)
    }

    /// Bytes the arguments read so far hold (for the query buffer limit).
    pub fn held(&self) -> usize {
        self.args.iter().map(|a| a.len() + 16).sum()
    }

    /// Parses from the front of `input`, returning how many bytes it consumed and what it
    /// found. Call again with the rest until it says `Incomplete`.
    pub fn parse(&mut self, input: &[u8], authenticated: bool) -> (usize, Parsed) {
        let mut used = 0;
        loop {
            let rest = &input[used..];
            match self.state {
                State::Idle => {
                    if rest.is_empty() {
                        return (used, Parsed::Incomplete);
                    }
                    if rest[0] != b'*' {
                        return match self.inline(rest) {
                            Ok(Some((n, args))) if args.is_empty() => {
                                used += n;
                                continue;
                            }
                            Ok(Some((n, args))) => (used + n, Parsed::Request(args)),
                            Ok(None) => (used, Parsed::Incomplete),
                            Err(e) => (used, Parsed::Error(e)),
                        };
                    }
                    let Some(cr) = find(rest, b'\r') else {
                        if rest.len() > self.limits.max_inline_len {
                            return (used, error("too big mbulk count string"));
                        }
                        return (used, Parsed::Incomplete);
                    };
                    if cr + 1 >= rest.len() {
                        return (used, Parsed::Incomplete);
                    }
                    let max = if authenticated {
                        self.limits.max_args
                    } else {
                        self.limits.unauth_max_args
                    };
                    let count = match parse_i64(&rest[1..cr]) {
                        Some(n) if n > i64::from(i32::MAX) => {
                            return (used, error("invalid multibulk length"))
                        }
                        Some(n) if !authenticated && n > max as i64 => {
                            return (used, error("unauthenticated multibulk length"))
                        }
                        Some(n) if n > max as i64 => {
                            return (used, error("invalid multibulk length"))
                        }
                        Some(n) => n,
                        None => return (used, error("invalid multibulk length")),
                    };
                    used += cr + 2;
                    if count <= 0 {
                        continue;
                    }
                    let left = count as usize;
                    // Reserve for what is likely to come, not for what a count claims.
                    self.args = Vec::with_capacity(left.min(1024));
                    self.state = State::Array { left, len: None };
                }
                State::Array { left, len: None } => {
                    if rest.is_empty() {
                        return (used, Parsed::Incomplete);
                    }
                    let Some(cr) = find(rest, b'\r') else {
                        if rest.len() > self.limits.max_inline_len {
                            return (used, error("too big bulk count string"));
                        }
                        return (used, Parsed::Incomplete);
                    };
                    if rest[0] != b'$' {
                        let got = rest[0] as char;
                        return (used, error(&format!("expected '$', got '{got}'")));
                    }
                    if cr + 1 >= rest.len() {
                        return (used, Parsed::Incomplete);
                    }
                    let len = match parse_i64(&rest[1..cr]) {
                        Some(n) if n < 0 || n as u64 > self.limits.max_bulk_len as u64 => {
                            return (used, error("invalid bulk length"))
                        }
                        Some(n)
                            if !authenticated
                                && n as u64 > self.limits.unauth_max_bulk_len as u64 =>
                        {
                            return (used, error("unauthenticated bulk length"))
                        }
                        Some(n) => n as usize,
                        None => return (used, error("invalid bulk length")),
                    };
                    used += cr + 2;
                    self.state = State::Array {
                        left,
                        len: Some(len),
                    };
                }
                State::Array {
                    left,
                    len: Some(len),
                } => {
                    // The bulk and the two bytes after it (Redis skips them unread).
                    if rest.len() < len + 2 {
                        return (used, Parsed::Incomplete);
                    }
                    self.args.push(rest[..len].to_vec());
                    used += len + 2;
                    if left == 1 {
                        self.state = State::Idle;
                        return (used, Parsed::Request(std::mem::take(&mut self.args)));
                    }
                    self.state = State::Array {
                        left: left - 1,
                        len: None,
                    };
                }
            }
        }
    }

    /// An inline request: the bytes it took and its arguments (none for a blank line), or
    /// `None` if its line has not ended yet.
    fn inline(&self, input: &[u8]) -> Result<Option<Line>, String> {
        let Some(nl) = find(input, b'\n') else {
            if input.len() > self.limits.max_inline_len {
                return Err(protocol("too big inline request"));
            }
            return Ok(None);
        };
        if nl > self.limits.max_inline_len {
            return Err(protocol("too big inline request"));
        }
        let line = input[..nl].strip_suffix(b"\r").unwrap_or(&input[..nl]);
        let args = split_args(line).ok_or_else(|| protocol("unbalanced quotes in request"))?;
        Ok(Some((nl + 1, args)))
    }
}

fn protocol(what: &str) -> String {
    format!("Protocol error: {what}")
}

fn error(what: &str) -> Parsed {
    Parsed::Error(protocol(what))
}

/// Splits a line into arguments as Redis's `sdssplitargs` does: spaces separate, and
/// `"..."` (with `\n`, `\xHH` and the other C escapes) and `'...'` (with `\'`) quote. A
/// closing quote must be followed by a space or the end. `None` for unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    // A C string: it ends at a NUL.
    let line = line.split(|&b| b == 0).next().unwrap_or_default();
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while i < line.len() && is_space(line[i]) {
            i += 1;
        }
        if i == line.len() {
            return Some(args);
        }
        let mut arg = Vec::new();
        let mut quote: Option<u8> = None;
        loop {
            let Some(&c) = line.get(i) else {
                // The line ended: fine outside quotes, unbalanced inside.
                if quote.is_some() {
                    return None;
                }
                break;
            };
            match quote {
                Some(b'"') => {
                    if c == b'\\' && i + 3 < line.len() && line[i + 1] == b'x' {
                        let hex = |b: u8| (b as char).to_digit(16);
                        if let (Some(h), Some(l)) = (hex(line[i + 2]), hex(line[i + 3])) {
                            arg.push((h * 16 + l) as u8);
                            i += 4;
                            continue;
                        }
                    }
                    if c == b'\\' && i + 1 < line.len() {
                        arg.push(match line[i + 1] {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 8,
                            b'a' => 7,
                            other => other,
                        });
                        i += 2;
                        continue;
                    }
                    if c == b'"' {
                        if line.get(i + 1).is_some_and(|&b| !is_space(b)) {
                            return None;
                        }
                        i += 1;
                        break;
                    }
                    arg.push(c);
                }
                Some(_) => {
                    if c == b'\\' && line.get(i + 1) == Some(&b'\'') {
                        arg.push(b'\'');
                        i += 2;
                        continue;
                    }
                    if c == b'\'' {
                        if line.get(i + 1).is_some_and(|&b| !is_space(b)) {
                            return None;
                        }
                        i += 1;
                        break;
                    }
                    arg.push(c);
                }
                None => match c {
                    b' ' | b'\n' | b'\r' | b'\t' => break,
                    b'"' | b'\'' => quote = Some(c),
                    _ => arg.push(c),
                },
            }
            i += 1;
        }
        args.push(arg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(p: &mut Parser, input: &[u8]) -> Vec<Parsed> {
        let mut out = Vec::new();
        let mut at = 0;
        loop {
            let (n, parsed) = p.parse(&input[at..], true);
            at += n;
            match parsed {
                Parsed::Incomplete => return out,
                Parsed::Error(_) => {
                    out.push(parsed);
                    return out;
                }
                r => out.push(r),
            }
        }
    }

    fn req(args: &[&str]) -> Parsed {
        Parsed::Request(args.iter().map(|a| a.as_bytes().to_vec()).collect())
    }

    #[test]
    fn arrays_and_inline_lines_in_one_stream() {
        let mut p = Parser::default();
        let got = all(
            &mut p,
            b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n\r\n*0\r\nset a \"b c\\x41\" 'd\\'e'\n",
        );
        assert_eq!(
            got,
            vec![
                req(&["GET", "k"]),
                req(&["PING"]),
                req(&["set", "a", "b cA", "d'e"])
            ]
        );
    }

    #[test]
    fn a_request_split_at_every_byte_parses_the_same() {
        let input = b"*3\r\n$3\r\nSET\r\n$5\r\nhello\r\n$0\r\n\r\n";
        let mut p = Parser::default();
        let mut buf = Vec::new();
        let mut got = Vec::new();
        for &b in input.iter() {
            buf.push(b);
            let (n, parsed) = p.parse(&buf, true);
            buf.drain(..n);
            if let Parsed::Request(r) = parsed {
                got.push(r);
            }
        }
        assert_eq!(got, vec![vec![b"SET".to_vec(), b"hello".to_vec(), vec![]]]);
    }

    #[test]
    fn bad_input_gets_redis_protocol_errors() {
        let cases: &[(&[u8], bool, &str)] = &[
            (b"*x\r\n", true, "Protocol error: invalid multibulk length"),
            (
                b"*1\r\n+a\r\n",
                true,
                "Protocol error: expected '$', got '+'",
            ),
            (
                b"*1\r\n$-1\r\n",
                true,
                "Protocol error: invalid bulk length",
            ),
            (
                b"*1\r\n$999999999999\r\n",
                true,
                "Protocol error: invalid bulk length",
            ),
            (
                b"*11\r\n",
                false,
                "Protocol error: unauthenticated multibulk length",
            ),
            (
                b"*1\r\n$16385\r\n",
                false,
                "Protocol error: unauthenticated bulk length",
            ),
            (
                b"*3000000000\r\n",
                true,
                "Protocol error: invalid multibulk length",
            ),
            (
                b"set a \"b\n",
                true,
                "Protocol error: unbalanced quotes in request",
            ),
        ];
        for (input, authed, want) in cases {
            let mut p = Parser::default();
            let (_, got) = p.parse(input, *authed);
            assert_eq!(got, Parsed::Error(want.to_string()), "{input:?}");
        }
        let mut p = Parser::default();
        let long = vec![b'a'; 70_000];
        assert_eq!(
            p.parse(&long, true).1,
            Parsed::Error("Protocol error: too big inline request".into())
        );
    }

    #[test]
    fn a_nul_before_a_line_end_leaves_the_line_unfinished_as_in_redis() {
        let mut p = Parser::default();
        for input in [&b"PI\x00NG\r\n"[..], b"*\x00\r\n", b"*1\r\n$\x003\r\n"] {
            assert_eq!(p.parse(input, true).1, Parsed::Incomplete, "{input:?}");
            p = Parser::default();
        }
        let mut long = b"GET \x00".to_vec();
        long.extend(vec![b'a'; 70_000]);
        long.extend_from_slice(b"\r\n");
        assert_eq!(
            p.parse(&long, true).1,
            Parsed::Error("Protocol error: too big inline request".into())
        );
        assert_eq!(
            split_args(b"a\x0bb \x0b'c'\x0b\x00d"),
            Some(vec![b"a\x0bb".to_vec(), b"c".to_vec()])
        );
    }

    #[test]
    fn counts_are_read_strictly() {
        assert_eq!(parse_i64(b"12"), Some(12));
        assert_eq!(parse_i64(b"-3"), Some(-3));
        for bad in [
            &b""[..],
            b"+1",
            b"01",
            b"-0",
            b"1 ",
            b"99999999999999999999",
        ] {
            assert_eq!(parse_i64(bad), None, "{bad:?}");
        }
    }
}
