//! Patchgroups for processes through a real mount: a child forked after its parent engaged
//! a group inherits the engagement and one forked before does not; commands answer their
//! documented errnos, garbage is EINVAL, and the group limits hold; `stitchdb pg run`; and
//! the mail mover in patchgroups mode survives `kill -9` of the daemon: every message is
//! there exactly once after recovery, and the store checks clean.
//! (`STITCHDB_PG_CRASH_MESSAGES`, default 200, and `STITCHDB_PG_CRASH_ROUNDS`, default 3.)
//! Every path unmounts (a guard runs `fusermount3 -u -z`). Skipped without /dev/fuse or as
//! a user other than root.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

#[path = "support/mounted.rs"]
mod mounted;

use mounted::Mounted;

fn skip() -> bool {
    match mounted::unavailable() {
        Some(why) => {
            eprintln!("SKIPPED: {why}");
            true
        }
        None => false,
    }
}

/// Runs a Python script with the mount point as its argument; its stdout.
fn python(mp: &Path, script: &str) -> String {
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(mp)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

const PRELUDE: &str = r#"
import os, sys, errno
mp = sys.argv[1]
fd = os.open(mp + "/.stitch/control", os.O_RDWR)
def cmd(line):
    try:
        os.pwrite(fd, line if isinstance(line, bytes) else line.encode(), 0)
        r = 0
    except OSError as e:
        r = e.errno
    return r, os.pread(fd, 4096, 0).decode(errors="replace")
def engaged_by(g):
    for l in open(mp + "/.stitch/groups"):
        f = l.split()
        if f[0] == str(g):
            return [p for p in f[4].split("=")[1].split(",") if p != "-"]
    return []
"#;

#[test]
fn a_child_forked_after_the_engagement_inherits_it_and_one_before_does_not() {
    if skip() {
        return;
    }
    let m = Mounted::new();
    let out = python(
        &m.mp(),
        &format!(
            "{PRELUDE}{}",
            r#"
r, g = cmd("pg create"); g = int(g.split()[1])
def child(go):
    os.read(go, 1)
    # A request through the mount: the child is placed then.
    open(mp + "/f%d" % os.getpid(), "w").write("x")
    os._exit(0)
ra, wa = os.pipe()
before = os.fork()
if before == 0: child(ra)
assert cmd("pg engage %d" % g)[0] == 0
rb, wb = os.pipe()
after = os.fork()
if after == 0: child(rb)
os.write(wa, b"x"); os.write(wb, b"x")
os.waitpid(before, 0); os.waitpid(after, 0)
e = engaged_by(g)
print("after", str(after) in e, "before", str(before) in e, "self", str(os.getpid()) in e)
"#
        ),
    );
    assert_eq!(out.trim(), "after True before False self True");
}

#[test]
fn commands_answer_their_errnos_and_limits_hold() {
    if skip() {
        return;
    }
    let m = Mounted::new();
    let out = python(
        &m.mp(),
        &format!(
            "{PRELUDE}{}",
            r#"
E = errno
g1 = int(cmd("pg create")[1].split()[1]); g2 = int(cmd("pg create")[1].split()[1])
assert cmd("pg depend %d %d" % (g2, g1))[0] == 0
assert cmd("pg engage %d" % g1)[0] == E.EINVAL, "sealed"
assert cmd("pg depend %d %d" % (g1, g2))[0] == E.ELOOP, "a cycle"
assert cmd("pg depend %d %d" % (g1, g1))[0] == E.ELOOP
assert cmd("pg engage 999999")[0] == E.ENOENT
assert cmd("pg disengage %d" % g2)[0] == E.EINVAL, "not engaged"
g3 = int(cmd("pg create")[1].split()[1])
assert cmd("pg engage %d" % g3)[0] == 0
g4 = int(cmd("pg create")[1].split()[1])
assert cmd("pg depend %d %d" % (g4, g3))[0] == E.EBUSY, "depends on an engaged group"
for bad in [b"\n", b"pg", b"pg engage x", b"\xff\xfe", b"x" * 5000, b"pg create\npg create", b"txn begin"]:
    r, reply = cmd(bad)
    assert r == E.EINVAL and reply.startswith("err EINVAL"), (bad, r, reply)
try:
    os.pwrite(fd, b"pg create", 7); assert False
except OSError as e:
    assert e.errno == E.EINVAL
made = [g1, g2, g3, g4]
while True:
    r, reply = cmd("pg create")
    if r: break
    made.append(int(reply.split()[1]))
assert r == E.EMFILE, (r, reply)
print(len(made))
assert cmd("pg close %d" % made[-1])[0] == 0
assert cmd("pg create")[0] == 0
assert cmd("pg close %d" % made[-1])[0] == E.ENOENT
"#
        ),
    );
    assert_eq!(out.trim(), "1024", "a process owns at most 1,024 groups");
}

#[test]
fn pg_run_engages_a_group_for_a_command_and_its_children() {
    if skip() {
        return;
    }
    let m = Mounted::new();
    let stitchdb = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_stitchdb"))
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let mp = m.mp().to_str().unwrap().to_string();
    let (code, g) = stitchdb(&["pg", "create", &mp]);
    assert_eq!(code, Some(0));
    let g = g.trim().to_string();
    let script =
        format!("echo x > {mp}/file; grep -q \"engaged-by=.*$$\" {mp}/.stitch/groups && exit 7");
    let (code, _) = stitchdb(&["pg", "run", &mp, &g, "--", "sh", "-c", &script]);
    assert_eq!(
        code,
        Some(7),
        "the command's shell was engaged, and its status came back"
    );
    let (_, list) = stitchdb(&["pg", "list", &mp]);
    assert!(list.contains(&format!("{g} owner=detached")), "{list}");
    assert_eq!(stitchdb(&["pg", "sync", &mp, &g]).0, Some(0));
    assert_eq!(stitchdb(&["pg", "close", &mp, &g]).0, Some(0));
    assert_ne!(stitchdb(&["pg", "close", &mp, &g]).0, Some(0));
}

#[test]
fn mail_moves_survive_kill_9_of_the_daemon() {
    if skip() {
        return;
    }
    let env = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let (n, rounds) = (
        env("STITCHDB_PG_CRASH_MESSAGES", 200).to_string(),
        env("STITCHDB_PG_CRASH_ROUNDS", 3),
    );
    let mailbench = Path::new(env!("CARGO_BIN_EXE_stitchdb")).with_file_name("mailbench");
    if !mailbench.exists() {
        eprintln!("skipped: build mailbench first (cargo build -p stitchdb-pg)");
        return;
    }
    let mut m = Mounted::new();
    let dir = m.mp().join("mail");
    let dir = dir.to_str().unwrap().to_string();
    let run = |extra: &[&str]| {
        Command::new(&mailbench)
            .args([dir.as_str(), "--messages", n.as_str()])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    // Makes the messages (durably) and moves them, round after round from where it was.
    let mut seed = std::process::id() as u64;
    for round in 0..rounds {
        let mut mover = run(&["--mode", "patchgroups"]);
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(50 + seed % 400));
        m.kill();
        let _ = mover.wait();
        m.mount();
        let out = run(&["--verify"]).wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "round {round}: every message is there once"
        );
    }
    m.kill();
    let store = m.store();
    let out = Command::new(env!("CARGO_BIN_EXE_stitchdb"))
        .arg("check")
        .arg(&store)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}
