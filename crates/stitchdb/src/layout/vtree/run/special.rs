//! The special section of a specialized block (`format`'s writer explains what it holds):
//! the block versions, and the decoder a parsed block and a repair read it with.

use crate::codec::Reader;
use crate::layout::{BlockFormat, CodingSpec, FormatSpec, STATE_CODES};
use std::borrow::Cow;
use std::cmp::Ordering;

/// Block versions of the specialized formats (after the linear versions 1 to 4).
pub const FIXED_VERSION: u8 = 5;
pub const ARRAY_VERSION: u8 = 6;
pub const UNIQUE_VERSION: u8 = 7;
/// A specialized block with transforming layers: a byte after the version names its format
/// and layers ([`Layers`]); versions 5 to 7 are blocks without any.
pub const LAYERED_VERSION: u8 = 8;
/// A `fixed` block whose special keys are all one width: version 8's layers byte (its format
/// `fixed`), and the section's keys as one array of their rests after the prefix all share,
/// then its values (`fixed_keys` in `format` says when it is written).
pub const FIXED_KEYS_VERSION: u8 = 10;

/// Whether a payload's first byte names a specialized block.
pub fn is_special(version: u8) -> bool {
    matches!(
        version,
        FIXED_VERSION | ARRAY_VERSION | UNIQUE_VERSION | LAYERED_VERSION | FIXED_KEYS_VERSION
    )
}

/// The format of a specialized block's special section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Base {
    Fixed,
    Array,
    Unique,
    /// Keys only (`empty`): every value is empty.
    Empty,
}

/// How a special section's stored values read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coding {
    /// As stored.
    Raw,
    /// `small-integer`: a little-endian integer of the value size's bytes, read as a 4-byte
    /// little-endian `u32`.
    Int,
    /// `state-dictionary`: one byte, an index into [`STATE_CODES`].
    State,
}

/// What a specialized block holds: its format and the transforming layers over it. A block
/// names them (its version, and a version 8 block its layers byte), so it reads without the
/// table's layout (a repair, a stitched block).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layers {
    pub base: Base,
    pub coding: Coding,
    /// `delta-integer`: the section's first value is its landmark, stored whole in front of
    /// the entries; each later one is stored (through the coding) as the zigzag-coded
    /// difference from the one before.
    pub delta: bool,
    /// `existential`: tombstones in the special section too, keys alone, in a part of
    /// their own in front of the values.
    pub existential: bool,
}

impl Layers {
    /// The layers blocks of `format` are written with (`format.format` is not `linear`).
    pub fn of(format: BlockFormat) -> Layers {
        let base = match format.format {
            FormatSpec::Fixed { .. } => Base::Fixed,
            FormatSpec::Array { .. } => Base::Array,
            FormatSpec::Empty => Base::Empty,
            _ => Base::Unique,
        };
        let coding = match format.coding {
            None => Coding::Raw,
            Some(CodingSpec::SmallInteger { .. }) => Coding::Int,
            Some(CodingSpec::StateDictionary) => Coding::State,
        };
        Layers {
            base,
            coding,
            delta: format.delta,
            existential: format.existential,
        }
    }

    /// The block's version byte, and for version 8 its layers byte: bits 0-1 the format
    /// (0 fixed, 1 array, 2 unique-string, 3 empty), bits 2-3 the coding (0 none, 1 small-integer, 2
    /// state-dictionary).
    pub fn encode(&self) -> (u8, Option<u8>) {
        let plain = self.coding == Coding::Raw && !self.delta && !self.existential;
        let base = match self.base {
            Base::Fixed if plain => return (FIXED_VERSION, None),
            Base::Array if plain => return (ARRAY_VERSION, None),
            Base::Unique if plain => return (UNIQUE_VERSION, None),
            Base::Fixed => 0,
            Base::Array => 1,
            Base::Unique => 2,
            Base::Empty => 3,
        };
        let coding = match self.coding {
            Coding::Raw => 0,
            Coding::Int => 1,
            Coding::State => 2,
        };
        (
            LAYERED_VERSION,
            Some(base | coding << 2 | u8::from(self.delta) << 4 | u8::from(self.existential) << 5),
        )
    }

