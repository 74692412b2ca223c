//! Interleaved transactions against a model: each model transaction holds a copy of the
//! committed `BTreeMap` taken at begin, its own writes and (serializable) what it read; a
//! commit is accepted by the model's own reading of the rules (first committer wins on
//! writes; for serializable also on keys read and ranges scanned). Every read the store
//! answers, every commit verdict and the final contents must agree with the model, while
//! plain writes, flushes and merges run in between.
//!
//! `STITCHDB_TXN_MODEL_CASES` sets the number of schedules (default 1000).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use stitchdb::{Db, Error, Isolation, MemDisk, Options, TableId, Transaction};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;
/// A key and what the transaction's own writes held for it before (`None`: nothing).
type Undo = (Vec<u8>, Option<Option<Vec<u8>>>);

struct ModelTxn {
    iso: Isolation,
    start: u64,
    snapshot: Map,
    /// Own writes, with a stack of savepoints (the length of `log` at each).
    writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    log: Vec<Undo>,
    reads: Vec<Vec<u8>>,
    ranges: Vec<(Vec<u8>, Vec<u8>)>,
    /// Private range deletes (with `log` marks, as writes).
    range_deletes: Vec<(Vec<u8>, Vec<u8>)>,
}

impl ModelTxn {
    fn get(&self, k: &[u8]) -> Option<Vec<u8>> {
        match self.writes.get(k) {
            Some(v) => v.clone(),
            None if self.range_deleted(k) => None,
            None => self.snapshot.get(k).cloned(),
        }
    }

    fn range_deleted(&self, k: &[u8]) -> bool {
        self.range_deletes
            .iter()
            .any(|(lo, hi)| lo.as_slice() <= k && k < hi.as_slice())
    }

    fn range(&self, lo: &[u8], hi: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut m = self.snapshot.clone();
        m.retain(|k, _| !self.range_deleted(k));
        for (k, v) in &self.writes {
            match v {
                Some(v) => m.insert(k.clone(), v.clone()),
                None => m.remove(k),
            };
        }
        m.range(lo.to_vec()..hi.to_vec())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    fn write(&mut self, k: Vec<u8>, v: Option<Vec<u8>>) {
        let before = self.writes.insert(k.clone(), v);
        self.log.push((k, before));
    }

    fn delete_range(&mut self, lo: Vec<u8>, hi: Vec<u8>) {
        let doomed: Vec<_> = self
            .writes
            .range(lo.clone()..hi.clone())
            .map(|(k, _)| k.clone())
            .collect();
        for k in doomed {
            let before = self.writes.remove(&k);
            self.log.push((k, Some(before.unwrap())));
        }
        self.range_deletes.push((lo, hi));
        // An empty key marks a range delete in the log.
        self.log.push((Vec::new(), None));
    }

    fn rollback(&mut self, mark: usize) {
        while self.log.len() > mark {
            let (k, before) = self.log.pop().unwrap();
            if k.is_empty() {
                self.range_deletes.pop();
                continue;
            }
            match before {
                Some(v) => self.writes.insert(k, v),
                None => self.writes.remove(&k),
            };
        }
    }
}

struct Model {
    committed: Map,
    /// Commit number of each key's last write.
    last_write: BTreeMap<Vec<u8>, u64>,
    /// Committed range deletes, with their commit numbers.
    range_writes: Vec<(Vec<u8>, Vec<u8>, u64)>,
    commits: u64,
}

impl Model {
    fn apply(
        &mut self,
        ranges: &[(Vec<u8>, Vec<u8>)],
        writes: &BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    ) {
        self.commits += 1;
        for (lo, hi) in ranges {
            self.committed.retain(|k, _| !(lo <= k && k < hi));
            self.range_writes
                .push((lo.clone(), hi.clone(), self.commits));
        }
        for (k, v) in writes {
            match v {
                Some(v) => self.committed.insert(k.clone(), v.clone()),
                None => self.committed.remove(k),
            };
            self.last_write.insert(k.clone(), self.commits);
        }
    }

