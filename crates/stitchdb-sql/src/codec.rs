//! The byte encodings of keys and rows (format version 1; the crate docs describe them).
//!
//! * [`encode_key`] / [`decode_key`]: a GlueSQL [`Key`] as the bytes of a StitchDB key, so
//!   that byte order is [`Key`]'s order among keys of one type. No type tag: a table's keys
//!   all have its primary key column's type, which the schema gives back when decoding
//!   (a table without a primary key has keys of its own, [`generated_key`]).
//! * [`encode_row`] / [`decode_row`]: a row's values, each a tag byte and a payload of a
//!   width fixed by the tag (numbers little-endian), strings and byte strings prefixed by
//!   their length as a varint. Rows of the same types and string lengths are the same size,
//!   which the `fixed` and `array` layouts need.

use gluesql_core::ast::DataType;
use gluesql_core::chrono::{Datelike, NaiveDate, NaiveDateTime, NaiveTime, Timelike};
use gluesql_core::data::{Interval, Key, Point, Value};
use ordered_float::OrderedFloat;
use rust_decimal::Decimal;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why bytes could not be decoded, or a value encoded.
pub type CodecError = String;

/// The value of a sign bit, flipped so that two's-complement integers sort as unsigned.
macro_rules! flip {
    ($v:expr, $u:ty, $bits:expr) => {
        (($v as $u) ^ (1 << ($bits - 1))).to_be_bytes()
    };
}

/// A float's bits, ordered as `total_cmp` orders floats once read as a big-endian unsigned
/// number: negative numbers have every bit flipped, the others only the sign bit.
fn float_order_bits(bits: u64, sign: u64) -> u64 {
    if bits & sign != 0 {
        !bits
    } else {
        bits | sign
    }
}

/// The inverse of [`float_order_bits`].
fn float_from_order_bits(bits: u64, sign: u64) -> u64 {
    if bits & sign != 0 {
        bits & !sign
    } else {
        !bits
    }
}

/// The key of a table without a primary key: its row number, big-endian.
pub fn generated_key(n: u64) -> Key {
    Key::U64(n)
}

/// `key`'s bytes, ordered as keys of its type are (see the module docs).
pub fn encode_key(key: &Key) -> Result<Vec<u8>, CodecError> {
    Ok(match key {
        Key::Bool(v) => vec![u8::from(*v)],
        Key::I8(v) => flip!(*v, u8, 8).to_vec(),
        Key::I16(v) => flip!(*v, u16, 16).to_vec(),
        Key::I32(v) => flip!(*v, u32, 32).to_vec(),
        Key::I64(v) => flip!(*v, u64, 64).to_vec(),
        Key::I128(v) => flip!(*v, u128, 128).to_vec(),
        Key::U8(v) => vec![*v],
        Key::U16(v) => v.to_be_bytes().to_vec(),
        Key::U32(v) => v.to_be_bytes().to_vec(),
        Key::U64(v) => v.to_be_bytes().to_vec(),
        Key::U128(v) | Key::Uuid(v) => v.to_be_bytes().to_vec(),
        Key::F32(v) => {
            // Keys that compare equal (0.0 and -0.0; every NaN) must be the same bytes.
            let v = canonical_f32(v.0);
            let bits = float_order_bits(u64::from(v.to_bits()), 1 << 31) as u32;
            bits.to_be_bytes().to_vec()
        }
        Key::F64(v) => {
            let v = canonical_f64(v.0);
            float_order_bits(v.to_bits(), 1 << 63)
                .to_be_bytes()
                .to_vec()
        }
        Key::Decimal(d) => {
            // (integer part, fraction in units of 1e-28): both exact, and ordered as the
            // number is (the fraction has the sign of the number).
            let mut int = d.trunc();
            int.rescale(0);
            let mut frac = d.fract();
            frac.rescale(28);
            let mut out = flip!(int.mantissa(), u128, 128).to_vec();
            out.extend_from_slice(&flip!(frac.mantissa(), u128, 128));
            out
        }
        Key::Str(s) => s.as_bytes().to_vec(),
        Key::Bytea(b) => b.clone(),
        Key::Inet(IpAddr::V4(a)) => [&[4u8][..], &a.octets()].concat(),
        Key::Inet(IpAddr::V6(a)) => [&[6u8][..], &a.octets()].concat(),
        Key::Date(d) => flip!(d.num_days_from_ce(), u32, 32).to_vec(),
        Key::Timestamp(t) => {
            let mut out = flip!(t.num_days_from_ce(), u32, 32).to_vec();
            out.extend_from_slice(&t.num_seconds_from_midnight().to_be_bytes());
            out.extend_from_slice(&t.nanosecond().to_be_bytes());
            out
        }
        Key::Time(t) => {
            let mut out = t.num_seconds_from_midnight().to_be_bytes().to_vec();
            out.extend_from_slice(&t.nanosecond().to_be_bytes());
            out
        }
        // Key's order puts every microsecond interval before every month interval.
        Key::Interval(Interval::Microsecond(us)) => [&[0u8][..], &flip!(*us, u64, 64)].concat(),
        Key::Interval(Interval::Month(m)) => [&[1u8][..], &flip!(*m, u32, 32)].concat(),
        Key::None => return Err("NULL cannot be a key".to_owned()),
    })
}

