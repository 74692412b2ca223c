//! `INCRBYFLOAT`'s arithmetic as Redis does it on x86-64 Linux: in C's `long double`, the
//! x87 80-bit format (a 64-bit mantissa), read by glibc's `strtold`, added once, and written
//! by `printf("%.17Lf")`. Doing it in `f64` instead gives other digits (Redis's `1000.1`
//! plus `10.5` is `1010.59999999999999998`), so the format is emulated exactly here: every
//! conversion and the addition are computed with big integers and rounded once, to nearest
//! with ties to even, as the hardware and glibc round.

use std::cmp::Ordering;

/// The longest number Redis reads (`MAX_LONG_DOUBLE_CHARS`, less its terminating zero).
const MAX_CHARS: usize = 5 * 1024 - 1;
/// Bits of the mantissa.
const MANT_BITS: i64 = 64;
/// The exponent of the last mantissa bit of the least normal value, and of every subnormal
/// (2^-16445 is the least positive value).
const MIN_EXP: i64 = -16445;
/// Values of 2^`LIMIT_BIT` and over overflow.
const LIMIT_BIT: i64 = 16384;
/// Exponents written in a number are clamped to this: past it every value overflows or
/// underflows all the same.
const EXP_CLAMP: i64 = 1 << 20;

/// A finite `long double`: `(-1)^neg × mant × 2^exp`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LongDouble {
    neg: bool,
    mant: u64,
    exp: i64,
}

impl LongDouble {
    /// Zero, as a missing field counts.
    pub const ZERO: LongDouble = LongDouble {
        neg: false,
        mant: 0,
        exp: 0,
    };
}

/// A number `strtold` read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Num {
    /// A finite value.
    Finite(LongDouble),
    /// `inf` or `infinity`, either sign.
    Infinite,
}

