//! Measures whether small files should live inline in their inode record (TableFS and BetrFS
//! do) rather than in `fs.data`: the file system's own operations run over two layouts of one
//! store, and the creates, stats, reads and deletes of many small files are timed on each.
//!
//! The inline layout is a prototype: [`InlineKv`] sits between the operations and the store
//! and keeps block 0 of every file in the file's `fs.inodes` value, after its attributes;
//! the operations do not know. It reads the inode record once more per block-0 write than a
//! real implementation would (the operation has it at hand), which the figures include.
//!
//! ```sh
//! cargo run --release -p stitchdb-fs --example inline_probe -- DIR [FILES] [ROUNDS]
//! ```
//!
//! Every phase is one operation (one commit) per file, as the mount makes them; the layouts
//! take turns going first in each round. docs/kvfs.md ("Small files") gives the decision.

#![allow(clippy::unwrap_used, missing_docs)]

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Instant;
use stitchdb::{Db, Durability, Options, TableId};
use stitchdb_fs::{Batch, Caller, Fs, FsOptions, FsResult, Kind, Kv, Op, Tables, ROOT_INO};

/// Bytes of a version-1 inode record (docs/format.md).
const ATTR_BYTES: usize = 98;
/// Files per directory.
const PER_DIR: u64 = 1000;

/// The inline layout over `K`: block 0 of a file is kept after its attributes in `fs.inodes`.
struct InlineKv<K: Kv> {
    inner: K,
    inodes: TableId,
    data: TableId,
}

fn ino_key(ino: u64) -> [u8; 8] {
    ino.to_be_bytes()
}

/// (inode, block) of a `fs.data` key.
fn block_of(key: &[u8]) -> (u64, u64) {
    let ino = u64::from_be_bytes(key[..8].try_into().unwrap());
    let block = u64::from_be_bytes(key[8..16].try_into().unwrap());
    (ino, block)
}

impl<K: Kv> InlineKv<K> {
    /// Block 0 of `ino` as kept inline (`None`: none).
    fn inline(&mut self, ino: u64) -> FsResult<Option<Vec<u8>>> {
        let v = self.inner.get(self.inodes, &ino_key(ino))?;
        Ok(v.filter(|v| v.len() > ATTR_BYTES)
            .map(|v| v[ATTR_BYTES..].to_vec()))
    }

    /// Replaces the inline block 0 of `ino` (if the inode is there).
    fn set_inline(&mut self, ino: u64, block: &[u8]) -> FsResult<()> {
        if let Some(mut v) = self.inner.get(self.inodes, &ino_key(ino))? {
            v.truncate(ATTR_BYTES);
            v.extend_from_slice(block);
            self.inner.put(self.inodes, &ino_key(ino), v)?;
        }
        Ok(())
    }
}

impl<K: Kv> Kv for InlineKv<K> {
    fn get(&mut self, table: TableId, key: &[u8]) -> FsResult<Option<Vec<u8>>> {
        if table == self.data && block_of(key).1 == 0 {
            return self.inline(block_of(key).0);
        }
        let v = self.inner.get(table, key)?;
        Ok(if table == self.inodes {
            v.map(|v| v[..ATTR_BYTES.min(v.len())].to_vec())
        } else {
            v
        })
    }

    fn scan(
        &mut self,
        table: TableId,
        start: &[u8],
        end: &[u8],
        limit: usize,
    ) -> FsResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        if table == self.data && start.len() == 16 && block_of(start).1 == 0 && limit > 0 {
            if let Some(b) = self.inline(block_of(start).0)? {
                out.push((start.to_vec(), b));
            }
        }
        let rest = self.inner.scan(table, start, end, limit - out.len())?;
        for (k, v) in rest {
            if table == self.inodes {
                out.push((k, v[..ATTR_BYTES.min(v.len())].to_vec()));
            } else {
                out.push((k, v));
            }
        }
        Ok(out)
    }

    fn put(&mut self, table: TableId, key: &[u8], value: Vec<u8>) -> FsResult<()> {
        if table == self.data && block_of(key).1 == 0 {
            self.set_inline(block_of(key).0, &value)
        } else if table == self.inodes {
            assert_eq!(
                value.len(),
                ATTR_BYTES,
                "an inode record of another version"
            );
            let mut v = value;
            let ino = u64::from_be_bytes(key.try_into().unwrap());
            if let Some(b) = self.inline(ino).unwrap() {
                v.extend_from_slice(&b);
            }
            self.inner.put(table, key, v)
        } else {
            self.inner.put(table, key, value)
        }
    }

    fn delete(&mut self, table: TableId, key: &[u8]) -> FsResult<()> {
        if table == self.data && block_of(key).1 == 0 {
            self.set_inline(block_of(key).0, &[])
        } else {
            self.inner.delete(table, key)
        }
    }

    fn delete_range(&mut self, table: TableId, start: &[u8], end: &[u8]) -> FsResult<()> {
        if table == self.data && block_of(start).1 == 0 {
            self.set_inline(block_of(start).0, &[])?;
        }
        self.inner.delete_range(table, start, end)
    }
}