/// The canonical f32 of a key: 0.0 for -0.0, one NaN for every NaN.
fn canonical_f32(v: f32) -> f32 {
    if v.is_nan() {
        f32::NAN
    } else if v == 0.0 {
        0.0
    } else {
        v
    }
}

/// The canonical f64 of a key: 0.0 for -0.0, one NaN for every NaN.
fn canonical_f64(v: f64) -> f64 {
    if v.is_nan() {
        f64::NAN
    } else if v == 0.0 {
        0.0
    } else {
        v
    }
}

/// Whether a column of type `data_type` can be a primary key (its values have a key
/// encoding).
pub fn key_type_supported(data_type: &DataType) -> bool {
    !matches!(data_type, DataType::Map | DataType::List | DataType::Point)
}

/// Exactly `N` bytes of `bytes`, or an error naming what was expected.
fn exact<const N: usize>(bytes: &[u8], what: &str) -> Result<[u8; N], CodecError> {
    bytes
        .try_into()
        .map_err(|_| format!("a {what} key is {N} bytes, not {}", bytes.len()))
}

/// Undoes a sign flip of [`flip!`]'s.
macro_rules! unflip {
    ($bytes:expr, $u:ty, $i:ty, $bits:expr) => {
        (<$u>::from_be_bytes($bytes) ^ (1 << ($bits - 1))) as $i
    };
}

