//! Numbers read as C's `strtod` reads them (hex, `inf`, `nan`, `ERANGE`), with the checks
//! Redis's `getDoubleFromObject` makes of a score or a weight.

use super::{args, Failure};

/// What C's `strtod` makes of the start of `s`: the value, the bytes it used (0: no number),
/// and whether the value was out of range (`ERANGE`: too large, or too small to be
/// anything but zero).
pub fn strtod(s: &[u8]) -> (f64, usize, bool) {
    let mut i = s.iter().take_while(|&&c| is_space(c)).count();
    let negative = s.get(i) == Some(&b'-');
    if matches!(s.get(i), Some(b'-' | b'+')) {
        i += 1;
    }
    let signed = |v: f64| if negative { -v } else { v };
    let rest = &s[i..];
    let starts = |word: &str| {
        rest.len() >= word.len() && rest[..word.len()].eq_ignore_ascii_case(word.as_bytes())
    };
    if starts("infinity") {
        return (signed(f64::INFINITY), i + 8, false);
    }
    if starts("inf") {
        return (signed(f64::INFINITY), i + 3, false);
    }
    if starts("nan") {
        return (f64::NAN, i + 3 + nan_payload(&rest[3..]), false);
    }
    let hex = starts("0x")
        && match rest.get(2) {
            Some(c) if c.is_ascii_hexdigit() => true,
            Some(b'.') => rest.get(3).is_some_and(u8::is_ascii_hexdigit),
            _ => false,
        };
    let (v, used, erange) = if hex {
        hex_float(&rest[2..])
    } else {
        decimal(rest)
    };
    if used == 0 {
        return (0.0, 0, false);
    }
    (signed(v), i + used + if hex { 2 } else { 0 }, erange)
}

/// C's `isspace`.
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// The `(chars)` a `nan` may carry: its length if well formed, else 0.
fn nan_payload(s: &[u8]) -> usize {
    if s.first() != Some(&b'(') {
        return 0;
    }
    let body = s[1..]
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
        .count();
    if s.get(1 + body) == Some(&b')') {
        body + 2
    } else {
        0
    }
}

/// Digits at the start of `s`.
fn digits(s: &[u8], hex: bool) -> usize {
    s.iter()
        .take_while(|c| {
            if hex {
                c.is_ascii_hexdigit()
            } else {
                c.is_ascii_digit()
            }
        })
        .count()
}

/// An exponent (`e12`, `p-3`) at the start of `s` if it has digits: its length.
fn exponent(s: &[u8], marks: &[u8]) -> usize {
    if !s.first().is_some_and(|c| marks.contains(c)) {
        return 0;
    }
    let sign = usize::from(matches!(s.get(1), Some(b'-' | b'+')));
    match digits(&s[1 + sign..], false) {
        0 => 0,
        n => 1 + sign + n,
    }
}

/// A decimal number (sign already read): value, length, out of range.
fn decimal(s: &[u8]) -> (f64, usize, bool) {
    let int = digits(s, false);
    let frac = if s.get(int) == Some(&b'.') {
        Some(digits(&s[int + 1..], false))
    } else {
        None
    };
    if int + frac.unwrap_or(0) == 0 {
        return (0.0, 0, false);
    }
    let mantissa = int + frac.map_or(0, |f| f + 1);
    let len = mantissa + exponent(&s[mantissa..], b"eE");
    let text = std::str::from_utf8(&s[..len]).unwrap_or("0");
    let v: f64 = text.parse().unwrap_or(0.0);
    let nonzero = s[..mantissa].iter().any(|c| (b'1'..=b'9').contains(c));
    (v, len, v.is_infinite() || (v == 0.0 && nonzero))
}

