//! `stitchdb mount` as a user runs it: the daemon returns once mounted, errors for a busy or
//! missing mount point and a store in use, SIGTERM unmounts leaving everything durable, a
//! read-only mount ends with exit status 0, and a daemon killed with SIGKILL while writing
//! leaves a store that passes `check`, remounts, and holds every fsynced file; the `mount.stitchdb` helper passes options on; a user who is not
//! root mounts through `fusermount3` and unmounts once. Every path unmounts (a guard runs
//! `fusermount3 -u -z`).
//! Skipped, saying why, where /dev/fuse or fusermount3 is missing.

#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

fn stitchdb(args: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stitchdb"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn fuse_unavailable() -> Option<&'static str> {
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse does not exist");
    }
    if Command::new("fusermount3").arg("-V").output().is_err() {
        return Some("fusermount3 is not installed (apt-get install fuse3)");
    }
    None
}

fn mounted(mp: &Path) -> bool {
    mount_entry(mp).is_some()
}

/// The type and source of the mount on `mp`, per /proc/self/mountinfo.
fn mount_entry(mp: &Path) -> Option<(String, String)> {
    let canon = mp.canonicalize().unwrap_or_else(|_| mp.to_path_buf());
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .find(|l| l.split(' ').nth(4) == Some(canon.to_str().unwrap()))
        .and_then(|l| {
            // Optional fields end at " - "; then the type and the source.
            let (_, tail) = l.split_once(" - ")?;
            let mut f = tail.split(' ');
            Some((f.next()?.to_string(), f.next()?.to_string()))
        })
}

/// A store and a mount point in a temporary directory; unmounts and kills its daemon on drop.
struct Scene {
    tmp: tempfile::TempDir,
    store: PathBuf,
    daemon: Option<Child>,
}

impl Scene {
    fn new() -> Scene {
        let tmp = tempfile::tempdir().unwrap();
        let store = tmp.path().join("fs.store");
        Scene::with_store(tmp, store)
    }
    /// A scene whose store is `store` (made here), in a temporary directory of its own.
    fn with_store(tmp: tempfile::TempDir, store: PathBuf) -> Scene {
        std::fs::create_dir(tmp.path().join("mnt")).unwrap();
        let s = Scene {
            tmp,
            store,
            daemon: None,
        };
        let out = stitchdb(&[Path::new("init"), &s.store()]);
        assert!(out.status.success(), "{out:?}");
        s
    }
    fn store(&self) -> PathBuf {
        self.store.clone()
    }
    fn mp(&self) -> PathBuf {
        self.tmp.path().join("mnt")
    }
    /// Mounts in the foreground as a child (so the test knows its pid) and waits until the
    /// mount is ready.
    fn mount_foreground(&mut self) {
        self.mount_foreground_with(&[]);
    }
    /// [`mount_foreground`](Self::mount_foreground) with more arguments (`-o` options).
    fn mount_foreground_with(&mut self, args: &[&str]) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_stitchdb"))
            .arg("mount")
            .arg(self.store())
            .arg(self.mp())
            .arg("-f")
            .args(args)
            .env("STITCHDB_MOUNT_NOTIFY", "1")
            .env_remove("RUST_LOG")
            .stdout(Stdio::piped())
            .stderr(self.daemon_log())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready");
        self.daemon = Some(child);
    }
    /// Where foreground daemons write their log (appended to, one mount after another).
    fn daemon_log(&self) -> std::fs::File {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.tmp.path().join("daemon.log"))
            .unwrap()
    }
    /// What foreground daemons logged so far.
    fn logged(&self) -> String {
        std::fs::read_to_string(self.tmp.path().join("daemon.log")).unwrap_or_default()
    }
    fn unmount(&self) {
        let out = Command::new("fusermount3")
            .arg("-u")
            .arg(self.mp())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    fn check(&self) -> String {
        let out = stitchdb(&[Path::new("check"), &self.store()]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "check failed: {out:?}");
        assert!(text.contains("ok: file system"), "{text}");
        text
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        let _ = Command::new("fusermount3")
            .arg("-u")
            .arg("-z")
            .arg(self.mp())
            .output();
        if let Some(mut d) = self.daemon.take() {
            let _ = d.kill();
            let _ = d.wait();
        }
    }
}

