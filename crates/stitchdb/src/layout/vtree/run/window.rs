//! `sliding-window` (Anvil's sliding-window dTable, docs/layouts.md): a linear block whose
//! values may be back-references to a value stored whole earlier in the same block.
//!
//! Anvil keeps the values in a separate integer-keyed dTable and the keys' dTable holds
//! references, so a read costs two lookups. Here the window lives within one block (it
//! restarts at each): a point read still reads one block, and a block still reads alone
//! (repair, stitching). The cost is that only duplicates within a block are found.
//!
//! A value is a *literal* (stored whole, as in version 4) or a *reference*: its distance back
//! among the block's literals, 0 being the latest. The writer refers to a value when one of
//! the last `window` literals holds it, so a window is the last `window` distinct values
//! stored whole, the oldest evicted first (LZ77's); the reader needs no window size, only
//! the literals so far. The byte format is in docs/format.md ("Run blocks", version 9).

use std::collections::HashMap;
use stitch_filter::hash_key;

/// The block version of a linear block under `sliding-window`.
pub const WINDOW_VERSION: u8 = 9;

/// The writer's side: which of the block's literals hold which value.
pub struct Window {
    /// The most literals back a reference may reach (the layout's `window`).
    size: u32,
    /// Where each of the block's literals lies in the writer's buffer, in order.
    literals: Vec<(u32, u32)>,
    /// The latest literal of each value's hash. Values whose hashes collide replace each
    /// other here: a reference lost, never a wrong one, since the bytes are compared.
    latest: HashMap<u64, u32>,
}

impl Window {
    pub fn new(size: u32) -> Window {
        Window {
            size,
            literals: Vec::new(),
            latest: HashMap::new(),
        }
    }

    /// Starts a new block: nothing to refer to.
    pub fn clear(&mut self) {
        self.literals.clear();
        self.latest.clear();
    }

    /// `value`'s hash, and how many literals back an equal value lies in `body` (the block
    /// being written), if it is among the last `size`.
    pub fn find(&self, body: &[u8], value: &[u8]) -> (u64, Option<u64>) {
        let hash = hash_key(value);
        let distance = self.latest.get(&hash).and_then(|&n| {
            let distance = (self.literals.len() - 1 - n as usize) as u64;
            let (a, b) = self.literals[n as usize];
            (distance < u64::from(self.size) && &body[a as usize..b as usize] == value)
                .then_some(distance)
        });
        (hash, distance)
    }

    /// Records the literal just stored at `span` of `body`, of hash `hash`.
    pub fn enter(&mut self, hash: u64, span: (u32, u32)) {
        self.latest.insert(hash, self.literals.len() as u32);
        self.literals.push(span);
    }
}

/// The reader's side: where the block's literals read so far lie.
#[derive(Default)]
pub struct Literals(Vec<(u32, u32)>);

impl Literals {
    pub fn push(&mut self, span: (u32, u32)) {
        self.0.push(span);
    }

    /// Where the value `distance` literals back lies.
    pub fn back(&self, distance: u64) -> Result<(u32, u32), String> {
        let n = self.0.len() as u64;
        if distance < n {
            return Ok(self.0[(n - 1 - distance) as usize]);
        }
        Err(format!(
            "a reference {distance} values back, past the block's {n}"
        ))
    }
}

/// A version 9 entry's first varint: its shared-prefix length and whether its value is a
/// reference (the low bit). Keys rarely share 64 bytes or more, so the flag costs no byte.
pub fn split_shared(v: u64) -> (u64, bool) {
    (v >> 1, v & 1 == 1)
}

/// [`split_shared`]'s inverse.
pub fn join_shared(shared: u64, reference: bool) -> u64 {
    shared << 1 | u64::from(reference)
}
