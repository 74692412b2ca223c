//! Featherstitch's patchgroups (§5) for any program, through a StitchDB mount: this crate
//! only speaks the control protocol of `MOUNT/.stitch/control` (docs/kvfs.md, "Control
//! directory"), so it needs no part of the engine.
//!
//! Engagement belongs to the calling *process* and is inherited by the children it starts
//! afterwards: changes a process makes through the mount while a group is engaged belong to
//! that group. Groups made with [`PatchGroups::create`] close when the process exits.
//!
//! ```no_run
//! # fn main() -> Result<(), stitchdb_pg::PgError> {
//! let pg = stitchdb_pg::PatchGroups::open("/mnt/kvfs")?;
//! let copy = pg.create()?;
//! pg.engage(copy)?;
//! // ... write the copy, rename it into place ...
//! pg.disengage(copy)?;
//! let unlink = pg.create()?;
//! pg.depend(unlink, copy)?; // the unlink reaches the disk after the copy
//! # Ok(()) }
//! ```

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// A patchgroup's id on its mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Group(pub u64);

impl std::fmt::Display for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A refused command: the errno its write failed with, and the daemon's message.
#[derive(Debug)]
pub struct PgError {
    /// The errno (see the table of docs/kvfs.md).
    pub errno: i32,
    /// What the daemon said, or the system error's text.
    pub message: String,
}

impl std::fmt::Display for PgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (errno {})", self.message, self.errno)
    }
}

impl std::error::Error for PgError {}

impl From<std::io::Error> for PgError {
    fn from(e: std::io::Error) -> PgError {
        PgError {
            errno: e.raw_os_error().unwrap_or(libc::EIO),
            message: e.to_string(),
        }
    }
}

/// The control file of one mount, open read-write: a command line written, its reply read
/// back. Transactions (`txn ...` commands) belong to the handle that began them: closing it
/// aborts those still open.
#[derive(Debug)]
pub struct Control {
    file: File,
}

impl Control {
    /// Opens the control file of the mount at `mountpoint`.
    pub fn open(mountpoint: impl AsRef<Path>) -> Result<Control, PgError> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(mountpoint.as_ref().join(".stitch/control"))?;
        Ok(Control { file })
    }

    /// Sends one command line; its reply's value: what follows `ok` (a one-line value
    /// trimmed, the lines of a longer one as they are), empty if none.
    pub fn request(&self, line: &str) -> Result<String, PgError> {
        self.send(line)?;
        let reply = self.reply()?;
        let value = reply.strip_prefix("ok").unwrap_or(&reply);
        Ok(match value.strip_prefix('\n') {
            Some(lines) => lines.to_string(),
            None => value.trim().to_string(),
        })
    }

    /// Sends one command line whose success says all: the reply is read back only when it
    /// failed (one round trip through the mount instead of two).
    pub fn send(&self, line: &str) -> Result<(), PgError> {
        let Err(e) = self.file.write_at(line.as_bytes(), 0) else {
            return Ok(());
        };
        let errno = e.raw_os_error().unwrap_or(libc::EIO);
        let reply = self.reply().unwrap_or_default();
        // "err ENAME message": the message is what follows the errno's name.
        let message = reply
            .trim_end()
            .strip_prefix("err ")
            .and_then(|r| r.split_once(' ').map(|(_, m)| m.to_string()))
            .unwrap_or_else(|| e.to_string());
        Err(PgError { errno, message })
    }

    /// The reply to the last command sent through this handle, whole.
    fn reply(&self) -> Result<String, PgError> {
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = self.file.read_at(&mut buf, out.len() as u64)?;
            if n == 0 {
                return Ok(String::from_utf8_lossy(&out).into_owned());
            }
            out.extend_from_slice(&buf[..n]);
        }
    }
}

/// Patchgroups through the control file of one mount.
#[derive(Debug)]
pub struct PatchGroups {
    control: Control,
}

impl PatchGroups {
    /// Opens the control file of the mount at `mountpoint`.
    pub fn open(mountpoint: impl AsRef<Path>) -> Result<PatchGroups, PgError> {
        Ok(PatchGroups {
            control: Control::open(mountpoint)?,
        })
    }

    /// Sends one command line; its reply's value (`ok VALUE`), if any.
    pub fn command(&self, line: &str) -> Result<Option<u64>, PgError> {
        Ok(self.control.request(line)?.parse().ok())
    }

    fn send(&self, line: &str) -> Result<(), PgError> {
        self.control.send(line)
    }

    fn group(&self, line: &str) -> Result<Group, PgError> {
        self.command(line)?.map(Group).ok_or_else(|| PgError {
            errno: libc::EIO,
            message: format!("no group id in the reply to {line:?}"),
        })
    }

    /// `pg_create`: a group owned by this process (closed when it exits).
    pub fn create(&self) -> Result<Group, PgError> {
        self.group("pg create")
    }

    /// A group owned by no process: open until [`close`](Self::close), for groups set up by
    /// one program (a shell's `stitchdb pg create`) and used by others.
    pub fn create_detached(&self) -> Result<Group, PgError> {
        self.group("pg create detached")
    }

    /// `pg_depend(after, before)`: `after`'s changes reach the disk after `before`'s. Seals
    /// `before` (it can never be engaged again).
    pub fn depend(&self, after: Group, before: Group) -> Result<(), PgError> {
        self.send(&format!("pg depend {after} {before}"))
    }

    /// `pg_engage`: this process's changes through the mount belong to `g` from now on
    /// (and those of the children it starts from now on).
    pub fn engage(&self, g: Group) -> Result<(), PgError> {
        self.send(&format!("pg engage {g}"))
    }

    /// `pg_disengage`.
    pub fn disengage(&self, g: Group) -> Result<(), PgError> {
        self.send(&format!("pg disengage {g}"))
    }

    /// `pg_sync`: `g`'s changes, and what they follow, are durable when it returns.
    pub fn sync(&self, g: Group) -> Result<(), PgError> {
        self.send(&format!("pg sync {g}"))
    }

    /// `pg_close`.
    pub fn close(&self, g: Group) -> Result<(), PgError> {
        self.send(&format!("pg close {g}"))
    }

    /// The open groups, a line each, as `MOUNT/.stitch/groups` lists them.
    pub fn list(mountpoint: impl AsRef<Path>) -> Result<String, PgError> {
        Ok(std::fs::read_to_string(
            mountpoint.as_ref().join(".stitch/groups"),
        )?)
    }
}
