//! A [`Disk`] wrapper that counts the requests reaching the disk below, for tests and
//! examples that check what the layers above ask of a disk (how many syncs a group commit
//! costs, how many reads a merge makes) or act at a chosen request (crash the disk, race its
//! user).

use crate::{Disk, Result};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// One request a [`CountingDisk`] passed on and saw succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskRequest {
    /// A read (of one buffer, or of several back to back) of `len` bytes at `offset`.
    Read {
        /// Where it started.
        offset: u64,
        /// Bytes read.
        len: u64,
    },
    /// A write (of one buffer, or of several back to back) of `len` bytes at `offset`.
    Write {
        /// Where it started.
        offset: u64,
        /// Bytes written.
        len: u64,
    },
    /// A barrier.
    Sync,
}

type Hook = Box<dyn FnMut(DiskRequest) + Send>;

/// Wraps a disk, counting the reads, writes and syncs that succeed, optionally making each
/// sync take a while (as a real device's barrier does), and calling a hook after each of
/// those requests (to look at the disk, crash it, or race its user at that point).
///
/// A request of several buffers (`read_vecs_at`, `write_parts_at`) counts as one, as it is one
/// request to the disk below, which receives it whole. Requests the hook itself makes do not
/// call the hook again. Growing and punching holes are passed on uncounted.
pub struct CountingDisk {
    inner: Arc<dyn Disk>,
    sync_delay: Duration,
    reads: AtomicU64,
    writes: AtomicU64,
    syncs: AtomicU64,
    hook: Mutex<Option<Hook>>,
}

impl CountingDisk {
    /// Wraps `inner`, with all counts zero, no sync delay and no hook.
    pub fn new(inner: Arc<dyn Disk>) -> Self {
        CountingDisk {
            inner,
            sync_delay: Duration::ZERO,
            reads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
            hook: Mutex::new(None),
        }
    }

    /// Makes every sync sleep `delay` before it is passed on.
    pub fn with_sync_delay(mut self, delay: Duration) -> Self {
        self.sync_delay = delay;
        self
    }

    /// The disk below.
    pub fn inner(&self) -> &Arc<dyn Disk> {
        &self.inner
    }

    /// Reads that succeeded.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::SeqCst)
    }

    /// Writes that succeeded.
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::SeqCst)
    }

    /// Syncs that succeeded.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::SeqCst)
    }

    /// Calls `hook` after every read, write and sync that succeeds (replacing any hook set
    /// before).
    pub fn set_hook(&self, hook: impl FnMut(DiskRequest) + Send + 'static) {
        *self.hook.lock() = Some(Box::new(hook));
    }

    fn after(&self, request: DiskRequest) {
        let counter = match request {
            DiskRequest::Read { .. } => &self.reads,
            DiskRequest::Write { .. } => &self.writes,
            DiskRequest::Sync => &self.syncs,
        };
        counter.fetch_add(1, Ordering::SeqCst);
        // Taken out while it runs, so it may use the disk (through the layers above) itself.
        let taken = self.hook.lock().take();
        if let Some(mut hook) = taken {
            hook(request);
            self.hook.lock().get_or_insert(hook);
        }
    }
}

impl std::fmt::Debug for CountingDisk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CountingDisk")
            .field("inner", &self.inner)
            .field("reads", &self.reads())
            .field("writes", &self.writes())
            .field("syncs", &self.syncs())
            .finish_non_exhaustive()
    }
}

impl Disk for CountingDisk {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.inner.read_at(offset, buf)?;
        let len = buf.len() as u64;
        self.after(DiskRequest::Read { offset, len });
        Ok(())
    }

    fn read_vec_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let buf = self.inner.read_vec_at(offset, len)?;
        let len = len as u64;
        self.after(DiskRequest::Read { offset, len });
        Ok(buf)
    }

    fn read_vecs_at(&self, offset: u64, lens: &[usize]) -> Result<Vec<Vec<u8>>> {
        let bufs = self.inner.read_vecs_at(offset, lens)?;
        let len = lens.iter().map(|&l| l as u64).sum();
        self.after(DiskRequest::Read { offset, len });
        Ok(bufs)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.inner.write_at(offset, data)?;
        let len = data.len() as u64;
        self.after(DiskRequest::Write { offset, len });
        Ok(())
    }

    fn write_parts_at(&self, offset: u64, parts: &[&[u8]]) -> Result<()> {
        self.inner.write_parts_at(offset, parts)?;
        let len = parts.iter().map(|p| p.len() as u64).sum();
        self.after(DiskRequest::Write { offset, len });
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        if !self.sync_delay.is_zero() {
            std::thread::sleep(self.sync_delay);
        }
        self.inner.sync()?;
        self.after(DiskRequest::Sync);
        Ok(())
    }

    fn start_writeback(&self, offset: u64, len: u64) {
        self.inner.start_writeback(offset, len);
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn grow(&self, new_len: u64) -> Result<()> {
        self.inner.grow(new_len)
    }

    fn punch_hole(&self, offset: u64, len: u64) -> Result<()> {
        self.inner.punch_hole(offset, len)
    }

    fn allocate(&self, offset: u64, len: u64) -> Result<()> {
        self.inner.allocate(offset, len)
    }

    fn space(&self) -> Option<crate::Space> {
        self.inner.space()
    }

    fn describe(&self) -> String {
        format!("counting {}", self.inner.describe())
    }
}
