//! The zone layer's decoders as plain functions over bytes, for the fuzz targets (`fuzz/`).
//! Each returns an error for bytes it rejects and must never panic, whatever the bytes; what
//! it accepts it also checks against the encoder. Not part of the stable API.

use crate::extent::{self, ExtentAddr, ExtentKind};
use crate::superblock::Superblock;
use crate::{Result, ZoneError};

/// Decodes a superblock slot: `Ok(None)` for a slot that holds none (never written, torn or
/// corrupt), an error for a valid superblock of another format version. A superblock it
/// accepts must re-encode to a slot that decodes to the same superblock.
pub fn decode_superblock(bytes: &[u8]) -> Result<Option<Superblock>> {
    let decoded = Superblock::decode(bytes)?;
    if let Some(superblock) = decoded {
        let again = Superblock::decode(&superblock.encode())?;
        assert_eq!(again, Some(superblock), "a superblock re-encodes to itself");
    }
    Ok(decoded)
}

/// The bytes of a superblock slot, as the store writes them.
pub fn encode_superblock(superblock: &Superblock) -> Vec<u8> {
    superblock.encode()
}

/// Checks an extent as a read of it does: the input is the address the reader holds
/// ([`ExtentAddr::ENCODED_LEN`] bytes), the kind it expects (one byte), then the bytes read.
pub fn decode_extent(bytes: &[u8]) -> Result<()> {
    let addr = ExtentAddr::decode(bytes).ok_or_else(|| ZoneError::Corrupt {
        what: "extent address",
        place: "fuzz input".into(),
        detail: format!("{} bytes is too short", bytes.len()),
    })?;
    let rest = &bytes[ExtentAddr::ENCODED_LEN..];
    let Some((&kind, extent)) = rest.split_first() else {
        return Err(ZoneError::Corrupt {
            what: "extent kind",
            place: "fuzz input".into(),
            detail: "missing".into(),
        });
    };
    extent::verify(addr, ExtentKind(kind), extent, 0)
}

/// The input [`decode_extent`] takes for an extent of `kind` holding `payload` at `addr`
/// (whose length must be the header's plus the payload's).
pub fn encode_extent(addr: ExtentAddr, kind: ExtentKind, payload: &[u8]) -> Vec<u8> {
    let mut input = Vec::new();
    addr.encode(&mut input);
    input.push(kind.0);
    input.extend_from_slice(&extent::encode_header(addr, kind, payload));
    input.extend_from_slice(payload);
    input
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EXTENT_HEADER_LEN;

    #[test]
    fn accepts_what_the_encoders_write_and_rejects_its_damage() {
        let superblock = Superblock {
            seq: 9,
            zone_size: 1 << 20,
            block_size: 4096,
            root: Some(ExtentAddr {
                zone: 2,
                offset: 32,
                len: 100,
            }),
        };
        let slot = encode_superblock(&superblock);
        assert_eq!(decode_superblock(&slot).ok(), Some(Some(superblock)));
        for len in 0..slot.len() {
            assert_eq!(
                decode_superblock(&slot[..len]).ok(),
                Some(None),
                "cut to {len}"
            );
        }
        let payload = b"payload of the extent";
        let addr = ExtentAddr {
            zone: 3,
            offset: 64,
            len: (EXTENT_HEADER_LEN + payload.len()) as u32,
        };
        let input = encode_extent(addr, ExtentKind::MANIFEST, payload);
        assert!(decode_extent(&input).is_ok());
        for len in 0..input.len() {
            assert!(decode_extent(&input[..len]).is_err(), "cut to {len}");
        }
        // Every byte the checks cover: the header's first twelve (its last four are not read)
        // and the payload.
        let header = ExtentAddr::ENCODED_LEN + 1;
        let covered = (header..header + 12).chain(header + EXTENT_HEADER_LEN..input.len());
        for at in covered {
            let mut damaged = input.clone();
            damaged[at] ^= 0x40;
            assert!(decode_extent(&damaged).is_err(), "byte {at} flipped");
        }
    }

    #[test]
    fn addresses_shorter_than_a_header_are_rejected_without_panicking() {
        for len in 0..EXTENT_HEADER_LEN as u32 {
            let addr = ExtentAddr {
                zone: 1,
                offset: 0,
                len,
            };
            let mut input = encode_extent(addr, ExtentKind::RUN_BLOCK, b"");
            input.truncate(ExtentAddr::ENCODED_LEN + 1 + len as usize);
            assert!(decode_extent(&input).is_err(), "length {len}");
        }
    }
}
