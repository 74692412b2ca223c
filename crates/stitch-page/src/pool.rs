//! The buffer pool: a fixed number of frames caching pages, LRU-2 replacement, pin/unpin,
//! steal and no-force.
//!
//! * **LRU-2** (O'Neil et al., as Stasis uses): the victim is the unpinned frame whose
//!   second-most-recent access is oldest; a page touched once counts as infinitely old, so a
//!   scan that touches many pages once does not push out pages used again and again. Ties
//!   (pages touched once) go to the least recently used.
//! * **Steal**: a dirty page may be written back at any time, whatever transaction changed it,
//!   but only after the log is durable up to the page's LSN (write-ahead), and written back
//!   through to the device, so a stolen page really is on disk.
//! * **No-force**: nothing here writes at commit; [`Pool::flush_all`] is for checkpoints.

use crate::file::PageFile;
use crate::page::{self, BODY_LEN, PAGE_SIZE};
use crate::{PageError, PageId, Result};
use std::collections::{BTreeSet, HashMap};
use stitch_wal::{Lsn, Wal};

/// A frame's index in the pool.
pub type FrameId = usize;

/// How [`Pool::pin`] fills a frame for a page not in the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Load {
    /// Read and verify it: a bad page is an error naming it.
    Verify,
    /// Recovery's redo: a page failing its checks is kept as *torn* (contents unknown) for a
    /// full-page image in the log to rebuild.
    Redo,
    /// A page being allocated: not read, an empty body.
    Fresh,
}

struct Frame {
    page: PageId,
    body: Box<[u8]>,
    lsn: Lsn,
    dirty: bool,
    /// Read back failing its checks, not yet rebuilt (recovery only).
    torn: Option<String>,
    pins: u32,
    /// The two most recent access times: (second most recent, most recent).
    history: (u64, u64),
}

/// Counters of the pool's work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Pins served from a frame.
    pub hits: u64,
    /// Pages read from the device.
    pub reads: u64,
    /// Dirty pages written back to make room (steals, when their changes are uncommitted).
    pub evictions_written: u64,
    /// Pages written by checkpoints.
    pub flushed: u64,
}

/// The buffer pool.
pub struct Pool {
    file: PageFile,
    frames: Vec<Frame>,
    capacity: usize,
    map: HashMap<PageId, FrameId>,
    /// Unpinned frames by (second most recent access, most recent access).
    victims: BTreeSet<(u64, u64, FrameId)>,
    /// Frames holding no page (taken for a page that then failed to load).
    spare: Vec<FrameId>,
    clock: u64,
    stats: PoolStats,
}

impl Pool {
    /// A pool of `capacity` frames (at least 4) over `file`.
    pub fn new(file: PageFile, capacity: usize) -> Pool {
        Pool {
            file,
            frames: Vec::new(),
            capacity: capacity.max(4),
            map: HashMap::new(),
            victims: BTreeSet::new(),
            spare: Vec::new(),
            clock: 0,
            stats: PoolStats::default(),
        }
    }

    /// The page file.
    pub fn file(&self) -> &PageFile {
        &self.file
    }

    /// The page file, to grow it.
    pub fn file_mut(&mut self) -> &mut PageFile {
        &mut self.file
    }

    /// Counters so far.
    pub fn stats(&self) -> PoolStats {
        self.stats
    }

    /// Pins `page` in a frame (reading it if it is not in one); the frame is not evicted until
    /// every pin is undone with [`unpin`](Self::unpin). `wal` is the log a stolen page must
    /// wait for (none during recovery, whose records are all on disk).
    pub fn pin(&mut self, page: PageId, load: Load, wal: Option<&Wal>) -> Result<FrameId> {
        self.clock += 1;
        if let Some(&f) = self.map.get(&page) {
            self.stats.hits += 1;
            let frame = &mut self.frames[f];
            if frame.pins == 0 {
                self.victims.remove(&(frame.history.0, frame.history.1, f));
            }
            frame.pins += 1;
            frame.history = (frame.history.1, self.clock);
            return Ok(f);
        }
        let f = self.free_frame(wal)?;
        let offset = self.file.offset(page)?;
        let (lsn, torn) = if load == Load::Fresh {
            self.frames[f].body.fill(0);
            (0, None)
        } else {
            let mut image = vec![0u8; PAGE_SIZE];
            self.file.zones().cache().read(offset, &mut image)?;
            self.stats.reads += 1;
            match page::open(page, offset, &image) {
                Ok((lsn, body)) => {
                    self.frames[f].body.copy_from_slice(body);
                    (lsn, None)
                }
                Err(e) if load == Load::Redo => (0, Some(e.to_string())),
                Err(e) => {
                    self.spare.push(f);
                    return Err(e);
                }
            }
        };
        let frame = &mut self.frames[f];
        frame.page = page;
        frame.lsn = lsn;
        frame.dirty = false;
        frame.torn = torn;
        frame.pins = 1;
        frame.history = (0, self.clock);
        self.map.insert(page, f);
        Ok(f)
    }

