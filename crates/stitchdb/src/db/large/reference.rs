//! A large value's reference: what the log, the memtable and the runs hold of it instead of
//! its bytes (docs/format.md, "Large values").

use crate::codec::{put_varint, Reader};
use crate::{Error, Result};
use stitch_zone::ExtentAddr;

/// The reference format's version.
const REFERENCE_VERSION: u8 = 1;

/// One chunk of a value: the extent holding its bytes and their CRC-32C (which also tells a
/// stale extent at a reused address from the one written).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Chunk {
    pub addr: ExtentAddr,
    pub crc: u32,
}

/// A large value: `len` bytes cut into chunks of `chunk_len` bytes (the last may be shorter),
/// chunk `i` holding bytes `i * chunk_len ..`. A chunk is found by arithmetic alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reference {
    pub len: u64,
    pub chunk_len: u64,
    pub chunks: Vec<Chunk>,
}

impl Reference {
    /// The byte range of the value chunk `i` holds.
    pub fn chunk_range(&self, i: usize) -> std::ops::Range<u64> {
        let start = i as u64 * self.chunk_len;
        start..(start + self.chunk_len).min(self.len)
    }

    /// The chunks holding bytes `offset..end` (clamped to the value).
    pub fn chunks_of(&self, offset: u64, end: u64) -> std::ops::Range<usize> {
        let end = end.min(self.len);
        if offset >= end {
            return 0..0;
        }
        (offset / self.chunk_len) as usize..end.div_ceil(self.chunk_len) as usize
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + self.chunks.len() * 16);
        out.push(REFERENCE_VERSION);
        put_varint(&mut out, self.len);
        put_varint(&mut out, self.chunk_len);
        put_varint(&mut out, self.chunks.len() as u64);
        for c in &self.chunks {
            c.addr.encode(&mut out);
            out.extend_from_slice(&c.crc.to_le_bytes());
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes and checks a reference read from `place` (its checksum, the chunk count
    /// against the length); damage is an error naming the place.
    pub fn decode(bytes: &[u8], place: impl std::fmt::Display) -> Result<Reference> {
        Self::parse(bytes).map_err(|detail| Error::Corrupt {
            what: "large value reference",
            place: place.to_string(),
            detail,
        })
    }

    fn parse(bytes: &[u8]) -> std::result::Result<Reference, String> {
        let Some(body_len) = bytes.len().checked_sub(4) else {
            return Err("too short".into());
        };
        let (body, crc) = bytes.split_at(body_len);
        if crc32c::crc32c(body).to_le_bytes() != crc {
            return Err("checksum mismatch".into());
        }
        let mut r = Reader::new(body);
        let version = r.u8()?;
        if version != REFERENCE_VERSION {
            return Err(format!("unknown version {version}"));
        }
        let len = r.varint()?;
        let chunk_len = r.varint()?;
        let count = r.varint()?;
        if chunk_len == 0 || len.div_ceil(chunk_len) != count {
            return Err(format!(
                "{count} chunks of {chunk_len} bytes for {len} bytes"
            ));
        }
        let mut chunks = Vec::with_capacity(count.min(1 << 20) as usize);
        for _ in 0..count {
            let addr = ExtentAddr::decode(r.take(ExtentAddr::ENCODED_LEN)?).ok_or("short")?;
            let crc = r.take(4)?;
            let crc = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
            chunks.push(Chunk { addr, crc });
        }
        if !r.is_empty() {
            return Err("bytes left over".into());
        }
        let reference = Reference {
            len,
            chunk_len,
            chunks,
        };
        for (i, c) in reference.chunks.iter().enumerate() {
            let want = reference.chunk_range(i);
            if c.addr.payload_len() as u64 != want.end - want.start {
                return Err(format!("chunk {i} holds {} bytes", c.addr.payload_len()));
            }
        }
        Ok(reference)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Reference {
        let chunk = |zone: u32, len: u32| Chunk {
            addr: ExtentAddr {
                zone,
                offset: 0,
                len: len + 16,
            },
            crc: zone * 7,
        };
        Reference {
            len: 2500,
            chunk_len: 1000,
            chunks: vec![chunk(1, 1000), chunk(2, 1000), chunk(3, 500)],
        }
    }

    #[test]
    fn a_reference_round_trips_and_finds_its_chunks_by_arithmetic() {
        let r = sample();
        assert_eq!(Reference::decode(&r.encode(), "test").unwrap(), r);
        assert_eq!(r.chunks_of(0, 1), 0..1);
        assert_eq!(r.chunks_of(999, 1001), 0..2);
        assert_eq!(r.chunks_of(2400, 9000), 2..3);
        assert_eq!(r.chunks_of(2500, 2600), 0..0);
        assert_eq!(r.chunk_range(2), 2000..2500);
    }

    #[test]
    fn damage_to_a_reference_is_an_error_never_a_value() {
        let bytes = sample().encode();
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x20;
            assert!(Reference::decode(&bad, "test").is_err(), "byte {i}");
        }
        assert!(Reference::decode(&bytes[..bytes.len() - 1], "test").is_err());
    }
}
