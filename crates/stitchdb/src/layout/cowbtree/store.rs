//! Nodes in the zone store: written out at checkpoints, loaded at open, reference-counted.
//!
//! Each written node is an extent of kind 6. Its reference count is the number of written
//! parents naming it, plus one for each root reference (the manifest's table record, each
//! named snapshot). A checkpoint writes the nodes its version made since the last one, leaves
//! before their parents (every leaf is at the same depth, so one batch per level), and takes
//! a reference on each older node a new parent names. When a count drops to zero the node's
//! release handler drops one reference from each of its children (Goby): freeing an old root
//! frees exactly the nodes no other written version holds. The handler finds a node's
//! children in [`NodeRefs`], a map of every written interior node's children kept in memory,
//! so releasing never reads the disk.
//!
//! Counts are not persisted: at open the live roots (the manifest's and its snapshots') are
//! walked, each node read once and a reference marked for each edge to it. The whole tree is
//! loaded by that walk anyway: the layout keeps its nodes in memory (see `mod.rs`).

use super::node::{decode, Body, Decoded, Node, NODE_KIND};
use crate::{Error, Result};
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::ops::Bound;
use std::sync::{Arc, Weak};
use stitch_patch::PatchId;
use stitch_zone::{ExtentAddr, FramedBatch, Stream, ZoneStore};

/// The children of every written interior node, for the release handler.
pub(crate) struct NodeRefs {
    children: Mutex<HashMap<ExtentAddr, Vec<ExtentAddr>>>,
}

impl NodeRefs {
    /// The map for `zones`, with its release handler installed for node extents.
    pub fn install(zones: &Arc<ZoneStore>) -> Arc<NodeRefs> {
        let refs = Arc::new(NodeRefs {
            children: Mutex::new(HashMap::new()),
        });
        let (weak_refs, weak_zones): (Weak<NodeRefs>, Weak<ZoneStore>) =
            (Arc::downgrade(&refs), Arc::downgrade(zones));
        zones.set_release_handler(
            NODE_KIND,
            Arc::new(move |addr| {
                let (Some(refs), Some(zones)) = (weak_refs.upgrade(), weak_zones.upgrade()) else {
                    return;
                };
                let children = refs.children.lock().remove(&addr);
                if let Some(children) = children {
                    if let Err(e) = zones.decref_all(children) {
                        tracing::error!("releasing the children of B+tree node {addr}: {e}");
                    }
                }
            }),
        );
        refs
    }

    fn record(&self, node: ExtentAddr, children: Vec<ExtentAddr>) {
        if !children.is_empty() {
            self.children.lock().insert(node, children);
        }
    }
}

fn corrupt(addr: ExtentAddr, detail: impl Into<String>) -> Error {
    Error::Corrupt {
        what: "B+tree node",
        place: addr.to_string(),
        detail: detail.into(),
    }
}

/// Writes every node of the version at `root` not written yet, to `stream`; the root's new
/// reference (the manifest's) is counted. Returns the root's extent and the patch after
/// which all of it is on the disk.
pub(crate) fn write_tree(
    zones: &ZoneStore,
    refs: &NodeRefs,
    root: &Arc<Node>,
    stream: Stream,
) -> Result<(ExtentAddr, PatchId)> {
    if let Some(addr) = root.addr() {
        zones.incref(addr)?;
        return Ok((addr, zones.cache().empty(&[])?));
    }
    // The unwritten nodes by depth (every unwritten node's parent is unwritten too), and the
    // written ones they name, which gain a reference.
    let mut levels: Vec<Vec<Arc<Node>>> = vec![vec![root.clone()]];
    let mut shared = Vec::new();
    loop {
        let mut next = Vec::new();
        for node in levels.last().into_iter().flatten() {
            for child in node.children() {
                match child.addr() {
                    Some(addr) => shared.push(addr),
                    None => next.push(child.clone()),
                }
            }
        }
        if next.is_empty() {
            break;
        }
        levels.push(next);
    }
    zones.incref_all(&shared)?;
    let mut patches = Vec::new();
    for level in levels.iter().rev() {
        let mut batch = FramedBatch::new();
        for node in level {
            let payload = node
                .encode()
                .ok_or_else(|| corrupt_internal("a child was not written before its parent"))?;
            batch.push(&payload);
        }
        let (addrs, written) = zones.append_batch(stream, NODE_KIND, &mut batch, &[])?;
        patches.extend(written);
        for (node, addr) in level.iter().zip(addrs) {
            node.set_addr(addr);
            refs.record(
                addr,
                node.children().iter().filter_map(|c| c.addr()).collect(),
            );
        }
    }
    let addr = root
        .addr()
        .ok_or_else(|| corrupt_internal("the root was not written"))?;
    Ok((addr, zones.cache().empty(&patches)?))
}

fn corrupt_internal(detail: &str) -> Error {
    Error::Corrupt {
        what: "B+tree",
        place: "checkpoint".into(),
        detail: format!("internal error: {detail}"),
    }
}

