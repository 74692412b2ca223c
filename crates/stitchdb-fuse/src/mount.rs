//! Mounting a store: the mount point's checks, `-o` options, the FUSE session, and a clean
//! unmount on SIGTERM, SIGINT or SIGHUP that leaves everything durable.

use crate::adapter::{AdapterOptions, KvFuse};
use crate::bdi::BdiSettings;
use crate::poll::Poller;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use stitchdb::{Db, Durability, IoErrorKind, Options};
use stitchdb_fs::{AtimePolicy, Fs, FsOptions, Timespec};

/// What to mount where, and how.
#[derive(Debug, Clone)]
pub struct MountConfig {
    /// The store's path.
    pub store: PathBuf,
    /// The directory to mount on.
    pub mountpoint: PathBuf,
    /// `ro`: nothing is written.
    pub read_only: bool,
    /// `allow_other`: users other than the one mounting may use the mount.
    pub allow_other: bool,
    /// `allow_root`: root may use the mount too.
    pub allow_root: bool,
    /// `sync`: every operation is durable when it returns.
    pub sync: bool,
    /// `attr_timeout=SECONDS` / `entry_timeout=SECONDS` (the smaller is used for both).
    pub ttl: Duration,
    /// `writeback_cache` (the default) or `no_writeback_cache`.
    pub writeback_cache: bool,
    /// `default_permissions`: the kernel checks permissions from the attributes too (the
    /// file system always checks them). Off by default: the kernel then reads a directory's
    /// attributes again after every change in it (a GETATTR per create or unlink).
    pub default_permissions: bool,
    /// Kernel mount flags passed through: `nodev`, `nosuid`, `noexec`, `dirsync` ...
    pub flags: Vec<String>,
    /// `poll_us=N`: how long the session thread (through `/dev/fuse`, see the `poll` module) or
    /// one thread per CPU (through the io_uring queues) polls for the next request after the
    /// last one (0: they always sleep).
    pub poll_window: Duration,
    /// `read_ahead_kb=N`, `max_ratio=N`, `strict_limit=0|1`: the mount's backing device
    /// settings; those not given are taken from the disk holding the store (see the `bdi`
    /// module).
    pub bdi: BdiSettings,
    /// `io_uring` (the default) or `no_io_uring`: serve requests through per-CPU io_uring
    /// queues when the kernel offers them (see `fuse_uring`).
    pub io_uring: bool,
    /// `relatime` (the default), `noatime`, `strictatime`, `nodiratime` ...: which reads
    /// write an access time.
    pub atime: AtimePolicy,
}

