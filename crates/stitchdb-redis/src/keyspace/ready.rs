//! Clients blocked on keys (`BLPOP`, `BZPOPMIN` ...): each waits, on its own connection's
//! thread, until a commit touches one of its keys or its timeout passes, then runs its
//! command again. A client registers its keys before it first runs the command and commits
//! touch them while still holding the keys' locks, so a change between the command finding
//! nothing and the client waiting is never missed.

use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// Every blocked client's keys, and a generation that changes when one of them is touched.
#[derive(Default)]
pub struct Ready {
    /// Keys registered, so that commits skip the lock when nobody waits (the common case).
    registered: AtomicUsize,
    /// Guarded by itself: how many clients wait on each key, and the generation.
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    waiters: HashMap<(usize, Vec<u8>), usize>,
    generation: u64,
}

/// A client's registration; dropping it unregisters.
pub struct Waiting<'a> {
    ready: &'a Ready,
    keys: Vec<(usize, Vec<u8>)>,
    /// The generation the client has seen.
    seen: u64,
}

impl Ready {
    /// Registers a client waiting on `keys` of database `db`.
    pub fn register(&self, db: usize, keys: &[&[u8]]) -> Waiting<'_> {
        let mut s = self.state.lock();
        let keys: Vec<(usize, Vec<u8>)> = keys.iter().map(|k| (db, k.to_vec())).collect();
        for k in &keys {
            *s.waiters.entry(k.clone()).or_default() += 1;
        }
        self.registered.fetch_add(keys.len(), Ordering::SeqCst);
        Waiting {
            ready: self,
            seen: s.generation,
            keys,
        }
    }

    /// Wakes the clients waiting if one of `keys` is theirs. Call while holding the keys'
    /// locks.
    pub fn touch<'k>(&self, keys: impl IntoIterator<Item = (usize, &'k [u8])>) {
        if self.registered.load(Ordering::SeqCst) == 0 {
            return;
        }
        let mut s = self.state.lock();
        let hit = keys
            .into_iter()
            .any(|(db, k)| s.waiters.contains_key(&(db, k.to_vec())));
        if hit {
            s.generation += 1;
            self.changed.notify_all();
        }
    }
}

impl Waiting<'_> {
    /// Waits until one of the keys is touched (since registration or the last wait) or
    /// `until`; whether one was.
    pub fn wait(&mut self, until: Instant) -> bool {
        let mut s = self.ready.state.lock();
        while s.generation == self.seen {
            if self.ready.changed.wait_until(&mut s, until).timed_out() {
                return false;
            }
        }
        self.seen = s.generation;
        true
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut s = self.ready.state.lock();
        for k in &self.keys {
            if let Some(n) = s.waiters.get_mut(k) {
                *n -= 1;
                if *n == 0 {
                    s.waiters.remove(k);
                }
            }
        }
        self.ready
            .registered
            .fetch_sub(self.keys.len(), Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_touch_of_a_registered_key_wakes_its_waiter_and_others_do_not() {
        let ready = Ready::default();
        let mut w = ready.register(0, &[b"a"]);
        let soon = || Instant::now() + Duration::from_millis(20);
        ready.touch([(0, &b"b"[..]), (1, &b"a"[..])]);
        assert!(!w.wait(soon()));
        ready.touch([(0, &b"a"[..])]);
        assert!(w.wait(soon()));
        assert!(!w.wait(soon()));
        drop(w);
        assert_eq!(ready.registered.load(Ordering::SeqCst), 0);
        assert!(ready.state.lock().waiters.is_empty());
    }
}
