//! Zones allocated ahead of need. A writer that fills its zone takes the next one under the
//! store's lock. While zones are backed (the device could run short: see
//! `ZoneStore::update_backing`), a zone that is not recycled must first have its blocks
//! allocated by the file system (`fallocate`), which on ext4 reads the allocation bitmaps of
//! every block group it looks at that it has not cached, a read from the disk for each,
//! with the lock held and the writer (a commit, a FUSE write) waiting; otherwise it may
//! have to grow the file (`ftruncate`, which waits for writes in flight). A background
//! thread keeps free zones ahead of writers instead, growing the file and (while backed)
//! allocating outside the lock: those the reserve holds back, and a quarter as many more
//! as the store has zones in use, at least one and at most
//! [`ZoneConfig::ahead_zones`](super::ZoneConfig::ahead_zones), so a small store keeps
//! little ahead and a large one, whose writers move zones faster, more. Zones allocated
//! this way are the store's *ready* ones; while not backed the zones are only grown (they
//! take no blocks) and the thread also looks every second whether the device runs short.

use super::{State, ZoneStore};
use parking_lot::{Condvar, Mutex};
use std::time::Duration;

/// How often the allocating thread looks at the device's free space while it is told
/// nothing: a device filled by other writers is found this late at worst.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// What the allocating thread waits for.
#[derive(Default)]
pub(super) struct Signal {
    state: Mutex<Wanted>,
    wake: Condvar,
}

#[derive(Default)]
struct Wanted {
    /// A zone was taken while fewer than the target were allocated.
    short: bool,
    /// The store is closing: the thread returns.
    stopped: bool,
}

impl ZoneStore {
    /// Free zones to keep ahead: those held back (see [`Reserve`](super::Reserve)), which
    /// ordinary allocation leaves alone, and a quarter of the zones in use more, at least
    /// one and at most `ahead_zones` (none at all without `ahead_zones`).
    fn ahead_target(&self, st: &State) -> u64 {
        if self.config.ahead_zones == 0 {
            return 0;
        }
        let in_use = (st.zones.len() as u64).saturating_sub(Self::free_count(st) + 1);
        Self::held_back(st) + (in_use / 4).clamp(1, self.config.ahead_zones)
    }

    /// The free zones counting towards the target: allocated ones while zones are backed,
    /// any otherwise.
    fn ahead(st: &State) -> u64 {
        if st.backed {
            Self::allocated(st)
        } else {
            Self::free_count(st)
        }
    }

    /// Wakes the allocating thread if `st` has fewer free zones ahead than the target.
    /// Called with the state lock held (the signal's lock is taken after it, never before).
    pub(super) fn want_ahead(&self, st: &State) {
        if Self::ahead(st) >= self.ahead_target(st) {
            return;
        }
        self.ahead.state.lock().short = true;
        self.ahead.wake.notify_one();
    }

    /// Blocks until zones run short (`true`) or [`stop_ahead`](Self::stop_ahead) is called
    /// (`false`): the loop of the thread calling [`allocate_ahead`](Self::allocate_ahead).
    /// On a disk that reports its device's free space, it also returns `true` every second,
    /// so that the thread finds a device other writers fill.
    pub fn wait_for_shortage(&self) -> bool {
        let look = self.cache.disk().space().is_some();
        let mut w = self.ahead.state.lock();
        while !w.short && !w.stopped {
            if look {
                if self.ahead.wake.wait_for(&mut w, LOOK_EVERY).timed_out() {
                    break;
                }
            } else {
                self.ahead.wake.wait(&mut w);
            }
        }
        w.short = false;
        !w.stopped
    }

    /// Ends [`wait_for_shortage`](Self::wait_for_shortage) for good.
    pub fn stop_ahead(&self) {
        self.ahead.state.lock().stopped = true;
        self.ahead.wake.notify_all();
    }

    /// Looks whether zones are to be backed (see `update_backing`), then keeps the target
    /// ahead: while backed, allocates free zones until the target is allocated, punched-out
    /// ones first, then new ones at the end of the file; otherwise grows the file until the
    /// target is free. The file is grown and the blocks allocated without the
    /// store's lock; a zone being allocated is on no list, so no one else takes it. Stops at
    /// the first failure (a full file system, the size limit): the zone goes back to the free
    /// list, and a writer needing it meets the failure itself, as it would without this.
    pub fn allocate_ahead(&self) {
        loop {
            // A closing store waits for this thread: one zone more at most.
            if self.ahead.state.lock().stopped {
                return;
            }
            let zone = {
                let mut st = self.state.lock();
                let backed = self.update_backing(&mut st);
                if Self::ahead(&st) >= self.ahead_target(&st) {
                    return;
                }
                let punched = if backed { st.free.pop_first() } else { None };
                match punched {
                    Some(zone) => zone,
                    None => {
                        let Ok(new_len) = self.len_with_zone(&st) else {
                            return;
                        };
                        drop(st);
                        // Grown here, `grow_zone` below finds the file long enough and does
                        // not truncate under the lock (a truncate waits for writes in flight).
                        if let Err(e) = self.cache.disk().grow(new_len) {
                            tracing::debug!("growing the store ahead of need: {e}");
                            return;
                        }
                        let mut st = self.state.lock();
                        match self.grow_zone(&mut st) {
                            Ok(zone) if !backed => {
                                st.free.insert(zone);
                                continue;
                            }
                            Ok(zone) => zone,
                            Err(_) => return,
                        }
                    }
                }
            };
            let allocated = self
                .cache
                .disk()
                .allocate(self.zone_offset(zone), self.config.zone_size);
            let mut st = self.state.lock();
            if let Err(e) = allocated {
                tracing::debug!("allocating zone {zone} ahead of need: {e}");
                st.free.insert(zone);
                return;
            }
            st.ready.insert(zone);
        }
    }
}
