//! Table layouts (docs/layouts.md): what `create_table_with_layout` accepts and refuses, what
//! writes a layout refuses, that a layout lasts (manifest and log), and that each specialized
//! format (and `sliding-window`, on repeated values) stores its data in less room than the
//! default VT-tree stack while reading the same.
//! The model test (`model.rs`) and the crash test (`crash.rs`) run their workloads over tables
//! of these layouts too.

#![allow(clippy::unwrap_used)]

mod support;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::ops::Bound;
use std::sync::Arc;
use stitchdb::{Db, Durability, Error, Isolation, MemDisk, Options, Stats, TableId, WriteBatch};
use support::laid_out::{options, reopen, store};
use support::table_contents;

/// Puts `value` at `key` in table `t`, named `name`, whose layout must refuse it: the error.
fn refused(
    db: &Db,
    t: TableId,
    name: &str,
    key: impl AsRef<[u8]>,
    value: impl AsRef<[u8]>,
) -> Error {
    let err = db.put(t, key, value).unwrap_err();
    assert!(
        matches!(&err, Error::LayoutRejects { table, .. } if table == name),
        "{err}"
    );
    err
}

/// A batch of a write its layout takes (`good`) and one it refuses (`bad`) writes neither.
fn batch_refused_whole(db: &Db, good: (TableId, &[u8], &[u8]), bad: (TableId, &[u8], &[u8])) {
    let mut batch = WriteBatch::new();
    batch.put(good.0, good.1, good.2);
    batch.put(bad.0, bad.1, bad.2);
    assert!(db.write(&batch, Durability::Sync).is_err());
    assert_eq!(db.get(good.0, good.1).unwrap(), None);
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
    let err = refused(&db, fixed, "fixed", b"k", b"nine byte");
    assert!(err.to_string().contains("its values are 8 bytes"), "{err}");
    assert!(db.put(array, b"short", b"four").is_err());
    assert!(
        db.delete(array, b"short").is_err(),
        "a key it can never hold"
    );
    batch_refused_whole(
        &db,
        (fixed, b"a", b"12345678"),
        (array, &7u64.to_be_bytes(), b"five!"),
    );
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

/// The bytes of table `name`'s runs.
fn run_bytes(stats: &Stats, name: &str) -> u64 {
    stats
        .tables
        .iter()
        .find(|s| s.name == name)
        .unwrap()
        .run_bytes
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
    (t, run_bytes(&db.stats(), name))
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
    let bytes = |name: &str| run_bytes(&stats, name);
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

type Model = std::collections::BTreeMap<Vec<u8>, Vec<u8>>;

/// Random puts (values from `value`), deletes, range deletes, flushes, compactions, reopens
/// and scans held open across them, on a table of `layout` with keys 0..600 (big-endian, as
/// `array` keeps them), checked against a `BTreeMap` as it goes and at the end.
fn random_ops_match_a_btreemap(layout: &str, value: fn(&mut ChaCha8Rng) -> Vec<u8>) {
    for seed in 0..3 {
        let (disk, mut db) = store();
        let t = db.create_table_with_layout("t", layout).unwrap();
        let mut model = Model::new();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut held: Option<(stitchdb::DbIter, Model)> = None;
        for _ in 0..4000 {
            let k = rng.gen_range(0..600u64);
            let key = k.to_be_bytes().to_vec();
            match rng.gen_range(0..1000) {
                0..700 => {
                    let v = value(&mut rng);
                    db.put(t, &key, &v).unwrap();
                    model.insert(key, v);
                }
                700..850 => {
                    db.delete(t, &key).unwrap();
                    model.remove(&key);
                }
                850..870 => {
                    let end = (k + rng.gen_range(1..30)).to_be_bytes().to_vec();
                    db.delete_range(t, &key, &end).unwrap();
                    model.retain(|k, _| *k < key || *k >= end);
                }
                870..900 => db.flush().unwrap(),
                900..910 => db.compact().unwrap(),
                910..915 => {
                    held = None;
                    db = reopen(&disk, db);
                }
                915..930 => {
                    // A scan opened now sees the table as it is, whatever comes after.
                    if let Some((scan, want)) = held.take() {
                        let got: Model = scan.map(|r| r.unwrap()).collect();
                        assert_eq!(got, want, "{layout}: a held scan");
                    }
                    held = Some((db.scan_prefix(t, b"").unwrap(), model.clone()));
                }
                _ => assert_eq!(db.get(t, &key).unwrap().as_ref(), model.get(&key)),
            }
        }
        drop(held);
        assert_eq!(table_contents(&db, t), model, "{layout}");
        db.compact().unwrap();
        let db = reopen(&disk, db);
        assert_eq!(table_contents(&db, t), model, "{layout}");
        // Backwards too, from the middle of the keys.
        let mid = 300u64.to_be_bytes();
        let back: Vec<(Vec<u8>, Vec<u8>)> = db
            .range_rev(t, Bound::Unbounded, Bound::Excluded(&mid[..]))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        let want: Vec<(Vec<u8>, Vec<u8>)> = model
            .range(..mid.to_vec())
            .rev()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(back, want, "{layout}: backwards");
        for k in 0..600u64 {
            let key = k.to_be_bytes().to_vec();
            assert_eq!(db.get(t, &key).unwrap().as_ref(), model.get(&key));
        }
        db.check().unwrap();
    }
}

/// A 4-byte little-endian integer, below 2^(8 * bytes) but one time in `odd` (never if 0).
fn small_int(rng: &mut ChaCha8Rng, bytes: u32, odd: u32) -> Vec<u8> {
    let n = match odd > 0 && rng.gen_range(0..odd) == 0 {
        true => rng.gen_range(1 << (8 * bytes)..=u32::MAX),
        false => rng.gen_range(0..1 << (8 * bytes)),
    };
    n.to_le_bytes().to_vec()
}

#[test]
fn small_integer_tables_match_a_btreemap() {
    random_ops_match_a_btreemap(
        "managed -> btree(512) -> small-integer(1) -> array(1)",
        |r| small_int(r, 1, 0),
    );
    random_ops_match_a_btreemap("managed -> small-integer(2) -> fixed(2)", |r| {
        small_int(r, 2, 0)
    });
    random_ops_match_a_btreemap(
        "managed -> quotient -> exception -> small-integer(3) -> array(3) -> linear",
        |r| match r.gen_range(0..10) {
            0 => b"not an integer".to_vec(),
            _ => small_int(r, 3, 5),
        },
    );
}

#[test]
fn small_integers_take_their_bytes_and_others_are_refused_or_kept() {
    let (disk, db) = store();
    let small = db
        .create_table_with_layout("small", "managed -> btree -> small-integer(1) -> array(1)")
        .unwrap();
    let kept = db
        .create_table_with_layout(
            "kept",
            "managed -> btree -> exception -> small-integer(1) -> array(1) -> linear",
        )
        .unwrap();
    let err = refused(
        &db,
        small,
        "small",
        1u64.to_be_bytes(),
        256u32.to_le_bytes(),
    );
    assert!(err.to_string().contains("below 2^8"), "{err}");
    batch_refused_whole(
        &db,
        (small, &2u64.to_be_bytes(), &7u32.to_le_bytes()),
        (small, &3u64.to_be_bytes(), b"abc"),
    );
    let n = 20_000u64;
    let value = |k: u64| match k % 1000 {
        // Kept whole by the exception's linear format.
        999 => 1_000_000 + k as u32,
        _ => (k % 200) as u32,
    };
    let default = db.create_table("ints").unwrap();
    for t in [small, kept, default] {
        for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
            let mut batch = WriteBatch::new();
            for &k in chunk.iter().filter(|&&k| t != small || value(k) < 256) {
                batch.put(t, k.to_be_bytes(), value(k).to_le_bytes());
            }
            db.write(&batch, Durability::Async).unwrap();
        }
    }
    db.compact().unwrap();
    let db = reopen(&disk, db);
    let stats = db.stats();
    let bytes = |name: &str| run_bytes(&stats, name);
    let default_bytes = bytes("ints");
    // A byte a value and its bitmap bit, against the default's key, sequence number, length
    // and 4-byte value.
    assert!(
        bytes("small") * 5 < default_bytes,
        "{} vs {default_bytes}",
        bytes("small")
    );
    assert!(
        bytes("kept") * 5 < default_bytes,
        "{} vs {default_bytes}",
        bytes("kept")
    );
    for k in [0, 1, 998, 999, 1999, n - 1] {
        let want = value(k).to_le_bytes().to_vec();
        assert_eq!(db.get(kept, k.to_be_bytes()).unwrap(), Some(want.clone()));
        let want = (value(k) < 256).then_some(want);
        assert_eq!(db.get(small, k.to_be_bytes()).unwrap(), want);
    }
    assert_eq!(table_contents(&db, kept).len() as u64, n);
    db.check().unwrap();
}

/// A US postal code `state-dictionary` holds, from a few.
fn state(rng: &mut ChaCha8Rng) -> Vec<u8> {
    [b"CA", b"MA", b"NY", b"TX", b"PR", b"WY", b"AK"][rng.gen_range(0..7)].to_vec()
}

#[test]
fn state_dictionary_tables_match_a_btreemap() {
    random_ops_match_a_btreemap("managed -> btree -> state-dictionary -> array(1)", state);
    random_ops_match_a_btreemap(
        "managed -> bloom -> exception -> state-dictionary -> fixed(1) -> linear",
        |r| match r.gen_range(0..8) {
            0 => b"Ontario".to_vec(),
            1 => b"ca".to_vec(),
            _ => state(r),
        },
    );
}

#[test]
fn state_codes_take_a_byte_and_others_are_refused_or_kept() {
    let (disk, db) = store();
    let coded = db
        .create_table_with_layout("coded", "managed -> btree -> state-dictionary -> array(1)")
        .unwrap();
    let kept = db
        .create_table_with_layout(
            "kept",
            "managed -> btree -> exception -> state-dictionary -> array(1) -> linear",
        )
        .unwrap();
    let err = refused(&db, coded, "coded", 1u64.to_be_bytes(), b"ZZ");
    assert!(err.to_string().contains("US postal codes"), "{err}");
    batch_refused_whole(
        &db,
        (coded, &2u64.to_be_bytes(), b"CA"),
        (coded, &3u64.to_be_bytes(), b"Quebec"),
    );
    let codes: Vec<&[u8]> = vec![b"AK", b"CA", b"DC", b"GU", b"VI", b"WY"];
    let value = |k: u64| match k % 500 {
        499 => b"Saint-Pierre".to_vec(),
        _ => codes[(k % 6) as usize].to_vec(),
    };
    let unique = db
        .create_table_with_layout(
            "unique",
            "managed -> btree -> exception -> unique-string(len=2) -> linear",
        )
        .unwrap();
    let default = db.create_table("codes").unwrap();
    let n = 20_000u64;
    for t in [coded, kept, unique, default] {
        let mut batch = WriteBatch::new();
        for k in (0..n).filter(|&k| t != coded || k % 500 != 499) {
            batch.put(t, k.to_be_bytes(), value(k));
        }
        db.write(&batch, Durability::Async).unwrap();
    }
    db.compact().unwrap();
    let db = reopen(&disk, db);
    let stats = db.stats();
    let bytes = |name: &str| run_bytes(&stats, name);
    assert!(
        bytes("coded") * 5 < bytes("codes"),
        "{} vs {}",
        bytes("coded"),
        bytes("codes")
    );
    assert!(
        bytes("kept") < bytes("unique"),
        "{} vs {}",
        bytes("kept"),
        bytes("unique")
    );
    for k in [0, 1, 498, 499, 999, n - 1] {
        assert_eq!(db.get(kept, k.to_be_bytes()).unwrap(), Some(value(k)));
        let want = (k % 500 != 499).then(|| value(k));
        assert_eq!(db.get(coded, k.to_be_bytes()).unwrap(), want);
    }
    assert_eq!(table_contents(&db, kept), table_contents(&db, default));
    db.check().unwrap();
}

/// A timestamp-like 4-byte integer: near the key's position on a clock, a few steps apart,
/// but one time in `odd` (never if 0) a leap.
fn stamp(rng: &mut ChaCha8Rng, odd: u32) -> Vec<u8> {
    let n: u32 = match odd > 0 && rng.gen_range(0..odd) == 0 {
        true => rng.gen(),
        false => 1_700_000_000 + rng.gen_range(0..2000),
    };
    n.to_le_bytes().to_vec()
}

#[test]
fn delta_integer_tables_match_a_btreemap() {
    random_ops_match_a_btreemap("managed -> delta-integer -> array(4)", |r| stamp(r, 3));
    random_ops_match_a_btreemap("managed -> btree(1024) -> delta-integer -> fixed(4)", |r| {
        stamp(r, 3)
    });
    random_ops_match_a_btreemap(
        "managed -> delta-integer -> exception -> small-integer(1) -> array(1) -> linear",
        |r| stamp(r, 10),
    );
    random_ops_match_a_btreemap(
        "managed -> quotient -> btree(512) -> delta-integer -> exception -> small-integer(2) -> \
         fixed(2) -> linear",
        |r| stamp(r, 10),
    );
}

#[test]
fn increasing_stamps_take_a_byte_each_and_leaps_are_kept_whole() {
    let (disk, db) = store();
    let layout = "managed -> btree -> delta-integer -> exception -> small-integer(1) -> array(1) \
                  -> linear";
    let t = db.create_table_with_layout("stamps", layout).unwrap();
    let default = db.create_table("default-stamps").unwrap();
    let err = refused(&db, t, "stamps", 1u64.to_be_bytes(), b"12345");
    assert!(err.to_string().contains("4-byte integers"), "{err}");
    batch_refused_whole(
        &db,
        (t, &2u64.to_be_bytes(), &7u32.to_le_bytes()),
        (t, &3u64.to_be_bytes(), b"abc"),
    );
    // Steps of 0 to 60, some backwards, a leap every 777th (its delta does not fit a byte:
    // kept whole, the next delta is from the value before it) and the clock wrapping.
    let n = 30_000u64;
    let mut stamps = Vec::new();
    let mut clock = u32::MAX - 200_000;
    for k in 0..n {
        clock = clock.wrapping_add((k * 7 % 61) as u32);
        stamps.push(match k % 777 {
            776 => clock ^ 0x5555_0000,
            100 => clock.wrapping_sub(50),
            _ => clock,
        });
    }
    for table in [t, default] {
        for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
            let mut batch = WriteBatch::new();
            for &k in chunk {
                batch.put(table, k.to_be_bytes(), stamps[k as usize].to_le_bytes());
            }
            db.write(&batch, Durability::Async).unwrap();
        }
    }
    db.compact().unwrap();
    let db = reopen(&disk, db);
    let stats = db.stats();
    let bytes = |name: &str| run_bytes(&stats, name);
    assert!(
        bytes("stamps") * 5 < bytes("default-stamps"),
        "{} vs {}",
        bytes("stamps"),
        bytes("default-stamps")
    );
    for k in [0, 1, 100, 101, 775, 776, 777, 5000, n - 1] {
        let want = stamps[k as usize].to_le_bytes().to_vec();
        assert_eq!(db.get(t, k.to_be_bytes()).unwrap(), Some(want), "key {k}");
    }
    assert_eq!(table_contents(&db, t), table_contents(&db, default));
    db.check().unwrap();
}