    /// The layers of a block of `version`, reading its layers byte from `r` (version 8).
    fn read(version: u8, r: &mut Reader) -> Result<Layers, String> {
        let plain = |base| Layers {
            base,
            coding: Coding::Raw,
            delta: false,
            existential: false,
        };
        match version {
            FIXED_VERSION => return Ok(plain(Base::Fixed)),
            ARRAY_VERSION => return Ok(plain(Base::Array)),
            UNIQUE_VERSION => return Ok(plain(Base::Unique)),
            LAYERED_VERSION => {}
            v => return Err(format!("block version {v} is not a specialized format")),
        }
        let byte = r.u8()?;
        let base = match byte & 3 {
            0 => Base::Fixed,
            1 => Base::Array,
            2 => Base::Unique,
            _ => Base::Empty,
        };
        let coding = match (byte >> 2 & 3, base) {
            (0, _) => Coding::Raw,
            (1, Base::Fixed | Base::Array) => Coding::Int,
            (2, Base::Fixed | Base::Array) => Coding::State,
            _ => {
                return Err(format!(
                    "layers byte {byte:#04x}: unknown coding for its format"
                ))
            }
        };
        let delta = byte & 1 << 4 != 0;
        if delta && (matches!(base, Base::Unique | Base::Empty) || coding == Coding::State) {
            return Err(format!(
                "layers byte {byte:#04x}: delta-integer over its format"
            ));
        }
        if byte >> 6 != 0 {
            return Err(format!("layers byte {byte:#04x}: unknown layers"));
        }
        Ok(Layers {
            base,
            coding,
            delta,
            existential: byte & 1 << 5 != 0,
        })
    }

    /// The value size `S` of a `fixed` or `array` section, read and checked against the
    /// coding: a `small-integer` stores 1 to 3 bytes.
    fn value_size(&self, r: &mut Reader) -> Result<usize, String> {
        let size = value_size(r)?;
        match self.coding {
            Coding::Int if size > 3 => Err(format!("small-integer of {size} bytes")),
            Coding::State if size != 1 => Err(format!("state-dictionary of {size} bytes")),
            Coding::Raw if self.delta && size != 4 => Err(format!("deltas of {size} bytes")),
            _ => Ok(size),
        }
    }

    /// A `delta-integer` section's landmark (its first value), read when it has entries.
    fn landmark(&self, r: &mut Reader, count: u64) -> Result<u32, String> {
        match self.delta && count > 0 {
            true => Ok(le_int(r.take(4)?)),
            false => Ok(0),
        }
    }

    /// The value of the section's next entry, `r` at its stored bytes: the stored `size`
    /// bytes read through the coding; under `delta-integer` `prev` (the value before, at
    /// first the landmark) moved by the stored delta, but for the first entry, which stores
    /// none.
    fn next_value<'a>(
        &self,
        r: &mut Reader<'a>,
        size: usize,
        first: bool,
        prev: &mut u32,
    ) -> Result<Cow<'a, [u8]>, String> {
        if !self.delta {
            return self.value(r.take(size)?);
        }
        if !first {
            *prev = prev.wrapping_add(unzigzag(le_int(r.take(size)?)));
        }
        Ok(Cow::Owned(prev.to_le_bytes().to_vec()))
    }

    /// The value an entry whose section stores `stored` reads as: the stored bytes
    /// themselves (borrowed), or what the coding makes of them (owned).
    fn value<'a>(&self, stored: &'a [u8]) -> Result<Cow<'a, [u8]>, String> {
        Ok(match self.coding {
            Coding::Raw => Cow::Borrowed(stored),
            Coding::Int => Cow::Owned(le_int(stored).to_le_bytes().to_vec()),
            Coding::State => {
                let code = stored
                    .first()
                    .and_then(|&i| STATE_CODES.get(usize::from(i)));
                let code = code.ok_or_else(|| format!("state index {stored:?} out of range"))?;
                Cow::Owned(code.to_vec())
            }
        })
    }
}

