//! Commit observers: a mirror of every table kept only from what observers are told equals
//! the store after every operation of every kind (with reported spans re-read), the two calls
//! of a commit alternate strictly, failed commits and merges report nothing, and a dropped
//! guard stops the calls.

#![allow(clippy::unwrap_used)]

mod support;

use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use stitchdb::{
    Commit, CommitObserver, Db, Durability, Error, Isolation, MemDisk, Options, TableId, WriteBatch,
};
use support::table_contents;

type Table = BTreeMap<Vec<u8>, Vec<u8>>;

/// What the mirror was told, kept for the test thread to check and complete.
#[derive(Default)]
struct Told {
    tables: BTreeMap<TableId, Table>,
    /// Spans to re-read from the store (inclusive bounds).
    stale: Vec<(TableId, Vec<u8>, Vec<u8>)>,
    /// The commit told as committing and not yet as committed.
    pending: Option<u64>,
    last_seq: u64,
    commits: u64,
    /// Broken promises, reported by the test thread (an observer must not panic).
    violations: Vec<String>,
}

#[derive(Default)]
struct Mirror(Mutex<Told>);

impl CommitObserver for Mirror {
    fn committing(&self, commit: &Commit<'_>) {
        let mut t = self.0.lock();
        if let Some(p) = t.pending {
            t.violations
                .push(format!("{} committing before {p} committed", commit.seq()));
        }
        if commit.seq() <= t.last_seq {
            let msg = format!("seq {} after {}", commit.seq(), t.last_seq);
            t.violations.push(msg);
        }
        t.pending = Some(commit.seq());
        for (table, start, end) in commit.range_deletes() {
            let keys: Vec<Vec<u8>> = t
                .tables
                .entry(table)
                .or_default()
                .range::<[u8], _>((Bound::Included(start), Bound::Excluded(end)))
                .map(|(k, _)| k.clone())
                .collect();
            let table = t.tables.entry(table).or_default();
            for k in keys {
                table.remove(&k);
            }
        }
        for (table, key, value) in commit.writes() {
            let table = t.tables.entry(table).or_default();
            match value {
                Some(v) => table.insert(key.to_vec(), v.to_vec()),
                None => table.remove(key),
            };
        }
        for span in commit.spans() {
            t.stale
                .push((span.table, span.lo.to_vec(), span.hi.to_vec()));
        }
    }

    fn committed(&self, seq: u64) {
        let mut t = self.0.lock();
        if t.pending != Some(seq) {
            let msg = format!("{seq} committed, {:?} committing", t.pending);
            t.violations.push(msg);
        }
        t.pending = None;
        t.last_seq = seq;
        t.commits += 1;
    }
}

impl Mirror {
    fn commits(&self) -> u64 {
        self.0.lock().commits
    }

    /// Re-reads the reported spans, then checks the mirror against the store.
    fn check(&self, db: &Db, tables: &[TableId], what: &str) {
        let mut t = self.0.lock();
        assert!(t.violations.is_empty(), "{what}: {:?}", t.violations);
        assert_eq!(t.pending, None, "{what}");
        for (table, lo, hi) in std::mem::take(&mut t.stale) {
            let bounds = (Bound::Included(&lo[..]), Bound::Included(&hi[..]));
            let mirror = t.tables.entry(table).or_default();
            let old: Vec<Vec<u8>> = mirror
                .range::<[u8], _>(bounds)
                .map(|(k, _)| k.clone())
                .collect();
            for k in old {
                mirror.remove(&k);
            }
            for pair in db.range(table, bounds.0, bounds.1).unwrap() {
                let (k, v) = pair.unwrap();
                mirror.insert(k, v);
            }
        }
        for table in tables {
            let mirror = t.tables.get(table).cloned().unwrap_or_default();
            assert_eq!(
                mirror,
                table_contents(db, *table),
                "{what}: table {table:?}"
            );
        }
    }
}

fn options() -> Options {
    Options {
        zone_size: 256 * 1024,
        memtable_size: 32 * 1024,
        txn_memory: 16 * 1024,
        ingest_min_bytes: 2048,
        background: false,
        ..Options::default()
    }
}

fn key(rng: &mut impl Rng) -> Vec<u8> {
    format!("k{:04}", rng.gen_range(0..400)).into_bytes()
}

fn value(rng: &mut impl Rng) -> Vec<u8> {
    let len = rng.gen_range(0..120);
    (0..len).map(|_| rng.gen()).collect()
}

fn range(rng: &mut impl Rng) -> (Vec<u8>, Vec<u8>) {
    let start = rng.gen_range(0..400);
    let end = start + rng.gen_range(0..30);
    (
        format!("k{start:04}").into_bytes(),
        format!("k{end:04}").into_bytes(),
    )
}

/// Random point writes, deletes and range deletes, in a transaction or a batch.
fn random_ops(rng: &mut impl Rng, tables: &[TableId], n: usize, mut each: impl FnMut(Op)) {
    for _ in 0..n {
        let t = tables[rng.gen_range(0..tables.len())];
        each(match rng.gen_range(0..10) {
            0..=5 => Op::Put(t, key(rng), value(rng)),
            6..=8 => Op::Delete(t, key(rng)),
            _ => {
                let (s, e) = range(rng);
                Op::DeleteRange(t, s, e)
            }
        });
    }
}

enum Op {
    Put(TableId, Vec<u8>, Vec<u8>),
    Delete(TableId, Vec<u8>),
    DeleteRange(TableId, Vec<u8>, Vec<u8>),
}

fn apply_txn(txn: &mut stitchdb::Transaction<'_>, op: Op) {
    match op {
        Op::Put(t, k, v) => txn.put(t, k, v).unwrap(),
        Op::Delete(t, k) => txn.delete(t, k).unwrap(),
        Op::DeleteRange(t, s, e) => txn.delete_range(t, s, e).unwrap(),
    }
}

