//! The zone store: space allocation, extents with reference counts, and the superblocks.

use crate::extent::{self, ExtentAddr, ExtentKind, EXTENT_ALIGN, EXTENT_HEADER_LEN};
use crate::framed::FramedBatch;
use crate::superblock::{Superblock, SLOT_OFFSETS, SUPERBLOCK_LEN};
use crate::{Result, ZoneError};
use foldhash::HashMap;
use parking_lot::Mutex;
use refs::ExtentRefs;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use stitch_patch::{BlockCache, PatchId};

mod ahead;
mod refs;

/// A zone's number: zone `z` covers bytes `z * zone_size ..` of the disk (zone 0 holds the
/// superblocks).
pub type ZoneId = u32;

/// Runs when an extent's reference count drops to zero (Goby's per-type garbage handler):
/// a run index, say, releases the blocks it points to.
pub type ReleaseHandler = Arc<dyn Fn(ExtentAddr) + Send + Sync>;

/// Appends of different streams go to different open zones, so what one writer appends in a
/// row stays contiguous on disk even while another writer appends too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Memtable flushes.
    Flush = 0,
    /// Merges and defragmentation.
    Merge = 1,
    /// A second merge running beside the first (a merge's blocks stay contiguous only if no
    /// other merge appends between them).
    SecondMerge = 2,
    /// Manifests, written (by merges, snapshots, defragmentation) while a flush may be writing
    /// its blocks: in the flush's stream one would split the flush's run into spans too short
    /// to stitch.
    Manifest = 3,
    /// Runs a writer writes whole (a batch's long sorted stretch of puts written straight
    /// into a run, a large transaction's spilled writes): apart from the flush's, so neither
    /// cuts the other's blocks into spans too short to stitch.
    Ingest = 4,
    /// Second copies of run indexes: in a zone of their own, so a run's index and its mirror
    /// never share a sector, and apart from manifests, which live for one checkpoint, so a
    /// long-lived run's mirror does not keep a zone of dead manifests from being freed.
    Mirror = 5,
    /// Chunks of large values: written once, whole, apart from runs, so a value's chunks lie
    /// back to back and a merge never cuts them.
    Large = 6,
}

const STREAMS: usize = 7;
const MIN_ZONE_SIZE: u64 = 64 * 1024;

/// The zeros [`ZoneStore::zero_zones`] writes per call: one write of about a millisecond here.
const ZERO_STEP: u64 = 1 << 20;

/// What `write_zeros` writes from, allocated at its first use and kept, so that a step does
/// not allocate and clear a megabyte again (a static array would add it to the binary).
static ZEROS: std::sync::LazyLock<Box<[u8]>> =
    std::sync::LazyLock::new(|| vec![0u8; ZERO_STEP as usize].into_boxed_slice());

/// How a [`ZoneStore`] divides and grows its disk.
#[derive(Debug, Clone)]
pub struct ZoneConfig {
    /// Bytes per zone: a multiple of 4096, at least 64 KiB and below 4 GiB.
    pub zone_size: u64,
    /// The store never grows past this many bytes (`None`: until the disk is full).
    pub max_size: Option<u64>,
    /// Bytes of free zones kept allocated in the file and reused before any other; zones
    /// freed beyond it are punched out, giving their space back to the file system. Writing
    /// over blocks the file system has allocated, and the page cache may still hold, costs
    /// a copy; writing into a punched range also allocates blocks and page-cache pages.
    pub recycle_bytes: u64,
    /// The most free zones [`ZoneStore::allocate_ahead`] keeps ahead beyond those held back
    /// (see [`Reserve`]): a quarter of the zones in use, at least one and at most this many
    /// (0: none), so that a writer moving to a new zone finds it in the file, and allocated
    /// where zones are backed, instead of asking the file system while it waits.
    pub ahead_zones: u64,
}

impl Default for ZoneConfig {
    fn default() -> Self {
        ZoneConfig {
            zone_size: 8 << 20,
            max_size: None,
            recycle_bytes: DEFAULT_RECYCLE_BYTES,
            ahead_zones: DEFAULT_AHEAD_ZONES,
        }
    }
}

/// The default of [`ZoneConfig::recycle_bytes`]: room for the output of a large merge.
pub const DEFAULT_RECYCLE_BYTES: u64 = 1 << 30;

/// The default of [`ZoneConfig::ahead_zones`]: 64 MiB of 8 MiB zones (for a store of 32
/// zones or more), room for a fast writer while the file system reads the allocation bitmaps
/// of a block group it has not cached.
pub const DEFAULT_AHEAD_ZONES: u64 = 8;

impl ZoneConfig {
    /// Checks the settings a new store would be made with (an existing store's zone size is
    /// its superblock's).
    pub fn validate(&self) -> Result<()> {
        if self.zone_size < MIN_ZONE_SIZE || self.zone_size % 4096 != 0 || self.zone_size >= 1 << 32
        {
            return Err(ZoneError::Config(format!(
                "zone size {} must be a multiple of 4096 between 64 KiB and 4 GiB",
                self.zone_size
            )));
        }
        Ok(())
    }
}

/// What a zone is used for right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ZoneUse {
    /// Zone 0: the superblocks.
    Super,
    /// Holds nothing; on the free, recycled or ready list (on none while it is being
    /// allocated ahead).
    Free,
    /// Extents are being appended here.
    Open,
    /// Holds extents; no more are appended (after a restart, every zone with live extents).
    Closed,
    /// Belongs whole to one owner (a log segment).
    Owned,
    /// Emptied; freed once no write into it is still pending (so no pending patch lands in
    /// a reused zone).
    Freeing,
    /// Open before `finish_open`: not yet known to hold anything.
    Unknown,
}

#[derive(Debug, Clone, Copy)]
struct Zone {
    usage: ZoneUse,
    /// Bytes of live extents (headers included).
    live: u64,
    /// Where the next extent goes (for an open zone).
    write_ptr: u64,
    /// What freeing the zone waits for besides the writes still live in it: the patch
    /// that stopped referencing it (a released owned zone), else none.
    free_after: PatchId,
}

struct State {
    zones: Vec<Zone>,
    /// Free zones whose space was punched out (or never written).
    free: BTreeSet<ZoneId>,
    /// Free zones kept allocated for reuse (at most `recycle_bytes` of them); taken first.
    recycled: BTreeSet<ZoneId>,
    /// Free zones allocated ahead of need and not written since (see
    /// [`ZoneStore::allocate_ahead`]); taken after the recycled ones.
    ready: BTreeSet<ZoneId>,
    open: [Option<ZoneId>; STREAMS],
    refs: ExtentRefs,
    handlers: HashMap<ExtentKind, ReleaseHandler>,
    superblock: Superblock,
    superblock_patch: PatchId,
    /// Zones emptied under the lock, to be handed to the cache's `when_committed` after it.
    to_free: Vec<(ZoneId, PatchId)>,
    /// Zones emptied (or found unused at open) that the older superblock slot may still
    /// reach, with the superblock sequence number that must be written before they are
    /// queued in `to_free`: see [`ZoneStore::write_superblock`].
    held: Vec<(ZoneId, u64)>,
    /// Zones the older superblock's checkpoint names, which [`ZoneStore::finish_open`] holds
    /// instead of freeing if nothing else claims them.
    older: BTreeSet<ZoneId>,
    /// Bytes appended since open (headers included), by kind.
    appended: BTreeMap<ExtentKind, u64>,
    /// Free zones held back from ordinary allocation.
    reserve: Reserve,
    /// Whether zones are backed now (see [`ZoneStore::update_backing`]): allocated before
    /// they are used, with the reserve's zones kept allocated.
    backed: bool,
    /// Zones taken while not backed that writes may still go to (open or owned, never
    /// allocated): what backing allocates besides the reserve.
    unbacked: BTreeSet<ZoneId>,
}

