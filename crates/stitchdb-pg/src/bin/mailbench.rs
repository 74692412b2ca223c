//! The mail benchmark of Featherstitch §8.5 as a program: moves N messages between two
//! maildir-style directories, each move crash-safe (a message is in the source or the
//! destination, never neither; never both after the recovery this program runs first).
//!
//! `mailbench DIR [--messages N] [--size BYTES] [--mode fsync|patchgroups|none] [--verify]`
//!
//! A move copies `src/cur/M` to `dst/tmp/M`, renames it to `dst/new/M`, then unlinks the
//! source. `fsync` makes the copy and `dst/new` durable before the unlink (any file
//! system); `patchgroups` engages a group for the copy and rename, and a second group,
//! depending on the first, for the unlink, with no fsync, each move's first group depending
//! on the previous move's second (as the paper's IMAP server orders its commands), and one
//! `pg sync` at the end (a StitchDB mount only). Recovery, at every start: leftovers in
//! `dst/tmp` are dropped, and a message in both places loses its source copy. The first run
//! on an empty DIR makes the N messages (durably, untimed). `--verify` only checks that
//! every message is there exactly once, with its contents, after recovery.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;
use stitchdb_pg::{Group, PatchGroups};

struct Args {
    dir: PathBuf,
    messages: usize,
    size: usize,
    mode: Mode,
    verify: bool,
}

/// How a move is made crash-safe.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// fsync of the copy and of `dst/new` before the unlink.
    Fsync,
    /// Patchgroups ordering the copy before the unlink.
    Patchgroups,
    /// Not at all: no fsync, no group. The floor the other modes cannot beat (on a StitchDB
    /// mount still crash-safe, as its log keeps the order of operations, but not on others).
    None,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Fsync => "fsync",
            Mode::Patchgroups => "patchgroups",
            Mode::None => "none",
        }
    }
}

fn usage() -> ! {
    eprintln!(
        "usage: mailbench DIR [--messages N] [--size BYTES] [--mode fsync|patchgroups|none] [--verify]"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut a = Args {
        dir: PathBuf::new(),
        messages: 1000,
        size: 2048,
        mode: Mode::Fsync,
        verify: false,
    };
    let mut it = std::env::args().skip(1);
    let mut dir = None;
    while let Some(arg) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| usage());
        match arg.as_str() {
            "--messages" => a.messages = value().parse().unwrap_or_else(|_| usage()),
            "--size" => a.size = value().parse().unwrap_or_else(|_| usage()),
            "--mode" => {
                a.mode = match value().as_str() {
                    "fsync" => Mode::Fsync,
                    "patchgroups" => Mode::Patchgroups,
                    "none" => Mode::None,
                    _ => usage(),
                }
            }
            "--verify" => a.verify = true,
            _ if dir.is_none() && !arg.starts_with('-') => dir = Some(PathBuf::from(arg)),
            _ => usage(),
        }
    }
    a.dir = dir.unwrap_or_else(|| usage());
    a
}

/// Message `i`'s contents: a header naming it, then filler that depends on `i`.
fn message(i: usize, size: usize) -> Vec<u8> {
    let mut m = format!("Message-Id: <{i}@mailbench>\n\n").into_bytes();
    let mut x = i as u64 ^ 0x9E37_79B9_7F4A_7C15;
    while m.len() < size {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        m.push(b'a' + (x % 26) as u8);
    }
    m
}

fn name(i: usize) -> String {
    format!("msg-{i:06}")
}

/// The mount holding `dir`: the nearest ancestor with a control directory.
fn mount_of(dir: &Path) -> std::io::Result<PathBuf> {
    let dir = dir.canonicalize()?;
    dir.ancestors()
        .find(|a| a.join(".stitch/control").exists())
        .map(Path::to_path_buf)
        .ok_or_else(|| {
            std::io::Error::other(
                "patchgroups need a StitchDB mount (no .stitch/control above DIR)",
            )
        })
}

fn fsync_dir(d: &Path) -> std::io::Result<()> {
    File::open(d)?.sync_all()
}

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Makes the messages if DIR is new: in a staging directory renamed into place once
/// durable, so that a crash during setup leaves no half-made mailbox (the next run redoes it).
fn setup(a: &Args, src: &Path, dst: &Path) -> Result<()> {
    if src.exists() {
        return Ok(());
    }
    let staging = a.dir.join("staging");
    if staging.exists() {
        fs::remove_dir_all(&staging)?;
    }
    for d in [staging.join("cur"), dst.join("tmp"), dst.join("new")] {
        fs::create_dir_all(d)?;
    }
    for i in 0..a.messages {
        let mut f = File::create(staging.join("cur").join(name(i)))?;
        f.write_all(&message(i, a.size))?;
        f.sync_all()?;
    }
    for d in [
        staging.join("cur"),
        staging.clone(),
        dst.join("tmp"),
        dst.join("new"),
        dst.to_path_buf(),
    ] {
        fsync_dir(&d)?;
    }
    fs::rename(&staging, a.dir.join("src"))?;
    fsync_dir(&a.dir)?;
    Ok(())
}

