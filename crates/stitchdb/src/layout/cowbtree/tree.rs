//! Operations on one version of the tree, given its root: lookups, cursors, and writes that
//! shadow the path they change (copy on write, through [`Arc::make_mut`]: see `node`).
//!
//! A write descends to the leaf, copying each shared node on the way, changes the leaf and
//! splits whatever outgrew the node size on the way back up; a split root grows the tree by
//! one level. Nodes are never joined: a leaf emptied by deletes stays until a write splits or
//! refills its neighbourhood (the tree's height is bounded by its largest size ever, as in
//! many copy-on-write B-trees without rebalancing on delete).

use super::node::{head, Body, Bytes, Node, Slot};
use crate::entry::Entry;
use std::ops::Bound;
use std::sync::Arc;

/// The slot of `key` in the version rooted at `root`.
pub(crate) fn get<'a>(mut node: &'a Arc<Node>, key: &[u8]) -> Option<&'a Slot> {
    let h = head(key);
    loop {
        // Only keys whose heads tie with the key's need a whole comparison.
        let from = node.heads.partition_point(|x| *x < h);
        let tied = node.heads[from..].partition_point(|x| *x == h);
        match &node.body {
            Body::Leaf(slots) => {
                let i = slots[from..from + tied]
                    .binary_search_by(|s| s.key.as_ref().cmp(key))
                    .ok()?;
                return Some(&slots[from + i]);
            }
            Body::Interior { keys, children } => {
                let below = keys[from..from + tied].partition_point(|k| k.as_ref() <= key);
                node = &children[from + below];
            }
        }
    }
}

/// Which child of an interior node with `keys` holds `key`.
fn child_of(keys: &[Bytes], key: &[u8]) -> usize {
    keys.partition_point(|k| k.as_ref() <= key)
}

/// Writes `slot` into the version rooted at `root` (shadowing the path), dropping on the way
/// the tombstones of the leaf it lands in that are at or below `horizon` (no version still
/// retained older than them: see `versions`).
pub(crate) fn put(root: &mut Arc<Node>, slot: Slot, node_size: usize, horizon: u64) {
    if let Some((separator, right)) = insert(root, slot, node_size, horizon) {
        let left = root.clone();
        *root = Arc::new(Node::new(Body::Interior {
            keys: vec![separator],
            children: vec![left, right],
        }));
    }
}

/// Inserts into the subtree at `node`; returns the separator and the new right sibling if the
/// node split.
fn insert(
    node: &mut Arc<Node>,
    slot: Slot,
    node_size: usize,
    horizon: u64,
) -> Option<(Bytes, Arc<Node>)> {
    let n = shadow(node);
    match &mut n.body {
        Body::Leaf(slots) => {
            slots.retain(|s| s.value.is_some() || s.seq > horizon);
            match slots.binary_search_by(|s| s.key.cmp(&slot.key)) {
                Ok(i) => slots[i] = slot,
                Err(i) => slots.insert(i, slot),
            }
        }
        Body::Interior { keys, children } => {
            let i = child_of(keys, &slot.key);
            if let Some((separator, right)) = insert(&mut children[i], slot, node_size, horizon) {
                keys.insert(i, separator);
                children.insert(i + 1, right);
            }
        }
    }
    n.resize();
    (n.bytes > node_size).then(|| split(n)).flatten()
}

/// The node to change in place of `node`: itself if only this writer's version holds it and
/// it is not written (a node made since the writer began), else a copy (Goby's shadowing). A
/// written node is copied even when nothing else holds it any more: its extent must keep
/// saying what the node says.
fn shadow(node: &mut Arc<Node>) -> &mut Node {
    if node.addr().is_some() {
        *node = Arc::new(Node::clone(node));
    }
    Arc::make_mut(node)
}

