//! The subcommands, one module each (`dump` holds what `scan` and `export` share).

mod bench;
mod demo;
mod dump;
mod export;
mod import;
mod init;
mod inspect;
mod kv;
mod maintain;
mod mount;
mod pg;
mod repair;
mod scan;
mod serve;
mod snapshot;
mod tables;
mod txn;

use crate::error::CliResult;
use crate::store::StoreArg;
use clap::Subcommand;

#[derive(Subcommand)]
pub enum Command {
    /// Create a new store (an error if STORE exists)
    Init(init::InitArgs),
    /// Set KEY to VALUE
    Put(kv::PutArgs),
    /// Print KEY's value and a newline (exit status 1 if KEY is absent)
    #[command(after_help = crate::error::exit_status_help())]
    Get(kv::GetArgs),
    /// Delete KEY (nothing happens if it is absent)
    #[command(visible_alias = "delete")]
    Del(kv::KeyArgs),
    /// Print key<TAB>value lines (TSV, see `stitchdb help`) in key order
    // The help text shows `<TAB>` as written; rustdoc would take it for an HTML tag.
    #[allow(rustdoc::invalid_html_tags)]
    Scan(scan::ScanArgs),
    /// Load key/value lines from FILE, committed in batches
    #[command(after_help = crate::format::FORMATS_HELP)]
    Import(import::ImportArgs),
    /// Write all pairs of a table, in key order, to FILE or stdout
    #[command(after_help = crate::format::FORMATS_HELP)]
    Export(export::ExportArgs),
    /// Create a table
    CreateTable(tables::CreateTableArgs),
    /// List the tables
    Tables(StoreArg),
    /// List the column tables (cTables): a line a column, with the table holding it and its
    /// layout
    Ctables(StoreArg),
    /// Verify every checksum and structure; list every damaged structure and its place
    /// (exit status 4 on damage)
    Check(StoreArg),
    /// Salvage everything readable of a damaged store into a new one, listing what was lost
    /// (the damaged file is kept as STORE.damaged)
    Repair(StoreArg),
    /// Print statistics: tables, levels, stitched vs copied bytes, zones, cache, commits
    Stats(StoreArg),
    /// Merge every table's runs into one (stitching what the table's threshold allows)
    Compact(StoreArg),
    /// Create, list or drop named snapshots (read them with `--snapshot NAME`)
    #[command(subcommand)]
    Snapshot(snapshot::SnapshotCommand),
    /// Evacuate under-used zones, moving their live data and freeing them
    Defrag(maintain::DefragArgs),
    /// Mount the store's file system on a directory (KVFS over FUSE; a daemon unless -f)
    Mount(mount::MountArgs),
    /// Serve the store over the Redis protocol, and with --mount its file system too, in one
    /// process until SIGTERM, SIGINT, SIGHUP, a client's SHUTDOWN or an unmount
    ///
    /// Prints one line once serving: `ready: redis ADDR:PORT`, and `, mount DIR` with
    /// --mount. When it ends, everything clients and the mount wrote is durable and the store
    /// is closed; a signal, SHUTDOWN or unmount ends it with exit status 0.
    Serve(serve::ServeArgs),
    /// Patchgroups on a mounted file system: create, depend, sync, close, list, and run a
    /// command with a group engaged
    #[command(subcommand)]
    Pg(pg::PgCommand),
    /// Transactions of a mounted file system: run a command, and all it starts, in one
    #[command(subcommand)]
    Txn(txn::TxnCommand),
    /// Run RocksDB db_bench's benchmarks (same flags, same result lines) and the VT-tree
    /// paper's randomappend and seqinsert on a scratch store
    Bench(bench::BenchArgs),
    /// Run the main job on generated data: import 200,000 records, verify, scan, delete,
    /// stats and check (safe to run again on the same store)
    Demo(demo::DemoArgs),
}

impl Command {
    pub fn run(self) -> CliResult {
        match self {
            Command::Init(args) => init::run(args),
            Command::Put(args) => kv::put(args),
            Command::Get(args) => kv::get(args),
            Command::Del(args) => kv::del(args),
            Command::Scan(args) => scan::run(args),
            Command::Import(args) => import::run(args),
            Command::Export(args) => export::run(args),
            Command::CreateTable(args) => tables::create(args),
            Command::Tables(args) => tables::list(args),
            Command::Ctables(args) => tables::list_ctables(args),
            Command::Check(args) => inspect::check(args),
            Command::Repair(args) => repair::run(args),
            Command::Stats(args) => inspect::stats(args),
            Command::Compact(args) => maintain::compact(args),
            Command::Snapshot(cmd) => snapshot::run(cmd),
            Command::Defrag(args) => maintain::defrag(args),
            Command::Mount(args) => mount::run(args),
            Command::Serve(args) => serve::run(args),
            Command::Pg(cmd) => pg::run(cmd),
            Command::Txn(cmd) => txn::run(cmd),
            Command::Bench(args) => bench::run(args),
            Command::Demo(args) => demo::run(args),
        }
    }
}