/// A hexadecimal float after its `0x` (`1.8p3`): value, length, out of range.
fn hex_float(s: &[u8]) -> (f64, usize, bool) {
    let int = digits(s, true);
    let frac = if s.get(int) == Some(&b'.') {
        digits(&s[int + 1..], true)
    } else {
        0
    };
    let mantissa = int
        + if s.get(int) == Some(&b'.') {
            frac + 1
        } else {
            0
        };
    let exp_len = exponent(&s[mantissa..], b"pP");
    // The first 30 significant hex digits fit a u128 exactly: the value is `m * 2^scale`.
    let (mut m, mut scale, mut kept) = (0u128, 0i64, 0);
    let all = s[..int]
        .iter()
        .map(|c| (c, false))
        .chain(s[mantissa - frac..mantissa].iter().map(|c| (c, true)));
    for (c, in_fraction) in all {
        if kept < 30 {
            m = m * 16 + u128::from(char::from(*c).to_digit(16).unwrap_or(0));
            kept += usize::from(m != 0);
            if in_fraction {
                scale -= 4;
            }
        } else if !in_fraction {
            // A digit past the precision kept only scales the value.
            scale += 4;
        }
    }
    let exp: i64 = if exp_len > 0 {
        std::str::from_utf8(&s[mantissa + 1..mantissa + exp_len])
            .ok()
            .and_then(|e| e.parse().ok())
            .unwrap_or(if s[mantissa + 1] == b'-' {
                i64::MIN / 2
            } else {
                i64::MAX / 2
            })
    } else {
        0
    };
    let v = scale_by_two(m as f64, exp.saturating_add(scale));
    (
        v,
        mantissa + exp_len,
        v.is_infinite() || (v == 0.0 && m != 0),
    )
}

/// `x * 2^e`, in steps that keep each product exact until the last.
fn scale_by_two(mut x: f64, mut e: i64) -> f64 {
    while e > 1000 && x.is_finite() && x != 0.0 {
        x *= 2f64.powi(1000);
        e -= 1000;
    }
    while e < -1000 && x != 0.0 {
        x *= 2f64.powi(-1000);
        e += 1000;
    }
    x * 2f64.powi(e.clamp(-1100, 1100) as i32)
}

/// A score as Redis's `getDoubleFromObject` reads one: all of the argument, no leading
/// space, not NaN, not out of range.
pub fn parse_score(arg: &[u8]) -> Option<f64> {
    if arg.first().is_none_or(|&c| is_space(c)) {
        return None;
    }
    let (v, used, erange) = strtod(arg);
    let ok = used == arg.len() && !v.is_nan() && !(erange && (v.is_infinite() || v == 0.0));
    ok.then_some(v)
}

/// [`parse_score`], or `ERR value is not a valid float`.
pub fn score(arg: &[u8]) -> Result<f64, Failure> {
    parse_score(arg).ok_or_else(args::not_float)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_parse_as_c_strtod_with_redis_checks() {
        let yes: &[(&str, f64)] = &[
            ("1", 1.0),
            ("-2.5", -2.5),
            ("+3", 3.0),
            (".5", 0.5),
            ("1.", 1.0),
            ("1e3", 1000.0),
            ("1E-2", 0.01),
            ("inf", f64::INFINITY),
            ("-Infinity", f64::NEG_INFINITY),
            ("+INF", f64::INFINITY),
            ("0x10", 16.0),
            ("0x1.8p1", 3.0),
            ("-0X.8", -0.5),
            ("0x1p-2", 0.25),
            ("1e-310", 1e-310),
            ("1.e2", 100.0),
            ("007", 7.0),
            ("0x1234567890abcdef1234567890abcdef", 2.4197857200151253e37),
        ];
        for (s, v) in yes {
            assert_eq!(parse_score(s.as_bytes()), Some(*v), "{s}");
        }
        let no = [
            "", " 1", "1 ", "nan", "NaN(1)", "1e400", "-1e400", "1e-400", "0x", "1x", "e5", ".",
            "--1", "1e", "inf1", "0x1p",
        ];
        for s in no {
            assert_eq!(parse_score(s.as_bytes()), None, "{s}");
        }
    }

    #[test]
    fn strtod_stops_where_c_stops() {
        assert_eq!(strtod(b"1e"), (1.0, 1, false));
        assert_eq!(strtod(b"0x"), (0.0, 1, false));
        assert_eq!(strtod(b"0xg"), (0.0, 1, false));
        assert_eq!(strtod(b"  -7abc"), (-7.0, 4, false));
        assert_eq!(strtod(b"infinit").1, 3);
        assert_eq!(strtod(b"abc").1, 0);
        assert!(strtod(b"nan(x_1)").0.is_nan());
        assert_eq!(strtod(b"nan(x_1)").1, 8);
        assert!(strtod(b"1e999").2);
    }
}
