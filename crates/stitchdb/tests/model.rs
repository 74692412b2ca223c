//! Model test: random operation sequences against a `BTreeMap` per table, with tiny zones and
//! memtables so that checkpoints, merges and reopens happen all the time. Tables made along
//! the way take a random valid layout ([`layout_strategy`]: each holds any key and value the
//! test writes), so every module runs under the same operations as the default VT-tree.
//!
//! STITCHDB_MODEL_CASES sets the number of sequences (default 2000).

#![allow(clippy::unwrap_used)]

mod support;

use proptest::prelude::*;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use stitchdb::{Db, DbIter, Disk, Durability, MemDisk, Options, Stitching, TableId, WriteBatch};
use support::table_contents;

type Model = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;
type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

#[derive(Debug, Clone)]
enum Op {
    Put(usize, u8, Vec<u8>),
    Delete(usize, u8),
    Batch(Vec<(usize, u8, Option<Vec<u8>>)>),
    /// A batch of puts to keys `start..start + n` of a table, in key order, values of `len`
    /// bytes (large enough to be ingested as a run of its own, unless a memtable overlaps),
    /// and a write to another table in the same commit.
    SortedBatch(usize, u8, u8, usize, (usize, u8, Option<Vec<u8>>)),
    /// A batch: a put, then a range delete `[key(a), key(b))`, then optionally a put (which
    /// must survive even inside the range).
    DeleteRange(usize, u8, u8, u8, Option<(u8, Vec<u8>)>),
    Get(usize, u8),
    Scan(usize, u8, u8),
    ScanRev(usize, u8, u8),
    /// Creates a table with this layout.
    CreateTable(String),
    Flush,
    Reopen,
    /// Opens a scan of a table and keeps it, unread, with the contents it must see.
    Snapshot(usize),
    /// Reads the oldest kept scan to the end and compares.
    CheckSnapshot,
}

/// A random valid layout that holds every write of the test (a specialized format or a coding
/// only under `exception`), or the default (empty), or a partition of the keys with such a
/// stack per region. Not `delta-integer`: it refuses values that are not 4 bytes even with
/// `exception` (which comes under it); `layouts.rs` runs random operations over its stacks,
/// and `partitions.rs` over partitions with specialized regions fed only what they hold.
fn layout_strategy() -> impl Strategy<Value = String> {
    // Boundaries among the test's keys (`key`), some between a key and its long form.
    let bound = prop_oneof![
        (1..255u8).prop_map(|k| format!("\"key-{k:04}\"")),
        (1..255u8).prop_map(|k| format!("\"key-{k:04}-\"")),
    ];
    let partition = (
        proptest::collection::btree_set(bound, 1..4),
        proptest::collection::vec(stack_strategy(), 4),
        any::<bool>(),
    )
        .prop_map(|(bounds, stacks, shared)| {
            let at: Vec<String> = bounds.iter().map(|b| format!("at={b}")).collect();
            let regions = match shared {
                true => stacks[0].clone(),
                false => format!("[{}]", stacks[..=bounds.len()].join(" | ")),
            };
            format!("partition({}) -> {regions}", at.join(", "))
        });
    prop_oneof![
        1 => Just(String::new()),
        4 => stack_strategy(),
        2 => partition,
    ]
}

