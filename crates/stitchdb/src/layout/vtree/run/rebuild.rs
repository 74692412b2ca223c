//! Finding a run's blocks without their index handles (repair, when both copies of an index
//! extent are lost): walked back through blocks lying one after another where the run's
//! builder wrote them, each read alone (block version 4).

use super::{Block, BlockHandle, RunMeta, Storage};
use std::cell::{Cell, OnceCell, RefCell};
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use stitch_zone::{ExtentAddr, ExtentKind};

/// The handles of a run's blocks that lost both copies of their index extent: walked back
/// from `next` (the run's block known after them; none: from the run's filter, or else its
/// first index extent, stepping over the filter and index extents written right after the
/// blocks) through run blocks lying one right after another, each read without a handle,
/// until the block before is `stop` (the run's block known before them) or, with no `stop`,
/// until they hold `entries` entries (with a `stop`, exactly that many if `exact`, else at
/// most). Every block must
/// sort between its neighbours and hold only sequence numbers of the run. Where a block opens
/// its zone, the walk goes on at the end of each zone whose last extent is a block that may
/// come before it; the run's own way always leads to `stop` (or to `entries`), so where
/// several do (free zones still holding the same entries, from runs a merge replaced) they
/// must hold the same entries in the same order (cut into blocks alike or not), else
/// nothing is found.
///
/// Only for a run whose builder wrote every block itself: a stitched run's blocks lie among
/// other runs' (a block its merge rewrote lies beside the older one it replaced, which would
/// pass for its own).
pub(super) fn blocks_back(
    storage: &Arc<Storage>,
    meta: &RunMeta,
    next: Option<&BlockHandle>,
    stop: Option<&BlockHandle>,
    entries: u64,
    exact: bool,
) -> Result<Vec<BlockHandle>, String> {
    let zones = &storage.zones;
    // The extent right after the blocks looked for, and those before it in its zone.
    let (extents, after_blocks) = match next {
        Some(n) => {
            let mut extents = zones.extents_in(n.addr.zone).map_err(|e| e.to_string())?;
            extents.retain(|(a, _)| a.offset < n.addr.offset);
            (extents, n.addr)
        }
        None => {
            let anchor = meta
                .filters
                .first()
                .map(|p| p.addr)
                .or_else(|| meta.index.first().copied())
                .ok_or("the manifest lists no extent of the run")?;
            let mut extents = zones.extents_in(anchor.zone).map_err(|e| e.to_string())?;
            // The run's filter and index extents, written after its blocks.
            extents.retain(|(a, _)| a.offset < anchor.offset);
            let mut first = anchor;
            while let Some(&(addr, ExtentKind::RUN_FILTER | ExtentKind::RUN_INDEX)) = extents.last()
            {
                first = addr;
                extents.pop();
            }
            (extents, first)
        }
    };
    let walk = Walk {
        storage,
        meta,
        stop,
        entries,
        exact,
        zone_ends: OnceCell::new(),
        blocks: RefCell::default(),
        ways: RefCell::default(),
        // Every block of the run, and as many again on ways that lead nowhere.
        reads_left: Cell::new(2 * (meta.data_bytes / 1024 + 64)),
    };
    let found = match next {
        // The run's filter or index opened its zone: its last block ends another.
        None if extents.is_empty() && after_blocks.offset == 0 => {
            walk.across_zones(after_blocks, None, 0)?
        }
        _ => walk.from(extents, next, 0)?,
    };
    if found.is_empty() {
        return Err("no block lies between the blocks the index lists".into());
    }
    Ok(found.into_iter().rev().map(|(h, _)| h).collect())
}

/// A block found, with a hash of each of its entries, last first (ways through different
/// zones are told the same if they hold the same entries).
type Found = (BlockHandle, Vec<u64>);

/// The blocks found back from a block, the last first, or why none were.
type Way = Result<Vec<Found>, String>;

