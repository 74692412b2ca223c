//! `stitchdb serve` as a user runs it, the built binary in a child process, spoken to over
//! RESP by hand on 127.0.0.1 (an ephemeral port, which the ready line names): a missing store,
//! `--create`, a second opener refused with the "in use" error, SIGTERM ending it with the
//! store closed; with `--mount`, files written through the mount and keys written over RESP
//! are both there after a SIGTERM and a restart, a client's `SHUTDOWN` or an `umount` ends
//! both surfaces, and `-o ro` makes only the mount read-only. Every path unmounts and kills what it started (a guard).

#![allow(clippy::unwrap_used)]

#[path = "support/mounted.rs"]
mod mounted;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

fn stitchdb(args: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stitchdb"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

/// Whether something is mounted on `mp`, per /proc/self/mountinfo.
fn mounted(mp: &Path) -> bool {
    let canon = mp.canonicalize().unwrap_or_else(|_| mp.to_path_buf());
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.split(' ').nth(4) == canon.to_str())
}

/// A `stitchdb serve` running as a child, its log in `log`; killed, and its mount removed,
/// when dropped.
struct Served {
    child: Option<Child>,
    addr: SocketAddr,
    mp: Option<PathBuf>,
    log: PathBuf,
}

impl Served {
    /// Starts `stitchdb serve STORE --port 0 ARGS` and waits for its ready line.
    fn start(store: &Path, args: &[&str], log: PathBuf) -> Served {
        let mut child = Command::new(env!("CARGO_BIN_EXE_stitchdb"))
            .arg("serve")
            .arg(store)
            .args(["--port", "0"])
            .args(args)
            .env_remove("RUST_LOG")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mp = args
            .iter()
            .position(|a| *a == "--mount")
            .map(|i| PathBuf::from(args[i + 1]));
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let mut served = Served {
            child: Some(child),
            addr: "127.0.0.1:1".parse().unwrap(),
            mp,
            log,
        };
        let Some(rest) = line.trim_end().strip_prefix("ready: redis ") else {
            panic!("no ready line: {line:?}; log: {}", served.logged());
        };
        let (addr, mount) = match rest.split_once(", mount ") {
            Some((addr, mount)) => (addr, Some(mount)),
            None => (rest, None),
        };
        served.addr = addr.parse().unwrap();
        assert_eq!(mount.map(PathBuf::from), served.mp, "{line}");
        served
    }

    fn client(&self) -> Client {
        let s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Client(s)
    }

    fn logged(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends the process `signal` (`-TERM` ...).
    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().unwrap().id();
        let sent = Command::new("kill")
            .arg(signal)
            .arg(pid.to_string())
            .status()
            .unwrap();
        assert!(sent.success());
    }

