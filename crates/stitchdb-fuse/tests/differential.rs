//! Differential test: thousands of random file operations (failing ones included) applied
//! through the mount and to a directory on the host's file system (ext4 here); results,
//! error codes and then the whole tree (kinds, modes, link counts, sizes, data, symlink
//! targets, extended attributes, listings) must agree after every step.
//!
//! STITCHDB_FUSE_STEPS sets the number of operations per run (default 3000);
//! STITCHDB_FUSE_SEED adds to each run's seed, to explore other sequences.

#![allow(clippy::unwrap_used)]

mod support;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rustix::fs::{AtFlags, FallocateFlags, FileType, Mode, RenameFlags, XattrFlags, CWD};
use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use support::Mounted;

/// What an operation returned (compared between the two sides), or its errno.
type Outcome = Result<Vec<u8>, i32>;

fn io<T>(r: std::io::Result<T>) -> Result<T, i32> {
    r.map_err(|e| e.raw_os_error().unwrap_or(-1))
}

fn rx<T>(r: rustix::io::Result<T>) -> Result<T, i32> {
    r.map_err(|e| e.raw_os_error())
}

#[derive(Debug, Clone)]
enum Op {
    Create(String, bool, u32),
    Write {
        path: String,
        off: u64,
        len: usize,
        seed: u8,
        append: bool,
        trunc: bool,
    },
    Read(String),
    Truncate(String, u64),
    Mkdir(String, u32),
    Rmdir(String),
    Unlink(String),
    Rename(String, String, u32),
    Link(String, String),
    Symlink(String, String),
    Readlink(String),
    Chmod(String, u32),
    SetXattr(String, String, Vec<u8>, u32),
    GetXattr(String, String),
    RemoveXattr(String, String),
    ListXattr(String),
    Mkfifo(String),
    OpenUnlinkUse(String),
    /// `fallocate` of a range with these flags.
    Fallocate(String, u64, u64, FallocateFlags),
    /// `lseek` with `SEEK_DATA` (true) or `SEEK_HOLE` from an offset.
    Seek(String, u64, bool),
    Stat(String),
    List(String),
}

/// What a path's last name is meant for. Each kind of operation draws its names mostly from
/// its own set, so that the tree holds directories, regular files and the rest side by side
/// instead of whichever kind took a name first, and now and then from all of them, for the
/// errors of a name taken by another kind (`EEXIST`, `EISDIR`, `ENOTDIR`, `ENXIO`, ...).
#[derive(Clone, Copy)]
enum Leaf {
    Dir,
    File,
    /// FIFOs and symbolic links.
    Other,
    Any,
}

const DIR_NAMES: [&str; 3] = ["d0", "d1", "d2"];
const FILE_NAMES: [&str; 6] = ["f0", "f1", "f2", "f3", "f4", "f5"];
const OTHER_NAMES: [&str; 2] = ["p0", "s0"];

fn random_path(rng: &mut ChaCha8Rng, leaf: Leaf) -> String {
    let mut parts = vec![];
    // Mostly shallow paths, so that most operations find what they name.
    let depth = [0, 0, 0, 1, 1, 2][rng.gen_range(0..6)];
    for _ in 0..depth {
        parts.push(DIR_NAMES[rng.gen_range(0..DIR_NAMES.len())].to_string());
    }
    let sets: [&[&str]; 3] = [&DIR_NAMES, &FILE_NAMES, &OTHER_NAMES];
    let names = match leaf {
        _ if rng.gen_bool(0.2) => sets[rng.gen_range(0..3)],
        Leaf::Dir => sets[0],
        Leaf::File => sets[1],
        Leaf::Other => sets[2],
        Leaf::Any => sets[rng.gen_range(0..3)],
    };
    let leaf = if rng.gen_bool(0.01) {
        "L".repeat(256)
    } else {
        names[rng.gen_range(0..names.len())].to_string()
    };
    parts.push(leaf);
    parts.join("/")
}

/// The paths operations pick from: everything the tree holds, and its regular files.
struct Existing {
    all: Vec<String>,
    files: Vec<String>,
}

impl Existing {
    fn of(tree: &BTreeMap<String, String>) -> Existing {
        Existing {
            all: tree.keys().cloned().collect(),
            // `tree` describes only regular files with their size.
            files: tree
                .iter()
                .filter(|(_, desc)| desc.contains(" size="))
                .map(|(path, _)| path.clone())
                .collect(),
        }
    }
}