/// A random valid stack for [`layout_strategy`].
fn stack_strategy() -> impl Strategy<Value = String> {
    let filter = prop_oneof![
        Just(""),
        Just("quotient -> "),
        Just("quotient(fp=0.2) -> "),
        Just("bloom(bits=3) -> "),
        Just("bloom -> "),
    ];
    // A tiny cache keeps evicting, so lookups both hit and miss.
    let cache = prop_oneof![Just(""), Just("cache(keys=8) -> "), Just("cache -> ")];
    let btree = prop_oneof![
        Just(""),
        Just("btree -> "),
        Just("btree(node=512) -> "),
        Just("btree(node=1024) -> "),
    ];
    let format = prop_oneof![
        Just("linear".to_string()),
        (1..12u32).prop_map(|s| format!("exception -> fixed({s}) -> linear")),
        (1..12u32).prop_map(|s| format!("exception -> array({s}) -> linear")),
        (1..6u32, 1..40u32)
            .prop_map(|(m, l)| format!("exception -> unique-string(max={m}, len={l}) -> linear")),
        (1..=3u32, prop_oneof![Just("fixed"), Just("array")]).prop_map(|(n, f)| format!(
            "exception -> small-integer(bytes={n}) -> {f}({n}) -> linear"
        )),
        prop_oneof![Just("fixed"), Just("array")]
            .prop_map(|f| format!("exception -> state-dictionary -> {f}(1) -> linear")),
        Just("exception -> empty -> linear".to_string()),
        (1..8u32).prop_map(|w| format!("sliding-window(window={w}) -> linear")),
    ];
    (filter, cache, btree, format)
        .prop_map(|(f, c, b, format)| format!("managed -> {f}{c}{b}{format}"))
}

fn key(k: u8) -> Vec<u8> {
    // A few long keys so blocks hold few entries and runs have many blocks; the others are
    // 8 bytes, as an `array` format keeps them.
    if k % 7 == 0 {
        format!("key-{k:04}-{}", "x".repeat(300)).into_bytes()
    } else {
        format!("key-{k:04}").into_bytes()
    }
}

fn value_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => proptest::collection::vec(any::<u8>(), 0..40),
        // What fixed(8) and array(8) hold, and a few repeated values unique-string keeps.
        3 => proptest::collection::vec(any::<u8>(), 8),
        2 => (0..4u8).prop_map(|v| vec![b'a' + v; 1 + v as usize]),
        // What small-integer, state-dictionary and empty hold.
        2 => prop_oneof![0..300u32, 0..70_000u32].prop_map(|n| n.to_le_bytes().to_vec()),
        1 => prop::sample::select(vec!["CA", "NY", "PR"]).prop_map(|c| c.as_bytes().to_vec()),
        1 => Just(Vec::new()),
        1 => proptest::collection::vec(any::<u8>(), 500..3000),
    ]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        30 => (0..3usize, any::<u8>(), value_strategy()).prop_map(|(t, k, v)| Op::Put(t, k, v)),
        10 => (0..3usize, any::<u8>()).prop_map(|(t, k)| Op::Delete(t, k)),
        8 => proptest::collection::vec((0..3usize, any::<u8>(), proptest::option::of(value_strategy())), 1..8)
            .prop_map(Op::Batch),
        6 => (0..3usize, any::<u8>(), 2..40u8, 50..700usize, (0..3usize, any::<u8>(), proptest::option::of(value_strategy())))
            .prop_map(|(t, start, n, len, other)| Op::SortedBatch(t, start, n, len, other)),
        4 => (0..3usize, any::<u8>(), any::<u8>(), any::<u8>(), proptest::option::of((any::<u8>(), value_strategy())))
            .prop_map(|(t, a, b, before, after)| Op::DeleteRange(t, a.min(b), a.max(b), before, after)),
        15 => (0..3usize, any::<u8>()).prop_map(|(t, k)| Op::Get(t, k)),
        8 => (0..3usize, any::<u8>(), any::<u8>()).prop_map(|(t, a, b)| Op::Scan(t, a.min(b), a.max(b))),
        4 => (0..3usize, any::<u8>(), any::<u8>()).prop_map(|(t, a, b)| Op::ScanRev(t, a.min(b), a.max(b))),
        1 => layout_strategy().prop_map(Op::CreateTable),
        3 => Just(Op::Flush),
        2 => Just(Op::Reopen),
        2 => (0..3usize).prop_map(Op::Snapshot),
        2 => Just(Op::CheckSnapshot),
    ]
}

