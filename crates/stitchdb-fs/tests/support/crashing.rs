//! A disk that captures crash images as it runs (as stitchdb's crash tests do): at random
//! writes and syncs it records what a crash at that instant could leave behind.

#![allow(clippy::unwrap_used)]

use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use stitchdb::{Disk, IoError, SimConfig, SimDisk};

/// A crash image, the newest operation acknowledged durable and the newest one issued when
/// it was taken.
pub type Image = (SimDisk, u64, u64);

#[derive(Debug)]
pub struct CrashingDisk {
    pub sim: Arc<SimDisk>,
    rng: Mutex<ChaCha8Rng>,
    /// Chance of capturing an image at each write and sync (0 until armed).
    pub probability: Mutex<f64>,
    /// Operations issued so far (the one in progress may or may not be in an image).
    pub issued: AtomicU64,
    /// The newest operation made durable by an fsync that returned.
    pub acked: AtomicU64,
    pub images: Mutex<Vec<Image>>,
}

impl CrashingDisk {
    pub fn new(seed: u64) -> Arc<CrashingDisk> {
        Arc::new(CrashingDisk {
            sim: Arc::new(SimDisk::new(SimConfig {
                seed,
                len: 0,
                capacity: None,
            })),
            rng: Mutex::new(ChaCha8Rng::seed_from_u64(seed)),
            probability: Mutex::new(0.0),
            issued: AtomicU64::new(0),
            acked: AtomicU64::new(0),
            images: Mutex::new(Vec::new()),
        })
    }

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
