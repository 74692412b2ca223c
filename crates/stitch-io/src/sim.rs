//! [`SimDisk`]: a seeded, deterministic fault-injecting disk for tests.
//!
//! The disk keeps a *durable* image (what survives power loss), a *current* image (what reads
//! see: the durable image with every write since the last sync applied in order) and the list
//! of those pending writes. `sync` makes the current image durable.
//!
//! [`SimDisk::crash`] builds an image power loss could leave: every 512-byte sector touched by a
//! pending write holds one of the versions it went through, that is its content after pending
//! writes `0..k` for some `k` (`k = 0`: the durable content), chosen per sector. A drive may
//! persist sectors in any order, so this one rule covers lost, reordered and torn writes.
//!
//! Growing is durable at once: the simulated disk is a raw device or a preallocated file, whose
//! size a crash never changes. Only data is at risk.
//!
//! [`SimDisk::process_crash`] builds the image a process crash leaves: the current one (the
//! operating system keeps what the process wrote, synced or not).
//!
//! Images are sparse maps of 4 KiB copy-on-write chunks, so a sync or a crash copies pointers,
//! not bytes, and a chunk never written takes no memory and reads as zeros.

use crate::error::{check_range, IoError, IoErrorKind, IoOp, Result};
use crate::{Disk, SECTOR_SIZE};
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

/// Bytes per copy-on-write chunk: a multiple of [`SECTOR_SIZE`], small enough that copying one
/// on the first write after a sync or a crash is cheap.
const CHUNK: u64 = 4096;
const CHUNK_BYTES: usize = CHUNK as usize;

/// How a [`SimDisk`] starts.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Seeds every random choice the disk makes (which writes survive a crash, how they tear),
    /// together with the seed given to [`SimDisk::crash`].
    pub seed: u64,
    /// The initial size in bytes.
    pub len: u64,
    /// The size past which `grow` and writes fail with `NoSpace` (`None`: unlimited).
    pub capacity: Option<u64>,
}

/// Counters of what a [`SimDisk`] did. Failed operations are not counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Calls to `read_at` and the vector reads.
    pub reads: u64,
    /// Calls to `write_at` (hole punches are not counted here).
    pub writes: u64,
    /// Calls to `sync`.
    pub syncs: u64,
    /// Bytes written by `write_at`.
    pub bytes_written: u64,
    /// Writes and hole punches issued since the last sync (lost or torn by a crash now).
    pub pending_writes: u64,
}

/// A simulated disk. See the module docs.
pub struct SimDisk {
    state: Mutex<State>,
}

struct State {
    seed: u64,
    len: u64,
    capacity: Option<u64>,
    durable: Image,
    current: Image,
    pending: Vec<Pending>,
    /// Countdowns of the injected faults: `Some(1)` fails the next call.
    fail_read: Option<u64>,
    fail_write: Option<u64>,
    fail_sync: Option<u64>,
    stats: SimStats,
    /// The file system the disk is a file on, if one is modelled.
    fs: Option<FileSystem>,
}

/// A file system a [`SimDisk`] is a file on (see [`SimDisk::set_file_system`]): the disk's
/// 4 KiB chunks take its blocks when first written or allocated, and give them back when
/// punched out whole.
#[derive(Debug, Clone)]
struct FileSystem {
    /// Bytes of blocks it has for the disk.
    size: u64,
    /// Bytes it holds for other files: what the disk may take is `size` less these.
    others: u64,
    /// The chunks holding blocks.
    taken: BTreeSet<u64>,
}

impl FileSystem {
    fn available(&self) -> u64 {
        self.size
            .saturating_sub(self.others)
            .saturating_sub(self.taken.len() as u64 * CHUNK)
    }

    /// Takes blocks for every chunk of `offset..offset + len`, or none if there are too few.
    fn take(&mut self, offset: u64, len: u64) -> bool {
        let range = chunks(offset, offset + len);
        let new = range.clone().filter(|c| !self.taken.contains(c)).count() as u64;
        if new * CHUNK > self.available() {
            return false;
        }
        self.taken.extend(range);
        true
    }