/// Free zones ordinary allocation leaves alone, so that a store that filled its disk can
/// still free space, and be opened (opening starts a new log and writes a checkpoint).
/// Log segments stop first (writers' data), merges next (which free room, but only once
/// done), then the other extent zones (flushes, which give log zones back, and manifests);
/// while the reserve is lifted (opening) every free zone may be taken.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reserve {
    /// Free zones a new log segment (or a zone for ingested runs) leaves.
    pub log: u64,
    /// Free zones a new zone for a merge's output leaves.
    pub merges: u64,
    /// Free zones any other new extent zone leaves.
    pub extents: u64,
}

/// Files free `zone`, whose bytes are `place` (offset, length): among the recycled zones if
/// fewer than `room` are, else on the free list once its space is punched out (punched first,
/// so no write into a reuse of the zone can be punched out). The zone joins a list even if
/// punching fails; the failure is returned.
fn file_free_zone(
    state: &Mutex<State>,
    cache: &BlockCache,
    zone: ZoneId,
    (offset, len): (u64, u64),
    room: u64,
) -> stitch_patch::Result<()> {
    {
        let mut st = state.lock();
        if (st.recycled.len() as u64) < room {
            st.recycled.insert(zone);
            return Ok(());
        }
    }
    let punched = cache.punch_hole(offset, len);
    state.lock().free.insert(zone);
    punched
}

/// A `NoSpace` error says how many zones were held back (see [`Reserve`]).
fn held_back(e: ZoneError, keep: u64) -> ZoneError {
    match e {
        ZoneError::NoSpace(why) if keep > 0 => ZoneError::NoSpace(format!(
            "{why} ({keep} free zones are held back to reopen the store and free space)"
        )),
        other => other,
    }
}

/// Counts for `stitchdb stats` and defragmentation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ZoneStats {
    /// Bytes per zone.
    pub zone_size: u64,
    /// Zones the disk holds.
    pub zones: u64,
    /// Zones holding nothing (or being freed).
    pub free_zones: u64,
    /// Free zones kept allocated in the file for reuse (see [`ZoneConfig::recycle_bytes`]).
    pub recycled_zones: u64,
    /// Free zones allocated ahead of need (see [`ZoneConfig::ahead_zones`]; counted in
    /// `free_zones` too).
    pub ready_zones: u64,
    /// Whether zones are backed (allocated before use, the reserve kept allocated), as they
    /// are once the device could run short (see [`Reserve`]).
    pub backed: bool,
    /// Zones emptied but held until the next superblock is durable, because the older
    /// superblock slot may still reach them (counted in `free_zones` too).
    pub held_zones: u64,
    /// Zones owned whole by a user of the store (log segments).
    pub owned_zones: u64,
    /// Zones extents are appended to (open or full).
    pub extent_zones: u64,
    /// Extents with a nonzero reference count.
    pub live_extents: u64,
    /// Bytes of those extents (headers included).
    pub live_bytes: u64,
    /// Bytes of extent zones not holding live extents (holes left by released extents).
    pub dead_bytes: u64,
    /// Live bytes of each extent zone, by zone id.
    pub zone_live: Vec<(ZoneId, u64)>,
    /// Bytes of extents appended since the store was opened (headers included), by kind, in
    /// kind order: what each kind of structure has cost in writes.
    pub appended: Vec<(ExtentKind, u64)>,
}

/// One store's zones. See the crate docs.
pub struct ZoneStore {
    cache: Arc<BlockCache>,
    config: ZoneConfig,
    state: Arc<Mutex<State>>,
    /// Serializes the appenders of each stream (see `append_to`).
    appenders: [Mutex<()>; STREAMS],
    /// Zones taken by [`alloc_zone`](Self::alloc_zone) whose zeros are still to be written
    /// (see [`write_zeros`](Self::write_zeros)), each with how many bytes from its start
    /// have them already. Held while zeros are written, so that a zone is never written to
    /// by its owner or given back while its zeros are.
    unzeroed: Mutex<BTreeMap<ZoneId, u64>>,
    /// Wakes the thread running [`allocate_ahead`](Self::allocate_ahead) when zones run short.
    ahead: ahead::Signal,
}

impl ZoneStore {
    /// Formats a new store on the cache's disk: zone 0 and an empty superblock, made durable.
    pub fn create(cache: Arc<BlockCache>, config: ZoneConfig) -> Result<ZoneStore> {
        config.validate()?;
        let disk = cache.disk().clone();
        if disk.len() < config.zone_size {
            disk.grow(config.zone_size)?;
        }
        let superblock = Superblock {
            seq: 0,
            zone_size: config.zone_size,
            block_size: cache.block_size() as u32,
            root: None,
        };
        let store = Self::with_zones(cache, config, superblock, disk.len());
        store.finish_open()?;
        // Both slots get a valid superblock, so a torn first update still finds one.
        store.write_superblock(None, &[])?;
        store.write_superblock(None, &[])?;
        store.cache.flush_all()?;
        Ok(store)
    }

    /// Opens a store: reads the superblocks and returns the newest valid one. Every other zone
    /// is `Unknown` until the upper layers [`claim_zone`](Self::claim_zone) and
    /// [`mark_live`](Self::mark_live) what they use and call [`finish_open`](Self::finish_open).
    pub fn open(cache: Arc<BlockCache>, config: ZoneConfig) -> Result<(ZoneStore, Superblock)> {
        let disk = cache.disk().clone();
        let mut best: Option<Superblock> = None;
        let mut errors = Vec::new();
        for (slot, &offset) in SLOT_OFFSETS.iter().enumerate() {
            let mut buf = vec![0u8; SUPERBLOCK_LEN];
            if offset + SUPERBLOCK_LEN as u64 > disk.len() {
                continue;
            }
            cache.read(offset, &mut buf)?;
            match Superblock::decode(&buf) {
                Ok(Some(sb)) if sb.slot() == slot => {
                    if best.is_none_or(|b| sb.seq > b.seq) {
                        best = Some(sb);
                    }
                }
                Ok(_) => {}
                Err(e) => errors.push(e),
            }
        }
        let Some(superblock) = best else {
            if let Some(e) = errors.pop() {
                return Err(e);
            }
            return Err(ZoneError::NotAStore(format!(
                "{}: neither superblock slot (bytes 0 and 4096) holds a valid StitchDB superblock",
                disk.describe()
            )));
        };
        let config = ZoneConfig {
            zone_size: superblock.zone_size,
            ..config
        };
        config.validate()?;
        if superblock.block_size as usize != cache.block_size() {
            return Err(ZoneError::Config(format!(
                "store uses {}-byte blocks, the cache {}",
                superblock.block_size,
                cache.block_size()
            )));
        }
        let store = Self::with_zones(cache, config, superblock, disk.len());
        Ok((store, superblock))
    }

