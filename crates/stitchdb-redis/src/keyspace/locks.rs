//! Key locks: a command holds the locks of the keys it names from its first read to its
//! commit, so its read-modify-write is atomic against every other command's (as Redis's
//! single thread makes it), while commands on other keys run in parallel. Keys hash onto a
//! fixed set of stripes; a command takes its stripes in ascending order, so two commands
//! never wait for each other in a cycle.

use parking_lot::{Mutex, MutexGuard};
use std::hash::{BuildHasher, Hasher};

/// Stripes: enough that unrelated keys rarely share one among a few hundred clients.
const STRIPES: usize = 4096;

/// The stripes.
pub struct KeyLocks {
    stripes: Box<[Mutex<()>]>,
    hasher: foldhash::fast::FixedState,
}

/// The stripes a command holds; dropping it releases them.
pub struct Held<'a> {
    _guards: Vec<MutexGuard<'a, ()>>,
}

impl Default for KeyLocks {
    fn default() -> Self {
        KeyLocks {
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            hasher: foldhash::fast::FixedState::with_seed(0x5717_c4db),
        }
    }
}

impl KeyLocks {
    fn stripe(&self, db: usize, key: &[u8]) -> usize {
        let mut h = self.hasher.build_hasher();
        h.write_usize(db);
        h.write(key);
        (h.finish() as usize) % STRIPES
    }

    /// Locks the stripes of `keys` in database `db` (and of `(db, key)` pairs from `more`),
    /// in ascending order.
    pub fn lock<'a, 'k>(&'a self, keys: impl IntoIterator<Item = (usize, &'k [u8])>) -> Held<'a> {
        let mut idx: Vec<usize> = keys.into_iter().map(|(db, k)| self.stripe(db, k)).collect();
        idx.sort_unstable();
        idx.dedup();
        Held {
            _guards: idx.into_iter().map(|i| self.stripes[i].lock()).collect(),
        }
    }
}