    /// Gives back the blocks of the chunks wholly inside `offset..offset + len`.
    fn give_back(&mut self, offset: u64, len: u64) {
        let (first, end) = (offset.div_ceil(CHUNK), (offset + len) / CHUNK);
        if first < end {
            let inside: Vec<u64> = self.taken.range(first..end).copied().collect();
            for chunk in inside {
                self.taken.remove(&chunk);
            }
        }
    }
}

impl SimDisk {
    /// A disk of `config.len` zero bytes, nothing pending.
    pub fn new(config: SimConfig) -> Self {
        Self::with_image(config, Image::default())
    }

    fn with_image(config: SimConfig, image: Image) -> Self {
        SimDisk {
            state: Mutex::new(State {
                seed: config.seed,
                len: config.len,
                capacity: config.capacity,
                current: image.clone(),
                durable: image,
                pending: Vec::new(),
                fail_read: None,
                fail_write: None,
                fail_sync: None,
                stats: SimStats::default(),
                fs: None,
            }),
        }
    }

    /// The disk as it could be found after power loss now: the durable image plus any subset
    /// of the writes since the last sync, each torn at 512-byte sectors, in any order. `seed`
    /// (with the disk's own seed) picks which, and seeds the new disk. `self` is unchanged and
    /// can go on running.
    ///
    /// The new disk has the same length and capacity, no pending writes, no injected faults
    /// and zeroed statistics.
    pub fn crash(&self, seed: u64) -> SimDisk {
        let state = self.state.lock();
        let image = state.crash_image(seed);
        let config = SimConfig {
            seed,
            len: state.len,
            capacity: state.capacity,
        };
        let disk = SimDisk::with_image(config, image);
        disk.state.lock().fs = state.fs.clone();
        disk
    }

    /// The disk as a process crash (`kill -9`) now leaves it: the operating system keeps
    /// every write the process made, synced or not, so the new disk's durable image is this
    /// one's current image. Length and capacity are kept; no pending writes, no injected
    /// faults, zeroed statistics. `self` is unchanged and can go on running.
    pub fn process_crash(&self) -> SimDisk {
        let state = self.state.lock();
        let config = SimConfig {
            seed: state.seed,
            len: state.len,
            capacity: state.capacity,
        };
        let disk = SimDisk::with_image(config, state.current.clone());
        disk.state.lock().fs = state.fs.clone();
        disk
    }

    /// The `n`th read from now (1 = the next) fails with EIO, once. `0` cancels.
    /// Only reads that pass the range check count.
    pub fn fail_nth_read(&self, n: u64) {
        self.state.lock().fail_read = (n > 0).then_some(n);
    }

    /// The `n`th write from now (1 = the next) fails with EIO, once; nothing of it is written.
    /// `0` cancels. Only writes that pass the range and capacity checks (and find room on a
    /// modelled file system) count; hole punches
    /// never fail this way.
    pub fn fail_nth_write(&self, n: u64) {
        self.state.lock().fail_write = (n > 0).then_some(n);
    }

    /// The `n`th sync from now (1 = the next) fails with EIO, once; the pending writes stay
    /// pending. `0` cancels.
    pub fn fail_nth_sync(&self, n: u64) {
        self.state.lock().fail_sync = (n > 0).then_some(n);
    }

    /// Sets the size past which `grow` (and writes past it) fail with `NoSpace`. Lowering it
    /// below the current length shrinks nothing; it only makes writes past it fail.
    pub fn set_capacity(&self, capacity: Option<u64>) {
        self.state.lock().capacity = capacity;
    }

    /// Makes the disk a file on a file system with `size` bytes of blocks for it (`None`:
    /// none modelled, the default): a chunk of 4 KiB takes a block when first written or
    /// allocated ([`Disk::allocate`]) and gives it back when punched out whole; a write or
    /// an allocation that needs more blocks than are left fails with `NoSpace`, with nothing
    /// written, and [`Disk::space`] reports what is left. Chunks written before count as
    /// taken. A crash keeps what is taken.
    pub fn set_file_system(&self, size: Option<u64>) {
        let mut state = self.state.lock();
        let (taken, others) = match state.fs.take() {
            Some(fs) => (fs.taken, fs.others),
            None => (state.current.chunks.keys().copied().collect(), 0),
        };
        state.fs = size.map(|size| FileSystem {
            size,
            others,
            taken,
        });
    }