/// A difference between two `u32`s (mod 2^32) as a small number when it is small either
/// way: 0, -1, 1, -2 ... are 0, 1, 2, 3 ...
pub fn zigzag(d: u32) -> u32 {
    d << 1 ^ ((d as i32) >> 31) as u32
}

/// The difference [`zigzag`] coded.
pub fn unzigzag(z: u32) -> u32 {
    z >> 1 ^ 0u32.wrapping_sub(z & 1)
}

/// The little-endian integer of 1 to 4 bytes `b`.
pub fn le_int(b: &[u8]) -> u32 {
    b.iter().rev().fold(0, |n, &byte| n << 8 | u32::from(byte))
}

/// An array block's slots (present or holes) at most: a key further from the block's first
/// than this starts a new block, so a gap in the keys costs at most this many bitmap bits.
pub const ARRAY_SLOTS: u64 = 1 << 16;

/// An `array` key: a big-endian u64.
pub fn array_key(key: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(key.try_into().ok()?))
}

/// What a specialized block's first bytes say.
struct Header {
    layers: Layers,
    /// Version 10: the keys of one width ([`FixedKeys`]).
    fixed_keys: bool,
    floor: u64,
    count: u64,
    /// Where the special section ends (and the versions section starts).
    section_end: usize,
}

/// Reads the header of the block `r` is at, up to the special section.
fn header(r: &mut Reader) -> Result<Header, String> {
    let version = r.u8()?;
    let fixed_keys = version == FIXED_KEYS_VERSION;
    let layers = match fixed_keys {
        true => Layers::read(LAYERED_VERSION, r)?,
        false => Layers::read(version, r)?,
    };
    if fixed_keys && layers.base != Base::Fixed {
        return Err("keys of one width in a block not of the fixed format".into());
    }
    let floor = r.varint()?;
    let count = r.varint()?;
    let len = r.len()?;
    Ok(Header {
        layers,
        fixed_keys,
        floor,
        count,
        section_end: r.pos() + len,
    })
}

/// A `fixed` or `array` section's value size.
fn value_size(r: &mut Reader) -> Result<usize, String> {
    match r.varint()? {
        n @ 1..=4096 => Ok(n as usize),
        n => Err(format!("value size {n} out of range")),
    }
}

/// A `unique-string` section's count of distinct values.
fn dictionary_len(r: &mut Reader) -> Result<u64, String> {
    match r.len()? as u64 {
        n @ 0..=65_536 => Ok(n),
        n => Err(format!("dictionary of {n} values out of range")),
    }
}

/// A `unique-string` entry's index into the dictionary of `distinct` values.
fn dictionary_index(r: &mut Reader, distinct: u64) -> Result<usize, String> {
    Ok(match distinct > 256 {
        true => usize::from(u16::from_le_bytes([r.u8()?, r.u8()?])),
        false => usize::from(r.u8()?),
    })
}

/// An `array` section's slots: the first key, how many, and which hold an entry (`None`:
/// every one).
struct ArraySlots<'a> {
    base: u64,
    slots: u64,
    bitmap: Option<&'a [u8]>,
}

impl<'a> ArraySlots<'a> {
    /// Reads the slots of a section of `count` entries (at least one), after its value size.
    fn read(r: &mut Reader<'a>, count: u64) -> Result<ArraySlots<'a>, String> {
        let base = u64::from_be_bytes(r.take(8)?.try_into().map_err(|_| "base key")?);
        let slots = r.varint()?;
        if slots < count || slots > ARRAY_SLOTS || base.checked_add(slots - 1).is_none() {
            return Err(format!("{slots} slots for {count} entries"));
        }
        let bitmap = match r.u8()? {
            0 if slots == count => None,
            1 => Some(r.take(slots.div_ceil(8) as usize)?),
            f => return Err(format!("array flag {f} does not fit {slots} slots")),
        };
        Ok(ArraySlots {
            base,
            slots,
            bitmap,
        })
    }

    /// The key of the last slot.
    fn last(&self) -> u64 {
        self.base + (self.slots - 1)
    }

    fn holds(&self, slot: u64) -> bool {
        self.bitmap
            .is_none_or(|b| b[(slot / 8) as usize] & (1 << (slot % 8)) != 0)
    }

    /// The slots that hold an entry, in order.
    fn present(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.slots).filter(|&slot| self.holds(slot))
    }

