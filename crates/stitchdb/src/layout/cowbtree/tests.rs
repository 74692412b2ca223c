//! Tests of the tree's own invariants: Goby's merge under concurrent writers, nested
//! transactions, readers keeping their version, tombstones. In a store (reference counts,
//! snapshots, damage, concurrent readers): `db/cow_btree_tests.rs`.

use super::node::{Body, Node, Slot};
use super::tree::{self, Iter};
use super::{Blessed, CowBTree};
use crate::layout::TableData;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, Barrier};

const NODE: usize = 1024;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn slot(i: u32, seq: u64, value: &str) -> Slot {
    Slot {
        key: key(i).into(),
        seq,
        value: Some(value.as_bytes().into()),
    }
}

/// The live pairs of the version at `root`.
fn pairs(root: &Arc<Node>) -> BTreeMap<Vec<u8>, Vec<u8>> {
    Iter::new(root.clone(), Bound::Unbounded, Bound::Unbounded, true)
        .filter_map(|e| Some((e.key, e.value?)))
        .collect()
}

/// A blessed tree of keys `0..n`, each `"base"`.
fn base_tree(n: u32) -> Blessed {
    let blessed = Blessed::new(Arc::new(Node::empty_leaf()));
    let mut txn = blessed.begin(NODE);
    for i in 0..n {
        txn.put(slot(i, 1, "base"));
    }
    blessed.bless(&txn, Some(1), u64::MAX);
    blessed
}

fn children(node: &Arc<Node>) -> &[Arc<Node>] {
    match &node.body {
        Body::Interior { children, .. } => children,
        Body::Leaf(_) => &[],
    }
}

#[test]
fn a_merge_grafts_the_subtrees_only_the_other_writer_changed() {
    let blessed = base_tree(2000);
    let (mut a, mut b) = (blessed.begin(NODE), blessed.begin(NODE));
    a.put(slot(5, 2, "a"));
    b.put(slot(1995, 3, "b"));
    blessed.bless(&a, None, u64::MAX);
    let theirs = blessed.load().head().clone();
    blessed.bless(&b, None, u64::MAX);
    let merged = blessed.load().head().clone();
    let got = pairs(&merged);
    assert_eq!(got[&key(5)], b"a");
    assert_eq!(got[&key(1995)], b"b");
    assert_eq!(got.len(), 2000);
    // Grafted, not replayed: the first child (a's change) is a's node itself, and the last
    // is b's own.
    assert!(Arc::ptr_eq(&children(&merged)[0], &children(&theirs)[0]));
    assert!(Arc::ptr_eq(
        children(&merged).last().unwrap(),
        children(b.root()).last().unwrap()
    ));
}

#[test]
fn writers_of_one_leaf_merge_by_replaying_the_later_ones_log() {
    let blessed = base_tree(2000);
    let (mut a, mut b) = (blessed.begin(NODE), blessed.begin(NODE));
    a.put(slot(10, 2, "a"));
    a.put(slot(11, 2, "a"));
    b.put(slot(11, 3, "b"));
    b.put(slot(12, 3, "b"));
    blessed.bless(&a, None, u64::MAX);
    blessed.bless(&b, None, u64::MAX);
    let got = pairs(blessed.load().head());
    assert_eq!(
        (&got[&key(10)][..], &got[&key(11)][..], &got[&key(12)][..]),
        (&b"a"[..], &b"b"[..], &b"b"[..])
    );
    assert_eq!(got.len(), 2000);
}

/// Goby's test: writers whose transactions overlap in time (every one begins before any
/// commits) and in keys (each writes keys of its own and keys all of them write), committing
/// at once, some splitting nodes. Every write of every writer is in the blessed version; a
/// key all of them wrote holds the value of the last to commit.
#[test]
fn concurrent_writers_with_overlapping_transactions_all_merge() {
    let writers: u32 = 4;
    let rounds: u32 = std::env::var("STITCH_COW_MERGE_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    for round in 0..rounds {
        let blessed = Arc::new(base_tree(3000));
        let start = Arc::new(Barrier::new(writers as usize));
        let threads: Vec<_> = (0..writers)
            .map(|w| {
                let (blessed, start) = (blessed.clone(), start.clone());
                std::thread::spawn(move || {
                    let mut txn = blessed.begin(NODE);
                    let value = format!("w{w}");
                    // Own keys: a stretch of existing ones, and new ones that split leaves.
                    for i in 0..50 {
                        txn.put(slot(w * 700 + i * 3, 2, &value));
                        txn.put(slot(10_000 + w * 1000 + round * 7 + i, 2, &value));
                    }
                    // Keys every writer writes.
                    for i in 0..5 {
                        txn.put(slot(2500 + i, 2, &value));
                    }
                    start.wait();
                    let seq = blessed.bless(&txn, None, u64::MAX);
                    (w, seq)
                })
            })
            .collect();
        let mut order: Vec<(u32, u64)> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        order.sort_by_key(|(_, seq)| *seq);
        let got = pairs(blessed.load().head());
        for w in 0..writers {
            let value = format!("w{w}").into_bytes();
            for i in 0..50 {
                assert_eq!(got[&key(w * 700 + i * 3)], value, "round {round}");
                assert_eq!(got[&key(10_000 + w * 1000 + round * 7 + i)], value);
            }
        }
        let last = format!("w{}", order.last().unwrap().0).into_bytes();
        for i in 0..5 {
            assert_eq!(got[&key(2500 + i)], last);
        }
        assert_eq!(got.len(), 3000 + 50 * writers as usize);
    }
}

