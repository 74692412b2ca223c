//! Reading arguments as Redis reads them, and Redis's error replies, word for word.

use super::Failure;

/// The reply to a command on a key of another type.
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// `ERR syntax error`.
pub fn syntax() -> Failure {
    Failure::Reply("ERR syntax error".into())
}

/// An argument that should have been a 64-bit integer.
pub fn not_integer() -> Failure {
    Failure::Reply("ERR value is not an integer or out of range".into())
}

/// An argument that should have been a float.
pub fn not_float() -> Failure {
    Failure::Reply("ERR value is not a valid float".into())
}

/// An error reply with this message (which starts with its code, `ERR` ...).
pub fn err(msg: impl Into<String>) -> Failure {
    Failure::Reply(msg.into())
}

/// Redis's error for a wrong number of arguments (`name` as Redis's full name:
/// `get`, `client|setname`).
pub fn arity_error(name: &str) -> String {
    format!("ERR wrong number of arguments for '{name}' command")
}

/// Whether `arg` is `word`, in any case.
pub fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// A 64-bit integer as Redis's `string2ll` reads one (no spaces, no `+`, no leading zeros).
pub fn int(arg: &[u8]) -> Result<i64, Failure> {
    crate::resp::parse::parse_i64(arg).ok_or_else(not_integer)
}

/// A float as Redis's `getDoubleFromObject` reads one (`strtod`: `inf`, `-inf`,
/// exponents; no spaces, no NaN).
pub fn float(arg: &[u8]) -> Result<f64, Failure> {
    parse_float(arg).ok_or_else(not_float)
}

/// [`float`], as an option.
pub fn parse_float(arg: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(arg).ok()?;
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    let lower = s.to_ascii_lowercase();
    let v = match lower.trim_start_matches(['+', '-']) {
        "inf" | "infinity" => {
            if lower.starts_with('-') {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            }
        }
        _ => s.parse::<f64>().ok()?,
    };
    (!v.is_nan()).then_some(v)
}

/// An argument as text (lossy), for messages.
pub fn text(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).into_owned()
}

/// Redis's glob patterns (`stringmatchlen`): `*`, `?`, `[abc]`, `[^a-z]`, `\x`; with
/// `nocase`, letters match either case.
pub fn glob(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    fn eq(a: u8, b: u8, nocase: bool) -> bool {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    }
    let (mut p, mut i) = (0, 0);
    while p < pattern.len() {
        match pattern[p] {
            b'*' => {
                while p + 1 < pattern.len() && pattern[p + 1] == b'*' {
                    p += 1;
                }
                if p + 1 == pattern.len() {
                    return true;
                }
                for start in i..=s.len() {
                    if glob(&pattern[p + 1..], &s[start..], nocase) {
                        return true;
                    }
                }
                return false;
            }
            b'?' => {
                if i >= s.len() {
                    return false;
                }
                i += 1;
            }
            b'[' => {
                if i >= s.len() {
                    return false;
                }
                p += 1;
                let not = pattern.get(p) == Some(&b'^');
                if not {
                    p += 1;
                }
                let mut matched = false;
                loop {
                    let Some(&c) = pattern.get(p) else {
                        // An unclosed class: Redis stops at the pattern's end.
                        p -= 1;
                        break;
                    };
                    if c == b'\\' && p + 1 < pattern.len() {
                        p += 1;
                        if pattern[p] == s[i] {
                            matched = true;
                        }
                    } else if c == b']' {
                        break;
                    } else if p + 2 < pattern.len() && pattern[p + 1] == b'-' {
                        let (mut lo, mut hi) = (pattern[p], pattern[p + 2]);
                        if lo > hi {
                            std::mem::swap(&mut lo, &mut hi);
                        }
                        p += 2;
                        let c = s[i];
                        let (c, lo, hi) = if nocase {
                            (
                                c.to_ascii_lowercase(),
                                lo.to_ascii_lowercase(),
                                hi.to_ascii_lowercase(),
                            )
                        } else {
                            (c, lo, hi)
                        };
                        if c >= lo && c <= hi {
                            matched = true;
                        }
                    } else if eq(c, s[i], nocase) {
                        matched = true;
                    }
                    p += 1;
                }
                if not {
                    matched = !matched;
                }
                if !matched {
                    return false;
                }
                i += 1;
            }
            b'\\' if p + 1 < pattern.len() => {
                p += 1;
                if i >= s.len() || !eq(pattern[p], s[i], nocase) {
                    return false;
                }
                i += 1;
            }
            c => {
                if i >= s.len() || !eq(c, s[i], nocase) {
                    return false;
                }
                i += 1;
            }
        }
        p += 1;
        if i >= s.len() {
            while p < pattern.len() && pattern[p] == b'*' {
                p += 1;
            }
            break;
        }
    }
    p == pattern.len() && i == s.len()
}

/// Fails unless the store takes `key`'s records: its metadata record's key, and its expiry
/// index entry if it `expires` (the deadline, then the key: longer by the deadline).
pub fn check_key(key: &[u8], expires: bool) -> Result<(), Failure> {
    let overhead = if expires {
        crate::keyspace::encoding::expiry_key(0, b"").len()
    } else {
        0
    };
    let limit = stitchdb::MAX_KEY_LEN - overhead;
    if key.len() <= limit {
        return Ok(());
    }
    Err(err(format!(
        "ERR key of {} bytes is over this store's limit of {limit} bytes{}",
        key.len(),
        if expires { " for a key with a TTL" } else { "" }
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_redis_does() {
        let yes: &[(&str, &str)] = &[
            ("*", ""),
            ("*", "abc"),
            ("a*c", "abbbc"),
            ("h?llo", "hello"),
            ("h[ae]llo", "hallo"),
            ("h[^e]llo", "hallo"),
            ("h[a-b]llo", "hbllo"),
            ("a\\*", "a*"),
            ("*c", "abc"),
            ("a*", "a"),
        ];
        for (p, s) in yes {
            assert!(glob(p.as_bytes(), s.as_bytes(), false), "{p} ~ {s}");
        }
        let no: &[(&str, &str)] = &[
            ("a*c", "abd"),
            ("h[^e]llo", "hello"),
            ("h?llo", "hllo"),
            ("abc", "ab"),
            ("ab", "abc"),
        ];
        for (p, s) in no {
            assert!(!glob(p.as_bytes(), s.as_bytes(), false), "{p} !~ {s}");
        }
        assert!(glob(b"HEL*", b"hello", true));
    }

    #[test]
    fn numbers_parse_as_redis_parses_them() {
        assert_eq!(int(b"-12").ok(), Some(-12));
        assert!(int(b" 1").is_err());
        assert_eq!(parse_float(b"1.5"), Some(1.5));
        assert_eq!(parse_float(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_float(b"+inf"), Some(f64::INFINITY));
        assert_eq!(parse_float(b"nan"), None);
        assert_eq!(parse_float(b" 1"), None);
        assert_eq!(parse_float(b"1x"), None);
    }
}
