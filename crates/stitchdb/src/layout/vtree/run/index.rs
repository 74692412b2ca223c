//! A run's secondary index: first key, last key, entry count and extent of every block.
//! Kept in memory while the run is open and persisted beside the blocks as index extents.
//!
//! Index extents store each handle relative to the one before it: the first key as what it
//! does not share with the previous block's last key at either end, the last key as what it
//! does not share with its own first key, and the address as "right after the previous block"
//! when it is. Versions 1 to 3 are read, version 3 is written; the byte format of each is
//! specified in `docs/format.md` ("Run index").

use super::block::shared_prefix;
use crate::codec::{put_bytes, put_varint, Reader};
use stitch_zone::ExtentAddr;

/// Whole keys and addresses.
const INDEX_V1: u8 = 1;
/// Keys after their shared prefixes, addresses relative to the previous block.
const INDEX_V2: u8 = 2;
/// First keys without the start and end they share with the previous last key; last keys of
/// one-entry blocks implied.
const INDEX_V3: u8 = 3;

/// Worst-case bytes of a handle's varints in either version.
const HANDLE_OVERHEAD: usize = 8 * 10;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockHandle {
    pub first_key: Vec<u8>,
    pub last_key: Vec<u8>,
    pub entries: u64,
    pub addr: ExtentAddr,
}

impl BlockHandle {
    /// Whether the block holds versions of one key only (its first key is its last): what
    /// the block holds is then known from the handle, unread.
    pub fn holds_one_key(&self) -> bool {
        self.first_key == self.last_key
    }

    /// An upper bound of the handle's encoded size.
    fn max_encoded_len(&self) -> usize {
        self.first_key.len() + self.last_key.len() + HANDLE_OVERHEAD
    }
}

/// Splits the handles into index extent payloads of at most `max_chunk` bytes each (a handle
/// larger than that gets a chunk of its own). Each chunk decodes on its own.
pub fn encode_chunks(handles: &[BlockHandle], max_chunk: usize) -> Vec<Vec<u8>> {
    let mut chunks = Vec::new();
    let mut start = 0;
    while start < handles.len() || chunks.is_empty() {
        let mut size = 16;
        let mut end = start;
        while end < handles.len()
            && (end == start || size + handles[end].max_encoded_len() <= max_chunk)
        {
            size += handles[end].max_encoded_len();
            end += 1;
        }
        chunks.push(encode_chunk(&handles[start..end]));
        start = end;
    }
    chunks
}

fn encode_chunk(handles: &[BlockHandle]) -> Vec<u8> {
    let mut out =
        Vec::with_capacity(16 + handles.iter().map(|h| h.max_encoded_len()).sum::<usize>());
    out.push(INDEX_V3);
    put_varint(&mut out, handles.len() as u64);
    let mut prev: Option<&BlockHandle> = None;
    for h in handles {
        put_affixed(
            &mut out,
            prev.map_or(&[][..], |p| &p.last_key),
            &h.first_key,
        );
        put_varint(&mut out, h.entries);
        if h.entries != 1 {
            put_shared(&mut out, &h.first_key, &h.last_key);
        }
        put_address(&mut out, h, prev);
        prev = Some(h);
    }
    out
}

/// `h`'s block address: 0 if the block lies right after `prev`'s, else its zone + 1 and
/// offset; then its length.
fn put_address(out: &mut Vec<u8>, h: &BlockHandle, prev: Option<&BlockHandle>) {
    match prev {
        Some(p) if h.addr.follows(&p.addr) => put_varint(out, 0),
        _ => {
            put_varint(out, h.addr.zone as u64 + 1);
            put_varint(out, h.addr.offset as u64);
        }
    }
    put_varint(out, h.addr.len as u64);
}

