//! Redis's `long double` arithmetic for `HINCRBYFLOAT` (and `INCRBYFLOAT`), bit for bit.
//!
//! Redis reads the numbers with `strtold`, adds them as x86-64 `long double`s (64-bit
//! significand) and writes the sum with `%.17Lf`, trailing zeros dropped: `10.5` plus `0.1`
//! is `10.6`, and `1000.1` plus `0` is `1000.09999999999999998`. An `f64` gets neither, so
//! this is a small software float with that format's precision and range: numbers are exact
//! `mant * 2^exp`, and every step (reading, adding, printing) is done exactly on big integers
//! then rounded once, to nearest with ties to even, as the hardware and glibc round.

use std::cmp::Ordering;

/// The least exponent: the smallest subnormal `long double` is `2^-16445`.
const MIN_EXP: i64 = -16445;
/// The greatest exponent of a 64-bit significand: the largest `long double` is
/// `(2^64 - 1) * 2^16320`.
const MAX_EXP: i64 = 16320;
/// Redis's `MAX_LONG_DOUBLE_CHARS`: `string2ld` refuses strings this long or longer.
const MAX_CHARS: usize = 5 * 1024;
/// Exponents are read up to this size; any number past it is far out of range already.
const EXP_CAP: i64 = 1 << 40;
/// Digits `%.17Lf` prints after the point.
const DECIMALS: u64 = 17;

/// A finite `long double`: `(-1)^neg * mant * 2^exp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongDouble {
    neg: bool,
    mant: u64,
    exp: i64,
}

/// A number as `string2ld` reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// A finite number.
    Finite(LongDouble),
    /// `inf`, `-infinity` ...
    Infinite,
}

impl LongDouble {
    /// Zero (positive).
    pub const ZERO: LongDouble = LongDouble {
        neg: false,
        mant: 0,
        exp: 0,
    };

    /// The sum, as `long double` addition rounds it (`None`: it overflows to infinity).
    pub fn checked_add(self, other: LongDouble) -> Option<LongDouble> {
        let low = self.exp.min(other.exp);
        let a = Big::from_u64(self.mant).shl(self.exp - low);
        let b = Big::from_u64(other.mant).shl(other.exp - low);
        if self.neg == other.neg {
            return round(self.neg, &a.add(&b), low);
        }
        match a.cmp(&b) {
            Ordering::Greater => round(self.neg, &a.sub(&b), low),
            Ordering::Less => round(other.neg, &b.sub(&a), low),
            // x - x is +0 when rounding to nearest.
            Ordering::Equal => Some(LongDouble::ZERO),
        }
    }

    /// Redis's `ld2string(..., LD_STR_HUMAN)`: `%.17Lf`, then trailing zeros (and a bare
    /// point) dropped, and `-0` as `0`.
    pub fn to_human(self) -> String {
        let mut scaled = Big::from_u64(self.mant);
        scaled.mul_add_small(1_000_000_000, 0);
        scaled.mul_add_small(100_000_000, 0);
        let fixed = if self.exp >= 0 {
            scaled.shl(self.exp)
        } else {
            scaled.shr_round_even(-self.exp)
        };
        let mut digits = fixed.to_decimal();
        while digits.len() <= DECIMALS as usize {
            digits.insert(0, '0');
        }
        let point = digits.len() - DECIMALS as usize;
        let mut out = String::with_capacity(digits.len() + 2);
        if self.neg {
            out.push('-');
        }
        out.push_str(&digits[..point]);
        let fraction = digits[point..].trim_end_matches('0');
        if !fraction.is_empty() {
            out.push('.');
            out.push_str(fraction);
        }
        if out == "-0" {
            out.remove(0);
        }
        out
    }
}

/// Reads `s` as Redis's `string2ld` does: all of it must be one `strtold` number (decimal,
/// hexadecimal `0x1.8p3`, `inf`, `infinity`; no spaces around it, no NaN), shorter than
/// `MAX_LONG_DOUBLE_CHARS`, and neither overflowing nor underflowing to zero.
pub fn parse(s: &[u8]) -> Option<Parsed> {
    if s.is_empty() || s.len() >= MAX_CHARS {
        return None;
    }
    let (neg, body) = match s[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity") {
        return Some(Parsed::Infinite);
    }
    let (n, exp) = match body {
        [b'0', b'x' | b'X', rest @ ..] => hex(rest)?,
        _ => decimal(body)?,
    };
    if n.is_zero() {
        return Some(Parsed::Finite(LongDouble {
            neg,
            ..LongDouble::ZERO
        }));
    }
    let v = match exp {
        Scale::Binary(e) => round(neg, &n, e)?,
        Scale::Decimal(k) => from_decimal(neg, &n, k)?,
    };
    // A number that is not zero but rounds to zero underflowed: `strtold` sets ERANGE and
    // Redis refuses it.
    (v.mant != 0).then_some(Parsed::Finite(v))
}