#[test]
fn empty_tables_match_a_btreemap() {
    random_ops_match_a_btreemap("managed -> bloom -> btree(512) -> empty", |_| Vec::new());
    random_ops_match_a_btreemap("managed -> exception -> empty -> linear", |r| {
        match r.gen_range(0..10) {
            0 => b"a rare value".to_vec(),
            _ => Vec::new(),
        }
    });
}

#[test]
fn a_set_stores_its_keys_alone_and_values_are_refused_or_kept() {
    let (disk, db) = store();
    let set = db
        .create_table_with_layout("set", "managed -> btree -> empty")
        .unwrap();
    let kept = db
        .create_table_with_layout("kept", "managed -> btree -> exception -> empty -> linear")
        .unwrap();
    let default = db.create_table("default-set").unwrap();
    refused(&db, set, "set", b"member", b"x");
    batch_refused_whole(&db, (set, b"a", b""), (set, b"b", b"value"));
    // Secondary-index-like keys: a field, then the row's id.
    let key = |k: u64| format!("city:{:04}:{k:08}", k % 300).into_bytes();
    let value = |t, k: u64| match (t == kept, k % 1000) {
        (true, 999) => b"kept".to_vec(),
        _ => Vec::new(),
    };
    let n = 20_000u64;
    for t in [set, kept, default] {
        let mut batch = WriteBatch::new();
        for k in 0..n {
            batch.put(t, key(k), value(t, k));
        }
        db.write(&batch, Durability::Async).unwrap();
    }
    db.compact().unwrap();
    let db = reopen(&disk, db);
    let stats = db.stats();
    let bytes = |name: &str| run_bytes(&stats, name);
    // No sequence number and no length a key.
    assert!(
        bytes("set") * 5 < bytes("default-set") * 4,
        "{} vs {}",
        bytes("set"),
        bytes("default-set")
    );
    for k in [0, 1, 999, n - 1] {
        assert_eq!(db.get(set, key(k)).unwrap(), Some(Vec::new()));
        assert_eq!(db.get(kept, key(k)).unwrap(), Some(value(kept, k)));
    }
    assert_eq!(db.get(set, b"city:").unwrap(), None);
    assert_eq!(table_contents(&db, set), table_contents(&db, default));
    assert_eq!(table_contents(&db, kept).len() as u64, n);
    db.check().unwrap();
}