/// Reads `s` as Redis's `string2ld` does: `strtold` over the whole argument, no leading
/// space, no NaN, and a value that overflows or underflows to zero refused (`None`).
pub fn parse(s: &[u8]) -> Option<Num> {
    if s.is_empty() || s.len() > MAX_CHARS || s[0].is_ascii_whitespace() || s[0] == b'\x0b' {
        return None;
    }
    let (neg, body) = match s[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity") {
        return Some(Num::Infinite);
    }
    let hex = body.len() > 2
        && body[0] == b'0'
        && (body[1] | 0x20) == b'x'
        && matches!(body[2], b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' | b'.');
    let (digits, exp, sticky) = if hex {
        hex_digits(&body[2..])?
    } else {
        decimal_digits(body)?
    };
    if digits.is_zero() {
        return Some(Num::Finite(LongDouble {
            neg,
            mant: 0,
            exp: 0,
        }));
    }
    // Nonzero digits that round to zero, or to infinity, are `strtold`'s range errors.
    match round(neg, &digits, exp, sticky) {
        Some(v) if v.mant != 0 => Some(Num::Finite(v)),
        _ => None,
    }
}

/// The sum, rounded as the hardware rounds it; `None` if it is infinite or NaN.
pub fn add(a: Num, b: Num) -> Option<LongDouble> {
    let (Num::Finite(a), Num::Finite(b)) = (a, b) else {
        return None;
    };
    if a.mant == 0 {
        return Some(if b.mant == 0 {
            LongDouble {
                neg: a.neg && b.neg,
                ..b
            }
        } else {
            b
        });
    }
    if b.mant == 0 {
        return Some(a);
    }
    let exp = a.exp.min(b.exp);
    let x = Big::from_u64(a.mant).shifted_left((a.exp - exp) as u64);
    let y = Big::from_u64(b.mant).shifted_left((b.exp - exp) as u64);
    if a.neg == b.neg {
        return round(a.neg, &x.plus(&y), exp, false);
    }
    match x.cmp(&y) {
        Ordering::Equal => Some(LongDouble {
            neg: false,
            mant: 0,
            exp: 0,
        }),
        Ordering::Greater => round(a.neg, &x.minus(&y), exp, false),
        Ordering::Less => round(b.neg, &y.minus(&x), exp, false),
    }
}

/// The value as Redis writes it (`ld2string`'s human mode): `%.17Lf`, then trailing zeros
/// and a trailing point dropped, and `-0` as `0`.
pub fn format(v: LongDouble) -> String {
    let mut n = Big::from_u64(v.mant);
    for _ in 0..17 {
        n.mul_small(10);
    }
    let n = if v.exp >= 0 {
        n.shifted_left(v.exp as u64)
    } else {
        let shift = v.exp.unsigned_abs();
        let q = n.shifted_right(shift);
        if round_up(&n, shift, false, q.bit(0)) {
            q.plus(&Big::from_u64(1))
        } else {
            q
        }
    };
    let mut digits = n.to_decimal();
    if digits.len() < 18 {
        digits = format!("{digits:0>18}");
    }
    let point = digits.len() - 17;
    let mut out = String::with_capacity(digits.len() + 2);
    if v.neg {
        out.push('-');
    }
    out.push_str(&digits[..point]);
    let frac = digits[point..].trim_end_matches('0');
    if !frac.is_empty() {
        out.push('.');
        out.push_str(frac);
    }
    if out == "-0" {
        out.remove(0);
    }
    out
}

/// Decimal digits with an optional point and exponent, as `strtold` reads them: the value
/// as `digits × 2^exp` (less a remainder, `sticky`, when it is not a whole number of bits).
fn decimal_digits(s: &[u8]) -> Option<(Big, i64, bool)> {
    let mut digits = Big::default();
    let (mut seen, mut point, mut frac) = (false, false, 0i64);
    let mut i = 0;
    let mut chunk = (0u32, 1u32);
    while i < s.len() {
        match s[i] {
            d @ b'0'..=b'9' => {
                seen = true;
                chunk = (chunk.0 * 10 + u32::from(d - b'0'), chunk.1 * 10);
                if chunk.1 == 1_000_000_000 {
                    digits.mul_small(chunk.1);
                    digits.add_small(chunk.0);
                    chunk = (0, 1);
                }
                frac += i64::from(point);
            }
            b'.' if !point => point = true,
            _ => break,
        }
        i += 1;
    }
    digits.mul_small(chunk.1);
    digits.add_small(chunk.0);
    if !seen {
        return None;
    }
    let exp10 = exponent(&s[i..], b'e')? - frac;
    Some(scale10(digits, exp10))
}

/// `digits × 10^exp10` as big integer, binary exponent and remainder.
fn scale10(digits: Big, exp10: i64) -> (Big, i64, bool) {
    if digits.is_zero() {
        return (digits, 0, false);
    }
    // 10^4952 is past the largest value and 10^-4952 below half the least one: clamped
    // there, every power still over- or underflows, and the big numbers stay small.
    let exp10 = exp10.clamp(-6000 - digits.bits() as i64, 6000);
    if exp10 >= 0 {
        let mut n = digits;
        pow10(&mut n, exp10 as u64, |n, m| n.mul_small(m));
        return (n, 0, false);
    }
    // Enough bits that the quotient keeps 66 significant ones: the mantissa, the rounding
    // bit, and one to spare; what the divisions drop is the sticky remainder.
    let down = exp10.unsigned_abs();
    let shift = (70 + down * 34 / 10).saturating_sub(digits.bits());
    let mut n = digits.shifted_left(shift);
    let mut sticky = false;
    pow10(&mut n, down, |n, m| sticky |= n.divrem_small(m) != 0);
    (n, -(shift as i64), sticky)
}

/// Applies `step` with factors of ten whose product is 10^`power`.
fn pow10(n: &mut Big, mut power: u64, mut step: impl FnMut(&mut Big, u32)) {
    while power > 0 {
        let k = power.min(9);
        step(n, 10u32.pow(k as u32));
        power -= k;
    }
}

/// A C99 hexadecimal float after its `0x`: hex digits with an optional point, then an
/// optional binary exponent `p±n`.
fn hex_digits(s: &[u8]) -> Option<(Big, i64, bool)> {
    let mut digits = Big::default();
    let (mut seen, mut point, mut frac) = (false, false, 0i64);
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'.' if !point => point = true,
            c if c.is_ascii_hexdigit() => {
                seen = true;
                let d = (c as char).to_digit(16).unwrap_or(0);
                digits.mul_small(16);
                digits.add_small(d);
                frac += i64::from(point);
            }
            _ => break,
        }
        i += 1;
    }
    if !seen {
        return None;
    }
    let exp2 = exponent(&s[i..], b'p')? - 4 * frac;
    Some((digits, exp2, false))
}

