//! The model target: operations decoded from the input run against a [`Db`] on the simulated
//! disk and against a `BTreeMap`, comparing every read. Zones and memtables are tiny, so
//! checkpoints and merges happen every few operations; reopens and crashes (the simulated
//! disk's power loss: unsynced writes dropped or torn at sectors) are operations too.
//!
//! What a crash may keep: every write is `Async` (durable at the next sync, never out of
//! order) or `Sync` (durable when it returns), so the store reopened after a crash must hold
//! the contents after some commit between the last sync and the newest commit.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use stitchdb::{Db, Durability, Options, SimConfig, SimDisk, Stitching, TableId, WriteBatch};

type Contents = BTreeMap<Vec<u8>, Vec<u8>>;

/// Operations after which the rest of an input is ignored, so every input runs in bounded time.
const MAX_OPS: usize = 300;

/// Runs the operations `data` spells against a fresh store and the model; panics on the first
/// disagreement, or on any error from the store (the simulated disk injects none).
pub fn model(data: &[u8]) {
    let mut input = Input(data);
    let stitching = match input.byte() % 3 {
        0 => Stitching::Never,
        1 => Stitching::Threshold(0),
        _ => Stitching::Threshold(4096),
    };
    let mut harness = Harness::new(stitching);
    for _ in 0..MAX_OPS {
        if input.is_empty() {
            break;
        }
        harness.apply(&mut input);
    }
    harness.verify_all();
}

/// The input, read a byte at a time; zeros once it is used up.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let Some((&first, rest)) = self.0.split_first() else {
            return 0;
        };
        self.0 = rest;
        first
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// A key: one of 256, a few long ones so blocks hold few entries.
    fn key(&mut self) -> Vec<u8> {
        let k = self.byte();
        if k % 7 == 0 {
            format!("key-{k:03}-{}", "x".repeat(300)).into_bytes()
        } else {
            format!("key-{k:03}").into_bytes()
        }
    }

    /// A value: mostly short, sometimes longer than a block.
    fn value(&mut self) -> Vec<u8> {
        let (len, fill) = (self.byte(), self.byte());
        let len = if len >= 240 {
            500 + usize::from(len - 240) * 200
        } else {
            usize::from(len) / 4
        };
        vec![fill; len]
    }
}

struct Harness {
    disk: Arc<SimDisk>,
    opts: Options,
    db: Option<Db>,
    /// The contents after every commit.
    model: Contents,
    /// The contents after each commit since the last sync, oldest first, starting with the
    /// contents at that sync: what a crash may leave.
    since_sync: Vec<Contents>,
}

impl Harness {
    fn new(stitching: Stitching) -> Harness {
        let disk = Arc::new(SimDisk::new(SimConfig {
            seed: 0,
            len: 0,
            capacity: None,
        }));
        let opts = Options {
            stitching,
            zone_size: 64 * 1024,
            memtable_size: 8 * 1024,
            level_runs: 2,
            background: false,
            durability: Durability::Async,
            ..Options::default()
        };
        let db = Db::create_on(disk.clone(), opts.clone()).expect("create a store");
        Harness {
            disk,
            opts,
            db: Some(db),
            model: Contents::new(),
            since_sync: vec![Contents::new()],
        }
    }

    fn db(&self) -> &Db {
        self.db.as_ref().expect("the store is open")
    }

    fn table(&self) -> TableId {
        self.db().default_table()
    }

    /// Records a commit the model has applied, made with `durability`.
    fn committed(&mut self, durability: Durability) {
        if durability == Durability::Sync {
            self.synced();
        } else {
            self.since_sync.push(self.model.clone());
        }
    }

    /// Everything committed is durable.
    fn synced(&mut self) {
        self.since_sync = vec![self.model.clone()];
    }

