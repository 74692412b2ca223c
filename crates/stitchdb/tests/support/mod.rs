//! Shared by the crash tests: a disk that captures crash images as it runs.

use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use stitchdb::{Disk, IoError, SimDisk};

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
    pub images: Mutex<Vec<(SimDisk, u64, u64)>>,
}

impl CrashingDisk {
    fn maybe_crash(&self) {
        let mut rng = self.rng.lock();
        if rng.gen_bool(*self.probability.lock()) {
            let seed = rng.gen();
            let image = self.sim.crash(seed);
            let (acked, issued) = (
                self.acked.load(Ordering::SeqCst),
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
        images: Mutex::new(Vec::new()),
    })
}