/// One search of [`blocks_back`].
struct Walk<'a> {
    storage: &'a Arc<Storage>,
    meta: &'a RunMeta,
    stop: Option<&'a BlockHandle>,
    entries: u64,
    exact: bool,
    /// The run blocks lying in the last quarter of their zones, where a run may have gone on
    /// in another zone (read once, at the first block found opening its zone).
    zone_ends: OnceCell<Vec<ExtentAddr>>,
    /// Blocks read, by address (`Err`: not one of the run's).
    blocks: RefCell<HashMap<ExtentAddr, Result<Found, String>>>,
    /// The ways found back from a block ending its zone with so many entries found before
    /// it (ways through free zones holding the same entries meet again at the same blocks).
    ways: RefCell<HashMap<(ExtentAddr, u64), Way>>,
    /// Blocks the search may still read.
    reads_left: Cell<u64>,
}

impl Walk<'_> {
    /// The blocks found going on back from `after` (none: the run's end) through `extents`
    /// (those of its zone before it, in place order), `found` entries having been found
    /// after it; the last first.
    fn from(
        &self,
        mut extents: Vec<(ExtentAddr, ExtentKind)>,
        after: Option<&BlockHandle>,
        mut found: u64,
    ) -> Result<Vec<Found>, String> {
        let zone_size = self.storage.zones.zone_size();
        let mut handles: Vec<Found> = Vec::new();
        loop {
            if self.stop.is_none() && found == self.entries {
                return Ok(handles);
            }
            if found > self.entries {
                return Err(format!(
                    "blocks lying one after another hold more than the {} entries missing",
                    self.entries
                ));
            }
            let after = handles.last().map(|(h, _)| h).or(after);
            let here = extents.pop().filter(|&(addr, kind)| {
                kind == ExtentKind::RUN_BLOCK && after.is_none_or(|n| n.addr.follows(&addr))
            });
            let opens_zone = after.filter(|n| n.addr.offset == 0);
            let reached = self.stop.is_some_and(|s| {
                here.is_some_and(|(a, _)| a == s.addr)
                    || opens_zone.is_some_and(|n| n.addr.continues(&s.addr, zone_size))
            });
            if reached && self.exact && found != self.entries {
                return Err(format!(
                    "blocks lying one after another hold {found} entries, not the {} missing",
                    self.entries
                ));
            }
            if reached {
                return Ok(handles);
            }
            match (here, opens_zone) {
                (Some((addr, _)), _) => {
                    let block = self.block_before(addr, after)?;
                    found += block.0.entries;
                    handles.push(block);
                }
                // A block opening its zone: the run came from the end of another zone.
                (None, Some(n)) => {
                    let n = n.clone();
                    handles.extend(self.across_zones(n.addr, Some(&n), found)?);
                    return Ok(handles);
                }
                (None, None) => {
                    return Err(format!(
                        "{found} of {} entries found in blocks lying one after another",
                        self.entries
                    ))
                }
            }
        }
    }

    /// Goes on from each block at the end of a zone that the extent at `at` (opening its
    /// zone: the block `next`, or the run's filter or index) may continue from (it left no
    /// room for it: a stale extent of the zone's earlier use may lie past it); every way that
    /// leads to the end must hold the same entries.
    fn across_zones(
        &self,
        at: ExtentAddr,
        next: Option<&BlockHandle>,
        found: u64,
    ) -> Result<Vec<Found>, String> {
        let zones = &self.storage.zones;
        let mut ways = Vec::new();
        let mut why = format!("no zone ends in a block {at} continues from");
        for &addr in self.zone_ends()? {
            if addr.zone == at.zone || !at.continues(&addr, zones.zone_size()) {
                continue;
            }
            let Ok(block) = self.block_before(addr, next) else {
                continue;
            };
            let known = self.ways.borrow().get(&(addr, found)).cloned();
            let way = match known {
                Some(way) => way,
                None => {
                    let mut extents = zones.extents_in(addr.zone).map_err(|e| e.to_string())?;
                    extents.retain(|(a, _)| a.offset < addr.offset);
                    let entries = found + block.0.entries;
                    let way = self.from(extents, Some(&block.0), entries).map(|rest| {
                        let mut way = vec![block];
                        way.extend(rest);
                        way
                    });
                    self.ways.borrow_mut().insert((addr, found), way.clone());
                    way
                }
            };
            match way {
                Ok(way) => ways.push(way),
                Err(e) => why = e,
            }
        }
        let entries = |way: &[Found]| -> Vec<u64> {
            way.iter().flat_map(|(_, e)| e.iter().copied()).collect()
        };
        let agree = ways.windows(2).all(|w| entries(&w[0]) == entries(&w[1]));
        match ways.len() {
            0 => Err(why),
            n if !agree => Err(format!(
                "{n} zones end in blocks {at} may continue from, leading to different entries"
            )),
            _ => Ok(ways.remove(0)),
        }
    }

    fn zone_ends(&self) -> Result<&[ExtentAddr], String> {
        if let Some(ends) = self.zone_ends.get() {
            return Ok(ends);
        }
        let zones = &self.storage.zones;
        let count = zones.cache().disk().len() / zones.zone_size();
        let tail = zones.zone_size() - zones.zone_size() / 4 - 8192;
        let mut ends = Vec::new();
        for zone in 1..count {
            let Ok(zone) = u32::try_from(zone) else { break };
            let extents = zones.extents_in(zone).map_err(|e| e.to_string())?;
            ends.extend(extents.into_iter().filter_map(|(addr, kind)| {
                (kind == ExtentKind::RUN_BLOCK && addr.aligned_end() > tail).then_some(addr)
            }));
        }
        Ok(self.zone_ends.get_or_init(|| ends))
    }

    /// The block at `addr`, if it is one of the run's and sorts before `next`.
    fn block_before(&self, addr: ExtentAddr, next: Option<&BlockHandle>) -> Result<Found, String> {
        let known = self.blocks.borrow().get(&addr).cloned();
        let block = match known {
            Some(block) => block,
            None => {
                let block = self.read_block(addr);
                self.blocks.borrow_mut().insert(addr, block.clone());
                block
            }
        }?;
        if next.is_some_and(|n| block.0.last_key >= n.first_key) {
            return Err(format!("{addr} does not sort before the block after it"));
        }
        Ok(block)
    }

    /// The block at `addr` read alone, if it is one of the run's: it sorts after `stop` and
    /// holds only the run's sequence numbers.
    fn read_block(&self, addr: ExtentAddr) -> Result<Found, String> {
        let left = self.reads_left.get();
        if left == 0 {
            return Err("too many blocks lie where the run's may be".into());
        }
        self.reads_left.set(left - 1);
        let framed = self
            .storage
            .zones
            .read_durable_framed(addr, ExtentKind::RUN_BLOCK)
            .map_err(|e| e.to_string())?;
        let block = Block::parse_standalone(framed, stitch_zone::EXTENT_HEADER_LEN)
            .map_err(|e| format!("{addr}: {e}"))?;
        let (first, last) = (block.entry(0), block.entry(block.len() - 1));
        let meta = self.meta;
        let in_run =
            |seq: u64| meta.seq_override.is_some() || (meta.min_seq..=meta.max_seq).contains(&seq);
        let sorted = self.stop.is_none_or(|s| s.last_key.as_slice() <= first.key);
        if !sorted || !(0..block.len()).all(|i| in_run(block.entry(i).seq)) {
            return Err(format!("{addr} is not a block of the run"));
        }
        let handle = BlockHandle {
            first_key: first.key.to_vec(),
            last_key: last.key.to_vec(),
            entries: block.len() as u64,
            addr,
        };
        let hashes = (0..block.len())
            .rev()
            .map(|i| {
                let mut hasher = DefaultHasher::new();
                let e = block.entry(i);
                (e.key, e.seq, e.value).hash(&mut hasher);
                hasher.finish()
            })
            .collect();
        Ok((handle, hashes))
    }
}
