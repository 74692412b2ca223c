//! Partitioned tables (docs/layouts.md, "Partition"): a table whose key space is cut into
//! regions, each stored by a stack of its own. It is one table to its users (listed once,
//! its layout whole, its regions never named), made whole or not at all, written and read
//! across its regions as a plain table is (batches, range deletes, transactions and their
//! conflicts, named snapshots), and each region holds only what its format can.

#![allow(clippy::unwrap_used)]

mod support;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use stitchdb::{Db, Disk, Durability, Error, Isolation, MemDisk, Options, TableId, WriteBatch};
use support::laid_out::{options, reopen, store};
use support::{table_contents, CrashingDisk};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Three regions: keys below "g" in the default stack, "g" to "p" 8-byte values, from "p" on
/// the plainest stack.
const LAYOUT: &str = r#"partition(at="g", at="p") -> [managed -> quotient -> btree -> linear | managed -> btree -> fixed(8) | managed -> linear]"#;
const CANONICAL: &str = "partition(at=\"g\", at=\"p\") -> [managed -> quotient -> \
                         btree(node=4096) -> linear | managed -> btree(node=4096) -> \
                         fixed(size=8) | managed -> linear]";

/// Every pair of `t` in `lo..hi`, scanned forward and, checked to agree, in reverse.
fn both_ways(db: &Db, t: TableId, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let forward: Vec<_> = db.range(t, lo, hi).unwrap().map(|r| r.unwrap()).collect();
    let mut reverse: Vec<_> = db
        .range_rev(t, lo, hi)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    reverse.reverse();
    assert_eq!(
        forward, reverse,
        "a reverse scan is the forward one backwards"
    );
    forward
}

#[test]
fn a_partitioned_table_is_listed_once_with_its_layout_and_lasts() {
    let (disk, db) = store();
    let t = db.create_table_with_layout("parts", LAYOUT).unwrap();
    assert_eq!(db.table_layout(t).unwrap(), CANONICAL);
    assert_eq!(db.tables(), ["default", "parts"]);
    let after = db.create_table("after").unwrap();
    db.put(after, b"k", b"v").unwrap();
    db.put(t, b"a", b"any length").unwrap();
    db.put(t, b"h", b"8 bytes!").unwrap();
    // Made after the last checkpoint: the log's one record makes the table and its regions.
    let db = reopen(&disk, db);
    let t = db.table("parts").unwrap();
    assert_eq!(db.table_layout(t).unwrap(), CANONICAL);
    assert_eq!(db.tables(), ["after", "default", "parts"]);
    assert_eq!(db.get(t, b"h").unwrap(), Some(b"8 bytes!".to_vec()));
    assert_eq!(
        db.get(db.table("after").unwrap(), b"k").unwrap(),
        Some(b"v".to_vec())
    );
    // Then the manifest does.
    db.flush().unwrap();
    let db = reopen(&disk, db);
    let t = db.table("parts").unwrap();
    assert_eq!(db.tables(), ["after", "default", "parts"]);
    let stats = db.stats();
    let parts = stats.tables.iter().find(|s| s.name == "parts").unwrap();
    assert_eq!(parts.layout, CANONICAL);
    let regions: Vec<&str> = parts.regions.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(regions, ["region 1", "region 2", "region 3"]);
    assert_eq!(
        parts.regions[1].layout,
        "managed -> btree(node=4096) -> fixed(size=8)"
    );
    assert_eq!(parts.run_entries, 2, "the regions' entries, summed");
    assert_eq!(
        parts.regions[0].run_entries + parts.regions[1].run_entries,
        2
    );
    let shown = stats.to_string();
    assert!(shown.contains("    region 2"), "{shown}");
    assert_eq!(stats.tables.len(), 3, "regions are not tables of their own");
    // Regions are never named: not by a name, not by an id.
    assert!(matches!(
        db.table("parts\u{0}1"),
        Err(Error::NoSuchTable(_))
    ));
    let region = TableId(t.0 + 1);
    assert!(matches!(
        db.put(region, b"a", b"x"),
        Err(Error::NoSuchTable(_))
    ));
    assert!(matches!(db.get(region, b"a"), Err(Error::NoSuchTable(_))));
    assert!(matches!(db.table_name(region), Err(Error::NoSuchTable(_))));
    assert!(matches!(
        db.create_table("parts\u{0}1"),
        Err(Error::BadTableName(..))
    ));
    assert!(matches!(
        db.create_table_with_layout("parts", LAYOUT),
        Err(Error::TableExists(_))
    ));
    db.check().unwrap();
}

