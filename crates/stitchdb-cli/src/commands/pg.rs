//! `pg create|depend|sync|close|list|run`: Featherstitch's patchgroups on a mounted file
//! system, through its control file (the `stitchdb-pg` crate).
//!
//! Engagement belongs to the engaging process and ends when it exits, so a bare `pg engage`
//! from this command would be over as soon as it returned: `pg run MOUNTPOINT GROUP --
//! COMMAND...` engages GROUP, runs COMMAND as a child (which inherits the engagement, as
//! children started after an engagement do), waits for it, disengages and exits with its
//! status. Groups made here are detached (a one-shot command owns no group): they stay open
//! until `pg close`.

use crate::error::{CliError, CliResult};
use crate::output;
use clap::{Args, Subcommand};
use std::path::PathBuf;
use stitchdb_pg::{Group, PatchGroups, PgError};

#[derive(Subcommand)]
pub enum PgCommand {
    /// Make a patchgroup (open until `pg close`) and print its id
    Create(MountArg),
    /// Make AFTER's changes reach the disk after BEFORE's (seals BEFORE)
    Depend(DependArgs),
    /// Make GROUP's changes durable
    Sync(GroupArgs),
    /// Close GROUP (its changes still reach the disk in order)
    Close(GroupArgs),
    /// List the open groups: id, owner, uid, state, engaging processes, dependencies
    List(MountArg),
    /// Engage GROUP, run COMMAND (its changes through the mount belong to GROUP, and those
    /// of its children), disengage, and exit with COMMAND's status
    Run(RunArgs),
}

#[derive(Args)]
pub struct MountArg {
    /// The mount point of a `stitchdb mount`
    mountpoint: PathBuf,
}

#[derive(Args)]
pub struct GroupArgs {
    mountpoint: PathBuf,
    group: u64,
}

#[derive(Args)]
pub struct DependArgs {
    mountpoint: PathBuf,
    after: u64,
    before: u64,
}

#[derive(Args)]
pub struct RunArgs {
    mountpoint: PathBuf,
    group: u64,
    /// The command and its arguments
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

fn fail(e: PgError) -> CliError {
    CliError::new(e.to_string())
}

fn open(mountpoint: &PathBuf) -> CliResult<PatchGroups> {
    PatchGroups::open(mountpoint)
        .map_err(|e| fail(e).prefix(format!("{}: not a stitchdb mount", mountpoint.display())))
}

pub fn run(cmd: PgCommand) -> CliResult {
    match cmd {
        PgCommand::Create(a) => {
            let g = open(&a.mountpoint)?.create_detached().map_err(fail)?;
            output::print(format!("{g}\n"))
        }
        PgCommand::Depend(a) => open(&a.mountpoint)?
            .depend(Group(a.after), Group(a.before))
            .map_err(fail),
        PgCommand::Sync(a) => open(&a.mountpoint)?.sync(Group(a.group)).map_err(fail),
        PgCommand::Close(a) => open(&a.mountpoint)?.close(Group(a.group)).map_err(fail),
        PgCommand::List(a) => output::print(PatchGroups::list(&a.mountpoint).map_err(fail)?),
        PgCommand::Run(a) => {
            let pg = open(&a.mountpoint)?;
            let g = Group(a.group);
            pg.engage(g).map_err(fail)?;
            let status = std::process::Command::new(&a.command[0])
                .args(&a.command[1..])
                .status();
            pg.disengage(g).map_err(fail)?;
            let status =
                status.map_err(|e| CliError::new(format!("running {}: {e}", a.command[0])))?;
            use std::os::unix::process::ExitStatusExt;
            // A child killed by a signal exits as a shell reports it: 128 + the signal.
            let code = status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
            std::process::exit(code)
        }
    }
}
