//! SQL through GlueSQL over StitchDB: tables, rows, transactions, reopening, errors, and a
//! model test of random writes.

// Helpers outside `#[test]` functions unwrap too.
#![allow(clippy::unwrap_used)]

use gluesql_core::prelude::{Payload, Value};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use stitchdb::{Db, Options};
use stitchdb_sql::{Session, StitchStorage};

/// Small memtables so the tests reach runs (and their layouts) quickly.
fn options() -> Options {
    Options {
        memtable_size: 256 << 10,
        ..Options::default()
    }
}

fn create(dir: &Path) -> Session {
    let db = Db::create(dir.join("sql.store"), options()).unwrap();
    Session::new(StitchStorage::new(Arc::new(db)).unwrap())
}

fn reopen(dir: &Path) -> Session {
    let db = Db::open(dir.join("sql.store"), options()).unwrap();
    Session::new(StitchStorage::new(Arc::new(db)).unwrap())
}

/// Closes the session's store.
fn close(session: Session) {
    let db = session.into_storage().db().clone();
    Arc::try_unwrap(db).ok().unwrap().close().unwrap();
}

/// The rows of the one SELECT in `sql`.
fn rows(s: &mut Session, sql: &str) -> Vec<Vec<Value>> {
    match s.execute(sql).unwrap().pop().unwrap() {
        Payload::Select { rows, .. } => rows,
        other => panic!("not a select: {other:?}"),
    }
}

fn i(n: i64) -> Value {
    Value::I64(n)
}

fn s(t: &str) -> Value {
    Value::Str(t.to_owned())
}

fn setup(sql: &mut Session) {
    sql.execute(
        "CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price FLOAT, qty INTEGER)",
    )
    .unwrap();
    sql.execute(
        "INSERT INTO item VALUES (3, 'cog', 2.5, 10), (1, 'pen', 1.0, 5), (2, 'ink', 4.0, 0), \
         (-7, 'nib', 0.25, 100)",
    )
    .unwrap();
}

#[test]
fn create_insert_select_update_delete() {
    let dir = tempfile::tempdir().unwrap();
    let mut sql = create(dir.path());
    setup(&mut sql);

    // A full scan comes back in key order (negative keys first).
    assert_eq!(
        rows(&mut sql, "SELECT id FROM item"),
        vec![vec![i(-7)], vec![i(1)], vec![i(2)], vec![i(3)]]
    );
    assert_eq!(
        rows(
            &mut sql,
            "SELECT name, qty FROM item WHERE price > 1.0 ORDER BY name DESC"
        ),
        vec![vec![s("ink"), i(0)], vec![s("cog"), i(10)]]
    );
    assert_eq!(
        rows(&mut sql, "SELECT name FROM item WHERE id = 1"),
        vec![vec![s("pen")]]
    );
    let found = sql
        .execute_with_params("SELECT qty FROM item WHERE id = $1", [-7i64])
        .unwrap();
    assert_eq!(
        found,
        vec![Payload::Select {
            labels: vec!["qty".to_owned()],
            rows: vec![vec![i(100)]]
        }]
    );

    // One text, parsed once, run with other parameters.
    for (id, name) in [(1i64, "pen"), (3, "cog"), (-7, "nib")] {
        let found = sql
            .execute_with_params("SELECT name FROM item WHERE id = $1", [id])
            .unwrap();
        assert_eq!(
            found,
            vec![Payload::Select {
                labels: vec!["name".to_owned()],
                rows: vec![vec![s(name)]]
            }]
        );
    }

    // UPDATE by primary key (narrowed to the row) and by another column (a scan).
    assert_eq!(
        sql.execute("UPDATE item SET qty = qty - 1 WHERE id = 3")
            .unwrap(),
        vec![Payload::Update(1)]
    );
    assert_eq!(
        sql.execute("UPDATE item SET price = price * 2 WHERE qty >= 5")
            .unwrap(),
        vec![Payload::Update(3)]
    );
    // A primary key term with another that does not hold: nothing changes.
    assert_eq!(
        sql.execute("UPDATE item SET qty = 0 WHERE id = 1 AND name = 'cog'")
            .unwrap(),
        vec![Payload::Update(0)]
    );
    // A key that is not there.
    assert_eq!(
        sql.execute("UPDATE item SET qty = 0 WHERE id = 99")
            .unwrap(),
        vec![Payload::Update(0)]
    );
    assert_eq!(
        rows(&mut sql, "SELECT id, price, qty FROM item ORDER BY id"),
        vec![
            vec![i(-7), Value::F64(0.5), i(100)],
            vec![i(1), Value::F64(2.0), i(5)],
            vec![i(2), Value::F64(4.0), i(0)],
            vec![i(3), Value::F64(5.0), i(9)],
        ]
    );

    assert_eq!(
        sql.execute("DELETE FROM item WHERE id = 2").unwrap(),
        vec![Payload::Delete(1)]
    );
    assert_eq!(
        sql.execute("DELETE FROM item WHERE qty > 50").unwrap(),
        vec![Payload::Delete(1)]
    );
    assert_eq!(
        rows(&mut sql, "SELECT id FROM item"),
        vec![vec![i(1)], vec![i(3)]]
    );
    assert_eq!(
        rows(&mut sql, "SELECT COUNT(*) FROM item"),
        vec![vec![i(2)]]
    );
    close(sql);
}

