//! Sorted immutable runs: data blocks in zones plus an index (see `docs/format.md`).

mod block;
mod index;

pub use index::BlockHandle;

use crate::codec::{put_varint, Reader};
use crate::memtable::{Entry, Value};
use crate::{Error, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use stitch_patch::PatchId;
use stitch_zone::{ExtentAddr, ExtentKind, ZoneStore};

/// Target payload size of a data block: one extent, header included, fills a 4 KiB block.
const BLOCK_TARGET: usize = 4096 - stitch_zone::EXTENT_HEADER_LEN;

/// What the manifest records of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunMeta {
    pub id: u64,
    pub entries: u64,
    pub data_bytes: u64,
    pub min_seq: u64,
    pub max_seq: u64,
    pub index: Vec<ExtentAddr>,
}

impl RunMeta {
    pub fn encode(&self, out: &mut Vec<u8>) {
        for v in [
            self.id,
            self.entries,
            self.data_bytes,
            self.min_seq,
            self.max_seq,
            self.index.len() as u64,
        ] {
            put_varint(out, v);
        }
        for a in &self.index {
            a.encode(out);
        }
    }

    pub fn decode(r: &mut Reader) -> std::result::Result<RunMeta, String> {
        let (id, entries, data_bytes, min_seq, max_seq) = (
            r.varint()?,
            r.varint()?,
            r.varint()?,
            r.varint()?,
            r.varint()?,
        );
        let n = r.len()?;
        let mut index = Vec::with_capacity(n);
        for _ in 0..n {
            index
                .push(ExtentAddr::decode(r.take(ExtentAddr::ENCODED_LEN)?).ok_or("short address")?);
        }
        Ok(RunMeta {
            id,
            entries,
            data_bytes,
            min_seq,
            max_seq,
            index,
        })
    }
}

/// An open run. When a merge replaces it and the checkpoint saying so is durable, it is marked
/// obsolete; its extents are released when the last reader lets go of it.
pub struct Run {
    pub meta: RunMeta,
    blocks: Vec<BlockHandle>,
    zones: Arc<ZoneStore>,
    obsolete: AtomicBool,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Run")
            .field("meta", &self.meta)
            .field("blocks", &self.blocks.len())
            .finish()
    }
}

impl Run {
    /// Writes `entries` (sorted by key, newest version first) as a new run. Returns the run and
    /// one patch standing for all its writes; `None` if there are no entries.
    pub fn build(
        zones: &Arc<ZoneStore>,
        id: u64,
        entries: impl Iterator<Item = Result<Entry>>,
    ) -> Result<Option<(Arc<Run>, PatchId)>> {
        let mut writer = block::BlockWriter::default();
        let mut blocks = Vec::new();
        let mut patches = Vec::new();
        let mut meta = RunMeta {
            id,
            entries: 0,
            data_bytes: 0,
            min_seq: u64::MAX,
            max_seq: 0,
            index: Vec::new(),
        };
        let mut emit =
            |writer: &mut block::BlockWriter, blocks: &mut Vec<BlockHandle>| -> Result<()> {
                let (payload, first_key, last_key, count) = writer.finish();
                let (addr, patch) = zones.append(ExtentKind::RUN_BLOCK, &payload, &[])?;
                patches.push(patch);
                blocks.push(BlockHandle {
                    first_key,
                    last_key,
                    entries: count,
                    addr,
                });
                Ok(())
            };
        for e in entries {
            let e = e?;
            meta.entries += 1;
            meta.data_bytes += (e.key.len() + e.value.as_ref().map_or(0, Vec::len)) as u64;
            meta.min_seq = meta.min_seq.min(e.seq);
            meta.max_seq = meta.max_seq.max(e.seq);
            writer.add(&e);
            if writer.size() >= BLOCK_TARGET {
                emit(&mut writer, &mut blocks)?;
            }
        }
        if !writer.is_empty() {
            emit(&mut writer, &mut blocks)?;
        }
        if blocks.is_empty() {
            return Ok(None);
        }
        for chunk in index::encode_chunks(&blocks, zones.max_payload() / 4) {
            let (addr, patch) = zones.append(ExtentKind::RUN_INDEX, &chunk, &[])?;
            patches.push(patch);
            meta.index.push(addr);
        }
        let done = zones.cache().empty(&patches)?;
        let run = Run {
            meta,
            blocks,
            zones: zones.clone(),
            obsolete: AtomicBool::new(false),
        };
        Ok(Some((Arc::new(run), done)))
    }

