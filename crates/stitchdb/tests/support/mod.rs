//! Shared by the integration tests: a disk that captures crash images as it runs, and a
//! table's contents read into a map.

// Each test binary compiles this module and uses only part of it.
#![allow(dead_code)]

use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use stitchdb::{Db, Disk, IoError, Options, SimConfig, SimDisk, TableId};

/// A `Disk` that forwards to a `SimDisk` and, at random writes and syncs, records what a crash
/// at that instant could leave behind.
#[derive(Debug)]
pub struct CrashingDisk {
    pub sim: Arc<SimDisk>,
    rng: Mutex<ChaCha8Rng>,
    /// Chance of capturing an image at each write and sync (0 until armed).
    pub probability: Mutex<f64>,
    /// Commits issued so far (the one in progress may or may not be in a crash image).
    pub issued: Arc<AtomicU64>,
    /// The newest commit whose `Sync` write returned.
    pub acked: Arc<AtomicU64>,
    /// The newest commit whose `Sync` or `Written` write returned: what a process crash must
    /// keep.
    pub handed: Arc<AtomicU64>,
    /// Share of the captured images that are process crashes (`SimDisk::process_crash`,
    /// recorded with `handed`) rather than power losses (recorded with `acked`); 0 unless set.
    pub process_share: Mutex<f64>,
    pub images: Mutex<Vec<(SimDisk, u64, u64)>>,
}

impl CrashingDisk {
    fn maybe_crash(&self) {
        let mut rng = self.rng.lock();
        if rng.gen_bool(*self.probability.lock()) {
            let seed = rng.gen();
            let process = rng.gen_bool(*self.process_share.lock());
            let (image, acked) = if process {
                (self.sim.process_crash(), &self.handed)
            } else {
                (self.sim.crash(seed), &self.acked)
            };
            let (acked, issued) = (
                acked.load(Ordering::SeqCst),
                self.issued.load(Ordering::SeqCst),
            );
            self.images.lock().push((image, acked, issued));
        }
    }
}

impl Disk for CrashingDisk {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        self.sim.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), IoError> {
        self.maybe_crash();
        let r = self.sim.write_at(offset, data);
        self.maybe_crash();
        r
    }
    fn sync(&self) -> Result<(), IoError> {
        self.maybe_crash();
        let r = self.sim.sync();
        self.maybe_crash();
        r
    }
    fn len(&self) -> u64 {
        self.sim.len()
    }
    fn grow(&self, new_len: u64) -> Result<(), IoError> {
        self.sim.grow(new_len)
    }
    fn punch_hole(&self, offset: u64, len: u64) -> Result<(), IoError> {
        self.maybe_crash();
        self.sim.punch_hole(offset, len)
    }
    fn describe(&self) -> String {
        "crashing simdisk".into()
    }
}

pub fn crashing(sim: SimDisk, seed: u64, probability: f64) -> Arc<CrashingDisk> {
    Arc::new(CrashingDisk {
        sim: Arc::new(sim),
        rng: Mutex::new(ChaCha8Rng::seed_from_u64(seed)),
        probability: Mutex::new(probability),
        issued: Arc::default(),
        acked: Arc::default(),
        handed: Arc::default(),
        process_share: Mutex::new(0.0),
        images: Mutex::new(Vec::new()),
    })
}

/// A crashing disk over a new `SimDisk`, not yet capturing (set `probability` to arm it).
pub fn new_crashing(seed: u64) -> Arc<CrashingDisk> {
    crashing(
        SimDisk::new(SimConfig {
            seed,
            len: 0,
            capacity: None,
        }),
        seed,
        0.0,
    )
}

/// Reopens every image `disk` captured and checks that each holds exactly `expected` in its
/// default table and passes `check`; returns how many there were.
pub fn every_image_holds(
    disk: &CrashingDisk,
    opts: &Options,
    expected: &BTreeMap<Vec<u8>, Vec<u8>>,
    what: &str,
) -> usize {
    let images: Vec<_> = disk.images.lock().drain(..).collect();
    let count = images.len();
    for (i, (image, _, _)) in images.into_iter().enumerate() {
        let db = Db::open_on(Arc::new(image), opts.clone()).unwrap();
        assert_eq!(
            &table_contents(&db, db.default_table()),
            expected,
            "{what}, image {i}"
        );
        db.check()
            .unwrap_or_else(|e| panic!("{what}, image {i}: {e}"));
    }
    count
}

/// Every pair of table `t`, by a scan.
pub fn table_contents(db: &Db, t: TableId) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.scan_prefix(t, b"")
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}