    /// Makes other files of the modelled file system (see
    /// [`set_file_system`](Self::set_file_system)) hold `bytes`, leaving the disk that much
    /// less room: another process filling the device, or deleting files from it.
    pub fn set_others_on_file_system(&self, bytes: u64) {
        if let Some(fs) = self.state.lock().fs.as_mut() {
            fs.others = bytes;
        }
    }

    /// Bytes of blocks the disk holds on its modelled file system (`None`: none is
    /// modelled): what `du` would say of the file.
    pub fn allocated_bytes(&self) -> Option<u64> {
        let state = self.state.lock();
        state.fs.as_ref().map(|fs| fs.taken.len() as u64 * CHUNK)
    }

    /// What the disk has done so far.
    pub fn stats(&self) -> SimStats {
        let state = self.state.lock();
        SimStats {
            pending_writes: state.pending.len() as u64,
            ..state.stats.clone()
        }
    }

    fn error(&self, op: IoOp, offset: u64, len: u64, kind: IoErrorKind) -> IoError {
        IoError::new(op, self.describe(), offset, len, kind)
    }
}

impl fmt::Debug for SimDisk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.lock();
        f.debug_struct("SimDisk")
            .field("seed", &state.seed)
            .field("len", &state.len)
            .field("capacity", &state.capacity)
            .field("pending_writes", &state.pending.len())
            .finish_non_exhaustive()
    }
}

impl Disk for SimDisk {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let mut state = self.state.lock();
        check_range(self, IoOp::Read, offset, buf.len() as u64, state.len)?;
        if fires(&mut state.fail_read) {
            return Err(self.error(IoOp::Read, offset, buf.len() as u64, IoErrorKind::Eio));
        }
        state.current.read(offset, buf);
        state.stats.reads += 1;
        Ok(())
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        let mut state = self.state.lock();
        let len = data.len() as u64;
        check_range(self, IoOp::Write, offset, len, state.len)?;
        if state
            .capacity
            .is_some_and(|capacity| offset + len > capacity)
        {
            return Err(self.error(IoOp::Write, offset, len, IoErrorKind::NoSpace));
        }
        if state.fs.as_mut().is_some_and(|fs| !fs.take(offset, len)) {
            return Err(self.error(IoOp::Write, offset, len, IoErrorKind::NoSpace));
        }
        if fires(&mut state.fail_write) {
            return Err(self.error(IoOp::Write, offset, len, IoErrorKind::Eio));
        }
        state.current.write(offset, data);
        state.pending.push(Pending::Write {
            offset,
            data: data.to_vec(),
        });
        state.stats.writes += 1;
        state.stats.bytes_written += len;
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        let mut state = self.state.lock();
        if fires(&mut state.fail_sync) {
            return Err(self.error(IoOp::Sync, 0, 0, IoErrorKind::Eio));
        }
        state.durable = state.current.clone();
        state.pending.clear();
        state.stats.syncs += 1;
        Ok(())
    }

    fn len(&self) -> u64 {
        self.state.lock().len
    }

    fn grow(&self, new_len: u64) -> Result<()> {
        let mut state = self.state.lock();
        if new_len <= state.len {
            return Ok(());
        }
        if state.capacity.is_some_and(|capacity| new_len > capacity) {
            return Err(self.error(
                IoOp::Grow,
                state.len,
                new_len - state.len,
                IoErrorKind::NoSpace,
            ));
        }
        state.len = new_len;
        Ok(())
    }

    fn punch_hole(&self, offset: u64, len: u64) -> Result<()> {
        let mut state = self.state.lock();
        check_range(self, IoOp::PunchHole, offset, len, state.len)?;
        if let Some(fs) = state.fs.as_mut() {
            fs.give_back(offset, len);
        }
        state.current.zero(offset, len);
        state.pending.push(Pending::Punch { offset, len });
        Ok(())
    }

    fn allocate(&self, offset: u64, len: u64) -> Result<()> {
        let mut state = self.state.lock();
        check_range(self, IoOp::Grow, offset, len, state.len)?;
        if state.fs.as_mut().is_some_and(|fs| !fs.take(offset, len)) {
            return Err(self.error(IoOp::Grow, offset, len, IoErrorKind::NoSpace));
        }
        Ok(())
    }

    fn space(&self) -> Option<crate::Space> {
        let state = self.state.lock();
        state.fs.as_ref().map(|fs| crate::Space {
            available: fs.available(),
            total: fs.size,
        })
    }

    fn describe(&self) -> String {
        "simdisk".to_string()
    }
}

