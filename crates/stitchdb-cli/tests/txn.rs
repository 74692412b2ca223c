//! `stitchdb txn run` and the snapshot trees of `/.stitch/snapshots`, on a real mount: a
//! failing command leaves no trace and a succeeding one appears whole; readers polling from
//! outside never see a transaction half done; of two conflicting transactions one commits
//! and the other says which path conflicted, with its own exit status; a command killed, or
//! `txn run` itself killed, leaves nothing; `--dry-run` and `--summary` report what changed;
//! a snapshot tree stays the file system as it was while the mainline changes, and refuses
//! writes with EROFS. Every path unmounts (a guard runs `fusermount3 -u -z`), and a command
//! waiting for a signal from the test waits at most 30 s, so a failed test leaves nothing
//! running.
//! Skipped, saying why, where /dev/fuse, fusermount3 or root is missing.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// `txn run`'s exit status for a conflict (the README's table).
const CONFLICT: i32 = 8;

#[path = "support/mounted.rs"]
mod mounted;

use mounted::{unavailable, Mounted};

/// `txn run` with `args` before the mount point, then `sh -c script`, in the mount.
fn txn(m: &Mounted, args: &[&str], script: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_stitchdb"));
    c.arg("txn")
        .arg("run")
        .args(args)
        .arg(m.mp())
        .arg("--")
        .arg("sh")
        .arg("-c")
        .arg(script)
        .current_dir(m.mp())
        .env_remove("RUST_LOG");
    c
}

fn txn_output(m: &Mounted, args: &[&str], script: &str) -> Output {
    txn(m, args, script).output().unwrap()
}

fn stitchdb(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stitchdb"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok()
}

