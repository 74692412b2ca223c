//! Opening a store: superblock, manifest, runs, then replay of the log since the checkpoint.

use super::damage::{Damage, LostKeys, Salvage};
use super::snapshot::{NamedSnapshot, SnapshotTable};
use super::{ingest, log, Db};
use crate::batch::{decode_ops, range_refs, RangeOp, TableId};
use crate::codec::Reader;
use crate::layout::cowbtree::node::Node;
use crate::layout::cowbtree::store::{self, LostNode, NodeRefs};
use crate::layout::cowbtree::Durable;
use crate::layout::vtree::run::{Run, Storage};
use crate::layout::{LayoutData, TableData, TableLayout};
use crate::manifest::{LogStart, Manifest, TableMeta};
use crate::options::Options;
use crate::options::Stitching;
use crate::version::{ids_taken, owner_name, TableState, Version};
use crate::{Error, Result};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use stitch_io::Disk;
use stitch_wal::{LogRecord, OpRegistry, Wal, WalError};
use stitch_zone::{ExtentAddr, ExtentKind, ZoneId, ZoneStore};

/// Bytes that hold both superblock slots (the second starts at 4096 and fits in a sector).
const SUPERBLOCK_BYTES: u64 = 4096 + 512;

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
    /// Ingested runs the manifest does not list, whose entries replay copied into memtables:
    /// the open's checkpoint retires them.
    pub replaced: Vec<Arc<Run>>,
    /// The chunks of large values the tables reference, counted in the zone store.
    pub large: Arc<super::large::Registry>,
    /// The written B+tree nodes' children (their release handler installed).
    pub nodes: Arc<NodeRefs>,
}

#[derive(Default)]
struct Replay {
    version: Version,
    next_table_id: u32,
    next_run_id: u64,
    checkpoint_lsn: u64,
    /// How tables created by replayed records stitch.
    stitching: Stitching,
    /// Where ingested runs are opened from (`None` only in a default, taken-out value).
    storage: Option<Arc<Storage>>,
    /// See `Recovered::replaced`.
    replaced: Vec<Arc<Run>>,
    /// A replayed table's layout this build does not know: the open is refused.
    refused: Option<Error>,
}

pub(crate) fn recover(
    disk: Arc<dyn Disk>,
    opts: &Options,
) -> Result<(Arc<Storage>, Recovered, Option<ExtentAddr>)> {
    recover_with(disk, opts, None)
}

/// [`recover`] for `check` and `repair`: every damaged structure is recorded in `salvage`
/// instead of failing the open, and what can be read around it is opened (the older
/// superblock's manifest if the newest is damaged, the readable blocks of damaged runs, the
/// log past damage). Fails only when nothing can be opened (no valid superblock).
pub(crate) fn recover_salvaging(
    disk: Arc<dyn Disk>,
    opts: &Options,
    salvage: &mut Salvage,
) -> Result<(Arc<Storage>, Recovered, Option<ExtentAddr>)> {
    recover_with(disk, opts, Some(salvage))
}