    fn apply(&mut self, input: &mut Input) {
        match input.byte() % 12 {
            0 | 1 => {
                let (key, value) = (input.key(), input.value());
                let durability = if input.byte() % 8 == 0 {
                    Durability::Sync
                } else {
                    Durability::Async
                };
                let mut batch = WriteBatch::new();
                batch.put(self.table(), key.clone(), value.clone());
                self.db().write(&batch, durability).expect("put");
                self.model.insert(key, value);
                self.committed(durability);
            }
            2 => {
                let key = input.key();
                self.db().delete(self.table(), &key).expect("delete");
                self.model.remove(&key);
                self.committed(Durability::Async);
            }
            3 => {
                let (start, end) = ordered(input.key(), input.key());
                self.db()
                    .delete_range(self.table(), &start, &end)
                    .expect("delete a range");
                self.model.retain(|k, _| !(start <= *k && *k < end));
                self.committed(Durability::Async);
            }
            4 => {
                // A batch of puts and deletes, all or nothing.
                let mut batch = WriteBatch::new();
                for _ in 0..=input.byte() % 4 {
                    let key = input.key();
                    if input.byte() % 3 == 0 {
                        batch.delete(self.table(), key.clone());
                        self.model.remove(&key);
                    } else {
                        let value = input.value();
                        batch.put(self.table(), key.clone(), value.clone());
                        self.model.insert(key, value);
                    }
                }
                self.db()
                    .write(&batch, Durability::Async)
                    .expect("write a batch");
                self.committed(Durability::Async);
            }
            5 | 6 => {
                let key = input.key();
                let got = self.db().get(self.table(), &key).expect("get");
                assert_eq!(got.as_ref(), self.model.get(&key), "get {key:?}");
            }
            7 => {
                let (lo, hi) = ordered(input.key(), input.key());
                let got: Vec<_> = self
                    .db()
                    .range(self.table(), Bound::Included(&lo), Bound::Excluded(&hi))
                    .expect("scan")
                    .map(|item| item.expect("scan item"))
                    .collect();
                let want: Vec<_> = self
                    .model
                    .range::<Vec<u8>, _>((Bound::Included(&lo), Bound::Excluded(&hi)))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(got, want, "scan [{lo:?}, {hi:?})");
            }
            8 => {
                let (lo, hi) = ordered(input.key(), input.key());
                let got: Vec<_> = self
                    .db()
                    .range_rev(self.table(), Bound::Excluded(&lo), Bound::Included(&hi))
                    .expect("reverse scan")
                    .map(|item| item.expect("reverse scan item"))
                    .collect();
                let want: Vec<_> = self
                    .model
                    .range::<Vec<u8>, _>((Bound::Excluded(&lo), Bound::Included(&hi)))
                    .rev()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(got, want, "reverse scan ({lo:?}, {hi:?}]");
            }
            9 => {
                if input.byte() % 2 == 0 {
                    self.db().flush().expect("checkpoint");
                } else {
                    self.db().sync().expect("sync");
                    self.synced();
                }
            }
            10 => {
                self.db.take().expect("open").close().expect("close");
                self.db = Some(Db::open_on(self.disk.clone(), self.opts.clone()).expect("reopen"));
                self.synced();
                self.check_contents("after a reopen");
            }
            _ => self.crash(u64::from(input.byte())),
        }
    }

    /// Power loss now: reopens the store on what the disk could hold, which must be the
    /// contents after one of the commits since the last sync.
    fn crash(&mut self, seed: u64) {
        let image = Arc::new(self.disk.crash(seed));
        drop(self.db.take());
        let db = Db::open_on(image.clone(), self.opts.clone()).expect("open after a crash");
        let found = contents(&db);
        assert!(
            self.since_sync.contains(&found),
            "after a crash the store holds {} keys, not the contents after any commit since \
             the last sync ({} candidates)",
            found.len(),
            self.since_sync.len()
        );
        (self.disk, self.db, self.model) = (image, Some(db), found);
        self.synced();
    }

    fn check_contents(&self, when: &str) {
        assert!(contents(self.db()) == self.model, "contents {when}");
    }

    fn verify_all(&mut self) {
        self.check_contents("at the end");
        self.db()
            .check()
            .expect("the store's own consistency check");
        self.db.take().expect("open").close().expect("close");
        let db = Db::open_on(self.disk.clone(), self.opts.clone()).expect("reopen at the end");
        assert!(
            contents(&db) == self.model,
            "contents after the last reopen"
        );
    }
}

/// The two keys, the smaller first.
fn ordered(a: Vec<u8>, b: Vec<u8>) -> (Vec<u8>, Vec<u8>) {
    if a <= b {
        (a, b)
    } else {
        (b, a)
    }
}

fn contents(db: &Db) -> Contents {
    db.scan_prefix(db.default_table(), b"")
        .expect("scan everything")
        .map(|item| item.expect("scan item"))
        .collect()
}
