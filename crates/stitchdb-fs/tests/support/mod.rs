//! Shared by the file system's tests: the in-memory model and stores on simulated disks.

#![allow(dead_code)]

pub mod model;

use std::sync::Arc;
use stitchdb::{Db, Options, SimConfig, SimDisk};
use stitchdb_fs::{FileTree, Fs, FsOptions, Timespec};

/// Store options small enough that a test's few megabytes flush, merge and stitch runs.
pub fn small_options() -> Options {
    Options {
        zone_size: 1 << 20,
        memtable_size: 256 << 10,
        // Writes of two blocks or more are ingested as runs of their own, as a mount's 1 MiB
        // writes are at the default threshold.
        ingest_min_bytes: 8192,
        background: false,
        ..Options::default()
    }
}

/// A deterministic clock (each call one nanosecond later).
pub fn test_clock() -> stitchdb_fs::Clock {
    let n = Arc::new(std::sync::atomic::AtomicU64::new(0));
    Arc::new(move || {
        let t = n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Timespec {
            secs: 1_700_000_000 + (t / 1_000_000_000) as i64,
            nanos: (t % 1_000_000_000) as u32,
        }
    })
}

/// A new file system on a new simulated disk.
pub fn new_fs(seed: u64) -> Fs {
    let disk = Arc::new(SimDisk::new(SimConfig {
        seed,
        len: 0,
        capacity: None,
    }));
    let db = Db::create_on(disk, small_options()).unwrap_or_else(|e| panic!("create: {e}"));
    Fs::mount(
        db,
        FsOptions {
            clock: test_clock(),
            ..FsOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("mount: {e}"))
}

/// A file, directory or link as a tree dump shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// Permission bits, link count and contents.
    File(u32, u32, Vec<u8>),
    /// Permission bits and link count.
    Dir(u32, u32),
    /// Target.
    Symlink(Vec<u8>),
    /// Kind (FIFO, socket ...) and permission bits.
    Other(stitchdb_fs::Kind, u32),
}

/// Every path reachable from the root with what it is, and extended attributes by path.
pub type Tree = std::collections::BTreeMap<String, (Node, Vec<(Vec<u8>, Vec<u8>)>)>;

/// The tree reachable from the root.
pub fn dump(fs: &(impl FileTree + ?Sized)) -> Tree {
    let root = stitchdb_fs::Caller::root();
    let mut out = Tree::new();
    let mut todo = vec![(String::new(), stitchdb_fs::ROOT_INO)];
    while let Some((path, dir)) = todo.pop() {
        let mut off = 0;
        loop {
            let batch = fs
                .readdir(dir, off, 64)
                .unwrap_or_else(|e| panic!("readdir {path}: {e}"));
            let Some(last) = batch.last() else { break };
            off = last.offset;
            for e in batch {
                if e.name == b"." || e.name == b".." {
                    continue;
                }
                let p = format!("{path}/{}", String::from_utf8_lossy(&e.name));
                let a = fs
                    .getattr(e.ino)
                    .unwrap_or_else(|err| panic!("getattr {p}: {err}"));
                let node = match a.kind {
                    stitchdb_fs::Kind::File => Node::File(
                        a.perm,
                        a.nlink,
                        fs.read(e.ino, 0, a.size as usize)
                            .unwrap_or_else(|err| panic!("read {p}: {err}")),
                    ),
                    stitchdb_fs::Kind::Dir => {
                        todo.push((p.clone(), e.ino));
                        Node::Dir(a.perm, a.nlink)
                    }
                    stitchdb_fs::Kind::Symlink => {
                        Node::Symlink(fs.readlink(e.ino).unwrap_or_default())
                    }
                    k => Node::Other(k, a.perm),
                };
                let xattrs = fs
                    .listxattr(&root, e.ino)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|n| {
                        let v = fs.getxattr(&root, e.ino, &n).unwrap_or_default();
                        (n, v)
                    })
                    .collect();
                out.insert(p, (node, xattrs));
            }
        }
    }
    out
}