fn recover_with(
    disk: Arc<dyn Disk>,
    opts: &Options,
    mut salvage: Option<&mut Salvage>,
) -> Result<(Arc<Storage>, Recovered, Option<ExtentAddr>)> {
    // A file too short for both superblock slots was cut (creating a store writes both).
    let len = disk.len();
    if len > 0 && len < SUPERBLOCK_BYTES {
        return Err(Error::corrupt(
            "store file",
            disk.describe(),
            format!("the store is {len} bytes, too short for its superblocks: truncated?"),
        ));
    }
    let cache = Db::cache_for(disk, opts);
    let slots = stitch_zone::read_slots(&cache)?;
    let (zones, superblock) = ZoneStore::open(cache, opts.zone_config())?;
    let storage = Storage::new(Arc::new(zones), opts.read_cache_bytes, opts.background);
    let refs = NodeRefs::install(&storage.zones);
    let zones = &storage.zones;
    let short = zones.truncated_by();
    if short > 0 {
        let damage = Damage::new(
            "store file",
            zones.cache().disk().describe(),
            format!("the store is {short} bytes shorter than its zones: truncated?"),
        );
        match salvage.as_deref_mut() {
            Some(s) => s.damage.push(damage),
            None => return Err(Error::corrupt("store file", damage.place, damage.detail)),
        }
    }
    // Superblocks are written alternately, each within one sector a crash cannot tear, so a
    // damaged slot is damage, never a crash (but for a slot still all zeros beside one naming
    // no manifest: creation never wrote it); and it may have been the newer of the two, so
    // opening from the other could silently go back to the checkpoint before.
    let mut any_slot_damaged = false;
    for (offset, slot) in &slots {
        if let stitch_zone::SlotState::Damaged(why) = slot {
            if superblock.root.is_none() && why == stitch_zone::SLOT_ALL_ZEROS {
                continue;
            }
            any_slot_damaged = true;
            let detail = format!(
                "{why}; the other slot (superblock seq {}) may be older than the store's last \
                 checkpoint",
                superblock.seq
            );
            let place = format!("byte {offset}");
            match salvage.as_deref_mut() {
                Some(s) => s.damage.push(Damage::new("superblock slot", place, detail)),
                None => return Err(Error::corrupt("superblock slot", place, detail)),
            }
        }
    }
    let root = match (superblock.root, salvage.as_deref_mut()) {
        (Some(root), _) => root,
        // The newest slot, damaged, held the store's first checkpoint; the other is one
        // creation wrote, before anything: salvage from an empty store and the log its first
        // session started.
        (None, Some(s)) if any_slot_damaged => {
            return recover_from_creation(storage, opts, superblock.seq, s);
        }
        (None, _) => {
            return Err(Error::corrupt(
                "superblock",
                format!("seq {}", superblock.seq),
                "names no manifest: the store's creation never finished (create it again)",
            ))
        }
    };
    let read_manifest = |root: ExtentAddr| read_manifest(zones, root);
    let (manifest, root, manifest_seq) = match (read_manifest(root), salvage.as_deref_mut()) {
        (Ok(m), _) => (m, root, superblock.seq),
        (Err(e), None) => return Err(e),
        (Err(e), Some(s)) => {
            s.damage.push(Damage::from_error(&e, "manifest", root));
            older_manifest(&slots, superblock.seq, &read_manifest, s)?
        }
    };
    // The checkpoint read may be the one before the store's newest: its own superblock slot
    // was read because the other is damaged, or its manifest because the newest superblock's
    // is. Its log then runs on into the log of the next session if the newest checkpoint was
    // that session's first (see `newer_log`).
    let fell_back = manifest_seq < superblock.seq || any_slot_damaged;
    if salvage.is_none() {
        zones.mark_live(root, ExtentKind::MANIFEST)?;
    }
    // A run the mainline and snapshots share is opened once (its extents counted once), and
    // so is a B+tree node.
    let mut opened: HashMap<u64, Arc<Run>> = HashMap::new();
    let mut nodes = HashMap::new();
    let mut version = Version::default();
    for t in &manifest.tables {
        let layout = stored_layout(&t.name, &t.layout)?;
        // Damage in a region is the partitioned table's: repair looks its lost keys up by it.
        let label = owner_name(&t.name);
        let levels = open_levels(&storage, t, label, &mut opened, salvage.as_deref_mut())?;
        let root = open_root(
            &storage,
            &refs,
            t,
            label,
            &mut nodes,
            salvage.as_deref_mut(),
        )?;
        let data = LayoutData::opened(&layout, t.stitching, levels, root);
        let table = TableState {
            id: t.id,
            name: t.name.clone(),
            layout,
            data,
        };
        version.names.insert(t.name.clone(), t.id);
        version.tables.insert(t.id, Arc::new(table));
    }
    let mut snapshots = BTreeMap::new();
    for snap in &manifest.snapshots {
        let tables = snap
            .tables
            .iter()
            .map(|t| {
                let label = format!("snapshot {}, table {}", snap.name, owner_name(&t.name));
                Ok(SnapshotTable {
                    id: t.id,
                    name: t.name.clone(),
                    stitching: t.stitching,
                    layout: stored_layout(&t.name, &t.layout)?,
                    levels: open_levels(&storage, t, &label, &mut opened, salvage.as_deref_mut())?,
                    root: open_root(
                        &storage,
                        &refs,
                        t,
                        &label,
                        &mut nodes,
                        salvage.as_deref_mut(),
                    )?,
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
        next_run_id: manifest.next_run_id,
        checkpoint_lsn: manifest.checkpoint_lsn,
        stitching: opts.stitching,
        storage: Some(storage.clone()),
        replaced: Vec::new(),
        refused: None,
    }));
    let registry = registry(&replay).map_err(log::log_err)?;
    let start = log::to_position(&manifest.log);
    let report = match salvage.as_deref_mut() {
        None => Wal::recover(zones, start, manifest.log.epoch, &registry).map_err(log::log_err)?,
        Some(s) => {
            let report = salvage_log(zones, &manifest, &registry, s)?;
            match fell_back {
                true => newer_log(zones, manifest_seq + 1, &manifest, &registry, report, s),
                false => report,
            }
        }
    };
    drop(registry);
    let large = Arc::new(super::large::Registry::default());
    if salvage.is_none() {
        // Before the zones nobody marked are freed: chunks that only an unfinished commit
        // named are not referenced, so their zones are free.
        let runs = (snapshots.values())
            .flat_map(|snap| snap.tables.iter())
            .filter(|t| super::large::is_hidden(&t.name))
            .flat_map(|t| t.levels.iter().flatten());
        let referenced = super::large::referenced(&replay.lock().version, runs);
        large.rebuild(zones, referenced)?;
        let older =
            older_checkpoint_zones(&storage, &slots, (superblock.seq, root), &manifest, &opened);
        zones.keep_for_older_checkpoint(older);
        zones.finish_open()?;
    }
    // The registry, the only other holder, is gone: what replay built is taken whole.
    let replay = std::mem::take(&mut *replay.lock());
    if let Some(refused) = replay.refused {
        return Err(refused);
    }
    let last_lsn = report
        .next_lsn
        .saturating_sub(1)
        .max(manifest.checkpoint_lsn);
    let recovered = Recovered {
        version: replay.version,
        last_lsn,
        next_table_id: replay.next_table_id,
        next_run_id: replay.next_run_id,
        old_log: report.zones.clone(),
        snapshots,
        checkpoint_lsn: manifest.checkpoint_lsn,
        log_start: manifest.log,
        replaced: replay.replaced,
        large,
        nodes: refs,
    };
    Ok((storage, recovered, Some(root)))
}

/// A table's layout as the manifest or a log record stores it (empty: the default, as
/// stores before layouts have it); one this build does not know refuses the open.
fn stored_layout(table: &str, layout: &str) -> Result<Arc<TableLayout>> {
    if layout.is_empty() {
        return Ok(Arc::default());
    }
    TableLayout::parse(layout)
        .map(Arc::new)
        .map_err(|e| Error::UnknownLayout {
            table: table.to_string(),
            layout: layout.to_string(),
            why: e.to_string(),
        })
}

/// Reads and decodes the manifest at `root`.
fn read_manifest(zones: &ZoneStore, root: ExtentAddr) -> Result<Manifest> {
    let payload = zones
        .read(root, ExtentKind::MANIFEST)
        .map_err(|e| Error::from(e).within("manifest", "the root"))?;
    Manifest::decode(&payload).map_err(|d| Error::corrupt("manifest", root, d))
}

/// The zones the checkpoint of the older superblock slot names beyond what the newest one
/// (`newest`: its sequence number and manifest, whose runs are `opened`) does: its manifest
/// extent, the runs only it lists (their indexes are read), and its log from its position up
/// to the newest checkpoint's. Kept until the next superblock is durable, so that repair can
/// fall back to it whole. What cannot be read is not kept (with a warning): a repair falling
/// back to it would find it damaged anyway.
fn older_checkpoint_zones(
    storage: &Storage,
    slots: &[(u64, stitch_zone::SlotState)],
    newest: (u64, ExtentAddr),
    manifest: &Manifest,
    opened: &HashMap<u64, Arc<Run>>,
) -> Vec<ZoneId> {
    let zones = &storage.zones;
    let older = slots.iter().find_map(|(_, slot)| match slot {
        stitch_zone::SlotState::Valid(sb) if sb.seq < newest.0 => sb.root,
        _ => None,
    });
    let Some(root) = older.filter(|&root| root != newest.1) else {
        return Vec::new();
    };
    let older = match read_manifest(zones, root) {
        Ok(m) => m,
        Err(e) => {
            tracing::warn!("the older superblock's manifest is not kept: {e}");
            return Vec::new();
        }
    };
    let mut kept = vec![root.zone];
    let runs = older
        .tables
        .iter()
        .chain(older.snapshots.iter().flat_map(|s| s.tables.iter()))
        .flat_map(|t| t.runs.iter())
        .filter(|meta| !opened.contains_key(&meta.id));
    for meta in runs {
        match Run::zones_of(storage, meta) {
            Ok(run_zones) => kept.extend(run_zones),
            Err(e) => tracing::warn!("run {} of the older checkpoint is not kept: {e}", meta.id),
        }
    }
    let until = (older.log.epoch == manifest.log.epoch).then_some(manifest.log.zone);
    match stitch_wal::segment_zones(zones, log::to_position(&older.log), older.log.epoch, until) {
        Ok(log_zones) => kept.extend(log_zones),
        Err(e) => tracing::warn!("the older checkpoint's log is not kept: {e}"),
    }
    kept
}

/// Salvage of a store whose only readable superblock (of sequence number `seq`) is one that
/// creation wrote, naming no manifest, while the other slot is damaged: the store as created
/// (the default table, empty), then the log of epoch `seq + 1` if the first session started
/// one (see [`newer_log`]).
fn recover_from_creation(
    storage: Arc<Storage>,
    opts: &Options,
    seq: u64,
    salvage: &mut Salvage,
) -> Result<(Arc<Storage>, Recovered, Option<ExtentAddr>)> {
    let log = LogStart {
        zone: 0,
        offset: 0,
        lsn: 1,
        epoch: 0,
    };
    let manifest = Manifest {
        checkpoint_lsn: 0,
        log,
        next_table_id: 1,
        next_run_id: 1,
        tables: vec![TableMeta {
            id: TableId(0),
            name: super::DEFAULT_TABLE.to_string(),
            stitching: opts.stitching,
            layout: String::new(),
            runs: Vec::new(),
            root: None,
        }],
        snapshots: Vec::new(),
    };
    salvage.damage.push(Damage::new(
        "superblock slot",
        format!("seq {seq}"),
        "(note) the other slot, the only one readable, is one creation wrote: salvaging from \
         the empty store and the log of the store's first session",
    ));
    let mut version = Version::default();
    version.add_table(
        TableId(0),
        super::DEFAULT_TABLE.to_string(),
        opts.stitching,
        Arc::default(),
    );
    let replay = Arc::new(Mutex::new(Replay {
        version,
        next_table_id: 1,
        next_run_id: 1,
        checkpoint_lsn: 0,
        stitching: opts.stitching,
        storage: Some(storage.clone()),
        replaced: Vec::new(),
        refused: None,
    }));
    let registry = registry(&replay).map_err(log::log_err)?;
    let report = newer_log(
        &storage.zones,
        seq + 1,
        &manifest,
        &registry,
        empty_report(log::to_position(&log)),
        salvage,
    );
    drop(registry);
    let replay = std::mem::take(&mut *replay.lock());
    let recovered = Recovered {
        version: replay.version,
        last_lsn: report.next_lsn.saturating_sub(1),
        next_table_id: replay.next_table_id,
        next_run_id: replay.next_run_id,
        old_log: report.zones.clone(),
        snapshots: BTreeMap::new(),
        checkpoint_lsn: 0,
        log_start: log,
        replaced: replay.replaced,
        large: Default::default(),
        nodes: NodeRefs::install(&storage.zones),
    };
    Ok((storage, recovered, None))
}

/// The manifest of the older superblock slot, when the newest one's (of superblock `seq`) is
/// damaged: what the store held at the checkpoint before, and that superblock's sequence
/// number. Nothing at all if it is damaged too (every run is then out of reach: reported).
fn older_manifest(
    slots: &[(u64, stitch_zone::SlotState)],
    seq: u64,
    read_manifest: &dyn Fn(ExtentAddr) -> Result<Manifest>,
    salvage: &mut Salvage,
) -> Result<(Manifest, ExtentAddr, u64)> {
    let older = slots.iter().find_map(|(_, slot)| match slot {
        stitch_zone::SlotState::Valid(sb) if sb.seq < seq => sb.root.map(|root| (root, sb.seq)),
        _ => None,
    });
    if let Some((root, older_seq)) = older {
        match read_manifest(root) {
            Ok(m) => {
                salvage.damage.push(Damage::new(
                    "manifest",
                    root,
                    "(note) read the older superblock's manifest instead; its runs and log are \
                     kept until the superblock after the newest is durable, so replaying its \
                     log recovers what the newest checkpoint held (but `Async` and `Ordered` \
                     commits that checkpoint wrote out before their log records were written)",
                ));
                return Ok((m, root, older_seq));
            }
            Err(e) => salvage
                .damage
                .push(Damage::from_error(&e, "manifest", root)),
        }
    }
    Err(Error::corrupt(
        "manifest",
        "both superblocks' roots",
        "no readable manifest: no table, run or log of the store can be found",
    ))
}

/// Replays the log past damage, recording what was read past and what was not redone.
/// A log that cannot be read at all is recorded as damage and nothing is replayed.
fn salvage_log(
    zones: &ZoneStore,
    manifest: &Manifest,
    registry: &OpRegistry,
    salvage: &mut Salvage,
) -> Result<stitch_wal::RecoveryReport> {
    let start = log::to_position(&manifest.log);
    salvage_log_from(zones, start, manifest.log.epoch, registry, salvage)
}

/// After the older checkpoint's log (`older`, replayed), the log of epoch `epoch` if there
/// is one: the log a session opened from that checkpoint started. Its first checkpoint is
/// the superblock `epoch` (a session's log takes the sequence number of the superblock its
/// opening writes), the damaged one, so nothing else names it; it is found by its first
/// segment's header, and replayed if it starts where the older log ends. Returns the two
/// replays as one report.
fn newer_log(
    zones: &ZoneStore,
    epoch: u64,
    manifest: &Manifest,
    registry: &OpRegistry,
    older: stitch_wal::RecoveryReport,
    salvage: &mut Salvage,
) -> stitch_wal::RecoveryReport {
    let start = match stitch_wal::find_log_start(zones, epoch) {
        Ok(Some(start)) => start,
        Ok(None) => return older,
        Err(e) => {
            let place = format!("the log of epoch {epoch}");
            salvage
                .damage
                .push(Damage::from_error(&log::log_err(e), "log", place));
            return older;
        }
    };
    // What the session that started it replayed before it: the older log to its end.
    let expected = older.next_lsn.max(manifest.checkpoint_lsn + 1);
    if start.lsn < expected {
        salvage.damage.push(Damage::new(
            "log",
            start,
            format!(
                "the log of epoch {epoch} starts at lsn {}, before the end of the older \
                 checkpoint's log (lsn {expected}): not replayed",
                start.lsn
            ),
        ));
        return older;
    }
    if start.lsn > expected {
        salvage.damage.push(Damage::new(
            "log",
            start,
            format!(
                "the older checkpoint's log ends at lsn {expected}, the log of epoch {epoch} \
                 starts at lsn {}: the records between are lost",
                start.lsn
            ),
        ));
    }
    let newer = match salvage_log_from(zones, start, epoch, registry, salvage) {
        Ok(newer) => newer,
        Err(_) => return older,
    };
    salvage.damage.push(Damage::new(
        "log",
        start,
        format!(
            "(note) replayed the log of epoch {epoch} after the older checkpoint's: {} records",
            newer.records
        ),
    ));
    let mut zones_read = older.zones;
    zones_read.extend(newer.zones.iter().copied());
    let mut skipped = older.skipped;
    skipped.extend(newer.skipped.iter().cloned());
    let mut incomplete = older.incomplete_txns;
    incomplete.extend(newer.incomplete_txns.iter().copied());
    stitch_wal::RecoveryReport {
        start: older.start,
        records: older.records + newer.records,
        winners: older.winners + newer.winners,
        losers: older.losers + newer.losers,
        redone: older.redone + newer.redone,
        undone: older.undone + newer.undone,
        zones: zones_read,
        skipped,
        incomplete_txns: incomplete,
        ..newer
    }
}

/// [`salvage_log`] of the log of epoch `epoch` from `start`.
fn salvage_log_from(
    zones: &ZoneStore,
    start: stitch_wal::LogPosition,
    epoch: u64,
    registry: &OpRegistry,
    salvage: &mut Salvage,
) -> Result<stitch_wal::RecoveryReport> {
    match Wal::recover_salvaging(zones, start, epoch, registry) {
        Ok(report) => {
            for skipped in &report.skipped {
                salvage.damage.push(Damage::new(
                    "log",
                    skipped.at,
                    format!(
                        "{}; read on at {} (lsn {}..{} lost)",
                        skipped.record, skipped.resume, skipped.at.lsn, skipped.resume.lsn
                    ),
                ));
            }
            if let Some(zone) = report.end_reason.cut {
                salvage.damage.push(Damage::new(
                    "store file",
                    format!("zone {zone}"),
                    &report.end_reason,
                ));
            }
            if !report.incomplete_txns.is_empty() {
                salvage.damage.push(Damage::new(
                    "log",
                    start,
                    format!(
                        "{} committed transactions not replayed: damage may have taken part \
                         of them (txn ids {:?})",
                        report.incomplete_txns.len(),
                        report.incomplete_txns
                    ),
                ));
            }
            Ok(report)
        }
        Err(e) => {
            salvage
                .damage
                .push(Damage::from_error(&log::log_err(e), "log", start));
            Ok(empty_report(start))
        }
    }
}

/// What replaying nothing from `start` found.
fn empty_report(start: stitch_wal::LogPosition) -> stitch_wal::RecoveryReport {
    stitch_wal::RecoveryReport {
        start,
        end: start,
        end_reason: stitch_wal::LogEnd {
            at: start,
            record: stitch_wal::RecordError::NoRoom { left: 0 },
            next_segment: "not read".into(),
            damage: None,
            cut: None,
        },
        last_lsn: None,
        next_lsn: start.lsn,
        records: 0,
        winners: 0,
        losers: 0,
        loser_txns: Vec::new(),
        redone: 0,
        undone: 0,
        zones: Vec::new(),
        skipped: Vec::new(),
        incomplete_txns: Vec::new(),
    }
}

/// Opens the runs `table` lists, by level (the manifest lists them by level, newest first
/// within each), reusing those already in `opened`. `label` names the table in messages.
/// With `salvage`, damaged runs are opened as far as they can be and the damage recorded.
/// Loads the B+tree `table` names a root of, if it does (`cowbtree::store`: its nodes'
/// references counted); salvaging, a damaged node's keys are reported lost.
fn open_root(
    storage: &Arc<Storage>,
    refs: &NodeRefs,
    table: &TableMeta,
    label: &str,
    nodes: &mut HashMap<ExtentAddr, Arc<Node>>,
    mut salvage: Option<&mut Salvage>,
) -> Result<Option<Durable>> {
    let Some(addr) = table.root else {
        return Ok(None);
    };
    let salvaging = salvage.is_some();
    let mut report = |lost: LostNode| {
        if let Some(s) = salvage.as_deref_mut() {
            let place = format!("table {label}, {}", lost.addr);
            s.damage
                .push(Damage::from_error(&lost.error, "B+tree node", &place));
            s.lost.push(LostKeys {
                table: label.to_string(),
                run: 0,
                start: lost.start,
                end: lost.end,
                entries: None,
                why: format!("B+tree node {} is damaged", lost.addr),
            });
        }
    };
    let root = store::load_tree(
        &storage.zones,
        refs,
        addr,
        nodes,
        salvaging.then_some(&mut report as &mut dyn FnMut(LostNode)),
    )
    .map_err(|e| e.placed_in(format!("table {label}")))?;
    Ok(Some(Durable { addr, root }))
}

fn open_levels(
    storage: &Arc<Storage>,
    table: &TableMeta,
    label: &str,
    opened: &mut HashMap<u64, Arc<Run>>,
    mut salvage: Option<&mut Salvage>,
) -> Result<Vec<Vec<Arc<Run>>>> {
    let mut levels: Vec<Vec<Arc<Run>>> = Vec::new();
    for meta in &table.runs {
        let run = match opened.get(&meta.id) {
            Some(run) => run.clone(),
            None => {
                let run = match salvage.as_deref_mut() {
                    // Run::open names the structure (run index, run filter) and the run.
                    None => Run::open(storage, meta.clone())
                        .map_err(|e| e.placed_in(format!("table {label}")))?,
                    Some(s) => {
                        let (run, problems, lost) = Run::open_salvaging(storage, meta.clone());
                        let place = format!("table {label}, run {}", meta.id);
                        s.damage.extend(problems.iter().map(|e| {
                            Damage::from_error(
                                &e.clone().placed_in(format!("table {label}")),
                                "run",
                                &place,
                            )
                        }));
                        s.lost.extend(lost.into_iter().map(|l| LostKeys {
                            table: label.to_string(),
                            run: meta.id,
                            start: l.start,
                            end: l.end,
                            entries: l.entries,
                            why: l.why,
                        }));
                        match run {
                            Some(run) => run,
                            None => continue,
                        }
                    }
                };
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
    redo_commit(st, rec.lsn, &ranges, ops)
}

/// Applies a replayed commit's range deletes and writes as the write path did.
fn redo_commit(
    st: &Replay,
    lsn: u64,
    ranges: &[RangeOp],
    ops: Vec<(TableId, Vec<u8>, crate::entry::Value)>,
) -> std::result::Result<(), String> {
    st.version
        // No reader is open during replay: only the newest version is kept.
        .apply_commit(lsn, range_refs(ranges), ops, || lsn)
        .map_err(|e| format!("replaying commit {lsn}: {e}"))
}

/// Redoes an ingest record: copies its run's entries into the replayed memtable, except
/// those for which a run the manifest lists holds the same version (the run itself, or a
/// merge of it) or a newer one (a later ingest's), then
/// applies the batch's other operations. Copied, not adopted as a run: the memtable holds
/// the records replayed before this one, some of which may be older versions of the run's
/// keys (their runs were installed, but not in a durable manifest, when the run was
/// ingested), and the memtable is read before runs. (A listed run holding the run's entries
/// was listed by a manifest written after every such older version was in a run it lists,
/// so none of those is replayed.) A run the manifest does not list is opened here (its
/// extents are intact: see `ingest`) and retired by the open's checkpoint.
fn redo_ingest(st: &mut Replay, rec: &LogRecord) -> std::result::Result<(), String> {
    if rec.lsn <= st.checkpoint_lsn {
        return Ok(());
    }
    let record = ingest::decode_record(&rec.payload)?;
    let id = record.run.id;
    if record.run.min_seq != rec.lsn || record.run.max_seq != rec.lsn {
        return Err(format!(
            "ingested run {id} holds sequence numbers {}..={}, its record is {}",
            record.run.min_seq, record.run.max_seq, rec.lsn
        ));
    }
    let table = st
        .version
        .tables
        .get(&record.table)
        .ok_or_else(|| format!("ingest names unknown table #{}", record.table.0))?
        .clone();
    let run = match table.data.runs().find(|r| r.meta.id == id) {
        Some(run) => run.clone(),
        None => {
            let storage = st.storage.as_ref().ok_or("replay without a store")?;
            let run = Run::open(storage, record.run).map_err(|e| e.to_string())?;
            st.next_run_id = st.next_run_id.max(id + 1);
            st.replaced.push(run.clone());
            run
        }
    };
    // Listed runs that may hold versions of this commit or newer ones (ingested later).
    let holders: Vec<&Arc<Run>> = table
        .data
        .runs()
        .filter(|r| r.meta.max_seq >= rec.lsn)
        .collect();
    for entry in run.iter_from(&[]) {
        let entry = entry.map_err(|e| e.to_string())?;
        // A listed version at least as new answers for the key: a copy in the memtable,
        // read first, would hide a newer one.
        let mut answered = false;
        for r in &holders {
            let found = r.get(&entry.key, u64::MAX).map_err(|e| e.to_string())?;
            answered |= found.is_some_and(|(seq, _)| seq >= entry.seq);
        }
        if !answered {
            table.data.write(&entry.key, entry.seq, entry.value);
        }
    }
    redo_commit(st, rec.lsn, &record.ranges, record.ops)
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
    registry.register(
        log::OP_INGEST,
        "ingest",
        Box::new(move |rec: &LogRecord| redo_ingest(&mut r.lock(), rec)),
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
        // Records before table layouts end with the name: the default layout.
        let layout = match reader.is_empty() {
            true => String::new(),
            false => String::from_utf8(reader.bytes()?.to_vec()).map_err(|_| "layout not UTF-8")?,
        };
        let layout = match stored_layout(&name, &layout) {
            Ok(layout) => layout,
            // Not damage: a newer build's table. The open is refused once replay ends.
            Err(e) => {
                st.refused.get_or_insert(e);
                return Ok(());
            }
        };
        // A partitioned table's regions are made with it, by this one record.
        st.next_table_id = st.next_table_id.max(id.0 + ids_taken(&layout));
        if !st.version.tables.contains_key(&id) {
            let stitching = st.stitching;
            st.version.add_table(id, name, stitching, layout);
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{put_bytes, put_varint};
    use stitch_io::{SimConfig, SimDisk};
    use stitch_wal::Flags;

    /// A table whose layout a newer build wrote (a module this one does not know): the open
    /// is refused with the layout's name, from the log and from `stored_layout` (the
    /// manifest's path), and never read with another layout.
    #[test]
    fn a_layout_this_build_does_not_know_refuses_the_open() {
        let disk = Arc::new(SimDisk::new(SimConfig {
            seed: 1,
            len: 0,
            capacity: None,
        }));
        let opts = Options {
            background: false,
            ..Options::default()
        };
        let db = Db::create_on(disk.clone(), opts.clone()).unwrap();
        let inner = db.shared();
        let mut payload = Vec::new();
        put_varint(&mut payload, 7);
        put_bytes(&mut payload, b"future");
        put_bytes(&mut payload, b"managed -> zigzag(3) -> linear");
        let txn = {
            let mut w = inner.write.lock();
            w.next_txn += 1;
            w.next_txn - 1
        };
        let wal = inner.wal().unwrap();
        let appended =
            wal.append_with_deps(txn, log::OP_CREATE_TABLE, Flags::AUTOCOMMIT, &payload, &[]);
        inner.sync_log(appended.unwrap().0).unwrap();
        // Crashed (no checkpoint after the record): the open replays it.
        let image = disk.process_crash();
        drop(db);
        let Err(err) = Db::open_on(Arc::new(image), opts) else {
            panic!("a store with a layout this build does not know opened");
        };
        assert!(
            matches!(&err, Error::UnknownLayout { table, layout, .. }
                if table == "future" && layout.contains("zigzag")),
            "{err}"
        );
        assert!(
            err.to_string().contains("\"zigzag\": unknown module"),
            "{err}"
        );
        let err = stored_layout("t", "managed -> hash(8)").unwrap_err();
        assert!(err.to_string().contains("managed -> hash(8)"), "{err}");
        assert_eq!(*stored_layout("t", "").unwrap(), TableLayout::default());
    }
}