/// Drops `dst/tmp` leftovers and the source copies of messages already in `dst/new`.
fn recover(src: &Path, dst: &Path) -> Result<()> {
    for e in fs::read_dir(dst.join("tmp"))? {
        fs::remove_file(e?.path())?;
    }
    for e in fs::read_dir(dst.join("new"))? {
        let e = e?;
        let source = src.join(e.file_name());
        if source.exists() {
            fs::remove_file(source)?;
        }
    }
    Ok(())
}

/// Every message is in exactly one place, whole.
fn verify(a: &Args, src: &Path, dst: &Path) -> Result<()> {
    let mut seen = vec![0u8; a.messages];
    for d in [src.to_path_buf(), dst.join("new")] {
        for e in fs::read_dir(&d)? {
            let e = e?;
            let file = e.file_name().to_string_lossy().into_owned();
            let i: usize = file
                .strip_prefix("msg-")
                .and_then(|n| n.parse().ok())
                .filter(|&i| i < a.messages)
                .ok_or_else(|| format!("stray file {}", e.path().display()))?;
            if fs::read(e.path())? != message(i, a.size) {
                return Err(format!("{} has the wrong contents", e.path().display()).into());
            }
            seen[i] += 1;
        }
    }
    if let Some(i) = seen.iter().position(|&n| n != 1) {
        return Err(format!("message {i} is there {} times", seen[i]).into());
    }
    println!("verified {} messages", a.messages);
    Ok(())
}

/// One move with no ordering asked: the operations alone.
fn move_plain(src: &Path, dst: &Path, m: &str) -> Result<()> {
    let data = fs::read(src.join(m))?;
    let tmp = dst.join("tmp").join(m);
    File::create(&tmp)?.write_all(&data)?;
    fs::rename(&tmp, dst.join("new").join(m))?;
    fs::remove_file(src.join(m))?;
    Ok(())
}

/// One move, crash-safe by fsync.
fn move_fsync(src: &Path, dst: &Path, m: &str) -> Result<()> {
    let data = fs::read(src.join(m))?;
    let tmp = dst.join("tmp").join(m);
    let mut f = File::create(&tmp)?;
    f.write_all(&data)?;
    f.sync_all()?;
    fs::rename(&tmp, dst.join("new").join(m))?;
    fsync_dir(&dst.join("new"))?;
    fs::remove_file(src.join(m))?;
    Ok(())
}

/// One move, crash-safe by patchgroups: returns the group of its unlink, which the next
/// move's copy depends on.
fn move_pg(
    pg: &PatchGroups,
    prev: Option<Group>,
    src: &Path,
    dst: &Path,
    m: &str,
) -> Result<Group> {
    let copy = pg.create()?;
    if let Some(prev) = prev {
        pg.depend(copy, prev)?;
        pg.close(prev)?;
    }
    pg.engage(copy)?;
    let data = fs::read(src.join(m))?;
    let tmp = dst.join("tmp").join(m);
    File::create(&tmp)?.write_all(&data)?;
    fs::rename(&tmp, dst.join("new").join(m))?;
    pg.disengage(copy)?;
    let unlink = pg.create()?;
    pg.depend(unlink, copy)?;
    pg.close(copy)?;
    pg.engage(unlink)?;
    fs::remove_file(src.join(m))?;
    pg.disengage(unlink)?;
    Ok(unlink)
}

fn main() {
    let a = parse_args();
    if let Err(e) = run(&a) {
        eprintln!("mailbench: {e}");
        std::process::exit(1);
    }
}

fn run(a: &Args) -> Result<()> {
    let src = a.dir.join("src/cur");
    let dst = a.dir.join("dst");
    setup(a, &src, &dst)?;
    recover(&src, &dst)?;
    if a.verify {
        return verify(a, &src, &dst);
    }
    let mut todo: Vec<String> = fs::read_dir(&src)?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<std::io::Result<_>>()?;
    todo.sort();
    let pg = if a.mode == Mode::Patchgroups {
        Some(PatchGroups::open(mount_of(&a.dir)?)?)
    } else {
        None
    };
    let start = Instant::now();
    let mut last = None;
    for m in &todo {
        match (&pg, a.mode) {
            (Some(pg), _) => last = Some(move_pg(pg, last, &src, &dst, m)?),
            (None, Mode::None) => move_plain(&src, &dst, m)?,
            (None, _) => move_fsync(&src, &dst, m)?,
        }
    }
    // The moves are durable, in order, once the last one is.
    match (&pg, last) {
        (Some(pg), Some(g)) => {
            pg.sync(g)?;
            pg.close(g)?;
        }
        _ => fsync_dir(&src)?,
    }
    let secs = start.elapsed().as_secs_f64();
    let n = todo.len().max(1) as f64;
    println!(
        "mode={} moves={} seconds={secs:.3} moves_per_s={:.0} us_per_move={:.1}",
        a.mode.name(),
        todo.len(),
        n / secs,
        secs * 1e6 / n
    );
    Ok(())
}
