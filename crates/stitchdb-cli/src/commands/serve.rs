//! `serve`: serves a store over the Redis protocol, and with `--mount` its file system too,
//! in this one process over one open store (`stitchdb_host`), until a SIGTERM, SIGINT or
//! SIGHUP, a client's `SHUTDOWN`, or an `umount` of the mount ends it.

use crate::error::{CliError, CliResult};
use std::path::PathBuf;
use stitchdb::Durability;
use stitchdb_fuse::{Mount, MountConfig};
use stitchdb_host::{Host, OpenOptions, Surface};
use stitchdb_redis::{Config, Server};

#[derive(clap::Args)]
pub struct ServeArgs {
    /// Path of the store file or block device
    #[arg(value_name = "STORE")]
    store: PathBuf,
    /// The address to listen on [default: 127.0.0.1]
    #[arg(long, value_name = "ADDR")]
    bind: Option<String>,
    /// The port to listen on (0: any free one; the ready line says which) [default: 6379]
    #[arg(long)]
    port: Option<u16>,
    /// The password clients must give with AUTH (none by default)
    #[arg(long, value_name = "PASS")]
    requirepass: Option<String>,
    /// Clients served at once [default: 10000]
    #[arg(long, value_name = "N")]
    maxclients: Option<usize>,
    /// When a client's write is durable, until it says otherwise with SX.DURABILITY: `sync`
    /// (before its reply is sent), `written` (a crash of this process loses nothing, a power
    /// loss may lose the newest writes), `ordered`, `async` (see docs/redis.md)
    #[arg(long, value_name = "LEVEL", default_value = "sync", value_parser = parse_durability)]
    durability: Durability,
    /// Also mount the store's file system on DIR (KVFS over FUSE), in this process over the
    /// same store: a snapshot taken over Redis shows in DIR/.stitch/snapshots/ at once
    #[arg(long, value_name = "DIR")]
    mount: Option<PathBuf>,
    /// With --mount: `stitchdb mount`'s options (see `stitchdb mount --help`); `ro` makes
    /// the mount read-only, while Redis clients still write
    #[arg(short = 'o', value_name = "OPTIONS", requires = "mount")]
    options: Vec<String>,
    /// Create the store if there is none at STORE
    #[arg(long)]
    create: bool,
}

pub fn run(args: ServeArgs) -> CliResult {
    let mount = match &args.mount {
        Some(dir) => {
            let config = MountConfig::parse(args.store.clone(), dir.clone(), &args.options)
                .map_err(CliError::usage)?;
            // Before opening the store: a busy mount point is most likely mounted by the
            // process holding the store, which opening would wait for and then name instead.
            stitchdb_fuse::check_mountpoint(dir).map_err(CliError::new)?;
            Some(config)
        }
        None => None,
    };
    let how = OpenOptions {
        txn_memory: mount.as_ref().and_then(|c| c.txn_memory),
        create: args.create,
        ..OpenOptions::default()
    };
    let mut host = Host::new(stitchdb_host::open(&args.store, &how)?);
    host.watch_signals().map_err(CliError::new)?;
    let defaults = Config::default();
    let config = Config {
        bind: args.bind.unwrap_or(defaults.bind.clone()),
        port: args.port.unwrap_or(defaults.port),
        requirepass: args.requirepass,
        maxclients: args.maxclients.unwrap_or(defaults.maxclients),
        durability: args.durability,
        ..defaults
    };
    let server = Server::start(host.db().clone(), config).map_err(CliError::new)?;
    let addr = server.local_addr();
    let stopper = server.stopper();
    let redis = Surface::new(
        format!("redis {addr}"),
        move || stopper.stop(),
        || server.wait(),
    );
    host.add(redis).map_err(CliError::new)?;
    let mut ready = format!("ready: redis {addr}");
    if let Some(config) = &mount {
        let mounted = Mount::start(host.db().clone(), config).map_err(CliError::new)?;
        host.add(mounted.into_surface()).map_err(CliError::new)?;
        ready += &format!(", mount {}", config.mountpoint.display());
    }
    // A server needs no stdout: one closed does not stop it.
    let _ = crate::output::print(format_args!("{ready}\n"));
    host.run().map_err(CliError::new)
}

fn parse_durability(s: &str) -> Result<Durability, String> {
    stitchdb_redis::config::parse_durability(s)
        .ok_or_else(|| format!("{s:?}: expected sync, written, ordered or async"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Args;

    #[test]
    fn the_help_names_the_server_s_defaults() {
        let cmd = ServeArgs::augment_args(clap::Command::new("serve"));
        let help = |id: &str| {
            let arg = cmd.get_arguments().find(|a| a.get_id() == id).unwrap();
            arg.get_help().unwrap().to_string()
        };
        let d = Config::default();
        assert!(help("bind").ends_with(&format!("[default: {}]", d.bind)));
        assert!(help("port").ends_with(&format!("[default: {}]", d.port)));
        assert!(help("maxclients").ends_with(&format!("[default: {}]", d.maxclients)));
        assert!(help("requirepass").contains("none by default") && d.requirepass.is_none());
    }
}