#[test]
fn mount_errors_daemon_and_clean_unmount_on_sigterm() {
    if let Some(why) = fuse_unavailable() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    let mut s = Scene::new();
    let err = |args: &[&Path]| {
        let out = stitchdb(args);
        assert!(!out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let missing = s.tmp.path().join("nowhere");
    assert!(err(&[Path::new("mount"), &s.store(), &missing]).contains("does not exist"));
    let no_store = s.tmp.path().join("none.store");
    assert!(err(&[Path::new("mount"), &no_store, &s.mp()]).contains("stitchdb init"));
    // The daemon form returns once the mount is ready; its log goes where --log-file says,
    // at the level --log gives.
    let daemon_log = s.tmp.path().join("background.log");
    let out = stitchdb(&[
        Path::new("--log"),
        Path::new("stitchdb_fuse=info"),
        Path::new("mount"),
        &s.store(),
        &s.mp(),
        Path::new("--log-file"),
        &daemon_log,
    ]);
    assert!(out.status.success(), "{out:?}");
    // The mount table names the type with its subtype, as libfuse does, and the store.
    let (fs_type, source) = mount_entry(&s.mp()).unwrap();
    assert_eq!(fs_type, "fuse.stitchdb");
    assert_eq!(Path::new(&source), s.store().canonicalize().unwrap());
    std::fs::write(s.mp().join("hello"), b"world").unwrap();
    // Busy mount point; store in use.
    assert!(err(&[Path::new("mount"), &s.store(), &s.mp()]).contains("busy"));
    let other = s.tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    assert!(err(&[Path::new("mount"), &s.store(), &other]).contains("in use"));
    s.unmount();
    let said_unmounted = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        std::fs::read_to_string(&daemon_log).is_ok_and(|l| l.contains("unmounted"))
    });
    assert!(said_unmounted, "{:?}", std::fs::read_to_string(&daemon_log));
    let unwritable = s.tmp.path().join("no-such-dir").join("x.log");
    let refused = err(&[
        Path::new("mount"),
        &s.store(),
        &s.mp(),
        Path::new("--log-file"),
        &unwritable,
    ]);
    assert!(refused.contains("log file"), "{refused}");
    assert!(!mounted(&s.mp()));
    // Foreground, written without fsync, then SIGTERM: unmounted, and the data is durable.
    s.mount_foreground();
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(s.mp().join("big"), &data).unwrap();
    let pid = s.daemon.as_ref().unwrap().id();
    Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status()
        .unwrap();
    let status = s.daemon.take().unwrap().wait().unwrap();
    assert!(status.success(), "the daemon exited with {status}");
    assert!(!mounted(&s.mp()), "SIGTERM left the mount in place");
    s.check();
    s.mount_foreground();
    assert_eq!(std::fs::read(s.mp().join("big")).unwrap(), data);
    assert_eq!(std::fs::read(s.mp().join("hello")).unwrap(), b"world");
    s.unmount();
    assert!(s.daemon.take().unwrap().wait().unwrap().success());
    // Read-only: nothing to make durable at the unmount, and exit status 0.
    s.mount_foreground_with(&["-o", "ro"]);
    assert_eq!(std::fs::read(s.mp().join("hello")).unwrap(), b"world");
    s.unmount();
    assert!(s.daemon.take().unwrap().wait().unwrap().success());
    // Neither way of unmounting made the daemon unmount the path again (which would fail,
    // or take away a file system mounted there since) or log anything else.
    let log = s.logged();
    assert!(!log.contains("ERROR") && !log.contains("WARN"), "{log}");
}

/// `program` run as the user `nobody` (uid and gid 65534, no supplementary groups).
fn as_nobody(program: &str) -> Command {
    let mut c = Command::new("setpriv");
    c.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--",
        program,
    ]);
    c.env_remove("RUST_LOG");
    c
}