/// An operation on a random path: half the time one that exists; an operation on file data
/// three times in four a regular file that exists, so that the data paths are exercised and
/// not mostly their errors (a write to a directory, a FIFO or a missing path).
fn random_op(rng: &mut ChaCha8Rng, existing: &Existing) -> Op {
    let kind = rng.gen_range(0..24);
    // Not `OpenUnlinkUse` (20): it deletes the file it uses.
    let on_data = matches!(kind, 2..=7 | 21 | 22);
    let leaf = match kind {
        0..=7 | 14 | 20..=22 => Leaf::File,
        8..=10 => Leaf::Dir,
        15 | 16 | 19 => Leaf::Other,
        _ => Leaf::Any,
    };
    let pick = |v: &[String], rng: &mut ChaCha8Rng| v[rng.gen_range(0..v.len())].clone();
    let p = if on_data && !existing.files.is_empty() && rng.gen_bool(0.75) {
        pick(&existing.files, rng)
    } else if !existing.all.is_empty() && rng.gen_bool(0.5) {
        pick(&existing.all, rng)
    } else {
        random_path(rng, leaf)
    };
    match kind {
        0 | 1 => Op::Create(
            p,
            rng.gen_bool(0.3),
            [0o644, 0o600, 0o755][rng.gen_range(0..3)],
        ),
        2..=5 => Op::Write {
            path: p,
            off: [0, rng.gen_range(0..70_000), rng.gen_range(0..5000)][rng.gen_range(0..3)],
            // One write in twenty is large enough (256 KiB and up, in one request or a
            // few through the write-back cache) for the store to write it as a run of its
            // own (`Options::ingest_min_bytes`) instead of through the log.
            len: if rng.gen_bool(0.05) {
                rng.gen_range(256 << 10..2 << 20)
            } else {
                [rng.gen_range(0..100), rng.gen_range(0..20_000), 4096][rng.gen_range(0..3)]
            },
            seed: rng.gen(),
            append: rng.gen_bool(0.2),
            trunc: rng.gen_bool(0.05),
        },
        6 => Op::Read(p),
        7 => Op::Truncate(
            p,
            [0, rng.gen_range(0..100_000), rng.gen_range(0..5000)][rng.gen_range(0..3)],
        ),
        8 | 9 => Op::Mkdir(p, [0o755, 0o700][rng.gen_range(0..2)]),
        10 => Op::Rmdir(p),
        11 => Op::Unlink(p),
        12 | 13 => Op::Rename(
            p,
            random_path(rng, Leaf::Any),
            [0, 0, 1, 2][rng.gen_range(0..4)],
        ),
        14 => Op::Link(p, random_path(rng, Leaf::File)),
        15 => Op::Symlink(
            ["f0", "d1", "d0/f2", "s0", "nowhere"][rng.gen_range(0..5)].into(),
            p,
        ),
        16 => Op::Readlink(p),
        17 => Op::Chmod(
            p,
            [0o600, 0o644, 0o755, 0o1777, 0o2755][rng.gen_range(0..5)],
        ),
        18 => match rng.gen_range(0..4) {
            0 => Op::SetXattr(
                p,
                format!("user.a{}", rng.gen_range(0..3)),
                vec![rng.gen(); rng.gen_range(0..64)],
                rng.gen_range(0..3),
            ),
            1 => Op::GetXattr(p, format!("user.a{}", rng.gen_range(0..3))),
            2 => Op::RemoveXattr(p, format!("user.a{}", rng.gen_range(0..3))),
            _ => Op::ListXattr(p),
        },
        19 => Op::Mkfifo(p),
        20 => Op::OpenUnlinkUse(p),
        21 => Op::Fallocate(
            p,
            rng.gen_range(0..40_000),
            rng.gen_range(1..30_000),
            [
                FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
                FallocateFlags::ZERO_RANGE,
                FallocateFlags::ZERO_RANGE | FallocateFlags::KEEP_SIZE,
                FallocateFlags::KEEP_SIZE,
                FallocateFlags::empty(),
                FallocateFlags::PUNCH_HOLE,
            ][rng.gen_range(0..6)],
        ),
        22 => Op::Seek(p, rng.gen_range(0..70_000), rng.gen_bool(0.5)),
        _ => {
            if rng.gen_bool(0.5) {
                Op::Stat(p)
            } else {
                Op::List(p)
            }
        }
    }
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| seed.wrapping_add((i / 7) as u8)).collect()
}

