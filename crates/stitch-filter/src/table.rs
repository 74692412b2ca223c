//! The slot table: quotient-filter slots packed into blocks of 64, with word-at-a-time scans
//! over their metadata bits.
//!
//! Each slot has three metadata bits and an `r`-bit remainder. A block keeps the metadata of
//! its 64 slots as three words, followed by the 64 remainders packed into `r` words (so a
//! remainder never straddles blocks and one block spans `3 + r` words):
//!
//! * `occupied[i]`: some stored fingerprint has quotient (home slot) `i`.
//! * `runend[i]`: slot `i` holds the last remainder of a run.
//! * `used[i]`: slot `i` holds a remainder.
//!
//! These carry the same information as the is_occupied / is_continuation / is_shifted bits of
//! Bender et al. (`used` = occupied-or-shifted; a run ends where the next slot is not a
//! continuation), in a form that whole words can be counted and searched in: to find the run of
//! quotient `q`, count the runs opened (`occupied`) and closed (`runend`) since the last unused
//! slot before `q`, which no run crosses, then select among the run ends from `q` on.
//!
//! This module knows nothing of fingerprints; [`crate::filter`] keeps the runs canonical.

use crate::FilterError;

/// Slots per block: one metadata word covers one block.
pub(crate) const SLOTS_PER_BLOCK: u64 = 64;

/// Position of each metadata word within a block.
#[derive(Clone, Copy)]
enum Meta {
    Occupied = 0,
    Runend = 1,
    Used = 2,
}
const METADATA_WORDS: usize = 3;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SlotTable {
    /// Blocks back to back, each `stride` words.
    words: Vec<u64>,
    remainder_bits: u32,
    /// Words per block: `METADATA_WORDS + remainder_bits`.
    stride: usize,
    /// `words.len() / stride`, kept to spare the scans a division.
    blocks: u64,
}

impl SlotTable {
    /// An empty table of `blocks` blocks, with room reserved for one more: a nearly full
    /// table usually pushes its last run past the end, and growing into reserved room spares
    /// copying the table.
    pub(crate) fn new(blocks: u64, remainder_bits: u32) -> Result<Self, FilterError> {
        let mut table = Self {
            words: Vec::new(),
            remainder_bits,
            stride: METADATA_WORDS + remainder_bits as usize,
            blocks: 0,
        };
        table.reserve_blocks(blocks.saturating_add(1))?;
        table.grow_to(blocks)?;
        Ok(table)
    }

    /// A table over decoded words; `None` unless they are a whole number of blocks.
    pub(crate) fn from_words(words: Vec<u64>, remainder_bits: u32) -> Option<Self> {
        let stride = METADATA_WORDS + remainder_bits as usize;
        (words.len() % stride == 0).then_some(Self {
            blocks: (words.len() / stride) as u64,
            words,
            remainder_bits,
            stride,
        })
    }

    pub(crate) fn words(&self) -> &[u64] {
        &self.words
    }

    /// Bytes allocated for the table.
    pub(crate) fn allocated_bytes(&self) -> usize {
        self.words.capacity() * std::mem::size_of::<u64>()
    }

    pub(crate) fn block_count(&self) -> u64 {
        self.blocks
    }

    pub(crate) fn slot_count(&self) -> u64 {
        self.block_count() * SLOTS_PER_BLOCK
    }

    /// Appends empty blocks until the table has `blocks` of them.
    pub(crate) fn grow_to(&mut self, blocks: u64) -> Result<(), FilterError> {
        if blocks > self.blocks {
            self.reserve_blocks(blocks)?;
            self.words.resize(blocks as usize * self.stride, 0);
            self.blocks = blocks;
        }
        Ok(())
    }

    /// Makes room for `blocks` blocks without reallocating. Fallible, so that an absurd size is
    /// an error rather than an abort.
    fn reserve_blocks(&mut self, blocks: u64) -> Result<(), FilterError> {
        let out_of_memory = FilterError::OutOfMemory {
            bytes: blocks.saturating_mul(self.stride as u64 * 8),
        };
        let words = usize::try_from(blocks)
            .ok()
            .and_then(|blocks| blocks.checked_mul(self.stride))
            .ok_or(out_of_memory.clone())?;
        self.words
            .try_reserve_exact(words.saturating_sub(self.words.len()))
            .map_err(|_| out_of_memory)
    }

