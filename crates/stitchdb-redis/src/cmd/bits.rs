//! Strings as bitmaps: `SETBIT`, `GETBIT`, `BITCOUNT`, `BITPOS`. Bit 0 is the most
//! significant bit of the first byte, as in Redis.

use super::single_key;
use super::strings::{check_grow, clamp_range, put_string, string_entry, string_value};
use super::{args, CmdResult, Failure, Spec};
use crate::keyspace::Ctx;
use crate::resp::reply::Reply;

/// The family's commands.
pub const COMMANDS: &[Spec] = &[
    single_key("setbit", 4, &["write", "denyoom"], setbit),
    single_key("getbit", 3, &["readonly", "fast"], getbit),
    single_key("bitcount", -2, &["readonly"], bitcount),
    single_key("bitpos", -3, &["readonly"], bitpos),
];

/// A bit offset, as Redis's `getBitOffsetFromArgument` reads one: within a 512 MiB string.
fn bit_offset(arg: &[u8]) -> Result<u64, Failure> {
    args::int(arg)
        .ok()
        .and_then(|n| u64::try_from(n).ok())
        .filter(|&n| n >> 3 < super::strings::REDIS_MAX_STRING)
        .ok_or_else(|| args::err("ERR bit offset is not an integer or out of range"))
}

/// Bit `bit` of `value` (0 past its end).
fn bit_at(value: &[u8], bit: u64) -> bool {
    value
        .get((bit >> 3) as usize)
        .is_some_and(|b| b & (0x80 >> (bit & 7)) != 0)
}

/// `SETBIT key offset 0|1`: the bit's old value. The string grows with zeros to hold the
/// bit (a missing key is created, even to clear a bit); its deadline stays.
fn setbit(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let offset = bit_offset(&a[2])?;
    let on = match args::int(&a[3]) {
        Ok(b @ (0 | 1)) => b == 1,
        _ => return Err(args::err("ERR bit is not an integer or out of range")),
    };
    let entry = string_entry(ctx, &a[1])?;
    let byte = (offset >> 3) as usize;
    check_grow(ctx, byte as u64 + 1)?;
    let created = entry.is_none();
    let (mut value, expire_at) = entry.unwrap_or_default();
    let grown = value.len() <= byte;
    if grown {
        value.resize(byte + 1, 0);
    }
    let old = bit_at(&value, offset);
    if !created && !grown && old == on {
        // Nothing changes: nothing is written and watchers are not told, as in Redis 7.0.
        return Ok(Reply::Int(i64::from(old)));
    }
    let mask = 0x80 >> (offset & 7);
    if on {
        value[byte] |= mask;
    } else {
        value[byte] &= !mask;
    }
    put_string(ctx, &a[1], value, expire_at)?;
    Ok(Reply::Int(i64::from(old)))
}

fn getbit(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let offset = bit_offset(&a[2])?;
    let value = string_value(ctx, &a[1])?.unwrap_or_default();
    Ok(Reply::Int(i64::from(bit_at(&value, offset))))
}

/// `BYTE` or `BIT`: whether a range counts bits.
fn unit_is_bit(arg: &[u8]) -> Result<bool, Failure> {
    if args::is(arg, "bit") {
        Ok(true)
    } else if args::is(arg, "byte") {
        Ok(false)
    } else {
        Err(args::syntax())
    }
}

/// A range of `value` in bytes (or bits if `bit`), as the first and last bit it covers.
fn bit_range(value: &[u8], start: i64, end: i64, bit: bool) -> Option<(u64, u64)> {
    let len = value.len() as i64 * if bit { 8 } else { 1 };
    let (s, e) = clamp_range(len, start, end)?;
    let (s, e) = (s as u64, e as u64);
    Some(if bit { (s, e) } else { (s * 8, e * 8 + 7) })
}

/// The bits of byte `i` from bit `first` to bit `last` of the string, as a mask of it.
fn byte_mask(i: u64, first: u64, last: u64) -> u8 {
    let lo = first.max(i * 8) - i * 8;
    let hi = last.min(i * 8 + 7) - i * 8;
    (0xffu8 >> lo) & (0xffu8 << (7 - hi))
}