/// The key whose bytes [`encode_key`] made from a key of `data_type` (`None`: a table
/// without a primary key, whose keys are [`generated_key`]s).
pub fn decode_key(data_type: Option<&DataType>, b: &[u8]) -> Result<Key, CodecError> {
    let Some(data_type) = data_type else {
        return Ok(generated_key(u64::from_be_bytes(exact(b, "row number")?)));
    };
    Ok(match data_type {
        DataType::Boolean => match b {
            [0] => Key::Bool(false),
            [1] => Key::Bool(true),
            _ => return Err("a BOOLEAN key is one byte, 0 or 1".to_owned()),
        },
        DataType::Int8 => Key::I8(unflip!(exact(b, "INT8")?, u8, i8, 8)),
        DataType::Int16 => Key::I16(unflip!(exact(b, "INT16")?, u16, i16, 16)),
        DataType::Int32 => Key::I32(unflip!(exact(b, "INT32")?, u32, i32, 32)),
        DataType::Int => Key::I64(unflip!(exact(b, "INT")?, u64, i64, 64)),
        DataType::Int128 => Key::I128(unflip!(exact(b, "INT128")?, u128, i128, 128)),
        DataType::Uint8 => Key::U8(u8::from_be_bytes(exact(b, "UINT8")?)),
        DataType::Uint16 => Key::U16(u16::from_be_bytes(exact(b, "UINT16")?)),
        DataType::Uint32 => Key::U32(u32::from_be_bytes(exact(b, "UINT32")?)),
        DataType::Uint64 => Key::U64(u64::from_be_bytes(exact(b, "UINT64")?)),
        DataType::Uint128 => Key::U128(u128::from_be_bytes(exact(b, "UINT128")?)),
        DataType::Uuid => Key::Uuid(u128::from_be_bytes(exact(b, "UUID")?)),
        DataType::Float32 => {
            let bits = u32::from_be_bytes(exact(b, "FLOAT32")?);
            let bits = float_from_order_bits(u64::from(bits), 1 << 31) as u32;
            Key::F32(OrderedFloat(f32::from_bits(bits)))
        }
        DataType::Float => {
            let bits = u64::from_be_bytes(exact(b, "FLOAT")?);
            Key::F64(OrderedFloat(f64::from_bits(float_from_order_bits(
                bits,
                1 << 63,
            ))))
        }
        DataType::Decimal => {
            let bytes: [u8; 32] = exact(b, "DECIMAL")?;
            let (int, frac) = bytes.split_at(16);
            let int = unflip!(exact(int, "DECIMAL")?, u128, i128, 128);
            let frac = unflip!(exact(frac, "DECIMAL")?, u128, i128, 128);
            let int = Decimal::try_from_i128_with_scale(int, 0).map_err(|e| e.to_string())?;
            let frac = Decimal::try_from_i128_with_scale(frac, 28).map_err(|e| e.to_string())?;
            let sum = int
                .checked_add(frac)
                .ok_or_else(|| "a DECIMAL key out of range".to_owned())?;
            Key::Decimal(sum.normalize())
        }
        DataType::Text => Key::Str(
            String::from_utf8(b.to_vec()).map_err(|_| "a TEXT key is not UTF-8".to_owned())?,
        ),
        DataType::Bytea => Key::Bytea(b.to_vec()),
        DataType::Inet => match b {
            [4, rest @ ..] => Key::Inet(IpAddr::V4(Ipv4Addr::from(exact::<4>(rest, "INET")?))),
            [6, rest @ ..] => Key::Inet(IpAddr::V6(Ipv6Addr::from(exact::<16>(rest, "INET")?))),
            _ => return Err("an INET key starts with 4 or 6".to_owned()),
        },
        DataType::Date => Key::Date(date(unflip!(exact(b, "DATE")?, u32, i32, 32))?),
        DataType::Timestamp => {
            let bytes: [u8; 12] = exact(b, "TIMESTAMP")?;
            let days = unflip!(exact(&bytes[..4], "TIMESTAMP")?, u32, i32, 32);
            let secs = u32::from_be_bytes(exact(&bytes[4..8], "TIMESTAMP")?);
            let nanos = u32::from_be_bytes(exact(&bytes[8..], "TIMESTAMP")?);
            Key::Timestamp(NaiveDateTime::new(date(days)?, time(secs, nanos)?))
        }
        DataType::Time => {
            let bytes: [u8; 8] = exact(b, "TIME")?;
            let secs = u32::from_be_bytes(exact(&bytes[..4], "TIME")?);
            let nanos = u32::from_be_bytes(exact(&bytes[4..], "TIME")?);
            Key::Time(time(secs, nanos)?)
        }
        DataType::Interval => match b {
            [0, rest @ ..] => Key::Interval(Interval::Microsecond(unflip!(
                exact(rest, "INTERVAL")?,
                u64,
                i64,
                64
            ))),
            [1, rest @ ..] => Key::Interval(Interval::Month(unflip!(
                exact(rest, "INTERVAL")?,
                u32,
                i32,
                32
            ))),
            _ => return Err("an INTERVAL key starts with 0 or 1".to_owned()),
        },
        DataType::Map | DataType::List | DataType::Point => {
            return Err(format!("a {data_type} column cannot be a primary key"));
        }
    })
}

/// The date `days` days from the first of January of year 1 (day 1).
fn date(days: i32) -> Result<NaiveDate, CodecError> {
    NaiveDate::from_num_days_from_ce_opt(days).ok_or_else(|| format!("day {days} out of range"))
}

/// The time `secs` seconds and `nanos` nanoseconds after midnight.
fn time(secs: u32, nanos: u32) -> Result<NaiveTime, CodecError> {
    NaiveTime::from_num_seconds_from_midnight_opt(secs, nanos)
        .ok_or_else(|| format!("time {secs}.{nanos:09} out of range"))
}