/// The open transactions, as `/.stitch/txns` lists them.
fn open_transactions(mp: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(mp.join(".stitch/txns"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_failing_command_leaves_no_trace_and_a_succeeding_one_appears_whole() {
    if let Some(why) = unavailable() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    let m = Mounted::new();
    let mp = m.mp();
    std::fs::write(mp.join("kept"), "old").unwrap();
    let script = "echo new > kept && mkdir d && echo b > d/b && ln -s d/b link && rm kept";
    // Inside, the command sees its own changes; it fails at the end.
    let out = txn_output(&m, &[], &format!("{script} && cat d/b && exit 3"));
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "b\n");
    assert_eq!(read(&mp.join("kept")).as_deref(), Some("old"));
    assert!(!mp.join("d").exists() && !mp.join("link").exists());
    // Killed by a signal: 128 + 9, nothing left.
    let out = txn_output(&m, &[], &format!("{script} && kill -9 $$"));
    assert_eq!(out.status.code(), Some(137), "{out:?}");
    assert_eq!(read(&mp.join("kept")).as_deref(), Some("old"));
    assert!(!mp.join("d").exists());
    // Succeeding: all of it.
    let out = txn_output(&m, &[], script);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(read(&mp.join("kept")), None);
    assert_eq!(read(&mp.join("d/b")).as_deref(), Some("b\n"));
    assert_eq!(read(&mp.join("link")).as_deref(), Some("b\n"));
    assert!(open_transactions(&mp).is_empty());
}

#[test]
fn a_transaction_s_children_and_their_buffered_writes_are_in_it() {
    if let Some(why) = unavailable() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    let m = Mounted::new();
    let mp = m.mp();
    // A background child outlives the shell; txn run waits for it (it is the subreaper).
    let script = "(sleep 0.3; dd if=/dev/zero of=big bs=64k count=64 2>/dev/null; \
                  echo late > late) & echo early > early";
    let out = txn_output(&m, &["--summary"], script);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(read(&mp.join("early")).as_deref(), Some("early\n"));
    assert_eq!(read(&mp.join("late")).as_deref(), Some("late\n"));
    assert_eq!(std::fs::metadata(mp.join("big")).unwrap().len(), 64 << 16);
    let summary = String::from_utf8_lossy(&out.stderr);
    for path in ["/early", "/late", "/big"] {
        assert!(summary.contains(path), "{summary}");
    }
}

#[test]
fn dry_run_reports_what_the_command_changed_and_keeps_nothing() {
    if let Some(why) = unavailable() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    let m = Mounted::new();
    let mp = m.mp();
    std::fs::write(mp.join("changed"), "1").unwrap();
    std::fs::write(mp.join("removed"), "1").unwrap();
    let out = txn_output(
        &m,
        &["--dry-run"],
        "echo 22 > changed && rm removed && echo new > added",
    );
    assert!(out.status.success(), "{out:?}");
    let summary = String::from_utf8_lossy(&out.stderr);
    for line in ["/added", "/changed", "/removed"] {
        assert!(summary.contains(line), "{summary}");
    }
    assert_eq!(read(&mp.join("changed")).as_deref(), Some("1"));
    assert_eq!(read(&mp.join("removed")).as_deref(), Some("1"));
    assert!(!mp.join("added").exists());
}

#[test]
fn of_two_conflicting_transactions_one_commits_and_the_other_names_the_path() {
    if let Some(why) = unavailable() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    let m = Mounted::new();
    let mp = m.mp();
    std::fs::write(mp.join("shared"), "0").unwrap();
    let go = m.outside("go");
    // The first writes `shared` and waits for a signal from outside the mount.
    let first = txn(
        &m,
        &[],
        &format!(
            "echo first > shared && for i in $(seq 600); do [ -e {} ] && break; sleep 0.05; done",
            go.display()
        ),
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Wait until the first has written (it is open and has a private change).
    while open_transactions(&mp).is_empty() {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let second = txn_output(&m, &[], "echo second > shared");
    assert!(second.status.success(), "{second:?}");
    assert_eq!(read(&mp.join("shared")).as_deref(), Some("second\n"));
    std::fs::write(&go, "").unwrap();
    let first = first.wait_with_output().unwrap();
    assert_eq!(first.status.code(), Some(CONFLICT), "{first:?}");
    let said = String::from_utf8_lossy(&first.stderr);
    assert!(said.contains("shared"), "{said}");
    assert_eq!(read(&mp.join("shared")).as_deref(), Some("second\n"));
    // Serializable: a read of what another commit changed conflicts too (snapshot
    // isolation lets it commit).
    std::fs::write(mp.join("input"), "1").unwrap();
    let reader = |isolation: &str, go: &Path| {
        txn(&m,
            &["--isolation", isolation],
            &format!(
                "cat input > /dev/null; for i in $(seq 600); do [ -e {} ] && break; sleep 0.05; done; echo x > output-{isolation}",
                go.display()
            ),
        )
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
    };
    let (go_si, go_ser) = (m.outside("go-si"), m.outside("go-ser"));
    let si = reader("snapshot", &go_si);
    let ser = reader("serializable", &go_ser);
    while open_transactions(&mp).len() < 2 {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(mp.join("input"), "2").unwrap();
    std::fs::write(&go_si, "").unwrap();
    std::fs::write(&go_ser, "").unwrap();
    let si = si.wait_with_output().unwrap();
    let ser = ser.wait_with_output().unwrap();
    assert!(si.status.success(), "{si:?}");
    assert_eq!(ser.status.code(), Some(CONFLICT), "{ser:?}");
    assert!(mp.join("output-snapshot").exists());
    assert!(!mp.join("output-serializable").exists());
}

#[test]
fn readers_polling_from_outside_never_see_a_transaction_half_done() {
    if let Some(why) = unavailable() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    let m = Mounted::new();
    let mp = m.mp();
    // Each round's transaction makes FILES files in a new directory, one at a time, and
    // rewrites `big` in 64 writes of one byte value: from outside, one listing of the
    // directory shows none or all of them, and `big` is one round's bytes, whole.
    const FILES: usize = 24;
    const BIG: usize = 256 << 10;
    std::fs::write(mp.join("big"), vec![b'0'; BIG]).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let poller = {
        let (stop, mp) = (stop.clone(), mp.clone());
        std::thread::spawn(move || {
            let mut seen = std::collections::BTreeSet::new();
            while !stop.load(Ordering::Relaxed) {
                for round in 1..=3 {
                    if let Ok(dir) = std::fs::read_dir(mp.join(format!("round{round}"))) {
                        let n = dir.count();
                        assert_eq!(n, FILES, "half done: round {round} lists {n} files");
                    }
                }
                let big = std::fs::read(mp.join("big")).unwrap();
                let first = big[0];
                assert!(
                    big.len() == BIG && big.iter().all(|&b| b == first),
                    "half done: {} bytes, not all {:?}",
                    big.len(),
                    first as char
                );
                seen.insert(first);
            }
            seen
        })
    };
    for round in 1..=3 {
        let script = format!(
            "mkdir round{round} && for i in $(seq 1 {FILES}); do echo $i > round{round}/f$i; done && \
             for i in $(seq 1 64); do head -c 4096 /dev/zero | tr '\\0' '{round}'; done > big"
        );
        let out = txn_output(&m, &[], &script);
        assert!(out.status.success(), "{out:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    let seen = poller.join().unwrap();
    assert!(seen.contains(&b'3'), "{seen:?}");
}

#[test]
fn killing_txn_run_aborts_its_transaction() {
    if let Some(why) = unavailable() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    let m = Mounted::new();
    let mp = m.mp();
    let mut child = txn(&m, &[], "echo x > written && sleep 20")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    while open_transactions(&mp).is_empty() {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    // Its control file closed with it: the daemon aborted the transaction.
    let gone = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        open_transactions(&mp).is_empty()
    });
    assert!(gone, "{:?}", open_transactions(&mp));
    assert!(!mp.join("written").exists());
}

#[test]
fn a_transaction_whose_daemon_is_killed_leaves_no_trace() {
    if let Some(why) = unavailable() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    let mut m = Mounted::new();
    let mp = m.mp();
    std::fs::write(mp.join("before"), "kept").unwrap();
    // The command writes, then waits; the daemon is killed under it.
    let mut run = txn(
        &m,
        &[],
        "mkdir d && echo x > d/f && echo y > before && sleep 5",
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    while open_transactions(&mp).is_empty() {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    m.kill();
    let _ = run.kill();
    let status = run.wait().unwrap();
    assert!(!status.success(), "{status:?}");
    let check = stitchdb(&["check".as_ref(), m.store().as_os_str()]);
    assert!(check.status.success(), "{check:?}");
    m.mount();
    assert_eq!(read(&mp.join("before")).as_deref(), Some("kept"));
    assert!(!mp.join("d").exists());
    assert!(open_transactions(&mp).is_empty());
}

#[test]
fn snapshot_trees_keep_the_file_system_as_it_was() {
    if let Some(why) = unavailable() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    let m = Mounted::new();
    let mp = m.mp();
    std::fs::create_dir(mp.join("d")).unwrap();
    std::fs::write(mp.join("d/a"), "before").unwrap();
    std::fs::write(mp.join("gone"), "soon").unwrap();
    let sync = Command::new("sync").arg("-f").arg(&mp).status().unwrap();
    assert!(sync.success());
    std::fs::create_dir(mp.join(".stitch/snapshots/first")).unwrap();
    std::fs::write(mp.join("d/a"), "after").unwrap();
    std::fs::remove_file(mp.join("gone")).unwrap();
    std::fs::write(mp.join("new"), "n").unwrap();
    let snap = mp.join(".stitch/snapshots/first");
    assert_eq!(read(&snap.join("d/a")).as_deref(), Some("before"));
    assert_eq!(read(&snap.join("gone")).as_deref(), Some("soon"));
    assert!(!snap.join("new").exists());
    let err = std::fs::write(snap.join("d/a"), "x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc_erofs()), "{err}");
    let err = std::fs::create_dir(snap.join("x")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc_erofs()), "{err}");
    let listed: Vec<_> = std::fs::read_dir(mp.join(".stitch/snapshots"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(listed, vec![std::ffi::OsString::from("first")]);
    // The same snapshots as the store's.
    std::fs::remove_dir(mp.join(".stitch/snapshots/first")).unwrap();
    assert!(std::fs::read_dir(mp.join(".stitch/snapshots"))
        .unwrap()
        .next()
        .is_none());
}

#[test]
fn a_transaction_larger_than_its_memory_spills_and_commits_or_aborts_whole() {
    if let Some(why) = unavailable() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    // 1 MiB of memory for a transaction's writes; it writes 6 MiB and 300 files.
    let m = Mounted::with_options(&["-o", "txn_memory=1"]);
    let mp = m.mp();
    let script = "mkdir many && for i in $(seq 1 300); do echo $i > many/f$i; done && \
                  head -c 6291456 /dev/urandom > big && cp big big.copy";
    let out = txn_output(&m, &[], &format!("{script} && exit 5"));
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    assert!(!mp.join("many").exists() && !mp.join("big").exists());
    let out = txn_output(&m, &["--summary"], script);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::read_dir(mp.join("many")).unwrap().count(), 300);
    assert_eq!(read(&mp.join("many/f300")).as_deref(), Some("300\n"));
    let big = std::fs::read(mp.join("big")).unwrap();
    assert_eq!(big.len(), 6 << 20);
    assert!(big == std::fs::read(mp.join("big.copy")).unwrap());
}

#[test]
fn another_user_runs_transactions_of_its_own_and_cannot_reach_root_s() {
    if let Some(why) = unavailable() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let m = Mounted::with_options(&["-o", "allow_other"]);
    let mp = m.mp();
    std::fs::set_permissions(m.tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir(mp.join("pub")).unwrap();
    std::fs::set_permissions(mp.join("pub"), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::create_dir(mp.join("private")).unwrap();
    // Root's transaction, held open (in a directory of its own: creating files in one
    // directory is a conflict).
    let go = m.outside("go");
    let root_txn = txn(
        &m,
        &[],
        &format!(
            "echo secret > private/root && for i in $(seq 600); do [ -e {} ] && break; sleep 0.05; done",
            go.display()
        ),
    )
    .spawn()
    .unwrap();
    while open_transactions(&mp).is_empty() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let id = open_transactions(&mp).remove(0);
    let as_nobody = |script: &str| {
        Command::new("su")
            .args(["-s", "/bin/sh", "nobody", "-c", script])
            .current_dir("/")
            .output()
            .unwrap()
    };
    // Another user sees neither root's transaction nor its tree.
    let txns = mp.join(".stitch/txns");
    let out = as_nobody(&format!(
        "ls {0}; cat {0}/{id}/private/root; cat {1}",
        txns.display(),
        mp.join(".stitch/transactions").display()
    ));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(!said.contains("secret"), "{out:?}");
    assert!(!said.lines().any(|l| l.trim() == id), "{out:?}");
    // ... and runs a transaction of its own (in a user namespace).
    let out = as_nobody(&format!(
        "{} txn run {} -- sh -c 'echo mine > {}'",
        env!("CARGO_BIN_EXE_stitchdb"),
        mp.display(),
        mp.join("pub/nobody").display()
    ));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(read(&mp.join("pub/nobody")).as_deref(), Some("mine\n"));
    std::fs::write(&go, "").unwrap();
    let root_txn = root_txn.wait_with_output().unwrap();
    assert!(root_txn.status.success(), "{root_txn:?}");
    assert_eq!(read(&mp.join("private/root")).as_deref(), Some("secret\n"));
}

fn libc_erofs() -> i32 {
    30
}