#[test]
fn existential_tables_match_a_btreemap() {
    random_ops_match_a_btreemap("managed -> existential -> array(4)", |r| small_int(r, 2, 0));
    random_ops_match_a_btreemap("managed -> btree(512) -> existential -> empty", |_| {
        Vec::new()
    });
    random_ops_match_a_btreemap(
        "managed -> existential -> delta-integer -> exception -> small-integer(1) -> fixed(1) \
         -> linear",
        |r| stamp(r, 10),
    );
    random_ops_match_a_btreemap(
        "managed -> existential -> exception -> unique-string(max=4, len=8) -> linear",
        |r| match r.gen_range(0..6) {
            0 => b"a longer value".to_vec(),
            n => vec![b'a' + n as u8; n as usize],
        },
    );
}

/// A run of tombstones over keys an older run holds: `existential` keeps them as keys alone,
/// a bit each in an array.
#[test]
fn tombstones_take_a_bit_each_under_existential() {
    let (disk, db) = store();
    let layouts = [
        ("plain", "managed -> btree -> array(4)"),
        ("existential", "managed -> btree -> existential -> array(4)"),
        // Read back like the others (its size is its keys').
        ("fixed", "managed -> btree -> existential -> fixed(4)"),
    ];
    let n = 20_000u64;
    let mut tables = Vec::new();
    for (name, layout) in layouts {
        let t = db.create_table_with_layout(name, layout).unwrap();
        let mut batch = WriteBatch::new();
        for k in 0..n {
            batch.put(t, k.to_be_bytes(), (k as u32).to_le_bytes());
        }
        db.write(&batch, Durability::Async).unwrap();
        tables.push(t);
    }
    db.compact().unwrap();
    // One by one (a sorted batch this large would be ingested as a linear run).
    for &t in &tables {
        for k in (0..n).filter(|k| k % 4 != 3) {
            db.delete(t, k.to_be_bytes()).unwrap();
        }
        db.flush().unwrap();
    }
    let db = reopen(&disk, db);
    let stats = db.stats();
    let bytes = |name: &str| run_bytes(&stats, name);
    // 20,000 values, then 15,000 tombstones: 7 bytes each in a versions section, a bit
    // each under existential (76,364 against 44,550 bytes when written).
    assert!(
        bytes("existential") * 3 < bytes("plain") * 2,
        "{} vs {}",
        bytes("existential"),
        bytes("plain")
    );
    for &t in &tables {
        for k in [0, 1, 3, 7, n - 1, n - 2] {
            let want = (k % 4 == 3).then(|| (k as u32).to_le_bytes().to_vec());
            assert_eq!(db.get(t, k.to_be_bytes()).unwrap(), want, "key {k}");
        }
        assert_eq!(table_contents(&db, t).len() as u64, n / 4);
    }
    db.check().unwrap();
}