/// What the digits are multiplied by.
enum Scale {
    /// `2^e`.
    Binary(i64),
    /// `10^k`.
    Decimal(i64),
}

/// Digits with an optional point (at least one digit), as an integer, and how many came
/// after the point; `None` if there are no digits.
fn mantissa(s: &[u8], radix: u32) -> Option<(Big, i64, &[u8])> {
    let mut n = Big::default();
    let (mut seen, mut after_point, mut point) = (false, 0i64, false);
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if c == b'.' && !point {
            point = true;
        } else if let Some(d) = (c as char).to_digit(radix) {
            seen = true;
            n.mul_add_small(radix, d);
            if point {
                after_point += 1;
            }
        } else {
            break;
        }
        i += 1;
    }
    seen.then_some((n, after_point, &s[i..]))
}

/// An exponent: a sign and decimal digits, the whole of `s` (capped at `EXP_CAP`).
fn exponent(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v = digits
        .iter()
        .fold(0i64, |v, d| (v * 10 + i64::from(d - b'0')).min(EXP_CAP));
    Some(if neg { -v } else { v })
}

fn decimal(s: &[u8]) -> Option<(Big, Scale)> {
    let (n, after_point, rest) = mantissa(s, 10)?;
    let e = match rest {
        [] => 0,
        [b'e' | b'E', exp @ ..] => exponent(exp)?,
        _ => return None,
    };
    Some((n, Scale::Decimal(e - after_point)))
}

fn hex(s: &[u8]) -> Option<(Big, Scale)> {
    let (n, after_point, rest) = mantissa(s, 16)?;
    let e = match rest {
        [] => 0,
        [b'p' | b'P', exp @ ..] => exponent(exp)?,
        _ => return None,
    };
    Some((n, Scale::Binary(e - 4 * after_point)))
}

/// `n * 10^k` (`n` not zero) rounded; `None` if it overflows. Numbers far out of range are
/// told by their digit count alone, so the exact arithmetic stays small.
fn from_decimal(neg: bool, n: &Big, k: i64) -> Option<LongDouble> {
    let digits = n.to_decimal().len() as i64;
    // At least 10^4933: past the largest long double (1.19e4932).
    if digits - 1 + k > 4932 {
        return None;
    }
    // Below 10^-4951: under half the smallest subnormal (3.6e-4951), so it rounds to zero.
    if digits + k < -4951 {
        return Some(LongDouble {
            neg,
            ..LongDouble::ZERO
        });
    }
    if k >= 0 {
        let mut v = n.clone();
        for _ in 0..k {
            v.mul_add_small(10, 0);
        }
        return round(neg, &v, 0);
    }
    let mut p = Big::from_u64(1);
    for _ in 0..-k {
        p.mul_add_small(10, 0);
    }
    // n / p with a quotient of at least 66 bits and a sticky bit for any remainder, so
    // rounding to 64 bits (or fewer, for a subnormal) is exact.
    let t = n.bit_len() as i64 - p.bit_len() as i64 - 66;
    let (num, den) = if t >= 0 {
        (n.clone(), p.shl(t))
    } else {
        (n.shl(-t), p)
    };
    let (q, r) = num.div_rem(&den);
    let mut twice = q.shl(1);
    if !r.is_zero() {
        twice.mul_add_small(1, 1);
    }
    round(neg, &twice, t - 1)
}

/// `n * 2^exp` rounded to a `long double`; `None` if it overflows to infinity.
fn round(neg: bool, n: &Big, exp: i64) -> Option<LongDouble> {
    if n.is_zero() {
        return Some(LongDouble {
            neg,
            ..LongDouble::ZERO
        });
    }
    let mut e = (exp + n.bit_len() as i64 - 64).max(MIN_EXP);
    let shift = e - exp;
    let mut m = if shift <= 0 {
        u128::from(n.low_u64()) << -shift
    } else {
        // Below 2^64, or 2^64 once rounded up.
        let q = n.shr_round_even(shift);
        u128::from(q.low_u64()) | u128::from(q.bit(64)) << 64
    };
    if m >> 64 != 0 {
        m >>= 1;
        e += 1;
    }
    (e <= MAX_EXP).then_some(LongDouble {
        neg,
        mant: m as u64,
        exp: e,
    })
}

