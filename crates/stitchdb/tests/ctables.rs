//! Column tables (cTables, docs/layouts.md "Column tables"): a model test of random row and
//! column operations on a row cTable and a column cTable against a `BTreeMap`, reopening
//! the store between them; what a refused write, a rolled-back transaction and a snapshot
//! leave; bad definitions; and crashes during creation and during row writes on the
//! simulated disk.

#![allow(clippy::unwrap_used)]

mod support;

use proptest::prelude::*;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use stitchdb::{
    CTable, CTableKind, Db, Disk, Durability, Error, Isolation, MemDisk, Options, SimDisk,
};
use support::CrashingDisk;

type Row = Vec<Option<Vec<u8>>>;
type Model = BTreeMap<Vec<u8>, Row>;

const COLUMNS: [&str; 3] = ["id", "code", "state"];
/// The column cTable's layouts: `code` holds 2-byte values only (anything else is refused),
/// `state` keeps a dictionary of repeated values and what it rejects in `linear`.
const LAYOUTS: [&str; 3] = [
    "",
    "managed -> btree -> fixed(2)",
    "managed -> exception -> unique-string(max=4, len=3) -> linear",
];

fn options() -> Options {
    Options {
        zone_size: 1 << 20,
        memtable_size: 16 * 1024,
        background: false,
        durability: Durability::Async,
        ..Options::default()
    }
}

fn column_defs() -> Vec<(&'static str, &'static str)> {
    COLUMNS.iter().copied().zip(LAYOUTS).collect()
}

fn make(db: &Db) -> (CTable, CTable) {
    let rows = db.create_row_ctable("r", &COLUMNS, "").unwrap();
    let cols = db.create_column_ctable("c", &column_defs()).unwrap();
    (rows, cols)
}

/// Whether the column cTable refuses this value of column `c` (`code` takes 2 bytes).
fn refused(c: usize, v: &Option<Vec<u8>>) -> bool {
    c == 1 && v.as_ref().is_some_and(|v| v.len() != 2)
}

#[derive(Debug, Clone)]
enum Write {
    Insert(Vec<u8>, Row),
    Update(Vec<u8>, Vec<(usize, Option<Vec<u8>>)>),
    Delete(Vec<u8>),
}

#[derive(Debug, Clone)]
enum Op {
    Write(Write),
    Get(Vec<u8>, Vec<usize>),
    Scan(Vec<u8>, Vec<u8>, Vec<usize>),
    Txn(Vec<Write>, bool),
    Flush,
    Reopen,
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    (0u8..12).prop_map(|k| format!("k{k:02}").into_bytes())
}

fn value() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![
        1 => Just(None),
        3 => proptest::collection::vec(any::<u8>(), 2).prop_map(Some),
        1 => proptest::collection::vec(0u8..4, 0..6).prop_map(Some),
    ]
}

fn projection() -> impl Strategy<Value = Vec<usize>> {
    proptest::sample::subsequence(vec![0usize, 1, 2], 1..=3).prop_shuffle()
}

fn write() -> impl Strategy<Value = Write> {
    prop_oneof![
        3 => (key(), proptest::collection::vec(value(), 3)).prop_map(|(k, r)| Write::Insert(k, r)),
        2 => (key(), projection(), proptest::collection::vec(value(), 3)).prop_map(|(k, cols, vals)| {
            Write::Update(k, cols.into_iter().zip(vals).collect())
        }),
        1 => key().prop_map(Write::Delete),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => write().prop_map(Op::Write),
        3 => (key(), projection()).prop_map(|(k, p)| Op::Get(k, p)),
        2 => (key(), key(), projection()).prop_map(|(a, b, p)| Op::Scan(a.clone().min(b.clone()), a.max(b), p)),
        2 => (proptest::collection::vec(write(), 1..6), any::<bool>()).prop_map(|(w, c)| Op::Txn(w, c)),
        1 => Just(Op::Flush),
        1 => Just(Op::Reopen),
    ]
}

/// Applies `w` to `model` as a cTable of `kind` would; false if the write is refused.
fn apply_model(kind: CTableKind, model: &mut Model, w: &Write) -> bool {
    let column = kind == CTableKind::Column;
    match w {
        Write::Insert(k, row) => {
            if column && row.iter().enumerate().any(|(c, v)| refused(c, v)) {
                return false;
            }
            model.insert(k.clone(), row.clone());
            settle(model, k);
        }
        Write::Update(k, vals) => {
            if column && vals.iter().any(|(c, v)| refused(*c, v)) {
                return false;
            }
            let row = model.entry(k.clone()).or_insert_with(|| vec![None; 3]);
            for (c, v) in vals {
                row[*c] = v.clone();
            }
            settle(model, k);
        }
        Write::Delete(k) => {
            model.remove(k);
        }
    }
    true
}

