//! Interleaved transactions against a model: each model transaction holds a copy of the
//! committed `BTreeMap` taken at begin, its own writes and (serializable, or read for
//! update) what it read; a
//! commit is accepted by the model's own reading of the rules (first committer wins on
//! writes; for serializable also on keys read and ranges scanned). Every read the store
//! answers, every commit verdict and the final contents must agree with the model, while
//! plain writes, flushes and merges run in between.
//!
//! Locking transactions read the newest commits and hold locks, which the model keeps too:
//! with a lock timeout of zero, a request that would wait fails at once, so the model
//! predicts every `LockTimeout` (of a locking transaction's step, a plain write, or an
//! optimistic commit that must lock what it writes), and checks that no commit ever changes
//! what an open locking transaction holds a lock on.
//!
//! Each schedule runs on a table of one of `support::LAYOUTS`, by seed, so every module
//! serves the same transactions.
//!
//! `STITCHDB_TXN_MODEL_CASES` sets the number of schedules (default 1000).

#![allow(clippy::unwrap_used)]

mod support;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use stitchdb::{Db, Error, Isolation, MemDisk, Options, TableId, Transaction};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;
/// A key and what the transaction's own writes held for it before (`None`: nothing).
type Undo = (Vec<u8>, Option<Option<Vec<u8>>>);

/// A lock as the model keeps it: the keys in `[lo, hi)` (a key `k` alone is `[k, k\0)`).
#[derive(Debug, Clone)]
struct Lock {
    lo: Vec<u8>,
    hi: Vec<u8>,
    exclusive: bool,
}

impl Lock {
    fn key(k: &[u8], exclusive: bool) -> Lock {
        let mut hi = k.to_vec();
        hi.push(0);
        Lock {
            lo: k.to_vec(),
            hi,
            exclusive,
        }
    }

    fn range(lo: &[u8], hi: &[u8], exclusive: bool) -> Lock {
        Lock {
            lo: lo.to_vec(),
            hi: hi.to_vec(),
            exclusive,
        }
    }

    fn conflicts(&self, other: &Lock) -> bool {
        (self.exclusive || other.exclusive) && self.lo < other.hi && other.lo < self.hi
    }
}

/// Whether an open locking transaction other than `me` holds a lock `want` conflicts with.
fn blocked(open: &[(Transaction, ModelTxn)], me: Option<usize>, want: &Lock) -> bool {
    open.iter()
        .enumerate()
        .filter(|(j, _)| Some(*j) != me)
        .any(|(_, (_, m))| m.locks.iter().any(|l| l.conflicts(want)))
}

struct ModelTxn {
    iso: Isolation,
    /// Locking only: the locks held.
    locks: Vec<Lock>,
    /// Every key written and range deleted, as one span: what an optimistic commit that
    /// spilled may lock (its runs' key spans).
    span: Option<(Vec<u8>, Vec<u8>)>,
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
    /// What reads see beneath the transaction's own writes: its snapshot, or for a locking
    /// transaction the newest commits.
    fn base<'a>(&'a self, committed: &'a Map) -> &'a Map {
        match self.iso {
            Isolation::Locking => committed,
            _ => &self.snapshot,
        }
    }

    fn get(&self, k: &[u8], committed: &Map) -> Option<Vec<u8>> {
        match self.writes.get(k) {
            Some(v) => v.clone(),
            None if self.range_deleted(k) => None,
            None => self.base(committed).get(k).cloned(),
        }
    }

    fn range_deleted(&self, k: &[u8]) -> bool {
        self.range_deletes
            .iter()
            .any(|(lo, hi)| lo.as_slice() <= k && k < hi.as_slice())
    }

    fn range(&self, lo: &[u8], hi: &[u8], committed: &Map) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut m = self.base(committed).clone();
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

    fn widen(&mut self, lo: &[u8], hi: &[u8]) {
        let (a, b) = self.span.get_or_insert_with(|| (lo.to_vec(), hi.to_vec()));
        if lo < a.as_slice() {
            *a = lo.to_vec();
        }
        if hi > b.as_slice() {
            *b = hi.to_vec();
        }
    }

