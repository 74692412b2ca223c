//! Damage to a store is never silent, and what survives it can be salvaged.
//!
//! The suite: a store written with every structure present (runs with indexes and filters,
//! manifests, two tables, a named snapshot, a log holding synced and unsynced records), then
//! for each structure and both superblock slots, bytes overwritten and, separately, the file
//! cut in the middle of it (the store is a crash image taken while the last commit's sync
//! was under way, so its log ends in a record no sync covered). For each: `check` names the damage, `open` recovers exactly (a
//! torn log tail) or refuses naming the damage, no read returns wrong data, nothing panics,
//! and `repair` leaves a store that passes `check` holding every key whose block is intact.
//!
//! Plus the case: a log segment overwritten in its middle, with acknowledged `Sync`
//! commits past the damage still only in the log, must make `open` refuse (naming the place
//! and how many records are out of reach), not silently drop every later commit.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use stitch_zone::EXTENT_HEADER_LEN;
use stitchdb::{
    Db, Disk, Durability, Error, LostKeys, MemDisk, Options, RepairReport, SimConfig, SimDisk,
};

const ZONE: u64 = 1 << 20;

fn options() -> Options {
    Options {
        zone_size: ZONE,
        // Large enough that nothing is checkpointed: every commit stays only in the log.
        memtable_size: 64 << 20,
        background: false,
        durability: Durability::Sync,
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    format!("value of key {i:08}, some bytes to make a record").into_bytes()
}

/// A store holding `n` keys, each committed with `Sync`, and what a crash then leaves: every
/// commit is durable, and only in the log.
fn synced_commits_in_the_log(n: u64) -> SimDisk {
    let sim = Arc::new(SimDisk::new(SimConfig {
        seed: 7,
        len: 0,
        capacity: None,
    }));
    let db = Db::create_on(sim.clone(), options()).unwrap();
    let t = db.default_table();
    for i in 0..n {
        db.put(t, key(i), value(i)).unwrap();
    }
    let image = sim.crash(1);
    drop(db);
    image
}

/// The zone of the newest log segment on `disk` (the largest epoch among segment headers),
/// with zones of `zone` bytes.
fn log_zone(disk: &dyn Disk, zone: u64) -> u64 {
    let mut best = None;
    for z in 1..disk.len() / zone {
        let mut header = [0u8; 24];
        disk.read_at(z * zone, &mut header).unwrap();
        if &header[..8] == b"STWALSEG" {
            let epoch = u64::from_le_bytes(header[16..24].try_into().unwrap());
            if best.is_none_or(|(e, _)| epoch > e) {
                best = Some((epoch, z));
            }
        }
    }
    best.unwrap().1
}

#[test]
fn log_overwritten_in_its_middle_is_refused_not_truncated() {
    let n = 10_251;
    let image = synced_commits_in_the_log(n);
    let damaged_at = log_zone(&image, ZONE) * ZONE + 100_000;
    image.write_at(damaged_at, &[0xA5; 16]).unwrap();
    let disk: Arc<dyn Disk> = Arc::new(image);
    let err = match Db::open_on(disk.clone(), options()) {
        Ok(db) => {
            let t = db.default_table();
            let held = (0..n)
                .filter(|&i| db.get(t, key(i)).unwrap().is_some())
                .count();
            panic!("a damaged log opened, holding {held} of {n} keys");
        }
        Err(e) => e,
    };
    assert!(matches!(err, Error::Log(_)), "{err}");
    let text = err.to_string();
    assert!(text.contains("damaged"), "{text}");
    assert!(text.contains("offset"), "the place is named: {text}");
    assert!(text.contains("out of reach"), "{text}");
    // Read-only opening refuses too: nothing silently hides the lost commits.
    assert!(Db::open_read_only_on(disk, options()).is_err());
}

// ---- the damage suite --------------------------------------------------------------------

/// Zones of the suite's store: small, so it has many zones, runs and segments.
const SMALL_ZONE: u64 = 64 * 1024;

fn suite_options(memtable_size: usize) -> Options {
    Options {
        zone_size: SMALL_ZONE,
        memtable_size,
        level_runs: 2,
        background: false,
        ..Options::default()
    }
}

type Table = BTreeMap<Vec<u8>, Vec<u8>>;

/// Every table's contents, by name.
fn contents(db: &Db) -> BTreeMap<String, Table> {
    db.tables()
        .into_iter()
        .map(|name| {
            let t = db.table(&name).unwrap();
            let pairs = db
                .range(t, Bound::Unbounded, Bound::Unbounded)
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            (name, pairs)
        })
        .collect()
}

/// The layout of the suite's second table (its values are all 49 bytes), so that damage to
/// specialized blocks (with the layers byte, `existential` naming it: version 10, keys of one
/// width as one array, and in its first block, where one key is a byte longer, version 8)
/// and Bloom filters is named, refused or recovered, and repaired, too.
const SECOND_LAYOUT: &str = "managed -> bloom -> btree(node=1024) -> existential -> fixed(49)";

/// The layout of the suite's third table, whose values repeat: its blocks are version 9,
/// values referring back within a block (`sliding-window`).
const THIRD_LAYOUT: &str = "managed -> btree(node=1024) -> sliding-window(window=8) -> linear";

/// The layout of the suite's fourth table: a partition whose regions are hidden tables, so
/// that repair finds a region's lost keys under its table and rebuilds the partition.
const FOURTH_LAYOUT: &str = "partition(at=\"key00000300\") -> \
    [managed -> btree(node=1024) -> linear | managed -> bloom -> linear]";

/// The fourth table's canonical layout, as a repaired store must keep it.
const FOURTH_CANONICAL: &str = "partition(at=\"key00000300\") -> [managed -> btree(node=1024) -> \
    linear | managed -> bloom(bits=10) -> linear]";

/// The third table's value of key `i`: one of three that repeat, or `suite_value`'s.
fn third_value(i: u64) -> Vec<u8> {
    match i % 8 {
        0 => suite_value(i, 1),
        n => format!("popular-{}", n % 3).repeat(6).into_bytes(),
    }
}

fn suite_value(i: u64, round: u32) -> Vec<u8> {
    format!("v{round}-{i:05}-{}", "z".repeat(40)).into_bytes()
}

/// The bytes of the suite's store and the key of its unsynced last commit: runs in two
/// tables (merged, with filters), a snapshot, and a log holding `Sync` commits (keys
/// 600..700), the last of which was written but not yet synced when the crash came.
fn suite_store() -> (Vec<u8>, u64) {
    let disk = support::CrashingDisk::new(11);
    let db = Db::create_on(disk.clone(), suite_options(8 * 1024)).unwrap();
    let t = db.default_table();
    let second = db
        .create_table_with_layout("second", SECOND_LAYOUT)
        .unwrap();
    let third = db.create_table_with_layout("third", THIRD_LAYOUT).unwrap();
    let fourth = db
        .create_table_with_layout("fourth", FOURTH_LAYOUT)
        .unwrap();
    for i in 0..600 {
        db.put(t, key(i), suite_value(i, 1)).unwrap();
        if i % 3 == 0 {
            db.put(second, key(i), suite_value(i, 1)).unwrap();
        }
        if i % 2 == 0 {
            db.put(third, key(i), third_value(i)).unwrap();
        }
        if i % 4 == 1 {
            db.put(fourth, key(i), suite_value(i, 1)).unwrap();
        }
        if i == 0 {
            let wider = [key(i), b"+".to_vec()].concat();
            db.put(second, wider, suite_value(i, 1)).unwrap();
        }
        if i == 300 {
            db.snapshot("snap").unwrap();
        }
    }
    for i in 0..100 {
        db.put(t, key(i), suite_value(i, 2)).unwrap();
    }
    for i in 100..120 {
        db.delete(t, key(i)).unwrap();
    }
    db.close().unwrap();
    // Reopened with a large memtable: what follows stays in the log. Crash images are taken
    // at every write and sync of the last commits.
    let db = Db::open_on(disk.clone(), suite_options(1 << 20)).unwrap();
    for i in 600..700 {
        if i == 690 {
            *disk.probability.lock() = 1.0;
        }
        disk.issued.store(i + 1, Ordering::SeqCst);
        db.put(t, key(i), suite_value(i, 1)).unwrap();
        disk.acked.store(i + 1, Ordering::SeqCst);
    }
    *disk.probability.lock() = 0.0;
    drop(db);
    // The first image holding a commit whose sync had not returned.
    let images: Vec<_> = disk.images.lock().drain(..).collect();
    for (image, acked, issued) in images {
        if acked == issued {
            continue;
        }
        let mut bytes = vec![0u8; image.len() as usize];
        image.read_at(0, &mut bytes).unwrap();
        let db = Db::open_read_only_on(disk_of(&bytes), suite_options(1 << 20)).unwrap();
        if db.get(t, key(issued - 1)).unwrap().is_some() {
            return (bytes, issued - 1);
        }
    }
    panic!("no crash image holds an unsynced commit");
}

fn disk_of(bytes: &[u8]) -> Arc<dyn Disk> {
    let disk = MemDisk::new(bytes.len() as u64);
    disk.write_at(0, bytes).unwrap();
    Arc::new(disk)
}

/// What the unsynced last log record is: overwriting it tears the log's tail, which is not
/// damage.
const TORN_TAIL: &str = "torn log tail";

/// One way to damage the store, and what `check` must call it.
struct Case {
    name: String,
    /// The structure `check` must name ("run block", "superblock slot" ...).
    names: &'static str,
    damage: Damage,
    /// Overwriting it is a torn log tail: `open` recovers without it.
    torn_tail: bool,
}

enum Damage {
    Overwrite { at: u64, bytes: Vec<u8> },
    Cut { len: u64 },
}

fn position(bytes: &[u8], needle: &[u8], within: (u64, u64)) -> Option<u64> {
    let (start, end) = (within.0 as usize, (within.1 as usize).min(bytes.len()));
    bytes[start..end]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| (start + p) as u64)
}

