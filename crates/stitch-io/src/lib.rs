//! Layer 1 of StitchDB: the `Disk` trait and its implementations.
//!
//! Every byte StitchDB stores goes through a [`Disk`]. Nothing above this layer touches the
//! file system directly, so tests can swap the real file for [`MemDisk`] or for [`SimDisk`],
//! the deterministic fault injector that simulates crashes (unsynced writes dropped, reordered
//! or torn at 512-byte sectors), I/O errors and full disks.
//! [`CountingDisk`] wraps any of them to count (and hook) the requests the layers above make;
//! [`CrashingDisk`] captures crash images of a [`SimDisk`] at random requests, for crash tests.

mod counting;
mod crashing;
mod error;
mod file;
mod mem;
mod per_thread;
mod sim;
mod sys;

pub use counting::{CountingDisk, DiskRequest};
pub use crashing::{CrashImage, CrashingDisk};
pub use error::{IoError, IoErrorKind, IoOp, Result};
pub use file::{FileDisk, LockMode};
pub use mem::MemDisk;
pub use per_thread::{read_direct, spin_for_reads, write_direct};
pub use sim::{SimConfig, SimDisk, SimStats};

/// The room on the device under a [`Disk`] (see [`Disk::space`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Space {
    /// Bytes the file system would still give to new blocks of the disk.
    pub available: u64,
    /// Bytes the device holds in all.
    pub total: u64,
}

/// The unit a disk writes atomically: a write may be torn at these boundaries by a crash.
pub const SECTOR_SIZE: u64 = 512;

/// A block device: what StitchDB needs of a file, a raw device or a simulated disk.
///
/// Writes become durable only at the next [`Disk::sync`]; until then a crash may keep any
/// subset of them, each possibly torn at [`SECTOR_SIZE`] boundaries.
pub trait Disk: Send + Sync + std::fmt::Debug {
    /// Reads exactly `buf.len()` bytes at `offset`. Reading past [`Disk::len`] is an error.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    /// Reads exactly `len` bytes at `offset` into a new vector. Disks that can read into
    /// uninitialized memory (files) skip zeroing it first, a pass over the buffer that is a
    /// noticeable part of reading a 4 KiB block the page cache already holds.
    fn read_vec_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0; len];
        self.read_at(offset, &mut buf)?;
        Ok(buf)
    }
    /// Reads pieces of `lens` bytes lying back to back from `offset`, each into a vector of
    /// its own: one request for all of them. Disks that can scatter (files, with `preadv`)
    /// read them without first reading into one buffer and copying the pieces out.
    fn read_vecs_at(&self, offset: u64, lens: &[usize]) -> Result<Vec<Vec<u8>>> {
        let all = self.read_vec_at(offset, lens.iter().sum())?;
        let mut at = 0;
        Ok(lens
            .iter()
            .map(|&len| {
                at += len;
                all[at - len..at].to_vec()
            })
            .collect())
    }
    /// Writes all of `data` at `offset`. Writing past [`Disk::len`] is an error: grow first.
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()>;
    /// Writes `parts` back to back from `offset`: one write of their concatenation (a crash
    /// may keep any subset of its sectors). Disks that can gather (files, with `pwritev`)
    /// write them without first copying them into one buffer.
    fn write_parts_at(&self, offset: u64, parts: &[&[u8]]) -> Result<()> {
        self.write_at(offset, &parts.concat())
    }
    /// A barrier: every write issued before it is durable when it returns.
    fn sync(&self) -> Result<()>;
    /// A hint, not a barrier: start sending the bytes written at `offset..offset + len` to
    /// the device now, without waiting, so that the next [`Disk::sync`] has less left to
    /// write and returns sooner. Disks with nothing to gain ignore it.
    fn start_writeback(&self, _offset: u64, _len: u64) {}
    /// The current size in bytes.
    fn len(&self) -> u64;
    /// True when the disk has no bytes at all.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Grows the disk to `new_len` bytes (new bytes read as zero). Shrinking is a no-op.
    fn grow(&self, new_len: u64) -> Result<()>;
    /// Releases the space of a byte range. It reads as zeros afterwards where the device can
    /// punch holes (files on Linux file systems, `MemDisk`, `SimDisk`); elsewhere the old bytes
    /// may remain, so callers must never rely on the contents of a punched range.
    fn punch_hole(&self, offset: u64, len: u64) -> Result<()>;
    /// Gives a byte range within the disk blocks of its own, so that writes into it cannot
    /// fail for want of space: a full device says so here (`NoSpace`), before anything is
    /// written. Disks whose bytes are all theirs already (memory, simulated disks, block
    /// devices, file systems that cannot allocate ahead) do nothing.
    fn allocate(&self, _offset: u64, _len: u64) -> Result<()> {
        Ok(())
    }
    /// The room left on the device the disk lives on, for a disk that shares it with others
    /// and takes blocks as it is written (a file): what its file system would still give
    /// it. `None` for disks whose bytes are all theirs already, or that cannot tell (memory,
    /// block devices, simulated disks without a modelled file system).
    fn space(&self) -> Option<Space> {
        None
    }
    /// A short human-readable name for error messages ("file /srv/a.store", "simdisk").
    fn describe(&self) -> String;
}
