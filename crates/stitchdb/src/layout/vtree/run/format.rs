//! Anvil's specialized storage formats as run blocks: `fixed`, `array` and `unique-string`
//! (docs/layouts.md; byte formats in docs/format.md, "Specialized blocks").
//!
//! A specialized block has two sections. The *special* section holds what its format is made
//! for: one version per key, stored without a sequence number. Every entry there reads as the
//! block's *floor*, the newest sequence number among them. That is sound because the writer
//! puts a version there only when
//!
//! * it is at or below the *horizon*, the oldest snapshot any reader holds, so every reader
//!   there is or will be sees it (a reader's snapshot is never below the horizon);
//! * it is the newest version of its key in the run (older ones follow it, newest first),
//!   so the floor, at least its own sequence number, still orders it before them;
//! * no range tombstone of the run hides it (a tombstone between its sequence number and the
//!   floor would otherwise stop hiding it).
//!
//! Versions of the key newer than the horizon are newer than the floor too, so the overlay
//! and merges still order every version of a key as they were written. Everything else goes
//! to the *versions* section, version-4 entries with their sequence numbers: tombstones,
//! versions some reader may not see, older versions of a key, and values the format rejects
//! (which a table allows only under an `exception` module: without one the write path refuses
//! them, see `LayoutSpec::check_write`).
//!
//! Blocks stay self-contained (a repair reads them without their index, and a merge may
//! stitch them into another run unread), so a unique-string block carries its own dictionary.

use super::block::{BlockWriter, FinishedBlock};
use super::special::{array_key, le_int, zigzag, Layers, ARRAY_SLOTS, FIXED_KEYS_VERSION};
use crate::codec::{put_bytes, put_varint, Reader};
use crate::entry::{EntryRef, RangeDeletes};
use crate::layout::{BlockFormat, CodingSpec, FormatSpec};
use std::collections::HashMap;

/// Fills one specialized block.
pub struct SpecialWriter {
    format: BlockFormat,
    horizon: u64,
    ranges: RangeDeletes,
    /// The special section's entries (keys shared with the previous special key).
    special: Vec<u8>,
    special_count: u64,
    floor: u64,
    last_special: Vec<u8>,
    /// `array`: the first key's number, and the slot after the last taken.
    base: u64,
    next_slot: u64,
    present: Vec<u64>,
    /// `existential`: the special section's tombstones: `array` their slots from the first
    /// (a bitmap); the others their keys (sharing prefixes with the one before).
    gone: Vec<u8>,
    gone_count: u64,
    gone_base: u64,
    gone_slots: u64,
    gone_present: Vec<u64>,
    last_gone: Vec<u8>,
    /// `delta-integer`: the block's first special value (its landmark) and its last.
    landmark: u32,
    prev: u32,
    /// `fixed`: the special keys whole, back to back, and what each stores of its value, in
    /// order; whether the keys are all of one length (the first's). With these the section
    /// is written as one array of key rests and one of values when that is no larger (see
    /// [`fixed_keys`](Self::fixed_keys)).
    fixed_keys: Vec<u8>,
    fixed_values: Vec<u8>,
    one_width: bool,
    /// `unique-string`: the block's distinct values, each with its index.
    dict: HashMap<Vec<u8>, u32>,
    dict_order: Vec<Vec<u8>>,
    dict_bytes: usize,
    /// `unique-string`: each special entry's dictionary index, written at the end (its width
    /// depends on how many values the dictionary ends up with).
    indexes: Vec<u32>,
    versions: BlockWriter,
    /// Entries in the block.
    count: u64,
    first_key: Vec<u8>,
    /// The run's previous entry's key (kept across blocks: a key's versions may straddle
    /// two), and whether there was one.
    last_key: Vec<u8>,
    started: bool,
}

/// Where an entry goes.
enum Section {
    Special,
    /// `existential`: a tombstone in the special section.
    Gone,
    Versions,
}