#[test]
fn transactions_commit_and_roll_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut sql = create(dir.path());
    setup(&mut sql);

    sql.execute("BEGIN").unwrap();
    assert!(sql.storage().in_transaction());
    sql.execute("INSERT INTO item VALUES (10, 'cap', 3.0, 1)")
        .unwrap();
    sql.execute("UPDATE item SET qty = 42 WHERE id = 1")
        .unwrap();
    sql.execute("DELETE FROM item WHERE id = 2").unwrap();
    // The transaction sees its own writes.
    assert_eq!(
        rows(&mut sql, "SELECT id, qty FROM item WHERE id >= 1"),
        vec![vec![i(1), i(42)], vec![i(3), i(10)], vec![i(10), i(1)]]
    );
    sql.execute("ROLLBACK").unwrap();
    assert!(!sql.storage().in_transaction());
    assert_eq!(
        rows(&mut sql, "SELECT id, qty FROM item WHERE id >= 1"),
        vec![vec![i(1), i(5)], vec![i(2), i(0)], vec![i(3), i(10)]]
    );

    sql.execute("BEGIN; INSERT INTO item VALUES (10, 'cap', 3.0, 1); UPDATE item SET qty = 42 WHERE id = 1; COMMIT;")
        .unwrap();
    assert_eq!(
        rows(&mut sql, "SELECT id, qty FROM item WHERE id >= 1"),
        vec![
            vec![i(1), i(42)],
            vec![i(2), i(0)],
            vec![i(3), i(10)],
            vec![i(10), i(1)]
        ]
    );

    // BEGIN inside a transaction is an error; the transaction stays usable.
    sql.execute("BEGIN").unwrap();
    let err = sql.execute("BEGIN").unwrap_err();
    assert!(err.to_string().contains("already open"), "{err}");
    sql.execute("DELETE FROM item WHERE id = 10").unwrap();
    sql.execute("COMMIT").unwrap();
    assert_eq!(
        rows(&mut sql, "SELECT COUNT(*) FROM item"),
        vec![vec![i(4)]]
    );

    // A failing autocommitted statement changes nothing.
    let err = sql
        .execute("INSERT INTO item VALUES (20, 'a', 1.0, 1), (1, 'dup', 1.0, 1)")
        .unwrap_err();
    assert!(
        err.to_string().to_lowercase().contains("duplicate"),
        "{err}"
    );
    assert_eq!(
        rows(&mut sql, "SELECT COUNT(*) FROM item"),
        vec![vec![i(4)]]
    );

    // A rolled-back CREATE TABLE leaves no table.
    sql.execute("BEGIN; CREATE TABLE gone (id INTEGER PRIMARY KEY); INSERT INTO gone VALUES (1);")
        .unwrap();
    sql.execute("ROLLBACK").unwrap();
    assert!(sql.execute("SELECT * FROM gone").is_err());
    sql.execute("CREATE TABLE gone (id INTEGER PRIMARY KEY, v TEXT)")
        .unwrap();
    assert_eq!(
        rows(&mut sql, "SELECT * FROM gone"),
        Vec::<Vec<Value>>::new()
    );
    close(sql);
}

