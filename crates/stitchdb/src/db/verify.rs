//! `check` of a store that may not even open: every damaged structure in one pass.
//!
//! A salvaging open ([`Db::open_salvaging_on`]) reads both superblock slots, the manifest (the
//! older slot's if the newest is damaged), every run's index extents, filter and data blocks,
//! and the log past any damage, recording each problem instead of stopping at the first.
//! When it found none, the store is opened as usual and its own [`Db::check`] verifies what
//! needs the whole store: layer order, extent references and overlaps.

use super::damage::{Damage, LostKeys, Salvage};
use super::{recover, CheckReport, Db};
use crate::layout::TableData;
use crate::{Options, Result};
use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use stitch_io::{Disk, LockMode};

/// What [`Db::check_store`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreCheck {
    /// What was read and verified.
    pub report: CheckReport,
    /// Every damaged structure, in the order found (superblocks, manifest, runs, log).
    pub damage: Vec<Damage>,
    /// The keys the damage put out of reach, as far as the damaged structures say.
    pub lost: Vec<LostKeys>,
}

impl StoreCheck {
    /// True when nothing is damaged.
    pub fn is_ok(&self) -> bool {
        self.damage.is_empty()
    }
}

impl Db {
    /// Opens a possibly damaged store read-only, with everything readable of it: damaged
    /// structures are recorded in the returned [`Salvage`] instead of failing the open (see
    /// `check` and `repair`). Reads never return a damaged block's bytes: its keys are left
    /// out (listed in [`Salvage::lost`]). Fails only if the store has no valid superblock or
    /// no readable manifest; `salvage` holds what was found up to then.
    pub fn open_salvaging_on(
        disk: Arc<dyn Disk>,
        opts: Options,
        salvage: &mut Salvage,
    ) -> Result<Db> {
        opts.validate()?;
        let (storage, recovered, manifest) = recover::recover_salvaging(disk, &opts, salvage)?;
        let inner = Self::inner(storage, opts, &recovered, manifest, None, 0);
        Ok(Db {
            inner: Arc::new(inner),
            threads: Vec::new(),
        })
    }

    /// Checks the store in the file at `path` (opened shared, read-only): every damaged
    /// structure, not just the first. Errors only when the file cannot be opened.
    pub fn check_store(path: impl AsRef<Path>, opts: Options) -> Result<StoreCheck> {
        let disk = super::open_file(path.as_ref(), LockMode::Shared, &opts)?;
        Self::check_store_on(disk, opts)
    }

    /// [`check_store`](Self::check_store) on any [`Disk`].
    pub fn check_store_on(disk: Arc<dyn Disk>, opts: Options) -> Result<StoreCheck> {
        let mut salvage = Salvage::default();
        let db = match Self::open_salvaging_on(disk.clone(), opts.clone(), &mut salvage) {
            Ok(db) => db,
            Err(e) => {
                salvage
                    .damage
                    .push(Damage::from_error(&e, "store", "opening"));
                return Ok(StoreCheck {
                    report: CheckReport::default(),
                    damage: salvage.damage,
                    lost: salvage.lost,
                });
            }
        };
        let mut report = db.salvaged_counts();
        drop(db);
        if salvage.damage.is_empty() {
            // Nothing damaged: the store opens as usual, and its own check (which needs the
            // extents' reference counts a salvaging open does not take) has the last word.
            match Self::open_read_only_on(disk, opts).and_then(|db| db.check()) {
                Ok(full) => report = full,
                Err(e) => salvage
                    .damage
                    .push(Damage::from_error(&e, "store", "check")),
            }
        }
        Ok(StoreCheck {
            report,
            damage: salvage.damage,
            lost: salvage.lost,
        })
    }

    /// What a salvaging open read: its runs' blocks were all read and verified.
    fn salvaged_counts(&self) -> CheckReport {
        let version = self.inner.version.read().clone();
        let mut seen = HashSet::new();
        let mut report = CheckReport {
            tables: version.tables.len(),
            ..Default::default()
        };
        let snapshots = self.inner.checkpoint.lock().snapshots.clone();
        let mainline = version
            .tables
            .values()
            .flat_map(|t| t.data.runs().cloned().collect::<Vec<_>>());
        let held = snapshots.values().flat_map(|s| {
            s.tables
                .iter()
                .flat_map(|t| t.levels.iter().flatten().cloned())
                .collect::<Vec<_>>()
        });
        for run in mainline.chain(held) {
            if seen.insert(run.meta.id) {
                report.runs += 1;
                report.blocks += run.blocks().len() as u64;
                report.entries += run.meta.entries;
                report.extents += run.extents().count();
            }
        }
        report
    }
}

