//! Zones allocated ahead of need. A writer that fills its zone takes the next one under the
//! store's lock, and a zone that is not recycled must first have its blocks allocated by the
//! file system (`fallocate`), which on ext4 reads the allocation bitmaps of every block
//! group it looks at that it has not cached, a read from the disk for each, with the lock
//! held and the writer (a commit, a FUSE write) waiting. A
//! background thread keeps [`ZoneConfig::ahead_zones`](super::ZoneConfig::ahead_zones)
//! free zones allocated instead (the store's *ready* zones), growing the file and
//! allocating outside the lock, so writers find them allocated.

use super::{State, ZoneStore};
use parking_lot::{Condvar, Mutex};

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
    /// Free zones to keep allocated: those held back (see [`Reserve`](super::Reserve)),
    /// which ordinary allocation leaves alone, and `ahead_zones` more (none at all without
    /// `ahead_zones`).
    fn ahead_target(&self, st: &State) -> u64 {
        if self.config.ahead_zones == 0 {
            return 0;
        }
        let held_back = st.reserve.log.max(st.reserve.extents + 1);
        held_back + self.config.ahead_zones
    }

    /// Wakes the allocating thread if `st` has fewer allocated free zones than the target.
    /// Called with the state lock held (the signal's lock is taken after it, never before).
    pub(super) fn want_ahead(&self, st: &State) {
        if Self::allocated(st) >= self.ahead_target(st) {
            return;
        }
        self.ahead.state.lock().short = true;
        self.ahead.wake.notify_one();
    }

    /// Blocks until zones run short (`true`) or [`stop_ahead`](Self::stop_ahead) is called
    /// (`false`): the loop of the thread calling [`allocate_ahead`](Self::allocate_ahead).
    pub fn wait_for_shortage(&self) -> bool {
        let mut w = self.ahead.state.lock();
        while !w.short && !w.stopped {
            self.ahead.wake.wait(&mut w);
        }
        w.short = false;
        !w.stopped
    }

    /// Ends [`wait_for_shortage`](Self::wait_for_shortage) for good.
    pub fn stop_ahead(&self) {
        self.ahead.state.lock().stopped = true;
        self.ahead.wake.notify_all();
    }

    /// Allocates free zones until the target is allocated: punched-out ones first, then new
    /// ones at the end of the file. The file is grown and the blocks allocated without the
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
                if Self::allocated(&st) >= self.ahead_target(&st) {
                    return;
                }
                match st.free.pop_first() {
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
                        match self.grow_zone(&mut self.state.lock()) {
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
