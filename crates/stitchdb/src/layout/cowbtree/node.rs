//! A node of the copy-on-write B+tree, in memory and as an extent (kind 6).
//!
//! A node is immutable once another version can reach it or it is written: writers change a
//! node only through `tree::shadow`, which copies it when it is shared or written (Goby's
//! shadowing) and changes it in place when the writer's own version is its only holder (a
//! node this writer made since it began). So a commit of many writes copies each node on its
//! paths once.
//!
//! A leaf holds entries `(key, seq, value)`, one per key, sorted; `value: None` is a
//! tombstone, kept while an older version still retained may hold the key (see `versions`).
//! An interior node holds `n` children and the `n - 1` keys between them: child `i` holds the
//! keys from `keys[i - 1]` (inclusive) up to `keys[i]` (exclusive).

use crate::codec::{put_bytes, put_varint, Reader};
use parking_lot::Mutex;
use std::sync::Arc;
use stitch_zone::{ExtentAddr, ExtentKind};

/// The extent kind of a COW B+tree node.
pub(crate) const NODE_KIND: ExtentKind = ExtentKind(6);
/// The node format version, the payload's first byte.
const NODE_FORMAT: u8 = 1;
const LEAF: u8 = 0;
const INTERIOR: u8 = 1;

/// Bytes shared by every node holding them: shadowing a node copies its slots' handles,
/// never their keys and values.
pub(crate) type Bytes = Arc<[u8]>;

/// One key's newest version in a tree version (`value: None`: a tombstone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Slot {
    pub key: Bytes,
    pub seq: u64,
    pub value: Option<Bytes>,
}

impl Slot {
    /// Bytes the slot takes in an encoded leaf, near enough to decide splits.
    pub fn encoded_len(&self) -> usize {
        self.key.len() + self.value.as_ref().map_or(0, |v| v.len()) + 14
    }
}

#[derive(Debug, Clone)]
pub(crate) enum Body {
    Leaf(Vec<Slot>),
    Interior {
        keys: Vec<Bytes>,
        children: Vec<Arc<Node>>,
    },
}

/// A node and, once it is written out, the extent holding it.
#[derive(Debug)]
pub(crate) struct Node {
    pub body: Body,
    /// Bytes of the encoded node (kept up to date by every change, for splits).
    pub bytes: usize,
    /// The first 8 bytes of each key (a leaf's slots', an interior node's separators), big
    /// endian, zero-padded: searched first, in one array, so a lookup compares whole keys
    /// (each its own allocation) only among those whose heads tie ([`head`]).
    pub heads: Vec<u64>,
    /// Where the node is written, once a checkpoint wrote it (a copy starts unwritten).
    addr: Mutex<Option<ExtentAddr>>,
}

impl Clone for Node {
    /// A shadow copy: the same contents, not yet written anywhere.
    fn clone(&self) -> Node {
        Node {
            body: self.body.clone(),
            bytes: self.bytes,
            heads: self.heads.clone(),
            addr: Mutex::new(None),
        }
    }
}

impl Node {
    pub fn new(body: Body) -> Node {
        let mut node = Node {
            body,
            bytes: 0,
            heads: Vec::new(),
            addr: Mutex::new(None),
        };
        node.resize();
        node
    }

    pub fn empty_leaf() -> Node {
        Node::new(Body::Leaf(Vec::new()))
    }

    /// The extent the node is written in, if a checkpoint wrote it.
    pub fn addr(&self) -> Option<ExtentAddr> {
        *self.addr.lock()
    }

    pub fn set_addr(&self, addr: ExtentAddr) {
        *self.addr.lock() = Some(addr);
    }

    /// Recomputes [`bytes`](Self::bytes) and [`heads`](Self::heads) after a change of the
    /// body.
    pub fn resize(&mut self) {
        self.bytes = body_len(&self.body);
        self.heads.clear();
        match &self.body {
            Body::Leaf(slots) => self.heads.extend(slots.iter().map(|s| head(&s.key))),
            Body::Interior { keys, .. } => self.heads.extend(keys.iter().map(|k| head(k))),
        }
    }

