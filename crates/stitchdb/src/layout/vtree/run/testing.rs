//! Runs for the run module's unit tests: a store on a memory disk that counts its reads, runs
//! of given entries or of one entry per block, and what a run holds.

use super::{Run, RunBuilder, Storage};
use crate::entry::{Entry, EntryRef};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use stitch_io::{CountingDisk, DiskRequest, MemDisk};
use stitch_patch::{BlockCache, CacheConfig};
use stitch_zone::{Stream, ZoneConfig, ZoneStore};

/// A store on a memory disk without a read cache, and the disk, which counts the requests
/// made of it.
pub(crate) fn counted_storage() -> (Arc<CountingDisk>, Arc<Storage>) {
    counted_storage_cached(0)
}

/// [`counted_storage`] with a read cache of `cache_bytes`.
pub(crate) fn counted_storage_cached(cache_bytes: usize) -> (Arc<CountingDisk>, Arc<Storage>) {
    let disk = Arc::new(CountingDisk::new(Arc::new(MemDisk::new(0))));
    let cache = Arc::new(BlockCache::new(disk.clone(), CacheConfig::default()));
    let zones = Arc::new(ZoneStore::create(cache, ZoneConfig::default()).unwrap());
    (disk, Storage::new(zones, cache_bytes, false))
}

/// A counter of the bytes read from `disk` from now on.
pub(crate) fn bytes_read(disk: &CountingDisk) -> Arc<AtomicU64> {
    let bytes = Arc::new(AtomicU64::new(0));
    let counted = bytes.clone();
    disk.set_hook(move |r| {
        if let DiskRequest::Read { len, .. } = r {
            counted.fetch_add(len, Ordering::Relaxed);
        }
    });
    bytes
}

/// A run of one-block entries, written to the disk: for each range `r`, key `r`/`suffix`
/// (`r` big-endian) with a value of 4,090 bytes `suffix`.
pub(crate) fn run_of(storage: &Arc<Storage>, id: u64, suffix: u8, ranges: u32) -> Arc<Run> {
    let entries: Vec<Entry> = (0..ranges)
        .map(|r| Entry {
            key: [r.to_be_bytes().as_slice(), &[suffix]].concat(),
            seq: u64::from(suffix),
            value: Some(vec![suffix; 4090]),
        })
        .collect();
    run_from(storage, id, &entries)
}

/// A run of `entries` (in key order, newest version first), written to the disk.
pub(crate) fn run_from(storage: &Arc<Storage>, id: u64, entries: &[Entry]) -> Arc<Run> {
    let mut builder = RunBuilder::new(storage, id, 0, Stream::Flush);
    for e in entries {
        builder
            .add(EntryRef {
                key: &e.key,
                seq: e.seq,
                value: e.value.as_deref(),
            })
            .unwrap();
    }
    let (run, patch) = builder.finish(None).unwrap().unwrap();
    storage.zones.cache().flush_patch(patch).unwrap();
    run
}

/// Every entry of `run`, block by block.
pub(crate) fn entries_of(run: &Run) -> Vec<Entry> {
    (0..run.blocks().len())
        .flat_map(|i| run.read_block(i).unwrap())
        .collect()
}
