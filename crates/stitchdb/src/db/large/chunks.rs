//! Chunk I/O: writing a value's chunks as extents of their own stream, and reading byte
//! ranges back from them.

use super::reference::{Chunk, Reference};
use super::registry::{Pins, Registry};
use crate::layout::vtree::run::write_behind::WriteBehind;
use crate::{Error, Result};
use std::sync::Arc;
use stitch_zone::{ExtentAddr, ExtentKind, FramedBatch, Stream, ZoneStore, EXTENT_HEADER_LEN};

/// Bytes of chunks appended (and made durable, with one sync) together: what a large write
/// holds in memory.
const GROUP_BYTES: u64 = 32 << 20;

/// The payload of a chunk in a store with `zone_size`-byte zones: an eighth of a zone less
/// the extent header, so eight chunk extents fill a zone exactly.
pub(crate) fn chunk_len(zone_size: u64) -> u64 {
    zone_size / 8 - stitch_zone::EXTENT_HEADER_LEN as u64
}

/// Writes `count` chunks of `chunk_len` bytes (the last holding the rest of `len`), whose
/// bytes `fill(i, buf)` puts in `buf` (cleared, with room), durably: the caller's commit may
/// name them once this returns. The chunks are tracked and pinned by `pins`. On an error the
/// chunks written are given back.
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_chunks(
    zones: &ZoneStore,
    write_behind: bool,
    registry: &Arc<Registry>,
    pins: &mut Pins,
    len: u64,
    chunk_len: u64,
    only: impl Fn(usize) -> bool,
    mut fill: impl FnMut(usize, &mut Vec<u8>) -> Result<()>,
) -> Result<Vec<Option<Chunk>>> {
    let count = len.div_ceil(chunk_len) as usize;
    let mut out: Vec<Option<Chunk>> = vec![None; count];
    let mut written: Vec<ExtentAddr> = Vec::new();
    // Each group is flushed while the next is read and appended (on a helper thread where
    // the store flushes runs so: not in crash tests, which want one order of writes).
    let mut flusher = WriteBehind::new(zones.cache().clone(), write_behind);
    let result = (|| {
        let mut buf = Vec::with_capacity(chunk_len as usize);
        let per_group = (GROUP_BYTES / chunk_len).max(1) as usize;
        let todo: Vec<usize> = (0..count).filter(|&i| only(i)).collect();
        // One buffer for every group (appending empties it and keeps its memory).
        let mut batch = FramedBatch::with_capacity((per_group as u64 * (chunk_len + 32)) as usize);
        for group in todo.chunks(per_group) {
            let mut crcs = Vec::with_capacity(group.len());
            for &i in group {
                buf.clear();
                fill(i, &mut buf)?;
                let start = i as u64 * chunk_len;
                let want = ((start + chunk_len).min(len) - start) as usize;
                if buf.len() != want {
                    return Err(Error::LargeValue(format!(
                        "chunk {i} has {} bytes, not {want}",
                        buf.len()
                    )));
                }
                crcs.push(crc32c::crc32c(&buf));
                batch.push(&buf);
            }
            let (addrs, patches) =
                zones.append_batch(Stream::Large, ExtentKind::LARGE_VALUE, &mut batch, &[])?;
            registry.adopt(&addrs);
            pins.add(addrs.iter().copied());
            written.extend(addrs.iter().copied());
            // Out of the cache's memory while the next group is made: one sync for the
            // group's zones.
            if !patches.is_empty() {
                flusher.start_all()?;
            }
            for ((&i, addr), crc) in group.iter().zip(addrs).zip(crcs) {
                out[i] = Some(Chunk { addr, crc });
            }
        }
        // Durable before anything names them (the commit's log record).
        Ok(flusher.wait()?)
    })();
    match result {
        Ok(()) => Ok(out),
        Err(e) => {
            // The flush in flight ends before the chunks it writes are given back.
            let _ = flusher.wait();
            registry.discard(zones, &written);
            Err(e)
        }
    }
}

/// Reads chunk `i` of `r` whole and checks it against the reference: straight from the disk
/// (a chunk is durable before anything names it), one read. Returns the extent whole: the
/// chunk's bytes start at [`EXTENT_HEADER_LEN`] (not moved to the front: one copy less).
pub(crate) fn read_chunk(zones: &ZoneStore, r: &Reference, i: usize) -> Result<Vec<u8>> {
    let c = r.chunks[i];
    let place = || format!("chunk {i} of {}, {}", r.len, c.addr);
    zones
        .read_durable_framed_checked(c.addr, ExtentKind::LARGE_VALUE, c.crc)
        .map_err(|e| Error::from(e).within("large value chunk", place()))
}

/// Bytes `offset..offset + len` of the value (those up to its end), one chunk read each.
pub(crate) fn read_range(
    zones: &ZoneStore,
    r: &Reference,
    offset: u64,
    len: u64,
) -> Result<Vec<u8>> {
    let end = offset.saturating_add(len).min(r.len);
    let mut out = Vec::with_capacity(end.saturating_sub(offset) as usize);
    for i in r.chunks_of(offset, end) {
        let framed = read_chunk(zones, r, i)?;
        let range = r.chunk_range(i);
        let from = (offset.max(range.start) - range.start) as usize;
        let to = (end.min(range.end) - range.start) as usize;
        out.extend_from_slice(&framed[EXTENT_HEADER_LEN + from..EXTENT_HEADER_LEN + to]);
    }
    Ok(out)
}