/// Every case: each structure of `layout` (data blocks: the first, a middle and the last of
/// each run), both superblock slots, the log's segment header, a synced record in the
/// middle of the log and the last unsynced one; each overwritten, and the file cut inside.
fn cases(bytes: &[u8], unsynced: u64, layout: &[stitchdb::Placed]) -> Vec<Case> {
    let mut targets: Vec<(String, &'static str, u64, u64)> = vec![
        ("superblock slot 0".into(), "superblock slot", 0, 64),
        ("superblock slot 1".into(), "superblock slot", 4096, 64),
    ];
    let mut blocks_by_run: BTreeMap<String, Vec<&stitchdb::Placed>> = BTreeMap::new();
    for p in layout {
        match p.what {
            "run block" => {
                let run = p.label.split(" block").next().unwrap().to_string();
                blocks_by_run.entry(run).or_default().push(p);
            }
            "log segment" => {
                targets.push((
                    "log segment header".into(),
                    "log segment header",
                    p.disk_offset,
                    64,
                ));
                let zone = (p.disk_offset, p.disk_offset + p.len);
                // Key 650 was committed with Sync, and others after it.
                let synced = position(bytes, &suite_value(650, 1), zone).unwrap();
                targets.push(("synced log record".into(), "log", synced - 8, 16));
                // The commit whose sync never returned: damaging it tears the tail.
                let at = position(bytes, &suite_value(unsynced, 1), zone).unwrap();
                targets.push(("unsynced last log record".into(), TORN_TAIL, at - 8, 16));
            }
            what => targets.push((format!("{what} {}", p.label), what, p.disk_offset, p.len)),
        }
    }
    for blocks in blocks_by_run.values() {
        let picks = [0, blocks.len() / 2, blocks.len() - 1];
        for &i in picks.iter().collect::<std::collections::BTreeSet<_>>() {
            let p = blocks[i];
            targets.push((
                format!("run block {}", p.label),
                "run block",
                p.disk_offset,
                p.len,
            ));
        }
    }
    let mut out = Vec::new();
    for (name, names, start, len) in targets {
        let at = start + len / 2 - 8;
        out.push(Case {
            name: format!("{name}: 16 bytes overwritten"),
            names,
            torn_tail: names == TORN_TAIL,
            damage: Damage::Overwrite {
                at,
                bytes: bytes[at as usize..at as usize + 16]
                    .iter()
                    .map(|b| !b)
                    .collect(),
            },
        });
        out.push(Case {
            name: format!("{name}: file cut inside it"),
            names: "store file",
            torn_tail: false,
            damage: Damage::Cut {
                len: start + len / 2,
            },
        });
    }
    out
}

