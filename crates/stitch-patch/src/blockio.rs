//! Moving whole blocks between the cache and the disk, each run of adjacent blocks in one
//! request (hundreds of megabytes of data extents go through here).

use crate::plan::BlockWrite;
use stitch_io::Disk;

/// The largest request: big enough that a request costs little per byte, small enough that
/// the buffer assembling it stays modest.
const MAX_REQUEST: usize = 1 << 20;

/// Splits `items` (sorted by block) into runs of adjacent blocks of at most `max_len` items.
fn runs<T>(items: &[T], block: impl Fn(&T) -> u64, max_len: usize) -> impl Iterator<Item = &[T]> {
    let mut rest = items;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut n = 1;
        while n < rest.len() && n < max_len && block(&rest[n]) == block(&rest[n - 1]) + 1 {
            n += 1;
        }
        let (run, tail) = rest.split_at(n);
        rest = tail;
        Some(run)
    })
}

fn blocks_per_request(block_size: usize) -> usize {
    (MAX_REQUEST / block_size).max(1)
}

/// Reads `blocks` (sorted, distinct). Bytes of a block past the disk's end read as zeros.
pub(crate) fn read_blocks(
    disk: &dyn Disk,
    block_size: usize,
    blocks: &[u64],
) -> stitch_io::Result<Vec<(u64, Vec<u8>)>> {
    let disk_len = disk.len();
    let mut loaded = Vec::with_capacity(blocks.len());
    for run in runs(blocks, |&b| b, blocks_per_request(block_size)) {
        let start = run[0] * block_size as u64;
        let mut buf = vec![0u8; run.len() * block_size];
        let on_disk = disk_len.saturating_sub(start).min(buf.len() as u64) as usize;
        if on_disk > 0 {
            disk.read_at(start, &mut buf[..on_disk])?;
        }
        if run.len() == 1 {
            loaded.push((run[0], buf));
        } else {
            loaded.extend(
                run.iter()
                    .zip(buf.chunks_exact(block_size))
                    .map(|(&b, bytes)| (b, bytes.to_vec())),
            );
        }
    }
    Ok(loaded)
}

/// Writes the images of `writes` (sorted by block). Bytes past the disk's end are dropped:
/// no patch reaches there (writes are checked against the disk's length, which only grows).
pub(crate) fn write_blocks(
    disk: &dyn Disk,
    block_size: usize,
    writes: &[BlockWrite],
) -> stitch_io::Result<()> {
    let disk_len = disk.len();
    for run in runs(writes, |w| w.block, blocks_per_request(block_size)) {
        let start = run[0].block * block_size as u64;
        let mut left = disk_len
            .saturating_sub(start)
            .min((run.len() * block_size) as u64) as usize;
        // The blocks' images as they are, gathered by the disk (no copy into one buffer).
        let parts: Vec<&[u8]> = run
            .iter()
            .map(|w| {
                let part = &w.image[..left.min(w.image.len())];
                left -= part.len();
                part
            })
            .collect();
        disk.write_parts_at(start, &parts)?;
        let written = parts.iter().map(|p| p.len() as u64).sum();
        disk.start_writeback(start, written);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_split_at_gaps_and_at_the_request_limit() {
        let blocks = [1, 2, 3, 5, 6, 9];
        let split: Vec<&[u64]> = runs(&blocks, |&b| b, 2).collect();
        assert_eq!(split, vec![&[1, 2][..], &[3], &[5, 6], &[9]]);
    }
}