    /// The entry (its place among the section's) of key number `k`, if a slot holds it.
    fn entry(&self, k: u64) -> Option<u64> {
        let slot = k.checked_sub(self.base).filter(|&s| s < self.slots)?;
        if !self.holds(slot) {
            return None;
        }
        let Some(bitmap) = self.bitmap else {
            return Some(slot);
        };
        let byte = (slot / 8) as usize;
        let before: u32 = bitmap[..byte].iter().map(|b| b.count_ones()).sum();
        let part = bitmap[byte] & ((1u8 << (slot % 8)) - 1);
        Some(u64::from(before + part.count_ones()))
    }
}

/// A version 10 section's keys: the prefix every key starts with, then each key's rest, all
/// `width` bytes, back to back in key order.
struct FixedKeys<'a> {
    prefix: &'a [u8],
    width: usize,
    rests: &'a [u8],
    count: usize,
}

impl<'a> FixedKeys<'a> {
    /// Reads the keys of a section of `count` entries (none stored if it has none).
    fn read(r: &mut Reader<'a>, count: u64) -> Result<FixedKeys<'a>, String> {
        let count = usize::try_from(count).map_err(|_| "entry count out of range")?;
        if count == 0 {
            return Ok(FixedKeys {
                prefix: &[],
                width: 0,
                rests: &[],
                count,
            });
        }
        let prefix = r.bytes()?;
        let width = r.len()?;
        let len = width
            .checked_mul(count)
            .ok_or_else(|| format!("{count} keys of {width} bytes"))?;
        Ok(FixedKeys {
            prefix,
            width,
            rests: r.take(len)?,
            count,
        })
    }

    fn rest(&self, i: usize) -> &'a [u8] {
        &self.rests[i * self.width..(i + 1) * self.width]
    }

    /// Where `key` is among the keys: `Ok` its entry, `Err` how many keys are below it.
    fn search(&self, key: &[u8]) -> Result<usize, usize> {
        let p = self.prefix.len();
        match key[..p.min(key.len())].cmp(self.prefix) {
            Ordering::Less => Err(0),
            // A proper prefix of the prefix sorts before every key.
            Ordering::Equal if key.len() < p => Err(0),
            Ordering::Equal => {
                let rest = &key[p..];
                let below = self.partition(|r| r < rest);
                match below < self.count && self.rest(below) == rest {
                    true => Ok(below),
                    false => Err(below),
                }
            }
            Ordering::Greater => Err(self.count),
        }
    }

    /// How many rests `below` holds of, from the first (a binary search: they ascend).
    fn partition(&self, below: impl Fn(&[u8]) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match below(self.rest(mid)) {
                true => lo = mid + 1,
                false => hi = mid,
            }
        }
        lo
    }
}

/// The value of a `fixed` or `array` section's entry `i`, `r` at its first entry's stored
/// value: under `delta-integer` the landmark moved by every delta up to the entry's, else
/// the entry's stored bytes read through the coding.
fn nth_value<'a>(
    layers: &Layers,
    r: &mut Reader<'a>,
    size: usize,
    landmark: u32,
    i: u64,
) -> Result<Cow<'a, [u8]>, String> {
    if layers.delta {
        let mut value = landmark;
        for j in 0..=i {
            layers.next_value(r, size, j == 0, &mut value)?;
        }
        return Ok(Cow::Owned(value.to_le_bytes().to_vec()));
    }
    let skip = usize::try_from(i)
        .ok()
        .and_then(|i| i.checked_mul(size))
        .ok_or_else(|| format!("entry {i} out of range"))?;
    r.take(skip)?;
    layers.value(r.take(size)?)
}

/// A special entry: where its key lies in the section's keys, and its value (`None`: a
/// tombstone of `existential`).
pub type SpecialEntry = ((u32, u32), Option<(u32, u32)>);