    fn with_zones(
        cache: Arc<BlockCache>,
        config: ZoneConfig,
        superblock: Superblock,
        disk_len: u64,
    ) -> ZoneStore {
        let count = (disk_len / config.zone_size).max(1) as usize;
        let unknown = Zone {
            usage: ZoneUse::Unknown,
            live: 0,
            write_ptr: 0,
            free_after: PatchId::NONE,
        };
        let mut zones = vec![unknown; count];
        zones[0].usage = ZoneUse::Super;
        let state = State {
            zones,
            free: BTreeSet::new(),
            recycled: BTreeSet::new(),
            ready: BTreeSet::new(),
            open: [None; STREAMS],
            refs: ExtentRefs::default(),
            handlers: HashMap::default(),
            superblock,
            superblock_patch: PatchId::NONE,
            to_free: Vec::new(),
            held: Vec::new(),
            older: BTreeSet::new(),
            appended: BTreeMap::new(),
            reserve: Reserve::default(),
            backed: true,
            unbacked: BTreeSet::new(),
        };
        ZoneStore {
            cache,
            config,
            state: Arc::new(Mutex::new(state)),
            appenders: Default::default(),
            unzeroed: Mutex::new(BTreeMap::new()),
            ahead: ahead::Signal::default(),
        }
    }

    /// The block cache every write of the store goes through.
    pub fn cache(&self) -> &Arc<BlockCache> {
        &self.cache
    }

    /// Bytes per zone.
    pub fn zone_size(&self) -> u64 {
        self.config.zone_size
    }

    /// How many bytes the disk is short of a whole number of zones. A store grows by whole
    /// zones, so anything but 0 means the file was cut: extents or log records past the cut
    /// are gone.
    pub fn truncated_by(&self) -> u64 {
        let partial = self.cache.disk().len() % self.config.zone_size;
        if partial == 0 {
            0
        } else {
            self.config.zone_size - partial
        }
    }

    /// The disk byte where `zone` starts.
    pub fn zone_offset(&self, zone: ZoneId) -> u64 {
        zone as u64 * self.config.zone_size
    }

    /// Where the extent at `addr` starts on the disk (its header's first byte).
    fn extent_offset(&self, addr: ExtentAddr) -> u64 {
        self.zone_offset(addr.zone) + addr.offset as u64
    }

    /// The largest payload one extent can carry.
    pub fn max_payload(&self) -> usize {
        (self.config.zone_size as usize) - EXTENT_HEADER_LEN
    }

    /// The newest superblock (written or read).
    pub fn superblock(&self) -> Superblock {
        self.state.lock().superblock
    }

    /// The patch that wrote the newest superblock.
    pub fn superblock_patch(&self) -> PatchId {
        self.state.lock().superblock_patch
    }

    /// Makes `handler` run on every extent of `kind` whose reference count drops to zero.
    pub fn set_release_handler(&self, kind: ExtentKind, handler: ReleaseHandler) {
        self.state.lock().handlers.insert(kind, handler);
    }

    // ---- opening -------------------------------------------------------------------------

    /// At open: `zone` belongs whole to an owner (a log segment found by recovery).
    pub fn claim_zone(&self, zone: ZoneId) -> Result<()> {
        let mut st = self.state.lock();
        let z = Self::zone_mut(&mut st, zone)?;
        if z.usage != ZoneUse::Unknown {
            return Err(ZoneError::Corrupt {
                what: "zone map",
                place: format!("zone {zone}"),
                detail: format!("claimed twice or already in use ({:?})", z.usage),
            });
        }
        z.usage = ZoneUse::Owned;
        Ok(())
    }

    /// At open: the extent at `addr` is referenced by a live structure (once per reference).
    pub fn mark_live(&self, addr: ExtentAddr, kind: ExtentKind) -> Result<()> {
        let mut st = self.state.lock();
        self.check_addr(addr)?;
        let z = Self::zone_mut(&mut st, addr.zone)?;
        match z.usage {
            ZoneUse::Unknown => z.usage = ZoneUse::Closed,
            ZoneUse::Closed => {}
            other => {
                return Err(ZoneError::Corrupt {
                    what: "zone map",
                    place: format!("{addr}"),
                    detail: format!("extent in a zone that is {other:?}"),
                })
            }
        }
        match st.refs.get_mut(addr.zone, addr.offset) {
            Some(slot) => slot.refs += 1,
            None => {
                st.refs.insert(addr.zone, addr.offset, addr.len, kind, 1);
                st.zones[addr.zone as usize].live += addr.len as u64;
            }
        }
        Ok(())
    }

    /// At open: `zones` hold what the checkpoint of the older superblock slot names (its
    /// manifest, its runs, its log). Those [`finish_open`](Self::finish_open) finds unused
    /// are held until the next superblock is durable instead of freed: until it overwrites
    /// the older slot, that checkpoint is what repair falls back to if the newest slot or
    /// its manifest is damaged.
    pub fn keep_for_older_checkpoint(&self, zones: impl IntoIterator<Item = ZoneId>) {
        self.state.lock().older.extend(zones);
    }

    /// Ends opening: zones nobody claimed or marked are free, but for those the older
    /// checkpoint names ([`keep_for_older_checkpoint`](Self::keep_for_older_checkpoint)),
    /// freed once the next superblock is durable.
    pub fn finish_open(&self) -> Result<()> {
        let mut st = self.state.lock();
        let until = st.superblock.seq + 1;
        let older = std::mem::take(&mut st.older);
        let (mut freed, mut kept) = (Vec::new(), Vec::new());
        for (id, z) in st.zones.iter_mut().enumerate() {
            let id = id as ZoneId;
            if z.usage == ZoneUse::Unknown {
                if older.contains(&id) {
                    z.usage = ZoneUse::Freeing;
                    kept.push((id, until));
                } else {
                    z.usage = ZoneUse::Free;
                    freed.push(id);
                }
            }
        }
        st.held.extend(kept);
        let backed = self.update_backing(&mut st);
        drop(st);
        for zone in freed {
            let place = (self.zone_offset(zone), self.config.zone_size);
            // A free zone found here may have been punched out: it is kept for reuse (as
            // recycled zones are, with their blocks allocated) only once it has blocks again,
            // and only while zones are backed: otherwise it is punched out, and its blocks,
            // if it had any, go back to the file system.
            let room = self.recycle_room();
            let kept = backed
                && (self.state.lock().recycled.len() as u64) < room
                && self.cache.disk().allocate(place.0, place.1).is_ok();
            let room = if kept { room } else { 0 };
            file_free_zone(&self.state, &self.cache, zone, place, room)?;
        }
        Ok(())
    }

    /// How many free zones are kept allocated for reuse.
    fn recycle_room(&self) -> u64 {
        self.config.recycle_bytes / self.config.zone_size
    }

    // ---- extents ---------------------------------------------------------------------------

    /// Appends an extent holding `payload` to the [`Stream::Flush`] zone, to reach the disk
    /// after `deps`. Its reference count starts at one. Returns its address and the patch
    /// that writes it.
    pub fn append(
        &self,
        kind: ExtentKind,
        payload: &[u8],
        deps: &[PatchId],
    ) -> Result<(ExtentAddr, PatchId)> {
        self.append_to(Stream::Flush, kind, payload, deps)
    }

    /// [`append`](Self::append) into the open zone of `stream` (a batch of one extent:
    /// see [`append_batch`](Self::append_batch)).
    pub fn append_to(
        &self,
        stream: Stream,
        kind: ExtentKind,
        payload: &[u8],
        deps: &[PatchId],
    ) -> Result<(ExtentAddr, PatchId)> {
        let mut batch =
            FramedBatch::with_capacity(EXTENT_HEADER_LEN + payload.len() + EXTENT_ALIGN as usize);
        batch.push(payload);
        let (addrs, patches) = self.append_batch(stream, kind, &mut batch, deps)?;
        // One extent: one stretch, one write.
        Ok((addrs[0], patches[0]))
    }