/// One layout over a fresh store.
struct Side {
    inline: bool,
    db: Db,
    tables: Tables,
    caller: Caller,
    next_ino: u64,
}

impl Side {
    fn new(dir: &std::path::Path, inline: bool) -> Side {
        let path = dir.join(if inline { "inline.store" } else { "data.store" });
        let _ = std::fs::remove_file(&path);
        // A first mount makes the file system (its tables, superblock and root).
        let db = Db::create(&path, Options::default()).unwrap();
        drop(Fs::mount(db, FsOptions::default()).unwrap());
        let db = Db::open(&path, Options::default()).unwrap();
        let tables = Tables::open_or_create(&db).unwrap();
        Side {
            inline,
            db,
            tables,
            caller: Caller::root(),
            next_ino: ROOT_INO + 1,
        }
    }

    /// Runs `f` as one operation, committed if `commit`.
    fn op<R>(&self, commit: bool, f: impl FnOnce(&mut dyn OpOn) -> FsResult<R>) -> R {
        let now = stitchdb_fs::system_clock()();
        let batch = Batch::new(&self.db);
        if self.inline {
            let kv = InlineKv {
                inner: batch,
                inodes: self.tables.inodes,
                data: self.tables.data,
            };
            let mut op = Op {
                kv,
                t: &self.tables,
                now,
                file_now: None,
                caller: &self.caller,
                open: &|_| false,
                deleted: Vec::new(),
            };
            let r = f(&mut op).unwrap();
            if commit {
                op.kv.inner.commit(Durability::Ordered).unwrap();
            }
            r
        } else {
            let mut op = Op {
                kv: batch,
                t: &self.tables,
                now,
                file_now: None,
                caller: &self.caller,
                open: &|_| false,
                deleted: Vec::new(),
            };
            let r = f(&mut op).unwrap();
            if commit {
                op.kv.commit(Durability::Ordered).unwrap();
            }
            r
        }
    }
}

/// The operations the probe calls, over either layout.
trait OpOn {
    fn make(&mut self, parent: u64, name: &[u8], kind: Kind, ino: u64) -> FsResult<u64>;
    fn write(&mut self, ino: u64, data: &[u8]) -> FsResult<()>;
    fn stat(&mut self, parent: u64, name: &[u8]) -> FsResult<u64>;
    fn read(&mut self, parent: u64, name: &[u8]) -> FsResult<Vec<u8>>;
    fn unlink(&mut self, parent: u64, name: &[u8]) -> FsResult<()>;
}