/// One of 6 values that repeat (empty among them) 7 times in 10, else a value of random
/// length and bytes.
fn repeating(rng: &mut ChaCha8Rng) -> Vec<u8> {
    match rng.gen_range(0..10) {
        0..7 => {
            let n = rng.gen_range(0..6u8);
            vec![b'a' + n; usize::from(n) * 13]
        }
        _ => {
            let len = rng.gen_range(0..60);
            (0..len).map(|_| rng.gen()).collect()
        }
    }
}

#[test]
fn sliding_window_tables_match_a_btreemap() {
    random_ops_match_a_btreemap("managed -> sliding-window -> linear", repeating);
    random_ops_match_a_btreemap(
        "managed -> quotient -> btree(512) -> sliding-window(window=2) -> linear",
        repeating,
    );
    random_ops_match_a_btreemap(
        "managed -> bloom -> btree -> sliding-window(4096) -> linear",
        repeating,
    );
}

/// Anvil's sliding-window benchmark scaled down: values of 75 to 85 bytes, 3 in 4 one of 10
/// popular 80-byte values, the rest random.
fn anvil_value(rng: &mut ChaCha8Rng, popular: &[Vec<u8>]) -> Vec<u8> {
    match rng.gen_range(0..4) {
        0 => {
            let len = rng.gen_range(75..=85);
            (0..len).map(|_| rng.gen()).collect()
        }
        _ => popular[rng.gen_range(0..popular.len())].clone(),
    }
}