/// A specialized block's special section, decoded: each entry's key (whole) and where its
/// value lies, and where the versions section starts. A value a coding makes is not in the
/// payload: it is in `values`, which a parsed block appends to its bytes, so its place counts
/// on from the end of `data`.
pub struct SpecialSection {
    pub floor: u64,
    pub keys: Vec<u8>,
    pub entries: Vec<SpecialEntry>,
    pub values: Vec<u8>,
    pub versions_at: usize,
    /// An `array` section without holes or tombstones: its first key, the keys after it
    /// each one more.
    pub dense_from: Option<u64>,
    /// A `fixed` section without tombstones whose keys are all this many bytes.
    pub key_width: Option<usize>,
}

/// Decodes the special section of the payload at `start` in `data` (its version byte
/// first), checking every length, order and index against the bytes there.
pub fn decode_special(data: &[u8], start: usize) -> Result<SpecialSection, String> {
    let mut r = Reader::new(data);
    r.take(start)?;
    let Header {
        layers,
        fixed_keys,
        floor,
        count,
        section_end,
    } = header(&mut r)?;
    let payload_len = (data.len() - start) as u64;
    if count > payload_len {
        return Err(format!("special entry count {count} out of range"));
    }
    let mut s = SpecialSection {
        floor,
        keys: Vec::new(),
        entries: Vec::with_capacity(count as usize),
        values: Vec::new(),
        versions_at: 0,
        dense_from: None,
        key_width: None,
    };
    let gone = match layers.existential {
        true => s.gone(&mut r, layers.base, payload_len)?,
        false => Vec::new(),
    };
    match layers.base {
        Base::Fixed if fixed_keys => {
            let size = layers.value_size(&mut r)?;
            let mut prev = layers.landmark(&mut r, count)?;
            let keys = FixedKeys::read(&mut r, count)?;
            for i in 0..keys.count {
                if i > 0 && keys.rest(i) <= keys.rest(i - 1) {
                    return Err(format!(
                        "entry {i}: out of order (keys ascending, one each)"
                    ));
                }
                let at = s.keys.len() as u32;
                s.keys.extend_from_slice(keys.prefix);
                s.keys.extend_from_slice(keys.rest(i));
                let key = (at, s.keys.len() as u32);
                let v = r.pos();
                let value = layers
                    .next_value(&mut r, size, i == 0, &mut prev)
                    .map_err(|e| format!("entry {i}: {e}"))?;
                let value = s.place(data.len(), v, value);
                s.entries.push((key, Some(value)));
            }
            s.key_width = (gone.is_empty() && count > 0).then_some(keys.prefix.len() + keys.width);
        }
        Base::Fixed => {
            let size = layers.value_size(&mut r)?;
            let mut prev = layers.landmark(&mut r, count)?;
            for i in 0..count {
                let key = s.push_key(&mut r).map_err(|e| format!("entry {i}: {e}"))?;
                let at = r.pos();
                let value = layers
                    .next_value(&mut r, size, i == 0, &mut prev)
                    .map_err(|e| format!("entry {i}: {e}"))?;
                let value = s.place(data.len(), at, value);
                s.entries.push((key, Some(value)));
            }
            let width = |&((a, b), _): &SpecialEntry| (b - a) as usize;
            let first = s.entries.first().map(width);
            if gone.is_empty() && s.entries.iter().all(|e| Some(width(e)) == first) {
                s.key_width = first;
            }
        }
        Base::Array => {
            let size = layers.value_size(&mut r)?;
            let mut prev = layers.landmark(&mut r, count)?;
            if count > 0 {
                let slots = ArraySlots::read(&mut r, count)?;
                let present: Vec<u64> = slots.present().collect();
                let ends = (present.first(), present.last());
                if present.len() as u64 != count || ends != (Some(&0), Some(&(slots.slots - 1))) {
                    return Err("array bitmap does not match its entry count".into());
                }
                // Tombstones of `existential` would fall between the entries.
                s.dense_from = (slots.slots == count && gone.is_empty()).then_some(slots.base);
                for (i, slot) in present.into_iter().enumerate() {
                    let at = s.keys.len() as u32;
                    s.keys.extend_from_slice(&(slots.base + slot).to_be_bytes());
                    let v = r.pos();
                    let value = layers.next_value(&mut r, size, i == 0, &mut prev)?;
                    let value = s.place(data.len(), v, value);
                    s.entries.push(((at, at + 8), Some(value)));
                }
            }
        }
        Base::Empty => {
            for i in 0..count {
                let key = s.push_key(&mut r).map_err(|e| format!("entry {i}: {e}"))?;
                s.entries.push((key, Some((0, 0))));
            }
        }
        Base::Unique => {
            let distinct = dictionary_len(&mut r)?;
            let mut dict = Vec::with_capacity(distinct as usize);
            for _ in 0..distinct {
                let len = r.len()?;
                let at = r.pos();
                r.take(len)?;
                dict.push((at as u32, (at + len) as u32));
            }
            for i in 0..count {
                let key = s.push_key(&mut r).map_err(|e| format!("entry {i}: {e}"))?;
                let index = dictionary_index(&mut r, distinct)?;
                let value = *dict
                    .get(index)
                    .ok_or_else(|| format!("entry {i}: value {index} not in the dictionary"))?;
                s.entries.push((key, Some(value)));
            }
        }
    }
    if !gone.is_empty() {
        s.entries = merge_gone(&s.keys, std::mem::take(&mut s.entries), gone)?;
    }
    if r.pos() != section_end {
        return Err(format!(
            "special section ends at byte {}, its entries at {}",
            section_end,
            r.pos()
        ));
    }
    s.versions_at = section_end;
    Ok(s)
}

