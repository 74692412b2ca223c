//! Test doubles and helpers shared by the integration tests.
// Each test file compiles this module on its own and uses only part of it.
#![allow(dead_code)]

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use stitch_io::{Disk, SimConfig, SimDisk};
use stitch_patch::{BlockCache, CacheConfig};

pub const BLOCK: u64 = 4096;

/// A disk request the cache made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskOp {
    Read { offset: u64, len: u64 },
    Write { offset: u64, len: u64 },
    Sync,
}

type Hook = Box<dyn FnMut(DiskOp) + Send>;

/// Wraps a disk, counting the writes and syncs that succeed and calling a hook after each
/// request (to look at the disk, crash it, or race the cache at that point). Requests the
/// hook itself makes do not call it again.
pub struct CountingDisk {
    inner: Arc<dyn Disk>,
    writes: AtomicU64,
    syncs: AtomicU64,
    hook: Mutex<Option<Hook>>,
}

impl CountingDisk {
    pub fn new(inner: Arc<dyn Disk>) -> Arc<CountingDisk> {
        Arc::new(CountingDisk {
            inner,
            writes: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
            hook: Mutex::new(None),
        })
    }

    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::SeqCst)
    }

    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::SeqCst)
    }

    pub fn set_hook(&self, hook: impl FnMut(DiskOp) + Send + 'static) {
        *self.hook.lock() = Some(Box::new(hook));
    }

    fn after(&self, op: DiskOp) {
        // Taken out while it runs, so it may use the disk (through the cache) itself.
        let taken = self.hook.lock().take();
        if let Some(mut hook) = taken {
            hook(op);
            self.hook.lock().get_or_insert(hook);
        }
    }
}

impl std::fmt::Debug for CountingDisk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CountingDisk")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl Disk for CountingDisk {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> stitch_io::Result<()> {
        self.inner.read_at(offset, buf)?;
        self.after(DiskOp::Read {
            offset,
            len: buf.len() as u64,
        });
        Ok(())
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> stitch_io::Result<()> {
        self.inner.write_at(offset, data)?;
        self.writes.fetch_add(1, Ordering::SeqCst);
        self.after(DiskOp::Write {
            offset,
            len: data.len() as u64,
        });
        Ok(())
    }

    fn sync(&self) -> stitch_io::Result<()> {
        self.inner.sync()?;
        self.syncs.fetch_add(1, Ordering::SeqCst);
        self.after(DiskOp::Sync);
        Ok(())
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn grow(&self, new_len: u64) -> stitch_io::Result<()> {
        self.inner.grow(new_len)
    }

    fn punch_hole(&self, offset: u64, len: u64) -> stitch_io::Result<()> {
        self.inner.punch_hole(offset, len)
    }

    fn describe(&self) -> String {
        format!("counting {}", self.inner.describe())
    }
}

pub fn sim_disk(blocks: u64, seed: u64) -> Arc<SimDisk> {
    Arc::new(SimDisk::new(SimConfig {
        seed,
        len: blocks * BLOCK,
        capacity: None,
    }))
}

pub fn cache_on(disk: Arc<dyn Disk>) -> Arc<BlockCache> {
    Arc::new(BlockCache::new(disk, CacheConfig::default()))
}

/// A cache keeping only `clean_blocks` clean blocks, so reads go to the disk often.
pub fn small_cache_on(disk: Arc<dyn Disk>, clean_blocks: usize) -> Arc<BlockCache> {
    Arc::new(BlockCache::new(
        disk,
        CacheConfig {
            block_size: BLOCK as usize,
            clean_blocks,
        },
    ))
}

/// A counting SimDisk of `blocks` blocks and a cache on it.
pub fn setup(blocks: u64) -> (Arc<SimDisk>, Arc<CountingDisk>, Arc<BlockCache>) {
    let sim = sim_disk(blocks, 7);
    let counting = CountingDisk::new(sim.clone());
    let cache = cache_on(counting.clone());
    (sim, counting, cache)
}

pub fn read_disk(disk: &dyn Disk, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0; len];
    disk.read_at(offset, &mut buf).expect("read the disk");
    buf
}

pub fn read_cache(cache: &BlockCache, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0; len];
    cache
        .read(offset, &mut buf)
        .expect("read through the cache");
    buf
}
