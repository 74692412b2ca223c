//! The two superblocks in zone 0, written alternately.
//!
//! A superblock fits in one 512-byte sector, so a crash cannot tear it: each slot holds either
//! a whole old or a whole new superblock, or (on a fresh disk) garbage that fails the checksum.

use crate::{ExtentAddr, Result, ZoneError};

/// The on-disk format this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;
const MAGIC: &[u8; 8] = b"STITCHDB";
pub(crate) const SUPERBLOCK_LEN: usize = 512;
/// Byte offsets of the two slots (separate blocks, so they are separate patches).
pub(crate) const SLOT_OFFSETS: [u64; 2] = [0, 4096];

/// The root of a store: where to start reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Superblock {
    /// Grows by one with every superblock written; the newer valid slot wins at open.
    pub seq: u64,
    /// Bytes per zone.
    pub zone_size: u64,
    /// Bytes per block of the block cache.
    pub block_size: u32,
    /// The upper layer's root extent (the manifest), if one was written yet.
    pub root: Option<ExtentAddr>,
}

/// What one superblock slot holds (for `check`, which reports a damaged slot even when the
/// other is good).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotState {
    /// A valid superblock that belongs in this slot.
    Valid(Superblock),
    /// Not a valid superblock: why.
    Damaged(String),
}

/// Why a slot holding nothing but zeros is not valid: a slot creation had not written yet
/// when it was cut short, or damage.
pub const SLOT_ALL_ZEROS: &str = "all zeros";

/// Reads and decodes both superblock slots of `cache`'s disk: `(byte offset, state)` each.
pub fn read_slots(cache: &stitch_patch::BlockCache) -> Result<Vec<(u64, SlotState)>> {
    let disk_len = cache.disk().len();
    let mut slots = Vec::with_capacity(SLOT_OFFSETS.len());
    for (slot, &offset) in SLOT_OFFSETS.iter().enumerate() {
        if offset + SUPERBLOCK_LEN as u64 > disk_len {
            let why = format!("the store is {disk_len} bytes long: the slot is cut off");
            slots.push((offset, SlotState::Damaged(why)));
            continue;
        }
        let mut buf = vec![0u8; SUPERBLOCK_LEN];
        cache.read(offset, &mut buf)?;
        let state = match Superblock::decode(&buf) {
            Ok(Some(sb)) if sb.slot() == slot => SlotState::Valid(sb),
            Ok(Some(sb)) => SlotState::Damaged(format!(
                "holds superblock seq {}, which belongs in the other slot",
                sb.seq
            )),
            Ok(None) if buf.iter().all(|&b| b == 0) => SlotState::Damaged(SLOT_ALL_ZEROS.into()),
            Ok(None) => SlotState::Damaged("bad magic or checksum".into()),
            Err(e) => SlotState::Damaged(e.to_string()),
        };
        slots.push((offset, state));
    }
    Ok(slots)
}

impl Superblock {
    pub(crate) fn slot(&self) -> usize {
        (self.seq % 2) as usize
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(SUPERBLOCK_LEN);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.extend_from_slice(&self.zone_size.to_le_bytes());
        out.extend_from_slice(&self.block_size.to_le_bytes());
        out.push(self.root.is_some() as u8);
        self.root
            .unwrap_or(ExtentAddr {
                zone: 0,
                offset: 0,
                len: 0,
            })
            .encode(&mut out);
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out.resize(SUPERBLOCK_LEN, 0);
        out
    }

    /// Decodes slot `slot`; `Ok(None)` for a slot that holds no superblock (never written,
    /// or torn/corrupt: the other slot is then used). A valid superblock of another format
    /// version is an error.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Option<Superblock>> {
        if bytes.len() < SUPERBLOCK_LEN || &bytes[..8] != MAGIC {
            return Ok(None);
        }
        const BODY: usize = 8 + 4 + 8 + 8 + 4 + 1 + ExtentAddr::ENCODED_LEN;
        let stored = u32::from_le_bytes([
            bytes[BODY],
            bytes[BODY + 1],
            bytes[BODY + 2],
            bytes[BODY + 3],
        ]);
        if crc32c::crc32c(&bytes[..BODY]) != stored {
            return Ok(None);
        }
        let u32_at =
            |i: usize| u32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
        let u64_at = |i: usize| {
            let mut w = [0; 8];
            w.copy_from_slice(&bytes[i..i + 8]);
            u64::from_le_bytes(w)
        };
        let version = u32_at(8);
        if version != FORMAT_VERSION {
            return Err(ZoneError::Version {
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        let has_root = bytes[32] == 1;
        let root = ExtentAddr::decode(&bytes[33..]).filter(|_| has_root);
        Ok(Some(Superblock {
            seq: u64_at(12),
            zone_size: u64_at(20),
            block_size: u32_at(28),
            root,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn superblock_round_trips_with_and_without_root() {
        for root in [
            None,
            Some(ExtentAddr {
                zone: 3,
                offset: 4096,
                len: 77,
            }),
        ] {
            let sb = Superblock {
                seq: 9,
                zone_size: 1 << 23,
                block_size: 4096,
                root,
            };
            let bytes = sb.encode();
            assert_eq!(bytes.len(), SUPERBLOCK_LEN);
            assert_eq!(Superblock::decode(&bytes).unwrap(), Some(sb));
        }
    }

    #[test]
    fn damage_makes_a_slot_empty_and_another_version_an_error() {
        let sb = Superblock {
            seq: 1,
            zone_size: 1 << 23,
            block_size: 4096,
            root: None,
        };
        let good = sb.encode();
        for i in 0..49 {
            let mut bad = good.clone();
            bad[i] ^= 1;
            assert_eq!(Superblock::decode(&bad).unwrap(), None, "flipped byte {i}");
        }
        let mut future = good.clone();
        future[8] = 2;
        let crc = crc32c::crc32c(&future[..45]);
        future[45..49].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(
            Superblock::decode(&future),
            Err(ZoneError::Version { found: 2, .. })
        ));
    }
}