/// Gives `/dev/fuse` the mode `mode` until dropped, then its mode before. `fusermount3` opens
/// the device as the user it runs for: distributions make it 0666, this machine's is 0600.
struct DeviceMode(u32);

impl DeviceMode {
    fn set(mode: u32) -> DeviceMode {
        use std::os::unix::fs::PermissionsExt;
        let before = std::fs::metadata("/dev/fuse").unwrap().permissions().mode() & 0o7777;
        std::fs::set_permissions("/dev/fuse", std::fs::Permissions::from_mode(mode)).unwrap();
        DeviceMode(before)
    }
}

impl Drop for DeviceMode {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions("/dev/fuse", std::fs::Permissions::from_mode(self.0));
    }
}

/// Unmounts `0` (lazily, as root, whoever mounted it) on drop.
struct Unmounted(PathBuf);

impl Drop for Unmounted {
    fn drop(&mut self) {
        let _ = Command::new("fusermount3")
            .arg("-u")
            .arg("-z")
            .arg(&self.0)
            .output();
    }
}

#[test]
fn a_user_mounts_through_fusermount3_and_unmounts_once() {
    if let Some(why) = fuse_unavailable() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    let id = Command::new("id").arg("-u").output().unwrap();
    if String::from_utf8_lossy(&id.stdout).trim() != "0" {
        eprintln!("SKIPPED: acting as another user needs root");
        return;
    }
    // A directory of nobody's own, with the store, the mount point and the daemon's log.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mp = dir.join("mnt");
    std::fs::create_dir(&mp).unwrap();
    for p in [dir, mp.as_path()] {
        std::os::unix::fs::chown(p, Some(65534), Some(65534)).unwrap();
    }
    let store = dir.join("user.store");
    let log = dir.join("daemon.log");
    let bin = env!("CARGO_BIN_EXE_stitchdb");
    let run = |c: &mut Command| {
        let out = c.output().unwrap();
        assert!(out.status.success(), "{c:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // Every fusermount3 run by the daemon or this test is written down.
    let wrappers = dir.join("bin");
    std::fs::create_dir(&wrappers).unwrap();
    let calls = dir.join("fusermount3.calls");
    let wrapper = wrappers.join("fusermount3");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nPATH=/usr/bin:/bin exec fusermount3 \"$@\"\n",
            calls.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let path = format!("{}:{}", wrappers.display(), std::env::var("PATH").unwrap());
    run(as_nobody(bin).arg("init").arg(&store));
    let _device = DeviceMode::set(0o666);
    let _guard = Unmounted(mp.clone());
    // The daemon form: it returns once fusermount3 has mounted the store.
    run(as_nobody(bin)
        .env("PATH", &path)
        .args(["--log", "stitchdb_fuse=info", "mount"])
        .arg(&store)
        .arg(&mp)
        .arg("--log-file")
        .arg(&log));
    let (fs_type, source) = mount_entry(&mp).unwrap();
    assert_eq!(fs_type, "fuse.stitchdb");
    assert_eq!(Path::new(&source), store.canonicalize().unwrap());
    // The mount's root belongs to the user, who can write and read files in it.
    let said = run(as_nobody("sh")
        .arg("-c")
        .arg("echo hello > \"$1/f\" && cat \"$1/f\" && stat -c %u \"$1\"")
        .arg("sh")
        .arg(&mp));
    assert_eq!(said, "hello\n65534\n");
    run(as_nobody("fusermount3")
        .env("PATH", &path)
        .arg("-u")
        .arg(&mp));
    let said_unmounted = (0..300).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("unmounted"))
    });
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(said_unmounted, "{logged}");
    assert!(!mounted(&mp));
    // The daemon logs its last line before it closes the store; `check` waits for it to let
    // go (3 s at most), as after any unmount.
    let checked = stitchdb(&[Path::new("check"), &store]);
    assert!(checked.status.success(), "{checked:?}");
    assert!(String::from_utf8_lossy(&checked.stdout).contains("ok: file system"));
    // The daemon ran fusermount3 once, to mount, and unmounted nothing itself (the
    // connection was gone) nor complained: through fuser's own fusermount3 mount, its exit
    // ran `fusermount3 -u -q -z` on the path once more.
    assert!(
        !logged.contains("ERROR") && !logged.contains("WARN"),
        "{logged}"
    );
    let calls = std::fs::read_to_string(&calls).unwrap();
    let calls: Vec<&str> = calls.lines().collect();
    let canonical = mp.canonicalize().unwrap();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(
        calls[0].starts_with("-o fsname=")
            && calls[0].ends_with(&format!("-- {}", canonical.display())),
        "{calls:?}"
    );
    assert_eq!(calls[1], format!("-u {}", mp.display()));
}