/// Counts one call against a fault countdown; true when this call is the one to fail.
fn fires(countdown: &mut Option<u64>) -> bool {
    match countdown {
        Some(1) => {
            *countdown = None;
            true
        }
        Some(n) => {
            *n -= 1;
            false
        }
        None => false,
    }
}

impl State {
    /// The durable image after a crash; see [`SimDisk::crash`]. The kind of outcome is drawn
    /// first, biased so that every kind happens often: per-sector choices alone would almost
    /// never keep all writes, or none, or a clean prefix.
    fn crash_image(&self, seed: u64) -> Image {
        let n = self.pending.len();
        if n == 0 {
            return self.durable.clone();
        }
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        rng.set_stream(seed);
        match rng.gen_range(0..8) {
            // Everything survives.
            0 => self.current.clone(),
            // Nothing survives.
            1 => self.durable.clone(),
            // The writes survive in order up to some point.
            2 | 3 => {
                let k = rng.gen_range(0..=n);
                self.mix(|writes| writes.partition_point(|&w| w < k))
            }
            // The same, and the next write is torn: some of its sectors survive.
            4 | 5 => {
                let k = rng.gen_range(0..n);
                self.mix(|writes| {
                    let m = writes.partition_point(|&w| w < k);
                    m + usize::from(writes.get(m) == Some(&k) && rng.gen_bool(0.5))
                })
            }
            // Reordering without tearing: each write survives whole or not at all (a sector
            // shows its version after the last surviving write that touched it).
            6 => {
                let survives: Vec<bool> = (0..n).map(|_| rng.gen_bool(0.5)).collect();
                self.mix(|writes| {
                    writes
                        .iter()
                        .rposition(|&w| survives[w])
                        .map_or(0, |p| p + 1)
                })
            }
            // Every sector on its own.
            _ => self.mix(|writes| rng.gen_range(0..=writes.len())),
        }
    }

    /// The durable image with each sector touched by pending writes replaced by its version
    /// after the first `choose(writes)` of the pending writes touching it (`writes` are their
    /// indices in order).
    fn mix(&self, mut choose: impl FnMut(&[usize]) -> usize) -> Image {
        let mut image = self.durable.clone();
        let mut sector = [0u8; SECTOR_SIZE as usize];
        for (index, writes) in self.touched_sectors() {
            let survivors = choose(&writes);
            if survivors == 0 {
                continue;
            }
            let start = index * SECTOR_SIZE;
            let buf = &mut sector[..(self.len - start).min(SECTOR_SIZE) as usize];
            self.durable.read(start, buf);
            for &w in &writes[..survivors] {
                self.pending[w].apply(start, buf);
            }
            image.write(start, buf);
        }
        image
    }

    /// For each sector a crash could change, the indices of the pending writes touching it, in
    /// order. A sector only hole punches touch, in a chunk the durable image lacks, is left out:
    /// all its versions are zeros. That keeps punching a huge sparse range cheap.
    fn touched_sectors(&self) -> BTreeMap<u64, Vec<usize>> {
        let mut touched: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
        for pending in &self.pending {
            let Range { start, end } = pending.range();
            match pending {
                Pending::Write { .. } => {
                    touched.extend(sectors(start, end).map(|s| (s, Vec::new())))
                }
                Pending::Punch { .. } => {
                    for &chunk in self
                        .durable
                        .chunks
                        .range(chunks(start, end))
                        .map(|(c, _)| c)
                    {
                        let base = chunk * CHUNK;
                        let (lo, hi) = (base.max(start), base + (end - base).min(CHUNK));
                        touched.extend(sectors(lo, hi).map(|s| (s, Vec::new())));
                    }
                }
            }
        }
        for (w, pending) in self.pending.iter().enumerate() {
            let Range { start, end } = pending.range();
            for (_, writes) in touched.range_mut(sectors(start, end)) {
                writes.push(w);
            }
        }
        touched
    }
}