impl SpecialSection {
    /// An `existential` section's tombstones (their part comes first): their keys, read
    /// into `keys`, in order.
    fn gone(
        &mut self,
        r: &mut Reader,
        base: Base,
        payload_len: u64,
    ) -> Result<Vec<(u32, u32)>, String> {
        let count = r.varint()?;
        // A bit each in an array's bitmap, at least two bytes each in a key list.
        let most = match base {
            Base::Array => ARRAY_SLOTS,
            _ => payload_len,
        };
        if count > most {
            return Err(format!("tombstone count {count} out of range"));
        }
        let mut gone = Vec::with_capacity(count as usize);
        if count == 0 {
            return Ok(gone);
        }
        if base == Base::Array {
            let slots = ArraySlots::read(r, count)?;
            let present: Vec<u64> = slots.present().collect();
            let ends = (present.first(), present.last());
            if present.len() as u64 != count || ends != (Some(&0), Some(&(slots.slots - 1))) {
                return Err("tombstone bitmap does not match its count".into());
            }
            for slot in present {
                let at = self.keys.len() as u32;
                self.keys
                    .extend_from_slice(&(slots.base + slot).to_be_bytes());
                gone.push((at, at + 8));
            }
            return Ok(gone);
        }
        for i in 0..count {
            let key = self
                .push_key_after(r, gone.last().copied())
                .map_err(|e| format!("tombstone {i}: {e}"))?;
            gone.push(key);
        }
        Ok(gone)
    }

    /// Where an entry's value lies: at `at` in the payload when stored as it reads, else
    /// made into `values` (which follows the `data_len` bytes of the payload's buffer).
    fn place(&mut self, data_len: usize, at: usize, value: Cow<[u8]>) -> (u32, u32) {
        match value {
            Cow::Borrowed(v) => (at as u32, (at + v.len()) as u32),
            Cow::Owned(v) => {
                let start = data_len + self.values.len();
                self.values.extend_from_slice(&v);
                (start as u32, (start + v.len()) as u32)
            }
        }
    }

    /// Reads a key sharing a prefix with the previous one, which it must follow.
    fn push_key(&mut self, r: &mut Reader) -> Result<(u32, u32), String> {
        let prev = self.entries.last().map(|&(k, _)| k);
        self.push_key_after(r, prev)
    }