/// Tag bytes of the row encoding, one per `Value` variant.
mod tag {
    pub const NULL: u8 = 0;
    pub const BOOL: u8 = 1;
    pub const I8: u8 = 2;
    pub const I16: u8 = 3;
    pub const I32: u8 = 4;
    pub const I64: u8 = 5;
    pub const I128: u8 = 6;
    pub const U8: u8 = 7;
    pub const U16: u8 = 8;
    pub const U32: u8 = 9;
    pub const U64: u8 = 10;
    pub const U128: u8 = 11;
    pub const F32: u8 = 12;
    pub const F64: u8 = 13;
    pub const DECIMAL: u8 = 14;
    pub const STR: u8 = 15;
    pub const BYTEA: u8 = 16;
    pub const INET4: u8 = 17;
    pub const INET6: u8 = 18;
    pub const DATE: u8 = 19;
    pub const TIMESTAMP: u8 = 20;
    pub const TIME: u8 = 21;
    pub const INTERVAL_MONTH: u8 = 22;
    pub const INTERVAL_MICROS: u8 = 23;
    pub const UUID: u8 = 24;
    pub const MAP: u8 = 25;
    pub const LIST: u8 = 26;
    pub const POINT: u8 = 27;
}

/// Appends `n` as a LEB128 varint.
fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Appends a length-prefixed byte string.
fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// A row's bytes: the number of values as a varint, then each value.
pub fn encode_row(values: &[Value]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + values.len() * 9);
    put_varint(&mut out, values.len() as u64);
    for v in values {
        put_value(&mut out, v);
    }
    out
}

/// Appends one value: its tag, then its payload.
fn put_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.push(tag::NULL),
        Value::Bool(b) => out.extend_from_slice(&[tag::BOOL, u8::from(*b)]),
        Value::I8(n) => out.extend_from_slice(&[tag::I8, *n as u8]),
        Value::I16(n) => tagged(out, tag::I16, &n.to_le_bytes()),
        Value::I32(n) => tagged(out, tag::I32, &n.to_le_bytes()),
        Value::I64(n) => tagged(out, tag::I64, &n.to_le_bytes()),
        Value::I128(n) => tagged(out, tag::I128, &n.to_le_bytes()),
        Value::U8(n) => out.extend_from_slice(&[tag::U8, *n]),
        Value::U16(n) => tagged(out, tag::U16, &n.to_le_bytes()),
        Value::U32(n) => tagged(out, tag::U32, &n.to_le_bytes()),
        Value::U64(n) => tagged(out, tag::U64, &n.to_le_bytes()),
        Value::U128(n) => tagged(out, tag::U128, &n.to_le_bytes()),
        Value::F32(f) => tagged(out, tag::F32, &f.to_bits().to_le_bytes()),
        Value::F64(f) => tagged(out, tag::F64, &f.to_bits().to_le_bytes()),
        // rust_decimal's own 16-byte form (flags, then the 96-bit mantissa).
        Value::Decimal(d) => tagged(out, tag::DECIMAL, &d.serialize()),
        Value::Str(s) => {
            out.push(tag::STR);
            put_bytes(out, s.as_bytes());
        }
        Value::Bytea(b) => {
            out.push(tag::BYTEA);
            put_bytes(out, b);
        }
        Value::Inet(IpAddr::V4(a)) => tagged(out, tag::INET4, &a.octets()),
        Value::Inet(IpAddr::V6(a)) => tagged(out, tag::INET6, &a.octets()),
        Value::Date(d) => tagged(out, tag::DATE, &d.num_days_from_ce().to_le_bytes()),
        Value::Timestamp(t) => {
            out.push(tag::TIMESTAMP);
            out.extend_from_slice(&t.num_days_from_ce().to_le_bytes());
            out.extend_from_slice(&t.num_seconds_from_midnight().to_le_bytes());
            out.extend_from_slice(&t.nanosecond().to_le_bytes());
        }
        Value::Time(t) => {
            out.push(tag::TIME);
            out.extend_from_slice(&t.num_seconds_from_midnight().to_le_bytes());
            out.extend_from_slice(&t.nanosecond().to_le_bytes());
        }
        Value::Interval(Interval::Month(m)) => tagged(out, tag::INTERVAL_MONTH, &m.to_le_bytes()),
        Value::Interval(Interval::Microsecond(us)) => {
            tagged(out, tag::INTERVAL_MICROS, &us.to_le_bytes());
        }
        Value::Uuid(u) => tagged(out, tag::UUID, &u.to_le_bytes()),
        Value::Map(map) => {
            out.push(tag::MAP);
            put_varint(out, map.len() as u64);
            for (k, v) in map {
                put_bytes(out, k.as_bytes());
                put_value(out, v);
            }
        }
        Value::List(list) => {
            out.push(tag::LIST);
            put_varint(out, list.len() as u64);
            for v in list {
                put_value(out, v);
            }
        }
        Value::Point(p) => {
            out.push(tag::POINT);
            out.extend_from_slice(&p.x.to_bits().to_le_bytes());
            out.extend_from_slice(&p.y.to_bits().to_le_bytes());
        }
    }
}