    /// The locks this transaction's commit needs: exclusive on every key and range it writes.
    fn commit_locks(&self) -> Vec<Lock> {
        let keys = self.writes.keys().map(|k| Lock::key(k, true));
        let ranges = self
            .range_deletes
            .iter()
            .map(|(lo, hi)| Lock::range(lo, hi, true));
        keys.chain(ranges).collect()
    }

    fn write(&mut self, k: Vec<u8>, v: Option<Vec<u8>>) {
        let end = Lock::key(&k, true).hi;
        self.widen(&k, &end);
        let before = self.writes.insert(k.clone(), v);
        self.log.push((k, before));
    }

    fn delete_range(&mut self, lo: Vec<u8>, hi: Vec<u8>) {
        self.widen(&lo, &hi);
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
        // Keys read under serializable, or for update; ranges scanned under serializable.
        if txn.reads.iter().any(changed) {
            return false;
        }
        !txn.ranges.iter().any(|(lo, hi)| range_changed(lo, hi))
    }
}

/// A key of `space`: few keys make conflicts likely, many make large write sets.
fn key(rng: &mut ChaCha8Rng, space: u32) -> Vec<u8> {
    format!("k{:03}", rng.gen_range(0..space)).into_bytes()
}

/// What the store answered to a request the model says `waits` (for another's lock, so with
/// a lock timeout of zero it must be refused at once): the result if granted, `None` if
/// refused; anything else fails the test.
fn granted<T>(answer: stitchdb::Result<T>, waits: bool, what: &str, ctx: &str) -> Option<T> {
    match answer {
        Ok(v) => {
            assert!(!waits, "{ctx}: {what} under another's lock");
            Some(v)
        }
        Err(Error::LockTimeout { .. }) if waits => None,
        Err(e) => panic!("{ctx}: {what}: {e}"),
    }
}

/// Makes `writes` in `txn` and its model; whether a lock refused one (then the rest are not
/// made). `others`: the locks other transactions hold.
fn write_all(
    txn: &mut Transaction,
    m: &mut ModelTxn,
    t: TableId,
    writes: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    others: &[Lock],
    ctx: &str,
) -> bool {
    let locking = m.iso == Isolation::Locking;
    for (k, v) in writes {
        let want = Lock::key(&k, true);
        let waits = locking && others.iter().any(|l| l.conflicts(&want));
        let wrote = match &v {
            Some(v) => txn.put(t, &k, v),
            None => txn.delete(t, &k),
        };
        if granted(wrote, waits, "a write", ctx).is_none() {
            return true;
        }
        if locking {
            m.locks.push(want);
        }
        m.write(k, v);
    }
    false
}

