//! The manifest: the root of a checkpoint, one extent that the superblock points at. It names
//! every table and run, the log position where replay starts and the log's epoch, and every
//! named snapshot with the runs it holds.

use crate::batch::TableId;
use crate::codec::{put_bytes, put_varint, Reader};
use crate::layout::vtree::run::RunMeta;
use crate::options::Stitching;
use stitch_zone::ExtentAddr;

const MAGIC: &[u8; 4] = b"STMF";
/// Version 2 added named snapshots, version 3 range tombstones in runs, version 4 a run's
/// filter in parts, version 5 a run's index mirror, version 6 each table's layout, version 8
/// each table's B+tree root (7 is another branch's); older manifests are still read.
pub(crate) const MANIFEST_VERSION: u8 = 8;
/// The last version without B+tree roots.
const BEFORE_ROOTS: u8 = 7;
/// The last version without table layouts (every table of it is laid out as the default).
const BEFORE_LAYOUTS: u8 = 5;
/// The last version without index mirrors (written by tests of stores from before them).
const BEFORE_MIRRORS: u8 = 4;

/// Where replay starts: the first record of the log not covered by the runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogStart {
    pub zone: u32,
    pub offset: u64,
    pub lsn: u64,
    pub epoch: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableMeta {
    pub id: TableId,
    pub name: String,
    pub stitching: Stitching,
    /// The table's layout string as written (`crate::layout`), parsed when the store opens
    /// so that a layout this build does not know refuses the open with its name rather than
    /// failing the manifest (which would send the open to an older one); empty for the
    /// default layout in manifests before version 6.
    pub layout: String,
    /// By level, newest first within a level.
    pub runs: Vec<RunMeta>,
    /// A B+tree's written root (`crate::layout::cowbtree`): the extent of its root node.
    pub root: Option<ExtentAddr>,
}

/// A named snapshot: the tables as they were at commit `seq`, every commit up to it in their
/// runs (it was taken right after a checkpoint). Its runs share extents with the mainline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotMeta {
    pub name: String,
    pub seq: u64,
    pub tables: Vec<TableMeta>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// Every commit with a sequence number up to this one is in the runs.
    pub checkpoint_lsn: u64,
    pub log: LogStart,
    pub next_table_id: u32,
    pub next_run_id: u64,
    pub tables: Vec<TableMeta>,
    pub snapshots: Vec<SnapshotMeta>,
}

impl Manifest {
    pub fn encode(&self) -> Vec<u8> {
        self.encode_as(MANIFEST_VERSION)
    }

    #[cfg(test)]
    /// The manifest as version 4 wrote it: runs without index mirrors (the store of a test
    /// that older stores still open).
    pub fn encode_before_mirrors(&self) -> Vec<u8> {
        self.encode_as(BEFORE_MIRRORS)
    }

    fn encode_as(&self, version: u8) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.push(version);
        for v in [
            self.checkpoint_lsn,
            self.log.zone as u64,
            self.log.offset,
            self.log.lsn,
            self.log.epoch,
        ] {
            put_varint(&mut out, v);
        }
        put_varint(&mut out, self.next_table_id as u64);
        put_varint(&mut out, self.next_run_id);
        let mirrors = version > BEFORE_MIRRORS;
        let layouts = version > BEFORE_LAYOUTS;
        let roots = version > BEFORE_ROOTS;
        encode_tables(&mut out, &self.tables, mirrors, layouts, roots);
        put_varint(&mut out, self.snapshots.len() as u64);
        for snap in &self.snapshots {
            put_bytes(&mut out, snap.name.as_bytes());
            put_varint(&mut out, snap.seq);
            encode_tables(&mut out, &snap.tables, mirrors, layouts, roots);
        }
        out
    }

    pub fn decode(payload: &[u8]) -> Result<Manifest, String> {
        let mut r = Reader::new(payload);
        if r.take(4)? != MAGIC {
            return Err("bad manifest magic".into());
        }
        let version = r.u8()?;
        if version == 0 || version > MANIFEST_VERSION {
            return Err(format!("unsupported manifest version {version}"));
        }
        let checkpoint_lsn = r.varint()?;
        let zone = u32::try_from(r.varint()?).map_err(|_| "log zone out of range")?;
        let log = LogStart {
            zone,
            offset: r.varint()?,
            lsn: r.varint()?,
            epoch: r.varint()?,
        };
        let next_table_id = u32::try_from(r.varint()?).map_err(|_| "table id out of range")?;
        let next_run_id = r.varint()?;
        let tables = decode_tables(&mut r, version)?;
        let mut snapshots = Vec::new();
        if version >= 2 {
            for _ in 0..r.len()? {
                let name = String::from_utf8(r.bytes()?.to_vec())
                    .map_err(|_| "snapshot name is not UTF-8")?;
                let seq = r.varint()?;
                let tables = decode_tables(&mut r, version)?;
                snapshots.push(SnapshotMeta { name, seq, tables });
            }
        }
        if !r.is_empty() {
            return Err("trailing bytes after the last table".into());
        }
        Ok(Manifest {
            checkpoint_lsn,
            log,
            next_table_id,
            next_run_id,
            tables,
            snapshots,
        })
    }
}