#[test]
fn snapshot_isolation_between_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::create(dir.path().join("sql.store"), options()).unwrap());
    let mut a = Session::new(StitchStorage::new(db.clone()).unwrap());
    let mut b = Session::new(StitchStorage::new(db.clone()).unwrap());
    setup(&mut a);

    a.execute("BEGIN").unwrap();
    b.execute("BEGIN").unwrap();
    a.execute("UPDATE item SET qty = 1 WHERE id = 1").unwrap();
    // b does not see a's uncommitted write, nor its commit (its snapshot is older).
    assert_eq!(
        rows(&mut b, "SELECT qty FROM item WHERE id = 1"),
        vec![vec![i(5)]]
    );
    a.execute("COMMIT").unwrap();
    assert_eq!(
        rows(&mut b, "SELECT qty FROM item WHERE id = 1"),
        vec![vec![i(5)]]
    );
    // Tables without a primary key: two sessions' inserts never reuse each other's keys.
    a.execute("CREATE TABLE notes (body TEXT)").unwrap();
    a.execute("INSERT INTO notes VALUES ('a1')").unwrap();
    let mut c = Session::new(StitchStorage::new(db.clone()).unwrap());
    c.execute("INSERT INTO notes VALUES ('c1'), ('c2')")
        .unwrap();
    a.execute("INSERT INTO notes VALUES ('a2')").unwrap();
    c.execute("INSERT INTO notes VALUES ('c3')").unwrap();
    assert_eq!(
        rows(&mut c, "SELECT body FROM notes"),
        ["a1", "c1", "c2", "a2", "c3"].map(|t| vec![s(t)]).to_vec()
    );
    // b's write of the same row conflicts at commit.
    b.execute("UPDATE item SET qty = 2 WHERE id = 1").unwrap();
    let err = b.execute("COMMIT").unwrap_err();
    assert!(err.to_string().contains("conflict"), "{err}");
    assert_eq!(
        rows(&mut b, "SELECT qty FROM item WHERE id = 1"),
        vec![vec![i(1)]]
    );
}

