//! The two system calls `rustix` offers no safe form of: reading into a vector's unused
//! capacity with one `preadv` (skipping the zeroing that a safe, initialized buffer would
//! cost), and `sync_file_range`. Every `unsafe` block of the crate is here.

#![allow(unsafe_code)]

use std::fs::File;
use std::os::unix::io::AsRawFd;

/// The most buffers one `preadv` takes (Linux's `IOV_MAX`).
pub(crate) const MAX_IOVECS: usize = 1024;

/// Reads from `offset` into the unused capacity of `bufs` in order, filling each up to
/// `wants[i]` bytes (at most its capacity), with one `preadv` over at most [`MAX_IOVECS`]
/// buffers. Extends each buffer's length by the bytes it received and returns their total:
/// 0 at the end of the file. A signal's interruption comes back as `Interrupted`.
pub(crate) fn preadv_spare(
    file: &File,
    bufs: &mut [Vec<u8>],
    wants: &[usize],
    offset: u64,
) -> std::io::Result<usize> {
    let iov: Vec<libc::iovec> = bufs
        .iter_mut()
        .zip(wants)
        .take(MAX_IOVECS)
        .map(|(b, &want)| {
            let room = want.saturating_sub(b.len());
            let spare = b.spare_capacity_mut();
            libc::iovec {
                iov_base: spare.as_mut_ptr() as *mut libc::c_void,
                iov_len: room.min(spare.len()),
            }
        })
        .collect();
    // SAFETY: every iovec points at the unused capacity of a vector in `bufs`, at most
    // `spare.len()` bytes long; the vectors are borrowed mutably for the whole call, so none
    // moves or is touched meanwhile. preadv writes into them through raw pointers only (no
    // reference to uninitialized bytes is formed); the count matches `iov`'s length.
    let n = unsafe {
        libc::preadv(
            file.as_raw_fd(),
            iov.as_ptr(),
            iov.len() as libc::c_int,
            offset as libc::off_t,
        )
    };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let (total, mut left) = (n as usize, n as usize);
    for (b, v) in bufs.iter_mut().zip(&iov) {
        let step = left.min(v.iov_len);
        // SAFETY: preadv filled iovecs in order, so the `step` bytes after this vector's
        // length were written by it; `step <= iov_len <= spare capacity`.
        unsafe { b.set_len(b.len() + step) };
        left -= step;
        if left == 0 {
            break;
        }
    }
    Ok(total)
}

/// Starts writeback of `offset..offset + len` (`sync_file_range(SYNC_FILE_RANGE_WRITE)`).
/// Failure is ignored: the writeback then starts at the next sync instead.
pub(crate) fn start_writeback(file: &File, offset: u64, len: u64) {
    // SAFETY: sync_file_range on a valid, open descriptor; it takes integers only and reads
    // no memory of ours.
    unsafe {
        libc::sync_file_range(
            file.as_raw_fd(),
            offset as libc::off64_t,
            len as libc::off64_t,
            libc::SYNC_FILE_RANGE_WRITE,
        );
    }
}
