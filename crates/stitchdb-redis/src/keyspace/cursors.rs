//! `SCAN` cursors. Redis's cursor is a number a client hands back; ours stands for a key (the
//! last one a call returned), kept here under a number. The table is bounded: a cursor
//! evicted (the oldest of `CURSORS` newer ones) restarts its scan from the beginning, which
//! `SCAN`'s guarantee allows (every element present throughout is returned at least once).

use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};

/// Cursors kept at once.
const CURSORS: usize = 16 << 10;

/// The cursors handed out.
#[derive(Default)]
pub struct Cursors {
    table: Mutex<Table>,
}

/// Positions by cursor, and the cursors oldest first (to evict the oldest).
#[derive(Default)]
struct Table {
    positions: HashMap<u64, Vec<u8>>,
    order: VecDeque<u64>,
}

impl Cursors {
    /// A new cursor standing for `position`.
    pub fn save(&self, position: Vec<u8>) -> u64 {
        let mut t = self.table.lock();
        let id = loop {
            // Positive, below 2^63, so every client reads it as a signed or unsigned number.
            let id = rand::random::<u64>() >> 1;
            if id != 0 && !t.positions.contains_key(&id) {
                break id;
            }
        };
        t.positions.insert(id, position);
        t.order.push_back(id);
        while t.order.len() > CURSORS {
            if let Some(old) = t.order.pop_front() {
                t.positions.remove(&old);
            }
        }
        id
    }

    /// The position cursor `id` stands for (`None`: 0, or a cursor evicted or never made,
    /// which start from the beginning).
    pub fn resume(&self, id: u64) -> Option<Vec<u8>> {
        if id == 0 {
            return None;
        }
        self.table.lock().positions.get(&id).cloned()
    }
}
