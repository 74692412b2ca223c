//! Mounting a store: the mount point's checks, the FUSE session, a [`Mount`] served over a
//! store shared with other surfaces, and [`serve`], which hosts a mount alone (unmounted by
//! a SIGTERM, SIGINT or SIGHUP, everything durable when it returns).

use crate::bdi::BdiSettings;
use crate::mountinfo::is_mount_point;
use crate::options::MountConfig;
use crate::poll::Poller;
use crate::session::KvFuse;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use stitchdb::Db;
use stitchdb_fs::FileTree;
use stitchdb_fs::Fs;
use stitchdb_host::{Host, Surface};

/// Checks the mount point: it must exist, be a directory, and not be mounted on already.
pub fn check_mountpoint(mp: &Path) -> Result<(), String> {
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

/// A store's file system mounted and served on a thread of its own, over a store it may
/// share with other surfaces.
pub struct Mount {
    mountpoint: PathBuf,
    fs: Arc<Fs>,
    /// Serves the session until the connection ends; then unmounts if the mount is still
    /// there with nobody to answer it.
    serving: JoinHandle<std::io::Result<()>>,
    /// Set once serving has ended, so that a late stop does not unmount the path again
    /// (which would fail, or take away a file system mounted there since).
    ended: Arc<AtomicBool>,
}

impl Mount {
    /// Mounts the file system of `db` as `c` says (`c.store` names the store for messages,
    /// the disk's settings and `statfs`; the store's own open options in `c` are the
    /// opener's business) and serves it until unmounted.
    pub fn start(db: Arc<Db>, c: &MountConfig) -> Result<Mount, String> {
        check_mountpoint(&c.mountpoint)?;
        let fs = Fs::mount(db, c.fs_options())
            .map_err(|e| format!("cannot mount the file system of {}: {e}", c.store.display()))?;
        let fs = Arc::new(fs);
        let mut session = open_session(c, KvFuse::new(fs.clone(), c.serve_options()))?;
        let ended = Arc::new(AtomicBool::new(false));
        let (mp, done) = (c.mountpoint.clone(), ended.clone());
        let serving = std::thread::Builder::new()
            .name("stitchdb-fuse".into())
            .spawn(move || {
                let served = session.run();
                done.store(true, Ordering::Release);
                // Serving ends when the connection does, unless reading the device failed:
                // then the mount is still there, with nobody left to answer it.
                if crate::sysmount::connected(session.as_fd()) {
                    if let Err(e) = unmount(&mp) {
                        tracing::error!("{e}");
                    }
                }
                served
            });
        let serving = match serving {
            Ok(t) => t,
            Err(e) => {
                // The session was moved into the closure, dropped with it: the mount is left
                // with nobody to answer it.
                let _ = unmount(&c.mountpoint);
                return Err(format!("starting the mount's thread: {e}"));
            }
        };
        Ok(Mount {
            mountpoint: c.mountpoint.clone(),
            fs,
            serving,
            ended,
        })
    }

    /// Asks the mount to end: unmounts it (lazily if it is busy), unless it has ended.
    pub fn stopper(&self) -> impl Fn() + Send + Sync + 'static {
        let (mp, ended) = (self.mountpoint.clone(), self.ended.clone());
        move || {
            if !ended.load(Ordering::Acquire) {
                if let Err(e) = unmount(&mp) {
                    tracing::error!("{e}");
                }
            }
        }
    }

    /// Waits until the mount has ended (an `umount`, or a [`stopper`](Self::stopper)) and
    /// makes everything it wrote durable; the store is closed too if nothing else holds it.
    pub fn wait(self) -> Result<(), String> {
        let served = self
            .serving
            .join()
            .map_err(|_| "the mount's thread panicked".to_string())?;
        served.map_err(|e| format!("serving the mount: {e}"))?;
        let st = self.fs.db().stats();
        tracing::info!(
            "unmounted {}: {} device syncs; merges stitched {} bytes and copied {} bytes; memtable flushes wrote {} bytes; writers waited {} times for a memtable backlog ({:.3} s) and slept {} times while merges were behind ({:.3} s)",
            self.mountpoint.display(),
            st.cache.syncs,
            st.merge_stitched_bytes,
            st.merge_copied_bytes,
            st.flushed_bytes,
            st.stalls.backlog_waits,
            st.stalls.backlog.as_secs_f64(),
            st.stalls.paced_sleeps,
            st.stalls.paced.as_secs_f64()
        );
        match Arc::try_unwrap(self.fs) {
            Ok(fs) => fs.close().map_err(|e| format!("closing the store: {e}")),
            // Wrote nothing.
            Err(fs) if fs.options().read_only => Ok(()),
            Err(fs) => fs.fsync().map_err(|e| format!("syncing the store: {e}")),
        }
    }

    /// The mount as a surface of a [`Host`].
    pub fn into_surface(self) -> Surface {
        let name = format!("mount {}", self.mountpoint.display());
        let stop = self.stopper();
        Surface::new(name, stop, move || self.wait())
    }
}

/// Mounts and serves until unmounted (by `umount`, `fusermount3 -u`, or a SIGTERM, SIGINT
/// or SIGHUP, which unmount); `on_ready` runs once the mount is in place. Everything is
/// durable when it returns.
pub fn serve(c: &MountConfig, on_ready: impl FnOnce()) -> Result<(), String> {
    // Before opening the store: a busy mount point is most likely mounted by the process
    // holding the store, which opening would wait for and then name instead.
    check_mountpoint(&c.mountpoint)?;
    let db = stitchdb_host::open(&c.store, &c.open_options()).map_err(|e| e.to_string())?;
    let mut host = Host::new(db);
    host.watch_signals()?;
    let mount = Mount::start(host.db().clone(), c)?;
    host.add(mount.into_surface())?;
    on_ready();
    host.run()
}
