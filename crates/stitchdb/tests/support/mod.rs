//! Shared by the integration tests: a disk that captures crash images as it runs, a table's
//! contents read into a map, and the sizes of long runs set from the environment.

// Each test binary compiles this module and uses only part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use stitchdb::{Db, Options, TableId};

/// Layouts that hold any key and value the crash, transaction and snapshot workloads write,
/// so those suites run over every module and layout: `""` is the default table as it is; the others
/// are a table made with the layout (specialized formats under `exception`, whose `linear`
/// keeps what they refuse; 8-byte values are what `fixed(8)` is for, and a few of the
/// workloads' values are what a coding or `empty` takes; not `delta-integer`, which refuses
/// values that are not 4 bytes).
pub const LAYOUTS: &[&str] = &[
    "",
    "managed -> exception -> fixed(8) -> linear",
    "managed -> bloom -> cache(keys=16) -> btree -> linear",
    "managed -> btree(node=1024) -> exception -> unique-string(max=4, len=64) -> linear",
    "managed -> linear",
    "managed -> btree(node=1024) -> exception -> small-integer(2) -> fixed(2) -> linear",
    "managed -> bloom -> exception -> empty -> linear",
    "managed -> exception -> state-dictionary -> fixed(1) -> linear",
    "managed -> quotient -> btree(node=1024) -> sliding-window(window=4) -> linear",
    // The crash workload's commit marker in the first region; range deletes and
    // transactions cross the others.
    "partition(at=\"k1\", at=\"k3\") -> [managed -> exception -> fixed(8) -> linear \
     | managed -> bloom -> btree(node=1024) -> linear | managed -> linear]", // Goby's copy-on-write B+tree, with small nodes so the workloads' trees grow levels.
    "cow-btree(node=1024)",
];

/// The name of the table [`layout_table`] makes.
pub const LAID_OUT: &str = "laid-out";

/// The table a workload writes in `layout` (one of [`LAYOUTS`]): the default table, or one
/// made with the layout, named [`LAID_OUT`].
pub fn layout_table(db: &Db, layout: &str) -> TableId {
    match layout {
        "" => db.default_table(),
        layout => db.create_table_with_layout(LAID_OUT, layout).unwrap(),
    }
}

/// The table [`layout_table`] made for `layout`, in a reopened store.
pub fn laid_out_table(db: &Db, layout: &str) -> TableId {
    match layout {
        "" => db.default_table(),
        _ => db.table(LAID_OUT).unwrap(),
    }
}

pub use stitch_io::CrashingDisk;

/// The number the environment variable `name` holds (how long a run explores), else
/// `default`.
pub fn env_count<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Reopens every image `disk` captured and checks that each holds exactly `expected` in its
/// default table and passes `check`; returns how many there were.
pub fn every_image_holds(
    disk: &CrashingDisk,
    opts: &Options,
    expected: &BTreeMap<Vec<u8>, Vec<u8>>,
    what: &str,
) -> usize {
    let images: Vec<_> = disk.images.lock().drain(..).collect();
    let count = images.len();
    for (i, (image, _, _)) in images.into_iter().enumerate() {
        let db = Db::open_on(Arc::new(image), opts.clone()).unwrap();
        assert_eq!(
            &table_contents(&db, db.default_table()),
            expected,
            "{what}, image {i}"
        );
        db.check()
            .unwrap_or_else(|e| panic!("{what}, image {i}: {e}"));
    }
    count
}

/// Every pair of table `t`, by a scan.
pub fn table_contents(db: &Db, t: TableId) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.scan_prefix(t, b"")
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

/// One random write of the crash workloads, applied to the model `state`: a key of 40
/// (`k00`..`k39`), deleted one time in five (`None`), else set to 0-60 random bytes or, one
/// time in ten, 1,000-5,000 (values that fill blocks and memtables quickly).
pub fn random_write(
    rng: &mut impl rand::Rng,
    state: &mut BTreeMap<Vec<u8>, Vec<u8>>,
) -> (Vec<u8>, Option<Vec<u8>>) {
    let k = format!("k{:02}", rng.gen_range(0..40)).into_bytes();
    if rng.gen_bool(0.2) {
        state.remove(&k);
        return (k, None);
    }
    let len = if rng.gen_bool(0.1) {
        rng.gen_range(1000..5000)
    } else {
        rng.gen_range(0..60)
    };
    let v: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
    state.insert(k.clone(), v.clone());
    (k, Some(v))
}

/// The store the layout tests write: a memory disk, 1 MiB zones, 64 KiB memtables, `Async`
/// commits, no background work.
pub mod laid_out {
    use std::sync::Arc;
    use stitchdb::{Db, Disk, Durability, MemDisk, Options};

    pub fn options() -> Options {
        Options {
            zone_size: 1 << 20,
            memtable_size: 64 * 1024,
            background: false,
            durability: Durability::Async,
            ..Options::default()
        }
    }

    pub fn store() -> (Arc<dyn Disk>, Db) {
        let disk: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
        let db = Db::create_on(disk.clone(), options()).unwrap();
        (disk, db)
    }

    /// Closes `db` and opens its store again.
    pub fn reopen(disk: &Arc<dyn Disk>, db: Db) -> Db {
        db.close().unwrap();
        Db::open_on(disk.clone(), options()).unwrap()
    }
}