fn in_range(key: &[u8], lost: &LostKeys) -> bool {
    let after_start = match &lost.start {
        Bound::Included(s) => key >= s.as_slice(),
        Bound::Excluded(s) => key > s.as_slice(),
        Bound::Unbounded => true,
    };
    let before_end = match &lost.end {
        Bound::Included(e) => key <= e.as_slice(),
        Bound::Excluded(e) => key < e.as_slice(),
        Bound::Unbounded => true,
    };
    after_start && before_end
}

/// Every read of `db` and its snapshot gives the value `expected` (and `expected_snap`) holds,
/// or an error; never another value. Returns the reads that failed.
fn no_wrong_read(
    case: &str,
    db: &Db,
    expected: &BTreeMap<String, Table>,
    expected_snap: &BTreeMap<String, Table>,
) -> usize {
    let mut errors = 0;
    for (name, pairs) in expected {
        let Ok(t) = db.table(name) else {
            errors += 1;
            continue;
        };
        errors += reads_agree(
            case,
            pairs,
            |k| db.get(t, k),
            || db.range(t, Bound::Unbounded, Bound::Unbounded),
        );
    }
    let Ok(snap) = db.open_snapshot("snap") else {
        return errors + 1;
    };
    for (name, pairs) in expected_snap {
        let Ok(t) = snap.table(name) else {
            errors += 1;
            continue;
        };
        errors += reads_agree(
            case,
            pairs,
            |k| snap.get(t, k),
            || snap.range(t, Bound::Unbounded, Bound::Unbounded),
        );
    }
    errors
}

/// Gets every key of `pairs` and scans the table: each read gives the pair's value or fails.
fn reads_agree(
    case: &str,
    pairs: &Table,
    get: impl Fn(&[u8]) -> stitchdb::Result<Option<Vec<u8>>>,
    scan: impl Fn() -> stitchdb::Result<stitchdb::DbIter>,
) -> usize {
    let mut errors = 0;
    for (k, v) in pairs {
        match get(k) {
            Ok(Some(got)) => assert_eq!(&got, v, "{case}: key {}", k.escape_ascii()),
            Ok(None) => panic!("{case}: key {} vanished", k.escape_ascii()),
            Err(_) => errors += 1,
        }
    }
    match scan() {
        Ok(iter) => {
            for pair in iter {
                let Ok((k, v)) = pair else {
                    errors += 1;
                    break;
                };
                assert_eq!(
                    pairs.get(&k),
                    Some(&v),
                    "{case}: scan gave {}",
                    k.escape_ascii()
                );
            }
        }
        Err(_) => errors += 1,
    }
    errors
}