/// Runs one schedule; returns the transactions committed with writes, those refused by a
/// conflict, and the lock requests refused.
fn run(seed: u64) -> (u64, u64, u64) {
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
        // A request that would wait fails at once: the model predicts each.
        lock_timeout: std::time::Duration::ZERO,
        ..Options::default()
    };
    let space = if rng.gen_bool(0.75) { 24 } else { 120 };
    let db = Db::create_on(Arc::new(MemDisk::new(0)), opts).unwrap();
    let layout = support::LAYOUTS[seed as usize % support::LAYOUTS.len()];
    let t: TableId = support::layout_table(&db, layout);
    let mut model = Model {
        committed: Map::new(),
        last_write: BTreeMap::new(),
        range_writes: Vec::new(),
        commits: 0,
    };
    // Open transactions: the store's and the model's, with savepoint marks (nested
    // transactions are exercised through `begin_nested` in one step, below).
    let mut open: Vec<(Transaction, ModelTxn)> = Vec::new();
    let (mut commits, mut conflicts, mut refusals) = (0, 0, 0);
    for step in 0..250 {
        let ctx = || format!("seed {seed} layout \"{layout}\" step {step}");
        match rng.gen_range(0..100) {
            0..=9 if open.len() < 4 => {
                let iso = match rng.gen_range(0..3) {
                    0 => Isolation::Snapshot,
                    1 => Isolation::Serializable,
                    _ => Isolation::Locking,
                };
                let txn = db.begin(iso).unwrap();
                let m = ModelTxn {
                    iso,
                    locks: Vec::new(),
                    span: None,
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
                // A plain write: a commit of its own (locking what it writes while a locking
                // transaction is open).
                let (k, v) = (key(&mut rng, space), format!("p{step}").into_bytes());
                let waits = blocked(&open, None, &Lock::key(&k, true));
                match granted(db.put(t, &k, &v), waits, "a plain write", &ctx()) {
                    Some(()) => model.apply(&[], &BTreeMap::from([(k, Some(v))])),
                    None => refusals += 1,
                }
            }
            15..=16 => db.flush().unwrap(),
            17 => db.compact().unwrap(),
            _ if open.is_empty() => {}
            18..=39 => {
                let i = rng.gen_range(0..open.len());
                let k = key(&mut rng, space);
                let for_update = rng.gen_bool(0.3);
                let m = &open[i].1;
                // Own writes and range deletes answer without a lock.
                let want = (m.iso == Isolation::Locking
                    && !m.writes.contains_key(&k)
                    && !m.range_deleted(&k))
                .then(|| Lock::key(&k, for_update));
                let waits = want.as_ref().is_some_and(|l| blocked(&open, Some(i), l));
                let (txn, m) = &mut open[i];
                let read = match for_update {
                    true => txn.get_for_update(t, &k),
                    false => txn.get(t, &k),
                };
                let Some(got) = granted(read, waits, "a read", &ctx()) else {
                    refusals += 1;
                    open.swap_remove(i);
                    continue;
                };
                assert_eq!(got, m.get(&k, &model.committed), "{}", ctx());
                m.locks.extend(want);
                let validated = m.iso == Isolation::Serializable
                    || (for_update && m.iso == Isolation::Snapshot);
                if validated && !m.writes.contains_key(&k) {
                    m.reads.push(k);
                }
            }
            40..=49 => {
                let i = rng.gen_range(0..open.len());
                let (a, b) = (key(&mut rng, space), key(&mut rng, space));
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                let want = (open[i].1.iso == Isolation::Locking && lo < hi)
                    .then(|| Lock::range(&lo, &hi, false));
                let waits = want.as_ref().is_some_and(|l| blocked(&open, Some(i), l));
                let (txn, m) = &mut open[i];
                let scan = txn.range(t, Bound::Included(&lo), Bound::Excluded(&hi));
                let Some(scan) = granted(scan, waits, "a scan", &ctx()) else {
                    refusals += 1;
                    open.swap_remove(i);
                    continue;
                };
                let got: Vec<_> = scan.map(Result::unwrap).collect();
                assert_eq!(got, m.range(&lo, &hi, &model.committed), "{}", ctx());
                m.locks.extend(want);
                if m.iso == Isolation::Serializable {
                    m.ranges.push((lo, hi));
                }
            }
            92..=94 => {
                let i = rng.gen_range(0..open.len());
                let (a, b) = (key(&mut rng, space), key(&mut rng, space));
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                let want = (open[i].1.iso == Isolation::Locking && lo < hi)
                    .then(|| Lock::range(&lo, &hi, true));
                let waits = want.as_ref().is_some_and(|l| blocked(&open, Some(i), l));
                let (txn, m) = &mut open[i];
                let deleted = txn.delete_range(t, &lo, &hi);
                if granted(deleted, waits, "a range delete", &ctx()).is_none() {
                    refusals += 1;
                    open.swap_remove(i);
                    continue;
                }
                m.locks.extend(want);
                if lo < hi {
                    m.delete_range(lo, hi);
                }
            }
            n @ 50..=77 => {
                // Writes: alone, or a nested transaction of a few, committed or aborted.
                let i = rng.gen_range(0..open.len());
                let nested = n >= 70;
                let writes: Vec<(Vec<u8>, Option<Vec<u8>>)> = (0..rng.gen_range(1..4))
                    .take(if nested { 3 } else { 1 })
                    .map(|_| {
                        let k = key(&mut rng, space);
                        let v = rng.gen_bool(0.8).then(|| format!("t{step}").into_bytes());
                        (k, v)
                    })
                    .collect();
                let commit_child = rng.gen_bool(0.5);
                let others: Vec<Lock> = open
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .flat_map(|(_, (_, m))| m.locks.iter().cloned())
                    .collect();
                let (txn, m) = &mut open[i];
                let ctx = ctx();
                let failed = if nested {
                    let mark = m.log.len();
                    let mut child = txn.begin_nested();
                    let failed = write_all(&mut child, m, t, writes, &others, &ctx);
                    if commit_child && !failed {
                        child.commit();
                    } else {
                        child.abort();
                        m.rollback(mark);
                    }
                    failed
                } else {
                    write_all(txn, m, t, writes, &others, &ctx)
                };
                if failed {
                    refusals += 1;
                    open.swap_remove(i);
                }
            }
            78..=91 => {
                let i = rng.gen_range(0..open.len());
                let (txn, m) = open.swap_remove(i);
                let writes_nothing = m.writes.is_empty() && m.range_deletes.is_empty();
                let committed = txn.commit();
                if m.iso == Isolation::Locking {
                    committed.unwrap_or_else(|e| panic!("{}: {e}", ctx()));
                    let needs = m.commit_locks();
                    assert!(
                        !needs.iter().any(|l| blocked(&open, None, l)),
                        "{}: a locking commit under another's lock",
                        ctx()
                    );
                    if !writes_nothing {
                        model.apply(&m.range_deletes, &m.writes);
                        commits += 1;
                    }
                    continue;
                }
                // An optimistic commit locks what it writes while a locking transaction is
                // open; one that spilled locks its runs' key spans, which lie within `span`.
                let waits =
                    !writes_nothing && m.commit_locks().iter().any(|l| blocked(&open, None, l));
                let may_wait = !writes_nothing
                    && m.span
                        .as_ref()
                        .is_some_and(|(lo, hi)| blocked(&open, None, &Lock::range(lo, hi, true)));
                let accepted = writes_nothing || model.accepts(&m);
                match committed {
                    Ok(()) => {
                        assert!(!waits, "{}: a commit under another's lock", ctx());
                        assert!(accepted, "{}: the model refuses this commit", ctx());
                        if !writes_nothing {
                            model.apply(&m.range_deletes, &m.writes);
                            commits += 1;
                        }
                    }
                    Err(Error::Conflict { .. }) => {
                        assert!(!waits, "{}: a conflict instead of a lock wait", ctx());
                        assert!(!accepted, "{}: a conflict the model does not see", ctx());
                        conflicts += 1;
                    }
                    Err(Error::LockTimeout { .. }) if may_wait => refusals += 1,
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
    assert_eq!(
        got, model.committed,
        "seed {seed} layout \"{layout}\": final contents"
    );
    (commits, conflicts, refusals)
}

#[test]
fn interleaved_transactions_match_the_model() {
    let cases: u64 = std::env::var("STITCHDB_TXN_MODEL_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let (mut commits, mut conflicts, mut refusals) = (0, 0, 0);
    for seed in 0..cases {
        let (c, f, r) = run(seed);
        commits += c;
        conflicts += f;
        refusals += r;
    }
    eprintln!(
        "{cases} schedules: {commits} commits with writes, {conflicts} conflicts, \
         {refusals} lock requests refused"
    );
    // The schedules must have exercised every verdict many times over.
    assert!(
        commits > cases * 5 && conflicts > cases / 2 && refusals > cases / 2,
        "{commits} {conflicts} {refusals}"
    );
}