/// `key` as the lengths of the prefix it shares with `base` and of the suffix the rest of it
/// shares with the rest of `base`, then what lies between.
fn put_affixed(out: &mut Vec<u8>, base: &[u8], key: &[u8]) {
    let prefix = shared_prefix(base, key);
    let (base, key) = (&base[prefix..], &key[prefix..]);
    let suffix = base
        .iter()
        .rev()
        .zip(key.iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    put_varint(out, prefix as u64);
    put_varint(out, suffix as u64);
    put_bytes(out, &key[..key.len() - suffix]);
}

/// `key` as the length of the prefix it shares with `base`, then the rest.
fn put_shared(out: &mut Vec<u8>, base: &[u8], key: &[u8]) {
    let shared = shared_prefix(base, key);
    put_varint(out, shared as u64);
    put_bytes(out, &key[shared..]);
}

/// Decodes one index extent's payload (either version), appending its handles to `out`.
pub fn decode_chunk(payload: &[u8], out: &mut Vec<BlockHandle>) -> Result<(), String> {
    let mut r = Reader::new(payload);
    let version = r.u8()?;
    let n = r.len()?;
    let chunk_start = out.len();
    for i in 0..n {
        let prev = out[chunk_start..].last();
        let handle = match version {
            INDEX_V1 => decode_v1(&mut r)?,
            INDEX_V2 | INDEX_V3 => {
                decode_relative(&mut r, prev, version).map_err(|e| format!("block {i}: {e}"))?
            }
            _ => return Err(format!("unsupported index version {version}")),
        };
        if handle.first_key > handle.last_key {
            return Err(format!("block {i}: first key sorts after last key"));
        }
        if let Some(prev) = out.last() {
            if prev.last_key > handle.first_key {
                return Err(format!("block {i} overlaps the block before it"));
            }
        }
        out.push(handle);
    }
    if !r.is_empty() {
        return Err("trailing bytes after the last handle".into());
    }
    Ok(())
}

fn decode_v1(r: &mut Reader) -> Result<BlockHandle, String> {
    let first_key = r.bytes()?.to_vec();
    let last_key = r.bytes()?.to_vec();
    let entries = r.varint()?;
    let addr = ExtentAddr::decode(r.take(ExtentAddr::ENCODED_LEN)?).ok_or("short address")?;
    Ok(BlockHandle {
        first_key,
        last_key,
        entries,
        addr,
    })
}

/// A handle of version 2 or 3, whose keys and address may refer to `prev`'s.
fn decode_relative(
    r: &mut Reader,
    prev: Option<&BlockHandle>,
    version: u8,
) -> Result<BlockHandle, String> {
    let prev_last = prev.map_or(&[][..], |p| &p.last_key);
    let (first_key, entries, last_key) = if version == INDEX_V2 {
        let first_key = get_shared(r, prev_last)?;
        let last_key = get_shared(r, &first_key)?;
        (first_key, r.varint()?, last_key)
    } else {
        let first_key = get_affixed(r, prev_last)?;
        match r.varint()? {
            0 => return Err("a block of no entries".into()),
            1 => (first_key.clone(), 1, first_key),
            n => {
                let last_key = get_shared(r, &first_key)?;
                (first_key, n, last_key)
            }
        }
    };
    let (zone, offset) = match (r.varint()?, prev) {
        (0, Some(p)) => (p.addr.zone as u64, p.addr.aligned_end()),
        (0, None) => return Err("address relative to no block".into()),
        (zone_plus_one, _) => (zone_plus_one - 1, r.varint()?),
    };
    let len = r.varint()?;
    let field = |v: u64, what: &str| u32::try_from(v).map_err(|_| format!("{what} {v} too large"));
    Ok(BlockHandle {
        first_key,
        last_key,
        entries,
        addr: ExtentAddr {
            zone: field(zone, "zone")?,
            offset: field(offset, "offset")?,
            len: field(len, "length")?,
        },
    })
}

fn get_affixed(r: &mut Reader, base: &[u8]) -> Result<Vec<u8>, String> {
    let (prefix, suffix) = (r.varint()?, r.varint()?);
    let middle = r.bytes()?;
    let fits = prefix
        .checked_add(suffix)
        .is_some_and(|n| n <= base.len() as u64);
    if !fits {
        return Err(format!(
            "shares {prefix} bytes at the start and {suffix} at the end with a {}-byte key",
            base.len()
        ));
    }
    let (prefix, suffix) = (prefix as usize, suffix as usize);
    Ok([&base[..prefix], middle, &base[base.len() - suffix..]].concat())
}

fn get_shared(r: &mut Reader, base: &[u8]) -> Result<Vec<u8>, String> {
    let shared = r.varint()?;
    let rest = r.bytes()?;
    let prefix = usize::try_from(shared)
        .ok()
        .and_then(|n| base.get(..n))
        .ok_or_else(|| format!("shares {shared} bytes with a {}-byte key", base.len()))?;
    Ok([prefix, rest].concat())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn handle(first: &[u8], last: &[u8], entries: u64, addr: (u32, u32, u32)) -> BlockHandle {
        BlockHandle {
            first_key: first.to_vec(),
            last_key: last.to_vec(),
            entries,
            addr: ExtentAddr {
                zone: addr.0,
                offset: addr.1,
                len: addr.2,
            },
        }
    }

    fn decode_all(chunks: &[Vec<u8>]) -> Result<Vec<BlockHandle>, String> {
        let mut out = Vec::new();
        for c in chunks {
            decode_chunk(c, &mut out)?;
        }
        Ok(out)
    }

    /// Version 1, as written before version 2.
    fn encode_v1(handles: &[BlockHandle]) -> Vec<u8> {
        let mut out = vec![INDEX_V1];
        put_varint(&mut out, handles.len() as u64);
        for h in handles {
            put_bytes(&mut out, &h.first_key);
            put_bytes(&mut out, &h.last_key);
            put_varint(&mut out, h.entries);
            h.addr.encode(&mut out);
        }
        out
    }

    /// Version 2, as written before version 3.
    fn encode_v2(handles: &[BlockHandle]) -> Vec<u8> {
        let mut out = vec![INDEX_V2];
        put_varint(&mut out, handles.len() as u64);
        let mut prev: Option<&BlockHandle> = None;
        for h in handles {
            put_shared(
                &mut out,
                prev.map_or(&[][..], |p| &p.last_key),
                &h.first_key,
            );
            put_shared(&mut out, &h.first_key, &h.last_key);
            put_varint(&mut out, h.entries);
            put_address(&mut out, h, prev);
            prev = Some(h);
        }
        out
    }

    /// Sorted, non-overlapping handles (a one-entry block's last key is its first); addresses
    /// mostly right after each other, sometimes in another zone or after a gap.
    fn handles() -> impl Strategy<Value = Vec<BlockHandle>> {
        let key = proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), any::<u8>()], 0..12);
        let entries = prop_oneof![Just(1u64), 1u64..300];
        let block = (key.clone(), key, entries, 0u8..4, 20u32..9000);
        proptest::collection::vec(block, 0..60).prop_map(|blocks| {
            let mut keys: Vec<Vec<u8>> = blocks
                .iter()
                .flat_map(|(a, b, ..)| [a.clone(), b.clone()])
                .collect();
            keys.sort();
            let (mut zone, mut offset) = (3u32, 0u32);
            blocks
                .iter()
                .enumerate()
                .map(|(i, &(_, _, entries, jump, len))| {
                    match jump {
                        0 => {
                            zone += 1;
                            offset = 0;
                        }
                        1 => offset += 4096,
                        _ => {}
                    }
                    let last = &keys[2 * i + usize::from(entries > 1)];
                    let h = handle(&keys[2 * i], last, entries, (zone, offset, len));
                    offset = h.addr.aligned_end() as u32;
                    h
                })
                .collect()
        })
    }

    proptest! {
        #[test]
        fn handles_round_trip_through_chunks(hs in handles(), max_chunk in 1usize..2000) {
            let chunks = encode_chunks(&hs, max_chunk);
            prop_assert_eq!(decode_all(&chunks).unwrap(), hs.clone());
            // And versions 1 and 2 are still read.
            prop_assert_eq!(decode_all(&[encode_v2(&hs)]).unwrap(), hs.clone());
            prop_assert_eq!(decode_all(&[encode_v1(&hs)]).unwrap(), hs);
        }

        #[test]
        fn damaged_chunks_are_errors_not_panics(hs in handles(), at in any::<usize>(), byte in any::<u8>()) {
            let mut chunk = encode_chunks(&hs, usize::MAX).remove(0);
            let at = at % chunk.len();
            chunk[at] = byte;
            let _ = decode_all(&[chunk.clone()]);
            chunk.truncate(at);
            let _ = decode_all(&[chunk]);
        }
    }

    #[test]
    fn one_entry_blocks_of_db_bench_keys_take_under_10_bytes_a_handle() {
        // 16-byte db_bench keys (8-byte big-endian number, then '0's), one 4 KiB value a block,
        // each block right after the one before.
        let key = |n: u64| [&n.to_be_bytes()[..], b"00000000"].concat();
        let mut offset = 0;
        let hs: Vec<BlockHandle> = (1000..2000u64)
            .map(|n| {
                let h = handle(&key(n), &key(n), 1, (5, offset, 4121));
                offset = h.addr.aligned_end() as u32;
                h
            })
            .collect();
        let v3 = encode_chunks(&hs, usize::MAX).concat();
        assert!(v3.len() < 10 * hs.len(), "{} bytes", v3.len());
        assert!(encode_v2(&hs).len() > 16 * hs.len());
        assert!(encode_v1(&hs).len() > 45 * hs.len());
        assert_eq!(decode_all(&[v3]).unwrap(), hs);
    }

    #[test]
    fn first_keys_share_their_ends_with_the_previous_last_key() {
        let hs = vec![
            handle(b"user:0017:profile", b"user:0017:profile", 1, (4, 0, 100)),
            handle(b"user:0018:profile", b"user:0019:profile", 5, (4, 112, 100)),
            handle(
                b"user:0019:profiles",
                b"user:0020:profile",
                2,
                (4, 224, 100),
            ),
            handle(b"v", b"w", 2, (9, 0, 100)),
        ];
        let v3 = encode_chunks(&hs, usize::MAX).remove(0);
        // Against version 2: the one-entry block's implied last key saves 2 bytes, the second
        // first key's shared ":profile" 7 (8, less the length of the suffix); the other first
        // keys share no end and pay a byte each for saying so.
        assert_eq!(v3.len() + 6, encode_v2(&hs).len());
        assert_eq!(decode_all(&[v3]).unwrap(), hs);
    }

    #[test]
    fn a_relative_address_needs_a_block_before_it() {
        let mut chunk = vec![INDEX_V3];
        put_varint(&mut chunk, 1);
        put_affixed(&mut chunk, b"", b"a");
        put_varint(&mut chunk, 2); // entries
        put_shared(&mut chunk, b"a", b"b");
        put_varint(&mut chunk, 0); // "right after the previous block"
        put_varint(&mut chunk, 100);
        let err = decode_all(&[chunk]).unwrap_err();
        assert!(err.contains("relative to no block"), "{err}");
    }

    #[test]
    fn a_key_sharing_more_than_its_base_is_an_error() {
        let mut chunk = vec![INDEX_V2];
        put_varint(&mut chunk, 1);
        put_varint(&mut chunk, 3); // shares 3 bytes with the empty key
        put_bytes(&mut chunk, b"x");
        let err = decode_all(&[chunk]).unwrap_err();
        assert!(err.contains("shares 3 bytes"), "{err}");
        let mut chunk = vec![INDEX_V3];
        put_varint(&mut chunk, 2);
        put_affixed(&mut chunk, b"", b"abc");
        put_varint(&mut chunk, 1); // entries: the last key is the first
        put_varint(&mut chunk, 1); // zone 0
        put_varint(&mut chunk, 0);
        put_varint(&mut chunk, 100);
        put_varint(&mut chunk, 2); // shares 2 bytes at the start
        put_varint(&mut chunk, 2); // and 2 at the end with a 3-byte key
        put_bytes(&mut chunk, b"x");
        let err = decode_all(&[chunk]).unwrap_err();
        assert!(
            err.contains("block 1: shares 2 bytes at the start and 2 at the end"),
            "{err}"
        );
    }

    #[test]
    fn a_block_of_no_entries_is_an_error() {
        let mut chunk = vec![INDEX_V3];
        put_varint(&mut chunk, 1);
        put_affixed(&mut chunk, b"", b"a");
        put_varint(&mut chunk, 0);
        let err = decode_all(&[chunk]).unwrap_err();
        assert!(err.contains("no entries"), "{err}");
    }
}
