use crate::Disk;
use std::fmt;

/// Which disk operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoOp {
    /// Opening or creating the store.
    Open,
    /// [`Disk::read_at`] and the vector reads.
    Read,
    /// [`Disk::write_at`] and [`Disk::write_parts_at`].
    Write,
    /// [`Disk::sync`], the barrier.
    Sync,
    /// [`Disk::grow`].
    Grow,
    /// [`Disk::punch_hole`].
    PunchHole,
    /// Taking the store's lock against other openers.
    Lock,
}

impl fmt::Display for IoOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            IoOp::Open => "open",
            IoOp::Read => "read",
            IoOp::Write => "write",
            IoOp::Sync => "sync",
            IoOp::Grow => "grow",
            IoOp::PunchHole => "punch_hole",
            IoOp::Lock => "lock",
        };
        f.write_str(s)
    }
}

/// Why a disk operation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IoErrorKind {
    /// The device reported an I/O error (EIO), real or injected.
    Eio,
    /// The device is full (ENOSPC), real or simulated.
    NoSpace,
    /// The range lies outside the disk.
    OutOfRange {
        /// The disk's length.
        len: u64,
    },
    /// Another process holds the store's lock.
    Locked,
    /// The file does not exist (ENOENT).
    NotFound,
    /// The operating system refused access to the file (EACCES, EPERM).
    PermissionDenied,
    /// Any other operating-system error, with its message.
    Os(String),
}

/// A failed disk operation: what, where, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoError {
    /// The operation that failed.
    pub op: IoOp,
    /// The disk it failed on, as [`Disk::describe`] names it.
    pub disk: String,
    /// Where the operation's range starts (0 for operations without one).
    pub offset: u64,
    /// The operation's length in bytes (0 for operations without one).
    pub len: u64,
    /// Why it failed.
    pub kind: IoErrorKind,
}

impl IoError {
    /// An error of `op` on `disk` over `len` bytes at `offset`, for the reason `kind`.
    pub fn new(
        op: IoOp,
        disk: impl Into<String>,
        offset: u64,
        len: u64,
        kind: IoErrorKind,
    ) -> Self {
        IoError {
            op,
            disk: disk.into(),
            offset,
            len,
            kind,
        }
    }

    /// The error of `op` for an operating-system error: EIO and ENOSPC become
    /// [`IoErrorKind::Eio`] and [`IoErrorKind::NoSpace`], anything else [`IoErrorKind::Os`].
    pub fn from_os(
        op: IoOp,
        disk: impl Into<String>,
        offset: u64,
        len: u64,
        e: std::io::Error,
    ) -> Self {
        let kind = match e.raw_os_error() {
            Some(libc::ENOSPC) => IoErrorKind::NoSpace,
            Some(libc::EIO) => IoErrorKind::Eio,
            Some(libc::ENOENT) => IoErrorKind::NotFound,
            Some(libc::EACCES | libc::EPERM) => IoErrorKind::PermissionDenied,
            _ => IoErrorKind::Os(e.to_string()),
        };
        IoError::new(op, disk, offset, len, kind)
    }
}

impl fmt::Display for IoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = match &self.kind {
            IoErrorKind::Eio => "I/O error (EIO)".to_string(),
            IoErrorKind::NoSpace => "no space left on device".to_string(),
            IoErrorKind::OutOfRange { len } => {
                format!("range outside the disk (disk is {len} bytes)")
            }
            IoErrorKind::Locked => {
                "the store is locked by another process (or another handle in this one)".to_string()
            }
            IoErrorKind::NotFound => "no such file or directory".to_string(),
            IoErrorKind::PermissionDenied => "permission denied".to_string(),
            IoErrorKind::Os(m) => m.clone(),
        };
        match self.op {
            IoOp::Sync | IoOp::Open | IoOp::Lock => {
                write!(f, "{} of {} failed: {}", self.op, self.disk, why)
            }
            _ => write!(
                f,
                "{} of {} bytes at offset {} of {} failed: {}",
                self.op, self.len, self.offset, self.disk, why
            ),
        }
    }
}

impl std::error::Error for IoError {}

/// Fails with `OutOfRange` unless the `len` bytes at `offset` lie within `disk_len` bytes.
/// Takes the disk rather than its name so the name is only built on failure.
pub(crate) fn check_range(
    disk: &impl Disk,
    op: IoOp,
    offset: u64,
    len: u64,
    disk_len: u64,
) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= disk_len => Ok(()),
        _ => Err(IoError::new(
            op,
            disk.describe(),
            offset,
            len,
            IoErrorKind::OutOfRange { len: disk_len },
        )),
    }
}

/// A result whose error is an [`IoError`].
pub type Result<T> = std::result::Result<T, IoError>;
