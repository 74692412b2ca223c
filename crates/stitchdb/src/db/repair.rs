//! `repair` (LevelDB's and RocksDB's `RepairDB`): salvages everything readable of a damaged
//! store into a new, consistent one.
//!
//! The damaged store is opened salvaging ([`Db::open_salvaging_on`]): the older superblock's
//! manifest if the newest is damaged; each run with its damaged filter dropped, its damaged
//! blocks left out, a damaged index extent read from its mirror, and where both copies are
//! lost the blocks found and read alone where its builder wrote them (`Run::open_salvaging`),
//! else the blocks they listed left out; the log replayed past damage where its records are
//! whole. Its contents are then
//! written, through the ordinary write path, into a new store: the named snapshots oldest
//! first (each table made equal to the snapshot's, then the snapshot taken again under its
//! name), then the current state. Nothing of the damaged store is written, so repair never
//! loses more than the damage did, and running it again is safe.
//!
//! A damaged block may have held the newest version of a key (or its deletion) whose older
//! version survives in an older run: the repaired store then holds that older version. Such
//! keys are listed ([`RepairReport::possibly_older`]) beside the lost key ranges.

use super::damage::{Damage, LostKeys, Salvage};
use super::read::DamagedValues;
use super::{Db, DbIter};
use crate::batch::{TableId, WriteBatch};
use crate::options::Durability;
use crate::{Error, Options, Result};
use std::cmp::Ordering;
use std::iter::Peekable;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use stitch_io::{Disk, FileDisk, LockMode};

/// Writes per batch while copying (`Async`: one sync at the end makes them all durable).
const BATCH_OPS: usize = 1000;
/// Bytes of keys and values per batch while copying.
const BATCH_BYTES: usize = 64 << 20;

/// What [`Db::repair`] did and what it could not save.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// The damage found (as `check` reports it) and the key ranges lost.
    pub salvage: Salvage,
    /// Tables written to the new store.
    pub tables: usize,
    /// Keys the new store holds (current state, all tables); for a store left as it was,
    /// the entries (key versions) its runs hold.
    pub keys: u64,
    /// Named snapshots written again.
    pub snapshots: usize,
    /// Keys in a lost range that the new store holds from an older run: the lost block may
    /// have held a newer version or a deletion of them. (table, key)
    pub possibly_older: Vec<(String, Vec<u8>)>,
    /// Where the damaged store was kept (by [`Db::repair`]).
    pub damaged_copy: Option<PathBuf>,
}

/// What a repair copies from: the damaged store's current state or one of its snapshots.
trait Source {
    /// What it is, for messages ("current state", "snapshot NAME").
    fn name(&self) -> String;
    fn tables(&self) -> Vec<String>;
    fn layout(&self, table: &str) -> Result<String>;
    fn pairs(&self, table: &str) -> Result<DbIter>;
}

impl Source for Db {
    fn name(&self) -> String {
        "current state".into()
    }
    fn tables(&self) -> Vec<String> {
        Db::tables(self)
    }
    fn layout(&self, table: &str) -> Result<String> {
        self.table_layout(self.table(table)?)
    }
    fn pairs(&self, table: &str) -> Result<DbIter> {
        self.range(self.table(table)?, Bound::Unbounded, Bound::Unbounded)
    }
}

impl Source for super::Snapshot {
    fn name(&self) -> String {
        format!("snapshot {:?}", super::Snapshot::name(self))
    }
    fn tables(&self) -> Vec<String> {
        super::Snapshot::tables(self)
    }
    fn layout(&self, table: &str) -> Result<String> {
        self.table_layout(table)
    }
    fn pairs(&self, table: &str) -> Result<DbIter> {
        self.range(self.table(table)?, Bound::Unbounded, Bound::Unbounded)
    }
}