#[test]
fn a_nested_transaction_commits_into_its_parent_not_the_blessed_version() {
    let blessed = base_tree(500);
    let mut parent = blessed.begin(NODE);
    parent.put(slot(1, 2, "parent"));
    let mut child = parent.nested();
    child.put(slot(400, 2, "child"));
    parent.put(slot(2, 2, "parent"));
    assert_eq!(pairs(blessed.load().head())[&key(400)], b"base");
    parent.commit_nested(child);
    assert_eq!(pairs(blessed.load().head())[&key(400)], b"base");
    blessed.bless(&parent, None, u64::MAX);
    let got = pairs(blessed.load().head());
    assert_eq!(
        (&got[&key(1)][..], &got[&key(2)][..], &got[&key(400)][..]),
        (&b"parent"[..], &b"parent"[..], &b"child"[..])
    );
}

#[test]
fn readers_keep_their_version_while_writers_commit() {
    let table = CowBTree::new(NODE, None);
    for i in 0..300 {
        table.write(&key(i), 1, Some(b"one".to_vec()));
    }
    table.publish(1, 1);
    let held = table.view();
    let mut model: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
    for seq in 2..200u64 {
        let i = (seq * 37 % 300) as u32;
        let value = (seq % 5 != 0).then(|| seq.to_string().into_bytes());
        table.write(&key(i), seq, value.clone());
        model.insert(key(i), value);
        // A reader at 1 is registered: every version from 1 on is kept for it.
        table.publish(seq, 1);
    }
    for i in 0..300 {
        let got = held.get(&key(i), u64::MAX).unwrap();
        assert_eq!(got, Some((1, Some(b"one".to_vec()))));
        let now = table.view().get(&key(i), 1).unwrap();
        assert_eq!(now, Some((1, Some(b"one".to_vec()))), "at 1, key {i}");
    }
    // At the newest, the model; a scan merging the kept versions agrees at every snapshot.
    let newest = table.view();
    for (k, v) in &model {
        assert_eq!(newest.get(k, u64::MAX).unwrap().unwrap().1, *v);
    }
    let scanned: Vec<_> = newest
        .cursor(Bound::Unbounded, Bound::Unbounded)
        .map(|e| e.unwrap())
        .collect();
    for seq in [1u64, 50, 199] {
        let mut at: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
        for e in scanned.iter().filter(|e| e.seq <= seq) {
            at.entry(e.key.clone()).or_insert(e.value.clone());
        }
        for (k, v) in &at {
            assert_eq!(newest.get(k, seq).unwrap().map(|x| x.1), Some(v.clone()));
        }
        // A scan told its snapshot reads that root alone, both ways, and agrees.
        let live: BTreeMap<_, _> = at
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.clone()?)))
            .collect();
        for reverse in [false, true] {
            let read: BTreeMap<_, _> = newest
                .cursor_at(Bound::Unbounded, Bound::Unbounded, reverse, seq)
                .map(|e| e.unwrap())
                .filter_map(|e| Some((e.key, e.value?)))
                .collect();
            assert_eq!(read, live, "at {seq}, reverse {reverse}");
        }
    }
    // With no reader left behind, only the newest version is kept.
    table.write(&key(0), 200, None);
    table.publish(200, 200);
    assert_eq!(table.versions().len(), 1);
}

#[test]
fn tombstones_go_once_no_kept_version_is_older() {
    let mut root = Arc::new(Node::empty_leaf());
    for i in 0..10 {
        tree::put(&mut root, slot(i, 1, "v"), NODE, 0);
    }
    tree::put(
        &mut root,
        Slot {
            key: key(3).into(),
            seq: 2,
            value: None,
        },
        NODE,
        0,
    );
    assert!(tree::get(&root, &key(3)).is_some_and(|s| s.value.is_none()));
    tree::put(&mut root, slot(4, 3, "w"), NODE, 2);
    assert!(tree::get(&root, &key(3)).is_none());
}