fn stitching_strategy() -> impl Strategy<Value = Stitching> {
    prop_oneof![
        Just(Stitching::Threshold(0)),
        Just(Stitching::Threshold(4096)),
        Just(Stitching::Threshold(64 * 1024)),
        Just(Stitching::Never),
    ]
}

fn options(stitching: Stitching) -> Options {
    Options {
        stitching,
        zone_size: 64 * 1024,
        memtable_size: 8 * 1024,
        level_runs: 2,
        background: false,
        durability: Durability::Async,
        ingest_min_bytes: 2048,
        ..Options::default()
    }
}

struct Harness {
    disk: Arc<dyn Disk>,
    opts: Options,
    db: Option<Db>,
    model: Model,
    names: Vec<String>,
    /// Open scans (taken before later writes, merges and reopens) and what each must yield.
    snapshots: std::collections::VecDeque<(DbIter, Pairs)>,
}

impl Harness {
    /// A store with the default table and one table of each of `layouts`.
    fn new(stitching: Stitching, layouts: &[String]) -> Harness {
        let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
        let opts = options(stitching);
        let db = Db::create_on(disk.clone(), opts.clone()).unwrap();
        let mut model = Model::new();
        model.insert("default".into(), BTreeMap::new());
        let names = vec!["default".into()];
        let mut h = Harness {
            disk,
            opts,
            db: Some(db),
            model,
            names,
            snapshots: Default::default(),
        };
        for layout in layouts {
            h.apply(&Op::CreateTable(layout.clone()));
        }
        h
    }

    fn db(&self) -> &Db {
        self.db.as_ref().unwrap()
    }