impl<K: Kv> OpOn for Op<'_, K> {
    fn make(&mut self, parent: u64, name: &[u8], kind: Kind, ino: u64) -> FsResult<u64> {
        let mode = if kind == Kind::Dir { 0o755 } else { 0o644 };
        Ok(Op::make(self, parent, name, kind, mode, 0, &|| ino)?.ino)
    }
    fn write(&mut self, ino: u64, data: &[u8]) -> FsResult<()> {
        Op::write(self, ino, 0, data).map(|_| ())
    }
    fn stat(&mut self, parent: u64, name: &[u8]) -> FsResult<u64> {
        Ok(self.lookup(parent, name)?.size)
    }
    fn read(&mut self, parent: u64, name: &[u8]) -> FsResult<Vec<u8>> {
        let a = self.lookup(parent, name)?;
        Op::read(self, a.ino, 0, 1 << 20)
    }
    fn unlink(&mut self, parent: u64, name: &[u8]) -> FsResult<()> {
        Op::unlink(self, parent, name)
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(
        args.next()
            .expect("usage: inline_probe DIR [FILES] [ROUNDS]"),
    );
    let files: u64 = args.next().map_or(100_000, |s| s.parse().unwrap());
    let rounds: usize = args.next().map_or(2, |s| s.parse().unwrap());
    std::fs::create_dir_all(&dir).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(21);
    let sizes: Vec<usize> = (0..files).map(|_| rng.gen_range(0..=4000)).collect();
    let name = |i: u64| format!("file{i:07}").into_bytes();
    let phases = ["create+write", "stat", "read", "delete"];
    // seconds[layout][phase], summed over rounds; store bytes after the creates.
    let mut seconds = [[0f64; 4]; 2];
    let mut bytes = [0u64; 2];
    for round in 0..rounds {
        for turn in 0..2 {
            let inline = (round + turn) % 2 == 1;
            let mut side = Side::new(&dir, inline);
            let dirs: Vec<u64> = (0..files.div_ceil(PER_DIR))
                .map(|d| {
                    let ino = side.next_ino;
                    side.next_ino += 1;
                    let n = format!("dir{d:04}").into_bytes();
                    side.op(true, |op| op.make(ROOT_INO, &n, Kind::Dir, ino))
                })
                .collect();
            let parent = |i: u64| dirs[(i / PER_DIR) as usize];
            let t = Instant::now();
            for i in 0..files {
                let ino = side.next_ino;
                side.next_ino += 1;
                side.op(true, |op| op.make(parent(i), &name(i), Kind::File, ino));
                let data = vec![(i % 251) as u8; sizes[i as usize]];
                if !data.is_empty() {
                    side.op(true, |op| op.write(ino, &data));
                }
            }
            side.db.flush().unwrap();
            let created = t.elapsed().as_secs_f64();
            bytes[usize::from(inline)] += side.db.stats().zones.live_bytes;
            // Reopen, so reads find the files in runs on disk, not in the memtable.
            let path = dir.join(if inline { "inline.store" } else { "data.store" });
            side.db.close().unwrap();
            side.db = Db::open(&path, Options::default()).unwrap();
            let mut order: Vec<u64> = (0..files).collect();
            for i in (1..order.len()).rev() {
                order.swap(i, rng.gen_range(0..=i));
            }
            let t = Instant::now();
            for &i in &order {
                let size = side.op(false, |op| op.stat(parent(i), &name(i)));
                assert_eq!(size, sizes[i as usize] as u64);
            }
            let stated = t.elapsed().as_secs_f64();
            let t = Instant::now();
            for &i in &order {
                let data = side.op(false, |op| op.read(parent(i), &name(i)));
                assert!(data == vec![(i % 251) as u8; sizes[i as usize]], "file {i}");
            }
            let read = t.elapsed().as_secs_f64();
            let t = Instant::now();
            for &i in &order {
                side.op(true, |op| op.unlink(parent(i), &name(i)));
            }
            side.db.flush().unwrap();
            let deleted = t.elapsed().as_secs_f64();
            for (p, s) in [created, stated, read, deleted].into_iter().enumerate() {
                seconds[usize::from(inline)][p] += s;
            }
            eprintln!(
                "round {round} {}: create+write {created:.2} s, stat {stated:.2} s, read {read:.2} s, delete {deleted:.2} s",
                if inline { "inline" } else { "data table" }
            );
            side.db.close().unwrap();
            let _ = std::fs::remove_file(path);
        }
    }
    println!(
        "{files} files of 0-4000 bytes, {rounds} rounds (mean seconds; ratio inline / data table)"
    );
    println!("| phase | data table | inline | ratio |");
    println!("| --- | --- | --- | --- |");
    let r = rounds as f64;
    for (p, phase) in phases.iter().enumerate() {
        let (a, b) = (seconds[0][p] / r, seconds[1][p] / r);
        println!("| {phase} | {a:.2} | {b:.2} | {:.2}x |", b / a);
    }
    let (a, b) = (bytes[0] as f64 / r, bytes[1] as f64 / r);
    println!(
        "| live store bytes after creating | {:.1} MiB | {:.1} MiB | {:.2}x |",
        a / 1048576.0,
        b / 1048576.0,
        b / a
    );
}