impl MountConfig {
    /// A mount of `store` on `mountpoint` with the defaults, changed by `-o` option lists
    /// (each a comma-separated list). Options `mount(8)` handles itself (`defaults`,
    /// `noauto`, `nofail`, `_netdev`, `user`, `x-*`) are accepted and ignored.
    pub fn parse(
        store: PathBuf,
        mountpoint: PathBuf,
        lists: &[String],
    ) -> Result<MountConfig, String> {
        let mut c = MountConfig {
            store,
            mountpoint,
            read_only: false,
            allow_other: false,
            allow_root: false,
            sync: false,
            ttl: Duration::from_secs(1),
            default_permissions: false,
            writeback_cache: true,
            flags: Vec::new(),
            poll_window: crate::DEFAULT_POLL_WINDOW,
            bdi: BdiSettings::default(),
            io_uring: true,
            atime: AtimePolicy::default(),
        };
        let secs = |v: &str, o: &str| -> Result<Duration, String> {
            v.parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s >= 0.0)
                .map(Duration::from_secs_f64)
                .ok_or_else(|| format!("mount option {o}: {v:?} is not a number of seconds"))
        };
        let mut ttl: Option<Duration> = None;
        for o in lists
            .iter()
            .flat_map(|l| l.split(','))
            .filter(|o| !o.is_empty())
        {
            match o.split_once('=') {
                Some(("attr_timeout" | "entry_timeout", v)) => {
                    let t = secs(v, o)?;
                    ttl = Some(ttl.map_or(t, |old| old.min(t)));
                }
                Some(("poll_us", v)) => {
                    let us = v.parse::<u64>().ok().filter(|&us| us <= 1_000_000).ok_or_else(
                        || format!("mount option {o}: {v:?} is not a number of microseconds (at most 1000000)"),
                    )?;
                    c.poll_window = Duration::from_micros(us);
                }
                Some(("read_ahead_kb", v)) => {
                    c.bdi.read_ahead_kb =
                        Some(v.parse().map_err(|_| {
                            format!("mount option {o}: {v:?} is not a number of KiB")
                        })?)
                }
                Some(("max_ratio", v)) => {
                    let pct = v.parse().ok().filter(|&p| (1..=100).contains(&p));
                    c.bdi.max_ratio = Some(pct.ok_or_else(|| {
                        format!("mount option {o}: {v:?} is not a percentage from 1 to 100")
                    })?)
                }
                Some(("strict_limit", v)) => {
                    c.bdi.strict_limit = Some(match v {
                        "0" => 0,
                        "1" => 1,
                        _ => return Err(format!("mount option {o}: {v:?} is not 0 or 1")),
                    })
                }
                Some(("fsname" | "subtype", _)) => {}
                Some(_) if o.starts_with("x-") => {}
                Some(_) => return Err(format!("unknown mount option {o:?}")),
                None => match o {
                    "ro" => c.read_only = true,
                    "rw" => c.read_only = false,
                    "allow_other" => c.allow_other = true,
                    "allow_root" => c.allow_root = true,
                    "default_permissions" => c.default_permissions = true,
                    "sync" => c.sync = true,
                    "async" => c.sync = false,
                    "writeback_cache" => c.writeback_cache = true,
                    "no_writeback_cache" => c.writeback_cache = false,
                    "io_uring" => c.io_uring = true,
                    "no_io_uring" => c.io_uring = false,
                    _ if c.atime.apply_option(o) => {}
                    "dev" | "nodev" | "suid" | "nosuid" | "exec" | "noexec" | "dirsync" => {
                        c.flags.push(o.to_string())
                    }
                    "defaults" | "auto" | "noauto" | "nofail" | "_netdev" | "user" | "users"
                    | "nouser" => {}
                    // `lazytime` lets time stamps wait in memory; every one is written with
                    // the operation that sets it here, which it allows.
                    "lazytime" | "nolazytime" => {}
                    _ if o.starts_with("x-") => {}
                    _ => return Err(format!("unknown mount option {o:?}")),
                },
            }
        }
        if let Some(t) = ttl {
            c.ttl = t;
        }
        Ok(c)
    }

    /// How the file system is opened for this mount.
    pub fn fs_options(&self) -> FsOptions {
        FsOptions {
            durability: if self.sync {
                Durability::Sync
            } else {
                Durability::Ordered
            },
            read_only: self.read_only,
            // With the write-back cache the kernel stamps regular files' modification and
            // change times itself, from its coarse clock (the last timer tick: up to 4 ms
            // behind here). A new file stamped from the exact clock then had its first write
            // dated before its creation, and before files made just after it: a file written
            // after another was made came out older (200 of 200 tries), which misleads make.
            file_clock: self.adapter_options().writeback_cache.then(coarse_clock),
            // The kernel holds inodes until it forgets them (`KvFuse::forget`).
            keep_deleted: true,
            atime: self.atime,
            // A file system made by its first mount belongs to whoever mounted it, so a
            // user's own mount is writable by that user (as `mke2fs -E root_owner`).
            root_owner: (
                rustix::process::getuid().as_raw(),
                rustix::process::getgid().as_raw(),
                0o755,
            ),
            ..FsOptions::default()
        }
    }

    /// How the adapter serves this mount.
    pub fn adapter_options(&self) -> AdapterOptions {
        AdapterOptions {
            ttl: self.ttl,
            writeback_cache: self.writeback_cache && !self.read_only,
            store_path: self.store.clone(),
        }
    }

    /// What the mount table names as the mount's source: the store's absolute path.
    pub(crate) fn source(&self) -> PathBuf {
        self.store
            .canonicalize()
            .unwrap_or_else(|_| self.store.clone())
    }

    /// Who may use the mount, checked by the session (served from a descriptor, it is told):
    /// what `fuser`'s own mount derives from these options.
    fn session_acl(&self) -> fuser::SessionACL {
        if self.allow_root {
            fuser::SessionACL::RootAndOwner
        } else if self.allow_other {
            fuser::SessionACL::All
        } else {
            fuser::SessionACL::Owner
        }
    }
}