    fn meta_word(&self, meta: Meta, block: u64) -> u64 {
        self.words[block as usize * self.stride + meta as usize]
    }

    fn meta_bit(&self, meta: Meta, slot: u64) -> bool {
        (self.meta_word(meta, slot / SLOTS_PER_BLOCK) >> (slot % SLOTS_PER_BLOCK)) & 1 == 1
    }

    fn set_meta_bit(&mut self, meta: Meta, slot: u64, value: bool) {
        let index = (slot / SLOTS_PER_BLOCK) as usize * self.stride + meta as usize;
        let bit = 1u64 << (slot % SLOTS_PER_BLOCK);
        if value {
            self.words[index] |= bit;
        } else {
            self.words[index] &= !bit;
        }
    }

    pub(crate) fn is_occupied(&self, slot: u64) -> bool {
        self.meta_bit(Meta::Occupied, slot)
    }

    pub(crate) fn set_occupied(&mut self, slot: u64) {
        self.set_meta_bit(Meta::Occupied, slot, true);
    }

    pub(crate) fn is_runend(&self, slot: u64) -> bool {
        self.meta_bit(Meta::Runend, slot)
    }

    pub(crate) fn set_runend(&mut self, slot: u64, value: bool) {
        self.set_meta_bit(Meta::Runend, slot, value);
    }

    pub(crate) fn is_used(&self, slot: u64) -> bool {
        self.meta_bit(Meta::Used, slot)
    }

    pub(crate) fn set_used(&mut self, slot: u64) {
        self.set_meta_bit(Meta::Used, slot, true);
    }

    /// Word index and bit offset of a slot's remainder.
    fn remainder_position(&self, slot: u64) -> (usize, u32) {
        let block_start = (slot / SLOTS_PER_BLOCK) as usize * self.stride + METADATA_WORDS;
        let bit = (slot % SLOTS_PER_BLOCK) as usize * self.remainder_bits as usize;
        (block_start + bit / 64, (bit % 64) as u32)
    }

    pub(crate) fn remainder(&self, slot: u64) -> u64 {
        if self.remainder_bits == 0 {
            return 0;
        }
        let (word, offset) = self.remainder_position(slot);
        let mut value = self.words[word] >> offset;
        if offset + self.remainder_bits > 64 {
            // The block's remainders fill exactly `r` words, so the next word is in it.
            value |= self.words[word + 1] << (64 - offset);
        }
        value & remainder_mask(self.remainder_bits)
    }

    pub(crate) fn set_remainder(&mut self, slot: u64, value: u64) {
        if self.remainder_bits == 0 {
            return;
        }
        let mask = remainder_mask(self.remainder_bits);
        let value = value & mask;
        let (word, offset) = self.remainder_position(slot);
        self.words[word] = (self.words[word] & !(mask << offset)) | (value << offset);
        if offset + self.remainder_bits > 64 {
            let high_bits = offset + self.remainder_bits - 64;
            let high_mask = remainder_mask(high_bits);
            self.words[word + 1] = (self.words[word + 1] & !high_mask) | (value >> (64 - offset));
        }
    }

    /// The first unused slot at or after `from`, if the table has one.
    pub(crate) fn first_unused_from(&self, from: u64) -> Option<u64> {
        self.next_matching(Meta::Used, false, from)
    }

    /// The first occupied slot at or after `from`, if the table has one.
    pub(crate) fn next_occupied_from(&self, from: u64) -> Option<u64> {
        self.next_matching(Meta::Occupied, true, from)
    }

    /// How many runs are open at the used slot `slot`: runs whose quotient is at or before
    /// `slot` and whose end is at or after it. Runs never cross an unused slot, so only the
    /// quotients and run ends since the last unused slot before `slot` count; the scan goes back
    /// to it a word at a time.
    pub(crate) fn open_runs_at(&self, slot: u64) -> u64 {
        let mut block = slot / SLOTS_PER_BLOCK;
        let through_slot = u64::MAX >> (63 - slot % 64);
        let before_slot = through_slot >> 1;
        let mut unused = !self.meta_word(Meta::Used, block) & before_slot;
        let mut starts = self.meta_word(Meta::Occupied, block) & through_slot;
        let mut ends = self.meta_word(Meta::Runend, block) & before_slot;
        let (mut started, mut ended) = (0u64, 0u64);
        loop {
            if unused != 0 {
                // Slots after the last unused one (none when it is bit 63).
                let after_unused = u64::MAX
                    .checked_shl(64 - unused.leading_zeros())
                    .unwrap_or(0);
                started += u64::from((starts & after_unused).count_ones());
                ended += u64::from((ends & after_unused).count_ones());
                break;
            }
            started += u64::from(starts.count_ones());
            ended += u64::from(ends.count_ones());
            if block == 0 {
                break;
            }
            block -= 1;
            unused = !self.meta_word(Meta::Used, block);
            starts = self.meta_word(Meta::Occupied, block);
            ends = self.meta_word(Meta::Runend, block);
        }
        started.saturating_sub(ended)
    }