/// Every table of `name`d snapshot of `db`, by name.
fn snapshot_contents(db: &Db, name: &str) -> BTreeMap<String, Table> {
    let snap = db.open_snapshot(name).unwrap();
    snap.tables()
        .into_iter()
        .map(|table| {
            let t = snap.table(&table).unwrap();
            let pairs = snap
                .range(t, Bound::Unbounded, Bound::Unbounded)
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            (table, pairs)
        })
        .collect()
}

/// The repaired store passes check and holds every key not lost with its value: lost ones
/// lie in a listed range, in the log (the damaged records' keys), or past a cut.
fn repaired_holds_what_survived(
    case: &Case,
    report: &RepairReport,
    fresh: Arc<dyn Disk>,
    expected: &BTreeMap<String, Table>,
    expected_snap: &BTreeMap<String, Table>,
) {
    let check = Db::check_store_on(fresh.clone(), suite_options(1 << 20)).unwrap();
    assert!(
        check.is_ok(),
        "{}: repaired store fails check: {:?}",
        case.name,
        check.damage
    );
    let db = Db::open_read_only_on(fresh, suite_options(1 << 20)).unwrap();
    // Each laid-out table that survives keeps its layout (in canonical form).
    for (name, layout) in [
        (
            "second",
            "managed -> bloom(bits=10) -> btree(node=1024) -> existential -> fixed(size=49)",
        ),
        (
            "third",
            "managed -> btree(node=1024) -> sliding-window(window=8) -> linear",
        ),
        ("fourth", FOURTH_CANONICAL),
    ] {
        if let Ok(t) = db.table(name) {
            assert_eq!(
                db.table_layout(t).unwrap(),
                layout,
                "{}: the repaired table keeps its layout",
                case.name
            );
        }
    }
    let got = contents(&db);
    // The snapshot, written again, holds nothing its original did not.
    if db.snapshots().iter().any(|s| s.name == "snap") {
        for (name, pairs) in snapshot_contents(&db, "snap") {
            for (k, v) in pairs {
                let listed = report.possibly_older.iter().any(|(_, key)| *key == k);
                assert!(
                    expected_snap[&name].get(&k) == Some(&v) || listed,
                    "{}: snapshot key {}",
                    case.name,
                    k.escape_ascii()
                );
            }
        }
    }
    let mut missing = 0;
    for (name, pairs) in expected {
        let empty = Table::new();
        let held = got.get(name).unwrap_or(&empty);
        for (k, v) in pairs {
            let listed = report
                .salvage
                .lost
                .iter()
                .any(|l| l.table == *name && in_range(k, l))
                || report
                    .possibly_older
                    .iter()
                    .any(|(t, key)| t == name && key == k);
            match held.get(k) {
                Some(got) if got == v => {}
                Some(got) => assert!(
                    listed,
                    "{}: key {} holds {}",
                    case.name,
                    k.escape_ascii(),
                    got.escape_ascii()
                ),
                None if listed => {}
                None => missing += 1,
            }
        }
        for k in held.keys() {
            let listed = report
                .possibly_older
                .iter()
                .any(|(t, key)| t == name && key == k);
            assert!(
                pairs.contains_key(k) || listed,
                "{}: key {} appeared",
                case.name,
                k.escape_ascii()
            );
        }
    }
    match (&case.damage, case.names) {
        // A damaged log record loses its own key; a bad segment header its segment's.
        (Damage::Overwrite { .. }, "log") => {
            assert!(missing <= 2, "{}: {missing} missing", case.name)
        }
        // A bad segment header hides its segment's records; a cut, what lay past it.
        (Damage::Overwrite { .. }, "log segment header") | (Damage::Cut { .. }, _) => {}
        // The newest superblock or manifest lost, the older checkpoint is read: everything it
        // names is kept until the superblock after the newest is durable, and its log runs on
        // into the next session's, so nothing acknowledged is lost (docs/damage.md).
        _ => assert_eq!(
            missing, 0,
            "{}: keys lost outside the listed ranges",
            case.name
        ),
    }
}

