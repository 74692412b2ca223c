//! Model test: thousands of random operations (failing ones included) on the file system and
//! on an in-memory model of its semantics; results and error codes must agree after every
//! step, and the file system's invariants must hold.
//!
//! STITCHDB_FS_MODEL_SEEDS sets how many seeded sequences of 2,500 operations run (default 6).

#![allow(clippy::unwrap_used)]

mod support;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use stitchdb_fs::{
    check_fs, Caller, FileTree, Fs, Kind, SetAttr, MAX_FILE_SIZE, RENAME_EXCHANGE,
    RENAME_NOREPLACE, ROOT_INO,
};
use support::model::Model;

fn errno<T>(r: stitchdb_fs::FsResult<T>) -> Result<T, i32> {
    r.map_err(|e| e.errno())
}

fn pick<T: Copy>(rng: &mut ChaCha8Rng, v: &[T]) -> Option<T> {
    (!v.is_empty()).then(|| v[rng.gen_range(0..v.len())])
}

fn name(rng: &mut ChaCha8Rng) -> Vec<u8> {
    if rng.gen_bool(0.02) {
        vec![b'n'; 256]
    } else {
        format!("n{}", rng.gen_range(0..8)).into_bytes()
    }
}

/// Every file, directory and link count of the model equals the file system's.
fn compare_all(fs: &Fs, m: &Model, what: &str) {
    for (&ino, n) in &m.inodes {
        let a = fs
            .getattr(ino)
            .unwrap_or_else(|e| panic!("{what}: inode {ino}: {e}"));
        assert_eq!(a.kind, n.kind, "{what}: kind of {ino}");
        assert_eq!(a.nlink, n.nlink, "{what}: link count of {ino}");
        match n.kind {
            Kind::File => {
                assert_eq!(a.size, n.data.len() as u64, "{what}: size of {ino}");
                let data = fs.read(ino, 0, n.data.len() + 10).unwrap();
                assert!(data == n.data, "{what}: data of {ino}");
            }
            Kind::Symlink => assert_eq!(fs.readlink(ino).unwrap(), n.target),
            Kind::Dir if n.nlink > 0 => {
                let mut got = Vec::new();
                let mut off = 0;
                loop {
                    let batch = fs.readdir(ino, off, 3).unwrap();
                    let Some(last) = batch.last() else { break };
                    off = last.offset;
                    got.extend(batch);
                }
                let mut names: Vec<(Vec<u8>, u64)> = got
                    .into_iter()
                    .filter(|e| e.name != b"." && e.name != b"..")
                    .map(|e| (e.name, e.ino))
                    .collect();
                names.sort();
                let want: Vec<(Vec<u8>, u64)> =
                    n.children.iter().map(|(k, v)| (k.clone(), *v)).collect();
                assert_eq!(names, want, "{what}: listing of {ino}");
            }
            _ => {}
        }
        let xattrs: Vec<Vec<u8>> = n.xattrs.keys().cloned().collect();
        assert_eq!(
            fs.listxattr(&Caller::root(), ino).unwrap(),
            xattrs,
            "{what}: xattrs of {ino}"
        );
    }
    let report = check_fs(fs.db(), fs.tables()).unwrap();
    assert!(report.problems.is_empty(), "{what}: {:?}", report.problems);
    assert_eq!(report.inodes, m.inodes.len() as u64, "{what}: inode count");
}