const ISOLATIONS: [Isolation; 3] = [
    Isolation::Snapshot,
    Isolation::Serializable,
    Isolation::Locking,
];

/// One random operation of any kind; returns what it was, for messages.
fn step(db: &Db, rng: &mut ChaCha8Rng, tables: &[TableId], mirror: &Mirror) -> &'static str {
    let t = tables[rng.gen_range(0..tables.len())];
    match rng.gen_range(0..100) {
        0..=19 => {
            db.put(t, key(rng), value(rng)).unwrap();
            "put"
        }
        20..=29 => {
            db.delete(t, key(rng)).unwrap();
            "delete"
        }
        30..=34 => {
            let (s, e) = range(rng);
            db.delete_range(t, s, e).unwrap();
            "delete_range"
        }
        35..=49 => {
            let mut b = WriteBatch::new();
            let n = rng.gen_range(1..20);
            random_ops(rng, tables, n, |op| match op {
                Op::Put(t, k, v) => b.put(t, k, v),
                Op::Delete(t, k) => b.delete(t, k),
                Op::DeleteRange(t, s, e) => b.delete_range(t, s, e),
            });
            db.write(&b, Durability::Async).unwrap();
            "batch"
        }
        50..=79 => {
            let isolation = ISOLATIONS[rng.gen_range(0..3)];
            let mut txn = db.begin(isolation).unwrap();
            let n = rng.gen_range(0..15);
            random_ops(rng, tables, n, |op| apply_txn(&mut txn, op));
            // A savepoint whose writes are undone reports nothing of them.
            let mut nested = txn.begin_nested();
            nested.put(t, key(rng), value(rng)).unwrap();
            if rng.gen_bool(0.5) {
                nested.commit();
            } else {
                nested.abort();
            }
            txn.commit().unwrap();
            "transaction"
        }
        80..=87 => {
            // A conflicting commit reports nothing.
            let mut loser = db.begin(Isolation::Snapshot).unwrap();
            let k = key(rng);
            loser.put(t, &k, b"loser").unwrap();
            db.put(t, &k, b"winner").unwrap();
            let before = mirror.commits();
            let failed = loser.commit();
            assert!(matches!(failed, Err(Error::Conflict { .. })), "{failed:?}");
            assert_eq!(mirror.commits(), before, "a failed commit was reported");
            "conflict"
        }
        88..=93 => {
            // Enough to spill several times: committed by linking its runs.
            let mut txn = db.begin(ISOLATIONS[rng.gen_range(0..3)]).unwrap();
            random_ops(rng, tables, 400, |op| apply_txn(&mut txn, op));
            txn.commit().unwrap();
            "spilled transaction"
        }
        94..=97 => {
            // A long sorted stretch of puts to one table: ingested as a run.
            let mut b = WriteBatch::new();
            // Mostly past the keys the other operations write, so the memtables hold few.
            let start = rng.gen_range(0..1000);
            for i in start..start + 100 {
                let k = format!("k{i:04}").into_bytes();
                b.put(t, k, vec![rng.gen::<u8>(); 100]);
            }
            db.write_owned(b, Durability::Async).unwrap();
            "ingest"
        }
        _ => {
            // Flushes and merges change no contents: nothing to report.
            let before = mirror.commits();
            db.flush().unwrap();
            db.compact().unwrap();
            assert_eq!(mirror.commits(), before, "a flush or merge was reported");
            "flush"
        }
    }
}

#[test]
fn a_mirror_of_what_observers_hear_equals_the_store() {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap();
    let tables = [db.default_table(), db.create_table("second").unwrap()];
    let mirror = Arc::new(Mirror::default());
    let _guard = db.observe_commits(mirror.clone());
    let mut rng = ChaCha8Rng::seed_from_u64(support::env_count("OBSERVER_SEED", 7));
    let steps = support::env_count("OBSERVER_STEPS", 400);
    for i in 0..steps {
        let what = step(&db, &mut rng, &tables, &mirror);
        mirror.check(&db, &tables, &format!("step {i} ({what})"));
    }
    let stats = db.stats();
    assert!(stats.linked_commits > 0, "no transaction spilled");
    assert!(stats.ingested_runs > 0, "nothing was ingested");
}

#[derive(Default)]
struct Counter(Mutex<(u64, u64)>);

impl CommitObserver for Counter {
    fn committing(&self, _: &Commit<'_>) {
        self.0.lock().0 += 1;
    }

    fn committed(&self, _: u64) {
        self.0.lock().1 += 1;
    }
}

#[test]
fn dropping_the_guard_stops_the_calls() {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap();
    let t = db.default_table();
    let (a, b) = (Arc::new(Counter::default()), Arc::new(Counter::default()));
    let guard_a = db.observe_commits(a.clone());
    let guard_b = db.observe_commits(b.clone());
    db.put(t, b"x", b"1").unwrap();
    drop(guard_a);
    db.put(t, b"x", b"2").unwrap();
    assert_eq!(*a.0.lock(), (1, 1));
    assert_eq!(*b.0.lock(), (2, 2));
    // An empty transaction commits nothing.
    db.begin(Isolation::Snapshot).unwrap().commit().unwrap();
    assert_eq!(*b.0.lock(), (2, 2));
    drop(guard_b);
    db.put(t, b"x", b"3").unwrap();
    assert_eq!(*b.0.lock(), (2, 2));
}

#[test]
fn a_guard_outliving_its_store_does_nothing() {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap();
    let guard = db.observe_commits(Arc::new(Counter::default()));
    db.close().unwrap();
    drop(guard);
}