#[test]
fn every_structure_damaged_is_named_refused_or_recovered_and_repaired() {
    let (bytes, unsynced) = suite_store();
    let base = Db::open_read_only_on(disk_of(&bytes), suite_options(1 << 20)).unwrap();
    let expected = contents(&base);
    let expected_snap = snapshot_contents(&base, "snap");
    let layout = base.layout();
    drop(base);
    assert!(Db::check_store_on(disk_of(&bytes), suite_options(1 << 20))
        .unwrap()
        .is_ok());
    for what in [
        "manifest",
        "run index",
        "run index mirror",
        "run filter",
        "run block",
        "log segment",
    ] {
        assert!(
            layout.iter().any(|p| p.what == what),
            "the store has no {what}"
        );
    }
    assert!(
        expected["default"].contains_key(&key(unsynced)),
        "synced commits are in the store"
    );
    // Both regions of the partitioned table have runs, which the cases damage too.
    let stats = Db::open_read_only_on(disk_of(&bytes), suite_options(1 << 20))
        .unwrap()
        .stats();
    let fourth = stats.tables.iter().find(|t| t.name == "fourth").unwrap();
    assert_eq!(fourth.regions.len(), 2);
    assert!(fourth.regions.iter().all(|r| r.run_bytes > 0), "{fourth:?}");
    assert_eq!(expected["fourth"].len(), 150);
    // The second table's runs hold version 8 and 10 blocks, the third's version 9: the cases
    // damage those too.
    let version = |p: &stitchdb::Placed| bytes[p.disk_offset as usize + EXTENT_HEADER_LEN];
    for (v, what) in [(8, "layered"), (9, "sliding-window"), (10, "fixed-keys")] {
        assert!(
            layout
                .iter()
                .any(|p| p.what == "run block" && version(p) == v),
            "no {what} block (version {v}) in the store"
        );
    }
    let cases = cases(&bytes, unsynced, &layout);
    assert!(cases.len() > 20, "{} cases", cases.len());
    assert!(cases.iter().any(|c| c.torn_tail));
    let mut kinds: Vec<&str> = cases.iter().map(|c| c.names).collect();
    kinds.sort_unstable();
    kinds.dedup();
    eprintln!("{} damage cases over {kinds:?}", cases.len());
    let mut index_cases = 0;
    for case in &cases {
        let mut damaged = bytes.clone();
        match &case.damage {
            Damage::Overwrite { at, bytes } => {
                damaged[*at as usize..*at as usize + bytes.len()].copy_from_slice(bytes)
            }
            Damage::Cut { len } => damaged.truncate(*len as usize),
        }
        // check names it.
        let check = Db::check_store_on(disk_of(&damaged), suite_options(1 << 20)).unwrap();
        if case.torn_tail {
            assert!(check.is_ok(), "{}: {:?}", case.name, check.damage);
        } else {
            assert!(
                check.damage.iter().any(|d| d.what == case.names),
                "{}: check found {:?}",
                case.name,
                check.damage
            );
        }
        // open recovers exactly (a torn tail), or refuses naming it, or (a data block) opens
        // and fails the reads that need the block; no read returns another value.
        match Db::open_on(disk_of(&damaged), suite_options(1 << 20)) {
            Ok(db) => {
                // The index mirror is read by check and repair only (docs/damage.md).
                let opens = case.torn_tail || case.names == "run block" || mirror(case);
                assert!(
                    opens,
                    "{}: opened a store with damaged {}",
                    case.name, case.names
                );
                if mirror(case) {
                    assert_eq!(contents(&db), expected, "{}", case.name);
                } else if case.torn_tail {
                    let got = contents(&db);
                    let lost: Vec<_> = expected["default"]
                        .keys()
                        .filter(|k| !got["default"].contains_key(*k))
                        .collect();
                    // Exactly the unsynced commit is gone: every synced one is there.
                    assert_eq!(lost, vec![&key(unsynced)], "{}", case.name);
                    for (name, pairs) in &got {
                        for (k, v) in pairs {
                            assert_eq!(expected[name].get(k), Some(v), "{}", case.name);
                        }
                    }
                } else {
                    assert!(
                        no_wrong_read(&case.name, &db, &expected, &expected_snap) > 0,
                        "{}: no read failed",
                        case.name
                    );
                }
            }
            Err(e) => {
                assert!(!case.torn_tail, "{}: a torn tail refused: {e}", case.name);
                let text = e.to_string();
                assert!(
                    text.contains(case.names) || text.contains("truncated"),
                    "{}: {text}",
                    case.name
                );
            }
        }
        // repair salvages the rest.
        let fresh: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
        let repaired = Db::repair_on(disk_of(&damaged), fresh.clone(), suite_options(1 << 20));
        let report = match repaired {
            Ok(report) => report,
            // Only a store cut before its superblocks or its manifest has nothing to salvage.
            Err(e) => {
                let manifest = layout.iter().find(|p| p.what == "manifest").unwrap();
                assert!(
                    matches!(case.damage, Damage::Cut { len } if len < manifest.disk_offset + manifest.len),
                    "{}: repair failed: {e}",
                    case.name
                );
                assert!(e.to_string().contains("nothing can be salvaged"), "{e}");
                continue;
            }
        };
        if case.torn_tail {
            continue;
        }
        let index_damaged = case.names == "run index" || mirror(case);
        if index_damaged && matches!(case.damage, Damage::Overwrite { .. }) {
            // One copy of a run's index lost, the other is read: nothing of the run lost.
            assert!(
                report.salvage.lost.is_empty(),
                "{}: {:?}",
                case.name,
                report.salvage.lost
            );
            index_cases += 1;
        }
        repaired_holds_what_survived(case, &report, fresh, &expected, &expected_snap);
    }
    eprintln!("{index_cases} runs with a damaged index or mirror extent lost nothing");
    assert!(index_cases > 0, "no run index damaged");
}