    fn table(&self, t: usize) -> (String, TableId) {
        let name = self.names[t % self.names.len()].clone();
        let id = self.db().table(&name).unwrap();
        (name, id)
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Put(t, k, v) => {
                let (name, id) = self.table(*t);
                self.db().put(id, key(*k), v).unwrap();
                self.model
                    .get_mut(&name)
                    .unwrap()
                    .insert(key(*k), v.clone());
            }
            Op::Delete(t, k) => {
                let (name, id) = self.table(*t);
                self.db().delete(id, key(*k)).unwrap();
                self.model.get_mut(&name).unwrap().remove(&key(*k));
            }
            Op::Batch(ops) => {
                let mut batch = WriteBatch::new();
                for (t, k, v) in ops {
                    let (name, id) = self.table(*t);
                    let m = self.model.get_mut(&name).unwrap();
                    match v {
                        Some(v) => {
                            batch.put(id, key(*k), v.clone());
                            m.insert(key(*k), v.clone());
                        }
                        None => {
                            batch.delete(id, key(*k));
                            m.remove(&key(*k));
                        }
                    }
                }
                self.db().write(&batch, Durability::Ordered).unwrap();
            }
            Op::SortedBatch(t, start, n, len, (other_t, other_k, other_v)) => {
                let (name, id) = self.table(*t);
                let mut batch = WriteBatch::new();
                let end = start.saturating_add(*n);
                for k in *start..end {
                    let v: Vec<u8> = (0..*len).map(|i| (i as u8) ^ k ^ (*len as u8)).collect();
                    batch.put(id, key(k), v.clone());
                    self.model.get_mut(&name).unwrap().insert(key(k), v);
                }
                let (other_name, other_id) = self.table(*other_t);
                let m = self.model.get_mut(&other_name).unwrap();
                match other_v {
                    Some(v) => {
                        batch.put(other_id, key(*other_k), v.clone());
                        m.insert(key(*other_k), v.clone());
                    }
                    None => {
                        batch.delete(other_id, key(*other_k));
                        m.remove(&key(*other_k));
                    }
                }
                self.db().write(&batch, Durability::Ordered).unwrap();
            }
            Op::DeleteRange(t, a, b, before, after) => {
                let (name, id) = self.table(*t);
                let m = self.model.get_mut(&name).unwrap();
                let mut batch = WriteBatch::new();
                batch.put(id, key(*before), b"before".to_vec());
                m.insert(key(*before), b"before".to_vec());
                batch.delete_range(id, key(*a), key(*b));
                m.retain(|k, _| !(key(*a) <= *k && *k < key(*b)));
                if let Some((k, v)) = after {
                    batch.put(id, key(*k), v.clone());
                    m.insert(key(*k), v.clone());
                }
                self.db().write(&batch, Durability::Ordered).unwrap();
            }
            Op::Get(t, k) => {
                let (name, id) = self.table(*t);
                assert_eq!(
                    self.db().get(id, key(*k)).unwrap().as_ref(),
                    self.model[&name].get(&key(*k))
                );
            }
            Op::Scan(t, a, b) => {
                let (name, id) = self.table(*t);
                let (lo, hi) = (key(*a), key(*b));
                let got: Vec<_> = self
                    .db()
                    .range(id, Bound::Included(&lo), Bound::Excluded(&hi))
                    .unwrap()
                    .map(|r| r.unwrap())
                    .collect();
                let want: Vec<_> = self.model[&name]
                    .range::<Vec<u8>, _>((Bound::Included(&lo), Bound::Excluded(&hi)))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(got, want);
            }
            Op::ScanRev(t, a, b) => {
                // The other bound kinds: start excluded, end included.
                let (name, id) = self.table(*t);
                let (lo, hi) = (key(*a), key(*b));
                let got: Vec<_> = self
                    .db()
                    .range_rev(id, Bound::Excluded(&lo), Bound::Included(&hi))
                    .unwrap()
                    .map(|r| r.unwrap())
                    .collect();
                let want: Vec<_> = self.model[&name]
                    .range::<Vec<u8>, _>((Bound::Excluded(&lo), Bound::Included(&hi)))
                    .rev()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(got, want, "reverse scan");
            }
            Op::CreateTable(layout) => {
                let name = format!("t{}", self.names.len());
                self.db().create_table_with_layout(&name, layout).unwrap();
                self.model.insert(name.clone(), BTreeMap::new());
                self.names.push(name);
            }
            Op::Flush => self.db().flush().unwrap(),
            Op::Reopen => {
                // Scans belong to the handle being closed: check them first.
                while !self.snapshots.is_empty() {
                    self.apply(&Op::CheckSnapshot);
                }
                self.db.take().unwrap().close().unwrap();
                self.db = Some(Db::open_on(self.disk.clone(), self.opts.clone()).unwrap());
            }
            Op::Snapshot(t) => {
                let (name, id) = self.table(*t);
                let scan = self.db().scan_prefix(id, b"").unwrap();
                let want = self.model[&name]
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                self.snapshots.push_back((scan, want));
            }
            Op::CheckSnapshot => {
                if let Some((scan, want)) = self.snapshots.pop_front() {
                    let got: Vec<_> = scan.map(|r| r.unwrap()).collect();
                    assert_eq!(
                        got, want,
                        "a scan must see the store as it was when it began"
                    );
                }
            }
        }
    }

    fn verify_all(&mut self) {
        while !self.snapshots.is_empty() {
            self.apply(&Op::CheckSnapshot);
        }
        assert_eq!(
            self.db().tables(),
            self.model.keys().cloned().collect::<Vec<_>>()
        );
        for (name, m) in &self.model {
            let id = self.db().table(name).unwrap();
            let got: Vec<_> = self
                .db()
                .scan_prefix(id, b"")
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            let want: Vec<_> = m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            assert_eq!(got, want, "table {name}");
        }
        self.db().check().unwrap();
    }
}