/// A row with no value left is no row.
fn settle(model: &mut Model, k: &[u8]) {
    if model.get(k).is_some_and(|r| r.iter().all(Option::is_none)) {
        model.remove(k);
    }
}

fn project(row: &Row, p: &[usize]) -> Option<Row> {
    let out: Row = p.iter().map(|&c| row[c].clone()).collect();
    out.iter().any(Option::is_some).then_some(out)
}

fn names(p: &[usize]) -> Vec<&'static str> {
    p.iter().map(|&c| COLUMNS[c]).collect()
}

fn do_write(t: &CTable, to: impl stitchdb::CTableWrite, w: &Write) -> stitchdb::Result<()> {
    match w {
        Write::Insert(k, row) => {
            let row: Vec<Option<&[u8]>> = row.iter().map(Option::as_deref).collect();
            t.insert(to, k, &row)
        }
        Write::Update(k, vals) => {
            let vals: Vec<(&str, Option<&[u8]>)> = vals
                .iter()
                .map(|(c, v)| (COLUMNS[*c], v.as_deref()))
                .collect();
            t.update(to, k, &vals)
        }
        Write::Delete(k) => t.delete(to, k),
    }
}

fn expect_refusal(r: stitchdb::Result<()>, ok: bool, what: &str) {
    match (r, ok) {
        (Ok(()), true) => {}
        (Err(Error::ColumnRejects { column, .. }), false) => assert_eq!(column, "code", "{what}"),
        (r, ok) => panic!("{what}: {r:?}, expected ok = {ok}"),
    }
}