#[test]
fn an_invalid_partition_names_its_region_and_module_and_creates_nothing() {
    let (disk, db) = store();
    for (layout, names) in [
        (
            r#"partition(at="g", at="p") -> [managed -> linear | managed -> btree -> fixd(8) | managed -> linear]"#,
            "region 2, module 3 \"fixd\": unknown module",
        ),
        (
            r#"partition(at="p", at="g") -> managed -> linear"#,
            "boundary 2 (\"g\") is not above boundary 1 (\"p\")",
        ),
        (r#"partition(at="g") -> []"#, "no regions"),
        (
            r#"partition(at="g", at="p") -> [managed -> linear | managed -> linear]"#,
            "2 boundaries make 3 regions, and 2 stacks are given",
        ),
        (
            r#"partition(at="g") -> [managed -> linear | partition(at="x") -> managed -> linear]"#,
            "region 2, module 1 \"partition\"",
        ),
        (r#"partition(at=0x0) -> managed -> linear"#, "hex digits"),
    ] {
        let err = db.create_table_with_layout("t", layout).unwrap_err();
        assert!(matches!(err, Error::BadLayout(_)), "{layout}: {err}");
        assert!(err.to_string().contains(names), "{layout}: {err}");
        assert_eq!(db.tables(), ["default"], "{layout} created a table");
    }
    let db = reopen(&disk, db);
    assert_eq!(db.tables(), ["default"]);
}

#[test]
fn a_write_a_region_cannot_hold_is_refused_whole() {
    let (_disk, db) = store();
    let t = db.create_table_with_layout("parts", LAYOUT).unwrap();
    let err = db.put(t, b"h", b"nine byte").unwrap_err();
    assert!(
        matches!(&err, Error::LayoutRejects { table, layout, .. }
            if table == "parts" && layout == CANONICAL),
        "{err}"
    );
    assert!(err.to_string().contains("region 2: "), "{err}");
    // Any length below "g" and from "p" on.
    db.put(t, b"a", b"nine byte").unwrap();
    db.put(t, b"q", b"").unwrap();
    let mut batch = WriteBatch::new();
    batch.put(t, b"b", b"fine");
    batch.put(t, b"i", b"too long for fixed(8)");
    batch.put(t, b"z", b"fine");
    assert!(db.write(&batch, Durability::Sync).is_err());
    assert_eq!(db.get(t, b"b").unwrap(), None);
    assert_eq!(db.get(t, b"z").unwrap(), None);
    let mut txn = db.begin(Isolation::Snapshot).unwrap();
    assert!(txn.put(t, b"j", b"short").is_err());
    txn.put(t, b"j", b"8 bytes.").unwrap();
    txn.commit().unwrap();
    assert_eq!(db.get(t, b"j").unwrap(), Some(b"8 bytes.".to_vec()));
    // A range delete spans regions whatever their formats.
    db.delete_range(t, b"", b"\xff").unwrap();
    assert!(table_contents(&db, t).is_empty());
    db.check().unwrap();
}

/// Keys 0..600 big-endian (as `array` keeps them); regions cut at 200 and 400, or at 100,
/// 300 and 500.
const KEYS: u64 = 600;

/// A layout of the model test and the values each region takes (by key).
struct Case {
    layout: &'static str,
    value: fn(&mut ChaCha8Rng, u64) -> Vec<u8>,
}

fn any_value(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let len = match rng.gen_bool(0.05) {
        true => rng.gen_range(500..3000),
        false => rng.gen_range(0..40),
    };
    (0..len).map(|_| rng.gen()).collect()
}

const CASES: &[Case] = &[
    Case {
        layout: "partition(at=0x00000000000000c8, at=0x0000000000000190) -> [managed -> \
                 quotient -> btree(node=512) -> linear | managed -> btree(node=512) -> fixed(8) \
                 | managed -> bloom -> btree(node=512) -> array(8)]",
        value: |rng, k| match k {
            0..200 => any_value(rng),
            _ => rng.gen::<u64>().to_le_bytes().to_vec(),
        },
    },
    Case {
        layout: "partition(at=0x00000000000000c8, at=0x0000000000000190) -> [managed -> \
                 btree(node=512) -> small-integer(2) -> array(2) | managed -> exception -> \
                 unique-string(max=4, len=16) -> linear | managed -> cache(keys=16) -> \
                 btree(node=512) -> empty]",
        value: |rng, k| match k {
            0..200 => rng.gen_range(0..65536u32).to_le_bytes().to_vec(),
            200..400 if rng.gen_bool(0.8) => vec![b'a' + rng.gen_range(0..6u8); 3],
            200..400 => any_value(rng),
            _ => Vec::new(),
        },
    },
    Case {
        layout: "partition(at=0x0000000000000064, at=0x000000000000012c, \
                 at=0x00000000000001f4) -> managed -> btree(node=512) -> linear",
        value: |rng, _| any_value(rng),
    },
];

/// Random puts, deletes, range deletes and scans crossing the boundaries, batches across
/// regions, flushes, merges, reopens and scans held open across them, checked against a
/// `BTreeMap` as they go and at the end.
fn random_ops_match_a_btreemap(case: &Case, seed: u64) {
    let (disk, mut db) = store();
    let t = db.create_table_with_layout("t", case.layout).unwrap();
    let key = |k: u64| k.to_be_bytes().to_vec();
    let mut model = Model::new();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut held: Option<(stitchdb::DbIter, Model)> = None;
    for _ in 0..3000 {
        let k = rng.gen_range(0..KEYS);
        match rng.gen_range(0..1000) {
            0..600 => {
                let v = (case.value)(&mut rng, k);
                db.put(t, key(k), &v).unwrap();
                model.insert(key(k), v);
            }
            600..720 => {
                db.delete(t, key(k)).unwrap();
                model.remove(&key(k));
            }
            720..760 => {
                // Wide enough to cross a boundary or two.
                let (lo, hi) = (key(k), key(k + rng.gen_range(1..350)));
                db.delete_range(t, &lo, &hi).unwrap();
                model.retain(|k, _| *k < lo || *k >= hi);
            }
            760..800 => {
                let mut batch = WriteBatch::new();
                for _ in 0..rng.gen_range(1..10) {
                    let k = rng.gen_range(0..KEYS);
                    if rng.gen_bool(0.8) {
                        let v = (case.value)(&mut rng, k);
                        batch.put(t, key(k), v.clone());
                        model.insert(key(k), v);
                    } else {
                        batch.delete(t, key(k));
                        model.remove(&key(k));
                    }
                }
                db.write(&batch, Durability::Async).unwrap();
            }
            800..860 => {
                let hi = (k + rng.gen_range(0..400)).min(KEYS + 10);
                let (lo, hi) = (key(k), key(hi));
                let (lo_b, hi_b) = match rng.gen_range(0..4) {
                    0 => (Bound::Included(&lo[..]), Bound::Excluded(&hi[..])),
                    1 => (Bound::Excluded(&lo[..]), Bound::Included(&hi[..])),
                    2 => (Bound::Unbounded, Bound::Excluded(&hi[..])),
                    _ => (Bound::Included(&lo[..]), Bound::Unbounded),
                };
                let want: Vec<_> = model
                    .range::<[u8], _>((lo_b, hi_b))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(both_ways(&db, t, lo_b, hi_b), want, "{}", case.layout);
            }
            860..885 => db.flush().unwrap(),
            885..895 => db.compact().unwrap(),
            895..900 => {
                held = None;
                db = reopen(&disk, db);
            }
            900..915 => {
                if let Some((scan, want)) = held.take() {
                    let got: Model = scan.map(|r| r.unwrap()).collect();
                    assert_eq!(got, want, "{}: a held scan", case.layout);
                }
                held = Some((db.scan_prefix(t, b"").unwrap(), model.clone()));
            }
            _ => assert_eq!(db.get(t, key(k)).unwrap().as_ref(), model.get(&key(k))),
        }
    }
    drop(held);
    assert_eq!(table_contents(&db, t), model, "{}", case.layout);
    db.compact().unwrap();
    let db = reopen(&disk, db);
    assert_eq!(table_contents(&db, t), model, "{}", case.layout);
    for k in 0..KEYS {
        assert_eq!(db.get(t, key(k)).unwrap().as_ref(), model.get(&key(k)));
    }
    // Each region was merged on its own, in its own format.
    let stats = db.stats();
    let regions = &stats.tables.iter().find(|s| s.name == "t").unwrap().regions;
    assert!(regions.iter().all(|r| r.levels.iter().sum::<usize>() <= 1));
    db.check().unwrap();
}

#[test]
fn random_ops_on_partitioned_tables_match_a_btreemap() {
    for case in CASES {
        for seed in 0..2 {
            random_ops_match_a_btreemap(case, seed);
        }
    }
}

#[test]
fn a_sorted_stretch_within_a_region_is_ingested_as_a_run_of_that_region() {
    let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    let opts = Options {
        ingest_min_bytes: 2048,
        ..options()
    };
    let db = Db::create_on(disk.clone(), opts.clone()).unwrap();
    let t = db.create_table_with_layout("parts", LAYOUT).unwrap();
    let mut model = Model::new();
    let stretch = |from: &str, to: &str, model: &mut Model| {
        let mut batch = WriteBatch::new();
        for i in 0..400u32 {
            let key = format!("{from}{i:03}").into_bytes();
            let key = if i >= 200 {
                format!("{to}{i:03}").into_bytes()
            } else {
                key
            };
            let value = format!("{i:08}").into_bytes();
            batch.put(t, key.clone(), value.clone());
            model.insert(key, value);
        }
        db.write(&batch, Durability::Async).unwrap();
    };
    // All in region 2 (8-byte values), then across regions 1 and 3.
    stretch("h", "j", &mut model);
    assert_eq!(db.stats().ingested_runs, 1);
    stretch("a", "q", &mut model);
    assert_eq!(
        db.stats().ingested_runs,
        1,
        "a stretch across regions is not ingested"
    );
    assert_eq!(table_contents(&db, t), model);
    let stats = db.stats();
    let parts = stats.tables.iter().find(|s| s.name == "parts").unwrap();
    assert_eq!(parts.regions[1].run_entries, 400, "the run is region 2's");
    // The log's ingest record names the region: replay puts the run there.
    drop(db);
    let db = Db::open_on(disk, opts).unwrap();
    assert_eq!(table_contents(&db, t), model);
    db.check().unwrap();
}

#[test]
fn transactions_across_regions_commit_whole_and_conflict_as_on_a_plain_table() {
    let (_disk, db) = store();
    let t = db.create_table_with_layout("parts", LAYOUT).unwrap();
    let mut txn = db.begin(Isolation::Serializable).unwrap();
    for key in [&b"a"[..], b"h", b"q"] {
        txn.put(t, key, b"8 bytes!").unwrap();
    }
    txn.delete_range(t, b"b", b"z").unwrap();
    txn.put(t, b"x", b"after the range").unwrap();
    let own: Vec<_> = txn
        .range(t, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|r| r.unwrap().0)
        .collect();
    assert_eq!(
        own,
        [b"a".to_vec(), b"x".to_vec()],
        "its own writes, across regions"
    );
    assert_eq!(db.get(t, b"a").unwrap(), None, "not before it commits");
    txn.commit().unwrap();
    let keys: Vec<_> = table_contents(&db, t).into_keys().collect();
    assert_eq!(keys, [b"a".to_vec(), b"x".to_vec()]);

    // Snapshot isolation: the second writer of a key in a region loses, as on a plain table.
    let mut first = db.begin(Isolation::Snapshot).unwrap();
    let mut second = db.begin(Isolation::Snapshot).unwrap();
    first.put(t, b"h", b"first!!!").unwrap();
    second.put(t, b"h", b"second!!").unwrap();
    second.put(t, b"c", b"elsewhere").unwrap();
    first.commit().unwrap();
    assert!(matches!(second.commit(), Err(Error::Conflict { .. })));
    assert_eq!(db.get(t, b"h").unwrap(), Some(b"first!!!".to_vec()));
    assert_eq!(db.get(t, b"c").unwrap(), None, "the loser wrote nothing");
    // And against a plain write that came between.
    let mut txn = db.begin(Isolation::Snapshot).unwrap();
    txn.put(t, b"r", b"txn").unwrap();
    db.put(t, b"r", b"plain").unwrap();
    assert!(matches!(txn.commit(), Err(Error::Conflict { .. })));
    // A range delete spanning regions conflicts with a write in any of them.
    let mut txn = db.begin(Isolation::Snapshot).unwrap();
    txn.delete_range(t, b"a", b"z").unwrap();
    db.put(t, b"k", b"12345678").unwrap();
    assert!(matches!(txn.commit(), Err(Error::Conflict { .. })));
}

#[test]
fn a_large_transaction_spills_a_run_per_region_and_links_each_into_its_region() {
    let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    let opts = Options {
        txn_memory: 4096,
        ..options()
    };
    let db = Db::create_on(disk.clone(), opts.clone()).unwrap();
    let t = db.create_table_with_layout("parts", LAYOUT).unwrap();
    let d = db.default_table();
    db.put(t, b"c-before", b"deleted by the range").unwrap();
    let mut txn = db.begin(Isolation::Snapshot).unwrap();
    let mut model = Model::new();
    for i in 0..600u32 {
        let key = format!("{}{i:04}", ["a", "h", "q"][i as usize % 3]).into_bytes();
        let value = format!("{i:08}").into_bytes();
        txn.put(t, &key, &value).unwrap();
        model.insert(key, value);
        if i == 300 {
            // Across every region, spilled with the writes before it; later writes win.
            txn.delete_range(t, b"b", b"r").unwrap();
            model.retain(|k, _| k.as_slice() < b"b".as_slice() || k.as_slice() >= b"r".as_slice());
        }
    }
    txn.put(d, b"plain", b"beside").unwrap();
    // Its own reads see its spilled writes across the regions.
    let own: Model = txn
        .range(t, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(own, model);
    txn.commit().unwrap();
    let stats = db.stats();
    assert!(stats.linked_commits > 0, "it spilled and linked");
    assert_eq!(table_contents(&db, t), model);
    let parts = stats.tables.iter().find(|s| s.name == "parts").unwrap();
    assert!(
        parts.regions.iter().all(|r| r.run_entries > 0),
        "every region took its runs"
    );
    // `check` finds each region's runs holding only its keys.
    db.check().unwrap();
    drop(db);
    let db = Db::open_on(disk, opts).unwrap();
    assert_eq!(table_contents(&db, t), model);
    assert_eq!(db.get(d, b"plain").unwrap(), Some(b"beside".to_vec()));
    db.compact().unwrap();
    assert_eq!(table_contents(&db, t), model);
    db.check().unwrap();
}

#[test]
fn a_named_snapshot_reads_the_partitioned_table_as_it_was() {
    let (disk, db) = store();
    let t = db.create_table_with_layout("parts", LAYOUT).unwrap();
    let mut before = Model::new();
    for key in ["a", "c", "g", "i", "p", "s"] {
        let value = format!("{key:>8}").into_bytes();
        db.put(t, key, &value).unwrap();
        before.insert(key.as_bytes().to_vec(), value);
    }
    let info = db.snapshot("s").unwrap();
    assert_eq!(info.tables, ["default", "parts"]);
    // Later writes in every region, a range delete across them, merged.
    db.put(t, b"a", b"changed").unwrap();
    db.put(t, b"i", b"changed!").unwrap();
    db.delete(t, b"s").unwrap();
    db.delete_range(t, b"b", b"q").unwrap();
    db.put(t, b"z", b"new").unwrap();
    db.compact().unwrap();
    let check = |db: &Db| {
        let snap = db.open_snapshot("s").unwrap();
        assert_eq!(snap.tables(), ["default", "parts"]);
        assert_eq!(snap.table_layout("parts").unwrap(), CANONICAL);
        assert!(snap.table("parts\u{0}2").is_err());
        let st = snap.table("parts").unwrap();
        let got: Model = snap
            .range(st, Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(got, before);
        let mut rev: Vec<_> = snap
            .range_rev(st, Bound::Included(b"b"), Bound::Excluded(b"t"))
            .unwrap()
            .map(|r| r.unwrap().0)
            .collect();
        rev.reverse();
        let want: Vec<_> = before
            .range(b"b".to_vec()..b"t".to_vec())
            .map(|(k, _)| k.clone())
            .collect();
        assert_eq!(rev, want);
        for (key, value) in &before {
            assert_eq!(snap.get(st, key).unwrap().as_ref(), Some(value));
        }
        assert_eq!(snap.get(st, b"z").unwrap(), None);
    };
    check(&db);
    let db = reopen(&disk, db);
    check(&db);
    let now: Vec<_> = table_contents(&db, db.table("parts").unwrap())
        .into_keys()
        .collect();
    assert_eq!(now, [b"a".to_vec(), b"z".to_vec()]);
    db.drop_snapshot("s").unwrap();
    db.check().unwrap();
}

#[test]
fn a_crash_while_making_a_partitioned_table_leaves_it_whole_or_absent() {
    let (mut absent, mut whole) = (0, 0);
    for seed in 0..30 {
        let disk = CrashingDisk::new(seed);
        let db = Db::create_on(disk.clone(), options()).unwrap();
        db.put(db.default_table(), b"before", b"x").unwrap();
        db.sync().unwrap();
        // An image at every write and sync of the creation, and of a transaction across
        // its regions after it.
        *disk.probability.lock() = 1.0;
        disk.issued.store(1, Ordering::SeqCst);
        let t = db.create_table_with_layout("parts", LAYOUT).unwrap();
        disk.acked.store(1, Ordering::SeqCst);
        disk.issued.store(2, Ordering::SeqCst);
        let mut txn = db.begin(Isolation::Snapshot).unwrap();
        for key in [&b"a"[..], b"h", b"q"] {
            txn.put(t, key, b"8 bytes!").unwrap();
        }
        txn.commit_with(Durability::Sync).unwrap();
        disk.acked.store(2, Ordering::SeqCst);
        *disk.probability.lock() = 0.0;
        drop(db);
        for (i, (image, acked, issued)) in disk.images.lock().drain(..).enumerate() {
            let what = format!("seed {seed} image {i}");
            let db =
                Db::open_on(Arc::new(image), options()).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(
                db.get(db.default_table(), b"before").unwrap(),
                Some(b"x".to_vec())
            );
            let Ok(t) = db.table("parts") else {
                assert_eq!(acked, 0, "{what}: the acknowledged table is gone");
                assert_eq!(db.tables(), ["default"], "{what}");
                absent += 1;
                continue;
            };
            whole += 1;
            assert_eq!(db.table_layout(t).unwrap(), CANONICAL, "{what}");
            let keys: Vec<_> = table_contents(&db, t).into_keys().collect();
            match keys.len() {
                0 => assert!(acked < 2, "{what}: the acknowledged commit is gone"),
                3 => assert!(issued >= 2, "{what}"),
                _ => panic!("{what}: part of a commit: {keys:?}"),
            }
            // Every region is there and takes its writes.
            db.put(t, b"b", b"region 1").unwrap();
            db.put(t, b"i", b"region 2").unwrap();
            db.put(t, b"r", b"region 3").unwrap();
            db.flush().unwrap();
            assert_eq!(table_contents(&db, t).len(), keys.len() + 3, "{what}");
            db.check().unwrap_or_else(|e| panic!("{what}: {e}"));
        }
    }
    assert!(absent > 0 && whole > 0, "{absent} absent, {whole} whole");
}