#[test]
fn reopening_keeps_tables_and_rows() {
    let dir = tempfile::tempdir().unwrap();
    let mut sql = create(dir.path());
    setup(&mut sql);
    sql.execute("CREATE TABLE log (at TIMESTAMP, what TEXT, amount DECIMAL)")
        .unwrap();
    sql.execute(
        "INSERT INTO log VALUES ('2024-01-02 03:04:05', 'first', 1.25), \
         ('2024-01-02 03:04:06', 'second', -3.5)",
    )
    .unwrap();
    sql.execute("CREATE TABLE named (name TEXT PRIMARY KEY, born DATE)")
        .unwrap();
    sql.execute("INSERT INTO named VALUES ('zed', '1990-05-01'), ('amy', '1985-12-31')")
        .unwrap();
    close(sql);

    let mut sql = reopen(dir.path());
    assert_eq!(
        rows(&mut sql, "SELECT id, name FROM item"),
        vec![
            vec![i(-7), s("nib")],
            vec![i(1), s("pen")],
            vec![i(2), s("ink")],
            vec![i(3), s("cog")]
        ]
    );
    assert_eq!(
        rows(&mut sql, "SELECT what FROM log"),
        vec![vec![s("first")], vec![s("second")]]
    );
    assert_eq!(
        rows(&mut sql, "SELECT name FROM named"),
        vec![vec![s("amy")], vec![s("zed")]]
    );
    // Generated keys go on after the reopened table's last.
    sql.execute("INSERT INTO log VALUES ('2024-01-03 00:00:00', 'third', 0)")
        .unwrap();
    assert_eq!(
        rows(&mut sql, "SELECT what FROM log"),
        vec![vec![s("first")], vec![s("second")], vec![s("third")]]
    );
    let tables = sql.storage().db().tables();
    assert!(tables.contains(&"sql.schema".to_owned()), "{tables:?}");
    assert!(tables.contains(&"sql.t.item".to_owned()), "{tables:?}");
    sql.execute("DROP TABLE named").unwrap();
    close(sql);

    let mut sql = reopen(dir.path());
    assert!(sql.execute("SELECT * FROM named").is_err());
    assert_eq!(
        rows(&mut sql, "SELECT COUNT(*) FROM item"),
        vec![vec![i(4)]]
    );
    match sql.execute("SHOW TABLES").unwrap().pop().unwrap() {
        Payload::ShowVariable(v) => assert_eq!(format!("{v:?}"), r#"Tables(["item", "log"])"#),
        other => panic!("{other:?}"),
    }
    close(sql);
}

#[test]
fn layouts_alter_table_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut sql = create(dir.path());
    sql.storage_mut().set_layout(
        "fixed_rows",
        "managed -> btree -> exception -> array(size=19) -> linear",
    );
    sql.execute("CREATE TABLE fixed_rows (id INTEGER PRIMARY KEY, v INTEGER)")
        .unwrap();
    let (table, name) = sql.storage().stitch_table("fixed_rows").unwrap().unwrap();
    assert_eq!(name, "sql.t.fixed_rows");
    let layout = sql.storage().db().table_layout(table).unwrap();
    assert!(layout.contains("array(size=19)"), "{layout}");
    for chunk in 0..20 {
        let values: Vec<String> = (0..500)
            .map(|n| format!("({}, {})", chunk * 500 + n, n * 7))
            .collect();
        sql.execute(format!(
            "INSERT INTO fixed_rows VALUES {}",
            values.join(", ")
        ))
        .unwrap();
    }
    sql.storage().db().flush().unwrap();
    assert_eq!(
        rows(&mut sql, "SELECT v FROM fixed_rows WHERE id = 9999"),
        vec![vec![i(499 * 7)]]
    );
    assert_eq!(
        rows(&mut sql, "SELECT COUNT(*) FROM fixed_rows"),
        vec![vec![i(10_000)]]
    );

    // ALTER TABLE through GlueSQL's generic implementation.
    sql.execute("ALTER TABLE fixed_rows ADD COLUMN note TEXT DEFAULT 'x'")
        .unwrap();
    assert_eq!(
        rows(&mut sql, "SELECT note FROM fixed_rows WHERE id = 3"),
        vec![vec![s("x")]]
    );
    sql.execute("ALTER TABLE fixed_rows RENAME TO renamed")
        .unwrap();
    assert_eq!(
        rows(&mut sql, "SELECT COUNT(*) FROM renamed"),
        vec![vec![i(10_000)]]
    );

    // Errors are GlueSQL errors, not panics.
    for bad in [
        "SELECT * FROM nowhere",
        "INSERT INTO renamed VALUES (1, 2, 'y')",
        "CREATE TABLE m (k MAP PRIMARY KEY)",
        "CREATE INDEX idx ON renamed (v)",
        "UPDATE renamed SET id = 5 WHERE id = 1",
        "SELEC 1",
    ] {
        assert!(sql.execute(bad).is_err(), "{bad}");
    }

    // An invalid layout is reported when the table is created.
    sql.storage_mut().set_layout("bad", "managed -> fixd(8)");
    let err = sql
        .execute("CREATE TABLE bad (id INTEGER PRIMARY KEY)")
        .unwrap_err();
    assert!(err.to_string().contains("fixd"), "{err}");
    close(sql);
}

#[test]
fn update_without_pushdown_scans_and_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let mut sql = create(dir.path());
    setup(&mut sql);
    sql.set_pushdown(false);
    sql.set_parse_cache(false);
    let before = sql.storage().rows_scanned();
    sql.execute("UPDATE item SET qty = 77 WHERE id = 2")
        .unwrap();
    assert_eq!(sql.storage().rows_scanned() - before, 4);
    sql.set_pushdown(true);
    let before = sql.storage().rows_scanned();
    sql.execute("UPDATE item SET qty = qty + 1 WHERE 2 = id")
        .unwrap();
    sql.execute("DELETE FROM item WHERE (id = 3 AND qty > 100)")
        .unwrap();
    assert_eq!(sql.storage().rows_scanned(), before);
    assert_eq!(
        rows(&mut sql, "SELECT COUNT(*) FROM item"),
        vec![vec![i(4)]]
    );
    assert_eq!(
        rows(&mut sql, "SELECT qty FROM item WHERE id = 2"),
        vec![vec![i(78)]]
    );
}