    /// The children, for an interior node (none for a leaf).
    pub fn children(&self) -> &[Arc<Node>] {
        match &self.body {
            Body::Leaf(_) => &[],
            Body::Interior { children, .. } => children,
        }
    }

    /// The node's payload, its children named by their extents (every child is written
    /// before its parent: `None` if one is not).
    pub fn encode(&self) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(self.bytes);
        out.push(NODE_FORMAT);
        match &self.body {
            Body::Leaf(slots) => {
                out.push(LEAF);
                put_varint(&mut out, slots.len() as u64);
                for s in slots {
                    put_bytes(&mut out, &s.key);
                    put_varint(&mut out, s.seq);
                    match &s.value {
                        Some(v) => {
                            out.push(1);
                            put_bytes(&mut out, v);
                        }
                        None => out.push(0),
                    }
                }
            }
            Body::Interior { keys, children } => {
                out.push(INTERIOR);
                put_varint(&mut out, children.len() as u64);
                for (i, child) in children.iter().enumerate() {
                    if i > 0 {
                        put_bytes(&mut out, &keys[i - 1]);
                    }
                    child.addr()?.encode(&mut out);
                }
            }
        }
        Some(out)
    }
}

/// A node's payload decoded: a leaf whole, an interior node with its children's extents.
pub(crate) enum Decoded {
    Leaf(Vec<Slot>),
    Interior {
        keys: Vec<Bytes>,
        children: Vec<ExtentAddr>,
    },
}

/// Decodes a node's payload (its checksum already checked by the zone store).
pub(crate) fn decode(payload: &[u8]) -> Result<Decoded, String> {
    let mut r = Reader::new(payload);
    let format = r.u8()?;
    if format != NODE_FORMAT {
        return Err(format!("unsupported node format {format}"));
    }
    let decoded = match r.u8()? {
        LEAF => {
            let n = r.len()?;
            let mut slots = Vec::with_capacity(n.min(payload.len()));
            let mut prev: Option<Bytes> = None;
            for _ in 0..n {
                let key: Bytes = r.bytes()?.into();
                let seq = r.varint()?;
                let value = match r.u8()? {
                    0 => None,
                    1 => Some(r.bytes()?.into()),
                    other => return Err(format!("bad value flag {other}")),
                };
                if prev.as_ref().is_some_and(|p| *p >= key) {
                    return Err("leaf keys out of order".into());
                }
                prev = Some(key.clone());
                slots.push(Slot { key, seq, value });
            }
            Decoded::Leaf(slots)
        }
        INTERIOR => {
            let n = r.len()?;
            if n == 0 {
                return Err("interior node without children".into());
            }
            let mut keys = Vec::with_capacity(n - 1);
            let mut children = Vec::with_capacity(n);
            for i in 0..n {
                if i > 0 {
                    let key: Bytes = r.bytes()?.into();
                    if keys.last().is_some_and(|p: &Bytes| *p >= key) {
                        return Err("interior keys out of order".into());
                    }
                    keys.push(key);
                }
                let addr = ExtentAddr::decode(r.take(ExtentAddr::ENCODED_LEN)?)
                    .ok_or("child address cut short")?;
                children.push(addr);
            }
            Decoded::Interior { keys, children }
        }
        other => return Err(format!("unknown node type {other}")),
    };
    if !r.is_empty() {
        return Err("trailing bytes after the node".into());
    }
    Ok(decoded)
}

/// The first 8 bytes of `key`, big endian, zero-padded: `a < b` gives `head(a) <= head(b)`.
pub(crate) fn head(key: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    let n = key.len().min(8);
    bytes[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(bytes)
}

fn body_len(body: &Body) -> usize {
    match body {
        Body::Leaf(slots) => 8 + slots.iter().map(Slot::encoded_len).sum::<usize>(),
        Body::Interior { keys, .. } => {
            8 + keys
                .iter()
                .map(|k| k.len() + 2 + ExtentAddr::ENCODED_LEN)
                .sum::<usize>()
                + ExtentAddr::ENCODED_LEN
        }
    }
}
