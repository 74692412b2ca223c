//! The one way a store is opened for a surface or a command: how long to wait for another
//! process to let go of it, the options a surface may change, and errors that say what to do.

use std::fmt;
use std::path::{Path, PathBuf};
use stitchdb::{Db, IoErrorKind, Options};

/// How long opening a store waits for another process to let go of it: a mount's daemon that
/// was just unmounted may still be closing it, so `umount DIR && stitchdb check STORE` would
/// otherwise fail.
pub const LOCK_WAIT_MS: u64 = 3000;

/// How a store is opened.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// Nothing is written, not even recovery (the store is shared with other readers).
    pub read_only: bool,
    /// Bytes of a transaction's writes kept in memory before they spill to the store
    /// (`Options::txn_memory`; `None`: its default).
    pub txn_memory: Option<usize>,
    /// Create the store if there is none at the path (with the default options).
    pub create: bool,
}

impl OpenOptions {
    /// The engine's options for this open: its defaults, waiting [`LOCK_WAIT_MS`] for the
    /// store.
    pub fn engine_options(&self) -> Options {
        let defaults = Options::default();
        Options {
            lock_wait_ms: LOCK_WAIT_MS,
            txn_memory: self.txn_memory.unwrap_or(defaults.txn_memory),
            ..defaults
        }
    }
}

/// Why a store could not be opened.
#[derive(Debug)]
pub enum OpenError {
    /// There is no store at the path.
    Missing(PathBuf),
    /// Another process has the store open (after waiting [`LOCK_WAIT_MS`]).
    InUse(PathBuf),
    /// Anything else, as the engine says it.
    Engine(PathBuf, stitchdb::Error),
}

impl OpenError {
    /// The engine's error, if the engine refused for a reason of its own (damage,
    /// permissions ...).
    pub fn engine_error(&self) -> Option<&stitchdb::Error> {
        match self {
            OpenError::Engine(_, e) => Some(e),
            _ => None,
        }
    }

    fn from_engine(path: &Path, e: stitchdb::Error) -> OpenError {
        match e.io_error().map(|io| &io.kind) {
            Some(IoErrorKind::Locked) => OpenError::InUse(path.to_path_buf()),
            Some(IoErrorKind::NotFound) => OpenError::Missing(path.to_path_buf()),
            _ => OpenError::Engine(path.to_path_buf(), e),
        }
    }
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Missing(p) => {
                let p = p.display();
                write!(f, "no store at {p} (create one with `stitchdb init {p}`)")
            }
            OpenError::InUse(p) => {
                let p = p.display();
                write!(
                    f,
                    "store {p} is in use by another process (is it mounted or served already? \
                     see `mount | grep {p}` and `pgrep -a stitchdb`)"
                )
            }
            OpenError::Engine(p, e) => write!(f, "cannot open store {}: {e}", p.display()),
        }
    }
}

impl std::error::Error for OpenError {}

/// Opens the store at `path` as `how` says.
pub fn open(path: &Path, how: &OpenOptions) -> Result<Db, OpenError> {
    let opts = how.engine_options();
    let opened = if how.read_only {
        Db::open_read_only(path, opts.clone())
    } else {
        Db::open(path, opts.clone())
    };
    match opened.map_err(|e| OpenError::from_engine(path, e)) {
        Err(OpenError::Missing(_)) if how.create && !how.read_only => {
            Db::create(path, opts).map_err(|e| OpenError::from_engine(path, e))
        }
        opened => opened,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_store_is_named_with_the_command_that_makes_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent.store");
        let e = open(&path, &OpenOptions::default()).err().unwrap();
        assert!(matches!(e, OpenError::Missing(_)), "{e:?}");
        let shown = e.to_string();
        assert!(
            shown.contains("absent.store") && shown.contains("stitchdb init"),
            "{shown}"
        );
        assert!(!path.exists(), "opening made a file");
    }

    #[test]
    fn create_makes_a_missing_store_and_opens_an_existing_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.store");
        let how = OpenOptions {
            create: true,
            ..OpenOptions::default()
        };
        let db = open(&path, &how).unwrap();
        db.put(db.default_table(), "k", "v").unwrap();
        db.close().unwrap();
        let db = open(&path, &how).unwrap();
        assert_eq!(
            db.get(db.default_table(), "k").unwrap().as_deref(),
            Some(&b"v"[..])
        );
        db.close().unwrap();
    }

    #[test]
    fn a_store_open_elsewhere_is_in_use() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.store");
        let held = Db::create(&path, Options::default()).unwrap();
        let started = std::time::Instant::now();
        let e = open(&path, &OpenOptions::default()).err().unwrap();
        assert!(matches!(e, OpenError::InUse(_)), "{e:?}");
        assert!(e.to_string().contains("in use by another process"), "{e}");
        // It waited for the holder to let go first.
        assert!(started.elapsed().as_millis() >= u128::from(LOCK_WAIT_MS) / 2);
        held.close().unwrap();
        // Read-only openers share the store.
        let how = OpenOptions {
            read_only: true,
            ..OpenOptions::default()
        };
        let a = open(&path, &how).unwrap();
        let b = open(&path, &how).unwrap();
        drop((a, b));
    }
}
