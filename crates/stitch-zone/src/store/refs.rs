//! The reference counts of live extents, kept per zone in offset order.
//!
//! A merge changes the counts of thousands of blocks at a time, in the order they lie on the
//! disk (a run's blocks were appended one after another), under the zone store's lock that
//! every append also takes. In one hash table over every extent of the store (half a
//! million for 2 GiB of 4 KiB blocks) each of those changes would be a cache miss, which made
//! reference counting a large share of a merge's time. Here a zone's extents lie in one sorted
//! vector, and a lookup first tries the slot after the one found last, so a walk in disk
//! order costs a comparison an extent.
//!
//! Appends into a zone come in offset order (one appender per stream, and a zone belongs to
//! one stream while open), so inserting is pushing. An extent whose count reaches zero stays
//! as a dead slot until dead slots outnumber live ones in its zone, then the zone's vector
//! is compacted: removing from the middle of a vector at every release would move the rest
//! each time.

use crate::extent::ExtentKind;
use crate::store::ZoneId;
use std::cell::Cell;

/// One extent of a zone: where it starts, its length (header included), its kind, and its
/// count (zero: dead, kept until its zone is compacted).
#[derive(Debug, Clone, Copy)]
pub(super) struct Slot {
    pub offset: u32,
    pub len: u32,
    pub refs: u32,
    pub kind: ExtentKind,
}

#[derive(Debug, Default)]
struct ZoneRefs {
    slots: Vec<Slot>,
    dead: usize,
    /// The slot found last: the next lookup tries the one after it first.
    hint: Cell<usize>,
}

impl ZoneRefs {
    fn find(&self, offset: u32) -> Result<usize, usize> {
        let h = self.hint.get();
        for i in [h + 1, h] {
            if self.slots.get(i).is_some_and(|s| s.offset == offset) {
                self.hint.set(i);
                return Ok(i);
            }
        }
        let found = self.slots.binary_search_by_key(&offset, |s| s.offset);
        if let Ok(i) = found {
            self.hint.set(i);
        }
        found
    }

    fn compact(&mut self) {
        self.slots.retain(|s| s.refs > 0);
        self.dead = 0;
        self.hint.set(0);
    }
}

/// The counts of every live extent, by zone.
#[derive(Debug, Default)]
pub(super) struct ExtentRefs {
    zones: Vec<ZoneRefs>,
    live: usize,
}

impl ExtentRefs {
    /// How many extents are live.
    pub fn len(&self) -> usize {
        self.live
    }

    /// The live extent at `offset` of `zone`.
    pub fn get(&self, zone: ZoneId, offset: u32) -> Option<&Slot> {
        let z = self.zones.get(zone as usize)?;
        let i = z.find(offset).ok()?;
        Some(&z.slots[i]).filter(|s| s.refs > 0)
    }

    /// The live extent at `offset` of `zone`, to change its count (see [`release`]).
    ///
    /// [`release`]: Self::release
    pub fn get_mut(&mut self, zone: ZoneId, offset: u32) -> Option<&mut Slot> {
        let z = self.zones.get_mut(zone as usize)?;
        let i = z.find(offset).ok()?;
        Some(&mut z.slots[i]).filter(|s| s.refs > 0)
    }

    /// Records a new extent with `refs` references (at least one) in place of whatever was
    /// recorded at its offset.
    pub fn insert(&mut self, zone: ZoneId, offset: u32, len: u32, kind: ExtentKind, refs: u32) {
        debug_assert!(refs > 0);
        let z = self.zone_mut(zone);
        let slot = Slot {
            offset,
            len,
            refs,
            kind,
        };
        let at_end = z.slots.last().is_none_or(|s| s.offset < offset);
        let added = if at_end {
            z.slots.push(slot);
            true
        } else {
            match z.find(offset) {
                Ok(i) => {
                    let revived = z.slots[i].refs == 0;
                    if revived {
                        z.dead -= 1;
                    }
                    z.slots[i] = slot;
                    revived
                }
                Err(i) => {
                    z.slots.insert(i, slot);
                    true
                }
            }
        };
        if added {
            self.live += 1;
        }
    }