/// The kernel's coarse real-time clock (`CLOCK_REALTIME_COARSE`): what it stamps the times
/// it keeps for FUSE files with.
fn coarse_clock() -> stitchdb_fs::Clock {
    Arc::new(|| {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
        Timespec {
            secs: t.tv_sec,
            nanos: t.tv_nsec as u32,
        }
    })
}

/// Whether `path` is a mount point now (per /proc/self/mountinfo).
pub fn is_mount_point(path: &Path) -> bool {
    let Ok(canon) = path.canonicalize() else {
        // A dead FUSE mount cannot even be resolved: look for the path as given.
        return mountinfo_has(path);
    };
    mountinfo_has(&canon)
}

fn mountinfo_has(path: &Path) -> bool {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let want = path.to_string_lossy();
    info.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .any(|mp| unescape_mountinfo(mp) == want)
}

/// Mountinfo escapes space, tab, newline and backslash as octal.
pub(crate) fn unescape_mountinfo(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// Checks the mount point: it must exist, be a directory, and not be mounted on already.
fn check_mountpoint(mp: &Path) -> Result<(), String> {
    let shown = mp.display();
    match std::fs::metadata(mp) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(format!("mount point {shown} is not a directory")),
        // ENOTCONN; ECONNABORTED when the dead daemon served through io_uring queues and the
        // stat came while the kernel tore them down.
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTCONN | libc::ECONNABORTED)) => {
            return Err(format!(
                "mount point {shown} is busy: a file system whose daemon died is still mounted \
                 there (unmount it with `fusermount3 -u {shown}`)"
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("mount point {shown} does not exist"))
        }
        Err(e) => return Err(format!("mount point {shown}: {e}")),
    }
    if is_mount_point(mp) {
        return Err(format!(
            "mount point {shown} is busy: something is already mounted there (unmount it \
             first with `fusermount3 -u {shown}` or `umount {shown}`)"
        ));
    }
    Ok(())
}

/// How long a mount (and every `stitchdb` command) waits for another process to let go of
/// the store: a daemon that was just unmounted may still be closing it.
pub const LOCK_WAIT_MS: u64 = 3000;

/// Opens the store for the mount, with errors that say what to do.
fn open_store(c: &MountConfig) -> Result<Db, String> {
    let shown = c.store.display();
    if !c.store.exists() {
        return Err(format!(
            "no store at {shown} (create one with `stitchdb init {shown}`)"
        ));
    }
    let opts = Options {
        lock_wait_ms: LOCK_WAIT_MS,
        ..Options::default()
    };
    let opened = if c.read_only {
        Db::open_read_only(&c.store, opts)
    } else {
        Db::open(&c.store, opts)
    };
    opened.map_err(|e| match e {
        stitchdb::Error::Io(io) if io.kind == IoErrorKind::Locked => format!(
            "store {shown} is in use by another process (is it mounted already? \
             see `mount | grep {shown}`)"
        ),
        e => format!("cannot open store {shown}: {e}"),
    })
}

/// Unmounts `mp`: normally, or lazily (detached once the last user lets go) if it is busy.
pub fn unmount(mp: &Path) -> Result<(), String> {
    let run = |args: &[&str]| {
        Command::new("fusermount3")
            .args(args)
            .arg(mp)
            .output()
            .map_err(|e| format!("running fusermount3: {e}"))
    };
    let out = run(&["-u"])?;
    if out.status.success() {
        return Ok(());
    }
    let lazy = run(&["-u", "-z"])?;
    if lazy.status.success() {
        return Ok(());
    }
    Err(format!(
        "unmounting {}: {}",
        mp.display(),
        String::from_utf8_lossy(&lazy.stderr).trim()
    ))
}