/// One durable structure of a store and where its bytes are (see [`Db::layout`]).
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    /// "manifest", "run index", "run index mirror", "run filter", "run block", "B+tree
    /// node", "B+tree leaf" or "log segment".
    pub what: &'static str,
    /// Its first byte on the disk.
    pub disk_offset: u64,
    /// Its bytes.
    pub len: u64,
    /// Which one ("run 4 block 7 [k1 .. k2]").
    pub label: String,
}

impl Db {
    /// Where the store's live structures are on its disk: the manifest, every run's index
    /// extents, filter parts and blocks and every written B+tree node (the mainline's and the
    /// snapshots'), and the log's start segment. For damage tests, which overwrite each one.
    #[doc(hidden)]
    pub fn layout(&self) -> Vec<Placed> {
        let zones = &self.inner.zones;
        let extent = |what: &'static str, addr: stitch_zone::ExtentAddr, label: String| Placed {
            what,
            disk_offset: zones.zone_offset(addr.zone) + u64::from(addr.offset),
            len: u64::from(addr.len),
            label,
        };
        let ck = self.inner.checkpoint.lock();
        let mut out: Vec<Placed> = ck
            .manifest
            .iter()
            .map(|&addr| extent("manifest", addr, "root".into()))
            .collect();
        out.push(Placed {
            what: "log segment",
            disk_offset: zones.zone_offset(ck.log_start.zone),
            len: zones.zone_size(),
            label: format!("records from offset {}", ck.log_start.offset),
        });
        let version = self.inner.version.read().clone();
        let mut runs: Vec<Arc<crate::layout::vtree::run::Run>> = version
            .tables
            .values()
            .flat_map(|t| t.data.runs().cloned().collect::<Vec<_>>())
            .collect();
        for snap in ck.snapshots.values() {
            runs.extend(
                snap.tables
                    .iter()
                    .flat_map(|t| t.levels.iter().flatten().cloned()),
            );
        }
        let mut roots: Vec<_> = version
            .tables
            .values()
            .filter_map(|t| t.data.cow_btree()?.durable().cloned())
            .collect();
        roots.extend(
            ck.snapshots
                .values()
                .flat_map(|s| s.tables.iter().filter_map(|t| t.root.clone())),
        );
        drop(ck);
        let mut nodes = HashSet::new();
        let mut stack: Vec<_> = roots.into_iter().map(|r| r.root).collect();
        while let Some(node) = stack.pop() {
            if let Some(addr) = node.addr().filter(|a| nodes.insert(*a)) {
                let what = match node.children().is_empty() {
                    true => "B+tree leaf",
                    false => "B+tree node",
                };
                out.push(extent(what, addr, addr.to_string()));
            }
            stack.extend(node.children().iter().cloned());
        }
        let mut seen = HashSet::new();
        for run in runs.iter().filter(|r| seen.insert(r.meta.id)) {
            let id = run.meta.id;
            out.extend(
                run.meta
                    .index
                    .iter()
                    .map(|&a| extent("run index", a, format!("run {id}"))),
            );
            out.extend(
                run.meta
                    .index_mirror
                    .iter()
                    .map(|&a| extent("run index mirror", a, format!("run {id}"))),
            );
            out.extend(
                run.meta
                    .filters
                    .iter()
                    .map(|p| extent("run filter", p.addr, format!("run {id}"))),
            );
            out.extend(run.blocks().iter().enumerate().map(|(i, h)| {
                let label = format!(
                    "run {id} block {i} [{} .. {}]",
                    h.first_key.escape_ascii(),
                    h.last_key.escape_ascii()
                );
                extent("run block", h.addr, label)
            }));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::Manifest;
    use crate::{Error, MemDisk};
    use std::collections::BTreeMap;
    use std::ops::Bound;
    use stitch_zone::{ExtentKind, Stream};

    fn options() -> Options {
        Options {
            zone_size: 64 * 1024,
            memtable_size: 16 * 1024,
            level_runs: 2,
            background: false,
            ..Options::default()
        }
    }

    fn key(i: u64) -> Vec<u8> {
        format!("key{i:06}").into_bytes()
    }

    fn contents(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
        let t = db.default_table();
        db.range(t, Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .map(|r| r.unwrap())
            .collect()
    }

    /// The bytes of a store as manifest version 4 left it (runs without index mirrors), and
    /// what it holds: written now, its manifest then written again in version 4.
    fn store_before_mirrors() -> (Vec<u8>, BTreeMap<Vec<u8>, Vec<u8>>) {
        let disk = Arc::new(MemDisk::new(0));
        let db = Db::create_on(disk.clone(), options()).unwrap();
        let t = db.default_table();
        let mut model = BTreeMap::new();
        for j in 0..3000u64 {
            let i = j * 7 % 3000;
            let value = format!("value {i} {}", "v".repeat(40)).into_bytes();
            db.put(t, key(i), &value).unwrap();
            model.insert(key(i), value);
        }
        db.compact().unwrap();
        let zones = &db.inner.zones;
        let root = db.inner.checkpoint.lock().manifest.unwrap();
        let manifest = Manifest::decode(&zones.read(root, ExtentKind::MANIFEST).unwrap()).unwrap();
        let old = manifest.encode_before_mirrors();
        let (addr, patch) = zones
            .append_to(Stream::Manifest, ExtentKind::MANIFEST, &old, &[])
            .unwrap();
        zones.write_superblock(Some(addr), &[patch]).unwrap();
        zones.cache().flush_all().unwrap();
        // The image now, before closing writes a checkpoint of its own.
        let mut bytes = vec![0u8; disk.len() as usize];
        disk.read_at(0, &mut bytes).unwrap();
        drop(db);
        (bytes, model)
    }

    fn disk_of(bytes: &[u8]) -> Arc<dyn Disk> {
        let disk = MemDisk::new(bytes.len() as u64);
        disk.write_at(0, bytes).unwrap();
        Arc::new(disk)
    }

    #[test]
    fn a_store_written_before_index_mirrors_opens_checks_merges_and_repairs() {
        let (bytes, model) = store_before_mirrors();
        let db = Db::open_on(disk_of(&bytes), options()).unwrap();
        assert_eq!(contents(&db), model);
        let runs: Vec<_> = db.inner.version.read().tables[&db.default_table()]
            .data
            .runs()
            .cloned()
            .collect();
        assert!(!runs.is_empty());
        for run in &runs {
            assert!(run.meta.index_mirror.is_empty() && !run.meta.blocks_together);
        }
        db.check().unwrap();
        drop(db);
        assert!(Db::check_store_on(disk_of(&bytes), options())
            .unwrap()
            .is_ok());

        // Its runs' index lost, repair rebuilds them from their blocks as before mirrors.
        let layout = Db::open_read_only_on(disk_of(&bytes), options())
            .unwrap()
            .layout();
        assert!(!layout.iter().any(|p| p.what == "run index mirror"));
        let mut damaged = bytes.clone();
        for p in layout.iter().filter(|p| p.what == "run index") {
            let at = (p.disk_offset + p.len / 2) as usize;
            damaged[at] = !damaged[at];
        }
        match Db::open_on(disk_of(&damaged), options()) {
            Err(Error::Corrupt { what, .. }) => assert_eq!(what, "run index"),
            other => panic!("opened a damaged store: {:?}", other.map(|_| ())),
        }
        let fresh: Arc<dyn Disk> = Arc::new(MemDisk::new(0));
        let report = Db::repair_on(disk_of(&damaged), fresh.clone(), options()).unwrap();
        assert!(report.salvage.lost.is_empty(), "{:?}", report.salvage);
        assert_eq!(contents(&Db::open_on(fresh, options()).unwrap()), model);

        // Written to and merged, its runs gain mirrors.
        let db = Db::open_on(disk_of(&bytes), options()).unwrap();
        let t = db.default_table();
        let mut model = model;
        for i in (0..3000).step_by(10) {
            db.put(t, key(i), b"new").unwrap();
            model.insert(key(i), b"new".to_vec());
        }
        db.compact().unwrap();
        assert_eq!(contents(&db), model);
        for run in db.inner.version.read().tables[&t].data.runs() {
            assert_eq!(run.meta.index_mirror.len(), run.meta.index.len());
        }
        db.check().unwrap();
    }
}