/// `mount.stitchdb` as `mount(8)` runs it for `mount -t stitchdb STORE DIR -o OPTIONS`.
fn mount_helper(store: &Path, mp: &Path, options: &str) -> Output {
    Command::new("sh")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../stitchdb-fuse/mount.stitchdb"
        ))
        .arg(store)
        .arg(mp)
        .arg("-o")
        .arg(options)
        .env("STITCHDB", env!("CARGO_BIN_EXE_stitchdb"))
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

#[test]
fn the_mount_helper_passes_options_on_and_keeps_log_file_for_itself() {
    if let Some(why) = fuse_unavailable() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    let s = Scene::new();
    let log = s.tmp.path().join("helper.log");
    let options = format!("defaults,noatime,log_file={}", log.display());
    let out = mount_helper(&s.store(), &s.mp(), &options);
    assert!(out.status.success(), "{out:?}");
    assert!(mounted(&s.mp()));
    assert!(log.exists(), "the daemon's log file was not made");
    std::fs::write(s.mp().join("f"), b"data").unwrap();
    s.unmount();
    // Read-only, and an option the daemon refuses: its error comes back through the helper.
    let out = mount_helper(&s.store(), &s.mp(), "ro");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::read(s.mp().join("f")).unwrap(), b"data");
    assert!(std::fs::write(s.mp().join("g"), b"x").is_err());
    s.unmount();
    let out = mount_helper(&s.store(), &s.mp(), "bogus_option");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("bogus_option"),
        "{out:?}"
    );
    assert!(!mounted(&s.mp()));
}

#[test]
fn a_daemon_killed_while_writing_leaves_a_store_that_remounts_with_every_fsynced_file() {
    if let Some(why) = fuse_unavailable() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    let mut s = Scene::new();
    s.mount_foreground();
    let mp = s.mp();
    // Files made durable with fsync before the kill.
    let mut synced = Vec::new();
    for i in 0..20u32 {
        let path = mp.join(format!("synced{i}"));
        let data: Vec<u8> = (0..(i * 10_007)).map(|j| (j ^ i) as u8).collect();
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&data).unwrap();
        f.sync_all().unwrap();
        synced.push((path, data));
    }
    // A writer still going when the daemon dies.
    let writer_mp = mp.clone();
    let writer = std::thread::spawn(move || {
        let mut n = 0u64;
        while let Ok(mut f) = std::fs::File::create(writer_mp.join(format!("unsynced{n}"))) {
            if f.write_all(&vec![n as u8; 256 << 10]).is_err() {
                break;
            }
            n += 1;
        }
        n
    });
    std::thread::sleep(Duration::from_millis(300));
    let mut daemon = s.daemon.take().unwrap();
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    let written = writer.join().unwrap();
    // The dead mount stays until unmounted; a remount over it says so.
    let out = stitchdb(&[Path::new("mount"), &s.store(), &mp]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("busy"),
        "{out:?}"
    );
    s.unmount();
    let report = s.check();
    s.mount_foreground();
    for (path, data) in &synced {
        assert_eq!(&std::fs::read(path).unwrap(), data, "{}", path.display());
    }
    eprintln!("{written} unsynced files were being written; after remount: {report}");
    s.unmount();
    assert!(s.daemon.take().unwrap().wait().unwrap().success());
    s.check();
}