fn encode_tables(
    out: &mut Vec<u8>,
    tables: &[TableMeta],
    mirrors: bool,
    layouts: bool,
    roots: bool,
) {
    put_varint(out, tables.len() as u64);
    for t in tables {
        put_varint(out, t.id.0 as u64);
        put_bytes(out, t.name.as_bytes());
        let stitching = match t.stitching {
            Stitching::Threshold(bytes) => bytes,
            Stitching::Never => u64::MAX,
        };
        put_varint(out, stitching);
        if layouts {
            put_bytes(out, t.layout.as_bytes());
        }
        put_varint(out, t.runs.len() as u64);
        for r in &t.runs {
            r.encode(out, mirrors);
        }
        if roots {
            match t.root {
                Some(root) => {
                    out.push(1);
                    root.encode(out);
                }
                None => out.push(0),
            }
        }
    }
}

fn decode_tables(r: &mut Reader, version: u8) -> Result<Vec<TableMeta>, String> {
    let n = r.len()?;
    let mut tables = Vec::with_capacity(n);
    for _ in 0..n {
        let id = TableId(u32::try_from(r.varint()?).map_err(|_| "table id out of range")?);
        let name = String::from_utf8(r.bytes()?.to_vec()).map_err(|_| "table name is not UTF-8")?;
        let stitching = match r.varint()? {
            u64::MAX => Stitching::Never,
            bytes => Stitching::Threshold(bytes),
        };
        let layout = match version > BEFORE_LAYOUTS {
            true => String::from_utf8(r.bytes()?.to_vec()).map_err(|_| "layout is not UTF-8")?,
            false => String::new(),
        };
        let runs = (0..r.len()?)
            .map(|_| RunMeta::decode(r, version))
            .collect::<Result<Vec<_>, _>>()?;
        let root = match version > BEFORE_ROOTS {
            true => match r.u8()? {
                0 => None,
                1 => Some(
                    ExtentAddr::decode(r.take(ExtentAddr::ENCODED_LEN)?)
                        .ok_or("B+tree root cut short")?,
                ),
                other => return Err(format!("bad B+tree root flag {other}")),
            },
            false => None,
        };
        tables.push(TableMeta {
            id,
            name,
            stitching,
            layout,
            runs,
            root,
        });
    }
    Ok(tables)
}

#[cfg(test)]
mod tests {
    use super::*;
    use stitch_zone::ExtentAddr;

