//! A [`Disk`] over a [`SimDisk`] that, at random writes, syncs and hole punches, captures what
//! a crash at that instant could leave behind, for crash tests: the images are reopened after
//! the run and each must hold a state the test's acknowledgements allow.

use crate::{Disk, Result, SimConfig, SimDisk};
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A captured crash image with the test's two counters when it was taken: the newest
/// operation the image must hold (`acked` for a power loss, `handed` for a process crash) and
/// the newest one issued (the image may hold any operation up to it).
pub type CrashImage = (SimDisk, u64, u64);

/// Forwards to a [`SimDisk`] and captures crash images as it goes. The test keeps the
/// counters: it bumps `issued` before each operation and `acked`/`handed` once the operation
/// is durable against power loss / a process crash.
#[derive(Debug)]
pub struct CrashingDisk {
    /// The disk written.
    pub sim: Arc<SimDisk>,
    rng: Mutex<ChaCha8Rng>,
    /// Chance of capturing an image at each write, sync and hole punch (0 disarms it).
    pub probability: Mutex<f64>,
    /// Operations issued so far (the one in progress may or may not be in an image).
    pub issued: Arc<AtomicU64>,
    /// The newest operation made durable against power loss (its sync returned).
    pub acked: Arc<AtomicU64>,
    /// The newest operation handed to the operating system: what a process crash must keep.
    pub handed: Arc<AtomicU64>,
    /// Share of the images that are process crashes ([`SimDisk::process_crash`], recorded
    /// with `handed`) rather than power losses (recorded with `acked`); 0 unless set.
    pub process_share: Mutex<f64>,
    /// The images captured so far.
    pub images: Mutex<Vec<CrashImage>>,
}

impl CrashingDisk {
    /// A crashing disk over `sim`, capturing at each request with `probability`.
    pub fn over(sim: SimDisk, seed: u64, probability: f64) -> Arc<CrashingDisk> {
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

    /// A crashing disk over a new, empty [`SimDisk`], not yet capturing (set `probability`
    /// to arm it).
    pub fn new(seed: u64) -> Arc<CrashingDisk> {
        let sim = SimDisk::new(SimConfig {
            seed,
            len: 0,
            capacity: None,
        });
        CrashingDisk::over(sim, seed, 0.0)
    }

    fn maybe_crash(&self) {
        let mut rng = self.rng.lock();
        if rng.gen_bool(*self.probability.lock()) {
            let seed = rng.gen();
            let process = rng.gen_bool(*self.process_share.lock());
            let (image, kept) = if process {
                (self.sim.process_crash(), &self.handed)
            } else {
                (self.sim.crash(seed), &self.acked)
            };
            let (kept, issued) = (
                kept.load(Ordering::SeqCst),
                self.issued.load(Ordering::SeqCst),
            );
            self.images.lock().push((image, kept, issued));
        }
    }
}

impl Disk for CrashingDisk {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.sim.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.maybe_crash();
        let r = self.sim.write_at(offset, data);
        self.maybe_crash();
        r
    }
    fn sync(&self) -> Result<()> {
        self.maybe_crash();
        let r = self.sim.sync();
        self.maybe_crash();
        r
    }
    fn len(&self) -> u64 {
        self.sim.len()
    }
    fn grow(&self, new_len: u64) -> Result<()> {
        self.sim.grow(new_len)
    }
    fn punch_hole(&self, offset: u64, len: u64) -> Result<()> {
        self.maybe_crash();
        self.sim.punch_hole(offset, len)
    }
    fn allocate(&self, offset: u64, len: u64) -> Result<()> {
        self.sim.allocate(offset, len)
    }
    fn space(&self) -> Option<crate::Space> {
        self.sim.space()
    }
    fn describe(&self) -> String {
        "crashing simdisk".into()
    }
}