impl SpecialWriter {
    /// A writer of `format` blocks (not `linear`) for a run whose range tombstones are
    /// `ranges`, keeping versions above `horizon` in the versions section.
    pub fn new(format: BlockFormat, horizon: u64, ranges: RangeDeletes) -> SpecialWriter {
        SpecialWriter {
            format,
            horizon,
            ranges,
            special: Vec::new(),
            special_count: 0,
            floor: 0,
            last_special: Vec::new(),
            base: 0,
            next_slot: 0,
            present: Vec::new(),
            gone: Vec::new(),
            gone_count: 0,
            gone_base: 0,
            gone_slots: 0,
            gone_present: Vec::new(),
            last_gone: Vec::new(),
            landmark: 0,
            prev: 0,
            fixed_keys: Vec::new(),
            fixed_values: Vec::new(),
            one_width: true,
            dict: HashMap::new(),
            dict_order: Vec::new(),
            dict_bytes: 0,
            indexes: Vec::new(),
            versions: BlockWriter::default(),
            count: 0,
            first_key: Vec::new(),
            last_key: Vec::new(),
            started: false,
        }
    }

    fn section(&self, e: &EntryRef) -> Section {
        let newest_in_run = !self.started || e.key != self.last_key.as_slice();
        if e.seq > self.horizon || !newest_in_run || self.ranges.hides(e.key, e.seq, u64::MAX) {
            return Section::Versions;
        }
        match e.value {
            // A tombstone reads as the floor under the same rules as a value: every reader
            // sees it, nothing older of its key is in front of it, and no range tombstone
            // of the run lies between.
            None if self.format.existential && self.format.format.rejects_key(e.key).is_none() => {
                Section::Gone
            }
            None => Section::Versions,
            Some(value)
                if self.format.rejects(e.key, value).is_some() || !self.delta_fits(value) =>
            {
                Section::Versions
            }
            Some(_) => Section::Special,
        }
    }

    /// Under `delta-integer`, whether the delta of `value` (4 bytes) from the block's last
    /// special value fits the coding's bytes: one that does not goes to the versions
    /// section whole, and the next delta is from the same last special value. The block's
    /// first special value, its landmark, always fits.
    fn delta_fits(&self, value: &[u8]) -> bool {
        if !self.format.delta || self.special_count == 0 {
            return true;
        }
        let width = self.format.coding.map_or(4, |c| c.width());
        let delta = zigzag(le_int(value).wrapping_sub(self.prev));
        u64::from(delta) < 1 << (8 * width)
    }

    /// Whether a tombstone of `existential` fits this block: in an `array` block, one too
    /// far past the block's first does not.
    fn gone_fits(&self, e: &EntryRef) -> bool {
        match self.format.format {
            FormatSpec::Array { .. } if self.gone_count > 0 => array_key(e.key).is_some_and(|k| {
                k.checked_sub(self.gone_base)
                    .is_some_and(|slot| slot < ARRAY_SLOTS)
            }),
            _ => true,
        }
    }

    /// Whether a special entry `e` fits this block; false when the block must end first (an
    /// array key too far past the block's first, a new value for a full dictionary).
    fn fits(&self, e: &EntryRef) -> bool {
        if self.special_count == 0 {
            return true;
        }
        match self.format.format {
            FormatSpec::Array { .. } => array_key(e.key).is_some_and(|k| {
                k.checked_sub(self.base)
                    .is_some_and(|slot| slot < ARRAY_SLOTS)
            }),
            FormatSpec::UniqueString { max, .. } => {
                let value = e.value.unwrap_or_default();
                self.dict.contains_key(value) || (self.dict.len() as u64) < u64::from(max)
            }
            _ => true,
        }
    }

    /// Adds `e` to the block; false, adding nothing, when the block must end first (see
    /// `fits`; a new block takes any entry).
    pub fn add(&mut self, e: EntryRef) -> bool {
        match self.section(&e) {
            Section::Versions => self.versions.add(e),
            Section::Special if !self.fits(&e) => return false,
            Section::Special => self.add_special(&e),
            Section::Gone if !self.gone_fits(&e) => return false,
            Section::Gone => self.add_gone(&e),
        }
        if self.count == 0 {
            self.first_key.clear();
            self.first_key.extend_from_slice(e.key);
        }
        self.count += 1;
        self.started = true;
        self.last_key.clear();
        self.last_key.extend_from_slice(e.key);
        true
    }