    /// Reads a key sharing a prefix with `prev`, which it must follow.
    fn push_key_after(
        &mut self,
        r: &mut Reader,
        prev: Option<(u32, u32)>,
    ) -> Result<(u32, u32), String> {
        let (shared, rest) = (r.varint()?, r.bytes()?);
        let prev_len = prev.map_or(0, |(a, b)| (b - a) as u64);
        if shared > prev_len {
            return Err(format!("shares {shared} bytes with a shorter key"));
        }
        let start = self.keys.len();
        if let Some((a, _)) = prev {
            let a = a as usize;
            if rest <= &self.keys[a + shared as usize..start] {
                return Err("out of order (keys ascending, one version each)".into());
            }
            self.keys.extend_from_within(a..a + shared as usize);
        }
        self.keys.extend_from_slice(rest);
        Ok((start as u32, self.keys.len() as u32))
    }
}

/// The special section's values and tombstones (`gone`), each in key order, as one list in
/// key order: a key in both is damage (one version per key).
fn merge_gone(
    keys: &[u8],
    values: Vec<SpecialEntry>,
    gone: Vec<(u32, u32)>,
) -> Result<Vec<SpecialEntry>, String> {
    let key = |(a, b): (u32, u32)| &keys[a as usize..b as usize];
    let mut out = Vec::with_capacity(values.len() + gone.len());
    let mut values = values.into_iter().peekable();
    for g in gone {
        while let Some(v) = values.next_if(|v| key(v.0) < key(g)) {
            out.push(v);
        }
        if values.peek().is_some_and(|v| key(v.0) == key(g)) {
            return Err("a key both present and gone in the special section".into());
        }
        out.push((g, None));
    }
    out.extend(values);
    Ok(out)
}

/// What the special section of a block holds of one key.
pub struct SpecialLookup<'a> {
    /// Its version there: the block's floor and the value (`None`: a tombstone).
    pub version: Option<(u64, Option<Cow<'a, [u8]>>)>,
    /// A larger key is in the special section.
    pub larger: bool,
    /// Where the versions section starts.
    pub versions_at: usize,
}