    /// Waits (30 s at most) for the process to end by itself.
    fn exits(&mut self) -> ExitStatus {
        let child = self.child.as_mut().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                self.child = None;
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "still running: {}",
                self.logged()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for it to exit 0 with nothing logged (the default level shows warnings and
    /// errors: a store left open after the surfaces ended, a failed unmount ...).
    fn exits_cleanly(&mut self) {
        let status = self.exits();
        let log = self.logged();
        assert!(status.success(), "{status}: {log}");
        assert!(log.is_empty(), "{log}");
        if let Some(mp) = &self.mp {
            assert!(!mounted(mp), "{} is still mounted", mp.display());
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(mp) = &self.mp {
            mounted::force_unmount(mp);
        }
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A RESP client, by hand.
struct Client(TcpStream);

impl Client {
    /// Sends `args` as one request and returns the reply's bytes, as text: a line, or a
    /// bulk string's header and body.
    fn cmd(&mut self, args: &[&str]) -> String {
        let mut req = format!("*{}\r\n", args.len());
        for a in args {
            req += &format!("${}\r\n{a}\r\n", a.len());
        }
        self.0.write_all(req.as_bytes()).unwrap();
        let mut reply = self.line();
        if let Some(n) = reply
            .strip_prefix('$')
            .and_then(|n| n.trim().parse::<usize>().ok())
        {
            let mut body = vec![0; n + 2];
            self.0.read_exact(&mut body).unwrap();
            reply += &String::from_utf8(body).unwrap();
        }
        reply
    }

    fn line(&mut self) -> String {
        let mut line = Vec::new();
        let mut byte = [0u8];
        while !line.ends_with(b"\r\n") {
            if self.0.read(&mut byte).unwrap() == 0 {
                break;
            }
            line.push(byte[0]);
        }
        String::from_utf8(line).unwrap()
    }
}

fn set_k(served: &Served, value: &str) {
    assert_eq!(served.client().cmd(&["SET", "k", value]), "+OK\r\n");
}

#[test]
fn serve_answers_resp_refuses_a_second_opener_and_exits_0_on_sigterm() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s.store");
    let log = tmp.path().join("serve.log");
    // No store: the error says how to make one; --create makes it.
    let out = stitchdb(&[
        Path::new("serve"),
        &store,
        Path::new("--port"),
        Path::new("0"),
    ]);
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("stitchdb init"),
        "{out:?}"
    );
    let mut served = Served::start(&store, &["--create"], log);
    assert!(served.addr.ip().is_loopback());
    let mut c = served.client();
    assert_eq!(
        c.cmd(&["SET", "k", "v"]),
        "+OK\r\n",
        "the brief's literal request"
    );
    assert_eq!(c.cmd(&["GET", "k"]), "$1\r\nv\r\n");
    // Held: a second server and a mount are refused, saying why.
    let out = stitchdb(&[
        Path::new("serve"),
        &store,
        Path::new("--port"),
        Path::new("0"),
    ]);
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("in use by another process"));
    let mp = tmp.path().join("mnt");
    std::fs::create_dir(&mp).unwrap();
    let out = stitchdb(&[Path::new("mount"), &store, &mp]);
    mounted::force_unmount(&mp);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("in use by another process"),
        "{out:?}"
    );
    // SIGTERM: exit 0, the store closed (free at once: `check` opens it), the key kept.
    served.signal("-TERM");
    served.exits_cleanly();
    let out = stitchdb(&[Path::new("check"), &store]);
    assert!(out.status.success(), "{out:?}");
    let mut served = Served::start(&store, &[], served.log.clone());
    assert_eq!(served.client().cmd(&["GET", "k"]), "$1\r\nv\r\n");
    served.signal("-INT");
    served.exits_cleanly();
}

#[test]
fn serve_with_a_mount_keeps_files_and_keys_shares_snapshots_and_any_surface_s_end_ends_both() {
    if let Some(why) = mounted::unavailable() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s.store");
    let mp = tmp.path().join("mnt");
    std::fs::create_dir(&mp).unwrap();
    let out = stitchdb(&[Path::new("init"), &store]);
    assert!(out.status.success(), "{out:?}");
    let log = tmp.path().join("serve.log");
    let dir = mp.to_str().unwrap();
    let serve = || Served::start(&store, &["--mount", dir], log.clone());

    // Written through both surfaces, without fsync; SIGTERM; both are there afterwards.
    let mut served = serve();
    assert!(mounted(&mp));
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(mp.join("big"), &data).unwrap();
    set_k(&served, "v1");
    // A snapshot taken over Redis is the mount's too: the file is in its tree (written
    // back first: the kernel may still hold the file's pages).
    std::fs::File::open(mp.join("big"))
        .unwrap()
        .sync_all()
        .unwrap();
    let mut c = served.client();
    assert_eq!(c.cmd(&["SX.SNAPSHOT", "CREATE", "before"]), "+OK\r\n");
    let snap = mp.join(".stitch/snapshots/before");
    assert_eq!(std::fs::read(snap.join("big")).unwrap(), data);
    std::fs::write(mp.join("big"), b"changed").unwrap();
    assert_eq!(std::fs::read(snap.join("big")).unwrap(), data);
    assert_eq!(c.cmd(&["SX.SNAPSHOT", "DROP", "before"]), "+OK\r\n");
    // The kernel may keep the name it looked up for the mount's entry timeout (1 s).
    let gone = std::time::Instant::now();
    while snap.exists() && gone.elapsed() < std::time::Duration::from_secs(3) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(!snap.exists(), "a dropped snapshot still shows after 3 s");
    std::fs::write(mp.join("big"), &data).unwrap();
    served.signal("-TERM");
    served.exits_cleanly();
    let out = stitchdb(&[Path::new("check"), &store]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("ok: file system"),
        "{out:?}"
    );

    // A client's SHUTDOWN ends the server, and the host unmounts.
    let mut served = serve();
    assert_eq!(std::fs::read(mp.join("big")).unwrap(), data);
    assert_eq!(served.client().cmd(&["GET", "k"]), "$2\r\nv1\r\n");
    set_k(&served, "v2");
    std::fs::write(mp.join("small"), b"x").unwrap();
    let mut c = served.client();
    c.0.write_all(b"*1\r\n$8\r\nSHUTDOWN\r\n").unwrap();
    served.exits_cleanly();

    // An unmount ends the mount, and the host stops the server.
    let mut served = serve();
    assert_eq!(std::fs::read(mp.join("small")).unwrap(), b"x");
    assert_eq!(served.client().cmd(&["GET", "k"]), "$2\r\nv2\r\n");
    let out = Command::new("fusermount3")
        .arg("-u")
        .arg(&mp)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    served.exits_cleanly();
    assert!(TcpStream::connect(served.addr).is_err(), "still listening");

    // `-o` options pass to the mount: `ro` makes it read-only, while clients still write.
    let mut served = Served::start(&store, &["--mount", dir, "-o", "ro"], log.clone());
    assert_eq!(std::fs::read(mp.join("small")).unwrap(), b"x");
    assert!(std::fs::write(mp.join("refused"), b"x").is_err());
    set_k(&served, "v3");
    served.signal("-TERM");
    served.exits_cleanly();
}
