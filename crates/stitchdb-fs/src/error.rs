//! The file system's errors: an errno for the caller, or a store failure that becomes one.

use std::fmt;

/// Why a file system operation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FsError {
    /// A POSIX error, as Linux's ext4 would return it (`libc::ENOENT` ...).
    Errno(i32),
    /// The store failed (full, damaged, read-only, an I/O error).
    Store(stitchdb::Error),
    /// A file system record failed its checks: which record, and what is wrong with it.
    Corrupt(String),
    /// A read-only mount of a store that holds no file system yet (why).
    NoFileSystem(String),
    /// A transaction could not commit: another commit changed what it read or wrote since
    /// it began (first committer wins). `path` names the file the conflicting key belongs
    /// to (`/a/b`; `inode N` when no name of it is found; `table T` for a record of an
    /// ordinary table); `detail` is the store's account.
    Conflict {
        /// The file (or record) the conflict is over.
        path: String,
        /// What the store says happened.
        detail: String,
    },
}

/// A result whose error is an [`FsError`].
pub type FsResult<T> = Result<T, FsError>;

impl FsError {
    /// The errno a system call returns for this error: a full store is `ENOSPC`, a read-only
    /// one `EROFS`, damage and other store failures `EIO`.
    pub fn errno(&self) -> i32 {
        match self {
            FsError::Errno(e) => *e,
            FsError::Store(e) if e.is_no_space() => libc::ENOSPC,
            FsError::Store(stitchdb::Error::ReadOnly(_)) => libc::EROFS,
            FsError::Store(_) | FsError::Corrupt(_) => libc::EIO,
            FsError::NoFileSystem(_) => libc::ENODEV,
            FsError::Conflict { .. } => libc::EBUSY,
        }
    }
}

impl From<stitchdb::Error> for FsError {
    fn from(e: stitchdb::Error) -> FsError {
        FsError::Store(e)
    }
}

impl fmt::Display for FsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FsError::Errno(e) => write!(f, "{}", std::io::Error::from_raw_os_error(*e)),
            FsError::Store(e) => write!(f, "{e}"),
            FsError::Corrupt(what) => write!(f, "corrupt file system record: {what}"),
            FsError::NoFileSystem(why) => write!(f, "no file system in the store: {why}"),
            FsError::Conflict { path, detail } => {
                write!(f, "transaction conflict over {path}: {detail}")
            }
        }
    }
}

impl std::error::Error for FsError {}

/// Shorthand for an errno error.
pub(crate) fn err<T>(errno: i32) -> FsResult<T> {
    Err(FsError::Errno(errno))
}