/// The case damages a run's index mirror.
fn mirror(case: &Case) -> bool {
    case.names == "run index mirror" && matches!(case.damage, Damage::Overwrite { .. })
}

// ---- run indexes and their mirrors -------------------------------------------------------

fn index_options() -> Options {
    Options {
        zone_size: SMALL_ZONE,
        memtable_size: 32 * 1024,
        level_runs: 2,
        background: false,
        // Any block a merge need not rewrite is stitched.
        stitching: stitchdb::Stitching::Threshold(4096),
        ..Options::default()
    }
}

/// Keys of each table of [`index_store`].
const INDEX_KEYS: u64 = 20_000;

/// A store of two tables, each merged into one large run of several index extents:
/// "copied", written in random key order (the merge rewrote every block, one after another),
/// and "stitched", the same and then every 97th key rewritten and merged again (the merge
/// stitched the blocks between them in place). Returns its bytes and the model of each
/// table.
fn index_store() -> (Vec<u8>, BTreeMap<String, Table>) {
    let disk = Arc::new(MemDisk::new(0));
    let db = Db::create_on(disk.clone(), index_options()).unwrap();
    // The default table stays empty.
    let mut model = BTreeMap::from([("default".to_string(), Table::new())]);
    for name in ["copied", "stitched"] {
        let t = db.create_table(name).unwrap();
        let table = model.entry(name.to_string()).or_default();
        for j in 0..INDEX_KEYS {
            // A permutation of the keys (7919 is prime, coprime with the count).
            let i = j * 7919 % INDEX_KEYS;
            db.put(t, key(i), suite_value(i, 1)).unwrap();
            table.insert(key(i), suite_value(i, 1));
        }
        db.compact().unwrap();
        if name == "stitched" {
            for i in (0..INDEX_KEYS).step_by(97) {
                db.put(t, key(i), suite_value(i, 2)).unwrap();
                table.insert(key(i), suite_value(i, 2));
            }
            db.compact().unwrap();
        }
    }
    db.close().unwrap();
    let mut bytes = vec![0u8; disk.len() as usize];
    disk.read_at(0, &mut bytes).unwrap();
    (bytes, model)
}

/// Where a run's structures are.
#[derive(Default)]
struct RunPlaces {
    index: Vec<stitchdb::Placed>,
    mirror: Vec<stitchdb::Placed>,
    blocks: Vec<stitchdb::Placed>,
}

impl RunPlaces {
    /// Whether some block neither follows the one before it nor opens a zone: the run
    /// holds blocks written elsewhere (stitched from another run).
    fn stitched(&self) -> bool {
        self.blocks.windows(2).any(|w| {
            let after = (w[0].disk_offset + w[0].len).next_multiple_of(16);
            w[1].disk_offset != after && w[1].disk_offset % SMALL_ZONE != 0
        })
    }
}

/// Each run of `layout`, by its label ("run 7").
fn runs_of(layout: &[stitchdb::Placed]) -> BTreeMap<String, RunPlaces> {
    let mut runs: BTreeMap<String, RunPlaces> = BTreeMap::new();
    for p in layout {
        let run = p.label.split(" block").next().unwrap().to_string();
        let places = runs.entry(run).or_default();
        match p.what {
            "run index" => places.index.push(p.clone()),
            "run index mirror" => places.mirror.push(p.clone()),
            "run block" => places.blocks.push(p.clone()),
            _ => {}
        }
    }
    runs
}

/// Where every extent of the store in `bytes` (written by [`index_store`]) lies.
fn layout_of(bytes: &[u8]) -> Vec<stitchdb::Placed> {
    Db::open_read_only_on(disk_of(bytes), index_options())
        .unwrap()
        .layout()
}

/// The store's large runs: the one merged from rewritten blocks and the stitched one.
fn large_runs(layout: &[stitchdb::Placed]) -> (RunPlaces, RunPlaces) {
    let mut runs = runs_of(layout);
    let mut take = |stitched: bool| {
        let label = runs
            .iter()
            .find(|(_, r)| r.index.len() >= 2 && r.stitched() == stitched)
            .map(|(label, _)| label.clone())
            .unwrap_or_else(|| panic!("no large run with stitched {stitched}: {layout:?}"));
        runs.remove(&label).unwrap()
    };
    (take(false), take(true))
}