    /// Appends every extent of `batch` (of `kind`) to `stream`'s zones in order, back to back
    /// at aligned offsets, with one reservation, one cache write and one patch for each
    /// stretch that fits in one zone
    /// (see [`FramedBatch`]). Returns the extents' addresses, each with reference count one,
    /// and the patches writing them; the batch is emptied. On a failure nothing of the batch
    /// stays referenced.
    pub fn append_batch(
        &self,
        stream: Stream,
        kind: ExtentKind,
        batch: &mut FramedBatch,
        deps: &[PatchId],
    ) -> Result<(Vec<ExtentAddr>, Vec<PatchId>)> {
        let mut addrs = Vec::with_capacity(batch.len());
        let mut patches = Vec::new();
        let appended =
            self.append_batch_stretches(stream, kind, batch, deps, &mut addrs, &mut patches);
        batch.clear();
        match appended {
            Ok(()) => Ok((addrs, patches)),
            Err(e) => {
                // The stretches written before the failure are named by nothing.
                if let Err(d) = self.decref_all(addrs) {
                    tracing::warn!("releasing the extents of a failed batch: {d}");
                }
                Err(e)
            }
        }
    }

    /// [`append_batch`](Self::append_batch)'s work: each pass reserves the longest stretch of
    /// the extents left that fits in the stream's open zone (opening another if not even the
    /// first does), writes it, and records its extents in `addrs`.
    fn append_batch_stretches(
        &self,
        stream: Stream,
        kind: ExtentKind,
        batch: &mut FramedBatch,
        deps: &[PatchId],
        addrs: &mut Vec<ExtentAddr>,
        patches: &mut Vec<PatchId>,
    ) -> Result<()> {
        for &(_, len) in &batch.extents {
            if len as u64 > self.config.zone_size {
                let addr = ExtentAddr {
                    zone: 0,
                    offset: 0,
                    len: len.min(u32::MAX as usize) as u32,
                };
                return Err(ZoneError::TooLarge(addr, self.config.zone_size));
            }
        }
        // One appender per stream at a time, so appends land in their zone in the order their
        // space was reserved (an append assumes the bytes after it in its last block are
        // unwritten). The state lock is held only to reserve and to record: the checksums
        // and the cache writes run outside it, where log appends, reference counting and
        // reads need not wait for them.
        let _serial = self.appenders[stream as usize].lock();
        let mut next = 0;
        while next < batch.len() {
            let from = next;
            let (zone, base, to) = self.or_release_held(|| {
                let mut st = self.state.lock();
                let first = batch.extents[from].1 as u64;
                let zone = self.zone_with_room(&mut st, stream, first)?;
                let z = &mut st.zones[zone as usize];
                let room = self.config.zone_size - z.write_ptr;
                let to = (from + 1..=batch.len())
                    .take_while(|&to| batch.span(from, to).len() as u64 <= room)
                    .last()
                    .unwrap_or(from + 1);
                let base = z.write_ptr;
                let live: u64 = batch.extents[from..to].iter().map(|&(_, l)| l as u64).sum();
                z.write_ptr =
                    (base + batch.span(from, to).len() as u64).next_multiple_of(EXTENT_ALIGN);
                // Counted live from the reservation on, so the zone cannot be freed under the
                // write.
                z.live += live;
                *st.appended.entry(kind).or_default() += live;
                Ok((zone, base, to))
            })?;
            let span = batch.span(from, to);
            let stretch: Vec<ExtentAddr> = batch.extents[from..to]
                .iter()
                .map(|&(start, len)| ExtentAddr {
                    zone,
                    offset: (base + (start - span.start) as u64) as u32,
                    len: len as u32,
                })
                .collect();
            for (addr, &(start, len)) in stretch.iter().zip(&batch.extents[from..to]) {
                let (head, payload) = batch.buf[start..start + len].split_at_mut(EXTENT_HEADER_LEN);
                head.copy_from_slice(&extent::encode_header(*addr, kind, payload));
            }
            let at = self.extent_offset(stretch[0]);
            let written = self.cache.write_append(at, &batch.buf[span], deps);
            let mut st = self.state.lock();
            match written {
                Ok(patch) => {
                    for addr in &stretch {
                        st.refs.insert(addr.zone, addr.offset, addr.len, kind, 1);
                    }
                    drop(st);
                    patches.push(patch);
                    addrs.extend(stretch);
                }
                Err(e) => {
                    // The reserved space stays skipped; it just no longer counts as live.
                    for addr in &stretch {
                        Self::drop_live(&mut st, addr.zone, addr.len as u64);
                    }
                    drop(st);
                    self.schedule_frees();
                    return Err(e.into());
                }
            }
            next = to;
        }
        // Closing the stream's previous zone may have left one to free.
        self.schedule_frees();
        Ok(())
    }

    fn zone_with_room(&self, st: &mut State, stream: Stream, total: u64) -> Result<ZoneId> {
        if let Some(open) = st.open[stream as usize] {
            if st.zones[open as usize].write_ptr + total <= self.config.zone_size {
                return Ok(open);
            }
            st.open[stream as usize] = None;
            Self::retire(st, open, ZoneUse::Closed);
        }
        // Ingested and spilled runs are writers' data, as the log is: they stop where the
        // log does. A merge stops while a checkpoint still fits, so merges never take the
        // room a flush needs to give the log's zones back. A mirror is a second copy: on a
        // full device it is what goes unwritten (the run goes without one), never the flush
        // or merge that would free room.
        let keep = match stream {
            Stream::Ingest | Stream::Large => st.reserve.log,
            Stream::Merge | Stream::SecondMerge => st.reserve.merges,
            Stream::Mirror => st.reserve.extents + 1,
            Stream::Flush | Stream::Manifest => st.reserve.extents,
        };
        let (zone, _) = self.take_free_zone(st, keep)?;
        st.refs.clear_zone(zone);
        st.zones[zone as usize] = Zone {
            usage: ZoneUse::Open,
            live: 0,
            write_ptr: 0,
            free_after: PatchId::NONE,
        };
        st.open[stream as usize] = Some(zone);
        Ok(zone)
    }

    /// Reads and verifies the extent at `addr`, which must hold `kind`.
    pub fn read(&self, addr: ExtentAddr, kind: ExtentKind) -> Result<Vec<u8>> {
        self.check_addr(addr)?;
        let mut bytes = vec![0u8; addr.len as usize];
        let disk_offset = self.extent_offset(addr);
        self.cache.read(disk_offset, &mut bytes)?;
        extent::decode(addr, kind, bytes, disk_offset)
    }

    /// Every intact extent found in `zone`, in the order they lie: checked at each aligned
    /// offset, stepping over each one found. Dead extents are found too (whatever of an
    /// earlier life of the zone is intact): for repair, which looks for the blocks a damaged
    /// run index no longer lists and must check what it finds against the run.
    pub fn extents_in(&self, zone: ZoneId) -> Result<Vec<(ExtentAddr, ExtentKind)>> {
        let size = self.config.zone_size as usize;
        let fits = (zone as u64 + 1) * self.config.zone_size <= self.cache.disk().len();
        if zone == 0 || !fits {
            return Ok(Vec::new());
        }
        let mut buf = vec![0u8; size];
        self.cache.read(self.zone_offset(zone), &mut buf)?;
        let mut found = Vec::new();
        let mut at = 0usize;
        while at + EXTENT_HEADER_LEN <= size {
            let header = &buf[at..at + EXTENT_HEADER_LEN];
            let payload = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
            let len = payload as usize + EXTENT_HEADER_LEN;
            let addr = ExtentAddr {
                zone,
                offset: at as u32,
                len: len as u32,
            };
            let kind = ExtentKind(header[3]);
            let intact =
                at + len <= size && extent::verify(addr, kind, &buf[at..at + len], 0).is_ok();
            at = if intact {
                found.push((addr, kind));
                addr.aligned_end() as usize
            } else {
                at + EXTENT_ALIGN as usize
            };
        }
        Ok(found)
    }