/// The pjdfstest runner: $PJDFSTEST, `pjdfstest` on PATH, or where .ci/run installs it.
fn pjdfstest() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PJDFSTEST") {
        return Some(PathBuf::from(p));
    }
    let ci = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/pjdfstest/bin/pjdfstest");
    if ci.exists() {
        return Some(ci);
    }
    Command::new("pjdfstest")
        .arg("-V")
        .output()
        .ok()
        .map(|_| PathBuf::from("pjdfstest"))
}

/// Runs pjdfstest on a mount with `options`, napping `naptime` seconds between changes whose
/// time stamps must differ (the configuration's own nap if `None`); returns its summary line
/// and the failed cases with the first line of their messages.
fn run_pjdfstest(
    runner: &Path,
    options: &str,
    naptime: Option<&str>,
) -> (String, Vec<(String, String)>) {
    let s = Scene::new();
    let out = Command::new(env!("CARGO_BIN_EXE_stitchdb"))
        .arg("mount")
        .arg(s.store())
        .arg(s.mp())
        .args(["-o", options])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let mut config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/fs/pjdfstest.toml");
    if let Some(nap) = naptime {
        let text = std::fs::read_to_string(&config).unwrap();
        let naps: Vec<&str> = text.lines().filter(|l| l.starts_with("naptime")).collect();
        assert_eq!(naps.len(), 1, "one naptime line in {}", config.display());
        config = s.tmp.path().join("pjdfstest.toml");
        std::fs::write(&config, text.replace(naps[0], &format!("naptime = {nap}"))).unwrap();
    }
    let run = Command::new(runner)
        .arg("-c")
        .arg(&config)
        .arg("-p")
        .arg(s.mp())
        .current_dir(s.mp())
        .output()
        .unwrap();
    s.unmount();
    // The daemon closes the store after the unmount returns: give it its lock back.
    std::thread::sleep(Duration::from_millis(500));
    s.check();
    let text =
        String::from_utf8_lossy(&run.stdout).into_owned() + &String::from_utf8_lossy(&run.stderr);
    let summary = text
        .lines()
        .find(|l| l.starts_with("Summary:"))
        .unwrap_or_else(|| panic!("pjdfstest printed no summary:\n{text}"))
        .to_string();
    let lines: Vec<&str> = text.lines().collect();
    let failed = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.trim_end().ends_with("FAILED"))
        .map(|(i, l)| {
            let name = l.split_whitespace().next().unwrap_or_default().to_string();
            let why = lines.get(i + 1).map_or("", |m| m.trim()).to_string();
            (name, why)
        })
        .collect();
    (summary, failed)
}

/// pjdfstest on a mount with `allow_other`, so that its cases run as other users too: with
/// and without the kernel's write-back cache, with and without `default_permissions` (the
/// file system deciding alone), and served through `/dev/fuse` rather than io_uring queues:
/// every case passes (with the cache, given naps longer than the kernel's clock tick:
/// docs/kvfs.md, "Time stamps"). Skipped, saying why, without root (pjdfstest switches
/// users), FUSE or the runner.
#[test]
fn pjdfstest_passes_on_a_mount() {
    if let Some(why) = fuse_unavailable() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    if rustix::process::geteuid().as_raw() != 0 {
        eprintln!("SKIPPED: pjdfstest switches users, which needs root");
        return;
    }
    let Some(runner) = pjdfstest() else {
        eprintln!("SKIPPED: pjdfstest is not installed (cargo install pjdfstest; .ci/run does)");
        return;
    };
    let (summary, failed) = run_pjdfstest(&runner, "allow_other,no_writeback_cache", None);
    eprintln!("pjdfstest, no write-back cache: {summary}");
    assert!(failed.is_empty(), "failed: {failed:?}");
    // With the write-back cache the kernel keeps regular files' modification and change times
    // at its clock's tick (4 ms at HZ=250): a change 1 ms after another may leave them as
    // they were. With naps longer than a tick (up to HZ=100) every case passes.
    let (summary, failed) = run_pjdfstest(&runner, "allow_other", Some("0.011"));
    eprintln!("pjdfstest, write-back cache, 11 ms naps: {summary}");
    assert!(failed.is_empty(), "failed: {failed:?}");
    // The runs above are served through the io_uring queues where the kernel has them (the
    // test runs as root, which turns them on); this one through /dev/fuse.
    let (summary, failed) = run_pjdfstest(&runner, "allow_other,no_io_uring", Some("0.011"));
    eprintln!("pjdfstest, write-back cache, 11 ms naps, /dev/fuse: {summary}");
    assert!(failed.is_empty(), "failed: {failed:?}");
    // The kernel checks no permission: the file system decides every call it is asked about.
    let (summary, failed) =
        run_pjdfstest(&runner, "allow_other,no_default_permissions", Some("0.011"));
    eprintln!("pjdfstest, without default_permissions: {summary}");
    assert!(failed.is_empty(), "failed: {failed:?}");
}