/// One write of the model test.
#[derive(Debug, Clone)]
enum Op {
    Insert(i64, i64),
    Update(i64, i64),
    Delete(i64),
    DeleteAbove(i64),
    Commit,
    Rollback,
    Begin,
}

fn op() -> impl Strategy<Value = Op> {
    let key = -20i64..40;
    prop_oneof![
        6 => (key.clone(), any::<i32>()).prop_map(|(k, v)| Op::Insert(k, i64::from(v))),
        4 => (key.clone(), any::<i32>()).prop_map(|(k, v)| Op::Update(k, i64::from(v))),
        3 => key.clone().prop_map(Op::Delete),
        1 => key.prop_map(Op::DeleteAbove),
        1 => Just(Op::Begin),
        1 => Just(Op::Commit),
        1 => Just(Op::Rollback),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4, ..ProptestConfig::default() })]

    /// Random INSERT/UPDATE/DELETE (inside and outside transactions) against a BTreeMap.
    #[test]
    fn random_writes_match_a_model(ops in proptest::collection::vec(op(), 300)) {
        let dir = tempfile::tempdir().unwrap();
        let mut sql = create(dir.path());
        sql.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER)").unwrap();
        let mut committed: BTreeMap<i64, i64> = BTreeMap::new();
        let mut current = committed.clone();
        let mut in_txn = false;
        for op in ops {
            match op {
                Op::Insert(k, v) => {
                    let r = sql.execute(format!("INSERT INTO t VALUES ({k}, {v})"));
                    match current.entry(k) {
                        std::collections::btree_map::Entry::Occupied(_) => {
                            prop_assert!(r.is_err());
                        }
                        std::collections::btree_map::Entry::Vacant(slot) => {
                            r.unwrap();
                            slot.insert(v);
                        }
                    }
                }
                Op::Update(k, v) => {
                    sql.execute(format!("UPDATE t SET v = {v} WHERE k = {k}")).unwrap();
                    if let Some(old) = current.get_mut(&k) {
                        *old = v;
                    }
                }
                Op::Delete(k) => {
                    sql.execute(format!("DELETE FROM t WHERE k = {k}")).unwrap();
                    current.remove(&k);
                }
                Op::DeleteAbove(k) => {
                    sql.execute(format!("DELETE FROM t WHERE k > {k}")).unwrap();
                    current.retain(|key, _| *key <= k);
                }
                Op::Begin => {
                    if !in_txn {
                        sql.execute("BEGIN").unwrap();
                        in_txn = true;
                    }
                }
                Op::Commit => {
                    sql.execute("COMMIT").unwrap();
                    in_txn = false;
                }
                Op::Rollback => {
                    sql.execute("ROLLBACK").unwrap();
                    if in_txn {
                        current = committed.clone();
                    }
                    in_txn = false;
                }
            }
            if !in_txn {
                committed = current.clone();
            }
            let got: Vec<(i64, i64)> = rows(&mut sql, "SELECT k, v FROM t")
                .into_iter()
                .map(|r| match (&r[0], &r[1]) {
                    (Value::I64(k), Value::I64(v)) => (*k, *v),
                    other => panic!("{other:?}"),
                })
                .collect();
            let want: Vec<(i64, i64)> = current.iter().map(|(k, v)| (*k, *v)).collect();
            prop_assert_eq!(got, want);
        }
        sql.execute("COMMIT").unwrap();
        close(sql);
        let mut sql = reopen(dir.path());
        let count = rows(&mut sql, "SELECT COUNT(*) FROM t");
        prop_assert_eq!(count, vec![vec![i(current.len() as i64)]]);
    }
}