/// Applies `op` under `base`; `exact_seek`: outcomes of lseek hold the offset itself.
fn apply(base: &Path, op: &Op, exact_seek: bool) -> Outcome {
    let at = |p: &str| base.join(p);
    let nonblock = || {
        let mut o = std::fs::OpenOptions::new();
        o.custom_flags(libc::O_NONBLOCK);
        o
    };
    match op {
        Op::Create(p, excl, mode) => {
            let mut o = nonblock();
            o.write(true).mode(*mode);
            if *excl {
                o.create_new(true);
            } else {
                o.create(true);
            }
            io(o.open(at(p))).map(|_| vec![])
        }
        Op::Write {
            path,
            off,
            len,
            seed,
            append,
            trunc,
        } => {
            let mut o = nonblock();
            // `O_TRUNC` as a raw flag: std refuses to combine its own truncate with append
            // before any system call, where open(2) takes both.
            let trunc = if *trunc { libc::O_TRUNC } else { 0 };
            o.write(true)
                .append(*append)
                .custom_flags(libc::O_NONBLOCK | trunc);
            let mut f = io(o.open(at(path)))?;
            let data = pattern(*seed, *len);
            let n = if *append {
                io(f.write(&data))?
            } else {
                io(f.write_at(&data, *off))?
            };
            Ok(n.to_le_bytes().to_vec())
        }
        Op::Read(p) => {
            let mut f = io(nonblock().read(true).open(at(p)))?;
            let mut v = vec![];
            io(f.read_to_end(&mut v))?;
            Ok(v)
        }
        Op::Truncate(p, size) => {
            let f = io(nonblock().write(true).open(at(p)))?;
            io(f.set_len(*size)).map(|_| vec![])
        }
        Op::Mkdir(p, mode) => {
            rx(rustix::fs::mkdir(at(p), Mode::from_raw_mode(*mode))).map(|_| vec![])
        }
        Op::Rmdir(p) => io(std::fs::remove_dir(at(p))).map(|_| vec![]),
        Op::Unlink(p) => io(std::fs::remove_file(at(p))).map(|_| vec![]),
        Op::Rename(a, b, flags) => rx(rustix::fs::renameat_with(
            CWD,
            at(a),
            CWD,
            at(b),
            RenameFlags::from_bits_retain(*flags),
        ))
        .map(|_| vec![]),
        Op::Link(a, b) => {
            rx(rustix::fs::linkat(CWD, at(a), CWD, at(b), AtFlags::empty())).map(|_| vec![])
        }
        Op::Symlink(target, p) => io(std::os::unix::fs::symlink(target, at(p))).map(|_| vec![]),
        Op::Readlink(p) => {
            io(std::fs::read_link(at(p))).map(|t| t.into_os_string().into_encoded_bytes())
        }
        Op::Chmod(p, mode) => io(std::fs::set_permissions(
            at(p),
            std::fs::Permissions::from_mode(*mode),
        ))
        .map(|_| vec![]),
        Op::SetXattr(p, n, v, flags) => rx(rustix::fs::lsetxattr(
            at(p),
            n.as_str(),
            v,
            XattrFlags::from_bits_retain(*flags),
        ))
        .map(|_| vec![]),
        Op::GetXattr(p, n) => {
            let mut buf = vec![0u8; 1024];
            let len = rx(rustix::fs::lgetxattr(at(p), n.as_str(), &mut buf[..]))?;
            buf.truncate(len);
            Ok(buf)
        }
        Op::RemoveXattr(p, n) => rx(rustix::fs::lremovexattr(at(p), n.as_str())).map(|_| vec![]),
        Op::ListXattr(p) => {
            let mut buf = vec![0u8; 4096];
            let len = rx(rustix::fs::llistxattr(at(p), &mut buf[..]))?;
            buf.truncate(len);
            let mut names: Vec<&[u8]> = buf.split(|b| *b == 0).filter(|n| !n.is_empty()).collect();
            names.sort();
            Ok(names.join(&b","[..]))
        }
        Op::Mkfifo(p) => rx(rustix::fs::mknodat(
            CWD,
            at(p),
            FileType::Fifo,
            Mode::from_raw_mode(0o644),
            0,
        ))
        .map(|_| vec![]),
        Op::OpenUnlinkUse(p) => {
            // Open, unlink, then write and read through the descriptor: the data lives on.
            let mut f = io(nonblock().read(true).write(true).open(at(p)))?;
            let meta = io(f.metadata())?;
            if !meta.is_file() {
                return Ok(b"not a file".to_vec());
            }
            io(std::fs::remove_file(at(p)))?;
            io(f.write_all(b"written after unlink"))?;
            io(f.seek(SeekFrom::Start(0)))?;
            let mut v = vec![];
            io(f.read_to_end(&mut v))?;
            let nlink = io(f.metadata())?.nlink();
            v.extend_from_slice(format!("|nlink={nlink}").as_bytes());
            Ok(v)
        }
        Op::Fallocate(p, off, len, flags) => {
            let f = io(nonblock().write(true).open(at(p)))?;
            rx(rustix::fs::fallocate(&f, *flags, *off, *len)).map(|_| vec![])
        }
        Op::Seek(p, off, data) => {
            // Where the first data (or hole) at or after `off` starts, ENXIO at or past the
            // end. Both file systems answer at 4 KiB block granularity, compared exactly.
            // Through the kernel's write-back cache the kernel answers for the mount as for a
            // file system without holes (see the adapter's lseek), so there only what holds
            // for both is compared: ENXIO at or past the end; before it, SEEK_HOLE lands in
            // [off, size] and SEEK_DATA there too or gives ENXIO (ext4, for a hole to the
            // end). (Seeking in a directory means what each file system makes of it: not
            // compared.)
            let f = io(nonblock().read(true).open(at(p)))?;
            let meta = io(f.metadata())?;
            if !meta.is_file() {
                return Ok(b"not a file".to_vec());
            }
            let size = meta.len();
            let whence = if *data {
                rustix::fs::SeekFrom::Data(*off)
            } else {
                rustix::fs::SeekFrom::Hole(*off)
            };
            let r = rustix::fs::seek(&f, whence);
            if exact_seek || *off >= size {
                return rx(r).map(|r| r.to_string().into_bytes());
            }
            let valid = match r {
                Ok(r) => r >= *off && r <= size,
                Err(e) => *data && e == rustix::io::Errno::NXIO,
            };
            Ok(vec![u8::from(valid)])
        }
        Op::Stat(p) => {
            let m = io(std::fs::symlink_metadata(at(p)))?;
            let size = if m.is_dir() { 0 } else { m.len() };
            Ok(format!("{:o} {} {}", m.mode(), m.nlink(), size).into_bytes())
        }
        Op::List(p) => {
            let mut names: Vec<String> = io(std::fs::read_dir(at(p)))?
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            Ok(names.join(",").into_bytes())
        }
    }
}