    fn add_special(&mut self, e: &EntryRef) {
        let value = e.value.unwrap_or_default();
        self.floor = self.floor.max(e.seq);
        match self.format.format {
            FormatSpec::Array { .. } => {
                // `section` checked the key's shape; `fits` its distance.
                let k = array_key(e.key).unwrap_or_default();
                if self.special_count == 0 {
                    self.base = k;
                    self.next_slot = 0;
                    self.present.clear();
                }
                let slot = k - self.base;
                set_slot(&mut self.present, slot);
                self.next_slot = slot + 1;
                self.put_value(value);
            }
            FormatSpec::Fixed { .. } => {
                self.put_special_key(e.key);
                let at = self.special.len();
                self.put_value(value);
                self.fixed_values.extend_from_slice(&self.special[at..]);
                self.one_width &= self.special_count == 0 || e.key.len() == self.last_special.len();
                self.fixed_keys.extend_from_slice(e.key);
            }
            FormatSpec::Empty => self.put_special_key(e.key),
            FormatSpec::UniqueString { .. } => {
                self.put_special_key(e.key);
                let next = self.dict.len() as u32;
                let index = *self.dict.entry(value.to_vec()).or_insert_with(|| {
                    self.dict_bytes += value.len() + 2;
                    self.dict_order.push(value.to_vec());
                    next
                });
                self.indexes.push(index);
            }
            FormatSpec::Linear => unreachable_linear(),
        }
        self.special_count += 1;
        self.last_special.clear();
        self.last_special.extend_from_slice(e.key);
    }

    fn add_gone(&mut self, e: &EntryRef) {
        self.floor = self.floor.max(e.seq);
        match self.format.format {
            FormatSpec::Array { .. } => {
                // `section` checked the key's shape; `gone_fits` its distance.
                let k = array_key(e.key).unwrap_or_default();
                if self.gone_count == 0 {
                    self.gone_base = k;
                    self.gone_present.clear();
                }
                let slot = k - self.gone_base;
                set_slot(&mut self.gone_present, slot);
                self.gone_slots = slot + 1;
            }
            _ => {
                let shared = match self.gone_count {
                    0 => 0,
                    _ => super::block::shared_prefix(&self.last_gone, e.key),
                };
                put_varint(&mut self.gone, shared as u64);
                put_bytes(&mut self.gone, &e.key[shared..]);
                self.last_gone.clear();
                self.last_gone.extend_from_slice(e.key);
            }
        }
        self.gone_count += 1;
    }

    /// Appends to the special section what it stores of `value` (which `section` let in):
    /// under `delta-integer` nothing for the landmark and the (coded) delta for the rest; a
    /// small integer's low bytes (its first, little-endian); a state code's index; else the
    /// value.
    fn put_value(&mut self, value: &[u8]) {
        if self.format.delta {
            let int = le_int(value);
            if self.special_count == 0 {
                self.landmark = int;
            } else {
                let width = self.format.coding.map_or(4, |c| c.width());
                let delta = zigzag(int.wrapping_sub(self.prev)).to_le_bytes();
                self.special.extend_from_slice(&delta[..width as usize]);
            }
            self.prev = int;
            return;
        }
        match self.format.coding {
            Some(CodingSpec::SmallInteger { bytes }) => {
                self.special.extend_from_slice(&value[..bytes as usize]);
            }
            Some(CodingSpec::StateDictionary) => {
                self.special.extend(CodingSpec::state_index(value));
            }
            None => self.special.extend_from_slice(value),
        }
    }

