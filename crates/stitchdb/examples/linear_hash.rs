//! Point lookups on uniform keys: the linear hash over the page store (`stitch-page`, not yet
//! a layout of the engine) against the engine's default layout (the VT-tree), on the same
//! keys and values, each in a store file of its own, each reopened cold with the same memory
//! for caching, counting device reads per lookup (a `CountingDisk` under each store).
//!
//! ```text
//! cargo run --release -p stitchdb --example linear_hash -- [KEYS] [LOOKUPS] [CACHE_MIB]
//! ```
//!
//! Defaults: 1,000,000 keys of 16 bytes with 100-byte values, 200,000 lookups of keys
//! present, 64 MiB of cache (the page store's buffer pool; the engine's read cache).

#![allow(clippy::unwrap_used)]

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use std::time::Instant;
use stitch_io::{CountingDisk, Disk, FileDisk, LockMode};
use stitch_page::{LinearHash, PageStore, PageStoreConfig};
use stitch_patch::{BlockCache, CacheConfig};
use stitch_zone::{ZoneConfig, ZoneStore};
use stitchdb::{Db, Durability, Options, WriteBatch};

const VALUE: usize = 100;

fn key(i: u64) -> Vec<u8> {
    // Uniform: a bijective scramble of the index.
    format!("{:016x}", i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).into_bytes()
}

fn arg(n: usize, default: u64) -> u64 {
    std::env::args()
        .nth(n)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn zones_on(disk: Arc<dyn Disk>, create: bool) -> Arc<ZoneStore> {
    // A small block cache: the buffer pool is the page store's cache.
    let cache = Arc::new(BlockCache::new(
        disk,
        CacheConfig {
            block_size: 4096,
            clean_blocks: 16,
        },
    ));
    Arc::new(if create {
        ZoneStore::create(cache, ZoneConfig::default()).unwrap()
    } else {
        ZoneStore::open(cache, ZoneConfig::default()).unwrap().0
    })
}

fn main() {
    let keys = arg(1, 1_000_000);
    let lookups = arg(2, 200_000);
    let cache_mib = arg(3, 64) as usize;
    let dir = tempfile::tempdir().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let probes: Vec<u64> = (0..lookups).map(|_| rng.gen_range(0..keys)).collect();
    println!("{keys} keys of 16 bytes, values of {VALUE} bytes; {lookups} uniform lookups; {cache_mib} MiB of cache");

    // Linear hash.
    let path = dir.path().join("hash.store");
    let started = Instant::now();
    {
        let disk: Arc<dyn Disk> = Arc::new(FileDisk::create(&path).unwrap());
        let store = PageStore::create(
            zones_on(disk, true),
            PageStoreConfig {
                frames: 1 << 16,
                ..PageStoreConfig::default()
            },
        )
        .unwrap();
        let hash = LinearHash::create(&store).unwrap();
        for chunk in (0..keys).collect::<Vec<_>>().chunks(10_000) {
            let t = store.begin().unwrap();
            for &i in chunk {
                hash.put(t, &key(i), &[i as u8; VALUE]).unwrap();
            }
            store.commit(t).unwrap();
        }
        store.checkpoint().unwrap();
        let (entries, buckets) = hash.stats().unwrap();
        println!(
            "linear hash: loaded in {:.1} s: {entries} entries in {buckets} buckets, file {} MiB",
            started.elapsed().as_secs_f64(),
            std::fs::metadata(&path).unwrap().len() >> 20
        );
    }
    {
        let counting = Arc::new(CountingDisk::new(Arc::new(
            FileDisk::open(&path, LockMode::Exclusive).unwrap(),
        )));
        let frames = (cache_mib << 20) / 4096;
        let store = PageStore::open(
            zones_on(counting.clone() as Arc<dyn Disk>, false),
            PageStoreConfig {
                frames,
                ..PageStoreConfig::default()
            },
        )
        .unwrap();
        let hash = LinearHash::open(&store, 1).unwrap();
        let t = store.begin().unwrap();
        let before = counting.reads();
        let started = Instant::now();
        for &i in &probes {
            assert!(hash.get(t, &key(i)).unwrap().is_some());
        }
        let secs = started.elapsed().as_secs_f64();
        println!(
            "linear hash: {:.0} lookups/s, {:.3} device reads per lookup",
            lookups as f64 / secs,
            (counting.reads() - before) as f64 / lookups as f64
        );
        store.commit(t).unwrap();
    }

    // VT-tree (the engine's default layout).
    let path = dir.path().join("vtree.store");
    let opts = || Options {
        read_cache_bytes: cache_mib << 20,
        durability: Durability::Async,
        ..Options::default()
    };
    let started = Instant::now();
    {
        let db = Db::create_on(Arc::new(FileDisk::create(&path).unwrap()), opts()).unwrap();
        let t = db.default_table();
        for chunk in (0..keys).collect::<Vec<_>>().chunks(10_000) {
            let mut b = WriteBatch::new();
            for &i in chunk {
                b.put(t, key(i), vec![i as u8; VALUE]);
            }
            db.write(&b, Durability::Async).unwrap();
        }
        db.flush().unwrap();
        db.compact().unwrap();
        db.close().unwrap();
        println!(
            "vt-tree: loaded and compacted in {:.1} s, file {} MiB",
            started.elapsed().as_secs_f64(),
            std::fs::metadata(&path).unwrap().len() >> 20
        );
    }
    {
        let counting = Arc::new(CountingDisk::new(Arc::new(
            FileDisk::open(&path, LockMode::Exclusive).unwrap(),
        )));
        let db = Db::open_on(counting.clone() as Arc<dyn Disk>, opts()).unwrap();
        let t = db.default_table();
        let before = counting.reads();
        let started = Instant::now();
        for &i in &probes {
            assert!(db.get(t, key(i)).unwrap().is_some());
        }
        let secs = started.elapsed().as_secs_f64();
        println!(
            "vt-tree: {:.0} lookups/s, {:.3} device reads per lookup",
            lookups as f64 / secs,
            (counting.reads() - before) as f64 / lookups as f64
        );
    }
}