/// Ones among bits `first..=last` of `value`.
fn count_ones(value: &[u8], first: u64, last: u64) -> i64 {
    let (fb, lb) = (first >> 3, last >> 3);
    let mut n = 0;
    for i in fb..=lb {
        n += (value[i as usize] & byte_mask(i, first, last)).count_ones();
    }
    i64::from(n)
}

/// The first bit among bits `first..=last` of `value` that is `one`.
fn find_bit(value: &[u8], first: u64, last: u64, one: bool) -> Option<u64> {
    for i in first >> 3..=last >> 3 {
        let b = if one {
            value[i as usize]
        } else {
            !value[i as usize]
        };
        let hits = b & byte_mask(i, first, last);
        if hits != 0 {
            return Some(i * 8 + u64::from(hits.leading_zeros()));
        }
    }
    None
}

/// `BITCOUNT key [start end [BYTE|BIT]]`. As Redis 7.0 does: a missing key counts 0
/// before its arguments are read, and a range from the end whose start is after its end
/// counts 0 before the unit is read.
fn bitcount(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let Some(value) = string_value(ctx, &a[1])? else {
        return Ok(Reply::Int(0));
    };
    let range = match a.len() {
        2 => bit_range(&value, 0, -1, false),
        4 | 5 => {
            let start = args::int(&a[2])?;
            let end = args::int(&a[3])?;
            if start < 0 && end < 0 && start > end {
                return Ok(Reply::Int(0));
            }
            let bit = match a.get(4) {
                Some(unit) => unit_is_bit(unit)?,
                None => false,
            };
            bit_range(&value, start, end, bit)
        }
        _ => return Err(args::syntax()),
    };
    Ok(Reply::Int(range.map_or(0, |(first, last)| {
        count_ones(&value, first, last)
    })))
}

/// `BITPOS key 0|1 [start [end [BYTE|BIT]]]`: the first bit set (or clear) in the range,
/// or -1. Looking for a clear bit without an end, the string is taken as followed by
/// zeros: the answer is then the bit after the range.
fn bitpos(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let one = match args::int(&a[2])? {
        0 => false,
        1 => true,
        _ => return Err(args::err("ERR The bit argument must be 1 or 0.")),
    };
    let Some(value) = string_value(ctx, &a[1])? else {
        return Ok(Reply::Int(if one { -1 } else { 0 }));
    };
    if a.len() > 6 {
        return Err(args::syntax());
    }
    let start = a.get(3).map(|s| args::int(s)).transpose()?.unwrap_or(0);
    let bit = match a.get(5) {
        Some(unit) => unit_is_bit(unit)?,
        None => false,
    };
    let end = a.get(4).map(|e| args::int(e)).transpose()?;
    let Some((first, last)) = bit_range(&value, start, end.unwrap_or(-1), bit) else {
        return Ok(Reply::Int(-1));
    };
    Ok(Reply::Int(match find_bit(&value, first, last, one) {
        Some(pos) => pos as i64,
        None if !one && end.is_none() => last as i64 + 1,
        None => -1,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_cover_the_range_within_a_byte() {
        assert_eq!(byte_mask(0, 0, 7), 0xff);
        assert_eq!(byte_mask(0, 5, 30), 0b0000_0111);
        assert_eq!(byte_mask(3, 5, 30), 0b1111_1110);
        assert_eq!(byte_mask(1, 9, 10), 0b0110_0000);
    }

    #[test]
    fn counts_and_finds_as_redis_does() {
        let foobar = b"foobar";
        assert_eq!(count_ones(foobar, 0, 47), 26);
        assert_eq!(count_ones(foobar, 5, 30), 17);
        assert_eq!(find_bit(b"\xff\xf0", 0, 15, false), Some(12));
        assert_eq!(find_bit(b"\x00\x01", 0, 15, true), Some(15));
        assert_eq!(find_bit(b"\xff", 0, 7, false), None);
    }
}