    /// The key, as the bytes it does not share with the previous special key.
    fn put_special_key(&mut self, key: &[u8]) {
        let shared = if self.special_count == 0 {
            0
        } else {
            super::block::shared_prefix(&self.last_special, key)
        };
        put_varint(&mut self.special, shared as u64);
        put_bytes(&mut self.special, &key[shared..]);
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The payload size so far (about: the header's varints are counted at their largest).
    pub fn size(&self) -> usize {
        let bitmap = match self.format.format {
            FormatSpec::Array { .. } => self.next_slot.div_ceil(8) as usize + 8,
            _ => 0,
        };
        let index_width = if self.dict.len() > 256 { 2 } else { 1 };
        let gone = self.gone.len() + self.gone_slots.div_ceil(8) as usize;
        32 + self.special.len()
            + gone
            + bitmap
            + self.dict_bytes
            + self.indexes.len() * index_width
            + self.versions.size()
    }

    /// The finished block; the writer is reset.
    pub fn finish(&mut self) -> FinishedBlock {
        let size = match self.format.format {
            FormatSpec::Fixed { size } | FormatSpec::Array { size } => size,
            FormatSpec::UniqueString { .. } | FormatSpec::Empty => 0,
            FormatSpec::Linear => unreachable_linear(),
        };
        let section = self.special_section(size);
        let mut out = Vec::with_capacity(section.len() + self.versions.size() + 32);
        let (version, layers) = match self.fixed_keys() {
            // The layers byte of a fixed block without layers is 0.
            Some(_) => (
                FIXED_KEYS_VERSION,
                Some(Layers::of(self.format).encode().1.unwrap_or(0)),
            ),
            None => Layers::of(self.format).encode(),
        };
        out.push(version);
        out.extend(layers);
        put_varint(&mut out, self.floor);
        put_varint(&mut out, self.special_count);
        // The special section's length: a lookup goes straight to the versions section.
        put_bytes(&mut out, &section);
        if !self.versions.is_empty() {
            let versions = self.versions.finish();
            // Version 4 entries without their version byte.
            out.extend_from_slice(&versions.payload()[1..]);
        }
        let block = FinishedBlock::new(
            out,
            std::mem::take(&mut self.first_key),
            self.last_key.clone(),
            self.count,
        );
        self.reset();
        block
    }

    /// The special section's bytes (docs/format.md, "Specialized blocks").
    fn special_section(&self, size: u32) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.size());
        if self.format.existential {
            put_varint(&mut out, self.gone_count);
            if let (FormatSpec::Array { .. }, true) = (self.format.format, self.gone_count > 0) {
                put_slots(
                    &mut out,
                    self.gone_base,
                    self.gone_slots,
                    self.gone_count,
                    &self.gone_present,
                );
            } else {
                out.extend_from_slice(&self.gone);
            }
        }
        match self.format.format {
            FormatSpec::Fixed { .. } => {
                put_varint(&mut out, u64::from(size));
                self.put_landmark(&mut out);
                match self.fixed_keys() {
                    Some((prefix, width)) => {
                        put_bytes(&mut out, &self.fixed_keys[..prefix]);
                        put_varint(&mut out, (width - prefix) as u64);
                        // Not `chunks_exact`: a block of one empty key has keys of width 0.
                        for i in 0..self.special_count as usize {
                            out.extend_from_slice(
                                &self.fixed_keys[i * width + prefix..(i + 1) * width],
                            );
                        }
                        out.extend_from_slice(&self.fixed_values);
                    }
                    None => out.extend_from_slice(&self.special),
                }
            }
            FormatSpec::Empty => out.extend_from_slice(&self.special),
            FormatSpec::Array { .. } => {
                put_varint(&mut out, u64::from(size));
                self.put_landmark(&mut out);
                if self.special_count > 0 {
                    let (base, slots, count) = (self.base, self.next_slot, self.special_count);
                    put_slots(&mut out, base, slots, count, &self.present);
                }
                out.extend_from_slice(&self.special);
            }
            FormatSpec::UniqueString { .. } => {
                put_varint(&mut out, self.dict_order.len() as u64);
                for v in &self.dict_order {
                    put_bytes(&mut out, v);
                }
                // Keys and indexes interleaved: each key's bytes, then its index.
                let wide = self.dict_order.len() > 256;
                let mut r = Reader::new(&self.special);
                for &index in &self.indexes {
                    // The writer's own bytes: two varint-framed parts per entry.
                    let start = r.pos();
                    let _ = r.varint();
                    let _ = r.bytes();
                    out.extend_from_slice(&self.special[start..r.pos()]);
                    if wide {
                        out.extend_from_slice(&(index as u16).to_le_bytes());
                    } else {
                        out.push(index as u8);
                    }
                }
            }
            FormatSpec::Linear => unreachable_linear(),
        }
        out
    }