    /// Notes that the extent at `offset` of `zone`, whose count was just brought to zero
    /// through [`get_mut`](Self::get_mut), is dead.
    pub fn release(&mut self, zone: ZoneId, offset: u32) {
        let Some(z) = self.zones.get_mut(zone as usize) else {
            return;
        };
        if let Ok(i) = z.find(offset) {
            debug_assert_eq!(z.slots[i].refs, 0);
            z.dead += 1;
            self.live -= 1;
            if z.dead > 64 && z.dead * 2 > z.slots.len() {
                z.compact();
            }
        }
    }

    /// Forgets every extent of `zone` (a zone opened for new extents holds none of its old).
    pub fn clear_zone(&mut self, zone: ZoneId) {
        if let Some(z) = self.zones.get_mut(zone as usize) {
            self.live -= z.slots.len() - z.dead;
            *z = ZoneRefs::default();
        }
    }

    /// The live extents of `zone` as `(offset, len)`, in offset order.
    pub fn live_in(&self, zone: ZoneId) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.zones
            .get(zone as usize)
            .into_iter()
            .flat_map(|z| &z.slots)
            .filter(|s| s.refs > 0)
            .map(|s| (s.offset, s.len))
    }

    fn zone_mut(&mut self, zone: ZoneId) -> &mut ZoneRefs {
        let i = zone as usize;
        if self.zones.len() <= i {
            self.zones.resize_with(i + 1, ZoneRefs::default);
        }
        &mut self.zones[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const K: ExtentKind = ExtentKind(7);

    /// Random inserts, increments and releases against a map: the counts, the live count and
    /// each zone's live extents agree throughout, through compactions.
    #[test]
    fn agrees_with_a_map() {
        let mut refs = ExtentRefs::default();
        let mut model: BTreeMap<(ZoneId, u32), (u32, u32)> = BTreeMap::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut write_ptr = [0u32; 4];
        for step in 0..200_000 {
            let zone = (next() % 4) as ZoneId;
            match next() % 10 {
                // Appends mostly at the end, sometimes anywhere (an extent seen at open).
                0..=3 => {
                    let offset = if next() % 8 == 0 {
                        (next() % 4096) as u32 * 16
                    } else {
                        write_ptr[zone as usize] += 16 * (1 + (next() % 4) as u32);
                        write_ptr[zone as usize]
                    };
                    if model.contains_key(&(zone, offset)) {
                        continue;
                    }
                    let len = 16 + (next() % 100) as u32;
                    refs.insert(zone, offset, len, K, 1);
                    model.insert((zone, offset), (len, 1));
                }
                4..=5 => {
                    let Some((&(z, o), _)) = model.range((zone, 0)..).next() else {
                        continue;
                    };
                    refs.get_mut(z, o).unwrap().refs += 1;
                    model.get_mut(&(z, o)).unwrap().1 += 1;
                }
                6..=8 => {
                    let pick = next() % 4096 * 16;
                    let Some((&(z, o), _)) = model.range((zone, pick as u32)..).next() else {
                        continue;
                    };
                    let slot = refs.get_mut(z, o).unwrap();
                    slot.refs -= 1;
                    if slot.refs == 0 {
                        refs.release(z, o);
                    }
                    let m = model.get_mut(&(z, o)).unwrap();
                    m.1 -= 1;
                    if m.1 == 0 {
                        model.remove(&(z, o));
                    }
                }
                _ => {
                    if next() % 100 == 0 {
                        refs.clear_zone(zone);
                        model.retain(|&(z, _), _| z != zone);
                        write_ptr[zone as usize] = 0;
                    }
                }
            }
            if step % 1000 == 0 || step == 199_999 {
                assert_eq!(refs.len(), model.len(), "step {step}");
                for z in 0..4 {
                    let live: Vec<(u32, u32)> = refs.live_in(z).collect();
                    let want: Vec<(u32, u32)> = model
                        .range((z, 0)..(z + 1, 0))
                        .map(|(&(_, o), &(len, _))| (o, len))
                        .collect();
                    assert_eq!(live, want, "zone {z} at step {step}");
                }
                for (&(z, o), &(len, n)) in &model {
                    let s = refs.get(z, o).unwrap();
                    assert_eq!((s.len, s.refs), (len, n));
                }
            }
        }
        // A dead extent is not found.
        let (z, o) = (0, 1 << 30);
        refs.insert(z, o, 16, K, 1);
        let s = refs.get_mut(z, o).unwrap();
        s.refs -= 1;
        refs.release(z, o);
        assert!(refs.get(z, o).is_none() && refs.get_mut(z, o).is_none());
    }
}