fn run(seed: u64, steps: usize) {
    let fs = new_fs_for(seed);
    let mut m = Model::new();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let root = Caller::root();
    let mut handles: Vec<u64> = Vec::new();
    // The most files and directories there were at once (the test must build a real tree).
    let mut tally = (0usize, 0usize);
    for step in 0..steps {
        let dirs = m.dirs();
        let files = m.of_kind(Kind::File);
        let dir = pick(&mut rng, &dirs).unwrap_or(ROOT_INO);
        let what = format!("seed {seed} step {step}");
        match rng.gen_range(0..21) {
            0 | 1 => {
                let n = name(&mut rng);
                let got = errno(fs.mknod(&root, dir, &n, libc::S_IFREG | 0o644, 0)).map(|a| a.ino);
                assert_eq!(got, m.make(dir, &n, Kind::File, 0o644), "{what}: mknod");
            }
            2 => {
                let n = name(&mut rng);
                let got = errno(fs.mkdir(&root, dir, &n, 0o755)).map(|a| a.ino);
                assert_eq!(got, m.make(dir, &n, Kind::Dir, 0o755), "{what}: mkdir");
            }
            3 => {
                let n = name(&mut rng);
                let got = errno(fs.create(&root, dir, &n, 0o600)).map(|a| a.ino);
                let want = m.make(dir, &n, Kind::File, 0o600);
                assert_eq!(got, want, "{what}: create");
                if let Ok(ino) = want {
                    m.open(ino).unwrap();
                    handles.push(ino);
                }
            }
            4 => {
                let n = name(&mut rng);
                let got = errno(fs.unlink(&root, dir, &n));
                assert_eq!(got, m.unlink(dir, &n), "{what}: unlink");
            }
            5 => {
                let n = name(&mut rng);
                let got = errno(fs.rmdir(&root, dir, &n));
                assert_eq!(got, m.rmdir(dir, &n), "{what}: rmdir");
            }
            6 | 7 => {
                let d2 = pick(&mut rng, &dirs).unwrap_or(ROOT_INO);
                let (a, b) = (name(&mut rng), name(&mut rng));
                let flags = [0, 0, RENAME_NOREPLACE, RENAME_EXCHANGE, 3][rng.gen_range(0..5)];
                let got = errno(fs.rename(&root, dir, &a, d2, &b, flags));
                assert_eq!(
                    got,
                    m.rename(dir, &a, d2, &b, flags),
                    "{what}: rename {flags}"
                );
            }
            8 => {
                let target = pick(&mut rng, &m.inodes.keys().copied().collect::<Vec<_>>());
                let n = name(&mut rng);
                if let Some(ino) = target {
                    let got = errno(fs.link(&root, ino, dir, &n)).map(|_| ());
                    assert_eq!(got, m.link(ino, dir, &n), "{what}: link");
                }
            }
            9 => {
                let n = name(&mut rng);
                let t = format!("target-{}", rng.gen_range(0..100)).into_bytes();
                let got = errno(fs.symlink(&root, dir, &n, &t)).map(|a| a.ino);
                assert_eq!(got, m.symlink(dir, &n, &t), "{what}: symlink");
            }
            10..=12 => {
                if let Some(ino) = pick(&mut rng, &files) {
                    let off = if rng.gen_bool(0.01) {
                        MAX_FILE_SIZE + rng.gen_range(0..10)
                    } else if rng.gen_bool(0.5) {
                        m.inodes[&ino].data.len() as u64 // appends
                    } else if rng.gen_bool(0.1) {
                        // Far out: holes, and files long enough for reads that scan.
                        rng.gen_range(40_000..200_000)
                    } else {
                        rng.gen_range(0..40_000)
                    };
                    let len =
                        [rng.gen_range(0..100), rng.gen_range(0..9000), 4096][rng.gen_range(0..3)];
                    let byte: u8 = rng.gen();
                    let data: Vec<u8> = (0..len).map(|i| byte.wrapping_add(i as u8)).collect();
                    let got = errno(fs.write(&root, ino, off, &data));
                    assert_eq!(got, m.write(ino, off, &data), "{what}: write {off} {len}");
                }
            }
            13 => {
                if let Some(ino) = pick(&mut rng, &m.inodes.keys().copied().collect::<Vec<_>>()) {
                    let size = if rng.gen_bool(0.02) {
                        MAX_FILE_SIZE + 1
                    } else {
                        rng.gen_range(0..30_000)
                    };
                    let s = SetAttr {
                        size: Some(size),
                        ..SetAttr::default()
                    };
                    let got = errno(fs.setattr(&root, ino, &s)).map(|_| ());
                    assert_eq!(got, m.truncate(ino, size), "{what}: truncate {size}");
                }
            }
            14 => {
                if let Some(ino) = pick(&mut rng, &files) {
                    let (off, len) = (rng.gen_range(0..40_000), rng.gen_range(1..20_000));
                    let keep = libc::FALLOC_FL_KEEP_SIZE;
                    let (mode, want) = match rng.gen_range(0..3) {
                        0 => (libc::FALLOC_FL_PUNCH_HOLE | keep, m.punch(ino, off, len)),
                        1 => (
                            libc::FALLOC_FL_ZERO_RANGE,
                            m.zero_range(ino, off, len, false),
                        ),
                        _ => (
                            libc::FALLOC_FL_ZERO_RANGE | keep,
                            m.zero_range(ino, off, len, true),
                        ),
                    };
                    let got = errno(fs.fallocate(&root, ino, off, len, mode));
                    assert_eq!(got, want, "{what}: fallocate {mode:#x} {off} {len}");
                    // Short reads look blocks up one by one, long ones (over 16 blocks) scan.
                    let (o, l) = (
                        rng.gen_range(0..40_000),
                        [rng.gen_range(0..10_000), rng.gen_range(0..250_000)][rng.gen_range(0..2)],
                    );
                    assert_eq!(errno(fs.read(ino, o, l)), m.read(ino, o, l), "{what}: read");
                }
            }
            15 => {
                if let Some(ino) = pick(&mut rng, &m.inodes.keys().copied().collect::<Vec<_>>()) {
                    let n = format!("user.x{}", rng.gen_range(0..3)).into_bytes();
                    let v = vec![rng.gen::<u8>(); rng.gen_range(0..50)];
                    let flags = rng.gen_range(0..3);
                    let got = errno(fs.setxattr(&root, ino, &n, &v, flags));
                    assert_eq!(got, m.setxattr(ino, &n, &v, flags), "{what}: setxattr");
                }
            }
            16 => {
                if let Some(ino) = pick(&mut rng, &m.inodes.keys().copied().collect::<Vec<_>>()) {
                    let n = format!("user.x{}", rng.gen_range(0..3)).into_bytes();
                    if rng.gen_bool(0.5) {
                        assert_eq!(
                            errno(fs.getxattr(&root, ino, &n)),
                            m.getxattr(ino, &n),
                            "{what}: getxattr"
                        );
                    } else {
                        assert_eq!(
                            errno(fs.removexattr(&root, ino, &n)),
                            m.removexattr(ino, &n),
                            "{what}: removexattr"
                        );
                    }
                }
            }
            17 => {
                if let Some(ino) = pick(&mut rng, &files) {
                    fs.open(&root, ino, libc::O_RDWR).unwrap();
                    m.open(ino).unwrap();
                    handles.push(ino);
                }
            }
            18 => {
                if !handles.is_empty() {
                    let ino = handles.swap_remove(rng.gen_range(0..handles.len()));
                    fs.release(ino).unwrap();
                    m.release(ino);
                }
            }
            19 => {
                if let Some(ino) = pick(&mut rng, &files) {
                    let size = m.inodes[&ino].data.len() as u64;
                    let off = [rng.gen_range(0..40_000), size, rng.gen_range(0..size + 1)]
                        [rng.gen_range(0..3)];
                    let data = rng.gen_bool(0.5);
                    assert_eq!(
                        errno(fs.seek(ino, off, data)),
                        m.seek(ino, off, data),
                        "{what}: seek {off} data {data}"
                    );
                }
            }
            _ => {
                let n = name(&mut rng);
                assert_eq!(
                    errno(fs.lookup(&root, dir, &n)).map(|a| a.ino),
                    m.lookup(dir, &n),
                    "{what}: lookup"
                );
            }
        }
        let files_now = m.of_kind(Kind::File).len();
        let dirs_now = m.dirs().len();
        tally.0 = tally.0.max(files_now);
        tally.1 = tally.1.max(dirs_now);
        if step % 200 == 199 {
            compare_all(&fs, &m, &what);
        }
    }
    compare_all(&fs, &m, &format!("seed {seed} end"));
    // Closing every file deletes the orphans; then the whole tree must still agree.
    for ino in handles.drain(..) {
        fs.release(ino).unwrap();
        m.release(ino);
    }
    compare_all(&fs, &m, &format!("seed {seed} after closing"));
    let s = fs.db().stats();
    eprintln!(
        "seed {seed}: up to {} files and {} directories; {} flushes, {} merges",
        tally.0, tally.1, s.checkpoints, s.merges
    );
    assert!(
        tally.0 >= 10 && tally.1 >= 5,
        "seed {seed}: the tree stayed small: {tally:?}"
    );
}

fn new_fs_for(seed: u64) -> Fs {
    support::new_fs(seed)
}

fn seeds() -> u64 {
    std::env::var("STITCHDB_FS_MODEL_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6)
}

#[test]
fn random_operations_agree_with_the_model() {
    for seed in 0..seeds() {
        run(seed, 2500);
    }
}
