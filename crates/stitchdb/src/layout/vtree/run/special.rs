//! The special section of a specialized block (`format`'s writer explains what it holds):
//! the block versions, and the decoder a parsed block and a repair read it with.

use crate::codec::Reader;

/// Block versions of the specialized formats (after the linear versions 1 to 4).
pub const FIXED_VERSION: u8 = 5;
pub const ARRAY_VERSION: u8 = 6;
pub const UNIQUE_VERSION: u8 = 7;

/// Whether a payload's first byte names a specialized block.
pub fn is_special(version: u8) -> bool {
    matches!(version, FIXED_VERSION | ARRAY_VERSION | UNIQUE_VERSION)
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
    version: u8,
    floor: u64,
    count: u64,
    /// Where the special section ends (and the versions section starts).
    section_end: usize,
}

/// Reads the header of the block `r` is at, up to the special section.
fn header(r: &mut Reader) -> Result<Header, String> {
    let version = r.u8()?;
    let floor = r.varint()?;
    let count = r.varint()?;
    let len = r.len()?;
    Ok(Header {
        version,
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

/// A specialized block's special section, decoded: each entry's key (whole) and where its
/// value lies in the payload; and where the versions section starts.
pub struct SpecialSection {
    pub floor: u64,
    pub keys: Vec<u8>,
    pub entries: Vec<((u32, u32), (u32, u32))>,
    pub versions_at: usize,
    /// An `array` section without holes: its first key, the keys after it each one more.
    pub dense_from: Option<u64>,
}

/// Decodes the special section of the payload at `start` in `data` (its version byte
/// first), checking every length, order and index against the bytes there.
pub fn decode_special(data: &[u8], start: usize) -> Result<SpecialSection, String> {
    let mut r = Reader::new(data);
    r.take(start)?;
    let Header {
        version,
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
        versions_at: 0,
        dense_from: None,
    };
    match version {
        FIXED_VERSION => {
            let size = value_size(&mut r)?;
            for i in 0..count {
                let key = s.push_key(&mut r).map_err(|e| format!("entry {i}: {e}"))?;
                let at = r.pos();
                r.take(size).map_err(|e| format!("entry {i}: {e}"))?;
                s.entries.push((key, (at as u32, (at + size) as u32)));
            }
        }
        ARRAY_VERSION => {
            let size = value_size(&mut r)?;
            if count > 0 {
                let slots = ArraySlots::read(&mut r, count)?;
                let present: Vec<u64> = slots.present().collect();
                let ends = (present.first(), present.last());
                if present.len() as u64 != count || ends != (Some(&0), Some(&(slots.slots - 1))) {
                    return Err("array bitmap does not match its entry count".into());
                }
                s.dense_from = (slots.slots == count).then_some(slots.base);
                for slot in present {
                    let at = s.keys.len() as u32;
                    s.keys.extend_from_slice(&(slots.base + slot).to_be_bytes());
                    let v = r.pos();
                    r.take(size)?;
                    s.entries
                        .push(((at, at + 8), (v as u32, (v + size) as u32)));
                }
            }
        }
        UNIQUE_VERSION => {
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
                s.entries.push((key, value));
            }
        }
        v => return Err(format!("block version {v} is not a specialized format")),
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
    /// Reads a key sharing a prefix with the previous one, which it must follow.
    fn push_key(&mut self, r: &mut Reader) -> Result<(u32, u32), String> {
        let (shared, rest) = (r.varint()?, r.bytes()?);
        let prev = self.entries.last().map(|&(k, _)| k);
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

/// What the special section of a block holds of one key.
pub struct SpecialLookup<'a> {
    /// Its version there: the block's floor and the value.
    pub version: Option<(u64, &'a [u8])>,
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
    match h.version {
        ARRAY_VERSION => {
            let size = value_size(&mut r)?;
            if h.count == 0 {
                return Ok(lookup);
            }
            let slots = ArraySlots::read(&mut r, h.count)?;
            let Some(k) = array_key(key) else {
                // Not an 8-byte key: it sorts among the block's by its bytes.
                lookup.larger = key < slots.last().to_be_bytes().as_slice();
                return Ok(lookup);
            };
            lookup.larger = k < slots.last();
            if let Some(i) = slots.entry(k).filter(|&i| i < h.count) {
                r.take(i as usize * size)?;
                lookup.version = Some((h.floor, r.take(size)?));
            }
        }
        FIXED_VERSION | UNIQUE_VERSION => {
            let fixed = h.version == FIXED_VERSION;
            let (value_size, dict_at, distinct) = match fixed {
                true => (value_size(&mut r)?, 0, 0),
                false => {
                    let distinct = dictionary_len(&mut r)?;
                    let at = r.pos();
                    for _ in 0..distinct {
                        r.bytes()?;
                    }
                    (0, at, distinct)
                }
            };
            let mut current: Vec<u8> = Vec::with_capacity(key.len() + 8);
            for i in 0..h.count {
                let (shared, rest) = (r.varint()?, r.bytes()?);
                if shared > current.len() as u64 {
                    return Err(format!("shares {shared} bytes with a shorter key"));
                }
                current.truncate(shared as usize);
                current.extend_from_slice(rest);
                let value = match fixed {
                    true => Value::At(r.take(value_size)?),
                    false => Value::Index(dictionary_index(&mut r, distinct)?),
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
                    Value::At(v) => v,
                    Value::Index(i) => {
                        let mut d = Reader::new(section);
                        d.take(dict_at)?;
                        if i as u64 >= distinct {
                            return Err(format!("value {i} not in the dictionary"));
                        }
                        for _ in 0..i {
                            d.bytes()?;
                        }
                        d.bytes()?
                    }
                };
                lookup.version = Some((h.floor, value));
                lookup.larger = i + 1 < h.count;
                break;
            }
        }
        v => return Err(format!("block version {v} is not a specialized format")),
    }
    Ok(lookup)
}

/// An entry's value as a lookup meets it: its bytes, or its dictionary index.
enum Value<'a> {
    At(&'a [u8]),
    Index(usize),
}
