//! How the calling thread meets the device: three per-thread choices a [`FileDisk`]
//! follows, made by the threads whose work suits them (the background flusher writes direct;
//! a FUSE session thread that polls for requests polls for its reads too; the threads that
//! read file data for a FUSE mount read direct).
//!
//! [`FileDisk`]: crate::FileDisk

use rustix::fs::Advice;
use rustix::io::{Errno, ReadWriteFlags};
use std::cell::Cell;
use std::fs::File;
use std::io::IoSliceMut;
use std::num::NonZeroU64;
use std::time::{Duration, Instant};

thread_local! {
    /// How long a small read on this thread may poll for the device; zero: it sleeps.
    static SPIN_FOR_READS: Cell<Duration> = const { Cell::new(Duration::ZERO) };
    /// Whether this thread's aligned writes bypass the page cache.
    static WRITE_DIRECT: Cell<bool> = const { Cell::new(false) };
    /// Whether this thread's reads of durable bytes bypass the page cache.
    static READ_DIRECT: Cell<bool> = const { Cell::new(false) };
}

/// Makes the calling thread's reads of durable bytes from a [`FileDisk`](crate::FileDisk)
/// (`read_vec_at`, `read_vecs_at`: what the store reads of its runs) bypass the page cache
/// (`O_DIRECT`) where the file system offers it, or go through it again (`false`, the
/// default). For a thread whose reads are cached above the store: a FUSE daemon's reads of
/// file data, which the kernel keeps in the mount's own page cache, so that the store's
/// pages would be a second copy nobody reads again. The device then writes into a buffer
/// this thread reuses instead of into newly allocated page-cache pages, which the kernel
/// would then copy out of (and, on a virtual machine that hands freed memory back to its
/// host, fault in first).
pub fn read_direct(on: bool) {
    READ_DIRECT.with(|r| r.set(on));
}

/// Whether this thread's reads of durable bytes bypass the page cache.
pub(crate) fn reads_direct() -> bool {
    READ_DIRECT.with(Cell::get)
}

/// Makes the calling thread's writes to a [`FileDisk`](crate::FileDisk) go straight to the
/// device (`O_DIRECT`) where the file system offers it and the write is aligned (whole blocks
/// from aligned buffers are), or through the page cache again (`false`, the default). A direct
/// write saves copying every byte into the page cache, but returns only once the device has
/// the bytes, where a buffered write returns after the copy and the kernel writes in the
/// background. So it suits background threads, the flusher and the merges, and not the
/// threads of callers, who would wait for the device on every write.
pub fn write_direct(on: bool) {
    WRITE_DIRECT.with(|w| w.set(on));
}

/// The largest read [`spin_for_reads`] applies to: a few blocks, a device's single request.
const SPIN_READ_MAX: usize = 64 << 10;

/// Makes reads of up to 64 KiB from a [`FileDisk`](crate::FileDisk) on the calling thread
/// wait for the device by polling instead of sleeping, for up to `limit` (after which they
/// sleep as usual); `Duration::ZERO` turns it off. For a thread that would otherwise be woken
/// for each read and whose caller waits for it: on a virtual machine whose idle CPUs halt,
/// the wake-up when the device completes is a large part of a cold 4 KiB read. Such a read
/// starts the device (`POSIX_FADV_WILLNEED`) and retries `preadv2(RWF_NOWAIT)`, which copies
/// the bytes once the page cache has them, until it does.
pub fn spin_for_reads(limit: Duration) {
    SPIN_FOR_READS.with(|s| s.set(limit));
}

/// The polling limit for a read of `len` bytes on this thread, if it polls.
pub(crate) fn read_spin_limit(len: usize) -> Option<Duration> {
    let limit = SPIN_FOR_READS.with(Cell::get);
    (len <= SPIN_READ_MAX && !limit.is_zero()).then_some(limit)
}

/// Whether this thread's aligned writes bypass the page cache.
pub(crate) fn writes_direct() -> bool {
    WRITE_DIRECT.with(Cell::get)
}

/// Reads `len` bytes at `offset` polling the page cache for up to `limit`; `None` if they did
/// not arrive in time, or if the file cannot be read this way (the caller then reads as usual,
/// waiting for the device read this one started).
pub(crate) fn spin_read(file: &File, offset: u64, len: usize, limit: Duration) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let (mut got, mut started) = (0, None::<Instant>);
    while got < len {
        let mut iov = [IoSliceMut::new(&mut buf[got..])];
        match rustix::io::preadv2(file, &mut iov, offset + got as u64, ReadWriteFlags::NOWAIT) {
            Ok(0) => return None,
            Ok(n) => got += n,
            Err(Errno::AGAIN) => match started {
                // Not cached: start the device on the rest, then poll.
                None => {
                    let rest = NonZeroU64::new((len - got) as u64);
                    rustix::fs::fadvise(file, offset + got as u64, rest, Advice::WillNeed).ok()?;
                    started = Some(Instant::now());
                }
                Some(t) if t.elapsed() > limit => return None,
                Some(_) => std::hint::spin_loop(),
            },
            Err(Errno::INTR) => {}
            Err(_) => return None,
        }
    }
    Some(buf)
}