/// A non-negative integer of any size: 32-bit limbs, least significant first, no zero limb
/// at the top.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn from_u64(v: u64) -> Big {
        let mut b = Big(vec![v as u32, (v >> 32) as u32]);
        b.trim();
        b
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    fn bit_len(&self) -> u64 {
        self.0.last().map_or(0, |top| {
            32 * self.0.len() as u64 - u64::from(top.leading_zeros())
        })
    }

    fn bit(&self, i: u64) -> bool {
        self.0
            .get((i / 32) as usize)
            .is_some_and(|l| l >> (i % 32) & 1 == 1)
    }

    /// Whether any bit below `i` is set.
    fn any_below(&self, i: u64) -> bool {
        let whole = ((i / 32) as usize).min(self.0.len());
        self.0[..whole].iter().any(|&l| l != 0)
            || (i % 32 != 0 && self.0.get(whole).is_some_and(|&l| l << (32 - i % 32) != 0))
    }

    /// The low 64 bits.
    fn low_u64(&self) -> u64 {
        let limb = |i: usize| u64::from(self.0.get(i).copied().unwrap_or(0));
        limb(0) | limb(1) << 32
    }

    /// `self * mul + add`.
    fn mul_add_small(&mut self, mul: u32, add: u32) {
        let mut carry = u64::from(add);
        for l in &mut self.0 {
            let v = u64::from(*l) * u64::from(mul) + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            self.0.push(carry as u32);
        }
        self.trim();
    }

    /// `self / div`, leaving the quotient; returns the remainder.
    fn div_rem_small(&mut self, div: u32) -> u32 {
        let mut rem = 0u64;
        for l in self.0.iter_mut().rev() {
            let v = rem << 32 | u64::from(*l);
            *l = (v / u64::from(div)) as u32;
            rem = v % u64::from(div);
        }
        self.trim();
        rem as u32
    }

    fn shl(&self, n: i64) -> Big {
        let n = n.max(0) as u64;
        let (limbs, bits) = ((n / 32) as usize, n % 32);
        let mut out = vec![0u32; limbs];
        let mut carry = 0u32;
        for &l in &self.0 {
            out.push(if bits == 0 { l } else { l << bits | carry });
            carry = if bits == 0 { 0 } else { l >> (32 - bits) };
        }
        out.push(carry);
        let mut b = Big(out);
        b.trim();
        b
    }

    fn shr(&self, n: u64) -> Big {
        let (limbs, bits) = ((n / 32) as usize, n % 32);
        let src = self.0.get(limbs..).unwrap_or(&[]);
        let mut out = Vec::with_capacity(src.len());
        for (i, &l) in src.iter().enumerate() {
            let high = src.get(i + 1).copied().unwrap_or(0);
            out.push(if bits == 0 {
                l
            } else {
                l >> bits | high << (32 - bits)
            });
        }
        let mut b = Big(out);
        b.trim();
        b
    }

    /// `self / 2^n` (`n` > 0) rounded to nearest, ties to even.
    fn shr_round_even(&self, n: i64) -> Big {
        let n = n as u64;
        let mut q = self.shr(n);
        let half = self.bit(n - 1);
        if half && (self.any_below(n - 1) || q.bit(0)) {
            q.mul_add_small(1, 1);
        }
        q
    }

    fn cmp(&self, other: &Big) -> Ordering {
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.iter().rev().cmp(other.0.iter().rev()))
    }

    fn add(&self, other: &Big) -> Big {
        let mut out = Vec::with_capacity(self.0.len().max(other.0.len()) + 1);
        let mut carry = 0u64;
        for i in 0..self.0.len().max(other.0.len()) {
            let v = u64::from(self.0.get(i).copied().unwrap_or(0))
                + u64::from(other.0.get(i).copied().unwrap_or(0))
                + carry;
            out.push(v as u32);
            carry = v >> 32;
        }
        out.push(carry as u32);
        let mut b = Big(out);
        b.trim();
        b
    }

    /// `self - other`, for `self >= other`.
    fn sub(&self, other: &Big) -> Big {
        let mut out = Vec::with_capacity(self.0.len());
        let mut borrow = 0i64;
        for (i, &l) in self.0.iter().enumerate() {
            let mut v = i64::from(l) - i64::from(other.0.get(i).copied().unwrap_or(0)) - borrow;
            borrow = i64::from(v < 0);
            if v < 0 {
                v += 1 << 32;
            }
            out.push(v as u32);
        }
        let mut b = Big(out);
        b.trim();
        b
    }

    /// Quotient and remainder, by shifting and subtracting: for quotients of a few dozen
    /// bits, which is all `from_decimal` asks.
    fn div_rem(&self, den: &Big) -> (Big, Big) {
        let mut rem = self.clone();
        let mut q = Big::default();
        let top = self.bit_len().saturating_sub(den.bit_len());
        for i in (0..=top).rev() {
            let step = den.shl(i as i64);
            q = q.shl(1);
            if rem.cmp(&step) != Ordering::Less {
                rem = rem.sub(&step);
                q.mul_add_small(1, 1);
            }
        }
        (q, rem)
    }

    fn to_decimal(&self) -> String {
        let mut v = self.clone();
        let mut chunks = Vec::new();
        while !v.is_zero() {
            chunks.push(v.div_rem_small(1_000_000_000));
        }
        let mut out = chunks
            .pop()
            .map_or_else(|| "0".to_string(), |c| c.to_string());
        for c in chunks.iter().rev() {
            out.push_str(&format!("{c:09}"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `HINCRBYFLOAT`'s steps: the stored value (empty: none), plus the increment, as text,
    /// or which check failed.
    fn incr(current: &str, by: &str) -> String {
        let by = match parse(by.as_bytes()) {
            None => return "F".into(),
            Some(Parsed::Infinite) => return "N".into(),
            Some(Parsed::Finite(v)) => v,
        };
        let current = match parse(current.as_bytes()) {
            _ if current.is_empty() => LongDouble::ZERO,
            None => return "H".into(),
            Some(Parsed::Infinite) => return "I".into(),
            Some(Parsed::Finite(v)) => v,
        };
        current
            .checked_add(by)
            .map_or("I".into(), LongDouble::to_human)
    }

    /// Cases as Redis 7.0.15 on x86-64 answers them (and a C harness of its `string2ld`,
    /// `long double` sum and `ld2string`, which agreed on 220,000 random cases).
    #[test]
    fn sums_read_and_print_as_redis_does() {
        let cases: &[(&str, &str, &str)] = &[
            ("", "10.5", "10.5"),
            ("10.5", "0.1", "10.6"),
            ("1000.1", "0", "1000.09999999999999998"),
            ("12345678.1", "0.2", "12345678.3000000000001819"),
            ("", "694810.7388", "694810.7388000000000261"),
            (
                "-191136.8949",
                "-262.0158744778454",
                "-191398.91077447784540766",
            ),
            (
                "-6459501988783.7295",
                "-711159.87",
                "-6459502699943.59949970245361328",
            ),
            (
                "-680613.5189378",
                "-5.222428935883074e+25",
                "-52224289358830739998638080",
            ),
            (
                "+7796239.646089127105895440636",
                "+4269207694834105925",
                "4269207694841902164.75",
            ),
            (
                "-9.840228921757473e-11",
                "1.85032797306956E-2405",
                "-0.00000000009840229",
            ),
            (
                "+0xCEa5c2DBF6Af7Ea.",
                "1401915048917417545",
                "2332572673477588531",
            ),
            ("9223372036854775807", "1", "9223372036854775808"),
            ("1", "-1", "0"),
            ("-0", "-0", "0"),
            ("", "-1e-20", "0"),
            // 2^-18 is a tie at the 17th decimal: to even.
            ("", "3.814697265625e-06", "0.00000381469726562"),
            ("", "+1.5", "1.5"),
            ("", ".5", "0.5"),
            ("", "5.", "5"),
            ("", "0x10", "16"),
            ("", "0x.8", "0.5"),
            ("", "0X1P3", "8"),
            // 1.5 times the smallest subnormal rounds to two of it; 2e-4951 to one.
            ("", "0x1.8p-16445", "0"),
            ("", "2e-4951", "0"),
            ("", "1e", "F"),
            ("", "0x", "F"),
            ("", "0x1p", "F"),
            ("", ".", "F"),
            ("", " 1", "F"),
            ("", "1 ", "F"),
            ("", "1\0", "F"),
            ("", "nan", "F"),
            ("", "infin", "F"),
            ("", "1.2.3", "F"),
            // Underflow to zero and overflow to infinity.
            ("", "1e-4951", "F"),
            ("", "0x1p-16446", "F"),
            ("", "1e4933", "F"),
            ("", "1.18973149535723176509e+4932", "F"),
            ("", "inf", "N"),
            ("", "-Infinity", "N"),
            ("inf", "1", "I"),
            ("x", "1", "H"),
            (
                "1.18973149535723176502e+4932",
                "1.18973149535723176502e+4932",
                "I",
            ),
        ];
        for (current, by, want) in cases {
            assert_eq!(incr(current, by), *want, "{current:?} + {by:?}");
        }
        let largest = incr("", "1.18973149535723176502e+4932");
        assert_eq!(largest.len(), 4933);
        assert!(largest.starts_with("11897314953572317650212"));
        assert!(incr("", "1e300")
            .starts_with("10000000000000000000089973240795591938705239442732907479382600823"));
        // Redis's MAX_LONG_DOUBLE_CHARS: 5119 characters are read, 5120 are not.
        let long = format!("0.{}", "1".repeat(5117));
        assert_eq!(incr("", &long), "0.11111111111111111");
        assert_eq!(incr("", &format!("{long}1")), "F");
    }
}