#[test]
fn repeated_values_are_stored_once_a_block_and_distinct_ones_cost_nothing_more() {
    let (disk, db) = store();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let popular: Vec<Vec<u8>> = (0..10)
        .map(|_| (0..80).map(|_| rng.gen()).collect())
        .collect();
    let n = 20_000u64;
    let skewed: Vec<Vec<u8>> = (0..n).map(|_| anvil_value(&mut rng, &popular)).collect();
    let distinct: Vec<Vec<u8>> = (0..n).map(|k| format!("{k:080}").into_bytes()).collect();
    let window = "managed -> quotient -> btree -> sliding-window -> linear";
    // Each pair (the default layout, the window) written in the same batches: the same
    // sequence numbers, the same flushes.
    let mut pairs = Vec::new();
    for (name, values) in [("skewed", &skewed), ("distinct", &distinct)] {
        let default = db
            .create_table_with_layout(&format!("{name}-default"), "")
            .unwrap();
        let t = db.create_table_with_layout(name, window).unwrap();
        for (c, keys) in (0..n).collect::<Vec<_>>().chunks(500).enumerate() {
            let mut batch = WriteBatch::new();
            for &k in keys {
                let value = values[k as usize].as_slice();
                batch.put(default, k.to_be_bytes(), value);
                batch.put(t, k.to_be_bytes(), value);
            }
            db.write(&batch, Durability::Async).unwrap();
            if c % 8 == 7 {
                db.flush().unwrap();
            }
        }
        pairs.push(([default, t], values));
    }
    // One sorted batch: ingested as a run of its own, which keeps the window too.
    let ingested = db.create_table_with_layout("ingested", window).unwrap();
    let mut batch = WriteBatch::new();
    for k in 0..n {
        batch.put(ingested, k.to_be_bytes(), skewed[k as usize].as_slice());
    }
    db.write(&batch, Durability::Async).unwrap();
    let ingested_bytes = run_bytes(&db.stats(), "ingested");
    db.compact().unwrap();
    let db = reopen(&disk, db);
    let stats = db.stats();
    let bytes = |name: &str| run_bytes(&stats, name);
    // 4 KiB blocks: each popular value stored once a block, then a reference of one byte
    // (36% of the default's bytes).
    for (name, bytes) in [("skewed", bytes("skewed")), ("ingested", ingested_bytes)] {
        assert!(
            bytes * 2 < run_bytes(&stats, "skewed-default"),
            "{name}: {bytes} vs {}",
            run_bytes(&stats, "skewed-default")
        );
    }
    // Nothing repeats: no reference, and the flag bit rides in the shared-prefix length
    // (keys sharing less than 64 bytes).
    assert_eq!(bytes("distinct"), bytes("distinct-default"));
    for (pair, values) in pairs {
        for k in [0, 1, 777, n - 1] {
            for t in pair {
                let got = db.get(t, k.to_be_bytes()).unwrap();
                assert_eq!(got.as_ref(), Some(&values[k as usize]));
            }
        }
        assert_eq!(table_contents(&db, pair[0]), table_contents(&db, pair[1]));
    }
    assert_eq!(
        table_contents(&db, ingested),
        table_contents(&db, db.table("skewed").unwrap())
    );
    db.check().unwrap();
}

