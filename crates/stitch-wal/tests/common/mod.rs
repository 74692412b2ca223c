//! Helpers shared by the integration tests.

#![allow(clippy::unwrap_used)]
#![allow(dead_code)]

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use stitch_io::{Disk, MemDisk};
use stitch_patch::{BlockCache, CacheConfig};
use stitch_wal::{Flags, LogRecord, OpRegistry, Wal};
use stitch_zone::{ZoneConfig, ZoneStore};

pub const SMALL_ZONE: u64 = 64 * 1024;

pub fn mem_disk() -> Arc<dyn Disk> {
    Arc::new(MemDisk::new(0))
}

/// A fresh store on `disk` with zones of `zone_size` bytes.
pub fn create_store(disk: Arc<dyn Disk>, zone_size: u64) -> Arc<ZoneStore> {
    let cache = Arc::new(BlockCache::new(disk, CacheConfig::default()));
    Arc::new(
        ZoneStore::create(
            cache,
            ZoneConfig {
                zone_size,
                max_size: None,
                ..ZoneConfig::default()
            },
        )
        .unwrap(),
    )
}

/// The store on `disk` opened again with a new, empty cache (as after a restart).
pub fn reopen(disk: Arc<dyn Disk>) -> ZoneStore {
    let cache = Arc::new(BlockCache::new(disk, CacheConfig::default()));
    ZoneStore::open(cache, ZoneConfig::default()).unwrap().0
}

/// A log on a fresh store, with its start header durable (as the db does before appending).
pub fn new_log(disk: Arc<dyn Disk>, zone_size: u64, epoch: u64) -> (Arc<ZoneStore>, Wal) {
    let zones = create_store(disk, zone_size);
    let wal = Wal::create(zones.clone(), epoch, 1).unwrap();
    zones.cache().flush_patch(wal.start_patch()).unwrap();
    (zones, wal)
}

/// A deterministic payload for record `i`.
pub fn payload(i: u64, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i as usize * 31 + j * 7) as u8).collect()
}

// ---- a toy page store and key-value map, with their logged operations --------------------

/// Op with undo: a byte write to a page, logged with before- and after-image.
pub const OP_PAGE_WRITE: u16 = 1;
/// Redo-only op: a key-value put, applied by the toy db only at commit.
pub const OP_KV_PUT: u16 = 2;
pub const PAGE_SIZE: usize = 64;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ToyState {
    pub pages: BTreeMap<u32, Vec<u8>>,
    pub kv: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl ToyState {
    pub fn page(&self, page: u32) -> Vec<u8> {
        self.pages
            .get(&page)
            .cloned()
            .unwrap_or_else(|| vec![0; PAGE_SIZE])
    }
    fn write(&mut self, page: u32, offset: usize, bytes: &[u8]) {
        let p = self.pages.entry(page).or_insert_with(|| vec![0; PAGE_SIZE]);
        p[offset..offset + bytes.len()].copy_from_slice(bytes);
    }
}

pub fn page_write_payload(page: u32, offset: u16, before: &[u8], after: &[u8]) -> Vec<u8> {
    assert_eq!(before.len(), after.len());
    let mut out = Vec::new();
    out.extend_from_slice(&page.to_le_bytes());
    out.extend_from_slice(&offset.to_le_bytes());
    out.extend_from_slice(&(after.len() as u16).to_le_bytes());
    out.extend_from_slice(before);
    out.extend_from_slice(after);
    out
}

/// A decoded page write: page, offset, before-image, after-image.
type PageWrite<'a> = (u32, usize, &'a [u8], &'a [u8]);

fn parse_page_write(p: &[u8]) -> Result<PageWrite<'_>, String> {
    if p.len() < 8 {
        return Err("short page write".into());
    }
    let page = u32::from_le_bytes(p[0..4].try_into().unwrap());
    let offset = u16::from_le_bytes(p[4..6].try_into().unwrap()) as usize;
    let n = u16::from_le_bytes(p[6..8].try_into().unwrap()) as usize;
    if p.len() != 8 + 2 * n || offset + n > PAGE_SIZE {
        return Err("bad page write".into());
    }
    Ok((page, offset, &p[8..8 + n], &p[8 + n..]))
}

pub fn kv_put_payload(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = (key.len() as u16).to_le_bytes().to_vec();
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    out
}

/// The toy operations over `state`. `budget`, if given, is how many redo/undo calls succeed
/// before they all fail (a crash in the middle of recovery).
pub fn toy_registry(state: Arc<Mutex<ToyState>>, budget: Option<Arc<AtomicU64>>) -> OpRegistry {
    let spend = move |budget: &Option<Arc<AtomicU64>>| -> Result<(), String> {
        match budget {
            Some(b)
                if b.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_err() =>
            {
                Err("simulated crash".into())
            }
            _ => Ok(()),
        }
    };
    let mut r = OpRegistry::new();
    let (s, b) = (state.clone(), budget.clone());
    r.register(
        OP_PAGE_WRITE,
        "page_write",
        Box::new(move |rec: &LogRecord| {
            spend(&b)?;
            let (page, offset, _, after) = parse_page_write(&rec.payload)?;
            s.lock().write(page, offset, after);
            Ok(())
        }),
        Some({
            let (s, b) = (state.clone(), budget.clone());
            Box::new(move |rec: &LogRecord| {
                spend(&b)?;
                let (page, offset, before, _) = parse_page_write(&rec.payload)?;
                s.lock().write(page, offset, before);
                Ok(())
            })
        }),
    )
    .unwrap();
    let (s, b) = (state, budget);
    r.register(
        OP_KV_PUT,
        "kv_put",
        Box::new(move |rec: &LogRecord| {
            spend(&b)?;
            let p = &rec.payload;
            let klen =
                u16::from_le_bytes(p.get(0..2).ok_or("short put")?.try_into().unwrap()) as usize;
            let key = p.get(2..2 + klen).ok_or("short key")?.to_vec();
            s.lock().kv.insert(key, p[2 + klen..].to_vec());
            Ok(())
        }),
        None,
    )
    .unwrap();
    r
}

/// Appends a page write for `txn` computing the before-image from `live` (the toy db's
/// in-memory state), and applies it there.
pub fn log_page_write(
    wal: &Wal,
    live: &mut ToyState,
    txn: u64,
    flags: Flags,
    page: u32,
    offset: u16,
    after: &[u8],
) {
    let before = live.page(page)[offset as usize..offset as usize + after.len()].to_vec();
    wal.append(
        txn,
        OP_PAGE_WRITE,
        flags,
        &page_write_payload(page, offset, &before, after),
    )
    .unwrap();
    live.write(page, offset as usize, after);
}