/// Looks `key` up in the special section of the payload at `start` in `data` without
/// decoding the whole block: `array` by arithmetic, `fixed` and `unique-string` entry by entry
/// up to the first key past it (checking what it reads as decoding does).
pub fn find<'a>(data: &'a [u8], start: usize, key: &[u8]) -> Result<SpecialLookup<'a>, String> {
    let mut r = Reader::new(data);
    r.take(start)?;
    let h = header(&mut r)?;
    let mut lookup = SpecialLookup {
        version: None,
        larger: false,
        versions_at: h.section_end,
    };
    // The special section alone: nothing read past it.
    let section = &data[..h.section_end];
    let at = r.pos();
    let mut r = Reader::new(section);
    r.take(at)?;
    let layers = h.layers;
    // A key gone is not among the values, which still say whether a larger key is.
    if layers.existential && find_gone(&mut r, layers.base, key, &mut lookup)? {
        lookup.version = Some((h.floor, None));
    }
    match layers.base {
        Base::Array => {
            let size = layers.value_size(&mut r)?;
            let landmark = layers.landmark(&mut r, h.count)?;
            if h.count == 0 {
                return Ok(lookup);
            }
            let slots = ArraySlots::read(&mut r, h.count)?;
            let Some(k) = array_key(key) else {
                // Not an 8-byte key: it sorts among the block's by its bytes.
                lookup.larger |= key < slots.last().to_be_bytes().as_slice();
                return Ok(lookup);
            };
            lookup.larger |= k < slots.last();
            if let Some(i) = slots.entry(k).filter(|&i| i < h.count) {
                let value = nth_value(&layers, &mut r, size, landmark, i)?;
                lookup.version = Some((h.floor, Some(value)));
            }
        }
        Base::Fixed if h.fixed_keys => {
            let size = layers.value_size(&mut r)?;
            let landmark = layers.landmark(&mut r, h.count)?;
            let keys = FixedKeys::read(&mut r, h.count)?;
            let (i, found) = match keys.search(key) {
                Ok(i) => (i, true),
                Err(i) => (i, false),
            };
            lookup.larger |= i + usize::from(found) < keys.count;
            if found {
                let value = nth_value(&layers, &mut r, size, landmark, i as u64)?;
                lookup.version = Some((h.floor, Some(value)));
            }
        }
        Base::Fixed | Base::Unique | Base::Empty => {
            let fixed = layers.base == Base::Fixed;
            let (value_size, dict_at, distinct) = match layers.base {
                Base::Fixed => (layers.value_size(&mut r)?, 0, 0),
                Base::Empty => (0, 0, 0),
                _ => {
                    let distinct = dictionary_len(&mut r)?;
                    let at = r.pos();
                    for _ in 0..distinct {
                        r.bytes()?;
                    }
                    (0, at, distinct)
                }
            };
            let mut prev = match fixed {
                true => layers.landmark(&mut r, h.count)?,
                false => 0,
            };
            let mut current: Vec<u8> = Vec::with_capacity(key.len() + 8);
            for i in 0..h.count {
                let (shared, rest) = (r.varint()?, r.bytes()?);
                if shared > current.len() as u64 {
                    return Err(format!("shares {shared} bytes with a shorter key"));
                }
                current.truncate(shared as usize);
                current.extend_from_slice(rest);
                let value = match (fixed, layers.delta) {
                    (true, false) => Value::At(r.take(value_size)?),
                    (true, true) => {
                        if i > 0 {
                            prev = prev.wrapping_add(unzigzag(le_int(r.take(value_size)?)));
                        }
                        Value::Int(prev)
                    }
                    (false, _) if layers.base == Base::Empty => Value::At(&[]),
                    (false, _) => Value::Index(dictionary_index(&mut r, distinct)?),
                };
                match current.as_slice().cmp(key) {
                    std::cmp::Ordering::Less => continue,
                    std::cmp::Ordering::Greater => {
                        lookup.larger = true;
                        break;
                    }
                    std::cmp::Ordering::Equal => {}
                }
                let value = match value {
                    Value::At(v) => layers.value(v)?,
                    Value::Int(n) => Cow::Owned(n.to_le_bytes().to_vec()),
                    Value::Index(i) => {
                        let mut d = Reader::new(section);
                        d.take(dict_at)?;
                        if i as u64 >= distinct {
                            return Err(format!("value {i} not in the dictionary"));
                        }
                        for _ in 0..i {
                            d.bytes()?;
                        }
                        Cow::Borrowed(d.bytes()?)
                    }
                };
                lookup.version = Some((h.floor, Some(value)));
                lookup.larger |= i + 1 < h.count;
                break;
            }
        }
    }
    Ok(lookup)
}

/// Looks `key` up among an `existential` section's tombstones, `r` at their part (and left
/// past it): whether one is `key`'s. Sets `lookup.larger` if a larger key is among them.
fn find_gone(
    r: &mut Reader,
    base: Base,
    key: &[u8],
    lookup: &mut SpecialLookup,
) -> Result<bool, String> {
    let count = r.varint()?;
    if count == 0 {
        return Ok(false);
    }
    if base == Base::Array {
        let slots = ArraySlots::read(r, count)?;
        let found = match array_key(key) {
            Some(k) => {
                lookup.larger = k < slots.last();
                slots.entry(k).is_some()
            }
            None => {
                lookup.larger = key < slots.last().to_be_bytes().as_slice();
                false
            }
        };
        return Ok(found);
    }
    let mut found = false;
    let mut current: Vec<u8> = Vec::with_capacity(key.len() + 8);
    for _ in 0..count {
        // Read to the end of the part: the values' part follows it.
        let (shared, rest) = (r.varint()?, r.bytes()?);
        if shared > current.len() as u64 {
            return Err(format!("shares {shared} bytes with a shorter key"));
        }
        current.truncate(shared as usize);
        current.extend_from_slice(rest);
        match current.as_slice().cmp(key) {
            std::cmp::Ordering::Equal => found = true,
            std::cmp::Ordering::Greater => lookup.larger = true,
            std::cmp::Ordering::Less => {}
        }
    }
    Ok(found)
}

/// An entry's value as a lookup meets it: its stored bytes, its integer (a running sum of
/// deltas), or its dictionary index.
enum Value<'a> {
    At(&'a [u8]),
    Int(u32),
    Index(usize),
}