/// Random puts, deletes, range deletes, flushes, merges and reopens on a table of `layout`,
/// keys from `key` (any widths), checked against a `BTreeMap` by point reads and by forward
/// and reverse scans from random keys.
fn keys_match_a_btreemap(layout: &str, key: fn(&mut ChaCha8Rng) -> Vec<u8>) {
    use std::ops::Bound::{Excluded, Included, Unbounded};
    for seed in 0..3 {
        let (disk, mut db) = store();
        let t = db.create_table_with_layout("t", layout).unwrap();
        let mut model = Model::new();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        for _ in 0..3000 {
            let k = key(&mut rng);
            match rng.gen_range(0..1000) {
                0..650 => {
                    let v = small_int(&mut rng, 2, 0);
                    db.put(t, &k, &v).unwrap();
                    model.insert(k, v);
                }
                650..800 => {
                    db.delete(t, &k).unwrap();
                    model.remove(&k);
                }
                800..815 => {
                    let end = key(&mut rng).max(k.clone());
                    db.delete_range(t, &k, &end).unwrap();
                    model.retain(|x, _| *x < k || *x >= end);
                }
                815..850 => db.flush().unwrap(),
                850..860 => db.compact().unwrap(),
                860..863 => db = reopen(&disk, db),
                863..900 => {
                    let got: Model = db
                        .range(t, Included(&k), Unbounded)
                        .unwrap()
                        .take(20)
                        .map(|r| r.unwrap())
                        .collect();
                    let want: Model = model
                        .range(k.clone()..)
                        .take(20)
                        .map(|(a, b)| (a.clone(), b.clone()))
                        .collect();
                    assert_eq!(got, want, "{layout}: a scan from {k:?}");
                }
                900..940 => {
                    let got: Vec<(Vec<u8>, Vec<u8>)> = db
                        .range_rev(t, Unbounded, Excluded(&k))
                        .unwrap()
                        .take(20)
                        .map(|r| r.unwrap())
                        .collect();
                    let want: Vec<(Vec<u8>, Vec<u8>)> = model
                        .range(..k.clone())
                        .rev()
                        .take(20)
                        .map(|(a, b)| (a.clone(), b.clone()))
                        .collect();
                    assert_eq!(got, want, "{layout}: a reverse scan below {k:?}");
                }
                _ => assert_eq!(db.get(t, &k).unwrap().as_ref(), model.get(&k), "{layout}"),
            }
        }
        db.compact().unwrap();
        let db = reopen(&disk, db);
        assert_eq!(table_contents(&db, t), model, "{layout}");
        let all: Vec<(Vec<u8>, Vec<u8>)> = db
            .range_rev(t, Unbounded, Unbounded)
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        let want: Vec<(Vec<u8>, Vec<u8>)> = model
            .iter()
            .rev()
            .map(|(a, b)| (a.clone(), b.clone()))
            .collect();
        assert_eq!(all, want, "{layout}: a reverse scan of all");
        for k in model.keys() {
            assert_eq!(db.get(t, k).unwrap().as_ref(), model.get(k), "{layout}");
        }
        db.check().unwrap();
    }
}

