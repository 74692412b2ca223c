//! Which chunk extents of large values the store holds, and when they may go.
//!
//! The zone store counts one reference for every chunk extent the registry tracks. A chunk is
//! referenced while a version of a hidden table's key (in a memtable, a run or a named
//! snapshot's run) holds a reference naming it, or while something pins it: a write not yet
//! committed, an open transaction's private writes, a reader reading it. Nothing counts the
//! references one by one: a *sweep* after each checkpoint collects the chunks the tables
//! reference and gives back the zone references of tracked chunks that neither they nor a
//! pin hold, if the sweep before found them unreferenced too (so a checkpoint, durable in
//! between, no longer lists the runs that named them). At open the references are rebuilt
//! the same way, from the manifest's runs and the replayed log ("Large values" in
//! docs/format.md); chunks written by commits that never became durable are not counted, so
//! their zones are free.

use parking_lot::{Mutex, RwLock, RwLockReadGuard};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use stitch_zone::{ExtentAddr, ZoneStore};

#[derive(Default)]
pub(crate) struct Registry {
    state: Mutex<State>,
    /// Held shared while a reader finds a reference and pins its chunks, exclusively by a
    /// sweep: a reader's reference is either seen by the sweep or pinned before it.
    resolving: RwLock<()>,
}

#[derive(Default)]
struct State {
    /// Every chunk the registry holds a zone reference for.
    tracked: HashSet<ExtentAddr>,
    pins: HashMap<ExtentAddr, u32>,
    /// Tracked chunks the last sweep found unreferenced and unpinned.
    unreferenced: HashSet<ExtentAddr>,
}

/// Chunks kept from the sweep while this lives.
pub(crate) struct Pins {
    registry: Arc<Registry>,
    addrs: Vec<ExtentAddr>,
}

impl Pins {
    pub fn new(registry: &Arc<Registry>) -> Pins {
        Pins {
            registry: registry.clone(),
            addrs: Vec::new(),
        }
    }

    /// Pins `addrs` too.
    pub fn add(&mut self, addrs: impl IntoIterator<Item = ExtentAddr>) {
        let start = self.addrs.len();
        self.addrs.extend(addrs);
        let mut st = self.registry.state.lock();
        for a in &self.addrs[start..] {
            *st.pins.entry(*a).or_default() += 1;
        }
    }
}

impl Drop for Pins {
    fn drop(&mut self) {
        let mut st = self.registry.state.lock();
        for a in &self.addrs {
            if let Some(n) = st.pins.get_mut(a) {
                *n -= 1;
                if *n == 0 {
                    st.pins.remove(a);
                }
            }
        }
    }
}

impl Registry {
    /// Held while a reference found in a table is pinned (see `resolving`).
    pub fn resolving(&self) -> RwLockReadGuard<'_, ()> {
        self.resolving.read()
    }

    /// Takes over the zone references of chunks just written (each extent's first).
    pub fn adopt(&self, addrs: &[ExtentAddr]) {
        self.state.lock().tracked.extend(addrs.iter().copied());
    }

    /// At open: the chunks the tables reference, each counted once in the zone store.
    pub fn rebuild(&self, zones: &ZoneStore, referenced: HashSet<ExtentAddr>) -> crate::Result<()> {
        for addr in &referenced {
            zones.mark_live(*addr, stitch_zone::ExtentKind::LARGE_VALUE)?;
        }
        self.state.lock().tracked = referenced;
        Ok(())
    }

    /// Gives back chunks nothing can reference (written for a write that failed or a
    /// transaction that aborted) at once.
    pub fn discard(&self, zones: &ZoneStore, addrs: &[ExtentAddr]) {
        let gone: Vec<ExtentAddr> = {
            let mut st = self.state.lock();
            addrs
                .iter()
                .filter(|a| st.tracked.remove(a))
                .copied()
                .collect()
        };
        if let Err(e) = zones.decref_all(gone) {
            tracing::error!("releasing the chunks of a discarded large value: {e}");
        }
    }

    /// Whether any chunk is tracked (a store without large values skips sweeps).
    pub fn is_empty(&self) -> bool {
        self.state.lock().tracked.is_empty()
    }

    /// Bytes of the tracked chunks' extents, headers included.
    pub fn tracked_bytes(&self) -> u64 {
        self.state.lock().tracked.iter().map(|a| a.len as u64).sum()
    }

    /// Frees the tracked chunks that `referenced` (what the tables name now) and the pins do
    /// not hold and the previous sweep found unreferenced too. Returns the bytes freed.
    pub fn sweep(
        &self,
        zones: &ZoneStore,
        referenced: impl FnOnce() -> crate::Result<HashSet<ExtentAddr>>,
    ) -> crate::Result<u64> {
        let _alone = self.resolving.write();
        let referenced = referenced()?;
        let free: Vec<ExtentAddr> = {
            let mut st = self.state.lock();
            let st = &mut *st;
            let idle: HashSet<ExtentAddr> = (st.tracked.iter())
                .filter(|a| !referenced.contains(a) && !st.pins.contains_key(a))
                .copied()
                .collect();
            let free: Vec<ExtentAddr> = idle.intersection(&st.unreferenced).copied().collect();
            for a in &free {
                st.tracked.remove(a);
            }
            st.unreferenced = idle
                .into_iter()
                .filter(|a| st.tracked.contains(a))
                .collect();
            free
        };
        let bytes = free.iter().map(|a| a.len as u64).sum();
        zones.decref_all(free)?;
        Ok(bytes)
    }
}