/// Appends a tag and a fixed-width payload.
fn tagged(out: &mut Vec<u8>, tag: u8, payload: &[u8]) {
    out.push(tag);
    out.extend_from_slice(payload);
}

/// A cursor over a row's bytes.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    /// The next `n` bytes.
    fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        if self.bytes.len() < n {
            return Err(format!(
                "row ends early: {n} bytes wanted, {} left",
                self.bytes.len()
            ));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    /// The next `N` bytes as an array.
    fn array<const N: usize>(&mut self) -> Result<[u8; N], CodecError> {
        let bytes = self.take(N)?;
        bytes.try_into().map_err(|_| "row ends early".to_owned())
    }

    fn byte(&mut self) -> Result<u8, CodecError> {
        Ok(self.array::<1>()?[0])
    }

    fn varint(&mut self) -> Result<u64, CodecError> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err("varint longer than 64 bits".to_owned())
    }

    /// A count of items that each take at least one byte (bounded by what is left).
    fn count(&mut self) -> Result<usize, CodecError> {
        let n = self.varint()?;
        match usize::try_from(n) {
            Ok(n) if n <= self.bytes.len() => Ok(n),
            _ => Err(format!("count {n} larger than the row")),
        }
    }

    fn bytes(&mut self) -> Result<&'a [u8], CodecError> {
        let n = self.count()?;
        self.take(n)
    }

    fn string(&mut self) -> Result<String, CodecError> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| "string is not UTF-8".to_owned())
    }
}

/// The values of a row [`encode_row`] encoded.
pub fn decode_row(bytes: &[u8]) -> Result<Vec<Value>, CodecError> {
    let mut r = Reader { bytes };
    let n = r.count()?;
    let mut values = Vec::with_capacity(n);
    for _ in 0..n {
        values.push(value(&mut r, 0)?);
    }
    if !r.bytes.is_empty() {
        return Err(format!("{} bytes after the row's values", r.bytes.len()));
    }
    Ok(values)
}

/// Maps and lists nest at most this deep (a corrupt row cannot overflow the stack).
const MAX_DEPTH: usize = 64;

