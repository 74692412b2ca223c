//! A mount's `-o` options ([`MountConfig`]), and what they make of the file system and of
//! how the kernel is served ([`ServeOptions`]).

use crate::bdi::BdiSettings;
use crate::poll::DEFAULT_POLL_WINDOW;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use stitchdb::Durability;
use stitchdb_fs::{AtimePolicy, FsOptions, Timespec};

/// How the kernel is served, whichever transport carries its requests.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// How long the kernel may cache names and attributes (0 without `default_permissions`:
    /// then it asks for every name of every path again, so that the file system sees, and
    /// decides, each walk).
    pub ttl: Duration,
    /// The kernel's write-back cache: writes are gathered in its page cache and sent in large
    /// requests (on close, fsync, or memory pressure).
    pub writeback_cache: bool,
    /// Where the store lives, for `statfs`'s free space.
    pub store_path: PathBuf,
    /// `sync`: a request that may change something is answered once the store is durable
    /// (after a sync of the syncer's, shared by the requests waiting: see
    /// `Served::needs_sync`); the file system commits without waiting.
    pub sync: bool,
}

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
    /// `default_permissions` (the default) or `no_default_permissions`: whether the kernel
    /// checks permissions itself, from the attributes it caches, before it sends a request.
    /// The file system checks every request it gets either way. Without the kernel's checks
    /// nothing is cached ([`ServeOptions::ttl`] is 0), so that every name of every path is
    /// looked up, and its directory's search permission checked, by the file system; but the
    /// kernel opens FIFOs and device nodes without asking it, so their permission bits then
    /// go unchecked (docs/kvfs.md, "Permissions").
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
    /// `txn_memory=MIB`: what a transaction's private writes may take in memory before they
    /// spill to private runs of the store (`Options::txn_memory`; `None`: its default).
    pub txn_memory: Option<usize>,
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
            default_permissions: true,
            writeback_cache: true,
            flags: Vec::new(),
            poll_window: DEFAULT_POLL_WINDOW,
            txn_memory: None,
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
                Some(("txn_memory", v)) => {
                    let mib = v
                        .parse::<usize>()
                        .ok()
                        .filter(|m| (1..=1 << 20).contains(m));
                    c.txn_memory = Some(
                        mib.ok_or_else(|| {
                            format!("mount option {o}: {v:?} is not a number of MiB")
                        })? << 20,
                    );
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
                    "no_default_permissions" => c.default_permissions = false,
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
            // With `sync` the transports answer each change after a store sync
            // (`ServeOptions::sync`), which concurrent requests share: the commit itself
            // does not wait for the device.
            durability: if self.sync {
                Durability::Async
            } else {
                Durability::Ordered
            },
            read_only: self.read_only,
            // With the write-back cache the kernel stamps regular files' modification and
            // change times itself, from its coarse clock (the last timer tick: up to 4 ms
            // behind here). A new file stamped from the exact clock then had its first write
            // dated before its creation, and before files made just after it: a file written
            // after another was made came out older, which misleads make. Writes then leave
            // those times to the kernel (see `FsOptions::file_clock`).
            file_clock: self.serve_options().writeback_cache.then(coarse_clock),
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

    /// How a store mounted alone is opened for this mount.
    pub fn open_options(&self) -> stitchdb_host::OpenOptions {
        stitchdb_host::OpenOptions {
            read_only: self.read_only,
            txn_memory: self.txn_memory,
            create: false,
        }
    }

    /// How the kernel is served for this mount.
    pub fn serve_options(&self) -> ServeOptions {
        ServeOptions {
            ttl: if self.default_permissions {
                self.ttl
            } else {
                Duration::ZERO
            },
            writeback_cache: self.writeback_cache && !self.read_only,
            store_path: self.store.clone(),
            sync: self.sync,
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
    pub(crate) fn session_acl(&self) -> fuser::SessionACL {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(options: &[&str]) -> Result<MountConfig, String> {
        let lists: Vec<String> = options.iter().map(|o| o.to_string()).collect();
        MountConfig::parse("s.store".into(), "mnt".into(), &lists)
    }

    #[test]
    fn poll_window_defaults_and_is_set_in_microseconds() {
        assert_eq!(parse(&[]).unwrap().poll_window, DEFAULT_POLL_WINDOW);
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

    #[test]
    fn the_kernel_checks_permissions_too_unless_told_not_to_and_then_caches_nothing() {
        let default = parse(&[]).unwrap();
        assert!(default.default_permissions);
        assert_eq!(default.serve_options().ttl, Duration::from_secs(1));
        let off = parse(&["default_permissions", "no_default_permissions"]).unwrap();
        assert!(!off.default_permissions);
        assert_eq!(off.serve_options().ttl, Duration::ZERO);
        let on = parse(&["no_default_permissions,default_permissions"]).unwrap();
        assert_eq!(on.serve_options().ttl, Duration::from_secs(1));
    }
}
