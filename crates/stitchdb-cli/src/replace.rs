//! Writing a file that replaces its destination whole or not at all: the bytes go to a
//! temporary file beside it, which is synced and then renamed over the destination. A failed
//! or interrupted write leaves an existing destination as it was.

use crate::error::{CliResult, IoContext};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// An output file under construction.
pub struct Replacing {
    file: File,
    /// Where `file` is and what it replaces; `None` when the destination is written in place
    /// (`/dev/null`, a FIFO, a terminal: renaming over those would replace the node itself),
    /// and once committed.
    rename: Option<Rename>,
}

struct Rename {
    temp: PathBuf,
    dest: PathBuf,
}

impl Replacing {
    /// Starts replacing `path`. A symbolic link is followed, so the file it points to is
    /// replaced and the link kept; an existing file's permissions pass to its replacement.
    pub fn create(path: &Path) -> CliResult<Replacing> {
        let creating = || format!("creating {}", path.display());
        let existing = match std::fs::metadata(path) {
            Ok(meta) => Some(meta),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e).context(creating()),
        };
        if existing.as_ref().is_some_and(|meta| !meta.is_file()) {
            let file = File::create(path).context(creating())?;
            return Ok(Replacing { file, rename: None });
        }
        let dest = match existing {
            Some(_) => std::fs::canonicalize(path).context(creating())?,
            None => path.to_path_buf(),
        };
        let (file, temp) = create_temp_beside(&dest).context(creating())?;
        let replacing = Replacing {
            file,
            rename: Some(Rename { temp, dest }),
        };
        if let Some(meta) = existing {
            replacing
                .file
                .set_permissions(meta.permissions())
                .context(creating())?;
        }
        Ok(replacing)
    }

    /// Whether the destination is written in place, so that a failure leaves part of the
    /// output in it (a device or a FIFO) rather than leaving it as it was.
    pub fn in_place(&self) -> bool {
        self.rename.is_none()
    }

    /// Makes what was written durable and puts it in place of the destination. Dropping a
    /// `Replacing` without committing it removes the temporary file.
    pub fn commit(mut self) -> CliResult {
        let Some(rename) = self.rename.take() else {
            return Ok(());
        };
        let writing = format!("writing {}", rename.dest.display());
        let renamed = self
            .file
            .sync_all()
            .and_then(|()| std::fs::rename(&rename.temp, &rename.dest));
        if renamed.is_err() {
            self.rename = Some(rename);
            return renamed.context(writing);
        }
        sync_parent(&rename.dest).context(writing)
    }
}

impl Write for Replacing {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Drop for Replacing {
    fn drop(&mut self) {
        if let Some(Rename { temp, .. }) = &self.rename {
            if let Err(e) = std::fs::remove_file(temp) {
                tracing::warn!("removing the temporary file {}: {e}", temp.display());
            }
        }
    }
}

/// A new file `.NAME.stitchdb-PID-N.tmp` in `dest`'s directory (the same file system, so the
/// rename is atomic), with the first N not in use.
fn create_temp_beside(dest: &Path) -> io::Result<(File, PathBuf)> {
    let name = dest
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?
        .to_string_lossy();
    let dir = dest.parent().unwrap_or(Path::new(""));
    let mut attempt = 0;
    loop {
        let temp = dir.join(format!(
            ".{name}.stitchdb-{}-{attempt}.tmp",
            std::process::id()
        ));
        match OpenOptions::new().write(true).create_new(true).open(&temp) {
            Ok(file) => return Ok((file, temp)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => attempt += 1,
            Err(e) => return Err(e),
        }
    }
}

/// Syncs the directory holding `path`, making a rename into it durable.
fn sync_parent(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_committed_file_replaces_the_destination_keeping_its_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out.tsv");
        std::fs::write(&dest, b"old").unwrap();
        std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o640)).unwrap();
        let mut out = Replacing::create(&dest).unwrap();
        out.write_all(b"new contents").unwrap();
        assert_eq!(
            std::fs::read(&dest).unwrap(),
            b"old",
            "replaced before commit"
        );
        out.commit().unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"new contents");
        let mode = std::fs::metadata(&dest).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o640);
        assert_eq!(entries(dir.path()), ["out.tsv"]);
    }

    #[test]
    fn an_abandoned_file_leaves_the_destination_and_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out.tsv");
        std::fs::write(&dest, b"old").unwrap();
        let mut out = Replacing::create(&dest).unwrap();
        out.write_all(b"half of it").unwrap();
        drop(out);
        assert_eq!(std::fs::read(&dest).unwrap(), b"old");
        assert_eq!(entries(dir.path()), ["out.tsv"]);

        let fresh = dir.path().join("fresh.tsv");
        drop(Replacing::create(&fresh).unwrap());
        assert_eq!(entries(dir.path()), ["out.tsv"]);
    }

    #[test]
    fn a_symbolic_link_is_kept_and_its_target_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.tsv");
        let link = dir.path().join("link.tsv");
        std::fs::write(&target, b"old").unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let mut out = Replacing::create(&link).unwrap();
        out.write_all(b"new").unwrap();
        out.commit().unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
    }

    #[test]
    fn a_device_is_written_in_place() {
        use std::os::unix::fs::FileTypeExt;
        let mut out = Replacing::create(Path::new("/dev/null")).unwrap();
        assert!(out.in_place());
        out.write_all(b"gone").unwrap();
        out.commit().unwrap();
        assert!(std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
    }
}