    /// Whether a `fixed` section is written with its keys of one width (version 10): its keys
    /// all `width` bytes, the first `prefix` of them shared by all (the first key's and the
    /// last's), which the section stores once, and the rests back to back take no more bytes
    /// than the keys sharing prefixes with the one before. A lookup then binary-searches the
    /// rests by arithmetic rather than decoding the keys before its own.
    fn fixed_keys(&self) -> Option<(usize, usize)> {
        if !matches!(self.format.format, FormatSpec::Fixed { .. }) || !self.one_width {
            return None;
        }
        let width = self.last_special.len();
        let count = self.special_count as usize;
        let first = self.fixed_keys.get(..width).filter(|_| count > 0)?;
        let prefix = super::block::shared_prefix(first, &self.last_special);
        let mut header = Vec::new();
        put_bytes(&mut header, first.get(..prefix)?);
        put_varint(&mut header, (width - prefix) as u64);
        let shared_keys = self.special.len() - self.fixed_values.len();
        (header.len() + count * (width - prefix) <= shared_keys).then_some((prefix, width))
    }

    /// A `delta-integer` section's landmark, in front of its entries (if it has any).
    fn put_landmark(&self, out: &mut Vec<u8>) {
        if self.format.delta && self.special_count > 0 {
            out.extend_from_slice(&self.landmark.to_le_bytes());
        }
    }

    fn reset(&mut self) {
        self.gone.clear();
        self.gone_count = 0;
        self.gone_slots = 0;
        self.gone_present.clear();
        self.last_gone.clear();
        self.special.clear();
        self.fixed_keys.clear();
        self.fixed_values.clear();
        self.one_width = true;
        self.special_count = 0;
        self.floor = 0;
        self.last_special.clear();
        self.present.clear();
        self.next_slot = 0;
        self.dict.clear();
        self.dict_order.clear();
        self.dict_bytes = 0;
        self.indexes.clear();
        self.count = 0;
    }
}

/// An array section's slots (docs/format.md): the first key, how many, and a bitmap of the
/// `count` that hold an entry unless every one does.
fn put_slots(out: &mut Vec<u8>, base: u64, slots: u64, count: u64, present: &[u64]) {
    out.extend_from_slice(&base.to_be_bytes());
    put_varint(out, slots);
    if slots == count {
        out.push(0);
    } else {
        out.push(1);
        let bytes = slots.div_ceil(8) as usize;
        out.extend(present.iter().flat_map(|w| w.to_le_bytes()).take(bytes));
    }
}

/// Marks `slot` in an `array` bitmap of 64-bit words (least significant bit first), growing
/// it to hold the slot: the slots holding an entry, or a gone key.
fn set_slot(bits: &mut Vec<u64>, slot: u64) {
    let words = (slot / 64 + 1) as usize;
    if bits.len() < words {
        bits.resize(words, 0);
    }
    bits[(slot / 64) as usize] |= 1 << (slot % 64);
}