/// Where a damaged node was and the keys it held: handed to a salvaging open's callback.
pub(crate) struct LostNode {
    pub addr: ExtentAddr,
    pub error: Error,
    /// The keys the node's subtree held, from its parent's separators.
    pub start: Bound<Vec<u8>>,
    pub end: Bound<Vec<u8>>,
}

/// Loads the version whose root is at `addr`, counting the root reference that names it and
/// each edge to a node the first time its parent is read. `loaded` holds the nodes read so
/// far (versions share nodes: each is read, and its edges counted, once). A node that fails
/// its checksum or format is the error, or with `salvage` is reported to it and read as an
/// empty leaf (its keys are lost; the rest of the tree is kept).
pub(crate) fn load_tree(
    zones: &ZoneStore,
    refs: &NodeRefs,
    addr: ExtentAddr,
    loaded: &mut HashMap<ExtentAddr, Arc<Node>>,
    salvage: Option<&mut dyn FnMut(LostNode)>,
) -> Result<Arc<Node>> {
    zones.mark_live(addr, NODE_KIND)?;
    let mut load = Loader {
        zones,
        refs,
        loaded,
        salvage,
    };
    load.node(addr, Bound::Unbounded, Bound::Unbounded)
}

struct Loader<'a, 'b> {
    zones: &'a ZoneStore,
    refs: &'a NodeRefs,
    loaded: &'a mut HashMap<ExtentAddr, Arc<Node>>,
    salvage: Option<&'b mut dyn FnMut(LostNode)>,
}

impl Loader<'_, '_> {
    fn read(&self, addr: ExtentAddr) -> Result<Decoded> {
        let payload = self.zones.read(addr, NODE_KIND)?;
        decode(&payload).map_err(|e| corrupt(addr, e))
    }

    /// The node at `addr`, holding keys in `start..end`.
    fn node(
        &mut self,
        addr: ExtentAddr,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
    ) -> Result<Arc<Node>> {
        if let Some(node) = self.loaded.get(&addr) {
            return Ok(node.clone());
        }
        let decoded = match (self.read(addr), self.salvage.as_deref_mut()) {
            (Ok(decoded), _) => decoded,
            (Err(e), None) => return Err(e),
            (Err(error), Some(report)) => {
                report(LostNode {
                    addr,
                    error,
                    start: start.map(<[u8]>::to_vec),
                    end: end.map(<[u8]>::to_vec),
                });
                return Ok(Arc::new(Node::empty_leaf()));
            }
        };
        let body = match decoded {
            Decoded::Leaf(slots) => Body::Leaf(slots),
            Decoded::Interior { keys, children } => {
                let mut nodes = Vec::with_capacity(children.len());
                for (i, &child) in children.iter().enumerate() {
                    self.zones.mark_live(child, NODE_KIND)?;
                    let lo = match i {
                        0 => start,
                        _ => Bound::Included(keys[i - 1].as_ref()),
                    };
                    let hi = keys.get(i).map_or(end, |k| Bound::Excluded(k.as_ref()));
                    nodes.push(self.node(child, lo, hi)?);
                }
                self.refs.record(addr, children);
                Body::Interior {
                    keys,
                    children: nodes,
                }
            }
        };
        let node = Arc::new(Node::new(body));
        node.set_addr(addr);
        self.loaded.insert(addr, node.clone());
        Ok(node)
    }
}

/// Reads back every written node of the version at `root` and checks it (checksum, format,
/// the children it names being the ones in memory); the first damaged one is the error,
/// named by its extent. Adds each node's extent to `parents` once per written parent (or
/// root reference) naming it, to be held against its reference count.
pub(crate) fn check_tree(
    zones: &ZoneStore,
    root: &Arc<Node>,
    parents: &mut HashMap<ExtentAddr, u32>,
    seen: &mut HashSet<ExtentAddr>,
) -> Result<()> {
    let Some(addr) = root.addr() else {
        return Ok(());
    };
    *parents.entry(addr).or_default() += 1;
    let mut stack = vec![root.clone()];
    while let Some(node) = stack.pop() {
        let Some(addr) = node.addr() else {
            continue;
        };
        if !seen.insert(addr) {
            continue;
        }
        let payload = zones.read(addr, NODE_KIND)?;
        let decoded = decode(&payload).map_err(|e| corrupt(addr, e))?;
        if let Decoded::Interior { children, .. } = decoded {
            let held: Vec<_> = node.children().iter().map(|c| c.addr()).collect();
            if held != children.iter().copied().map(Some).collect::<Vec<_>>() {
                return Err(corrupt(
                    addr,
                    "names other children than the tree in memory",
                ));
            }
            for child in children {
                *parents.entry(child).or_default() += 1;
            }
        }
        stack.extend(node.children().iter().cloned());
    }
    Ok(())
}