    /// The slot of the `n`-th (from 0) run end at or after `from`, if there are that many.
    pub(crate) fn nth_runend_from(&self, from: u64, mut n: u64) -> Option<u64> {
        let mut block = from / SLOTS_PER_BLOCK;
        if block >= self.block_count() {
            return None;
        }
        let mut bits = self.meta_word(Meta::Runend, block) & (u64::MAX << (from % 64));
        loop {
            let count = u64::from(bits.count_ones());
            if n < count {
                return Some(block * SLOTS_PER_BLOCK + select_bit(bits, n as u32));
            }
            n -= count;
            block += 1;
            if block >= self.block_count() {
                return None;
            }
            bits = self.meta_word(Meta::Runend, block);
        }
    }

    /// Moves the remainders and run ends of slots `from..to` one slot up and marks `to` used,
    /// leaving slot `from` for the caller to fill. Slot `to` must be unused.
    ///
    /// Inserts at 90% load move dozens of slots, so this shifts whole words: block by block from
    /// the top, each block's slots move up within it, and its slot 0 takes the old top slot of
    /// the block below (which is still unmoved, being handled next).
    pub(crate) fn shift_up(&mut self, from: u64, to: u64) {
        let (first_block, last_block) = (from / SLOTS_PER_BLOCK, to / SLOTS_PER_BLOCK);
        for block in (first_block..=last_block).rev() {
            // Destination slots in this block: first..=last.
            let first = if block == first_block {
                from % 64 + 1
            } else {
                0
            };
            let last = if block == last_block { to % 64 } else { 63 };
            if first.max(1) <= last {
                self.shift_block_up(block, first.max(1) - 1, last - 1);
            }
            if first == 0 {
                let below = block * SLOTS_PER_BLOCK - 1;
                let remainder = self.remainder(below);
                self.set_remainder(block * SLOTS_PER_BLOCK, remainder);
                let runend = self.is_runend(below);
                self.set_runend(block * SLOTS_PER_BLOCK, runend);
            }
        }
        self.set_used(to);
    }

    /// Moves slots `first..=last` of `block` (`last < 63`) one slot up within the block.
    fn shift_block_up(&mut self, block: u64, first: u64, last: u64) {
        let start = block as usize * self.stride;
        let runends = &mut self.words[start + Meta::Runend as usize];
        let moved = bit_range(first as u32 + 1, last as u32 + 2);
        *runends = (*runends & !moved) | ((*runends << 1) & moved);

        let width = u64::from(self.remainder_bits);
        if width == 0 {
            return;
        }
        // The block's remainders as one bit string, shifted up by one remainder over the
        // destination bits [(first + 1) * width, (last + 2) * width). Going from the top word
        // down, the word below is still unchanged when it is needed.
        let remainders = &mut self.words[start + METADATA_WORDS..start + self.stride];
        let (low, high) = ((first + 1) * width, (last + 2) * width);
        let shift = self.remainder_bits;
        for word in (low / 64..high.div_ceil(64)).rev() {
            let index = word as usize;
            let carried = if index == 0 {
                0
            } else {
                remainders[index - 1] >> (64 - shift)
            };
            let shifted = (remainders[index] << shift) | carried;
            let moved = bit_range(
                low.saturating_sub(word * 64).min(64) as u32,
                (high - word * 64).min(64) as u32,
            );
            remainders[index] = (remainders[index] & !moved) | (shifted & moved);
        }
    }

    /// The first slot at or after `from` whose `meta` bit equals `value`.
    fn next_matching(&self, meta: Meta, value: bool, from: u64) -> Option<u64> {
        let word = |block| {
            let bits = self.meta_word(meta, block);
            if value {
                bits
            } else {
                !bits
            }
        };
        let mut block = from / SLOTS_PER_BLOCK;
        if block >= self.block_count() {
            return None;
        }
        let mut bits = word(block) & (u64::MAX << (from % 64));
        loop {
            if bits != 0 {
                return Some(block * SLOTS_PER_BLOCK + u64::from(bits.trailing_zeros()));
            }
            block += 1;
            if block >= self.block_count() {
                return None;
            }
            bits = word(block);
        }
    }
}