fn cases() -> u32 {
    support::env_count("STITCHDB_MODEL_CASES", 2000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn store_matches_a_btreemap(
        stitching in stitching_strategy(),
        layouts in proptest::collection::vec(layout_strategy(), 2),
        ops in proptest::collection::vec(op_strategy(), 1..120),
    ) {
        let mut h = Harness::new(stitching, &layouts);
        for op in &ops {
            h.apply(op);
        }
        h.verify_all();
        h.apply(&Op::Reopen);
        h.verify_all();
    }
}

#[test]
fn large_sorted_batches_are_ingested_beside_ordinary_writes() {
    // Ingested batches, ordinary writes into their ranges (newer, in front of the runs),
    // flushes, merges and reopens (recovery adopting ingested runs from the log).
    let mut h = Harness::new(Stitching::Threshold(0), &[]);
    let mut ingested = 0;
    let mut seen = 0;
    for round in 0..90u8 {
        let t = usize::from(round % 3);
        let start = round.wrapping_mul(37);
        let other = (usize::from(round % 2), round, Some(vec![round; 10]));
        h.apply(&Op::SortedBatch(t, start, 24, 300, other));
        let now = h.db().stats().ingested_runs;
        ingested += now - seen;
        seen = now;
        h.apply(&Op::Put(t, start.wrapping_add(3), vec![round; 20]));
        h.apply(&Op::Delete(t, start.wrapping_add(4)));
        if round % 7 == 3 {
            h.apply(&Op::Flush);
        }
        if round % 11 == 5 {
            h.apply(&Op::Reopen);
            seen = 0;
        }
        if round % 5 == 0 {
            h.verify_all();
        }
    }
    h.verify_all();
    h.apply(&Op::Reopen);
    h.verify_all();
    assert!(
        ingested >= 30,
        "only {ingested} of 90 sorted batches were ingested"
    );
}

#[test]
fn a_sorted_batch_over_keys_the_memtable_holds_is_ingested_but_for_those_keys() {
    // Random writes leave keys all over the range in the memtable; a large sorted batch over
    // that range is still ingested, its keys the memtable held going through the memtable (in
    // front of their older versions) and the rest into the run. Past an eighth held, the
    // batch is written the ordinary way. Every value read is the newest, before and after a
    // reopen (replay adopts the run and the held keys from the one record).
    let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    let opts = Options {
        memtable_size: 1 << 20,
        ..options(Stitching::Threshold(0))
    };
    let mut db = Db::create_on(disk.clone(), opts.clone()).unwrap();
    let t = db.default_table();
    let key = |i: u32| format!("k{i:05}").into_bytes();
    let mut model = BTreeMap::new();
    for (round, held) in [(0u32, 3u32), (1, 5), (2, 40)] {
        for j in 0..held {
            let (k, v) = (key((j * 7919 + round) % 256), vec![1; 30]);
            db.put(t, &k, &v).unwrap();
            model.insert(k, v);
        }
        let before = db.stats().ingested_runs;
        let mut b = WriteBatch::new();
        for i in 0..256 {
            let v = vec![round as u8 + 2; 100];
            b.put(t, key(i), v.clone());
            model.insert(key(i), v);
        }
        db.write(&b, Durability::Async).unwrap();
        let ingested = db.stats().ingested_runs - before;
        // 3 or 5 held keys (8 after the first round) of 256 leave the run most of the batch;
        // 40 (over 32) do not.
        assert_eq!(
            ingested,
            u64::from(held < 32),
            "round {round}: {held} keys held"
        );
        for (k, v) in &model {
            assert_eq!(db.get(t, k).unwrap().as_ref(), Some(v), "round {round}");
        }
        let scanned: Vec<_> = db
            .scan_prefix(t, b"k")
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(scanned, model.clone().into_iter().collect::<Vec<_>>());
    }
    drop(db);
    db = Db::open_on(disk, opts).unwrap();
    let scanned: Vec<_> = db
        .scan_prefix(t, b"k")
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(scanned, model.into_iter().collect::<Vec<_>>());
    db.check().unwrap();
}

#[test]
fn ingested_runs_are_read_while_the_background_writes_them() {
    // Sorted batches are ingested (their runs installed before their blocks reach the disk)
    // while readers scan and look keys up, merges stitch the runs and Ordered flushes write
    // them; every read sees whole batches, in order, with intact values.
    let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    let opts = Options {
        background: true,
        ingest_min_bytes: 2048,
        ..options(Stitching::Threshold(0))
    };
    let db = Arc::new(Db::create_on(disk.clone(), opts.clone()).unwrap());
    let t = db.default_table();
    let value = |batch: u32, key: u32| (batch ^ key).to_le_bytes().repeat(128);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut reads = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let pairs: Vec<_> = db
                        .scan_prefix(t, b"k")
                        .unwrap()
                        .map(|r| r.unwrap())
                        .collect();
                    // Batches are written in key order: any snapshot is a gap-free prefix of
                    // whole batches of 8 keys, each value the batch's.
                    assert_eq!(pairs.len() % 8, 0, "reader {r}: a batch seen in part");
                    for (i, (k, v)) in pairs.iter().enumerate() {
                        let i = i as u32;
                        assert_eq!(k, &format!("k{i:06}").into_bytes());
                        assert_eq!(v, &value(i / 8, i), "reader {r}: key {i}");
                    }
                    if let Some(last) = pairs.len().checked_sub(1) {
                        let k = format!("k{:06}", last / 2).into_bytes();
                        assert!(db.get(t, &k).unwrap().is_some());
                    }
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    let mut model = BTreeMap::new();
    for batch in 0..1500u32 {
        let mut b = WriteBatch::new();
        for key in batch * 8..batch * 8 + 8 {
            let (k, v) = (format!("k{key:06}").into_bytes(), value(batch, key));
            b.put(t, k.clone(), v.clone());
            model.insert(k, v);
        }
        db.write(&b, Durability::Ordered).unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    assert!(
        db.stats().ingested_runs > 1000,
        "{:?}",
        db.stats().ingested_runs
    );
    let got: BTreeMap<_, _> = db
        .scan_prefix(t, b"")
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert!(got == model);
    db.check().unwrap();
    Arc::try_unwrap(db).ok().unwrap().close().unwrap();
    let db = Db::open_on(disk, opts).unwrap();
    let got: BTreeMap<_, _> = db
        .scan_prefix(t, b"")
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert!(got == model);
    db.check().unwrap();
}

#[test]
fn background_thread_model() {
    // The same model with the background thread doing checkpoints and Ordered flushes, and
    // concurrent readers scanning while the writer goes on.
    let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    let opts = Options {
        background: true,
        ..options(Stitching::default())
    };
    let db = Arc::new(Db::create_on(disk.clone(), opts.clone()).unwrap());
    let t = db.default_table();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut scans = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // Keys are written in order, so any snapshot is a prefix: sorted and gap-free.
                let keys: Vec<_> = db
                    .scan_prefix(t, b"k")
                    .unwrap()
                    .map(|r| r.unwrap().0)
                    .collect();
                for (i, k) in keys.iter().enumerate() {
                    assert_eq!(k, &format!("k{i:06}").into_bytes());
                }
                scans += 1;
            }
            scans
        })
    };
    let mut model = BTreeMap::new();
    for i in 0..20_000u32 {
        let k = format!("k{i:06}").into_bytes();
        let v = i.to_le_bytes().repeat(1 + (i % 16) as usize);
        let mut b = WriteBatch::new();
        b.put(t, k.clone(), v.clone());
        let durability =
            [Durability::Async, Durability::Ordered, Durability::Sync][(i % 3) as usize];
        db.write(&b, durability).unwrap();
        model.insert(k, v);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
    let db = Arc::try_unwrap(db).ok().unwrap();
    assert!(
        db.stats().checkpoints > 1,
        "memtables were written out in the background"
    );
    db.close().unwrap();
    let db = Db::open_on(disk, opts).unwrap();
    assert_eq!(table_contents(&db, t), model);
    db.check().unwrap();
}

