//! `txn run`: a command, and everything it starts, inside one transaction of a mounted file
//! system (docs/kvfs.md, "Transactions").
//!
//! The mount's daemon keeps the transaction; its tree is the directory
//! `MOUNTPOINT/.stitch/txns/ID`, the whole file system as the transaction sees it, under
//! inode numbers of its own (so the kernel's caches keep it apart from the mainline). This
//! command puts that tree over the mount point in a private mount namespace, which the
//! command and its children inherit (KVFS entered its view with `chroot`; a bind mount keeps
//! every other path as it is). It waits for the command and for every process the command
//! started (it is their subreaper), writes back their buffered writes (`syncfs`), and
//! commits if the command exited 0, durably before returning; else it aborts. The daemon
//! aborts the transaction by itself if this command dies: the transaction belongs to its open
//! control file.

use crate::error::{CliError, CliResult, Exit};
use clap::{Args, Subcommand, ValueEnum};
use nix::mount::MsFlags;
use nix::sched::{unshare, CloneFlags};
use nix::sys::wait::{waitpid, WaitStatus};
use std::ffi::OsString;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use stitchdb_pg::{Control, PgError};

#[derive(Subcommand)]
pub enum TxnCommand {
    /// Run COMMAND inside one transaction of the file system mounted at MOUNTPOINT: exit
    /// status 0 commits (durably), anything else aborts; a conflict aborts with status 8
    #[command(after_help = RUN_HELP)]
    Run(RunArgs),
}

const RUN_HELP: &str = "\
The command and all its children see a private view of the whole tree at MOUNTPOINT;
other processes see nothing of it until it commits, and then all of it at once.
Exit status: the command's own if it failed (128+N if killed by signal N; the
transaction is aborted), 0 if it succeeded and the transaction committed, 8 if the
transaction conflicted with a commit made since it began (it is aborted; the message
names a conflicting path), 3 if the transaction could not be begun or committed.";

#[derive(Clone, Copy, ValueEnum)]
enum IsolationArg {
    /// Reads see the tree as it was at the start; a file or directory also changed
    /// outside since then is a conflict
    Snapshot,
    /// As if the command ran alone after every commit before its own: anything it read
    /// that changed outside is a conflict too
    Serializable,
}