/// The bits `low..high` of a word (`low <= high <= 64`).
fn bit_range(low: u32, high: u32) -> u64 {
    let below = |bit: u32| u64::MAX.checked_shl(bit).map_or(u64::MAX, |above| !above);
    below(high) & !below(low)
}

/// Remainders are at most 58 bits wide (`R <= 2^64 / 64`), so the shift cannot overflow.
fn remainder_mask(bits: u32) -> u64 {
    (1 << bits) - 1
}

/// The position of the `n`-th (from 0) set bit of `bits`, which has more than `n` set bits.
///
/// Broadword (Vigna, "Broadword Implementation of Rank/Select Queries", 2008): per-byte
/// popcounts summed by a multiply locate the byte, then a short loop the bit. Runs in dense
/// clusters have many run ends per word, where clearing bits one at a time would take dozens of
/// dependent steps.
fn select_bit(bits: u64, n: u32) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let mut counts = bits - ((bits >> 1) & 0x5555_5555_5555_5555);
    counts = (counts & 0x3333_3333_3333_3333) + ((counts >> 2) & 0x3333_3333_3333_3333);
    counts = (counts + (counts >> 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    // Byte i: set bits in bytes 0..=i (at most 64, so the high bit of each byte stays clear).
    let cumulative = counts.wrapping_mul(ONES);
    // Bytes whose cumulative count is at most n lie before the byte holding the bit.
    let before = (((u64::from(n) * ONES) | HIGHS) - cumulative) & HIGHS;
    let byte_start = before.count_ones() * 8;
    let skipped = ((cumulative << 8) >> byte_start) & 0xff;
    let mut byte = (bits >> byte_start) & 0xff;
    for _ in 0..u64::from(n) - skipped {
        byte &= byte - 1;
    }
    u64::from(byte_start) + u64::from(byte.trailing_zeros())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remainders_of_every_width_round_trip_without_touching_neighbours() {
        for bits in 0..=58 {
            let mut table = SlotTable::new(2, bits).unwrap();
            let mask = remainder_mask(bits);
            let value = |slot: u64| slot.wrapping_mul(0x9e37_79b9_7f4a_7c15) & mask;
            for slot in 0..table.slot_count() {
                table.set_remainder(slot, value(slot));
            }
            for slot in 0..table.slot_count() {
                assert_eq!(
                    table.remainder(slot),
                    value(slot),
                    "width {bits} slot {slot}"
                );
            }
            table.set_remainder(70, mask);
            table.set_remainder(70, 0);
            assert_eq!(table.remainder(69), value(69));
            assert_eq!(table.remainder(70), 0);
            assert_eq!(table.remainder(71), value(71));
            // Metadata words are untouched by remainders.
            assert!((0..table.slot_count()).all(|slot| !table.is_used(slot)));
        }
    }

    #[test]
    fn select_finds_every_set_bit() {
        let mut state = 0x1234_5678_9abc_def0u64;
        let mut words = vec![u64::MAX, 1, 1 << 63, 0x8000_0000_0000_0001, 0xff00];
        for _ in 0..2_000 {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            words.push(state & (state >> 7) | (state << 13));
        }
        for word in words {
            let positions: Vec<u64> = (0..64).filter(|bit| word >> bit & 1 == 1).collect();
            for (n, &position) in positions.iter().enumerate() {
                assert_eq!(select_bit(word, n as u32), position, "{word:#x} bit {n}");
            }
        }
    }

    #[test]
    fn scans_cross_blocks() {
        let mut table = SlotTable::new(3, 5).unwrap();
        for slot in 10..150 {
            table.set_used(slot);
        }
        assert_eq!(table.first_unused_from(0), Some(0));
        assert_eq!(table.first_unused_from(10), Some(150));
        for slot in 0..table.slot_count() {
            table.set_used(slot);
        }
        assert_eq!(table.first_unused_from(0), None);
        for slot in [3, 64, 65, 130, 191] {
            table.set_occupied(slot);
            table.set_runend(slot, true);
        }
        assert_eq!(table.next_occupied_from(66), Some(130));
        assert_eq!(table.next_occupied_from(192), None);
        assert_eq!(table.nth_runend_from(0, 0), Some(3));
        assert_eq!(table.nth_runend_from(4, 1), Some(65));
        assert_eq!(table.nth_runend_from(4, 3), Some(191));
        assert_eq!(table.nth_runend_from(4, 4), None);
    }

    /// Runs of quotients 10, 12 and 70 in slots 10..=11, 12..=80 and 81..=149.
    #[test]
    fn open_runs_count_back_to_the_last_unused_slot() {
        let mut table = SlotTable::new(3, 5).unwrap();
        for slot in 10..150 {
            table.set_used(slot);
        }
        for (quotient, end) in [(10, 11), (12, 80), (70, 149)] {
            table.set_occupied(quotient);
            table.set_runend(end, true);
        }
        let open: Vec<u64> = [10, 11, 12, 69, 70, 80, 81, 149]
            .iter()
            .map(|&slot| table.open_runs_at(slot))
            .collect();
        assert_eq!(open, [1, 1, 1, 1, 2, 2, 1, 1]);

        // No unused slot before: the scan stops at slot 0. An unused slot in bit 63 of the
        // previous word hides everything before it.
        let mut table = SlotTable::new(2, 5).unwrap();
        for slot in (0..=5).chain(64..=70) {
            table.set_used(slot);
        }
        for (quotient, end) in [(0, 5), (64, 70)] {
            table.set_occupied(quotient);
            table.set_runend(end, true);
        }
        assert_eq!(table.open_runs_at(3), 1);
        assert_eq!(table.open_runs_at(66), 1);
    }

    /// The word-wise shift against a slot-by-slot one, across block boundaries and widths.
    #[test]
    fn shift_up_matches_moving_slot_by_slot() {
        for bits in [0, 1, 5, 7, 13, 58] {
            for (from, to) in [
                (0, 0),
                (3, 9),
                (60, 70),
                (63, 64),
                (0, 63),
                (62, 191),
                (64, 191),
                (10, 130),
            ] {
                let mut table = SlotTable::new(3, bits).unwrap();
                let mask = remainder_mask(bits);
                for slot in 0..table.slot_count() {
                    table.set_remainder(slot, slot.wrapping_mul(0x9e37_79b9_7f4a_7c15) & mask);
                    table.set_runend(slot, slot % 3 == 0);
                }
                let mut expected = table.clone();
                for slot in (from..to).rev() {
                    let remainder = expected.remainder(slot);
                    expected.set_remainder(slot + 1, remainder);
                    let runend = expected.is_runend(slot);
                    expected.set_runend(slot + 1, runend);
                }
                expected.set_used(to);
                table.shift_up(from, to);
                assert_eq!(table, expected, "width {bits}, slots {from}..{to}");
            }
        }
    }

    #[test]
    fn bit_ranges() {
        assert_eq!(bit_range(0, 64), u64::MAX);
        assert_eq!(bit_range(0, 0), 0);
        assert_eq!(bit_range(64, 64), 0);
        assert_eq!(bit_range(3, 5), 0b11000);
        assert_eq!(bit_range(63, 64), 1 << 63);
    }

    #[test]
    fn shift_up_moves_remainders_and_run_ends() {
        let mut table = SlotTable::new(2, 7).unwrap();
        for slot in 60..68 {
            table.set_used(slot);
            table.set_remainder(slot, slot);
        }
        table.set_runend(63, true);
        table.set_runend(67, true);
        table.shift_up(62, 68);
        assert_eq!(
            (60..69).map(|s| table.remainder(s)).collect::<Vec<_>>(),
            [60, 61, 62, 62, 63, 64, 65, 66, 67]
        );
        assert!(table.is_runend(64) && table.is_runend(68));
        assert!(!table.is_runend(67) && !table.is_runend(63));
        assert!(table.is_used(68));
    }

    #[test]
    fn growing_adds_empty_blocks() {
        let mut table = SlotTable::new(1, 9).unwrap();
        table.set_remainder(63, 511);
        table.grow_to(3).unwrap();
        assert_eq!(table.slot_count(), 192);
        assert_eq!(table.remainder(63), 511);
        assert!((64..192).all(|slot| table.remainder(slot) == 0 && !table.is_used(slot)));
        assert!(SlotTable::new(u64::MAX / 2, 9).is_err());
    }
}
