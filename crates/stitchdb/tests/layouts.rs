//! Table layouts (docs/layouts.md): what `create_table_with_layout` accepts and refuses, what
//! writes a layout refuses, that a layout lasts (manifest and log), and that each specialized
//! format stores its data in less room than the default VT-tree stack while reading the same.
//! The model test (`model.rs`) and the crash test (`crash.rs`) run their workloads over tables
//! of these layouts too.

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use stitchdb::{Db, Disk, Durability, Error, Isolation, MemDisk, Options, TableId, WriteBatch};
use support::table_contents;

fn options() -> Options {
    Options {
        zone_size: 1 << 20,
        memtable_size: 64 * 1024,
        background: false,
        durability: Durability::Async,
        ..Options::default()
    }
}

fn store() -> (Arc<dyn Disk>, Db) {
    let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    let db = Db::create_on(disk.clone(), options()).unwrap();
    (disk, db)
}

fn reopen(disk: &Arc<dyn Disk>, db: Db) -> Db {
    db.close().unwrap();
    Db::open_on(disk.clone(), options()).unwrap()
}

#[test]
fn the_issue_layouts_are_valid_as_written_and_last() {
    let (disk, db) = store();
    let layouts = [
        (
            "managed -> bloom -> btree -> linear",
            "managed -> bloom(bits=10) -> btree(node=4096) -> linear",
        ),
        (
            "managed -> btree -> fixed(8)",
            "managed -> btree(node=4096) -> fixed(size=8)",
        ),
        (
            "managed -> exception -> unique-string -> linear",
            "managed -> exception -> unique-string(max=255, len=255) -> linear",
        ),
    ];
    for (i, (layout, canonical)) in layouts.iter().enumerate() {
        let t = db
            .create_table_with_layout(&format!("t{i}"), layout)
            .unwrap();
        assert_eq!(db.table_layout(t).unwrap(), *canonical);
    }
    let default = "managed -> quotient -> btree(node=4096) -> linear";
    assert_eq!(db.table_layout(db.default_table()).unwrap(), default);
    // Created after the last checkpoint: the log's records carry the layouts.
    let db = reopen(&disk, db);
    for (i, (_, canonical)) in layouts.iter().enumerate() {
        let t = db.table(&format!("t{i}")).unwrap();
        assert_eq!(db.table_layout(t).unwrap(), *canonical);
    }
    // Then the manifest does.
    db.flush().unwrap();
    let db = reopen(&disk, db);
    let stats = db.stats();
    for (i, (_, canonical)) in layouts.iter().enumerate() {
        let t = stats
            .tables
            .iter()
            .find(|t| t.name == format!("t{i}"))
            .unwrap();
        assert_eq!(t.layout, *canonical);
        assert!(stats.to_string().contains(canonical));
    }
}

