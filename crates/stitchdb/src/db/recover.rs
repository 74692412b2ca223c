//! Opening a store: superblock, manifest, runs, then replay of the log since the checkpoint.

use super::snapshot::{NamedSnapshot, SnapshotTable};
use super::{log, Db};
use crate::batch::{decode_ops, TableId};
use crate::codec::Reader;
use crate::manifest::{LogStart, Manifest, TableMeta};
use crate::options::Options;
use crate::options::Stitching;
use crate::run::{Run, Storage};
use crate::version::{TableState, Version};
use crate::{Error, Result};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use stitch_io::Disk;
use stitch_wal::{LogRecord, OpRegistry, Wal, WalError};
use stitch_zone::{ExtentAddr, ExtentKind, ZoneId, ZoneStore};

/// What recovery hands to the database.
pub(crate) struct Recovered {
    pub version: Version,
    pub last_lsn: u64,
    pub next_table_id: u32,
    pub next_run_id: u64,
    /// Zones of the replayed log, released once a new checkpoint is durable.
    pub old_log: Vec<ZoneId>,
    /// The named snapshots.
    pub snapshots: BTreeMap<String, Arc<NamedSnapshot>>,
    /// What the manifest said of the log.
    pub checkpoint_lsn: u64,
    pub log_start: LogStart,
}

#[derive(Default)]
struct Replay {
    version: Version,
    next_table_id: u32,
    checkpoint_lsn: u64,
    /// How tables created by replayed records stitch.
    stitching: Stitching,
}