    /// [`read`](Self::read) straight from the disk, bypassing the block cache: for extents
    /// known to be durable (a run's blocks once the checkpoint naming the run is), so a read
    /// costs one disk read and no cache churn. Returns the verified extent whole: its payload
    /// starts at [`EXTENT_HEADER_LEN`] (not moving it to the front
    /// saves a copy of every block read).
    pub fn read_durable_framed(&self, addr: ExtentAddr, kind: ExtentKind) -> Result<Vec<u8>> {
        self.read_durable_verified(addr, kind, None)
    }

    /// [`read_durable_framed`](Self::read_durable_framed) of an extent whose payload's CRC-32C
    /// its referrer holds (a large value's chunk): the payload must have that checksum too,
    /// and is checksummed once for both.
    pub fn read_durable_framed_checked(
        &self,
        addr: ExtentAddr,
        kind: ExtentKind,
        payload_crc: u32,
    ) -> Result<Vec<u8>> {
        self.read_durable_verified(addr, kind, Some(payload_crc))
    }

    /// The extent at `addr` read from the disk and verified, its payload against
    /// `payload_crc` too if given.
    fn read_durable_verified(
        &self,
        addr: ExtentAddr,
        kind: ExtentKind,
        payload_crc: Option<u32>,
    ) -> Result<Vec<u8>> {
        self.check_addr(addr)?;
        let disk_offset = self.extent_offset(addr);
        let bytes = self
            .cache
            .disk()
            .read_vec_at(disk_offset, addr.len as usize)?;
        extent::verify_with(addr, kind, &bytes, disk_offset, payload_crc)?;
        Ok(bytes)
    }

    /// The extent at `addr` whole (header in front), checked, read through the block cache:
    /// for an extent whose blocks may not have reached the disk yet.
    pub fn read_framed(&self, addr: ExtentAddr, kind: ExtentKind) -> Result<Vec<u8>> {
        self.check_addr(addr)?;
        let disk_offset = self.extent_offset(addr);
        let mut bytes = vec![0u8; addr.len as usize];
        self.cache.read(disk_offset, &mut bytes)?;
        extent::verify(addr, kind, &bytes, disk_offset)?;
        Ok(bytes)
    }

    /// [`read_durable_framed`](Self::read_durable_framed) for extents that lie back to back
    /// on disk (each [`follows`](ExtentAddr::follows) the one before), in one disk read:
    /// each returned whole and verified. Fails if they do not follow one another.
    pub fn read_durable_framed_span(
        &self,
        addrs: &[ExtentAddr],
        kind: ExtentKind,
    ) -> Result<Vec<Vec<u8>>> {
        let (Some(first), Some(last)) = (addrs.first(), addrs.last()) else {
            return Ok(Vec::new());
        };
        for pair in addrs.windows(2) {
            if !pair[1].follows(&pair[0]) {
                return Err(ZoneError::Corrupt {
                    what: "extent span",
                    place: format!("{} after {}", pair[1], pair[0]),
                    detail: "the extents are not back to back".into(),
                });
            }
        }
        for &addr in addrs {
            self.check_addr(addr)?;
        }
        // Each extent is read with the alignment bytes after it into a vector of its own
        // (one request, no copy), then cut to its length.
        let start = self.extent_offset(*first);
        let mut lens: Vec<usize> = addrs
            .windows(2)
            .map(|pair| (self.extent_offset(pair[1]) - self.extent_offset(pair[0])) as usize)
            .collect();
        lens.push(last.len as usize);
        let pieces = self.cache.disk().read_vecs_at(start, &lens)?;
        addrs
            .iter()
            .zip(pieces)
            .map(|(&addr, mut framed)| {
                framed.truncate(addr.len as usize);
                extent::verify(addr, kind, &framed, self.extent_offset(addr))?;
                Ok(framed)
            })
            .collect()
    }

    fn check_addr(&self, addr: ExtentAddr) -> Result<()> {
        let zones = self.cache.disk().len() / self.config.zone_size;
        let fits = (addr.len as usize) >= EXTENT_HEADER_LEN
            && addr.zone >= 1
            && (addr.zone as u64) < zones
            && addr.offset as u64 + addr.len as u64 <= self.config.zone_size;
        if !fits {
            return Err(ZoneError::Corrupt {
                what: "extent address",
                place: format!("{addr}"),
                detail: format!(
                    "outside the store ({zones} zones of {} bytes)",
                    self.config.zone_size
                ),
            });
        }
        Ok(())
    }

    /// Adds a reference to a live extent. Fails on an extent whose count already reached zero
    /// (Goby: a dying extent cannot be revived).
    pub fn incref(&self, addr: ExtentAddr) -> Result<()> {
        self.incref_all(&[addr])
    }

    /// [`incref`](Self::incref) for many extents under one lock (a merge stitching a span of
    /// blocks): all of them, or none if one is dead.
    pub fn incref_all(&self, addrs: &[ExtentAddr]) -> Result<()> {
        let mut st = self.state.lock();
        // One lookup an extent (a merge stitches thousands): counted as found, and on a dead
        // one the counts already taken are given back.
        for (i, addr) in addrs.iter().enumerate() {
            match st.refs.get_mut(addr.zone, addr.offset) {
                Some(slot) => slot.refs += 1,
                None => {
                    for taken in &addrs[..i] {
                        if let Some(slot) = st.refs.get_mut(taken.zone, taken.offset) {
                            slot.refs -= 1;
                        }
                    }
                    return Err(ZoneError::Dead(*addr));
                }
            }
        }
        Ok(())
    }

    /// Drops a reference. At zero the extent's release handler runs and its bytes stop
    /// counting as live; a zone left with nothing live is freed once its writes are durable.
    /// Call it only once no durable root can reach the extent any more.
    pub fn decref(&self, addr: ExtentAddr) -> Result<()> {
        self.decref_all([addr])
    }

