//! Hash maps keyed by patch ids. Ids are sequential integers, so a multiplication spreads
//! them well enough, at a fraction of the default hasher's cost on the hot paths.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, id: u64) {
        // Fibonacci hashing: odd constant near 2^64 / golden ratio.
        self.0 = (self.0 ^ id).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

pub(crate) type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;
pub(crate) type IdSet = HashSet<u64, BuildHasherDefault<IdHasher>>;