/// Reads one value.
fn value(r: &mut Reader<'_>, depth: usize) -> Result<Value, CodecError> {
    if depth > MAX_DEPTH {
        return Err("values nested too deep".to_owned());
    }
    let t = r.byte()?;
    Ok(match t {
        tag::NULL => Value::Null,
        tag::BOOL => match r.byte()? {
            0 => Value::Bool(false),
            1 => Value::Bool(true),
            b => return Err(format!("boolean byte {b}")),
        },
        tag::I8 => Value::I8(i8::from_le_bytes(r.array()?)),
        tag::I16 => Value::I16(i16::from_le_bytes(r.array()?)),
        tag::I32 => Value::I32(i32::from_le_bytes(r.array()?)),
        tag::I64 => Value::I64(i64::from_le_bytes(r.array()?)),
        tag::I128 => Value::I128(i128::from_le_bytes(r.array()?)),
        tag::U8 => Value::U8(r.byte()?),
        tag::U16 => Value::U16(u16::from_le_bytes(r.array()?)),
        tag::U32 => Value::U32(u32::from_le_bytes(r.array()?)),
        tag::U64 => Value::U64(u64::from_le_bytes(r.array()?)),
        tag::U128 => Value::U128(u128::from_le_bytes(r.array()?)),
        tag::F32 => Value::F32(f32::from_bits(u32::from_le_bytes(r.array()?))),
        tag::F64 => Value::F64(f64::from_bits(u64::from_le_bytes(r.array()?))),
        tag::DECIMAL => {
            let bytes: [u8; 16] = r.array()?;
            // `Decimal::deserialize` takes any bytes; reject a scale it cannot hold.
            if bytes[2] > 28 || bytes[0] != 0 || bytes[1] != 0 || bytes[3] & 0x7f != 0 {
                return Err("DECIMAL flags out of range".to_owned());
            }
            Value::Decimal(Decimal::deserialize(bytes))
        }
        tag::STR => Value::Str(r.string()?),
        tag::BYTEA => Value::Bytea(r.bytes()?.to_vec()),
        tag::INET4 => Value::Inet(IpAddr::V4(Ipv4Addr::from(r.array::<4>()?))),
        tag::INET6 => Value::Inet(IpAddr::V6(Ipv6Addr::from(r.array::<16>()?))),
        tag::DATE => Value::Date(date(i32::from_le_bytes(r.array()?))?),
        tag::TIMESTAMP => {
            let days = i32::from_le_bytes(r.array()?);
            let secs = u32::from_le_bytes(r.array()?);
            let nanos = u32::from_le_bytes(r.array()?);
            Value::Timestamp(NaiveDateTime::new(date(days)?, time(secs, nanos)?))
        }
        tag::TIME => {
            let secs = u32::from_le_bytes(r.array()?);
            let nanos = u32::from_le_bytes(r.array()?);
            Value::Time(time(secs, nanos)?)
        }
        tag::INTERVAL_MONTH => Value::Interval(Interval::Month(i32::from_le_bytes(r.array()?))),
        tag::INTERVAL_MICROS => {
            Value::Interval(Interval::Microsecond(i64::from_le_bytes(r.array()?)))
        }
        tag::UUID => Value::Uuid(u128::from_le_bytes(r.array()?)),
        tag::MAP => {
            let n = r.count()?;
            let mut map = BTreeMap::new();
            for _ in 0..n {
                let k = r.string()?;
                map.insert(k, value(r, depth + 1)?);
            }
            Value::Map(map)
        }
        tag::LIST => {
            let n = r.count()?;
            let mut list = Vec::with_capacity(n);
            for _ in 0..n {
                list.push(value(r, depth + 1)?);
            }
            Value::List(list)
        }
        tag::POINT => {
            let x = f64::from_bits(u64::from_le_bytes(r.array()?));
            let y = f64::from_bits(u64::from_le_bytes(r.array()?));
            Value::Point(Point { x, y })
        }
        t => return Err(format!("unknown value tag {t}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Round trips `key` through its bytes as a key of `data_type`.
    fn round(key: &Key, data_type: &DataType) -> Vec<u8> {
        let bytes = encode_key(key).unwrap();
        assert_eq!(&decode_key(Some(data_type), &bytes).unwrap(), key);
        bytes
    }

    /// Byte order matches key order for every pair of `keys`.
    fn ordered(keys: &[Key], data_type: &DataType) {
        for a in keys {
            for b in keys {
                let (x, y) = (round(a, data_type), round(b, data_type));
                assert_eq!(x.cmp(&y), a.cmp(b), "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn fixed_examples_keep_their_order() {
        ordered(
            &[i64::MIN, -5, -1, 0, 1, 7, i64::MAX].map(Key::I64),
            &DataType::Int,
        );
        ordered(&[-128, -1, 0, 1, 127].map(Key::I8), &DataType::Int8);
        ordered(
            &[
                f64::NEG_INFINITY,
                -2.5,
                -1e-300,
                0.0,
                1e-300,
                3.0,
                f64::INFINITY,
            ]
            .map(|f| Key::F64(OrderedFloat(f))),
            &DataType::Float,
        );
        let decimals = ["-12.75", "-12.5", "-0.5", "0", "0.25", "0.5", "1", "12.5"]
            .map(|s| Key::Decimal(s.parse::<Decimal>().unwrap().normalize()));
        ordered(&decimals, &DataType::Decimal);
        ordered(
            &[
                Key::Interval(Interval::Microsecond(-5)),
                Key::Interval(Interval::Microsecond(9)),
                Key::Interval(Interval::Month(-1)),
                Key::Interval(Interval::Month(3)),
            ],
            &DataType::Interval,
        );
        let ts = |s: &str| Key::Timestamp(s.parse().unwrap());
        ordered(
            &[
                ts("0001-03-01T00:00:00"),
                ts("1999-12-31T23:59:59.999"),
                ts("2000-01-01T00:00:00"),
            ],
            &DataType::Timestamp,
        );
        // -0.0 and 0.0 are one key.
        assert_eq!(
            encode_key(&Key::F64(OrderedFloat(-0.0))).unwrap(),
            encode_key(&Key::F64(OrderedFloat(0.0))).unwrap()
        );
    }

    #[test]
    fn no_key_for_null_and_no_decoding_of_wrong_widths() {
        assert!(encode_key(&Key::None).is_err());
        assert!(decode_key(Some(&DataType::Int), &[1, 2, 3]).is_err());
        assert!(decode_key(Some(&DataType::Map), &[]).is_err());
        assert!(decode_key(None, &[0; 7]).is_err());
    }

    #[test]
    fn rows_round_trip_and_keep_their_size() {
        let mut map = BTreeMap::new();
        map.insert(
            "a".to_owned(),
            Value::List(vec![Value::I64(1), Value::Null]),
        );
        let row = vec![
            Value::Null,
            Value::Bool(true),
            Value::I8(-3),
            Value::I64(-1),
            Value::U128(u128::MAX),
            Value::F32(1.5),
            Value::F64(-0.25),
            Value::Decimal("-123.4500".parse().unwrap()),
            Value::Str("héllo".to_owned()),
            Value::Bytea(vec![0, 255]),
            Value::Inet("::1".parse().unwrap()),
            Value::Date("2024-02-29".parse().unwrap()),
            Value::Timestamp("2024-02-29T12:34:56.789".parse().unwrap()),
            Value::Time("23:59:59.5".parse().unwrap()),
            Value::Interval(Interval::Month(-14)),
            Value::Interval(Interval::Microsecond(1 << 40)),
            Value::Uuid(7),
            Value::Map(map),
            Value::Point(Point { x: 1.0, y: -2.0 }),
        ];
        let bytes = encode_row(&row);
        assert_eq!(decode_row(&bytes).unwrap(), row);
        // Same types, other numbers: same size.
        let a = encode_row(&[Value::I64(1), Value::F64(2.0), Value::Str("abc".into())]);
        let b = encode_row(&[Value::I64(-9), Value::F64(1e300), Value::Str("xyz".into())]);
        assert_eq!(a.len(), b.len());
        // Truncated or padded bytes are errors, not panics.
        for n in 0..bytes.len() {
            assert!(decode_row(&bytes[..n]).is_err());
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode_row(&longer).is_err());
    }

    proptest! {
        #[test]
        fn integer_keys_sort_as_bytes(a: i64, b: i64) {
            let (x, y) = (round(&Key::I64(a), &DataType::Int), round(&Key::I64(b), &DataType::Int));
            prop_assert_eq!(x.cmp(&y), a.cmp(&b));
        }

        #[test]
        fn float_keys_sort_as_bytes(a: f64, b: f64) {
            prop_assume!(!a.is_nan() && !b.is_nan() && a != 0.0 && b != 0.0);
            let (ka, kb) = (Key::F64(OrderedFloat(a)), Key::F64(OrderedFloat(b)));
            let (x, y) = (round(&ka, &DataType::Float), round(&kb, &DataType::Float));
            prop_assert_eq!(x.cmp(&y), ka.cmp(&kb));
        }

        #[test]
        fn decimal_keys_sort_as_bytes(a: i64, sa in 0u32..12, b: i64, sb in 0u32..12) {
            let da = Decimal::new(a, sa).normalize();
            let db = Decimal::new(b, sb).normalize();
            let (ka, kb) = (Key::Decimal(da), Key::Decimal(db));
            let (x, y) = (round(&ka, &DataType::Decimal), round(&kb, &DataType::Decimal));
            prop_assert_eq!(x.cmp(&y), da.cmp(&db));
        }

        #[test]
        fn text_keys_sort_as_bytes(a: String, b: String) {
            let (ka, kb) = (Key::Str(a.clone()), Key::Str(b.clone()));
            let (x, y) = (round(&ka, &DataType::Text), round(&kb, &DataType::Text));
            prop_assert_eq!(x.cmp(&y), a.cmp(&b));
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes: Vec<u8>) {
            let _ = decode_row(&bytes);
            let _ = decode_key(Some(&DataType::Timestamp), &bytes);
            let _ = decode_key(Some(&DataType::Decimal), &bytes);
        }
    }
}