/// The exponent part (`marker`, optional sign, digits) that must end the number: 0 if there
/// is none, clamped; `None` if anything else is left over.
fn exponent(s: &[u8], marker: u8) -> Option<i64> {
    if s.is_empty() {
        return Some(0);
    }
    if (s[0] | 0x20) != marker {
        return None;
    }
    let (neg, digits) = match s.get(1) {
        Some(b'-') => (true, &s[2..]),
        Some(b'+') => (false, &s[2..]),
        _ => (false, &s[1..]),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut e: i64 = 0;
    for d in digits {
        e = (e * 10 + i64::from(d - b'0')).min(EXP_CLAMP);
    }
    Some(if neg { -e } else { e })
}

/// `n × 2^exp` (plus less than its last bit's worth, if `sticky`) rounded to a
/// `long double`: to nearest, ties to even, subnormal below the normal range; `None` if it
/// overflows.
fn round(neg: bool, n: &Big, exp: i64, sticky: bool) -> Option<LongDouble> {
    let keep = (exp + n.bits() as i64 - MANT_BITS).max(MIN_EXP);
    let shift = keep - exp;
    let (mant, keep) = if shift <= 0 {
        (n.shifted_left(shift.unsigned_abs()).low_u64(), keep)
    } else {
        let shift = shift as u64;
        let q = n.shifted_right(shift).low_u64();
        if !round_up(n, shift, sticky, q & 1 == 1) {
            (q, keep)
        } else {
            // Rounding up may carry out of the 64 bits: 2^64 is 2^63 one exponent up.
            q.checked_add(1).map_or((1 << 63, keep + 1), |m| (m, keep))
        }
    };
    if mant != 0 && keep + 64 - i64::from(mant.leading_zeros()) > LIMIT_BIT {
        return None;
    }
    Some(LongDouble {
        neg,
        mant,
        exp: keep,
    })
}

/// Whether dropping the low `shift` bits of `n` (and a `sticky` remainder below them)
/// rounds up, to nearest with ties to even (`odd`: the kept part is odd).
fn round_up(n: &Big, shift: u64, sticky: bool, odd: bool) -> bool {
    let half = n.bit(shift - 1);
    half && (sticky || n.any_below(shift - 1) || odd)
}

/// An unsigned big integer: 32-bit limbs, least significant first, no high zero limbs.
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

    fn bits(&self) -> u64 {
        self.0.last().map_or(0, |top| {
            32 * (self.0.len() as u64 - 1) + u64::from(32 - top.leading_zeros())
        })
    }

    fn bit(&self, i: u64) -> bool {
        let limb = (i / 32) as usize;
        self.0.get(limb).is_some_and(|l| (l >> (i % 32)) & 1 == 1)
    }

    /// Whether any bit below bit `i` is set.
    fn any_below(&self, i: u64) -> bool {
        let whole = ((i / 32) as usize).min(self.0.len());
        if self.0[..whole].iter().any(|&l| l != 0) {
            return true;
        }
        let part = i % 32;
        part > 0
            && self
                .0
                .get(whole)
                .is_some_and(|l| l & ((1 << part) - 1) != 0)
    }

    fn low_u64(&self) -> u64 {
        let lo = u64::from(self.0.first().copied().unwrap_or(0));
        let hi = u64::from(self.0.get(1).copied().unwrap_or(0));
        lo | hi << 32
    }

    fn shifted_left(&self, n: u64) -> Big {
        if self.is_zero() {
            return Big::default();
        }
        let (limbs, bits) = ((n / 32) as usize, (n % 32) as u32);
        let mut out = vec![0u32; limbs];
        let mut carry = 0u32;
        for &l in &self.0 {
            if bits == 0 {
                out.push(l);
            } else {
                out.push(l << bits | carry);
                carry = l >> (32 - bits);
            }
        }
        out.push(carry);
        let mut b = Big(out);
        b.trim();
        b
    }

    fn shifted_right(&self, n: u64) -> Big {
        let limbs = (n / 32) as usize;
        if limbs >= self.0.len() {
            return Big::default();
        }
        let bits = (n % 32) as u32;
        let src = &self.0[limbs..];
        let mut out: Vec<u32> = Vec::with_capacity(src.len());
        for (i, &l) in src.iter().enumerate() {
            let next = src.get(i + 1).copied().unwrap_or(0);
            out.push(if bits == 0 {
                l
            } else {
                l >> bits | next << (32 - bits)
            });
        }
        let mut b = Big(out);
        b.trim();
        b
    }

    fn mul_small(&mut self, m: u32) {
        let mut carry = 0u64;
        for l in &mut self.0 {
            let v = u64::from(*l) * u64::from(m) + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
        self.trim();
    }

    fn add_small(&mut self, a: u32) {
        self.add_in(&Big::from_u64(u64::from(a)));
    }

    /// Divides in place; returns the remainder.
    fn divrem_small(&mut self, d: u32) -> u32 {
        let mut rem = 0u64;
        for l in self.0.iter_mut().rev() {
            let v = rem << 32 | u64::from(*l);
            *l = (v / u64::from(d)) as u32;
            rem = v % u64::from(d);
        }
        self.trim();
        rem as u32
    }

    fn add_in(&mut self, other: &Big) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        let mut carry = 0u64;
        for (i, l) in self.0.iter_mut().enumerate() {
            let v = u64::from(*l) + u64::from(other.0.get(i).copied().unwrap_or(0)) + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
    }

    fn plus(&self, other: &Big) -> Big {
        let mut out = self.clone();
        out.add_in(other);
        out
    }

    /// `self - other`, for `self >= other`.
    fn minus(&self, other: &Big) -> Big {
        let mut out = self.0.clone();
        let mut borrow = 0i64;
        for (i, l) in out.iter_mut().enumerate() {
            let v = i64::from(*l) - i64::from(other.0.get(i).copied().unwrap_or(0)) - borrow;
            borrow = i64::from(v < 0);
            *l = (v + (borrow << 32)) as u32;
        }
        let mut b = Big(out);
        b.trim();
        b
    }

    fn to_decimal(&self) -> String {
        let mut n = self.clone();
        let mut chunks = Vec::new();
        while !n.is_zero() {
            chunks.push(n.divrem_small(1_000_000_000));
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

impl Ord for Big {
    fn cmp(&self, other: &Big) -> Ordering {
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.iter().rev().cmp(other.0.iter().rev()))
    }
}

impl PartialOrd for Big {
    fn partial_cmp(&self, other: &Big) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn incr(a: &str, b: &str) -> Option<String> {
        add(parse(a.as_bytes())?, parse(b.as_bytes())?).map(format)
    }

    #[test]
    fn sums_print_as_redis_prints_them() {
        // Each against Redis 7.0.15 on x86-64 Linux.
        let cases = [
            ("10.5", "0.1", "10.6"),
            ("3.0e3", "200", "3200"),
            ("0", "1000.1", "1000.09999999999999998"),
            ("1000.09999999999999998", "10.5", "1010.59999999999999998"),
            ("1.5", "-1.5", "0"),
            ("0", "5.0e3", "5000"),
            ("0", "-0.0", "0"),
            ("0", "1.23456789012345678901", "1.23456789012345679"),
            ("0.1", "0.2", "0.3"),
            ("0", "1e-20", "0"),
            ("0", "-1e-20", "0"),
            ("0", "0x1p-16445", "0"),
            ("9223372036854775807", "1", "9223372036854775808"),
            ("0", ".5", "0.5"),
            ("0", "5.", "5"),
            ("0", "+.5e1", "5"),
            ("0", "0x1.8p1", "3"),
            ("0", "0X.8P+1", "1"),
            ("0", "0x10", "16"),
            ("0", "123456789.123456789", "123456789.12345678899873747"),
            ("0", "99999999999999999999.5", "100000000000000000000"),
            ("0", "1.5e-5", "0.000015"),
        ];
        for (a, b, want) in cases {
            assert_eq!(incr(a, b).as_deref(), Some(want), "{a} + {b}");
        }
    }

    #[test]
    fn huge_values_print_every_digit() {
        let big = incr("0", "1e300").unwrap();
        assert!(big.starts_with(
            "10000000000000000000089973240795591938705239442732907479382600823212656465961809"
        ));
        assert_eq!(big.len(), 301);
        let max = incr("0", "1.7976931348623157e308").unwrap();
        assert!(max.starts_with(
            "1797693134862315699959210467741044340483864469443291784853144207651766285231243963547018686083870855"
        ));
        let top = incr("0", "1.18e4932").unwrap();
        assert!(top.starts_with(
            "1180000000000000000000652812918093699202690437140160471729831240061836527728446996012081496266122792"
        ));
        assert_eq!(incr(&top, &top), None);
    }

    #[test]
    fn refuses_what_strtold_refuses() {
        for bad in [
            "",
            " 1",
            "1 ",
            "a",
            "1_0",
            "1e",
            "1e+",
            "nan",
            "-nan",
            "0x",
            "0xg",
            "0x1p",
            "1e5000",
            "1.19e4932",
            "1e-5000",
            "0x1p-16446",
            ".",
            "+",
            "-",
            "1..2",
        ] {
            assert_eq!(parse(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(parse(b"inf"), Some(Num::Infinite));
        assert_eq!(parse(b"-Infinity"), Some(Num::Infinite));
        assert_eq!(incr("1", "inf"), None);
        assert!(parse(&[b'1'; MAX_CHARS + 1]).is_none());
        assert!(parse(b"0e99999999999999999999999").is_some());
    }
}