#[test]
fn background_merges_install_while_checkpoints_write() {
    // Random overwrites and deletes with the background threads on: merges finish and
    // install while checkpoints write memtables out (they share only the manifest lock), and
    // tables are created along the way. The store must equal the model, before and after a
    // reopen, and the ids handed out must stay distinct.
    use rand::{Rng, SeedableRng};
    let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    let opts = Options {
        background: true,
        ..options(Stitching::default())
    };
    let db = Db::create_on(disk.clone(), opts.clone()).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let mut tables = vec![(db.default_table(), BTreeMap::new())];
    for i in 0..30_000u32 {
        if i % 5_000 == 4_999 {
            let id = db.create_table(&format!("t{i}")).unwrap();
            assert!(
                tables.iter().all(|(t, _)| *t != id),
                "table id {id:?} reused"
            );
            tables.push((id, BTreeMap::new()));
        }
        let (t, model) = {
            let n = tables.len();
            &mut tables[rng.gen_range(0..n)]
        };
        let k = format!("k{:05}", rng.gen_range(0..3_000u32)).into_bytes();
        let mut b = WriteBatch::new();
        if rng.gen_bool(0.2) {
            b.delete(*t, k.clone());
            model.remove(&k);
        } else {
            let v = i.to_le_bytes().repeat(1 + (i % 24) as usize);
            b.put(*t, k.clone(), v.clone());
            model.insert(k, v);
        }
        db.write(&b, Durability::Async).unwrap();
    }
    type Tables = [(TableId, BTreeMap<Vec<u8>, Vec<u8>>)];
    let check = |db: &Db, tables: &Tables| {
        for (t, model) in tables {
            assert_eq!(&table_contents(db, *t), model, "table {t:?}");
        }
        db.check().unwrap();
    };
    check(&db, &tables);
    let stats = db.stats();
    assert!(stats.checkpoints > 10 && stats.merges > 10, "{stats:?}");
    db.close().unwrap();
    let db = Db::open_on(disk, opts).unwrap();
    check(&db, &tables);
    let id = db.create_table("after reopen").unwrap();
    assert!(
        tables.iter().all(|(t, _)| *t != id),
        "table id {id:?} reused"
    );
}