/// `bytes` with 16 bytes in the middle of each of `places` inverted.
fn overwritten(bytes: &[u8], places: &[&stitchdb::Placed]) -> Vec<u8> {
    let mut damaged = bytes.to_vec();
    for p in places {
        let at = (p.disk_offset + p.len / 2 - 8) as usize;
        for b in &mut damaged[at..at + 16] {
            *b = !*b;
        }
    }
    damaged
}

/// Damages `places` of the store: check names each of `names`, open either refuses naming
/// the first or (only the mirror damaged) reads everything right; the repaired store passes
/// check, and every key it holds has the model's value. Returns the repair's report and the
/// repaired store's contents.
fn damage_index(
    case: &str,
    bytes: &[u8],
    model: &BTreeMap<String, Table>,
    places: &[&stitchdb::Placed],
    names: &[&str],
) -> (RepairReport, BTreeMap<String, Table>) {
    let damaged = overwritten(bytes, places);
    let check = Db::check_store_on(disk_of(&damaged), index_options()).unwrap();
    for name in names {
        assert!(
            check.damage.iter().any(|d| d.what == *name),
            "{case}: check found {:?}",
            check.damage
        );
    }
    for p in places {
        let at = format!("(disk byte {})", p.disk_offset);
        assert!(
            check.damage.iter().any(|d| d.place.contains(&at)),
            "{case}: {at} not named: {:?}",
            check.damage
        );
    }
    match Db::open_on(disk_of(&damaged), index_options()) {
        Ok(db) => {
            assert_eq!(names, ["run index mirror"], "{case}: opened");
            assert_eq!(&contents(&db), model, "{case}");
        }
        Err(e) => assert!(e.to_string().contains(names[0]), "{case}: {e}"),
    }
    let fresh: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    let report = Db::repair_on(disk_of(&damaged), fresh.clone(), index_options()).unwrap();
    let after = Db::check_store_on(fresh.clone(), index_options()).unwrap();
    assert!(after.is_ok(), "{case}: repaired: {:?}", after.damage);
    let got = contents(&Db::open_read_only_on(fresh, index_options()).unwrap());
    for (name, pairs) in &got {
        for (k, v) in pairs {
            assert_eq!(model[name].get(k), Some(v), "{case}: {}", k.escape_ascii());
        }
    }
    (report, got)
}

#[test]
fn a_run_losing_one_copy_of_its_index_loses_nothing() {
    let (bytes, model) = index_store();
    let layout = layout_of(&bytes);
    let (copied, stitched) = large_runs(&layout);
    assert!(stitched.index.len() >= 2 && copied.index.len() >= 2);
    assert_eq!(stitched.mirror.len(), stitched.index.len());
    assert_eq!(copied.mirror.len(), copied.index.len());
    let middle = copied.index.len() / 2;
    let cases: Vec<(&str, Vec<&stitchdb::Placed>, &[&str])> = vec![
        (
            "every index extent of the stitched run",
            stitched.index.iter().collect(),
            &["run index"],
        ),
        (
            "one of several index extents",
            vec![&copied.index[middle]],
            &["run index"],
        ),
        (
            "one of the stitched run's index extents",
            vec![&stitched.index[1]],
            &["run index"],
        ),
        (
            "a mirror extent",
            vec![&stitched.mirror[0]],
            &["run index mirror"],
        ),
        (
            "every extent of one copy, every other of the other",
            copied
                .index
                .iter()
                .step_by(2)
                .chain(copied.mirror.iter().skip(1).step_by(2))
                .collect(),
            &["run index", "run index mirror"],
        ),
    ];
    for (case, places, names) in cases {
        let (report, got) = damage_index(case, &bytes, &model, &places, names);
        assert!(
            report.salvage.lost.is_empty(),
            "{case}: {:?} {:?}",
            report.salvage.lost,
            report.salvage.damage
        );
        assert_eq!(got, model, "{case}");
    }
}

#[test]
fn a_run_losing_both_copies_is_rebuilt_from_blocks_lying_together() {
    let (bytes, model) = index_store();
    let layout = layout_of(&bytes);
    let (copied, _) = large_runs(&layout);
    let middle = copied.index.len() / 2;
    let last = copied.index.len() - 1;
    let pairs = |i: usize| [&copied.index[i], &copied.mirror[i]];
    let cases: Vec<(&str, Vec<&stitchdb::Placed>)> = vec![
        ("both copies of a middle extent", pairs(middle).to_vec()),
        ("both copies of the first extent", pairs(0).to_vec()),
        ("both copies of the last extent", pairs(last).to_vec()),
        (
            "both copies of every extent",
            copied.index.iter().chain(&copied.mirror).collect(),
        ),
    ];
    for (case, places) in cases {
        let (report, got) = damage_index(
            case,
            &bytes,
            &model,
            &places,
            &["run index", "run index mirror"],
        );
        assert!(
            report.salvage.lost.is_empty(),
            "{case}: {:?} {:?}",
            report.salvage.lost,
            report.salvage.damage
        );
        assert_eq!(got, model, "{case}");
    }
}

