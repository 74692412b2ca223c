//! Mounting a store: the mount point's checks, the FUSE session, and a clean unmount on
//! SIGTERM, SIGINT or SIGHUP that leaves everything durable.

use crate::bdi::BdiSettings;
use crate::mountinfo::is_mount_point;
use crate::options::MountConfig;
use crate::poll::Poller;
use crate::session::KvFuse;
use std::os::fd::AsFd;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use stitchdb::{Db, IoErrorKind, Options};
use stitchdb_fs::FileTree;
use stitchdb_fs::Fs;

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
    let defaults = Options::default();
    let opts = Options {
        lock_wait_ms: LOCK_WAIT_MS,
        txn_memory: c.txn_memory.unwrap_or(defaults.txn_memory),
        ..defaults
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
    let notifier = adapter.notifier();
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
    let _ = notifier.set(session.notifier());
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
    let mut session = open_session(c, KvFuse::new(fs.clone(), c.serve_options()))?;
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
        "unmounted {}: {} device syncs; merges stitched {} bytes and copied {} bytes; memtable flushes wrote {} bytes; writers waited {} times for a memtable backlog ({:.3} s) and slept {} times while merges were behind ({:.3} s)",
        c.mountpoint.display(),
        st.cache.syncs,
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
