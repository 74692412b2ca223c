//! A regular file or a raw block device as a [`Disk`].

use crate::error::{check_range, IoError, IoErrorKind, IoOp, Result};
use crate::per_thread;
use crate::sys;
use crate::Disk;
use rustix::buffer::spare_capacity;
use rustix::fs::FlockOperation;
use rustix::io::Errno;
use std::fs::{File, OpenOptions};
use std::io::IoSlice;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// How a [`FileDisk`] is locked against other openers (`flock(2)` on the store itself, so a
/// raw block device is locked the same way as a file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// One writer and no readers: a second opener of either kind gets `IoErrorKind::Locked`.
    Exclusive,
    /// Any number of read-only openers, but no writer.
    Shared,
}

thread_local! {
    /// The buffer of this thread's direct reads, kept for the next: the device writes into
    /// memory already in use rather than into new pages.
    static DIRECT_SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The largest direct read whose buffer a thread keeps (a scan reads ahead up to 1 MiB);
/// a larger one gets a buffer of its own.
const SCRATCH_KEPT: usize = 4 << 20;

/// A store kept in a regular file or on a raw block device.
#[derive(Debug)]
pub struct FileDisk {
    file: File,
    path: PathBuf,
    block_device: bool,
    len: std::sync::atomic::AtomicU64,
    /// Serializes `grow`: two racing `set_len` calls could otherwise shrink the file.
    grow_lock: parking_lot::Mutex<()>,
    /// The store opened a second time with `O_DIRECT`, for the writes of threads that asked
    /// for it ([`write_direct`](crate::write_direct)) whose offset, lengths and buffers meet
    /// the device's alignment, and the reads of threads that asked for it
    /// ([`read_direct`](crate::read_direct)). `None` when read-only or when the file system
    /// does not offer direct I/O.
    direct: Option<DirectFile>,
}

/// A descriptor of the store opened with `O_DIRECT`, and the alignment its requests need.
#[derive(Debug)]
struct DirectFile {
    file: File,
    /// What offsets, lengths and buffer addresses must be multiples of (`STATX_DIOALIGN`'s
    /// larger figure: one check serves all three).
    align: usize,
}

impl DirectFile {
    /// Opens `path` for direct reads and writes, if its file system reports how to align
    /// them.
    fn open(path: &Path) -> Option<Self> {
        use rustix::fs::{statx, AtFlags, StatxFlags};
        let st = statx(
            rustix::fs::CWD,
            path,
            AtFlags::empty(),
            StatxFlags::DIOALIGN,
        )
        .ok()?;
        let (mem, offset) = (
            st.stx_dio_mem_align as usize,
            st.stx_dio_offset_align as usize,
        );
        // Alignments are powers of two; anything else is not one a buffer can be placed at.
        if st.stx_mask & StatxFlags::DIOALIGN.bits() == 0
            || !mem.is_power_of_two()
            || !offset.is_power_of_two()
        {
            return None;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .ok()?;
        Some(DirectFile {
            file,
            align: mem.max(offset),
        })
    }

    /// Reads pieces of `lens` bytes, back to back from `offset`, into an aligned buffer of
    /// this thread (one request for the aligned range around them), then copies each out:
    /// `None` if the file system refuses the read (`EINVAL`), which then goes through the
    /// page cache. A direct read first writes back any dirty page-cache pages of its range,
    /// so it sees what a buffered read would.
    fn read_pieces(&self, offset: u64, lens: &[usize]) -> std::io::Result<Option<Vec<Vec<u8>>>> {
        let total: u64 = lens.iter().map(|&l| l as u64).sum();
        if total == 0 {
            return Ok(Some(vec![Vec::new(); lens.len()]));
        }
        let a = self.align as u64;
        let start = offset / a * a;
        let span = ((offset + total).div_ceil(a) * a - start) as usize;
        let skip = (offset - start) as usize;
        if span > SCRATCH_KEPT {
            return self.read_through(&mut Vec::new(), start, span, skip, lens);
        }
        DIRECT_SCRATCH.with(|s| self.read_through(&mut s.borrow_mut(), start, span, skip, lens))
    }

    /// [`read_pieces`](Self::read_pieces) through `scratch` (grown to fit): `span` aligned
    /// bytes from `start`, the pieces from `skip` bytes into them.
    fn read_through(
        &self,
        scratch: &mut Vec<u8>,
        start: u64,
        span: usize,
        skip: usize,
        lens: &[usize],
    ) -> std::io::Result<Option<Vec<Vec<u8>>>> {
        if scratch.len() < span + self.align {
            *scratch = vec![0u8; span + self.align];
        }
        let skew = scratch.as_ptr().align_offset(self.align);
        let buf = &mut scratch[skew..skew + span];
        let mut got = 0;
        while got < span {
            match rustix::io::pread(&self.file, &mut buf[got..], start + got as u64) {
                Ok(0) => break,
                // Short only at the end of the file.
                Ok(n) if n % self.align != 0 => {
                    got += n;
                    break;
                }
                Ok(n) => got += n,
                Err(Errno::INTR) => {}
                Err(Errno::INVAL) if got == 0 => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
        let total: usize = lens.iter().sum();
        if got < skip + total {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let mut at = skip;
        Ok(Some(
            lens.iter()
                .map(|&l| {
                    let piece = buf[at..at + l].to_vec();
                    at += l;
                    piece
                })
                .collect(),
        ))
    }

    /// Whether a write of `iov` at `offset` meets the alignment direct I/O needs.
    fn fits(&self, offset: u64, iov: &[IoSlice<'_>]) -> bool {
        let a = self.align;
        offset % a as u64 == 0
            && iov
                .iter()
                .all(|p| p.len() % a == 0 && (p.as_ptr() as usize) % a == 0)
    }
}

impl FileDisk {
    /// Creates a new, empty store file, or takes over a raw block device. Fails if a file
    /// already exists at `path` (`create_new`, so two creators cannot both succeed).
    pub fn create(path: &Path) -> Result<Self> {
        let block_device =
            std::fs::metadata(path).is_ok_and(|meta| meta.file_type().is_block_device());
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(!block_device)
            .open(path)
            .map_err(|e| {
                IoError::from_os(IoOp::Open, format!("file {}", path.display()), 0, 0, e)
            })?;
        Self::finish(file, path, LockMode::Exclusive)
    }

    /// Opens an existing store, locked as `mode` says; read-only for [`LockMode::Shared`].
    pub fn open(path: &Path, mode: LockMode) -> Result<Self> {
        let describe = format!("file {}", path.display());
        let file = OpenOptions::new()
            .read(true)
            .write(mode == LockMode::Exclusive)
            .open(path)
            .map_err(|e| IoError::from_os(IoOp::Open, describe, 0, 0, e))?;
        Self::finish(file, path, mode)
    }

    fn finish(file: File, path: &Path, mode: LockMode) -> Result<Self> {
        let describe = format!("file {}", path.display());
        let op = match mode {
            LockMode::Exclusive => FlockOperation::NonBlockingLockExclusive,
            LockMode::Shared => FlockOperation::NonBlockingLockShared,
        };
        if let Err(e) = rustix::fs::flock(&file, op) {
            let kind = if e == Errno::WOULDBLOCK {
                IoErrorKind::Locked
            } else {
                IoErrorKind::Os(std::io::Error::from(e).to_string())
            };
            return Err(IoError::new(IoOp::Lock, describe, 0, 0, kind));
        }
        let meta = file
            .metadata()
            .map_err(|e| IoError::from_os(IoOp::Open, describe.clone(), 0, 0, e))?;
        let block_device = meta.file_type().is_block_device();
        let len = if block_device {
            // The size of a block device is where seeking to its end lands.
            use std::io::{Seek, SeekFrom};
            let mut f = &file;
            f.seek(SeekFrom::End(0))
                .map_err(|e| IoError::from_os(IoOp::Open, describe, 0, 0, e))?
        } else {
            meta.len()
        };
        let direct = match mode {
            LockMode::Exclusive => DirectFile::open(path),
            LockMode::Shared => None,
        };
        Ok(FileDisk {
            file,
            path: path.to_path_buf(),
            block_device,
            len: len.into(),
            grow_lock: Default::default(),
            direct,
        })
    }

    /// The path the store was opened at.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this is a raw block device rather than a regular file.
    pub fn is_block_device(&self) -> bool {
        self.block_device
    }

    /// The pieces of [`Disk::read_vecs_at`] read past the page cache, if this thread asked
    /// for that ([`read_direct`](crate::read_direct)) and the file system allows it; `None`
    /// to read them through the page cache.
    fn read_direct(&self, offset: u64, lens: &[usize]) -> std::io::Result<Option<Vec<Vec<u8>>>> {
        match &self.direct {
            Some(d) if per_thread::reads_direct() => d.read_pieces(offset, lens),
            _ => Ok(None),
        }
    }

    /// The alignment of offsets, lengths and buffers that writes bypassing the page cache
    /// need, or `None` if every write goes through it (opened read-only, or a file system
    /// without direct I/O).
    pub fn direct_write_alignment(&self) -> Option<usize> {
        self.direct.as_ref().map(|d| d.align)
    }
}

/// What one `pread`, `preadv` or `pwritev` returned: the bytes it moved, `None` if a signal
/// interrupted it (call again), or its error; `at_zero` when it moved nothing (the file ended,
/// or the device is full).
fn moved(r: std::io::Result<usize>, at_zero: std::io::ErrorKind) -> std::io::Result<Option<usize>> {
    match r {
        Ok(0) => Err(at_zero.into()),
        Ok(n) => Ok(Some(n)),
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Ok(None),
        Err(e) => Err(e),
    }
}

impl Disk for FileDisk {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        check_range(self, IoOp::Read, offset, buf.len() as u64, self.len())?;
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| IoError::from_os(IoOp::Read, self.describe(), offset, buf.len() as u64, e))
    }

    fn read_vec_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        check_range(self, IoOp::Read, offset, len as u64, self.len())?;
        let fail = |e| IoError::from_os(IoOp::Read, self.describe(), offset, len as u64, e);
        if let Some(mut pieces) = self.read_direct(offset, &[len]).map_err(fail)? {
            return Ok(pieces.pop().unwrap_or_default());
        }
        if let Some(limit) = per_thread::read_spin_limit(len) {
            if let Some(buf) = per_thread::spin_read(&self.file, offset, len, limit) {
                return Ok(buf);
            }
        }
        let mut buf = Vec::<u8>::with_capacity(len);
        while buf.len() < len {
            let at = offset + buf.len() as u64;
            // Into the unused capacity, which pread extends the length over: no zeroing first.
            let r = rustix::io::pread(&self.file, spare_capacity(&mut buf), at);
            moved(
                r.map_err(std::io::Error::from),
                std::io::ErrorKind::UnexpectedEof,
            )
            .map_err(fail)?;
        }
        // The capacity may exceed `len`, and a read fill past it.
        buf.truncate(len);
        Ok(buf)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.write_parts_at(offset, &[data])
    }

    fn read_vecs_at(&self, offset: u64, lens: &[usize]) -> Result<Vec<Vec<u8>>> {
        let total: u64 = lens.iter().map(|&l| l as u64).sum();
        check_range(self, IoOp::Read, offset, total, self.len())?;
        let fail = |e| IoError::from_os(IoOp::Read, self.describe(), offset, total, e);
        if let Some(pieces) = self.read_direct(offset, lens).map_err(fail)? {
            return Ok(pieces);
        }
        let mut bufs: Vec<Vec<u8>> = lens.iter().map(|&l| Vec::with_capacity(l)).collect();
        // What is left to read: bufs[part] from its length on, then the buffers after it.
        let (mut part, mut at) = (0, offset);
        while part < bufs.len() {
            if bufs[part].len() == lens[part] {
                part += 1;
                continue;
            }
            let r = sys::preadv_spare(&self.file, &mut bufs[part..], &lens[part..], at);
            if let Some(read) = moved(r, std::io::ErrorKind::UnexpectedEof).map_err(fail)? {
                at += read as u64;
            }
        }
        Ok(bufs)
    }

    fn write_parts_at(&self, offset: u64, parts: &[&[u8]]) -> Result<()> {
        let total: u64 = parts.iter().map(|p| p.len() as u64).sum();
        check_range(self, IoOp::Write, offset, total, self.len())?;
        let fail = |e| IoError::from_os(IoOp::Write, self.describe(), offset, total, e);
        // What is left to write: parts[part][skip..], then the parts after it.
        let (mut part, mut skip, mut at) = (0, 0, offset);
        while part < parts.len() {
            if parts[part].len() == skip {
                (part, skip) = (part + 1, 0);
                continue;
            }
            let iov: Vec<IoSlice<'_>> = parts[part..]
                .iter()
                .take(sys::MAX_IOVECS)
                .enumerate()
                .map(|(i, p)| IoSlice::new(if i == 0 { &p[skip..] } else { p }))
                .collect();
            let r = match &self.direct {
                // A file system that reported an alignment and still refuses it gets the
                // buffered write instead.
                Some(d) if per_thread::writes_direct() && d.fits(at, &iov) => {
                    match rustix::io::pwritev(&d.file, &iov, at) {
                        Err(Errno::INVAL) => rustix::io::pwritev(&self.file, &iov, at),
                        r => r,
                    }
                }
                _ => rustix::io::pwritev(&self.file, &iov, at),
            }
            .map_err(std::io::Error::from);
            let Some(mut written) = moved(r, std::io::ErrorKind::WriteZero).map_err(fail)? else {
                continue;
            };
            // Step past what was written (a short write ends anywhere).
            at += written as u64;
            while written > 0 {
                let left = parts[part].len() - skip;
                if written < left {
                    skip += written;
                    break;
                }
                written -= left;
                (part, skip) = (part + 1, 0);
            }
        }
        Ok(())
    }

    fn start_writeback(&self, offset: u64, len: u64) {
        sys::start_writeback(&self.file, offset, len);
    }

    fn sync(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| IoError::from_os(IoOp::Sync, self.describe(), 0, 0, e))
    }

    fn len(&self) -> u64 {
        self.len.load(std::sync::atomic::Ordering::Acquire)
    }

    fn grow(&self, new_len: u64) -> Result<()> {
        let _serial = self.grow_lock.lock();
        let len = self.len();
        if new_len <= len {
            return Ok(());
        }
        if self.block_device {
            return Err(IoError::new(
                IoOp::Grow,
                self.describe(),
                len,
                new_len - len,
                IoErrorKind::NoSpace,
            ));
        }
        self.file
            .set_len(new_len)
            .map_err(|e| IoError::from_os(IoOp::Grow, self.describe(), len, new_len - len, e))?;
        self.len
            .store(new_len, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    fn punch_hole(&self, offset: u64, len: u64) -> Result<()> {
        check_range(self, IoOp::PunchHole, offset, len, self.len())?;
        let mode = rustix::fs::FallocateFlags::PUNCH_HOLE | rustix::fs::FallocateFlags::KEEP_SIZE;
        // Devices and file systems without hole punching keep the old bytes: punching only
        // returns space, and StitchDB never reads a range it has not written since. Writing
        // zeros instead would cost a full write of every freed zone on a raw device.
        let _ = rustix::fs::fallocate(&self.file, mode, offset, len);
        Ok(())
    }

    fn allocate(&self, offset: u64, len: u64) -> Result<()> {
        check_range(self, IoOp::Grow, offset, len, self.len())?;
        if self.block_device {
            return Ok(());
        }
        match rustix::fs::fallocate(
            &self.file,
            rustix::fs::FallocateFlags::KEEP_SIZE,
            offset,
            len,
        ) {
            // A file system that cannot allocate ahead allocates when written, as before.
            Err(rustix::io::Errno::OPNOTSUPP) => Ok(()),
            Err(e) => Err(IoError::from_os(
                IoOp::Grow,
                self.describe(),
                offset,
                len,
                e.into(),
            )),
            Ok(()) => Ok(()),
        }
    }

    /// A file's room is its file system's: the blocks an unprivileged writer may still take
    /// (`fstatvfs`'s `f_bavail`). A block device's bytes are all its own: `None`.
    fn space(&self) -> Option<crate::Space> {
        if self.block_device {
            return None;
        }
        let fs = rustix::fs::fstatvfs(&self.file).ok()?;
        Some(crate::Space {
            available: fs.f_bavail.saturating_mul(fs.f_frsize),
            total: fs.f_blocks.saturating_mul(fs.f_frsize),
        })
    }

    fn describe(&self) -> String {
        format!("file {}", self.path.display())
    }
}