/// Every key of `model` missing from `got` lies in a range the repair listed as lost.
fn only_listed_keys_missing(
    case: &str,
    report: &RepairReport,
    got: &BTreeMap<String, Table>,
    model: &BTreeMap<String, Table>,
) {
    for (name, pairs) in model {
        for k in pairs.keys().filter(|k| !got[name].contains_key(*k)) {
            assert!(
                report
                    .salvage
                    .lost
                    .iter()
                    .any(|l| l.table == *name && in_range(k, l)),
                "{case}: {} missing, not listed",
                k.escape_ascii()
            );
        }
    }
}

#[test]
fn a_stitched_run_losing_both_copies_lists_what_it_lost() {
    let (bytes, model) = index_store();
    let layout = layout_of(&bytes);
    let (_, stitched) = large_runs(&layout);
    let places = [&stitched.index[1], &stitched.mirror[1]];
    let case = "both copies of a stitched run's extent";
    let (report, got) = damage_index(
        case,
        &bytes,
        &model,
        &places,
        &["run index", "run index mirror"],
    );
    // Its blocks lie among other runs' blocks: not found (docs/damage.md). What is lost is
    // listed, and only that is missing.
    let lost = &report.salvage.lost;
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert!(got["stitched"].len() < model["stitched"].len());
    only_listed_keys_missing(case, &report, &got, &model);
    assert_eq!(got["copied"], model["copied"]);
}

/// The zone holding segment `seq` of the newest log on `disk` (zones of `zone` bytes).
fn segment_zone(disk: &dyn Disk, zone: u64, seq: u64) -> Option<u64> {
    let newest = log_zone(disk, zone);
    let epoch_of = |z: u64| {
        let mut header = [0u8; 32];
        disk.read_at(z * zone, &mut header).unwrap();
        (&header[..8] == b"STWALSEG").then(|| {
            (
                u64::from_le_bytes(header[16..24].try_into().unwrap()),
                u64::from_le_bytes(header[24..32].try_into().unwrap()),
            )
        })
    };
    let epoch = epoch_of(newest)?.0;
    (1..disk.len() / zone).find(|&z| epoch_of(z) == Some((epoch, seq)))
}

#[test]
fn a_store_cut_on_a_zone_boundary_inside_the_log_is_refused_not_shortened() {
    // Synced commits spanning several log segments, each a zone the store grew by.
    let opts = Options {
        zone_size: SMALL_ZONE,
        ..options()
    };
    let sim = Arc::new(SimDisk::new(SimConfig {
        seed: 3,
        len: 0,
        capacity: None,
    }));
    let db = Db::create_on(sim.clone(), opts.clone()).unwrap();
    let t = db.default_table();
    let n = 3000;
    for i in 0..n {
        db.put(t, key(i), value(i)).unwrap();
    }
    let image = sim.crash(1);
    drop(db);
    // Cut the file where segment 2 starts: a whole number of zones, so the length alone
    // shows nothing, but segment 1, whose synced records vouch for it, names that zone.
    let cut_zone = segment_zone(&image, SMALL_ZONE, 2).expect("the log has a third segment");
    let mut bytes = vec![0u8; (cut_zone * SMALL_ZONE) as usize];
    image.read_at(0, &mut bytes).unwrap();
    let disk = disk_of(&bytes);
    let err = match Db::open_on(disk.clone(), opts.clone()) {
        Ok(db) => {
            let held = (0..n)
                .filter(|&i| db.get(t, key(i)).unwrap().is_some())
                .count();
            panic!("a store cut inside its log opened, holding {held} of {n} keys");
        }
        Err(e) => e,
    };
    let text = err.to_string();
    assert!(
        text.contains("store file") && text.contains("truncated"),
        "{text}"
    );
    assert!(text.contains(&format!("zone {cut_zone}")), "{text}");
    assert!(Db::open_read_only_on(disk.clone(), opts.clone()).is_err());
    let check = Db::check_store_on(disk.clone(), opts.clone()).unwrap();
    assert!(
        check.damage.iter().any(|d| d.what == "store file"),
        "{:?}",
        check.damage
    );
    // Repair salvages what lies before the cut, and says what it could not read.
    let fresh: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    let report = Db::repair_on(disk, fresh.clone(), opts.clone()).unwrap();
    assert!(report.salvage.damage.iter().any(|d| d.what == "store file"));
    let repaired = Db::open_on(fresh, opts).unwrap();
    let held: Vec<u64> = (0..n)
        .filter(|&i| repaired.get(t, key(i)).unwrap().is_some())
        .collect();
    // A prefix of the commits: those in the two segments before the cut.
    assert!(
        !held.is_empty() && held.len() < n as usize,
        "{}",
        held.len()
    );
    assert_eq!(held, (0..held.len() as u64).collect::<Vec<_>>());
    // The same store whole opens with every commit.
    let whole = Db::open_on(Arc::new(image), options()).unwrap();
    assert!((0..n).all(|i| whole.get(t, key(i)).unwrap().is_some()));
}