/// Mounts `adapter` as `c` says and returns the session, not yet serving; its device (or its
/// io_uring queues) polled between requests as `c.poll_window` says.
pub fn open_session(c: &MountConfig, adapter: KvFuse) -> Result<fuser::Session<KvFuse>, String> {
    let poller = adapter.poller();
    let prepared = adapter.offer_queues();
    // Resolved before mounting: once mounted, resolving it would ask this daemon.
    let canonical = c
        .mountpoint
        .canonicalize()
        .map_err(|e| format!("mount point {}: {e}", c.mountpoint.display()))?;
    // Only root may change a backing device's settings: another user's mount keeps the
    // kernel's, or what its options ask for (and is told when that fails).
    let disk = if mounts_itself() {
        BdiSettings::of_disk_holding(&c.store)
    } else {
        BdiSettings::default()
    };
    adapter.set_bdi(
        BdiSettings {
            read_ahead_kb: c.bdi.read_ahead_kb.or(disk.read_ahead_kb),
            max_ratio: c.bdi.max_ratio.or(disk.max_ratio),
            strict_limit: c.bdi.strict_limit.or(disk.strict_limit),
        },
        canonical.clone(),
    );
    // Before mounting: the kernel sends INIT, offering the queues or not, as it mounts.
    let uring = c.io_uring && allow_uring();
    let mounting = |e| format!("mounting on {}: {e}", c.mountpoint.display());
    let device = if mounts_itself() {
        crate::sysmount::mount(c, &canonical)
    } else {
        crate::sysmount::mount_as_user(c, &canonical)
    };
    let session = fuser::Session::from_fd(adapter, device.map_err(mounting)?, c.session_acl());
    let device = session
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| format!("duplicating the FUSE device: {e}"))?;
    if uring {
        let ours = device
            .try_clone()
            .map_err(|e| format!("duplicating the FUSE device: {e}"))?;
        match fuse_uring::Prepared::new(ours, c.poll_window) {
            Ok(p) => *prepared.lock() = Some(p),
            Err(e) => tracing::info!("no io_uring queues ({e}): serving /dev/fuse"),
        }
    }
    if let Some(p) = Poller::start(device, c.poll_window)
        .map_err(|e| format!("starting the FUSE device's poll controller: {e}"))?
    {
        let _ = poller.set(p);
    }
    Ok(session)
}

/// Whether this daemon mounts with the mount system call itself (as root; see the `sysmount`
/// module) rather than through `fusermount3`.
fn mounts_itself() -> bool {
    rustix::process::geteuid().is_root()
}

/// The `fuse` module's switch that lets daemons ask for io_uring queues.
const ENABLE_URING: &str = "/sys/module/fuse/parameters/enable_uring";

/// Turns on the kernel's FUSE over io_uring if it is off and this process may (root): it only
/// lets a daemon ask for the queues in its INIT reply, so other mounts are served as before
/// unless their daemons ask too. Whether the kernel will offer the queues: without them (not
/// root, or a kernel before 6.14) the mount is served through `/dev/fuse`, and no rings or
/// queue threads are made for it.
fn allow_uring() -> bool {
    match std::fs::read_to_string(ENABLE_URING) {
        Ok(v) if v.trim() == "N" => match std::fs::write(ENABLE_URING, "Y") {
            Ok(()) => {
                tracing::info!("{ENABLE_URING} = Y");
                true
            }
            Err(e) => {
                tracing::info!("cannot turn on {ENABLE_URING} ({e}): serving /dev/fuse");
                false
            }
        },
        Ok(_) => true,
        Err(e) => {
            tracing::info!("no FUSE over io_uring in this kernel ({ENABLE_URING}: {e})");
            false
        }
    }
}