/// Runs the Python script `tests/NAME` on a directory of the host's file system and on a
/// fresh mount (`-o OPTIONS` if given), both searchable by other users, with `args` after the
/// directory; returns what it printed on each, host first. `None` (the test skipped, saying
/// why) without FUSE or Python.
fn on_host_and_mount(name: &str, options: Option<&str>, args: &[&str]) -> Option<(String, String)> {
    if let Some(why) = fuse_unavailable() {
        eprintln!("SKIPPED: {why}");
        return None;
    }
    if Command::new("python3").arg("-V").output().is_err() {
        eprintln!("SKIPPED: python3 is not installed");
        return None;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(name);
    let run = |dir: &Path| {
        let out = Command::new("python3")
            .arg(&script)
            .arg(dir)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{name} in {}: {out:?}", dir.display());
        String::from_utf8(out.stdout).unwrap()
    };
    let searchable = |dir: &Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    let host = tempfile::tempdir().unwrap();
    searchable(host.path());
    let on_host = run(host.path());
    let mut s = Scene::new();
    searchable(s.tmp.path());
    match options {
        Some(o) => s.mount_foreground_with(&["-o", o]),
        None => s.mount_foreground(),
    }
    let on_mount = run(&s.mp());
    s.unmount();
    assert!(s.daemon.take().unwrap().wait().unwrap().success());
    Some((on_host, on_mount))
}

#[test]
fn locks_contend_on_the_mount_as_on_the_host_file_system() {
    // locks.py: two processes contend for POSIX record locks (F_SETLK, F_SETLKW, F_GETLK),
    // open-file-description locks and flock(2), the flock(1) command among them; it prints
    // what each call returned. The mount must answer every call as the host's file system.
    let Some((want, got)) = on_host_and_mount("locks.py", None, &[]) else {
        return;
    };
    // The script's own checks: contention was seen, and a waiter blocked until released.
    for line in [
        "child posix write 50..60: EAGAIN",
        "child flock ex: EAGAIN",
        "ofd write 550..560 (second open): EAGAIN",
        "child waits for the posix lock: yes",
        "child waits for the flock lock: yes",
        "flock command while held: exit 1",
        "flock command after all closed: exit 0",
    ] {
        assert!(want.lines().any(|l| l == line), "{line:?} not in:\n{want}");
    }
    assert_eq!(got, want, "the mount (left) and the host (right) differ");
}

#[test]
fn writes_truncates_and_chown_take_privileges_away_as_on_the_host_file_system() {
    if rustix::process::geteuid().as_raw() != 0 {
        eprintln!("SKIPPED: the writers switch users, which needs root");
        return;
    }
    // privileges.py: set-user-id, set-group-id and security.capability after writes and
    // truncates by root and by other users, and after chown. The adapter asks the kernel for
    // HANDLE_KILLPRIV_V2, so on the mount the file system drops them, not the kernel.
    let Some((want, got)) = on_host_and_mount("privileges.py", Some("allow_other"), &[]) else {
        return;
    };
    assert!(want.contains("write by other outside of 6767 group 1000: exit 0, 0767 caps gone"));
    assert_eq!(got, want, "the mount (left) and the host (right) differ");
}

/// Permission decisions as Linux makes them on ext4, for other users, call by call:
/// permissions.py builds random trees (owners, groups, modes with set-id and sticky bits) and
/// makes random calls from forked children with other credentials (uids, gids and
/// supplementary groups, some with no name), printing each call's errno and what a change
/// left. Run on mounts with the kernel's `default_permissions` (the default) and without it
/// (where the file system decides alone), through the io_uring queues and through
/// `/dev/fuse`, with and without the write-back cache. `STITCHDB_PERM_ROUNDS` (default 40)
/// sets the rounds (random trees) per mount.
///
/// Without `default_permissions` the kernel still makes its own checks, some of them before
/// the file system is asked (docs/kvfs.md, "Permissions"): it opens FIFOs without asking,
/// so those opens are left out there; it refuses to unlink a directory (`EISDIR`), to rmdir
/// or rename onto a non-directory (`ENOTDIR`), and a rename of a missing name (`ENOENT`,
/// before it walks the new name's directory), before the file system can refuse the
/// caller's permission (`EACCES`, `EPERM`, as ext4 answers first): those calls fail alike,
/// with the kernel's errno. And with the write-back cache the kernel writes back times it
/// keeps in requests the file system cannot tell from a `utimensat` that leaves the access
/// time alone and sets the modification time to what it is: such a call by another user
/// than the owner changes the change time where ext4 refuses it (`EPERM`). Both are counted.
#[test]
fn other_users_get_the_permission_decisions_of_the_host_file_system() {
    if rustix::process::geteuid().as_raw() != 0 {
        eprintln!("SKIPPED: the callers switch users, which needs root");
        return;
    }
    let rounds = std::env::var("STITCHDB_PERM_ROUNDS").unwrap_or_else(|_| "40".into());
    for (seed, options) in [
        ("1", "allow_other"),
        ("2", "allow_other,no_default_permissions"),
        ("3", "allow_other,no_io_uring,no_writeback_cache"),
        ("4", "allow_other,no_default_permissions,no_io_uring"),
    ] {
        let kernel_decides = !options.contains("no_default_permissions");
        let mut args = vec![seed, rounds.as_str()];
        if !kernel_decides {
            args.push("--no-special-opens");
        }
        let Some((want, got)) = on_host_and_mount("permissions.py", Some(options), &args) else {
            return;
        };
        let calls = want.lines().count();
        let failed = want.lines().filter(|l| l.contains("-> E")).count();
        assert!(
            calls > 400 && failed > 100 && calls - failed > 100,
            "too few calls made, failed or succeeded:\n{want}"
        );
        let (mut kernel_first, mut times_unchanged) = (0, 0);
        for (n, (w, g)) in want.lines().zip(got.lines()).enumerate() {
            let (call, host) = w.split_once(" -> ").unwrap_or((w, ""));
            let mount = g.strip_prefix(call).and_then(|r| r.strip_prefix(" -> "));
            let name = call.split(' ').nth(1).unwrap_or_default();
            let refused = matches!(host.trim(), "EACCES" | "EPERM");
            match (kernel_decides, name, mount.map(str::trim)) {
                (false, "unlink" | "rmdir" | "rename", Some("EISDIR" | "ENOTDIR")) if refused => {
                    kernel_first += 1;
                    continue;
                }
                (false, "rename", Some("ENOENT")) if refused => {
                    kernel_first += 1;
                    continue;
                }
                (false, "utimensat", Some(m))
                    if host.trim() == "EPERM"
                        && m.starts_with("0 ")
                        && call.contains("(1073741822,") =>
                {
                    times_unchanged += 1;
                    continue;
                }
                _ => {}
            }
            assert_eq!(
                g,
                w,
                "-o {options}, seed {seed}: call {n} differs (mount left, host right); before it:\n{}",
                want.lines().skip(n.saturating_sub(8)).take(8.min(n)).collect::<Vec<_>>().join("\n")
            );
        }
        assert_eq!(
            got.lines().count(),
            calls,
            "-o {options}: the runs made different calls"
        );
        eprintln!(
            "-o {options}: {calls} calls, {failed} failed, all as on the host \
             ({kernel_first} refused with the kernel's errno first, {times_unchanged} \
             modification times set to themselves)"
        );
    }
}

/// A tmpfs of a given size, mounted for a test and unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: PathBuf, bytes: u64) -> Tmpfs {
        std::fs::create_dir(&dir).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(&dir)
            .status()
            .unwrap();
        assert!(status.success(), "mounting a tmpfs failed");
        Tmpfs(dir)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_mount_that_filled_its_disk_deletes_files_writes_again_and_remounts() {
    if let Some(why) = fuse_unavailable() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    if rustix::process::geteuid().as_raw() != 0 {
        eprintln!("SKIPPED: mounting a tmpfs needs root");
        return;
    }
    // The store fills a real device: a 400 MiB tmpfs (50 zones, 11 of them held back).
    let tmp = tempfile::tempdir().unwrap();
    let disk = Tmpfs::mount(tmp.path().join("disk"), 400 << 20);
    let store = disk.0.join("fs.store");
    let mut s = Scene::with_store(tmp, store);
    s.mount_foreground();
    let chunk: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    let mp = s.mp();
    let file = |i: u32| mp.join(format!("f{i:03}"));
    let write = |i: u32| -> std::io::Result<()> {
        let mut f = std::fs::File::create(file(i))?;
        f.write_all(&chunk)?;
        f.sync_all()
    };
    let mut synced = 0u32;
    let err = loop {
        match write(synced) {
            Ok(()) => synced += 1,
            Err(e) => break e,
        }
        assert!(synced < 1000, "the tmpfs never filled");
    };
    assert_eq!(
        err.raw_os_error(),
        Some(rustix::io::Errno::NOSPC.raw_os_error()),
        "{err}"
    );
    assert!(synced > 20, "only {synced} files fitted");
    // The mount stays writable: every fsynced file reads back, deleting works, and the
    // next write that finds no room merges the deleted files away and goes in.
    for i in 0..synced {
        assert!(std::fs::read(file(i)).unwrap() == chunk, "f{i:03}");
    }
    let deleted = synced / 2;
    for i in 0..deleted {
        std::fs::remove_file(file(i)).unwrap();
    }
    let mut rewritten = 0;
    while rewritten < deleted && write(rewritten).is_ok() {
        rewritten += 1;
    }
    assert!(
        rewritten >= deleted / 2,
        "after deleting {deleted} of {synced} files only {rewritten} fitted again"
    );
    s.unmount();
    // It exits cleanly: no write turned the store read-only.
    assert!(s.daemon.take().unwrap().wait().unwrap().success());
    // The tmpfs is still full: the store mounts (taking the zones it held back) and holds
    // every fsynced file.
    s.check();
    s.mount_foreground();
    for i in 0..synced {
        match std::fs::read(file(i)) {
            // The write that failed may have left its file, made but short.
            Ok(data) if i == rewritten && i < deleted => assert!(data.len() <= chunk.len()),
            Ok(data) => assert!(
                (i < rewritten || i >= deleted) && data == chunk,
                "f{i:03}: {} bytes",
                data.len()
            ),
            Err(e) => assert!(
                i >= rewritten && i < deleted && e.kind() == std::io::ErrorKind::NotFound,
                "f{i:03}: {e}"
            ),
        }
    }
    s.unmount();
    assert!(s.daemon.take().unwrap().wait().unwrap().success());
    eprintln!("{synced} files of 1 MiB filled the tmpfs; after deleting {deleted}, {rewritten} fitted again");
}