/// Cuts an overfull node in two of about equal bytes; `None` if it cannot be cut (a leaf of
/// one large value, an interior node of two children).
fn split(n: &mut Node) -> Option<(Bytes, Arc<Node>)> {
    let (separator, right) = match &mut n.body {
        Body::Leaf(slots) => {
            if slots.len() < 2 {
                return None;
            }
            let half = n.bytes / 2;
            let mut acc = 0;
            let mut at = slots.len() - 1;
            for (i, s) in slots.iter().enumerate() {
                acc += s.encoded_len();
                if acc >= half {
                    at = (i + 1).clamp(1, slots.len() - 1);
                    break;
                }
            }
            let right = slots.split_off(at);
            (right[0].key.clone(), Body::Leaf(right))
        }
        Body::Interior { keys, children } => {
            if children.len() < 3 {
                return None;
            }
            let mid = children.len() / 2;
            let right_children = children.split_off(mid);
            let right_keys = keys.split_off(mid);
            let separator = keys.pop()?;
            (
                separator,
                Body::Interior {
                    keys: right_keys,
                    children: right_children,
                },
            )
        }
    };
    n.resize();
    Some((separator, Arc::new(Node::new(right))))
}

/// The keys with a value (not a tombstone) in `start..end` of the version at `root`.
pub(crate) fn live_keys(root: &Arc<Node>, start: &[u8], end: &[u8]) -> Vec<Vec<u8>> {
    Iter::new(
        root.clone(),
        Bound::Included(start),
        Bound::Excluded(end),
        true,
    )
    .filter(|e| e.value.is_some())
    .map(|e| e.key)
    .collect()
}

/// The slots of one version in a key range, either way round: a stack of the nodes on the
/// path to the current leaf, each with the position reached in it.
pub(crate) struct Iter {
    /// For an interior node, the child being read; for a leaf, going forward the next slot,
    /// going backward the number of slots not yet read.
    stack: Vec<(Arc<Node>, usize)>,
    forward: bool,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
}

impl Iter {
    pub fn new(root: Arc<Node>, start: Bound<&[u8]>, end: Bound<&[u8]>, forward: bool) -> Iter {
        let mut it = Iter {
            stack: Vec::new(),
            forward,
            start: start.map(<[u8]>::to_vec),
            end: end.map(<[u8]>::to_vec),
        };
        // Down to the leaf holding the first key to read.
        let from = match forward {
            true => it.start.clone(),
            false => it.end.clone(),
        };
        let mut node = root;
        loop {
            let next = match &node.body {
                Body::Leaf(slots) => {
                    let pos = match (&from, forward) {
                        (Bound::Unbounded, true) => 0,
                        (Bound::Unbounded, false) => slots.len(),
                        (Bound::Included(k) | Bound::Excluded(k), true) => {
                            slots.partition_point(|s| *s.key < **k)
                        }
                        (Bound::Included(k) | Bound::Excluded(k), false) => {
                            slots.partition_point(|s| *s.key <= **k)
                        }
                    };
                    it.stack.push((node, pos));
                    return it;
                }
                Body::Interior { keys, children } => {
                    let i = match &from {
                        Bound::Unbounded if forward => 0,
                        Bound::Unbounded => children.len() - 1,
                        Bound::Included(k) | Bound::Excluded(k) => child_of(keys, k),
                    };
                    (i, children[i].clone())
                }
            };
            it.stack.push((node, next.0));
            node = next.1;
        }
    }

    /// Pushes the path from `node` down its first (forward) or last leaf.
    fn push_edge(&mut self, mut node: Arc<Node>) {
        loop {
            let child = match &node.body {
                Body::Leaf(slots) => {
                    let pos = if self.forward { 0 } else { slots.len() };
                    self.stack.push((node, pos));
                    return;
                }
                Body::Interior { children, .. } => {
                    let i = if self.forward { 0 } else { children.len() - 1 };
                    (i, children[i].clone())
                }
            };
            self.stack.push((node, child.0));
            node = child.1;
        }
    }