impl Db {
    /// Repairs the store in the file at `path`: salvages it into a new store written beside
    /// it (`PATH.repairing`), then renames the damaged file to `PATH.damaged` (kept: nothing
    /// of it is thrown away) and the new one to `PATH`. A store that passes check is left as
    /// it is (the report's `damaged_copy` is then `None`). The store must not be open elsewhere.
    /// Not for block devices (the new store needs a file of its own).
    pub fn repair(path: impl AsRef<Path>, opts: Options) -> Result<RepairReport> {
        let path = path.as_ref();
        let with_suffix = |suffix: &str| {
            let mut name = path.as_os_str().to_owned();
            name.push(suffix);
            PathBuf::from(name)
        };
        let (fresh_path, damaged_path) = (with_suffix(".repairing"), with_suffix(".damaged"));
        if damaged_path.exists() {
            return Err(Error::Config(format!(
                "{} exists (a store kept by an earlier repair): move it away first",
                damaged_path.display()
            )));
        }
        // A file left by a repair that did not finish is only ever a partial copy.
        if fresh_path.exists() {
            std::fs::remove_file(&fresh_path).map_err(|e| io_error(&fresh_path, e))?;
        }
        let damaged = super::open_file(path, LockMode::Exclusive, &opts)?;
        // A store that passes check is left as it is.
        let found = Self::check_store_on(damaged.clone(), opts.clone())?;
        if found.is_ok() {
            return Ok(RepairReport {
                tables: found.report.tables,
                keys: found.report.entries,
                ..RepairReport::default()
            });
        }
        let fresh: Arc<dyn Disk> = Arc::new(FileDisk::create(&fresh_path)?);
        let copied = Self::repair_on(damaged.clone(), fresh, opts);
        let mut report = match copied {
            Ok(report) => report,
            Err(e) => {
                let _ = std::fs::remove_file(&fresh_path);
                return Err(e);
            }
        };
        drop(damaged);
        std::fs::rename(path, &damaged_path).map_err(|e| io_error(path, e))?;
        std::fs::rename(&fresh_path, path).map_err(|e| io_error(&fresh_path, e))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| io_error(dir, e))?;
        }
        report.damaged_copy = Some(damaged_path);
        Ok(report)
    }

    /// Salvages the store on `damaged` (only read) into a new store created on `fresh`.
    pub fn repair_on(
        damaged: Arc<dyn Disk>,
        fresh: Arc<dyn Disk>,
        opts: Options,
    ) -> Result<RepairReport> {
        let mut salvage = Salvage::default();
        let old = match Self::open_salvaging_on(damaged, opts.clone(), &mut salvage) {
            Ok(db) => db,
            Err(e) => {
                let found: Vec<String> = salvage.damage.iter().map(ToString::to_string).collect();
                return Err(Error::corrupt(
                    "store",
                    "its superblocks and manifests",
                    format!("nothing can be salvaged: {e} (found: {})", found.join("; ")),
                ));
            }
        };
        // The new store keeps the damaged one's zone size.
        let opts = Options {
            zone_size: old.inner.zones.zone_size(),
            ..opts
        };
        let new = Db::create_on(fresh, opts)?;
        let mut snapshots = old.snapshots();
        snapshots.sort_by_key(|s| s.seq);
        let mut previous: Option<Box<dyn Source>> = None;
        for info in &snapshots {
            let snap = old.open_snapshot(&info.name)?;
            copy_changes(previous.as_deref(), &snap, &new, &mut salvage)?;
            new.snapshot(&info.name)?;
            previous = Some(Box::new(snap));
        }
        copy_changes(previous.as_deref(), &old, &new, &mut salvage)?;
        new.sync()?;
        let mut keys = 0;
        for table in new.tables() {
            keys += new.pairs(&table)?.count() as u64;
        }
        let possibly_older = possibly_older(&new, &salvage.lost)?;
        let report = RepairReport {
            tables: new.tables().len(),
            keys,
            snapshots: snapshots.len(),
            possibly_older,
            salvage,
            damaged_copy: None,
        };
        new.close()?;
        Ok(report)
    }
}

fn io_error(path: &Path, e: std::io::Error) -> Error {
    Error::Config(format!("repair: {}: {e}", path.display()))
}

/// A table's pairs in key order.
type Pairs = Box<dyn Iterator<Item = Result<(Vec<u8>, Vec<u8>)>>>;