/// `fixed` blocks whose keys are all one width store them as one array of their rests (block
/// version 10), searched by arithmetic; blocks with keys of several widths fall back to keys
/// sharing prefixes (versions 5 and 8). Both read as a `BTreeMap` does, under the layers too.
#[test]
fn fixed_keys_of_one_width_and_of_several_match_a_btreemap() {
    let layouts = [
        "managed -> btree(512) -> fixed(4)",
        "managed -> quotient -> btree(1024) -> existential -> fixed(4)",
        "managed -> btree(512) -> small-integer(2) -> fixed(2)",
        "managed -> btree(512) -> delta-integer -> fixed(4)",
    ];
    for layout in layouts {
        // One width: 8-byte big-endian integers, and 10-byte keys sharing a text prefix.
        keys_match_a_btreemap(layout, |r| r.gen_range(0..700u64).to_be_bytes().to_vec());
        keys_match_a_btreemap(layout, |r| {
            format!("key{:07}", r.gen_range(0..700u32) * 13).into_bytes()
        });
        // Several widths within a block: now and then a longer or shorter key among them.
        keys_match_a_btreemap(layout, |r| {
            let mut k = r.gen_range(0..700u64).to_be_bytes().to_vec();
            match r.gen_range(0..20) {
                0 => k.push(r.gen()),
                1 => k.truncate(r.gen_range(0..8)),
                _ => {}
            }
            k
        });
    }
}