    fn next_slot(&mut self) -> Option<Slot> {
        loop {
            let (node, pos) = self.stack.last_mut()?;
            match &node.body {
                Body::Leaf(slots) => {
                    if self.forward && *pos < slots.len() {
                        *pos += 1;
                        return Some(slots[*pos - 1].clone());
                    }
                    if !self.forward && *pos > 0 {
                        *pos -= 1;
                        return Some(slots[*pos].clone());
                    }
                    self.stack.pop();
                }
                Body::Interior { children, .. } => {
                    let next = match self.forward {
                        true => (*pos + 1 < children.len()).then(|| *pos + 1),
                        false => pos.checked_sub(1),
                    };
                    match next {
                        Some(i) => {
                            *pos = i;
                            let child = children[i].clone();
                            self.push_edge(child);
                        }
                        None => {
                            self.stack.pop();
                        }
                    }
                }
            }
        }
    }
}

impl Iterator for Iter {
    type Item = Entry;

    fn next(&mut self) -> Option<Entry> {
        loop {
            let s = self.next_slot()?;
            let (before, after) = match self.forward {
                true => (&self.start, &self.end),
                false => (&self.end, &self.start),
            };
            let skip = match before {
                Bound::Excluded(k) => *s.key == **k,
                _ => false,
            };
            let done = match (after, self.forward) {
                (Bound::Unbounded, _) => false,
                (Bound::Included(k), true) => *s.key > **k,
                (Bound::Excluded(k), true) => *s.key >= **k,
                (Bound::Included(k), false) => *s.key < **k,
                (Bound::Excluded(k), false) => *s.key <= **k,
            };
            if done {
                self.stack.clear();
                return None;
            }
            if !skip {
                return Some(Entry {
                    key: s.key.to_vec(),
                    seq: s.seq,
                    value: s.value.as_deref().map(<[u8]>::to_vec),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn slot(key: u32, seq: u64, value: Option<u32>) -> Slot {
        Slot {
            key: key.to_be_bytes().into(),
            seq,
            value: value.map(|v| v.to_le_bytes().repeat(8).into()),
        }
    }

    #[test]
    fn random_writes_match_a_map_and_old_versions_stay_as_they_were() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut root = Arc::new(Node::empty_leaf());
        let mut model: BTreeMap<u32, (u64, Option<u32>)> = BTreeMap::new();
        let mut kept = Vec::new();
        for seq in 1..=5000u64 {
            let key = rng.gen_range(0..800u32);
            let value = (rng.gen_range(0..4) > 0).then(|| rng.gen::<u32>());
            put(&mut root, slot(key, seq, value), 512, 0);
            model.insert(key, (seq, value));
            if seq % 997 == 0 {
                kept.push((root.clone(), model.clone()));
            }
        }
        kept.push((root.clone(), model));
        for (root, model) in &kept {
            let all: Vec<_> = Iter::new(root.clone(), Bound::Unbounded, Bound::Unbounded, true)
                .map(|e| (e.key, e.seq, e.value))
                .collect();
            let want: Vec<_> = model
                .iter()
                .map(|(k, (s, v))| {
                    (
                        k.to_be_bytes().to_vec(),
                        *s,
                        v.map(|v| v.to_le_bytes().repeat(8)),
                    )
                })
                .collect();
            assert_eq!(all, want);
            let mut back: Vec<_> =
                Iter::new(root.clone(), Bound::Unbounded, Bound::Unbounded, false)
                    .map(|e| (e.key, e.seq, e.value))
                    .collect();
            back.reverse();
            assert_eq!(back, want);
            for k in [0u32, 5, 400, 799] {
                let got = get(root, &k.to_be_bytes()).map(|s| s.seq);
                assert_eq!(got, model.get(&k).map(|(s, _)| *s));
            }
            let (lo, hi) = (100u32.to_be_bytes(), 300u32.to_be_bytes());
            let mid: Vec<_> = Iter::new(
                root.clone(),
                Bound::Excluded(&lo),
                Bound::Included(&hi),
                false,
            )
            .map(|e| e.key)
            .collect();
            let want_mid: Vec<_> = model
                .range(101..=300)
                .rev()
                .map(|(k, _)| k.to_be_bytes().to_vec())
                .collect();
            assert_eq!(mid, want_mid);
        }
    }
}