#[test]
fn an_invalid_layout_names_its_module_and_creates_nothing() {
    let (disk, db) = store();
    for (layout, names) in [
        ("managed -> fixd(8)", "\"fixd\": unknown module"),
        ("bloom -> managed -> linear", "starts with \"managed\""),
        ("managed -> linear -> btree", "\"btree\""),
        ("managed -> fixed(0)", "\"fixed\""),
        ("managed -> bloom(bits=99) -> linear", "\"bloom\""),
        ("managed -> exception -> fixed(8)", "\"exception\""),
        ("managed -> exception -> linear", "\"linear\""),
        ("managed -> array", "\"array\""),
        ("managed -> btree(node=12) -> linear", "\"btree\""),
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
fn a_write_the_layout_cannot_hold_is_refused_whole() {
    let (_disk, db) = store();
    let fixed = db
        .create_table_with_layout("fixed", "managed -> btree -> fixed(8)")
        .unwrap();
    let array = db
        .create_table_with_layout("array", "managed -> array(4)")
        .unwrap();
    db.put(fixed, b"k", b"8 bytes!").unwrap();
    let err = db.put(fixed, b"k", b"nine byte").unwrap_err();
    assert!(
        matches!(&err, Error::LayoutRejects { table, .. } if table == "fixed"),
        "{err}"
    );
    assert!(err.to_string().contains("its values are 8 bytes"), "{err}");
    assert!(db.put(array, b"short", b"four").is_err());
    assert!(
        db.delete(array, b"short").is_err(),
        "a key it can never hold"
    );
    // One bad write in a batch: none of it is written.
    let mut batch = WriteBatch::new();
    batch.put(fixed, b"a", b"12345678");
    batch.put(array, 7u64.to_be_bytes(), b"five!");
    assert!(db.write(&batch, Durability::Sync).is_err());
    assert_eq!(db.get(fixed, b"a").unwrap(), None);
    // A transaction is refused at the write, and can go on.
    let mut txn = db.begin(Isolation::Snapshot).unwrap();
    assert!(txn.put(fixed, b"t", b"short").is_err());
    txn.put(fixed, b"t", b"long 8 b").unwrap();
    txn.commit().unwrap();
    assert_eq!(db.get(fixed, b"t").unwrap(), Some(b"long 8 b".to_vec()));
    assert_eq!(db.get(fixed, b"k").unwrap(), Some(b"8 bytes!".to_vec()));
    // Range deletes take any bounds: a bound is not a stored key.
    let mut batch = WriteBatch::new();
    batch.delete_range(array, b"".to_vec(), vec![0xff; 9]);
    db.write(&batch, Durability::Sync).unwrap();
    db.check().unwrap();
}

/// Writes `n` 8-byte values under dense big-endian keys to a new table of `layout`, merges
/// it into one run, and returns the table and its runs' bytes.
fn dense_table(db: &Db, name: &str, layout: &str, n: u64) -> (TableId, u64) {
    let t = db.create_table_with_layout(name, layout).unwrap();
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let mut batch = WriteBatch::new();
        for &k in chunk {
            batch.put(t, k.to_be_bytes(), (k * 7).to_le_bytes());
        }
        db.write(&batch, Durability::Async).unwrap();
    }
    db.compact().unwrap();
    let stats = db.stats();
    let bytes = stats
        .tables
        .iter()
        .find(|s| s.name == name)
        .unwrap()
        .run_bytes;
    (t, bytes)
}

#[test]
fn specialized_formats_hold_their_data_in_less_room_and_read_it_back() {
    let (disk, db) = store();
    let n = 20_000;
    let (linear, linear_bytes) = dense_table(&db, "linear", "", n);
    let (fixed, fixed_bytes) = dense_table(&db, "fixed", "managed -> btree -> fixed(8)", n);
    let (array, array_bytes) = dense_table(&db, "array", "managed -> btree -> array(8)", n);
    assert!(
        fixed_bytes < linear_bytes,
        "{fixed_bytes} vs {linear_bytes}"
    );
    assert!(
        array_bytes * 3 / 2 < linear_bytes,
        "{array_bytes} vs {linear_bytes}"
    );
    let db = reopen(&disk, db);
    for t in [linear, fixed, array] {
        for k in [0, 1, 777, n - 1] {
            let want = (k * 7).to_le_bytes().to_vec();
            assert_eq!(db.get(t, k.to_be_bytes()).unwrap(), Some(want));
        }
        assert_eq!(db.get(t, n.to_be_bytes()).unwrap(), None);
        assert_eq!(table_contents(&db, t), table_contents(&db, linear));
    }
    db.check().unwrap();
}

#[test]
fn repeated_strings_take_a_dictionary_and_rare_ones_the_exception_format() {
    let (_disk, db) = store();
    let states = ["California", "Massachusetts", "New York", "Texas", "Oregon"];
    let layout = "managed -> exception -> unique-string(max=16, len=16) -> linear";
    let t = db.create_table_with_layout("states", layout).unwrap();
    let d = db.create_table("default-states").unwrap();
    let value = |k: u64| match k % 97 {
        // A value too long for the format: kept by the exception's linear format.
        0 => format!("Saint Helena, Ascension and Tristan da Cunha #{k}"),
        _ => states[(k % 5) as usize].to_string(),
    };
    for table in [t, d] {
        let mut batch = WriteBatch::new();
        for k in 0..20_000u64 {
            batch.put(table, k.to_be_bytes(), value(k));
        }
        db.write(&batch, Durability::Async).unwrap();
    }
    db.compact().unwrap();
    let stats = db.stats();
    let bytes = |name: &str| {
        stats
            .tables
            .iter()
            .find(|s| s.name == name)
            .unwrap()
            .run_bytes
    };
    assert!(
        bytes("states") * 2 < bytes("default-states"),
        "{} vs {}",
        bytes("states"),
        bytes("default-states")
    );
    for k in [0u64, 1, 97, 5000, 19_999] {
        assert_eq!(
            db.get(t, k.to_be_bytes()).unwrap(),
            Some(value(k).into_bytes())
        );
    }
    assert_eq!(table_contents(&db, t), table_contents(&db, d));
    db.check().unwrap();
}

/// A merge of runs ingested on both sides of a memtable's delete writes its key's versions
/// in the order they were written (a specialized block stores no sequence number only for
/// versions older than everything in front of it).
#[test]
fn a_merge_behind_a_memtable_keeps_the_memtables_delete_on_top() {
    let opts = Options {
        zone_size: 64 * 1024,
        memtable_size: 8 * 1024,
        level_runs: 2,
        background: false,
        ingest_min_bytes: 2048,
        ..Options::default()
    };
    for layout in [
        "managed -> bloom -> btree -> exception -> unique-string -> linear",
        "managed -> bloom -> btree -> exception -> fixed(8) -> linear",
        "managed -> bloom -> exception -> array(8) -> linear",
    ] {
        let db = Db::create_on(Arc::new(MemDisk::new(0)), opts.clone()).unwrap();
        let t = db.create_table_with_layout("t", layout).unwrap();
        let sorted = |start: u64, len: usize| {
            let mut batch = WriteBatch::new();
            for k in start..start + 17 {
                batch.put(t, k.to_be_bytes(), vec![k as u8; len]);
            }
            db.write(&batch, Durability::Async).unwrap();
        };
        sorted(94, 8);
        db.delete(t, 94u64.to_be_bytes()).unwrap();
        sorted(0, 8);
        let keys: Vec<u64> = db
            .scan_prefix(t, b"")
            .unwrap()
            .map(|r| u64::from_be_bytes(r.unwrap().0.try_into().unwrap()))
            .collect();
        assert!(!keys.contains(&94), "{layout}: the deleted key is back");
        assert_eq!(keys.len(), 33, "{layout}");
        db.check().unwrap();
    }
}

/// A `cache` answers a lookup it holds without the run and as the run would: for readers at
/// every snapshot, across overwrites, deletes, flushes, merges and a transaction's linked
/// run (the same blocks read at another sequence number).
#[test]
fn the_cache_answers_as_the_runs_would() {
    // Transactions past 64 KiB spill to runs linked at their commit.
    let opts = Options {
        txn_memory: 64 * 1024,
        ..options()
    };
    let db = Db::create_on(Arc::new(MemDisk::new(0)), opts).unwrap();
    let t = db
        .create_table_with_layout(
            "t",
            "managed -> quotient -> cache(keys=64) -> btree -> linear",
        )
        .unwrap();
    let key = |k: u64| k.to_be_bytes();
    for k in 0..200u64 {
        db.put(t, key(k), format!("v1-{k}")).unwrap();
    }
    db.compact().unwrap();
    let mut before = db.begin(Isolation::Snapshot).unwrap();
    for _ in 0..3 {
        for k in 0..32u64 {
            assert_eq!(
                db.get(t, key(k)).unwrap(),
                Some(format!("v1-{k}").into_bytes())
            );
        }
    }
    let cache = |db: &Db| {
        db.stats()
            .tables
            .into_iter()
            .find(|s| s.name == "t")
            .and_then(|s| s.record_cache)
            .unwrap()
    };
    let first = cache(&db);
    assert!(first.hits >= 64, "{first:?}");
    assert!(first.held <= 64 && first.held > 0, "{first:?}");
    // Overwrite and delete some keys, then push them into runs of their own and merge.
    for k in (0..32u64).step_by(2) {
        db.put(t, key(k), format!("v2-{k}")).unwrap();
    }
    db.delete(t, key(1)).unwrap();
    let expect = |k: u64| match k {
        1 => None,
        k if k < 32 && k % 2 == 0 => Some(format!("v2-{k}").into_bytes()),
        k => Some(format!("v1-{k}").into_bytes()),
    };
    for round in 0..3 {
        for k in 0..40u64 {
            assert_eq!(
                db.get(t, key(k)).unwrap(),
                expect(k),
                "round {round} key {k}"
            );
            let old = before.get(t, key(k)).unwrap();
            assert_eq!(
                old,
                Some(format!("v1-{k}").into_bytes()),
                "snapshot, key {k}"
            );
        }
        match round {
            0 => db.flush().unwrap(),
            _ => db.compact().unwrap(),
        }
    }
    // A large transaction's runs are linked at its commit.
    let mut txn = db.begin(Isolation::Snapshot).unwrap();
    for k in 0..40u64 {
        txn.put(t, key(k), vec![b'x'; 3000]).unwrap();
    }
    txn.commit().unwrap();
    assert!(
        db.stats().linked_commits > 0,
        "the transaction did not spill"
    );
    for k in 0..40u64 {
        assert_eq!(
            db.get(t, key(k)).unwrap(),
            Some(vec![b'x'; 3000]),
            "key {k}"
        );
        assert_eq!(
            before.get(t, key(k)).unwrap(),
            Some(format!("v1-{k}").into_bytes())
        );
    }
    assert!(cache(&db).hits > first.hits);
    db.check().unwrap();
}