/// The sectors overlapping the byte range `start..end`.
fn sectors(start: u64, end: u64) -> Range<u64> {
    if start == end {
        return 0..0;
    }
    start / SECTOR_SIZE..end.div_ceil(SECTOR_SIZE)
}

/// The chunks overlapping the byte range `start..end`.
fn chunks(start: u64, end: u64) -> Range<u64> {
    if start == end {
        return 0..0;
    }
    start / CHUNK..end.div_ceil(CHUNK)
}

/// A write issued since the last sync.
enum Pending {
    Write {
        offset: u64,
        data: Vec<u8>,
    },
    /// A punched hole: a write of zeros, as easily lost.
    Punch {
        offset: u64,
        len: u64,
    },
}

impl Pending {
    fn range(&self) -> Range<u64> {
        match *self {
            Pending::Write { offset, ref data } => offset..offset + data.len() as u64,
            Pending::Punch { offset, len } => offset..offset + len,
        }
    }

    /// Applies the part of this write that overlaps `buf`, which holds the bytes at `at`.
    fn apply(&self, at: u64, buf: &mut [u8]) {
        let range = self.range();
        let (lo, hi) = (range.start.max(at), range.end.min(at + buf.len() as u64));
        if lo >= hi {
            return;
        }
        let out = &mut buf[(lo - at) as usize..(hi - at) as usize];
        match self {
            Pending::Write { offset, data } => {
                out.copy_from_slice(&data[(lo - offset) as usize..(hi - offset) as usize])
            }
            Pending::Punch { .. } => out.fill(0),
        }
    }
}

/// A disk image: a sparse map of copy-on-write chunks; a missing chunk reads as zeros.
#[derive(Clone, Default)]
struct Image {
    chunks: BTreeMap<u64, Arc<[u8; CHUNK_BYTES]>>,
}

impl Image {
    fn read(&self, offset: u64, buf: &mut [u8]) {
        for (chunk, at, pos, n) in pieces(offset, buf.len()) {
            let out = &mut buf[pos..pos + n];
            match self.chunks.get(&chunk) {
                Some(bytes) => out.copy_from_slice(&bytes[at..at + n]),
                None => out.fill(0),
            }
        }
    }

    fn write(&mut self, offset: u64, data: &[u8]) {
        for (chunk, at, pos, n) in pieces(offset, data.len()) {
            let bytes = self
                .chunks
                .entry(chunk)
                .or_insert_with(|| Arc::new([0; CHUNK_BYTES]));
            Arc::make_mut(bytes)[at..at + n].copy_from_slice(&data[pos..pos + n]);
        }
    }

    /// Zeros `len` bytes at `offset`, dropping the chunks covered whole. Visits only the chunks
    /// present, so zeroing a huge range of a sparse image is cheap.
    fn zero(&mut self, offset: u64, len: u64) {
        let end = offset + len;
        let present: Vec<u64> = self
            .chunks
            .range(chunks(offset, end))
            .map(|(&c, _)| c)
            .collect();
        for chunk in present {
            let base = chunk * CHUNK;
            let (lo, hi) = (offset.saturating_sub(base), (end - base).min(CHUNK));
            if lo == 0 && hi == CHUNK {
                self.chunks.remove(&chunk);
            } else if let Some(bytes) = self.chunks.get_mut(&chunk) {
                Arc::make_mut(bytes)[lo as usize..hi as usize].fill(0);
            }
        }
    }
}

/// Splits the `len` bytes at `offset` at chunk boundaries into pieces
/// `(chunk, offset in chunk, offset in the range, length)`.
fn pieces(offset: u64, len: usize) -> impl Iterator<Item = (u64, usize, usize, usize)> {
    let mut pos = 0;
    std::iter::from_fn(move || {
        if pos == len {
            return None;
        }
        let at = offset + pos as u64;
        let in_chunk = (at % CHUNK) as usize;
        let n = (CHUNK_BYTES - in_chunk).min(len - pos);
        let piece = (at / CHUNK, in_chunk, pos, n);
        pos += n;
        Some(piece)
    })
}
