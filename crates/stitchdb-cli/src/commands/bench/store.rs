//! The store a benchmark run uses: created (or, with `--use_existing_db`, opened), recreated
//! empty for benchmarks that need a fresh store, and removed at the end if it was a temporary.
//!
//! Unlike db_bench, which destroys whatever is at `--db`, this never deletes a file it did not
//! create in this run: `--db` must not exist unless `--use_existing_db=1` is given.

use crate::error::{CliError, CliResult, Exit, IoContext};
use std::path::{Path, PathBuf};
use std::time::Instant;
use stitchdb::{Db, Options};

pub struct BenchStore {
    db: Option<Db>,
    path: PathBuf,
    options: Options,
    /// The path was chosen by us (no `--db`): remove the store when done.
    temporary: bool,
    /// Something ran since the store was created, so a fresh benchmark must recreate it.
    used: bool,
    /// When the store was last opened (`Db::flush_history` counts from about then).
    opened: Instant,
}

impl BenchStore {
    /// Opens the store at `path` (a temporary path if `None`): an existing one with
    /// `use_existing` (its table then takes `options.stitching` too), otherwise a new one.
    pub fn open(path: Option<PathBuf>, use_existing: bool, options: Options) -> CliResult<Self> {
        let temporary = path.is_none();
        let path = path.unwrap_or_else(|| {
            std::env::temp_dir().join(format!("stitchdb-bench-{}.store", std::process::id()))
        });
        let db = match (use_existing, path.exists()) {
            (true, true) => {
                let db = Db::open(&path, options.clone())?;
                db.set_stitching(db.default_table(), options.stitching)?;
                db
            }
            (true, false) => {
                return Err(CliError::with_exit(
                    Exit::Missing,
                    format!(
                        "--use_existing_db=1 but there is no store at {}",
                        path.display()
                    ),
                ))
            }
            (false, true) => {
                return Err(CliError::new(format!(
                    "{} already exists: remove it, or pass --use_existing_db=1 to use it",
                    path.display()
                )))
            }
            (false, false) => Db::create(&path, options.clone())?,
        };
        Ok(BenchStore {
            db: Some(db),
            path,
            options,
            temporary,
            used: use_existing,
            opened: Instant::now(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open store; marks it used.
    pub fn db(&mut self) -> CliResult<&Db> {
        self.used = true;
        self.db
            .as_ref()
            .ok_or_else(|| CliError::new("the benchmark store is closed"))
    }

    pub fn opened(&self) -> Instant {
        self.opened
    }

    /// Makes the store empty (db_bench's `fresh_db`): closes, deletes and recreates it, unless
    /// nothing has touched it since it was created. Only stores this run created get here:
    /// with `--use_existing_db` fresh benchmarks are skipped.
    pub fn make_fresh(&mut self) -> CliResult {
        if !self.used {
            return Ok(());
        }
        if let Some(db) = self.db.take() {
            db.close()?;
        }
        std::fs::remove_file(&self.path)
            .context(format_args!("removing {}", self.path.display()))?;
        self.db = Some(Db::create(&self.path, self.options.clone())?);
        self.opened = Instant::now();
        self.used = false;
        Ok(())
    }

    /// Closes the store (flushing it, as db_bench's exit does) and removes a temporary one.
    pub fn close(mut self) -> CliResult {
        if let Some(db) = self.db.take() {
            db.close()?;
        }
        self.remove_if_temporary()
    }

    fn remove_if_temporary(&mut self) -> CliResult {
        if self.temporary && self.path.exists() {
            self.temporary = false;
            std::fs::remove_file(&self.path)
                .context(format_args!("removing {}", self.path.display()))?;
        }
        Ok(())
    }
}

/// On an early return (an error), still close the store and remove a temporary one.
impl Drop for BenchStore {
    fn drop(&mut self) {
        drop(self.db.take());
        let _ = self.remove_if_temporary();
    }
}