#[derive(Args)]
pub struct RunArgs {
    /// How the transaction is isolated from concurrent changes
    #[arg(long, value_enum, default_value = "snapshot")]
    isolation: IsolationArg,
    /// Print what the command changed (paths added, changed, removed; bytes written) to
    /// stderr before committing
    #[arg(long)]
    summary: bool,
    /// Run the command, print the summary, and abort whatever its status
    #[arg(long)]
    dry_run: bool,
    /// Where the file system is mounted (`stitchdb mount`)
    #[arg(value_name = "MOUNTPOINT")]
    mountpoint: PathBuf,
    /// The command and its arguments
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

pub fn run(cmd: TxnCommand) -> CliResult {
    match cmd {
        TxnCommand::Run(args) => run_in_transaction(args),
    }
}

fn run_in_transaction(args: RunArgs) -> CliResult {
    let mount = args.mountpoint.canonicalize().map_err(|e| {
        CliError::with_exit(Exit::Missing, format!("{}: {e}", args.mountpoint.display()))
    })?;
    let control = Control::open(&mount).map_err(control_error)?;
    let isolation = match args.isolation {
        IsolationArg::Snapshot => "snapshot",
        IsolationArg::Serializable => "serializable",
    };
    let id = control
        .request(&format!("txn begin {isolation}"))
        .map_err(control_error)?;
    let view = mount.join(".stitch/txns").join(id.trim());
    // From here on an error aborts: dropping the control file ends the transaction.
    enter_view(&view, &mount)?;
    let status = run_command(&args.command)?;
    // The command's buffered writes go to the transaction's files before it ends.
    let root = std::fs::File::open(&mount)
        .map_err(|e| CliError::new(format!("{}: {e}", mount.display())))?;
    nix::unistd::syncfs(root.as_raw_fd())
        .map_err(|e| CliError::new(format!("writing back the command's files: {e}")))?;
    if args.summary || args.dry_run {
        let summary = control
            .request(&format!("txn summary {}", id.trim()))
            .map_err(control_error)?;
        eprint!("{summary}");
    }
    if status != 0 || args.dry_run {
        control
            .request(&format!("txn abort {}", id.trim()))
            .map_err(control_error)?;
        std::process::exit(status);
    }
    match control.request(&format!("txn commit {}", id.trim())) {
        Ok(_) => Ok(()),
        Err(PgError { errno, message }) if errno == nix::errno::Errno::EBUSY as i32 => Err(
            CliError::with_exit(Exit::Conflict, format!("not committed: {message}")),
        ),
        Err(e) => Err(control_error(e)),
    }
}

fn control_error(e: PgError) -> CliError {
    CliError::new(format!("transaction: {e}"))
}

/// Puts the transaction's tree `view` over `mount` in a mount namespace of this process's
/// own, which the command inherits. Root (or CAP_SYS_ADMIN) has one made; another user gets
/// a user namespace too, mapping only its own ids, as `unshare --user --map-current-user`
/// does (there, files of other owners show as the overflow id).
fn enter_view(view: &Path, mountpoint: &Path) -> CliResult {
    let cwd = std::env::current_dir().ok();
    let privileged = nix::unistd::geteuid().is_root();
    let fail = |what: &str, e: nix::Error| CliError::new(format!("{what}: {e}"));
    if privileged {
        unshare(CloneFlags::CLONE_NEWNS).map_err(|e| fail("a mount namespace", e))?;
    } else {
        let (uid, gid) = (nix::unistd::geteuid(), nix::unistd::getegid());
        unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS)
            .map_err(|e| fail("a user and mount namespace", e))?;
        let write = |file: &str, text: String| {
            std::fs::write(file, text).map_err(|e| CliError::new(format!("{file}: {e}")))
        };
        write("/proc/self/setgroups", "deny".into())?;
        write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
        write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    }
    // Nothing mounted here reaches the other namespaces.
    let none: Option<&str> = None;
    nix::mount::mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)
        .map_err(|e| fail("making this namespace's mounts private", e))?;
    nix::mount::mount(Some(view), mountpoint, none, MsFlags::MS_BIND, none)
        .map_err(|e| fail(&format!("putting {} over the mount", view.display()), e))?;
    // A working directory inside the mount is still the mainline's: enter it again by path.
    if let Some(cwd) = cwd.filter(|c| c.starts_with(mountpoint)) {
        std::env::set_current_dir(&cwd)
            .map_err(|e| CliError::new(format!("{}: {e}", cwd.display())))?;
    }
    Ok(())
}

/// Runs `command`, waits for it and for every process it started, and returns its exit
/// status (128+N if killed by signal N).
fn run_command(command: &[OsString]) -> Result<i32, CliError> {
    // Orphans of the command are re-parented to this process, which waits for them: the
    // transaction ends after the last process that could write in it.
    nix::sys::prctl::set_child_subreaper(true)
        .map_err(|e| CliError::new(format!("becoming the command's subreaper: {e}")))?;
    let (program, args) = command
        .split_first()
        .ok_or_else(|| CliError::with_exit(Exit::Usage, "no command given"))?;
    let child = Command::new(program).args(args).spawn().map_err(|e| {
        CliError::with_exit(
            Exit::Missing,
            format!("{}: {e}", Path::new(program).display()),
        )
    })?;
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let status = match waitpid(pid, None) {
        Ok(WaitStatus::Exited(_, code)) => code,
        Ok(WaitStatus::Signaled(_, signal, _)) => 128 + signal as i32,
        Ok(other) => return Err(CliError::new(format!("the command: {other:?}"))),
        Err(e) => return Err(CliError::new(format!("waiting for the command: {e}"))),
    };
    // The processes it left behind.
    while nix::sys::wait::wait().is_ok() {}
    Ok(status)
}