#[test]
fn two_compaction_threads_merge_side_by_side() {
    // Random writes to two tables with both compaction threads on and small memtables. A
    // merge claims every level it carries into, so one table's merges run one at a time; the
    // other table's run beside them on the second thread. Every table must equal its model,
    // before and after a reopen, and the blocks must pass `check`.
    use rand::{Rng, SeedableRng};
    let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    let opts = Options {
        background: true,
        compaction_threads: 2,
        ..options(Stitching::default())
    };
    let db = Db::create_on(disk.clone(), opts.clone()).unwrap();
    let tables = [db.default_table(), db.create_table("second").unwrap()];
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    let mut models = [BTreeMap::new(), BTreeMap::new()];
    let mut i = 0u32;
    // Until merges have overlapped a few times (bounded: they do within a few rounds).
    while db.stats().merges_alongside < 20 {
        assert!(
            i < 2_000_000,
            "merges never ran side by side: {:?}",
            db.stats()
        );
        for _ in 0..20_000 {
            let which = rng.gen_range(0..2);
            let (t, model) = (tables[which], &mut models[which]);
            let k = format!("k{:06}", rng.gen_range(0..50_000u32)).into_bytes();
            let mut b = WriteBatch::new();
            if rng.gen_bool(0.1) {
                b.delete(t, k.clone());
                model.remove(&k);
            } else {
                let v = i.to_le_bytes().repeat(1 + (i % 24) as usize);
                b.put(t, k.clone(), v.clone());
                model.insert(k, v);
            }
            db.write(&b, Durability::Async).unwrap();
            i += 1;
        }
    }
    let check = |db: &Db| {
        for (t, model) in tables.iter().zip(&models) {
            assert_eq!(&table_contents(db, *t), model);
            for (k, v) in model.iter().step_by(97) {
                assert_eq!(db.get(*t, k).unwrap().as_ref(), Some(v));
            }
        }
        db.check().unwrap();
    };
    check(&db);
    db.close().unwrap();
    let db = Db::open_on(disk, opts).unwrap();
    check(&db);
}