/// Mounts and serves until unmounted (by `umount`, `fusermount3 -u`, or a SIGTERM, SIGINT
/// or SIGHUP, which unmount); `on_ready` runs once the mount is in place. Everything is
/// durable when it returns.
pub fn serve(c: &MountConfig, on_ready: impl FnOnce()) -> Result<(), String> {
    check_mountpoint(&c.mountpoint)?;
    let db = open_store(c)?;
    let fs = Fs::mount(db, c.fs_options())
        .map_err(|e| format!("cannot mount the file system of {}: {e}", c.store.display()))?;
    let fs = Arc::new(fs);
    let mut session = open_session(c, KvFuse::new(fs.clone(), c.adapter_options()))?;
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGHUP,
    ])
    .map_err(|e| format!("installing signal handlers: {e}"))?;
    let signal_handle = signals.handle();
    let mp = c.mountpoint.clone();
    let watcher = std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            tracing::info!("signal {sig}: unmounting {}", mp.display());
            if let Err(e) = unmount(&mp) {
                tracing::error!("{e}");
            }
        }
    });
    on_ready();
    let served = session.run();
    // Serving ends when the connection does, unless reading the device failed: then the
    // mount is still there, with nobody left to answer it.
    if crate::sysmount::connected(session.as_fd()) {
        if let Err(e) = unmount(&c.mountpoint) {
            tracing::error!("{e}");
        }
    }
    drop(session);
    signal_handle.close();
    let _ = watcher.join();
    served.map_err(|e| format!("serving the mount: {e}"))?;
    let st = fs.db().stats();
    tracing::info!(
        "unmounted {}: merges stitched {} bytes and copied {} bytes; memtable flushes wrote {} bytes; writers waited {} times for a memtable backlog ({:.3} s) and slept {} times while merges were behind ({:.3} s)",
        c.mountpoint.display(),
        st.merge_stitched_bytes,
        st.merge_copied_bytes,
        st.flushed_bytes,
        st.stalls.backlog_waits,
        st.stalls.backlog.as_secs_f64(),
        st.stalls.paced_sleeps,
        st.stalls.paced.as_secs_f64()
    );
    match Arc::try_unwrap(fs) {
        Ok(fs) => fs.close().map_err(|e| format!("closing the store: {e}")),
        Err(fs) => fs.fsync().map_err(|e| format!("syncing the store: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(options: &[&str]) -> Result<MountConfig, String> {
        let lists: Vec<String> = options.iter().map(|o| o.to_string()).collect();
        MountConfig::parse("s.store".into(), "mnt".into(), &lists)
    }

    #[test]
    fn poll_window_defaults_and_is_set_in_microseconds() {
        assert_eq!(parse(&[]).unwrap().poll_window, crate::DEFAULT_POLL_WINDOW);
        assert_eq!(
            parse(&["ro,poll_us=50"]).unwrap().poll_window,
            Duration::from_micros(50)
        );
        assert_eq!(parse(&["poll_us=0"]).unwrap().poll_window, Duration::ZERO);
        for bad in ["poll_us=", "poll_us=-1", "poll_us=1.5", "poll_us=1000001"] {
            let e = parse(&[bad]).unwrap_err();
            assert!(e.contains("poll_us"), "{bad}: {e}");
        }
    }

    #[test]
    fn backing_device_settings_are_left_to_the_disk_unless_given() {
        assert_eq!(parse(&[]).unwrap().bdi, BdiSettings::default());
        let c = parse(&["read_ahead_kb=1024,max_ratio=40,strict_limit=1"]).unwrap();
        assert_eq!(
            c.bdi,
            BdiSettings {
                read_ahead_kb: Some(1024),
                max_ratio: Some(40),
                strict_limit: Some(1),
            }
        );
        for bad in [
            "read_ahead_kb=x",
            "max_ratio=0",
            "max_ratio=101",
            "max_ratio=-5",
            "strict_limit=2",
        ] {
            let e = parse(&[bad]).unwrap_err();
            assert!(e.contains(bad.split('=').next().unwrap()), "{bad}: {e}");
        }
    }

    #[test]
    fn access_time_options_reach_the_file_system_and_lazytime_is_accepted() {
        use stitchdb_fs::AtimeMode;
        let policy = |o: &[&str]| parse(o).unwrap().fs_options().atime;
        assert_eq!(policy(&[]), AtimePolicy::default());
        assert_eq!(policy(&["noatime"]).mode, AtimeMode::Never);
        let strict = policy(&["strictatime,lazytime", "nodiratime"]);
        assert_eq!((strict.mode, strict.dirs), (AtimeMode::Always, false));
        assert!(parse(&["nolazytime,relatime"]).is_ok());
        assert!(parse(&["noatimes"]).unwrap_err().contains("noatimes"));
    }
}