    /// Opens a run the manifest names: reads its index and marks its extents live.
    pub fn open(zones: &Arc<ZoneStore>, meta: RunMeta) -> Result<Arc<Run>> {
        let mut blocks = Vec::new();
        for &addr in &meta.index {
            let payload = zones
                .read(addr, ExtentKind::RUN_INDEX)
                .map_err(|e| Error::from(e).within("run index", format!("run {}", meta.id)))?;
            index::decode_chunk(&payload, &mut blocks)
                .map_err(|d| Error::corrupt("run index", format!("run {} {addr}", meta.id), d))?;
        }
        let entries: u64 = blocks.iter().map(|b| b.entries).sum();
        if entries != meta.entries {
            return Err(Error::corrupt(
                "run index",
                format!("run {}", meta.id),
                format!(
                    "blocks hold {entries} entries, the manifest says {}",
                    meta.entries
                ),
            ));
        }
        Ok(Arc::new(Run {
            meta,
            blocks,
            zones: zones.clone(),
            obsolete: AtomicBool::new(false),
        }))
    }

    /// Every extent the run references, for marking them live at open.
    pub fn extents(&self) -> impl Iterator<Item = (ExtentAddr, ExtentKind)> + '_ {
        let index = self.meta.index.iter().map(|&a| (a, ExtentKind::RUN_INDEX));
        index.chain(self.blocks.iter().map(|b| (b.addr, ExtentKind::RUN_BLOCK)))
    }

    pub fn blocks(&self) -> &[BlockHandle] {
        &self.blocks
    }

    /// The run's extents may be released once nothing reads it any more.
    pub fn mark_obsolete(&self) {
        self.obsolete.store(true, Ordering::Release);
    }

    pub fn read_block(&self, i: usize) -> Result<Vec<Entry>> {
        let h = &self.blocks[i];
        let payload = self
            .zones
            .read(h.addr, ExtentKind::RUN_BLOCK)
            .map_err(|e| {
                Error::from(e).within("run block", format!("run {} block {i}", self.meta.id))
            })?;
        let entries = block::decode(&payload).map_err(|d| {
            Error::corrupt(
                "run block",
                format!("run {} block {i} {}", self.meta.id, h.addr),
                d,
            )
        })?;
        let ok = entries.len() as u64 == h.entries
            && entries.first().is_some_and(|e| e.key == h.first_key)
            && entries.last().is_some_and(|e| e.key == h.last_key);
        if !ok {
            return Err(Error::corrupt(
                "run block",
                format!("run {} block {i} {}", self.meta.id, h.addr),
                "contents do not match the run index",
            ));
        }
        Ok(entries)
    }

    /// The newest version of `key` at or below `snapshot`, if the run has one.
    pub fn get(&self, key: &[u8], snapshot: u64) -> Result<Option<(u64, Value)>> {
        let mut i = self.blocks.partition_point(|b| b.last_key.as_slice() < key);
        while i < self.blocks.len() && self.blocks[i].first_key.as_slice() <= key {
            let entries = self.read_block(i)?;
            if let Some(e) = entries.iter().find(|e| e.key == key && e.seq <= snapshot) {
                return Ok(Some((e.seq, e.value.clone())));
            }
            // Older versions of the key may continue in the next block.
            i += 1;
        }
        Ok(None)
    }

    /// All entries from the first whose key is at least `from`, in order.
    pub fn iter_from(self: &Arc<Self>, from: &[u8]) -> RunIter {
        let block = self
            .blocks
            .partition_point(|b| b.last_key.as_slice() < from);
        RunIter {
            run: self.clone(),
            block,
            entries: Vec::new().into_iter(),
            seek: Some(from.to_vec()),
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if !self.obsolete.load(Ordering::Acquire) {
            return;
        }
        for (addr, _) in self.extents().collect::<Vec<_>>() {
            if let Err(e) = self.zones.decref(addr) {
                tracing::error!("releasing {addr} of run {}: {e}", self.meta.id);
            }
        }
    }
}

/// Iterates a run's entries block by block.
pub struct RunIter {
    run: Arc<Run>,
    block: usize,
    entries: std::vec::IntoIter<Entry>,
    seek: Option<Vec<u8>>,
}

impl Iterator for RunIter {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        loop {
            if let Some(e) = self.entries.next() {
                if self.seek.as_ref().is_some_and(|s| e.key < *s) {
                    continue;
                }
                self.seek = None;
                return Some(Ok(e));
            }
            if self.block >= self.run.blocks.len() {
                return None;
            }
            match self.run.read_block(self.block) {
                Ok(entries) => self.entries = entries.into_iter(),
                Err(e) => {
                    self.block = self.run.blocks.len();
                    return Some(Err(e));
                }
            }
            self.block += 1;
        }
    }
}