use std::os::unix::fs::MetadataExt;

/// Everything under `base`: per path its mode, link count, size, contents or target, and
/// extended attributes.
fn tree(base: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut todo = vec![PathBuf::new()];
    while let Some(rel) = todo.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(base.join(&rel))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        entries.sort();
        for name in entries {
            let r = rel.join(&name);
            let full = base.join(&r);
            let m = std::fs::symlink_metadata(&full).unwrap();
            let mut desc = format!("{:o} nlink={}", m.mode(), m.nlink());
            if m.is_dir() {
                todo.push(r.clone());
            } else if m.file_type().is_symlink() {
                desc += &format!(" -> {:?}", std::fs::read_link(&full).unwrap());
            } else if m.is_file() {
                let data = std::fs::read(&full).unwrap();
                let sum = data.iter().fold(0u64, |h, b| {
                    h.wrapping_mul(1_000_003).wrapping_add(u64::from(*b))
                });
                desc += &format!(" size={} sum={sum:x}", m.len());
            }
            let mut buf = vec![0u8; 4096];
            if let Ok(len) = rustix::fs::llistxattr(&full, &mut buf[..]) {
                buf.truncate(len);
                let mut names: Vec<&[u8]> =
                    buf.split(|b| *b == 0).filter(|n| !n.is_empty()).collect();
                names.sort();
                for n in names {
                    let mut v = vec![0u8; 1024];
                    let len = rustix::fs::lgetxattr(&full, n, &mut v[..]).unwrap_or(0);
                    desc += &format!(" {}={:?}", String::from_utf8_lossy(n), &v[..len]);
                }
            }
            out.insert(r.to_string_lossy().into_owned(), desc);
        }
    }
    out
}

/// The inode number of the file `path` under `base` names on the host, through symbolic
/// links as opening it goes (`fallocate` and `lseek` work on what the link names), if any.
fn host_ino(base: &Path, path: &str) -> Option<u64> {
    std::fs::metadata(base.join(path)).ok().map(|m| m.ino())
}

