//! Model test: random operation sequences against a `BTreeMap` per table, with tiny zones and
//! memtables so that checkpoints, merges and reopens happen all the time.
//!
//! STITCHDB_MODEL_CASES sets the number of sequences (default 1000).

use proptest::prelude::*;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use stitchdb::{Db, Disk, Durability, MemDisk, Options, TableId, WriteBatch};

type Model = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

#[derive(Debug, Clone)]
enum Op {
    Put(usize, u8, Vec<u8>),
    Delete(usize, u8),
    Batch(Vec<(usize, u8, Option<Vec<u8>>)>),
    Get(usize, u8),
    Scan(usize, u8, u8),
    CreateTable,
    Flush,
    Reopen,
}

fn key(k: u8) -> Vec<u8> {
    // A few long keys so blocks hold few entries and runs have many blocks.
    if k % 7 == 0 {
        format!("key-{k:03}-{}", "x".repeat(300)).into_bytes()
    } else {
        format!("key-{k:03}").into_bytes()
    }
}

fn value_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => proptest::collection::vec(any::<u8>(), 0..40),
        1 => proptest::collection::vec(any::<u8>(), 500..3000),
    ]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        30 => (0..3usize, any::<u8>(), value_strategy()).prop_map(|(t, k, v)| Op::Put(t, k, v)),
        10 => (0..3usize, any::<u8>()).prop_map(|(t, k)| Op::Delete(t, k)),
        8 => proptest::collection::vec((0..3usize, any::<u8>(), proptest::option::of(value_strategy())), 1..8)
            .prop_map(Op::Batch),
        15 => (0..3usize, any::<u8>()).prop_map(|(t, k)| Op::Get(t, k)),
        8 => (0..3usize, any::<u8>(), any::<u8>()).prop_map(|(t, a, b)| Op::Scan(t, a.min(b), a.max(b))),
        1 => Just(Op::CreateTable),
        3 => Just(Op::Flush),
        2 => Just(Op::Reopen),
    ]
}

fn options() -> Options {
    Options {
        zone_size: 64 * 1024,
        memtable_size: 8 * 1024,
        max_runs: 3,
        background: false,
        durability: Durability::Async,
        ..Options::default()
    }
}

struct Harness {
    disk: Arc<dyn Disk>,
    db: Option<Db>,
    model: Model,
    names: Vec<String>,
}

impl Harness {
    fn new() -> Harness {
        let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
        let db = Db::create_on(disk.clone(), options()).unwrap();
        let mut model = Model::new();
        model.insert("default".into(), BTreeMap::new());
        Harness {
            disk,
            db: Some(db),
            model,
            names: vec!["default".into()],
        }
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
            Op::CreateTable => {
                let name = format!("t{}", self.names.len());
                self.db().create_table(&name).unwrap();
                self.model.insert(name.clone(), BTreeMap::new());
                self.names.push(name);
            }
            Op::Flush => self.db().flush().unwrap(),
            Op::Reopen => {
                self.db.take().unwrap().close().unwrap();
                self.db = Some(Db::open_on(self.disk.clone(), options()).unwrap());
            }
        }
    }

    fn verify_all(&self) {
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
    std::env::var("STITCHDB_MODEL_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn store_matches_a_btreemap(ops in proptest::collection::vec(op_strategy(), 1..120)) {
        let mut h = Harness::new();
        for op in &ops {
            h.apply(op);
        }
        h.verify_all();
        h.apply(&Op::Reopen);
        h.verify_all();
    }
}

#[test]
fn background_thread_model() {
    // The same model with the background thread doing checkpoints and Ordered flushes, and
    // concurrent readers scanning while the writer goes on.
    let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    let opts = Options {
        background: true,
        ..options()
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
    let got: BTreeMap<_, _> = db
        .scan_prefix(t, b"")
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(got, model);
    db.check().unwrap();
}

#[test]
fn long_sequences_checkpoint_merge_and_reopen() {
    // One long run through the same harness, to show the model test reaches the interesting
    // machinery: many checkpoints, merges of runs, reopens with a non-empty log.
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let ops = proptest::collection::vec(op_strategy(), 5000)
        .new_tree(&mut runner)
        .unwrap()
        .current();
    let mut h = Harness::new();
    let (mut checkpoints, mut merges) = (0, 0);
    for op in &ops {
        if matches!(op, Op::Reopen) {
            let s = h.db().stats();
            checkpoints += s.checkpoints;
            merges += s.merges;
        }
        h.apply(op);
    }
    h.verify_all();
    let s = h.db().stats();
    checkpoints += s.checkpoints;
    merges += s.merges;
    assert!(checkpoints > 100, "{checkpoints} checkpoints");
    assert!(merges > 20, "{merges} merges");
}
