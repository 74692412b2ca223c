//! The copy-on-write B+tree layout in a store (`crate::layout::cowbtree`): node reference
//! counts across checkpoints, snapshots and reopening; a damaged node named by `check`,
//! refused by open, salvaged by `repair`; readers scanning while a writer commits.

use super::Db;
use crate::layout::cowbtree::node::Node;
use crate::layout::cowbtree::Durable;
use crate::{Options, TableId};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;
use stitch_io::{Disk, MemDisk};
use stitch_zone::ExtentAddr;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn options() -> Options {
    Options {
        zone_size: 256 * 1024,
        memtable_size: 64 * 1024,
        background: false,
        ..Options::default()
    }
}

fn tree_table(db: &Db) -> TableId {
    db.create_table_with_layout("tree", "cow-btree(node=1024)")
        .unwrap()
}

/// The written root of `table`.
fn durable_root(db: &Db, table: TableId) -> Option<Durable> {
    let v = db.inner.version.read().clone();
    v.tables[&table].data.cow_btree()?.durable().cloned()
}

/// Every written node reachable from `root`, with how many written parents name it.
fn written(
    root: &Arc<Node>,
    parents: &mut HashMap<ExtentAddr, u32>,
    seen: &mut HashSet<ExtentAddr>,
) {
    let Some(addr) = root.addr() else { return };
    if !seen.insert(addr) {
        return;
    }
    for child in root.children() {
        if let Some(c) = child.addr() {
            *parents.entry(c).or_default() += 1;
        }
        written(child, parents, seen);
    }
}

/// Checks that every node the live roots reach holds exactly one reference per written
/// parent and root naming it, and that `gone` nodes hold none.
fn counts_are_exact(db: &Db, roots: &[ExtentAddr], gone: &HashSet<ExtentAddr>) {
    let v = db.inner.version.read().clone();
    let mut parents = HashMap::new();
    let mut seen = HashSet::new();
    let mut trees: Vec<Arc<Node>> = v
        .tables
        .values()
        .filter_map(|t| Some(t.data.cow_btree()?.durable()?.root.clone()))
        .collect();
    trees.extend(
        db.inner
            .checkpoint
            .lock()
            .snapshots
            .values()
            .flat_map(|s| s.tables.iter().filter_map(|t| Some(t.root.clone()?.root))),
    );
    for root in &trees {
        written(root, &mut parents, &mut seen);
    }
    for r in roots {
        *parents.entry(*r).or_default() += 1;
    }
    for addr in &seen {
        assert_eq!(db.inner.zones.ref_count(*addr), parents[addr], "{addr}");
    }
    for addr in gone.iter().filter(|a| !seen.contains(a)) {
        assert_eq!(db.inner.zones.ref_count(*addr), 0, "{addr} should be free");
    }
}

fn all_written(root: &Arc<Node>) -> HashSet<ExtentAddr> {
    let (mut parents, mut seen) = (HashMap::new(), HashSet::new());
    written(root, &mut parents, &mut seen);
    seen
}

#[test]
fn node_references_drop_to_zero_exactly_when_no_version_or_snapshot_holds_them() {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap();
    let t = tree_table(&db);
    for i in 0..3000 {
        db.put(t, key(i), [b'a'; 40]).unwrap();
    }
    db.flush().unwrap();
    let first = durable_root(&db, t).unwrap();
    let first_nodes = all_written(&first.root);
    assert!(first_nodes.len() > 10);
    counts_are_exact(&db, &[first.addr], &HashSet::new());

    // A snapshot pins the root: one more reference on it, none on the nodes below.
    db.snapshot("s").unwrap();
    counts_are_exact(&db, &[first.addr, first.addr], &HashSet::new());

    // Changing a few keys shadows their paths: the new root shares the rest.
    for i in (0..3000).step_by(500) {
        db.put(t, key(i), b"changed").unwrap();
    }
    db.flush().unwrap();
    let second = durable_root(&db, t).unwrap();
    assert_ne!(second.addr, first.addr);
    let shared = all_written(&second.root).intersection(&first_nodes).count();
    assert!(shared > 0 && shared < first_nodes.len());
    counts_are_exact(&db, &[second.addr, first.addr], &HashSet::new());

    // Dropping the snapshot frees what only the first version held, and only that.
    db.drop_snapshot("s").unwrap();
    counts_are_exact(&db, &[second.addr], &first_nodes);
    db.check().unwrap();

    // Reopened, the counts are rebuilt the same from the manifest.
    let disk = db.inner.zones.cache().disk().clone();
    drop(db);
    let db = Db::open_on(disk, options()).unwrap();
    let t = db.table("tree").unwrap();
    let root = durable_root(&db, t).unwrap();
    assert_eq!(root.addr, second.addr);
    counts_are_exact(&db, &[root.addr], &first_nodes);
    assert_eq!(db.get(t, key(500)).unwrap().unwrap(), b"changed");
    assert_eq!(db.get(t, key(501)).unwrap().unwrap(), [b'a'; 40]);
}