    /// Undoes one pin of frame `f`.
    pub fn unpin(&mut self, f: FrameId) {
        let frame = &mut self.frames[f];
        frame.pins = frame.pins.saturating_sub(1);
        if frame.pins == 0 {
            self.victims.insert((frame.history.0, frame.history.1, f));
        }
    }

    /// A pinned frame's body.
    pub fn body(&self, f: FrameId) -> &[u8] {
        &self.frames[f].body
    }

    /// A pinned frame's page LSN.
    pub fn lsn(&self, f: FrameId) -> Lsn {
        self.frames[f].lsn
    }

    /// Why a pinned frame's page failed its checks when read for redo, if it did.
    pub fn torn(&self, f: FrameId) -> Option<&str> {
        self.frames[f].torn.as_deref()
    }

    /// Writes `bytes` at body `offset` of pinned frame `f` for the record `lsn`: the page is
    /// dirty and its LSN `lsn`. A write of the whole body mends a torn page.
    pub fn write(&mut self, f: FrameId, offset: usize, bytes: &[u8], lsn: Lsn) {
        let frame = &mut self.frames[f];
        frame.body[offset..offset + bytes.len()].copy_from_slice(bytes);
        if offset == 0 && bytes.len() == BODY_LEN {
            frame.torn = None;
        }
        frame.lsn = frame.lsn.max(lsn);
        frame.dirty = true;
    }

    /// The pages still torn (recovery ends in error if any is: no full-page image followed).
    pub fn torn_pages(&self) -> Vec<(PageId, String)> {
        self.map
            .iter()
            .filter_map(|(&p, &f)| self.frames[f].torn.clone().map(|t| (p, t)))
            .collect()
    }

    /// Writes every dirty page into the block cache and makes them durable (a checkpoint's
    /// first step). The log must already be durable up to every page's LSN.
    pub fn flush_all(&mut self) -> Result<()> {
        for f in 0..self.frames.len() {
            if self.frames[f].dirty {
                self.write_back(f)?;
                self.stats.flushed += 1;
            }
        }
        self.file.zones().cache().flush_all()?;
        Ok(())
    }

    fn write_back(&mut self, f: FrameId) -> Result<()> {
        let frame = &self.frames[f];
        let mut image = vec![0u8; PAGE_SIZE];
        page::seal(frame.page, frame.lsn, &frame.body, &mut image);
        let offset = self.file.offset(frame.page)?;
        self.file.zones().cache().write(offset, &image, &[])?;
        self.frames[f].dirty = false;
        Ok(())
    }

    /// A frame to fill: a new one while the pool is not full, else the LRU-2 victim's,
    /// written back first if dirty (after the log, then through to the device).
    fn free_frame(&mut self, wal: Option<&Wal>) -> Result<FrameId> {
        if let Some(f) = self.spare.pop() {
            return Ok(f);
        }
        if self.frames.len() < self.capacity {
            self.frames.push(Frame {
                page: 0,
                body: vec![0u8; BODY_LEN].into_boxed_slice(),
                lsn: 0,
                dirty: false,
                torn: None,
                pins: 0,
                history: (0, 0),
            });
            return Ok(self.frames.len() - 1);
        }
        let &(a, b, f) = self
            .victims
            .first()
            .ok_or(PageError::PoolExhausted(self.capacity))?;
        if self.frames[f].dirty {
            if let Some(wal) = wal {
                let lsn = self.frames[f].lsn;
                if lsn > wal.durable_lsn() {
                    wal.sync_to(lsn)?;
                }
            }
            self.write_back(f)?;
            // Through to the device: a steal is the page on disk, not in a cache.
            self.file.zones().cache().flush_all()?;
            self.stats.evictions_written += 1;
        }
        self.victims.remove(&(a, b, f));
        self.map.remove(&self.frames[f].page);
        Ok(f)
    }
}