    #[test]
    fn manifest_round_trips_and_truncation_fails() {
        let m = Manifest {
            checkpoint_lsn: 42,
            log: LogStart {
                zone: 3,
                offset: 4096,
                lsn: 43,
                epoch: 7,
            },
            next_table_id: 3,
            next_run_id: 9,
            tables: vec![TableMeta {
                id: TableId(1),
                name: "default".into(),
                stitching: Stitching::Never,
                layout: "managed -> btree(node=4096) -> fixed(size=8)".into(),
                runs: vec![RunMeta {
                    id: 8,
                    level: 2,
                    entries: 10,
                    data_bytes: 100,
                    min_seq: 1,
                    max_seq: 40,
                    filters: vec![crate::layout::vtree::run::FilterPart {
                        blocks: 1,
                        addr: ExtentAddr {
                            zone: 2,
                            offset: 4096,
                            len: 99,
                        },
                    }],
                    index: vec![ExtentAddr {
                        zone: 2,
                        offset: 0,
                        len: 64,
                    }],
                    index_mirror: vec![ExtentAddr {
                        zone: 5,
                        offset: 128,
                        len: 64,
                    }],
                    blocks_together: true,
                    ranges: vec![crate::entry::RangeTombstone {
                        start: b"a".to_vec(),
                        end: b"b".to_vec(),
                        seq: 30,
                    }],
                    seq_override: Some(40),
                }],
                root: Some(ExtentAddr {
                    zone: 6,
                    offset: 32,
                    len: 4096,
                }),
            }],
            snapshots: Vec::new(),
        };
        let mut m = m;
        m.snapshots.push(SnapshotMeta {
            name: "before".into(),
            seq: 40,
            tables: m.tables.clone(),
        });
        let enc = m.encode();
        assert_eq!(Manifest::decode(&enc).unwrap(), m);
        for cut in 0..enc.len() {
            assert!(Manifest::decode(&enc[..cut]).is_err());
        }
        // Version 4 has no mirrors: its runs decode without them, the rest the same.
        let old = Manifest::decode(&m.encode_before_mirrors()).unwrap();
        let mut without = m.clone();
        for t in without.tables.iter_mut().chain(
            without
                .snapshots
                .iter_mut()
                .flat_map(|s| s.tables.iter_mut()),
        ) {
            t.layout.clear();
            t.root = None;
            for r in &mut t.runs {
                r.index_mirror.clear();
                r.blocks_together = false;
            }
        }
        assert_eq!(
            old, without,
            "and no layouts (every table has the default) nor B+tree roots"
        );
    }

    #[test]
    fn a_mirror_must_copy_every_index_extent_or_none() {
        let addr = ExtentAddr {
            zone: 2,
            offset: 0,
            len: 64,
        };
        // id, level, entries, data bytes, min and max seq, two index extents.
        let mut run = vec![8, 2, 10, 100, 1, 40, 2];
        addr.encode(&mut run);
        addr.encode(&mut run);
        run.extend([0, 0, 0]); // no filter, no range tombstones, no sequence override
        run.push(1); // blocks together
        let mut one = run.clone();
        one.push(1);
        addr.encode(&mut one);
        let err = RunMeta::decode(&mut Reader::new(&one), 5).unwrap_err();
        assert!(err.contains("1 index mirror extents for 2"), "{err}");
        run.push(0);
        let decoded = RunMeta::decode(&mut Reader::new(&run), 5).unwrap();
        assert!(decoded.index_mirror.is_empty());
    }

    #[test]
    fn a_version_3_run_has_one_filter_part_over_all_its_blocks() {
        let addr = ExtentAddr {
            zone: 2,
            offset: 4096,
            len: 99,
        };
        // id, level, entries, data bytes, min and max seq, no index extents, one filter.
        let mut v3 = vec![8, 2, 10, 100, 1, 40, 0, 1];
        addr.encode(&mut v3);
        v3.extend([0, 0]); // no range tombstones, no sequence override
        let run = RunMeta::decode(&mut Reader::new(&v3), 3).unwrap();
        assert_eq!(run.filters.len(), 1);
        assert_eq!(run.filters[0].addr, addr);
        assert_eq!(
            run.filters[0].blocks,
            u64::MAX,
            "resolved against the index at open"
        );
        // Without a filter: no parts.
        let none = [8, 2, 10, 100, 1, 40, 0, 0, 0, 0];
        let run = RunMeta::decode(&mut Reader::new(&none), 3).unwrap();
        assert!(run.filters.is_empty());
    }
}