/// The bytes of `disk`.
fn image(disk: &Arc<dyn Disk>) -> Vec<u8> {
    let mut bytes = vec![0; disk.len() as usize];
    disk.read_at(0, &mut bytes).unwrap();
    bytes
}

fn disk_of(bytes: &[u8]) -> Arc<dyn Disk> {
    let disk = MemDisk::new(bytes.len() as u64);
    disk.write_at(0, bytes).unwrap();
    Arc::new(disk)
}

#[test]
fn a_damaged_node_is_named_by_check_refused_by_open_and_salvaged_by_repair() {
    let db = Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap();
    let t = tree_table(&db);
    let mut model = BTreeMap::new();
    for i in 0..2000 {
        db.put(t, key(i), [b'v'; 30]).unwrap();
        model.insert(key(i), vec![b'v'; 30]);
    }
    db.flush().unwrap();
    let leaves: Vec<_> = db
        .layout()
        .into_iter()
        .filter(|p| p.what == "B+tree leaf")
        .collect();
    assert!(leaves.len() > 4);
    let damaged = &leaves[leaves.len() / 2];
    let disk = db.inner.zones.cache().disk().clone();
    let mut bytes = image(&disk);
    drop(db);
    let at = (damaged.disk_offset + damaged.len / 2) as usize;
    bytes[at] = !bytes[at];

    // `check` names the damaged node and the keys it held.
    let checked = Db::check_store_on(disk_of(&bytes), options()).unwrap();
    assert_eq!(checked.damage.len(), 1, "{:?}", checked.damage);
    let named = checked.damage[0].to_string();
    assert!(named.contains(&damaged.label), "{named}");
    assert_eq!(checked.lost.len(), 1);
    // Opening refuses it (reads never see its bytes).
    match Db::open_on(disk_of(&bytes), options()) {
        Err(e) => assert!(e.to_string().contains(&damaged.label), "{e}"),
        Ok(_) => panic!("opened a damaged store"),
    }
    // Repair keeps every other leaf's keys and reports the lost range.
    let fresh: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
    let report = Db::repair_on(disk_of(&bytes), fresh.clone(), options()).unwrap();
    assert_eq!(report.salvage.lost.len(), 1, "{:?}", report.salvage);
    let lost = &report.salvage.lost[0];
    let repaired = Db::open_on(fresh, options()).unwrap();
    let t = repaired.table("tree").unwrap();
    let got: BTreeMap<_, _> = repaired
        .range(t, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    let in_lost = |k: &Vec<u8>| {
        (
            lost.start.as_ref().map(|s| s.as_slice()),
            lost.end.as_ref().map(|e| e.as_slice()),
        )
            .contains(k.as_slice())
    };
    let kept: BTreeMap<_, _> = model.into_iter().filter(|(k, _)| !in_lost(k)).collect();
    assert!(kept.len() < 2000 && kept.len() > 1000);
    assert_eq!(got, kept);
    repaired.check().unwrap();
}

/// Readers scanning while a writer commits see whole commits: each commit moves an amount
/// between two accounts, so every scan must find the same total, and gets at a snapshot
/// agree with the scan at it.
#[test]
fn concurrent_readers_see_whole_commits() {
    use crate::WriteBatch;
    let db = Arc::new(Db::create_on(Arc::new(MemDisk::new(0)), options()).unwrap());
    let t = tree_table(&db);
    let accounts = 200u32;
    let mut batch = WriteBatch::new();
    for i in 0..accounts {
        batch.put(t, key(i), 1000u64.to_le_bytes());
    }
    db.write(&batch, crate::Durability::Async).unwrap();
    let total = 1000 * accounts as u64;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut scans = 0;
                while !stop.load(std::sync::atomic::Ordering::Acquire) || scans < 10 {
                    let sum: u64 = db
                        .range(t, Bound::Unbounded, Bound::Unbounded)
                        .unwrap()
                        .map(|r| u64::from_le_bytes(r.unwrap().1.try_into().unwrap()))
                        .sum();
                    assert_eq!(sum, total, "scan {scans}");
                    scans += 1;
                }
                scans
            })
        })
        .collect();
    let mut balances = vec![1000u64; accounts as usize];
    for n in 0..3000u32 {
        let (from, to) = ((n * 7919) % accounts, (n * 104_729 + 1) % accounts);
        if from == to || balances[from as usize] == 0 {
            continue;
        }
        let amount = 1 + (n as u64 % balances[from as usize]);
        balances[from as usize] -= amount;
        balances[to as usize] += amount;
        let mut batch = WriteBatch::new();
        batch.put(t, key(from), balances[from as usize].to_le_bytes());
        batch.put(t, key(to), balances[to as usize].to_le_bytes());
        db.write(&batch, crate::Durability::Async).unwrap();
        if n % 1000 == 999 {
            db.flush().unwrap();
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Release);
    for r in readers {
        assert!(r.join().unwrap() >= 10);
    }
    for i in 0..accounts {
        let got = db.get(t, key(i)).unwrap().unwrap();
        assert_eq!(
            u64::from_le_bytes(got.try_into().unwrap()),
            balances[i as usize]
        );
    }
    db.check().unwrap();
}