fn unreachable_linear() -> ! {
    unreachable!("linear blocks are written by BlockWriter")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::{Entry, RangeTombstone};
    use crate::layout::vtree::run::block::{Block, Found, Framing};
    use crate::layout::vtree::run::special::decode_special;
    use proptest::prelude::*;

    fn formats() -> impl Strategy<Value = BlockFormat> {
        let plain = prop_oneof![
            (1..12u32).prop_map(|size| FormatSpec::Fixed { size }),
            (1..12u32).prop_map(|size| FormatSpec::Array { size }),
            (1..5u32, 1..12u32).prop_map(|(max, len)| FormatSpec::UniqueString { max, len }),
            Just(FormatSpec::Empty),
        ];
        let small = (1..=3u32, any::<bool>(), any::<bool>()).prop_map(|(bytes, array, delta)| {
            BlockFormat {
                existential: false,
                delta,
                coding: Some(CodingSpec::SmallInteger { bytes }),
                format: match array {
                    true => FormatSpec::Array { size: bytes },
                    false => FormatSpec::Fixed { size: bytes },
                },
            }
        });
        let deltas = any::<bool>().prop_map(|array| BlockFormat {
            existential: false,
            delta: true,
            coding: None,
            format: match array {
                true => FormatSpec::Array { size: 4 },
                false => FormatSpec::Fixed { size: 4 },
            },
        });
        let states = any::<bool>().prop_map(|array| BlockFormat {
            existential: false,
            delta: false,
            coding: Some(CodingSpec::StateDictionary),
            format: match array {
                true => FormatSpec::Array { size: 1 },
                false => FormatSpec::Fixed { size: 1 },
            },
        });
        let format = prop_oneof![plain.prop_map(BlockFormat::plain), small, states, deltas];
        (format, any::<bool>()).prop_map(|(format, existential)| BlockFormat {
            existential,
            ..format
        })
    }

    /// Sorted versions (key ascending, newest first), keys mostly 8 bytes and near each
    /// other, values mostly of 4 bytes from a few.
    fn entries() -> impl Strategy<Value = Vec<Entry>> {
        let key = prop_oneof![
            8 => (0..300u64).prop_map(|k| (1000 + k * 3 / 2).to_be_bytes().to_vec()),
            1 => proptest::collection::vec(any::<u8>(), 0..12),
        ];
        let value = prop_oneof![
            6 => (0..4u8).prop_map(|v| Some(vec![v; 4])),
            2 => Just(Some(Vec::new())),
            // Integers, most of them small.
            4 => prop_oneof![0..300u32, any::<u32>()].prop_map(|n| Some(n.to_le_bytes().to_vec())),
            2 => prop::sample::select(&crate::layout::STATE_CODES[..]).prop_map(|c| Some(c.to_vec())),
            2 => proptest::collection::vec(any::<u8>(), 0..12).prop_map(Some),
            1 => Just(None),
        ];
        proptest::collection::vec((key, 1..200u64, value), 1..120).prop_map(|mut v| {
            v.sort_by(|a, b| (&a.0, std::cmp::Reverse(a.1)).cmp(&(&b.0, std::cmp::Reverse(b.1))));
            v.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
            v.into_iter()
                .map(|(key, seq, value)| Entry { key, seq, value })
                .collect()
        })
    }

    /// Writes `entries` as blocks of `format` the way a run builder does (a new block where
    /// the writer asks), and parses each back.
    fn round_trip(
        format: BlockFormat,
        horizon: u64,
        ranges: &RangeDeletes,
        entries: &[Entry],
    ) -> Vec<Entry> {
        let mut w = SpecialWriter::new(format, horizon, ranges.clone());
        let mut blocks = Vec::new();
        for e in entries {
            let e = EntryRef {
                key: &e.key,
                seq: e.seq,
                value: e.value.as_deref(),
            };
            // Small blocks, as a builder cuts them by size: a key's versions straddle blocks.
            if w.size() >= 64 {
                blocks.push(w.finish());
            }
            if !w.add(e) {
                blocks.push(w.finish());
                assert!(w.add(e), "a new block takes any entry");
            }
        }
        blocks.push(w.finish());
        let mut out = Vec::new();
        for b in blocks {
            let framing = Framing {
                first_key: &b.first_key,
                entries: b.entries,
            };
            let parsed = Block::parse_at(b.payload().to_vec(), 0, framing).unwrap();
            let standalone = Block::parse_standalone(b.payload().to_vec(), 0).unwrap();
            assert_eq!(parsed.len(), standalone.len());
            // A raw lookup finds what the parsed block does, for every key in the block,
            // keys between and past them, at every snapshot that matters.
            let mut keys: Vec<Vec<u8>> = (0..parsed.len())
                .map(|i| parsed.entry(i).key.to_vec())
                .collect();
            keys.extend(keys.clone().into_iter().map(|mut k| {
                k.push(0);
                k
            }));
            keys.extend([vec![], vec![0xff; 9]]);
            for key in &keys {
                for snapshot in [0, horizon, horizon + 1, 100, 199, u64::MAX] {
                    let raw = Block::find(b.payload(), 0, framing, key, snapshot).unwrap();
                    assert_eq!(
                        raw,
                        Some(parsed.found(key, snapshot)),
                        "{key:?} at {snapshot}"
                    );
                }
            }
            out.extend((0..parsed.len()).map(|i| parsed.entry(i).to_entry()));
        }
        out
    }

    /// The newest version of `key` at or below `snapshot`, as readers see it.
    fn read(entries: &[Entry], ranges: &RangeDeletes, key: &[u8], snapshot: u64) -> Value {
        let e = entries.iter().find(|e| e.key == key && e.seq <= snapshot)?;
        match ranges.hides(key, e.seq, snapshot) {
            true => None,
            false => e.value.clone(),
        }
    }

    type Value = Option<Vec<u8>>;

    proptest! {
        /// Every reader at or after the horizon reads each key as it was written, and every
        /// version above the horizon keeps its sequence number.
        #[test]
        fn readers_see_what_was_written(
            format in formats(),
            entries in entries(),
            horizon in 0..220u64,
            range in proptest::option::of((0..300u64, 0..40u64, 1..200u64)),
        ) {
            let ranges = RangeDeletes::new(range.map(|(start, len, seq)| RangeTombstone {
                start: (1000 + start).to_be_bytes().to_vec(),
                end: (1001 + start + len).to_be_bytes().to_vec(),
                seq,
            }).into_iter().collect());
            let back = round_trip(format, horizon, &ranges, &entries);
            prop_assert_eq!(back.len(), entries.len());
            // A run's order: a key's versions newest first, across blocks too (a scan and a
            // merge order versions by sequence number).
            for pair in back.windows(2) {
                if pair[0].key == pair[1].key {
                    prop_assert!(pair[0].seq > pair[1].seq, "{:?}", pair);
                }
            }
            for (b, e) in back.iter().zip(&entries) {
                prop_assert_eq!(&b.key, &e.key);
                prop_assert_eq!(&b.value, &e.value);
                if e.seq > horizon {
                    prop_assert_eq!(b.seq, e.seq);
                }
            }
            for e in &entries {
                // No reader is older than the horizon.
                for snapshot in [horizon, horizon + 1, horizon.max(150), 250] {
                    prop_assert_eq!(
                        read(&back, &ranges, &e.key, snapshot),
                        read(&entries, &ranges, &e.key, snapshot),
                        "key {:?} at {}", e.key, snapshot
                    );
                }
            }
        }

        /// Damaged bytes are an error or some block, never a panic.
        #[test]
        fn any_bytes_parse_or_fail(bytes in proptest::collection::vec(any::<u8>(), 0..200), v in 5..10u8) {
            let mut bytes = bytes;
            bytes.insert(0, v);
            let _ = Block::parse_standalone(bytes.clone(), 0);
            let _ = decode_special(&bytes, 0);
        }
    }

    /// An `array` block without holes or older versions finds keys by arithmetic: the same
    /// entries, absences and neighbours as comparing keys finds, for keys of any length.
    #[test]
    fn a_dense_array_block_finds_by_arithmetic_what_comparing_finds() {
        // (first key, keys, a key left out, a key deleted under `existential`)
        let cases = [
            (5000u64, 100u64, None, None),
            (0, 1, None, None),
            (u64::MAX - 9, 10, None, None),
            (7, 50, Some(20u64), None),
            (7, 50, None, Some(30u64)),
        ];
        for (first, n, hole, gone) in cases {
            let format = BlockFormat {
                existential: gone.is_some(),
                ..BlockFormat::plain(FormatSpec::Array { size: 2 })
            };
            let mut w = SpecialWriter::new(format, u64::MAX, RangeDeletes::default());
            for k in (first..=first + (n - 1)).filter(|&k| Some(k - first) != hole) {
                let value = [k as u8, 1];
                assert!(w.add(EntryRef {
                    key: &k.to_be_bytes(),
                    seq: 10,
                    value: (Some(k - first) != gone).then_some(&value[..]),
                }));
            }
            let b = w.finish();
            let framing = Framing {
                first_key: &b.first_key,
                entries: b.entries,
            };
            let block = Block::parse_at(b.payload().to_vec(), 0, framing).unwrap();
            let dense = hole.is_none() && gone.is_none();
            assert_eq!(block.is_dense(), dense, "{first} {n} {hole:?} {gone:?}");
            let mut keys: Vec<Vec<u8>> = Vec::new();
            for k in first.saturating_sub(3)..=first.saturating_add(n + 2) {
                keys.push(k.to_be_bytes().to_vec());
                let mut longer = k.to_be_bytes().to_vec();
                longer.push(0);
                keys.push(longer);
                keys.push(k.to_be_bytes()[..7].to_vec());
            }
            keys.extend([vec![], vec![0xff; 9]]);
            for key in &keys {
                let compared = (0..block.len())
                    .position(|i| block.entry(i).key >= key.as_slice())
                    .unwrap_or(block.len());
                assert_eq!(block.seek(key), compared, "{key:?}");
                let raw = Block::find(b.payload(), 0, framing, key, u64::MAX).unwrap();
                assert_eq!(raw, Some(block.found(key, u64::MAX)), "{key:?}");
            }
        }
    }

    /// A `fixed` block's keys of one width are one array of their rests after the prefix
    /// they share (version 10), smaller than keys sharing prefixes; one key of another width
    /// keeps the block at version 5. Either way the raw lookup and the parsed block find every
    /// key, the keys between and around them, and nothing else.
    #[test]
    fn fixed_keys_of_one_width_are_an_array_and_others_are_not() {
        let one_width: Vec<Vec<u8>> = (0..300u64)
            .map(|k| (5000 + 3 * k).to_be_bytes().to_vec())
            .collect();
        let mut several = one_width.clone();
        several.insert(
            100,
            [(5000u64 + 3 * 99).to_be_bytes().as_slice(), b"x"].concat(),
        );
        let mut sizes = Vec::new();
        for (keys, version) in [(&one_width, FIXED_KEYS_VERSION), (&several, 5)] {
            let mut w = SpecialWriter::new(
                BlockFormat::plain(FormatSpec::Fixed { size: 2 }),
                u64::MAX,
                RangeDeletes::default(),
            );
            for (i, key) in keys.iter().enumerate() {
                let value = (i as u16).to_le_bytes();
                assert!(w.add(EntryRef {
                    key,
                    seq: 10,
                    value: Some(&value)
                }));
            }
            let b = w.finish();
            assert_eq!(b.payload()[0], version);
            sizes.push(b.payload().len());
            let framing = Framing {
                first_key: &b.first_key,
                entries: b.entries,
            };
            let block = Block::parse_at(b.payload().to_vec(), 0, framing).unwrap();
            let mut probes = keys.clone();
            for k in 4990..6000u64 {
                probes.push(k.to_be_bytes().to_vec());
                probes.push(k.to_be_bytes()[..7].to_vec());
            }
            probes.extend([vec![], vec![0xff; 9], vec![0; 9]]);
            for key in &probes {
                let want = keys.iter().position(|k| k == key);
                let raw = Block::find(b.payload(), 0, framing, key, u64::MAX).unwrap();
                assert_eq!(raw, Some(block.found(key, u64::MAX)), "{key:?}");
                let value = want.map(|i| (i as u16).to_le_bytes().to_vec());
                match raw {
                    Some(Found::Version(10, v)) => assert_eq!(Some(v), value.map(Some)),
                    _ => assert_eq!(value, None, "{key:?}"),
                }
                let compared = (0..block.len())
                    .position(|i| block.entry(i).key >= key.as_slice())
                    .unwrap_or(block.len());
                assert_eq!(block.seek(key), compared, "{key:?}");
            }
        }
        // Two bytes of rest a key against one of shared, one of length and one or two of
        // rest.
        assert!(sizes[0] + 300 < sizes[1], "{sizes:?}");
    }

    #[test]
    fn specialized_blocks_are_smaller_than_linear_ones() {
        let entries: Vec<Entry> = (0..200u64)
            .map(|k| Entry {
                key: (1 << 40 | k).to_be_bytes().to_vec(),
                seq: 1_000_000 + k,
                value: Some(vec![(k % 3) as u8; 8]),
            })
            .collect();
        let size = |format| {
            let mut w = SpecialWriter::new(
                BlockFormat::plain(format),
                u64::MAX,
                RangeDeletes::default(),
            );
            for e in &entries {
                assert!(w.add(EntryRef {
                    key: &e.key,
                    seq: e.seq,
                    value: e.value.as_deref(),
                }));
            }
            w.finish().payload().len()
        };
        let mut linear = crate::layout::vtree::run::BlockWriter::default();
        for e in &entries {
            linear.add(EntryRef {
                key: &e.key,
                seq: e.seq,
                value: e.value.as_deref(),
            });
        }
        let linear = linear.finish().payload().len();
        let array = size(FormatSpec::Array { size: 8 });
        let fixed = size(FormatSpec::Fixed { size: 8 });
        let unique = size(FormatSpec::UniqueString { max: 255, len: 255 });
        // Linear: 3-4 bytes of key, 3 of sequence number, 1 of length, 8 of value.
        assert!(array * 9 / 5 < linear, "array {array}, linear {linear}");
        assert!(
            fixed < linear && unique < fixed,
            "{linear} {fixed} {unique}"
        );
    }
}