    fn accepts(&self, txn: &ModelTxn) -> bool {
        let changed = |k: &Vec<u8>| {
            self.last_write.get(k).is_some_and(|&c| c > txn.start)
                || self
                    .range_writes
                    .iter()
                    .any(|(lo, hi, c)| *c > txn.start && lo <= k && k < hi)
        };
        let range_changed = |lo: &Vec<u8>, hi: &Vec<u8>| {
            self.last_write
                .range(lo.clone()..hi.clone())
                .any(|(_, &c)| c > txn.start)
                || self
                    .range_writes
                    .iter()
                    .any(|(a, b, c)| *c > txn.start && a < hi && lo < b)
        };
        if txn.writes.keys().any(changed) {
            return false;
        }
        if txn
            .range_deletes
            .iter()
            .any(|(lo, hi)| range_changed(lo, hi))
        {
            return false;
        }
        if txn.iso == Isolation::Serializable {
            if txn.reads.iter().any(changed) {
                return false;
            }
            if txn.ranges.iter().any(|(lo, hi)| range_changed(lo, hi)) {
                return false;
            }
        }
        true
    }
}

/// A key of `space`: few keys make conflicts likely, many make large write sets.
fn key(rng: &mut ChaCha8Rng, space: u32) -> Vec<u8> {
    format!("k{:03}", rng.gen_range(0..space)).into_bytes()
}

/// Runs one schedule; returns the transactions committed with writes and those refused.
fn run(seed: u64) -> (u64, u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let opts = Options {
        zone_size: 64 * 1024,
        memtable_size: 4096 + rng.gen_range(0..8192),
        // Often small enough that transactions spill to private runs and commit by linking.
        txn_memory: if rng.gen_bool(0.5) {
            rng.gen_range(100..600)
        } else {
            64 << 20
        },
        background: false,
        ..Options::default()
    };
    let space = if rng.gen_bool(0.75) { 24 } else { 120 };
    let db = Db::create_on(Arc::new(MemDisk::new(0)), opts).unwrap();
    let t: TableId = db.default_table();
    let mut model = Model {
        committed: Map::new(),
        last_write: BTreeMap::new(),
        range_writes: Vec::new(),
        commits: 0,
    };
    // Open transactions: the store's and the model's, with savepoint marks (nested
    // transactions are exercised through `begin_nested` in one step, below).
    let mut open: Vec<(Transaction, ModelTxn)> = Vec::new();
    let (mut commits, mut conflicts) = (0, 0);
    for step in 0..250 {
        let ctx = || format!("seed {seed} step {step}");
        match rng.gen_range(0..100) {
            0..=9 if open.len() < 4 => {
                let iso = if rng.gen_bool(0.5) {
                    Isolation::Snapshot
                } else {
                    Isolation::Serializable
                };
                let txn = db.begin(iso).unwrap();
                let m = ModelTxn {
                    iso,
                    start: model.commits,
                    snapshot: model.committed.clone(),
                    writes: BTreeMap::new(),
                    log: Vec::new(),
                    reads: Vec::new(),
                    ranges: Vec::new(),
                    range_deletes: Vec::new(),
                };
                open.push((txn, m));
            }
            10..=14 => {
                // A plain write: a commit of its own.
                let (k, v) = (key(&mut rng, space), format!("p{step}").into_bytes());
                db.put(t, &k, &v).unwrap();
                model.apply(&[], &BTreeMap::from([(k, Some(v))]));
            }
            15..=16 => db.flush().unwrap(),
            17 => db.compact().unwrap(),
            _ if open.is_empty() => {}
            18..=39 => {
                let i = rng.gen_range(0..open.len());
                let (txn, m) = &mut open[i];
                let k = key(&mut rng, space);
                assert_eq!(txn.get(t, &k).unwrap(), m.get(&k), "{}", ctx());
                if m.iso == Isolation::Serializable && !m.writes.contains_key(&k) {
                    m.reads.push(k);
                }
            }
            40..=49 => {
                let i = rng.gen_range(0..open.len());
                let (txn, m) = &mut open[i];
                let (a, b) = (key(&mut rng, space), key(&mut rng, space));
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                let got: Vec<_> = txn
                    .range(t, Bound::Included(&lo), Bound::Excluded(&hi))
                    .unwrap()
                    .map(Result::unwrap)
                    .collect();
                assert_eq!(got, m.range(&lo, &hi), "{}", ctx());
                if m.iso == Isolation::Serializable {
                    m.ranges.push((lo, hi));
                }
            }
            92..=94 => {
                let i = rng.gen_range(0..open.len());
                let (txn, m) = &mut open[i];
                let (a, b) = (key(&mut rng, space), key(&mut rng, space));
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                txn.delete_range(t, &lo, &hi).unwrap();
                if lo < hi {
                    m.delete_range(lo, hi);
                }
            }
            50..=69 => {
                let i = rng.gen_range(0..open.len());
                let (txn, m) = &mut open[i];
                let k = key(&mut rng, space);
                if rng.gen_bool(0.8) {
                    let v = format!("t{step}").into_bytes();
                    txn.put(t, &k, &v).unwrap();
                    m.write(k, Some(v));
                } else {
                    txn.delete(t, &k).unwrap();
                    m.write(k, None);
                }
            }
            70..=77 => {
                // A nested transaction of a few writes, committed or aborted.
                let i = rng.gen_range(0..open.len());
                let (txn, m) = &mut open[i];
                let mark = m.log.len();
                let mut child = txn.begin_nested();
                for _ in 0..rng.gen_range(1..4) {
                    let (k, v) = (key(&mut rng, space), format!("n{step}").into_bytes());
                    child.put(t, &k, &v).unwrap();
                    m.write(k, Some(v));
                }
                if rng.gen_bool(0.5) {
                    child.commit();
                } else {
                    child.abort();
                    m.rollback(mark);
                }
            }
            78..=91 => {
                let i = rng.gen_range(0..open.len());
                let (txn, m) = open.swap_remove(i);
                let writes_nothing = m.writes.is_empty() && m.range_deletes.is_empty();
                let accepted = writes_nothing || model.accepts(&m);
                match txn.commit() {
                    Ok(()) => {
                        assert!(accepted, "{}: the model refuses this commit", ctx());
                        if !writes_nothing {
                            model.apply(&m.range_deletes, &m.writes);
                            commits += 1;
                        }
                    }
                    Err(Error::Conflict { .. }) => {
                        assert!(!accepted, "{}: a conflict the model does not see", ctx());
                        conflicts += 1;
                    }
                    Err(e) => panic!("{}: {e}", ctx()),
                }
            }
            _ => {
                let i = rng.gen_range(0..open.len());
                open.swap_remove(i).0.abort();
            }
        }
    }
    drop(open);
    let got: Map = db
        .range(t, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(got, model.committed, "seed {seed}: final contents");
    (commits, conflicts)
}

#[test]
fn interleaved_transactions_match_the_model() {
    let cases: u64 = std::env::var("STITCHDB_TXN_MODEL_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let (mut commits, mut conflicts) = (0, 0);
    for seed in 0..cases {
        let (c, f) = run(seed);
        commits += c;
        conflicts += f;
    }
    eprintln!("{cases} schedules: {commits} commits with writes, {conflicts} conflicts");
    // The schedules must have exercised both verdicts many times over.
    assert!(
        commits > cases * 5 && conflicts > cases,
        "{commits} {conflicts}"
    );
}
