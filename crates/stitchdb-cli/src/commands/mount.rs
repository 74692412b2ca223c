//! `mount`: serves the store's file system on a directory (KVFS over FUSE).
//!
//! Without `-f` the command starts itself again in the foreground as a daemon (in its own
//! process group, so the shell's Ctrl-C does not reach it) and returns once that daemon has
//! the mount in place, or with the daemon's error. The daemon tells its parent through its
//! stdout: one line, `ready` or `error: MESSAGE`.

use crate::error::{CliError, CliResult};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use stitchdb_fuse::MountConfig;

/// Set in the daemon's environment: report readiness on stdout.
const READY_ENV: &str = "STITCHDB_MOUNT_NOTIFY";

#[derive(clap::Args)]
pub struct MountArgs {
    /// Path of the store file (its file system is created on the first mount)
    #[arg(value_name = "STORE")]
    store: PathBuf,
    /// The directory to mount on
    #[arg(value_name = "MOUNTPOINT")]
    mountpoint: PathBuf,
    /// Stay in the foreground (unmount with Ctrl-C, SIGTERM, `umount` or `fusermount3 -u`)
    #[arg(short = 'f', long)]
    foreground: bool,
    /// Mount options, comma-separated: ro, rw, allow_other, allow_root, default_permissions,
    /// sync (every operation durable on return), attr_timeout=S, entry_timeout=S,
    /// no_writeback_cache, no_io_uring (serve /dev/fuse even where the kernel offers
    /// per-CPU io_uring queues), txn_memory=MIB (a transaction's writes kept in memory
    /// before they spill to the store; 64 by default), poll_us=N (how long to poll /dev/fuse for the next request
    /// after each one; 0: never), read_ahead_kb=N, max_ratio=PERCENT and strict_limit=0|1 (the mount's
    /// readahead and dirty-page limits; by default those of the disk holding the store),
    /// nodev, nosuid, noexec, dirsync, relatime (the default: a read writes the access time
    /// once after each change, and once a day), noatime, strictatime, nodiratime (others
    /// mount(8) uses are ignored)
    #[arg(short = 'o', value_name = "OPTIONS")]
    options: Vec<String>,
    /// Append the daemon's log (errors and warnings, or what --log asks for) to FILE; without
    /// it a daemon's log is discarded (with -f it goes to stderr)
    #[arg(long, value_name = "FILE", conflicts_with = "foreground")]
    log_file: Option<PathBuf>,
}

pub fn run(args: MountArgs) -> CliResult {
    let config = MountConfig::parse(args.store.clone(), args.mountpoint.clone(), &args.options)
        .map_err(CliError::new)?;
    if args.foreground {
        return foreground(&config);
    }
    daemon(&args)
}

fn foreground(config: &MountConfig) -> CliResult {
    let notify = std::env::var_os(READY_ENV).is_some();
    let served = stitchdb_fuse::serve(config, || {
        if notify {
            let mut out = std::io::stdout();
            let _ = writeln!(out, "ready");
            let _ = out.flush();
        }
    });
    match served {
        Ok(()) => Ok(()),
        Err(message) if notify => {
            let mut out = std::io::stdout();
            let _ = writeln!(out, "error: {message}");
            let _ = out.flush();
            Err(CliError::new(message))
        }
        Err(message) => Err(CliError::new(message)),
    }
}

fn daemon(args: &MountArgs) -> CliResult {
    let exe = std::env::current_exe()
        .map_err(|e| CliError::new(format!("finding this program to start the daemon: {e}")))?;
    // Opened here, so a log that cannot be written is refused before anything is mounted.
    let log: Stdio = match &args.log_file {
        Some(path) => std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| CliError::new(format!("log file {}: {e}", path.display())))?
            .into(),
        None => Stdio::null(),
    };
    let mut cmd = Command::new(exe);
    if let Some(filter) = crate::logging::given_filter() {
        cmd.arg("--log").arg(filter);
    }
    cmd.arg("mount")
        .arg(&args.store)
        .arg(&args.mountpoint)
        .arg("-f")
        .env(READY_ENV, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .process_group(0);
    for o in &args.options {
        cmd.arg("-o").arg(o);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| CliError::new(format!("starting the mount daemon: {e}")))?;
    let Some(stdout) = child.stdout.take() else {
        return Err(CliError::new("the mount daemon has no stdout"));
    };
    let mut line = String::new();
    let _ = BufReader::new(stdout).read_line(&mut line);
    match line.trim_end() {
        "ready" => Ok(()),
        other => {
            let status = child.wait().map_err(|e| CliError::new(e.to_string()))?;
            match other.strip_prefix("error: ") {
                Some(message) => Err(CliError::new(message.to_string())),
                None => Err(CliError::new(format!(
                    "the mount daemon exited ({status}) before the mount was ready"
                ))),
            }
        }
    }
}