pub(crate) fn recover(
    disk: Arc<dyn Disk>,
    opts: &Options,
) -> Result<(Arc<Storage>, Recovered, Option<ExtentAddr>)> {
    let cache = Db::cache_for(disk, opts);
    let (zones, superblock) = ZoneStore::open(cache, opts.zone_config())?;
    let storage = Storage::new(Arc::new(zones), opts.read_cache_bytes, opts.background);
    let zones = &storage.zones;
    let root = superblock.root.ok_or_else(|| {
        Error::corrupt(
            "superblock",
            format!("seq {}", superblock.seq),
            "names no manifest: the store's creation never finished (create it again)",
        )
    })?;
    let payload = zones
        .read(root, ExtentKind::MANIFEST)
        .map_err(|e| Error::from(e).within("manifest", "the root"))?;
    let manifest = Manifest::decode(&payload).map_err(|d| Error::corrupt("manifest", root, d))?;
    zones.mark_live(root, ExtentKind::MANIFEST)?;
    // A run the mainline and snapshots share is opened once (its extents counted once).
    let mut opened: HashMap<u64, Arc<Run>> = HashMap::new();
    let mut version = Version::default();
    for t in &manifest.tables {
        let mut table = TableState::new(t.id, t.name.clone(), t.stitching);
        table.levels = open_levels(&storage, t, &mut opened)?;
        table.rebuild_view();
        version.names.insert(t.name.clone(), t.id);
        version.tables.insert(t.id, Arc::new(table));
    }
    let mut snapshots = BTreeMap::new();
    for snap in &manifest.snapshots {
        let tables = snap
            .tables
            .iter()
            .map(|t| {
                Ok(SnapshotTable {
                    id: t.id,
                    name: t.name.clone(),
                    stitching: t.stitching,
                    levels: open_levels(&storage, t, &mut opened)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let held = NamedSnapshot {
            seq: snap.seq,
            tables,
        };
        snapshots.insert(snap.name.clone(), Arc::new(held));
    }

    let replay = Arc::new(Mutex::new(Replay {
        version,
        next_table_id: manifest.next_table_id,
        checkpoint_lsn: manifest.checkpoint_lsn,
        stitching: opts.stitching,
    }));
    let registry = registry(&replay).map_err(log::log_err)?;
    let report = Wal::recover(
        zones,
        log::to_position(&manifest.log),
        manifest.log.epoch,
        &registry,
    )
    .map_err(log::log_err)?;
    drop(registry);
    zones.finish_open()?;
    // The registry, the only other holder, is gone: what replay built is taken whole.
    let replay = std::mem::take(&mut *replay.lock());
    let last_lsn = report
        .next_lsn
        .saturating_sub(1)
        .max(manifest.checkpoint_lsn);
    let recovered = Recovered {
        version: replay.version,
        last_lsn,
        next_table_id: replay.next_table_id,
        next_run_id: manifest.next_run_id,
        old_log: report.zones.clone(),
        snapshots,
        checkpoint_lsn: manifest.checkpoint_lsn,
        log_start: manifest.log,
    };
    Ok((storage, recovered, Some(root)))
}

/// Opens the runs `table` lists, by level (the manifest lists them by level, newest first
/// within each), reusing those already in `opened`.
fn open_levels(
    storage: &Arc<Storage>,
    table: &TableMeta,
    opened: &mut HashMap<u64, Arc<Run>>,
) -> Result<Vec<Vec<Arc<Run>>>> {
    let mut levels: Vec<Vec<Arc<Run>>> = Vec::new();
    for meta in &table.runs {
        let run = match opened.get(&meta.id) {
            Some(run) => run.clone(),
            None => {
                // Run::open names the structure (run index, run filter) and the run.
                let run = Run::open(storage, meta.clone())
                    .map_err(|e| e.placed_in(format!("table {}", table.name)))?;
                opened.insert(meta.id, run.clone());
                run
            }
        };
        let level = run.meta.level as usize;
        if levels.len() <= level {
            levels.resize_with(level + 1, Vec::new);
        }
        levels[level].push(run);
    }
    Ok(levels)
}

/// Redoes a batch record into the replayed tables' memtables (range deletes first: see
/// `write::chunks`).
fn redo(st: &Replay, rec: &LogRecord, with_ranges: bool) -> std::result::Result<(), String> {
    if rec.lsn <= st.checkpoint_lsn {
        return Ok(());
    }
    let (ops, ranges) = decode_ops(&rec.payload, with_ranges)?;
    let table = |id: TableId| {
        st.version
            .tables
            .get(&id)
            .ok_or_else(|| format!("batch names unknown table #{}", id.0))
    };
    for (id, start, end) in ranges {
        table(id)?.mem.delete_range(&start, &end, rec.lsn);
    }
    for (id, key, value) in ops {
        table(id)?.mem.insert(&key, rec.lsn, value);
    }
    Ok(())
}

/// The log operations of the key-value store, redoing into `replay`.
fn registry(replay: &Arc<Mutex<Replay>>) -> std::result::Result<OpRegistry, WalError> {
    let mut registry = OpRegistry::new();
    let redo_batch = |with_ranges: bool| {
        let r = replay.clone();
        move |rec: &LogRecord| -> std::result::Result<(), String> {
            redo(&r.lock(), rec, with_ranges)
        }
    };
    registry.register(log::OP_BATCH, "batch", Box::new(redo_batch(false)), None)?;
    let nothing_to_redo = |_: &LogRecord| -> std::result::Result<(), String> { Ok(()) };
    registry.register(
        log::OP_TXN_LINK,
        "transaction link",
        Box::new(nothing_to_redo),
        None,
    )?;
    registry.register(
        log::OP_BATCH_RANGES,
        "batch with range deletes",
        Box::new(redo_batch(true)),
        None,
    )?;

    let r = replay.clone();
    let redo_create = move |rec: &LogRecord| -> std::result::Result<(), String> {
        let mut st = r.lock();
        if rec.lsn <= st.checkpoint_lsn {
            return Ok(());
        }
        let mut reader = Reader::new(&rec.payload);
        let id = TableId(u32::try_from(reader.varint()?).map_err(|_| "table id out of range")?);
        let name =
            String::from_utf8(reader.bytes()?.to_vec()).map_err(|_| "table name is not UTF-8")?;
        if !st.version.tables.contains_key(&id) {
            let stitching = st.stitching;
            st.version.add_table(id, name, stitching);
        }
        st.next_table_id = st.next_table_id.max(id.0 + 1);
        Ok(())
    };
    registry.register(
        log::OP_CREATE_TABLE,
        "create_table",
        Box::new(redo_create),
        None,
    )?;
    Ok(registry)
}
