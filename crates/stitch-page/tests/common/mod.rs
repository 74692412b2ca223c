//! Shared setup of the page store's tests: stores on the simulated disk, and a disk that
//! captures crash images as it goes.

#![allow(dead_code)]

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use stitch_io::{Disk, SimConfig, SimDisk};
use stitch_page::{LinearHash, PageStore, PageStoreConfig};
use stitch_patch::{BlockCache, CacheConfig};
use stitch_zone::{ZoneConfig, ZoneStore};

/// A live transaction's own writes in a model (`None`: deleted).
pub type Writes = std::collections::HashMap<Vec<u8>, Option<Vec<u8>>>;

/// Small zones, so the page file grows (and checkpoints) often.
pub const ZONE: u64 = 256 * 1024;

/// A crash image, with the commits acknowledged and issued when it was taken.
pub struct Image {
    pub disk: SimDisk,
    pub acked: u64,
    pub issued: u64,
}

/// A SimDisk that captures a crash image ([`SimDisk::crash`]) at every `every`th write or
/// sync while armed: the crash lands inside a flush, pending writes dropped, torn or
/// reordered.
#[derive(Debug)]
pub struct CapturingDisk {
    pub sim: SimDisk,
    ops: AtomicU64,
    /// 0: not capturing.
    pub every: AtomicU64,
    pub acked: AtomicU64,
    pub issued: AtomicU64,
    pub images: Mutex<Vec<(SimDisk, u64, u64)>>,
}

impl CapturingDisk {
    pub fn new(sim: SimDisk) -> Arc<Self> {
        Arc::new(CapturingDisk {
            sim,
            ops: AtomicU64::new(0),
            every: AtomicU64::new(0),
            acked: AtomicU64::new(0),
            issued: AtomicU64::new(0),
            images: Mutex::new(Vec::new()),
        })
    }

    fn tick(&self) {
        let every = self.every.load(Ordering::SeqCst);
        let n = self.ops.fetch_add(1, Ordering::SeqCst);
        if every > 0 && n % every == 0 {
            let image = self.sim.crash(n);
            self.images.lock().push((
                image,
                self.acked.load(Ordering::SeqCst),
                self.issued.load(Ordering::SeqCst),
            ));
        }
    }

    pub fn take_images(&self) -> Vec<Image> {
        std::mem::take(&mut *self.images.lock())
            .into_iter()
            .map(|(disk, acked, issued)| Image {
                disk,
                acked,
                issued,
            })
            .collect()
    }
}

impl Disk for CapturingDisk {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> stitch_io::Result<()> {
        self.sim.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> stitch_io::Result<()> {
        self.tick();
        self.sim.write_at(offset, data)
    }
    fn sync(&self) -> stitch_io::Result<()> {
        self.tick();
        self.sim.sync()
    }
    fn len(&self) -> u64 {
        self.sim.len()
    }
    fn grow(&self, new_len: u64) -> stitch_io::Result<()> {
        self.sim.grow(new_len)
    }
    fn punch_hole(&self, offset: u64, len: u64) -> stitch_io::Result<()> {
        self.tick();
        self.sim.punch_hole(offset, len)
    }
    fn describe(&self) -> String {
        self.sim.describe()
    }
}

pub fn sim(seed: u64) -> SimDisk {
    SimDisk::new(SimConfig {
        seed,
        len: 0,
        capacity: None,
    })
}

fn cache(disk: Arc<dyn Disk>) -> Arc<BlockCache> {
    Arc::new(BlockCache::new(
        disk,
        CacheConfig {
            block_size: 4096,
            clean_blocks: 64,
        },
    ))
}

/// A new page store with a linear hash table (meta page 1) on `disk`.
pub fn create(disk: Arc<dyn Disk>, frames: usize) -> (Arc<PageStore>, LinearHash) {
    let zones = Arc::new(
        ZoneStore::create(
            cache(disk),
            ZoneConfig {
                zone_size: ZONE,
                max_size: None,
                ..ZoneConfig::default()
            },
        )
        .unwrap(),
    );
    let store = PageStore::create(
        zones,
        PageStoreConfig {
            frames,
            checkpoint_log_zones: 3,
        },
    )
    .unwrap();
    let hash = LinearHash::create(&store).unwrap();
    assert_eq!(hash.meta_page(), 1);
    store.checkpoint().unwrap();
    (store, hash)
}

/// Opens (recovers) the page store on `disk`; `None` if the store's first checkpoint never
/// became durable.
pub fn open(
    disk: Arc<dyn Disk>,
    frames: usize,
) -> stitch_page::Result<Option<(Arc<PageStore>, LinearHash)>> {
    let (zones, sb) = match ZoneStore::open(cache(disk), ZoneConfig::default()) {
        Ok(z) => z,
        Err(_) => return Ok(None),
    };
    if sb.root.is_none() {
        return Ok(None);
    }
    let store = PageStore::open(
        Arc::new(zones),
        PageStoreConfig {
            frames,
            checkpoint_log_zones: 3,
        },
    )?;
    match LinearHash::open(&store, 1) {
        Ok(hash) => Ok(Some((store, hash))),
        // The table's creation (a nested top action) was lost with the crash.
        Err(stitch_page::PageError::Corrupt { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Every entry of `hash`, sorted; a key stored twice fails the test.
pub fn contents(hash: &LinearHash) -> std::collections::BTreeMap<Vec<u8>, Vec<u8>> {
    let problems = hash.check().unwrap();
    assert!(problems.is_empty(), "check: {problems:?}");
    let entries = hash.entries().unwrap();
    let n = entries.len();
    let map: std::collections::BTreeMap<_, _> = entries.into_iter().collect();
    assert_eq!(map.len(), n, "a key is stored twice");
    map
}

/// Panics with the first differences between `got` and `want` if they differ.
pub fn assert_same(
    got: &std::collections::BTreeMap<Vec<u8>, Vec<u8>>,
    want: &std::collections::BTreeMap<Vec<u8>, Vec<u8>>,
    what: &str,
) {
    if got == want {
        return;
    }
    let show = |k: &Vec<u8>| String::from_utf8_lossy(k).into_owned();
    let mut diffs = Vec::new();
    for (k, v) in got {
        match want.get(k) {
            None => diffs.push(format!("extra {} ({} bytes)", show(k), v.len())),
            Some(w) if w != v => {
                diffs.push(format!("{}: {} bytes, want {}", show(k), v.len(), w.len()))
            }
            _ => {}
        }
    }
    for (k, w) in want {
        if !got.contains_key(k) {
            diffs.push(format!("missing {} ({} bytes)", show(k), w.len()));
        }
    }
    panic!(
        "{what}: {} differences, {} keys vs {} wanted: {:?}",
        diffs.len(),
        got.len(),
        want.len(),
        &diffs[..diffs.len().min(8)]
    );
}
