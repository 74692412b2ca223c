//! `WATCH`: which clients watch which keys, and marking them dirty when a key changes, as
//! Redis's `touchWatchedKey` does. A commit that changed keys touches them while it still
//! holds their locks, and `EXEC` checks its flag while holding the locks of the keys it
//! watches, so no change slips between the check and the transaction.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// A client's "a watched key changed" flag.
pub type Dirty = Arc<AtomicBool>;

/// Each watched key's watchers.
type Watchers = HashMap<(usize, Vec<u8>), Vec<Dirty>>;

/// Every watch in the server.
#[derive(Default)]
pub struct Watches {
    /// Keys watched, so that commits skip the map when nobody watches (the common case).
    watched: AtomicUsize,
    /// Guarded by itself: each watched key's watchers.
    map: Mutex<Watchers>,
}

impl Watches {
    /// `dirty` watches `key` in database `db`.
    pub fn watch(&self, db: usize, key: &[u8], dirty: &Dirty) {
        let mut map = self.map.lock();
        let list = map.entry((db, key.to_vec())).or_default();
        if !list.iter().any(|d| Arc::ptr_eq(d, dirty)) {
            list.push(dirty.clone());
            self.watched.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// `dirty` stops watching each of `keys`.
    pub fn unwatch(&self, keys: &[(usize, Vec<u8>)], dirty: &Dirty) {
        let mut map = self.map.lock();
        for key in keys {
            if let Some(list) = map.get_mut(key) {
                let before = list.len();
                list.retain(|d| !Arc::ptr_eq(d, dirty));
                self.watched
                    .fetch_sub(before - list.len(), Ordering::SeqCst);
                if list.is_empty() {
                    map.remove(key);
                }
            }
        }
    }

    /// Marks the watchers of each key dirty.
    pub fn touch<'k>(&self, keys: impl IntoIterator<Item = (usize, &'k [u8])>) {
        if self.watched.load(Ordering::SeqCst) == 0 {
            return;
        }
        let map = self.map.lock();
        for (db, key) in keys {
            if let Some(list) = map.get(&(db, key.to_vec())) {
                for d in list {
                    d.store(true, Ordering::SeqCst);
                }
            }
        }
    }

    /// The keys of database `db` someone watches.
    pub fn watched_in(&self, db: usize) -> Vec<Vec<u8>> {
        if self.watched.load(Ordering::SeqCst) == 0 {
            return Vec::new();
        }
        let map = self.map.lock();
        map.keys()
            .filter(|(d, _)| *d == db)
            .map(|(_, k)| k.clone())
            .collect()
    }
}