fn scan_all(t: &CTable, from: impl stitchdb::CTableRead, p: &[usize]) -> BTreeMap<Vec<u8>, Row> {
    t.scan(from, Bound::Unbounded, Bound::Unbounded, &names(p))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn model_scan(model: &Model, lo: &[u8], hi: &[u8], p: &[usize]) -> BTreeMap<Vec<u8>, Row> {
    model
        .range(lo.to_vec()..hi.to_vec())
        .filter_map(|(k, r)| project(r, p).map(|v| (k.clone(), v)))
        .collect()
}

fn run(ops: Vec<Op>) {
    let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    let mut db = Db::create_on(disk.clone(), options()).unwrap();
    let (mut rows, mut cols) = make(&db);
    let mut models = [Model::new(), Model::new()];
    let all = [0usize, 1, 2];
    for op in ops {
        let tables = [(&rows, CTableKind::Row), (&cols, CTableKind::Column)];
        match &op {
            Op::Write(w) => {
                for (i, (t, kind)) in tables.into_iter().enumerate() {
                    let ok = apply_model(kind, &mut models[i], w);
                    expect_refusal(do_write(t, &db, w), ok, &format!("{kind:?} {w:?}"));
                }
            }
            Op::Get(k, p) => {
                for (i, (t, kind)) in tables.into_iter().enumerate() {
                    let want = models[i].get(k).and_then(|r| project(r, p));
                    let got = t.get(&db, k, &names(p)).unwrap();
                    assert_eq!(got, want, "{kind:?} get {k:?} {p:?}");
                }
            }
            Op::Scan(lo, hi, p) => {
                for (i, (t, kind)) in tables.into_iter().enumerate() {
                    let got: BTreeMap<_, _> = t
                        .scan(&db, Bound::Included(lo), Bound::Excluded(hi), &names(p))
                        .unwrap()
                        .map(Result::unwrap)
                        .collect();
                    assert_eq!(
                        got,
                        model_scan(&models[i], lo, hi, p),
                        "{kind:?} scan {p:?}"
                    );
                }
            }
            Op::Txn(writes, commit) => {
                let mut txn = db.begin(Isolation::Snapshot).unwrap();
                let mut inside = models.clone();
                for w in writes {
                    for (i, (t, kind)) in tables.into_iter().enumerate() {
                        let ok = apply_model(kind, &mut inside[i], w);
                        expect_refusal(
                            do_write(t, &mut txn, w),
                            ok,
                            &format!("txn {kind:?} {w:?}"),
                        );
                    }
                }
                // The transaction reads its own writes, and a refused one left nothing.
                for (i, (t, kind)) in tables.into_iter().enumerate() {
                    let got = scan_all(t, &mut txn, &all);
                    assert_eq!(
                        got,
                        model_scan(&inside[i], b"", b"\xff", &all),
                        "txn {kind:?}"
                    );
                }
                if *commit {
                    txn.commit().unwrap();
                    models = inside;
                } else {
                    txn.abort();
                }
            }
            Op::Flush => db.flush().unwrap(),
            Op::Reopen => {
                db.close().unwrap();
                db = Db::open_on(disk.clone(), options()).unwrap();
                rows = db.ctable("r").unwrap();
                cols = db.ctable("c").unwrap();
            }
        }
    }
    for (i, t) in [&rows, &cols].into_iter().enumerate() {
        assert_eq!(
            scan_all(t, &db, &all),
            models[i],
            "{:?} at the end",
            t.kind()
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(support::env_count("STITCHDB_CTABLE_CASES", 64)))]

    #[test]
    fn ctables_hold_what_the_model_holds(ops in proptest::collection::vec(op(), 1..80)) {
        run(ops);
    }
}

fn store() -> (Arc<dyn Disk>, Db) {
    let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    let db = Db::create_on(disk.clone(), options()).unwrap();
    (disk, db)
}

#[test]
fn bad_definitions_create_nothing() {
    let (_, db) = store();
    let before = db.tables();
    let long = "x".repeat(129);
    let bad_rows: [(&str, &[&str], &str); 5] = [
        ("", &["a"], ""),
        (&long, &["a"], ""),
        ("t", &[], ""),
        ("t", &["a", "a"], ""),
        ("t", &["a"], "managed -> fixd(8)"),
    ];
    for (name, columns, layout) in bad_rows {
        let e = db.create_row_ctable(name, columns, layout).unwrap_err();
        assert!(
            matches!(e, Error::BadColumns(_) | Error::BadLayout(_)),
            "{name:?} {columns:?} {layout:?}: {e}"
        );
    }
    let bad_columns: [&[(&str, &str)]; 4] = [
        &[("a", ""), ("a", "")],
        &[("a:b", "")],
        &[("", "")],
        &[("a", ""), ("b", "managed -> exception -> linear")],
    ];
    for columns in bad_columns {
        let e = db.create_column_ctable("t", columns).unwrap_err();
        assert!(
            matches!(e, Error::BadColumns(_) | Error::BadLayout(_)),
            "{columns:?}: {e}"
        );
    }
    let e = db
        .create_column_ctable("t", &[("a", ""), ("b", "managed -> fixd(8)")])
        .unwrap_err();
    assert!(e.to_string().contains("column \"b\""), "{e}");
    // A table the cTable would need exists already.
    db.create_table("t:a").unwrap();
    let e = db.create_column_ctable("t", &[("a", "")]).unwrap_err();
    assert!(matches!(e, Error::TableExists(ref t) if t == "t:a"), "{e}");
    assert_eq!(db.tables(), [before, vec!["t:a".to_string()]].concat());
    assert!(db.ctables().unwrap().is_empty());
    assert!(matches!(db.ctable("t"), Err(Error::NoSuchCTable(_))));
    // A name in use.
    db.create_row_ctable("u", &["a"], "").unwrap();
    let e = db.create_row_ctable("u", &["a"], "").unwrap_err();
    assert!(matches!(e, Error::CTableExists(_)), "{e}");
}

#[test]
fn bad_rows_and_projections_write_nothing() {
    let (_, db) = store();
    let (rows, cols) = make(&db);
    for t in [&rows, &cols] {
        let e = t.insert(&db, b"k", &[Some(b"ab")]).unwrap_err();
        assert!(matches!(e, Error::BadColumns(_)), "{e}");
        let e = t.update(&db, b"k", &[("nope", Some(b"ab"))]).unwrap_err();
        assert!(e.to_string().contains("no column \"nope\""), "{e}");
        let e = t
            .update(&db, b"k", &[("id", None), ("id", None)])
            .unwrap_err();
        assert!(matches!(e, Error::BadColumns(_)), "{e}");
        assert!(t.update(&db, b"k", &[]).is_err());
        assert!(t.get(&db, b"k", &["id", "nope"]).is_err());
        assert!(t.get(&db, b"k", &[]).is_err());
        let scan = t.scan(&db, Bound::Unbounded, Bound::Unbounded, &["zz"]);
        assert!(scan.is_err());
        let long = vec![0u8; stitchdb::MAX_KEY_LEN + 1];
        let e = t.insert(&db, &long, &[Some(b"a"), None, None]).unwrap_err();
        assert!(matches!(e, Error::TooLarge { .. }), "{e}");
    }
    // The column cTable refuses a 3-byte `code` whole: `id` is not written either, in an
    // auto-commit and in a transaction (which goes on and commits its other writes).
    let row: [Option<&[u8]>; 3] = [Some(b"id"), Some(b"abc"), Some(b"CA")];
    let e = cols.insert(&db, b"k", &row).unwrap_err();
    assert!(
        matches!(e, Error::ColumnRejects { ref column, .. } if column == "code"),
        "{e}"
    );
    let mut txn = db.begin(Isolation::Snapshot).unwrap();
    assert!(cols.insert(&mut txn, b"k", &row).is_err());
    assert!(cols
        .update(&mut txn, b"j", &[("id", Some(b"x")), ("code", Some(b"y"))])
        .is_err());
    cols.insert(&mut txn, b"m", &[Some(b"id"), Some(b"ab"), None])
        .unwrap();
    txn.commit().unwrap();
    let everything: BTreeMap<_, _> = cols
        .scan(&db, Bound::Unbounded, Bound::Unbounded, &COLUMNS)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let m: Row = vec![Some(b"id".to_vec()), Some(b"ab".to_vec()), None];
    assert_eq!(everything, BTreeMap::from([(b"m".to_vec(), m)]));
    for table in db.tables().iter().filter(|t| t.starts_with("c:")) {
        let id = db.table(table).unwrap();
        let keys: Vec<_> = db
            .scan_prefix(id, b"")
            .unwrap()
            .map(|r| r.unwrap().0)
            .collect();
        assert!(keys.iter().all(|k| k == b"m"), "{table}: {keys:?}");
    }
}

#[test]
fn a_rolled_back_transaction_leaves_nothing_and_a_snapshot_keeps_its_rows() {
    let (disk, db) = store();
    let (rows, cols) = make(&db);
    for t in [&rows, &cols] {
        t.insert(&db, b"a", &[Some(b"1"), Some(b"xy"), Some(b"NY")])
            .unwrap();
        let mut txn = db.begin(Isolation::Serializable).unwrap();
        t.insert(&mut txn, b"b", &[Some(b"2"), None, None]).unwrap();
        t.update(&mut txn, b"a", &[("state", None)]).unwrap();
        t.delete(&mut txn, b"a").unwrap();
        assert!(t.get(&mut txn, b"a", &COLUMNS).unwrap().is_none());
        drop(txn);
    }
    db.snapshot("before").unwrap();
    for t in [&rows, &cols] {
        t.update(&db, b"a", &[("id", Some(b"9")), ("state", None)])
            .unwrap();
        t.insert(&db, b"c", &[None, Some(b"zz"), None]).unwrap();
    }
    let snap = db.open_snapshot("before").unwrap();
    for t in [&rows, &cols] {
        let a = |v: &[u8], s: Option<&[u8]>| {
            BTreeMap::from([(b"a".to_vec(), vec![s.map(<[u8]>::to_vec), Some(v.to_vec())])])
        };
        let proj = ["state", "id"];
        let old: BTreeMap<_, _> = t
            .scan(&snap, Bound::Unbounded, Bound::Unbounded, &proj)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(old, a(b"1", Some(b"NY")), "{:?}", t.kind());
        let now: BTreeMap<_, _> = t
            .scan(&db, Bound::Unbounded, Bound::Unbounded, &proj)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(now, a(b"9", None), "{:?}: c has neither column", t.kind());
        assert_eq!(t.get(&snap, b"c", &["code"]).unwrap(), None);
        assert_eq!(
            t.get(&db, b"c", &["code"]).unwrap(),
            Some(vec![Some(b"zz".to_vec())])
        );
    }
    drop(snap);
    db.close().unwrap();
    let db = Db::open_read_only_on(disk, options()).unwrap();
    let listed = db.ctables().unwrap();
    assert_eq!(listed.len(), 2);
    assert!(listed.iter().all(|c| c.finished));
    assert_eq!(
        listed[0].tables[1].1,
        "managed -> btree(node=4096) -> fixed(size=2)"
    );
    let cols = db.ctable("c").unwrap();
    assert_eq!(
        cols.get(&db, b"c", &["code"]).unwrap(),
        Some(vec![Some(b"zz".to_vec())])
    );
}

/// A crash at any point of a creation leaves no cTable, or one that opening (or creating
/// it again) finishes: never one read half-made.
#[test]
fn a_crash_while_creating_leaves_nothing_or_a_ctable_opening_finishes() {
    let (mut absent, mut unfinished, mut finished) = (0, 0, 0);
    for seed in 0..40 {
        let disk = CrashingDisk::new(seed);
        let db = Db::create_on(disk.clone(), options()).unwrap();
        *disk.probability.lock() = 0.3;
        db.create_column_ctable("c", &column_defs()).unwrap();
        db.close().unwrap();
        for (image, _, _) in disk.images.lock().drain(..) {
            let sim: Arc<SimDisk> = Arc::new(image);
            let db = Db::open_on(sim.clone(), options()).unwrap();
            let listed = db.ctables().unwrap();
            let t = match listed.first() {
                None => {
                    absent += 1;
                    // Creating it again works (tables an interrupted creation made before
                    // its record are none: the record comes first).
                    db.create_column_ctable("c", &column_defs()).unwrap()
                }
                Some(info) => {
                    assert_eq!(info.columns, COLUMNS);
                    if info.finished {
                        finished += 1;
                        db.ctable("c").unwrap()
                    } else {
                        unfinished += 1;
                        match seed % 2 {
                            0 => db.ctable("c").unwrap(),
                            _ => db.create_column_ctable("c", &column_defs()).unwrap(),
                        }
                    }
                }
            };
            assert!(db.ctables().unwrap()[0].finished);
            t.insert(&db, b"k", &[Some(b"1"), Some(b"22"), Some(b"CA")])
                .unwrap();
            let got = t.get(&db, b"k", &COLUMNS).unwrap().unwrap();
            assert_eq!(got[1].as_deref(), Some(&b"22"[..]));
            db.check().unwrap();
        }
    }
    eprintln!("{absent} absent, {unfinished} unfinished, {finished} finished");
    assert!(absent > 0 && unfinished > 0 && finished > 0);
}

/// Rows written to a column cTable, a commit each, and a crash anywhere: the store holds a
/// prefix of the rows, every acknowledged one included, each row whole (all its columns or
/// none).
#[test]
fn a_crash_keeps_whole_rows() {
    let mut images = 0;
    for seed in 0..12 {
        let disk = CrashingDisk::new(seed);
        let db = Db::create_on(disk.clone(), options()).unwrap();
        let t = db.create_column_ctable("c", &column_defs()).unwrap();
        *disk.probability.lock() = 0.02;
        for i in 0..300u32 {
            let n = u64::from(i) + 1;
            disk.issued.store(n, Ordering::SeqCst);
            let key = i.to_be_bytes();
            let mut txn = db.begin(Isolation::Snapshot).unwrap();
            t.insert(&mut txn, key, &[Some(&key), Some(&key[2..]), Some(b"WA")])
                .unwrap();
            txn.commit_with(Durability::Sync).unwrap();
            disk.acked.store(n, Ordering::SeqCst);
        }
        db.close().unwrap();
        for (image, acked, issued) in disk.images.lock().drain(..) {
            images += 1;
            let db = Db::open_on(Arc::new(image), options()).unwrap();
            let Ok(t) = db.ctable("c") else {
                assert_eq!(acked, 0, "seed {seed}: rows acknowledged, no cTable");
                continue;
            };
            let got: Vec<_> = t
                .scan(&db, Bound::Unbounded, Bound::Unbounded, &COLUMNS)
                .unwrap()
                .map(Result::unwrap)
                .collect();
            let n = got.len() as u64;
            assert!(
                acked <= n && n <= issued,
                "seed {seed}: {n} rows, acked {acked}"
            );
            for (i, (key, row)) in got.iter().enumerate() {
                let want = (i as u32).to_be_bytes();
                assert_eq!(key, &want, "seed {seed}");
                let whole = [
                    Some(want.to_vec()),
                    Some(want[2..].to_vec()),
                    Some(b"WA".to_vec()),
                ];
                assert_eq!(row, &whole, "seed {seed} row {i}");
            }
            db.check().unwrap();
        }
    }
    assert!(images > 0);
}