/// Writes into `new` what turns `from`'s contents (nothing, if `None`) into `to`'s, table by
/// table: puts for pairs new or changed, deletes for keys gone.
fn copy_changes(
    from: Option<&dyn Source>,
    to: &dyn Source,
    new: &Db,
    salvage: &mut Salvage,
) -> Result<()> {
    let mut batch = Batcher {
        db: new,
        batch: WriteBatch::new(),
        ops: 0,
    };
    for table in to.tables() {
        let id = match new.table(&table) {
            Ok(id) => id,
            // Made with the layout it had (the salvaged store's tables keep theirs).
            Err(Error::NoSuchTable(_)) => {
                new.create_table_with_layout(&table, &to.layout(&table)?)?
            }
            Err(e) => return Err(e),
        };
        // A damaged large value is dropped (the scans pass over it), as a damaged block's
        // keys are: reported with its place and listed as lost.
        let damaged = DamagedValues::default();
        let before: Pairs = match from.filter(|f| f.tables().contains(&table)) {
            Some(f) => Box::new(f.pairs(&table)?.passing_damaged(Default::default())),
            None => Box::new(std::iter::empty()),
        };
        let mut before = before.peekable();
        let mut after = to
            .pairs(&table)?
            .passing_damaged(damaged.clone())
            .peekable();
        loop {
            let order = match (before.peek(), after.peek()) {
                (None, None) => break,
                (Some(Err(_)), _) | (_, Some(Err(_))) => Ordering::Equal,
                (Some(Ok((b, _))), Some(Ok((a, _)))) => b.cmp(a),
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
            };
            match order {
                Ordering::Less => {
                    let (key, _) = next(&mut before)?;
                    batch.delete(id, key)?;
                }
                Ordering::Greater => {
                    let (key, value) = next(&mut after)?;
                    batch.put(id, key, value)?;
                }
                Ordering::Equal => {
                    let (_, old) = next(&mut before)?;
                    let (key, value) = next(&mut after)?;
                    if old != value {
                        batch.put(id, key, value)?;
                    }
                }
            }
        }
        for (key, e) in damaged.lock().drain(..) {
            let place = format!("{}, table {table}, key {}", to.name(), key.escape_ascii());
            salvage
                .damage
                .push(Damage::from_error(&e, "large value", &place));
            let mut end = key.clone();
            end.push(0);
            salvage.lost.push(LostKeys {
                table: table.clone(),
                run: 0,
                start: Bound::Included(key),
                end: Bound::Excluded(end),
                entries: Some(1),
                why: "its large value's chunks are damaged".into(),
            });
        }
    }
    batch.flush()
}

/// The next pair of a peeked iterator that has one.
fn next<I: Iterator<Item = Result<(Vec<u8>, Vec<u8>)>>>(
    it: &mut Peekable<I>,
) -> Result<(Vec<u8>, Vec<u8>)> {
    it.next()
        .unwrap_or_else(|| Err(Error::Config("repair: a peeked pair vanished".into())))
}

/// Writes in batches of [`BATCH_OPS`].
struct Batcher<'a> {
    db: &'a Db,
    batch: WriteBatch,
    ops: usize,
}

impl Batcher<'_> {
    fn put(&mut self, table: TableId, key: Vec<u8>, value: Vec<u8>) -> Result<()> {
        self.batch.put(table, key, value);
        self.count()
    }
    fn delete(&mut self, table: TableId, key: Vec<u8>) -> Result<()> {
        self.batch.delete(table, key);
        self.count()
    }
    fn count(&mut self) -> Result<()> {
        self.ops += 1;
        // Large values make a batch big with few writes: it goes once it holds 64 MiB.
        if self.ops >= BATCH_OPS || self.batch.size() >= BATCH_BYTES {
            self.flush()?;
        }
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        if self.ops > 0 {
            self.db
                .write(&std::mem::take(&mut self.batch), Durability::Async)?;
            self.ops = 0;
        }
        Ok(())
    }
}

/// Keys of the new store's tables inside a range lost from the current state.
fn possibly_older(new: &Db, lost: &[LostKeys]) -> Result<Vec<(String, Vec<u8>)>> {
    let mut out = Vec::new();
    for l in lost {
        // Lost ranges of snapshots' runs are labelled "snapshot NAME, table T".
        let Ok(table) = new.table(&l.table) else {
            continue;
        };
        let start = l.start.as_ref().map(Vec::as_slice);
        let end = l.end.as_ref().map(Vec::as_slice);
        for pair in new.range(table, start, end)? {
            out.push((l.table.clone(), pair?.0));
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}