/// Applies `steps` random operations to a mount with `options` and to the host.
fn run(seed: u64, steps: usize, options: &str) {
    let seed = seed.wrapping_add(
        std::env::var("STITCHDB_FUSE_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
    );
    let writeback_cache = !options.contains("no_writeback_cache");
    let mounted = Mounted::with_options(options);
    let host = tempfile::tempdir().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut ok, mut failed, mut large_writes) = (0usize, 0usize, 0usize);
    // The operations so far, for the failure message.
    let mut history: Vec<String> = Vec::new();
    let mut existing = Existing {
        all: Vec::new(),
        files: Vec::new(),
    };
    // Host inodes `fallocate` gave a range to (any mode but a punched hole): ext4 keeps it
    // as unwritten extents, which `SEEK_DATA` reports as data, where the store keeps nothing
    // there (a hole). Seeks in them are compared as through the write-back cache.
    let mut preallocated: HashSet<u64> = HashSet::new();
    for step in 0..steps {
        let op = random_op(&mut rng, &existing);
        let exact_seek = !writeback_cache
            && !matches!(&op, Op::Seek(p, ..) if host_ino(host.path(), p)
                .is_some_and(|ino| preallocated.contains(&ino)));
        let want = apply(host.path(), &op, exact_seek);
        let got = apply(&mounted.dir, &op, exact_seek);
        if let (Op::Fallocate(p, _, _, flags), Ok(_)) = (&op, &want) {
            if !flags.intersects(FallocateFlags::PUNCH_HOLE) {
                preallocated.extend(host_ino(host.path(), p));
            }
        }
        history.push(format!(
            "{step}: {op:?} -> {:?}",
            want.as_ref().map(|v| v.len())
        ));
        let recent = history[history.len().saturating_sub(40)..].join("\n");
        let shown = |o: &Outcome| match o {
            Ok(v) if v.len() > 64 => format!("Ok({} bytes)", v.len()),
            Ok(v) => format!("Ok({:?})", String::from_utf8_lossy(v)),
            Err(e) => format!("Err({})", std::io::Error::from_raw_os_error(*e)),
        };
        assert!(
            got == want,
            "seed {seed} step {step}: {op:?}: the mount gave {} but the host {}\nrecent:\n{recent}",
            shown(&got),
            shown(&want)
        );
        if let (Op::Write { len, .. }, Ok(_)) = (&op, &want) {
            large_writes += usize::from(*len >= 256 << 10);
        }
        if want.is_ok() {
            ok += 1;
        } else {
            failed += 1;
        }
        let (a, b) = (tree(&mounted.dir), tree(host.path()));
        existing = Existing::of(&b);
        if a != b {
            let diff: Vec<_> = a
                .iter()
                .filter(|(k, v)| b.get(*k) != Some(v))
                .map(|(k, v)| format!("{k}: mount {v} host {:?}", b.get(k)))
                .chain(
                    b.keys()
                        .filter(|k| !a.contains_key(*k))
                        .map(|k| format!("{k}: only on the host")),
                )
                .collect();
            panic!(
                "seed {seed} step {step} after {op:?}: trees differ:\n{}\nrecent:\n{}",
                diff.join("\n"),
                history[history.len().saturating_sub(40)..].join("\n")
            );
        }
    }
    let ingested = mounted.fs.upgrade().unwrap().db().stats().ingested_runs;
    eprintln!(
        "seed {seed} (-o {options}): {ok} operations succeeded, {failed} failed alike; \
         {large_writes} large writes, {ingested} runs ingested"
    );
    // The large writes reach the store as runs of their own, not only through the log.
    assert!(
        large_writes < 5 || ingested > 0,
        "{large_writes} large writes, no run ingested"
    );
    assert!(
        ok > steps / 6 && failed > steps / 10,
        "{ok} succeeded, {failed} failed"
    );
    mounted.unmount();
}

fn steps() -> usize {
    std::env::var("STITCHDB_FUSE_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000)
}

#[test]
fn random_operations_on_the_mount_match_the_host_file_system() {
    require_fuse!();
    run(1, steps(), "writeback_cache");
}

#[test]
fn without_the_write_back_cache_too() {
    require_fuse!();
    run(2, steps() / 3, "no_writeback_cache");
}

/// The mounts above are served through io_uring queues where the kernel has them (and the
/// test runs as root); this one through `/dev/fuse`.
#[test]
fn served_through_dev_fuse_too() {
    require_fuse!();
    run(3, steps() / 3, "writeback_cache,no_io_uring");
}