#[test]
fn long_sequences_checkpoint_merge_and_reopen() {
    // Long runs through the same harness at each end of the stitching continuum, to show the
    // model test reaches the machinery: many checkpoints, merges (stitching or copying),
    // scans held across merges, reopens with a non-empty log.
    use proptest::strategy::ValueTree;
    for stitching in [
        Stitching::Threshold(0),
        Stitching::Threshold(4096),
        Stitching::Never,
    ] {
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let ops = proptest::collection::vec(op_strategy(), 5000)
            .new_tree(&mut runner)
            .unwrap()
            .current();
        let mut h = Harness::new(stitching, &[]);
        let (mut checkpoints, mut merges, mut stitched, mut copied) = (0, 0, 0, 0);
        let mut tally = |s: stitchdb::Stats| {
            checkpoints += s.checkpoints;
            merges += s.merges;
            stitched += s.merge_stitched_bytes;
            copied += s.merge_copied_bytes;
        };
        for op in &ops {
            if matches!(op, Op::Reopen) {
                tally(h.db().stats());
            }
            h.apply(op);
        }
        h.verify_all();
        tally(h.db().stats());
        assert!(
            checkpoints > 100,
            "{stitching:?}: {checkpoints} checkpoints"
        );
        assert!(merges > 20, "{stitching:?}: {merges} merges");
        match stitching {
            Stitching::Never => assert_eq!(stitched, 0, "never stitch"),
            _ => assert!(
                stitched > 0,
                "{stitching:?}: nothing was stitched ({copied} copied)"
            ),
        }
    }
}

#[test]
fn merges_larger_than_the_flush_interval_write_behind_and_reopen() {
    // A run being built is made durable every 8 MiB, on a helper thread when the background
    // threads are on, while the builder goes on. A merge copying 24 MiB (stitching off) has
    // such flushes in flight one after another; its run must read back whole, before and
    // after a reopen.
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    let opts = Options {
        background: true,
        memtable_size: 4 << 20,
        stitching: Stitching::Never,
        durability: Durability::Async,
        ..Options::default()
    };
    let db = Db::create_on(disk.clone(), opts.clone()).unwrap();
    let t = db.default_table();
    let mut keys: Vec<u32> = (0..24_000).collect();
    keys.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(5));
    let mut model = BTreeMap::new();
    for (i, k) in keys.iter().enumerate() {
        let (k, v) = (format!("k{k:06}").into_bytes(), vec![i as u8; 1024]);
        let mut b = WriteBatch::new();
        b.put(t, k.clone(), v.clone());
        db.write(&b, Durability::Async).unwrap();
        model.insert(k, v);
    }
    db.compact().unwrap();
    let copied = db.stats().merge_copied_bytes;
    assert!(copied >= 24 << 20, "merges copied {copied} bytes");
    assert_eq!(table_contents(&db, t), model);
    db.check().unwrap();
    db.close().unwrap();
    let db = Db::open_on(disk, opts).unwrap();
    assert_eq!(table_contents(&db, t), model);
    db.check().unwrap();
}

#[test]
fn versions_of_a_key_straddling_two_blocks_are_not_stitched_back_to_life() {
    // An open scan makes the flush keep both versions of key 251 (its old empty value and the
    // sorted batch's), which land at the end of one block and the start of the next. After a
    // reopen, a delete and a flush, the bottom merge dropped the delete and the newer version
    // and then stitched the next block whole, bringing the old value back (found by
    // store_matches_a_btreemap; the block going on with the filtered key is copied now).
    let mut h = Harness::new(Stitching::Threshold(0), &[]);
    for op in [
        Op::Put(0, 251, vec![]),
        Op::Snapshot(0),
        Op::SortedBatch(0, 236, 16, 466, (0, 0, None)),
        Op::Reopen,
        Op::Delete(0, 251),
        Op::Flush,
    ] {
        h.apply(&op);
    }
    h.verify_all();
}