    /// [`decref`](Self::decref) for many extents under one lock (a dropped run releases
    /// every block it holds). Every address is processed; the first failure is returned.
    pub fn decref_all(&self, addrs: impl IntoIterator<Item = ExtentAddr>) -> Result<()> {
        let mut released = Vec::new();
        let mut first_error = None;
        let mut st = self.state.lock();
        for addr in addrs {
            let Some(slot) = st.refs.get_mut(addr.zone, addr.offset) else {
                first_error.get_or_insert(ZoneError::Dead(addr));
                continue;
            };
            slot.refs -= 1;
            if slot.refs > 0 {
                continue;
            }
            let (len, kind) = (slot.len as u64, slot.kind);
            st.refs.release(addr.zone, addr.offset);
            Self::drop_live(&mut st, addr.zone, len);
            released.push((addr, st.handlers.get(&kind).cloned()));
        }
        drop(st);
        self.schedule_frees();
        for (addr, handler) in released {
            if let Some(handler) = handler {
                handler(addr);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Zones worth evacuating: holding extents, not open, with live bytes below `max_live_ratio`
    /// of the zone. Ordered as the VT-tree orders them: zones whose live data lies in fewer,
    /// longer contiguous spans first (moving them makes the most room per copy), then by live
    /// bytes.
    pub fn evacuation_candidates(&self, max_live_ratio: f64) -> Vec<ZoneId> {
        let st = self.state.lock();
        let limit = (self.config.zone_size as f64 * max_live_ratio) as u64;
        let mut candidates: Vec<(usize, u64, ZoneId)> = st
            .zones
            .iter()
            .enumerate()
            .filter(|(_, z)| z.usage == ZoneUse::Closed && z.live > 0 && z.live < limit)
            .map(|(id, z)| {
                let id = id as ZoneId;
                let live: Vec<(u32, u32)> = st.refs.live_in(id).collect();
                let spans = 1 + live
                    .windows(2)
                    .filter(|w| {
                        (w[0].0 as u64 + w[0].1 as u64).next_multiple_of(EXTENT_ALIGN)
                            != w[1].0 as u64
                    })
                    .count();
                (spans, z.live, id)
            })
            .collect();
        candidates.sort_unstable();
        candidates.into_iter().map(|(_, _, id)| id).collect()
    }

    /// Reference count of an extent (0 if not live).
    pub fn refs(&self, addr: ExtentAddr) -> u32 {
        self.state
            .lock()
            .refs
            .get(addr.zone, addr.offset)
            .map_or(0, |slot| slot.refs)
    }

    // ---- whole zones -----------------------------------------------------------------------

    /// Takes a free zone for one owner (a log segment). The old contents of a zone used
    /// before are not cleared; a zone never written is filled with zeros (see
    /// `write_zeros`) by [`zero_zones`](Self::zero_zones) on a background thread, until
    /// its owner calls [`zone_ready`](Self::zone_ready) before its first write into it.
    pub fn alloc_zone(&self) -> Result<ZoneId> {
        let (zone, recycled) = self.or_release_held(|| {
            let mut st = self.state.lock();
            let keep = st.reserve.log;
            let (zone, recycled) = self.take_free_zone(&mut st, keep)?;
            st.refs.clear_zone(zone);
            st.zones[zone as usize] = Zone {
                usage: ZoneUse::Owned,
                live: 0,
                write_ptr: 0,
                free_after: PatchId::NONE,
            };
            Ok((zone, recycled))
        })?;
        if !recycled {
            self.unzeroed.lock().insert(zone, 0);
        }
        Ok(zone)
    }

    /// Makes `zone` (taken by [`alloc_zone`](Self::alloc_zone)) ready for its owner's first
    /// write: no zeros are written into it from now on (a step under way ends first). What
    /// the background did not zero yet stays unwritten: zeros only save the syncs of a log
    /// that appends slowly the change of the file's block map (see `write_zeros`), and
    /// such a log leaves the background time to zero its next zone whole. A log that
    /// outruns the background gains little from them, and zeroing the rest here would stall
    /// every commit behind the one moving the log.
    pub fn zone_ready(&self, zone: ZoneId) {
        self.unzeroed.lock().remove(&zone);
    }

    /// Writes the next `ZERO_STEP` (1 MiB) of zeros of the zones taken but not zeroed yet:
    /// for a background thread's every turn, so that the log, which takes its next zone a
    /// segment ahead, finds it ready instead of zeroing it while a commit waits, and so that
    /// the thread's other work waits for no more than one step.
    pub fn zero_zones(&self) {
        let mut unzeroed = self.unzeroed.lock();
        let Some((&zone, &done)) = unzeroed.first_key_value() else {
            return;
        };
        let to = (done + ZERO_STEP).min(self.config.zone_size);
        if self.write_zeros(zone, done, to) && to < self.config.zone_size {
            unzeroed.insert(zone, to);
        } else {
            unzeroed.remove(&zone);
        }
    }

    /// Writes zeros over bytes `from..to` of an owned zone whose blocks were never written
    /// (new, or punched out), and starts writing them back; returns whether it could. On a
    /// file system, the first write into a block also changes the file's block map, which
    /// the next sync writes too: a log appending small synced records into such a zone would pay
    /// that second write on every sync. Zeros are what
    /// a never-written zone reads as anyway, and the log allocates its next zone a segment
    /// ahead, so the zeros, written meanwhile by a background thread, are on the disk before
    /// the log reaches them. A failure only loses the speed-up.
    fn write_zeros(&self, zone: ZoneId, from: u64, to: u64) -> bool {
        let start = self.zone_offset(zone);
        let disk = self.cache.disk();
        let mut at = start + from;
        while at < start + to {
            let n = (start + to - at).min(ZERO_STEP) as usize;
            if let Err(e) = disk.write_at(at, &ZEROS[..n]) {
                tracing::warn!("writing zeros over new log zone {zone}: {e}");
                return false;
            }
            at += n as u64;
        }
        disk.start_writeback(start + from, to.saturating_sub(from));
        true
    }

    /// Runs `take` (which takes a zone); if the store is out of space, frees the zones held
    /// for the older superblock's checkpoint at once (after a flush) and runs it again. Writing on matters
    /// more than keeping that checkpoint whole for repair: it only backs up the newest, and
    /// repair reports whatever of it was overwritten (its checksums fail).
    fn or_release_held<T>(&self, take: impl Fn() -> Result<T>) -> Result<T> {
        match take() {
            Err(ZoneError::NoSpace(_)) if self.release_held() => {
                // A zone is freed once the writes into it are durable: flushing gets them
                // there now (this is the rare path of a full store).
                self.cache.flush_all()?;
                take()
            }
            taken => taken,
        }
    }

    /// Queues every held zone for freeing as if nothing held it (once its writes and what
    /// its release named are durable); returns whether there were any.
    fn release_held(&self) -> bool {
        let mut st = self.state.lock();
        let held = std::mem::take(&mut st.held);
        if held.is_empty() {
            return false;
        }
        tracing::warn!(
            zones = held.len(),
            "out of space: zones the older superblock's checkpoint may still name are freed \
             now, so repair can no longer fall back to that checkpoint whole"
        );
        let due: Vec<(ZoneId, PatchId)> = held
            .into_iter()
            .map(|(zone, _)| (zone, st.zones[zone as usize].free_after))
            .collect();
        st.to_free.extend(due);
        drop(st);
        self.schedule_frees();
        true
    }

    /// Gives back an owned zone, once `after` is committed (the checkpoint that stopped
    /// referencing it), every write into it is too, and so is the superblock after the newest
    /// one written now (the older slot may still name the zone: see
    /// [`write_superblock`](Self::write_superblock)).
    pub fn release_zone(&self, zone: ZoneId, after: PatchId) -> Result<()> {
        self.unzeroed.lock().remove(&zone);
        let mut st = self.state.lock();
        let z = Self::zone_mut(&mut st, zone)?;
        if z.usage != ZoneUse::Owned {
            return Err(ZoneError::Corrupt {
                what: "zone map",
                place: format!("zone {zone}"),
                detail: format!("released but not owned ({:?})", z.usage),
            });
        }
        z.free_after = after;
        Self::retire(&mut st, zone, ZoneUse::Freeing);
        drop(st);
        self.schedule_frees();
        Ok(())
    }

    /// Stops counting `len` bytes of `zone` as live; a closed zone left with nothing live
    /// goes to `Freeing`.
    fn drop_live(st: &mut State, zone: ZoneId, len: u64) {
        let z = &mut st.zones[zone as usize];
        z.live -= len;
        if z.live == 0 && z.usage == ZoneUse::Closed {
            Self::retire(st, zone, ZoneUse::Freeing);
        }
    }

    /// Moves a zone to `usage`. A zone left empty goes to `Freeing` and is held until the
    /// superblock after the newest one written is (see
    /// [`write_superblock`](Self::write_superblock)).
    fn retire(st: &mut State, zone: ZoneId, usage: ZoneUse) {
        // Nothing more is written into it.
        st.unbacked.remove(&zone);
        let z = &mut st.zones[zone as usize];
        z.usage = usage;
        if usage == ZoneUse::Closed && z.live == 0 {
            z.usage = ZoneUse::Freeing;
        }
        if z.usage == ZoneUse::Freeing {
            let until = st.superblock.seq + 1;
            st.held.push((zone, until));
        }
    }

    /// Returns queued zones to the free list once every write still live in them (and what
    /// a release said to wait for) is committed, so a pending patch can never land in a zone
    /// that was reused meanwhile. Called without the lock held: the cache may run the action
    /// at once.
    fn schedule_frees(&self) {
        let queued = std::mem::take(&mut self.state.lock().to_free);
        for (zone, free_after) in queued {
            let state = Arc::downgrade(&self.state);
            let cache = self.cache.clone();
            let (offset, len) = (self.zone_offset(zone), self.config.zone_size);
            let recycle_room = self.recycle_room();
            self.cache.when_range_committed(
                offset,
                len,
                free_after,
                Box::new(move || {
                    let Some(state) = state.upgrade() else { return };
                    {
                        let mut st = state.lock();
                        if st.zones[zone as usize].usage != ZoneUse::Freeing {
                            return;
                        }
                        st.zones[zone as usize].usage = ZoneUse::Free;
                    }
                    // Punching only returns space: if it fails the zone holds garbage, never
                    // harm.
                    let _ = file_free_zone(&state, &cache, zone, (offset, len), recycle_room);
                }),
            );
        }
    }

    /// Holds back free zones from here on (see [`Reserve`]); the store grows to keep them.
    /// [`Reserve::default`] lifts it.
    pub fn set_reserve(&self, reserve: Reserve) {
        self.state.lock().reserve = reserve;
    }

    /// Takes a free zone, leaving at least `keep` free ones. Says whether the zone was
    /// recycled (its blocks written before). Recycled zones go first, then ready ones.
    ///
    /// While zones are backed (see [`update_backing`](Self::update_backing)), the zones left
    /// are allocated ones (recycled or ready): zones whose blocks are allocated, so they can
    /// be written even on a file system with no room left; any other zone (punched out, or
    /// new) is allocated here, so a full device fails the allocation here, with nothing
    /// written, rather than a write into the zone later; such zones also make up the kept
    /// ones where too few are allocated. Otherwise, the device has room for all of them to
    /// spare: zones are taken and kept as they are, the store growing (sparse) to keep them,
    /// and a zone taken without blocks takes them as it is written.
    fn take_free_zone(&self, st: &mut State, keep: u64) -> Result<(ZoneId, bool)> {
        if !self.update_backing(st) {
            let taken = loop {
                if Self::free_count(st) > keep {
                    if let Some(zone) = st.recycled.pop_first() {
                        break (zone, true);
                    }
                    if let Some(zone) = st.ready.pop_first() {
                        break (zone, false);
                    }
                    if let Some(zone) = st.free.pop_first() {
                        st.unbacked.insert(zone);
                        break (zone, false);
                    }
                }
                let zone = self.grow_zone(st).map_err(|e| held_back(e, keep))?;
                st.free.insert(zone);
            };
            self.want_ahead(st);
            return Ok(taken);
        }
        let taken = loop {
            if Self::allocated(st) > keep {
                if let Some(zone) = st.recycled.pop_first() {
                    break (zone, true);
                }
                if let Some(zone) = st.ready.pop_first() {
                    break (zone, false);
                }
            }
            let zone = match st.free.pop_first() {
                Some(zone) => zone,
                None => self.grow_zone(st).map_err(|e| held_back(e, keep))?,
            };
            if let Err(e) = self.allocate_blocks(zone) {
                st.free.insert(zone);
                return Err(held_back(e, keep));
            }
            if Self::allocated(st) < keep {
                st.ready.insert(zone);
            } else {
                break (zone, false);
            }
        };
        self.want_ahead(st);
        Ok(taken)
    }

    /// Whether more than `keep(reserve)` free zones are allocated (recycled or ready),
    /// allocating more (punched-out zones, or new ones at the end of the disk, or, on a full
    /// disk, the zones held for the older checkpoint, as taking a zone would) to make it so;
    /// false if the disk has no room for them. While zones are not backed (the device has
    /// room to spare: `update_backing`), free zones of any kind count, and the store grows
    /// to have them. A writer asks before it commits what must later be
    /// flushed and merged (see [`Reserve`]).
    pub fn has_room_beyond(&self, keep: impl Fn(&Reserve) -> u64) -> bool {
        self.or_release_held(|| self.allocate_beyond(&keep)).is_ok()
    }

    fn allocate_beyond(&self, keep: &impl Fn(&Reserve) -> u64) -> Result<()> {
        let mut st = self.state.lock();
        if !st.backed {
            while Self::free_count(&st) <= keep(&st.reserve) {
                let zone = self.grow_zone(&mut st)?;
                st.free.insert(zone);
            }
            return Ok(());
        }
        while Self::allocated(&st) <= keep(&st.reserve) {
            let zone = match st.free.pop_first() {
                Some(zone) => zone,
                None => self.grow_zone(&mut st)?,
            };
            if let Err(e) = self.allocate_blocks(zone) {
                st.free.insert(zone);
                return Err(e);
            }
            st.ready.insert(zone);
        }
        Ok(())
    }

    /// The zones held back now (see [`set_reserve`](Self::set_reserve)).
    pub fn reserve(&self) -> Reserve {
        self.state.lock().reserve
    }

    /// Allocates `zone`'s blocks on the device (see [`Disk::allocate`]); a device without
    /// room for them is `NoSpace`.
    ///
    /// [`Disk::allocate`]: stitch_io::Disk::allocate
    fn allocate_blocks(&self, zone: ZoneId) -> Result<()> {
        self.cache
            .disk()
            .allocate(self.zone_offset(zone), self.config.zone_size)
            .map_err(|e| match e.kind {
                stitch_io::IoErrorKind::NoSpace => ZoneError::NoSpace(e.to_string()),
                _ => ZoneError::Io(e),
            })
    }

    /// Free zones whose blocks are allocated: recycled and ready ones.
    fn allocated(st: &State) -> u64 {
        (st.recycled.len() + st.ready.len()) as u64
    }

    /// Free zones on any list: recycled, ready, or without blocks.
    fn free_count(st: &State) -> u64 {
        (st.recycled.len() + st.ready.len() + st.free.len()) as u64
    }

    /// The most free zones any allocation leaves (see [`Reserve`]): those the reserve holds
    /// back.
    fn held_back(st: &State) -> u64 {
        let r = st.reserve;
        r.log.max(r.merges).max(r.extents + 1)
    }

    /// Decides whether zones are backed from now on, and returns it: whether the device
    /// the store lives on could run short of the blocks the store counts on. A disk that
    /// cannot tell ([`Disk::space`] is `None`: memory, simulated disks, block devices, whose
    /// bytes are all theirs) always is. A file is backed while its file system has less
    /// room available than the watermark: the reserve's zones, twice the zones the store
    /// writes into that are not allocated (and one it may take next), and 1/64 of the
    /// device. So the store's own writes cannot fill the device between two zones taken
    /// (each zone taken checks): at the check that first finds it under the watermark,
    /// the room left holds the reserve and every zone being written, which this check then
    /// allocates. What stays unguarded is another writer on the same device taking more
    /// than that margin between two checks (zones taken, and the background allocator's
    /// look every second): the reserve may then be left without blocks, as the zone
    /// being written may, so a store that filled its disk could not reopen read-write
    /// until room is freed on the device.
    ///
    /// [`Disk::space`]: stitch_io::Disk::space
    fn update_backing(&self, st: &mut State) -> bool {
        let backed = match self.cache.disk().space() {
            None => true,
            Some(space) => {
                let zones = Self::held_back(st) + 2 * (st.unbacked.len() as u64 + 1);
                let watermark = zones * self.config.zone_size + space.total / 64;
                space.available < watermark
            }
        };
        if backed && !st.backed {
            self.back(st);
        }
        st.backed = backed;
        backed
    }

    /// Allocates what zones being backed needs: the blocks of the zones being written that
    /// have none, and the reserve's zones. A failure (another writer took the room) is
    /// logged; a zone taken later meets it too.
    fn back(&self, st: &mut State) {
        let unbacked: Vec<ZoneId> = st.unbacked.iter().copied().collect();
        for zone in unbacked {
            match self.allocate_blocks(zone) {
                Ok(()) => {
                    st.unbacked.remove(&zone);
                }
                Err(e) => tracing::warn!("the device runs short: allocating zone {zone}: {e}"),
            }
        }
        while Self::allocated(st) < Self::held_back(st) {
            let zone = match st.free.pop_first() {
                Some(zone) => zone,
                None => match self.grow_zone(st) {
                    Ok(zone) => zone,
                    Err(e) => {
                        tracing::warn!("the device runs short: growing for the reserve: {e}");
                        return;
                    }
                },
            };
            if let Err(e) = self.allocate_blocks(zone) {
                tracing::warn!("the device runs short: allocating the reserve: {e}");
                st.free.insert(zone);
                return;
            }
            st.ready.insert(zone);
        }
    }

    /// Adds a zone at the end of the disk: a free one, on no list yet, its blocks not yet
    /// allocated.
    fn grow_zone(&self, st: &mut State) -> Result<ZoneId> {
        let zone = st.zones.len() as ZoneId;
        let new_len = self.len_with_zone(st)?;
        self.cache.disk().grow(new_len).map_err(|e| match e.kind {
            stitch_io::IoErrorKind::NoSpace => ZoneError::NoSpace(e.to_string()),
            _ => ZoneError::Io(e),
        })?;
        st.zones.push(Zone {
            usage: ZoneUse::Free,
            live: 0,
            write_ptr: 0,
            free_after: PatchId::NONE,
        });
        Ok(zone)
    }

    /// The disk's length with one more zone, if the store may grow to it.
    fn len_with_zone(&self, st: &State) -> Result<u64> {
        let new_len = (st.zones.len() as u64 + 1) * self.config.zone_size;
        if self.config.max_size.is_some_and(|max| new_len > max) {
            return Err(ZoneError::NoSpace(format!(
                "the store reached its size limit of {} bytes",
                self.config.max_size.unwrap_or(0)
            )));
        }
        Ok(new_len)
    }

    fn zone_mut(st: &mut State, zone: ZoneId) -> Result<&mut Zone> {
        st.zones
            .get_mut(zone as usize)
            .filter(|_| zone != 0)
            .ok_or_else(|| ZoneError::Corrupt {
                what: "zone number",
                place: format!("zone {zone}"),
                detail: "outside the store".into(),
            })
    }

    // ---- superblock ------------------------------------------------------------------------

    /// Writes the next superblock pointing at `root`, after `deps`. Superblock writes are
    /// serialized: the previous one is made durable first, so at most one slot is ever in
    /// flight and the other always holds a durable, valid superblock.
    ///
    /// Zones emptied while superblock `n` was the newest written are freed only once
    /// superblock `n + 1` is durable: whoever emptied them made sure superblock `n` no longer
    /// reaches them, but superblock `n - 1`, in the other slot, may, and it stays there (what
    /// repair falls back to when slot `n` or its manifest is damaged: docs/damage.md) until
    /// `n + 1` overwrites it. So every release waits one checkpoint longer than it must for
    /// the newest superblock alone.
    pub fn write_superblock(&self, root: Option<ExtentAddr>, deps: &[PatchId]) -> Result<PatchId> {
        let previous = self.state.lock().superblock_patch;
        self.cache.flush_patch(previous)?;
        let mut st = self.state.lock();
        let sb = Superblock {
            seq: st.superblock.seq + 1,
            root,
            ..st.superblock
        };
        let patch = self
            .cache
            .write(SLOT_OFFSETS[sb.slot()], &sb.encode(), deps)?;
        st.superblock = sb;
        st.superblock_patch = patch;
        let held = std::mem::take(&mut st.held);
        let (due, still): (Vec<_>, Vec<_>) =
            held.into_iter().partition(|&(_, until)| until <= sb.seq);
        st.held = still;
        let due: Vec<(ZoneId, PatchId)> = due
            .into_iter()
            .map(|(zone, _)| (zone, st.zones[zone as usize].free_after))
            .collect();
        drop(st);
        // Outside the state lock: `both` takes the cache's.
        let due: Vec<(ZoneId, PatchId)> = due
            .into_iter()
            .map(|(zone, after)| (zone, self.both(after, patch)))
            .collect();
        self.state.lock().to_free.extend(due);
        self.schedule_frees();
        Ok(patch)
    }

    /// A patch committed once `a` and `b` both are (`b` alone if `a` is nothing or already
    /// committed, as a release's superblock patch is by the time a later one is written).
    fn both(&self, a: PatchId, b: PatchId) -> PatchId {
        if a == PatchId::NONE || self.cache.state(a) == stitch_patch::PatchState::Committed {
            return b;
        }
        // `empty` fails only for a patch the cache never made: then there is nothing to wait for.
        self.cache.empty(&[a, b]).unwrap_or(b)
    }

    /// The references the extent at `addr` holds (0 when it is not live); for `check`.
    pub fn ref_count(&self, addr: ExtentAddr) -> u32 {
        let st = self.state.lock();
        st.refs
            .get(addr.zone, addr.offset)
            .filter(|slot| slot.len == addr.len)
            .map_or(0, |slot| slot.refs)
    }

    /// Counts of the zones and extents as they stand.
    pub fn stats(&self) -> ZoneStats {
        let st = self.state.lock();
        let mut s = ZoneStats {
            zone_size: self.config.zone_size,
            zones: st.zones.len() as u64,
            ..Default::default()
        };
        for (id, z) in st.zones.iter().enumerate() {
            match z.usage {
                ZoneUse::Free | ZoneUse::Freeing => s.free_zones += 1,
                ZoneUse::Owned => s.owned_zones += 1,
                ZoneUse::Open | ZoneUse::Closed => {
                    s.extent_zones += 1;
                    s.live_bytes += z.live;
                    let used = if z.usage == ZoneUse::Open {
                        z.write_ptr
                    } else {
                        self.config.zone_size
                    };
                    s.dead_bytes += used.saturating_sub(z.live);
                    s.zone_live.push((id as ZoneId, z.live));
                }
                ZoneUse::Super | ZoneUse::Unknown => {}
            }
        }
        s.recycled_zones = st.recycled.len() as u64;
        s.backed = st.backed;
        s.ready_zones = st.ready.len() as u64;
        s.held_zones = st.held.len() as u64;
        s.live_extents = st.refs.len() as u64;
        s.appended = st.appended.iter().map(|(&k, &b)| (k, b)).collect();
        s
    }
}
