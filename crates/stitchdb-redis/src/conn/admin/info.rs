//! `INFO [section ...]`: Redis's sections and fields that monitoring tools read, in Redis's
//! format (`# Section` then `field:value` lines, sections apart by an empty line). Fields
//! that describe something StitchDB does not have (forks, RDB files, replicas) have the value
//! Redis gives when it has none; a few `stitchdb_*` fields say what StitchDB does instead.

use super::Conn;
use crate::keyspace::ctx::{now_ms, Slot};
use crate::keyspace::{Ctx, Table};
use crate::resp::reply::Reply;
use crate::shared::Shared;
use std::fmt::Write;
use std::ops::Bound;
use std::sync::atomic::Ordering;

/// The sections, in the order Redis writes them: title, and whether in the default set.
const SECTIONS: &[(&str, bool)] = &[
    ("Server", true),
    ("Clients", true),
    ("Memory", true),
    ("Persistence", true),
    ("Stats", true),
    ("Replication", true),
    ("CPU", true),
    ("Modules", true),
    ("Commandstats", false),
    ("Errorstats", true),
    ("Latencystats", false),
    ("Cluster", true),
    ("Keyspace", true),
];

/// Runs `INFO [section ...]` (`default`, `all` and `everything` name sets of them; unknown
/// names are ignored, as Redis ignores them).
pub(super) fn run(conn: &Conn<'_>, a: &[Vec<u8>]) -> Reply {
    let mut asked: Vec<String> = a[1..]
        .iter()
        .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase())
        .collect();
    if asked.is_empty() {
        asked.push("default".into());
    }
    let wanted = |name: &str, default: bool| {
        asked
            .iter()
            .any(|s| *s == name || s == "all" || s == "everything" || (s == "default" && default))
    };
    let mut out = String::new();
    for &(title, default) in SECTIONS {
        let name = title.to_ascii_lowercase();
        if !wanted(&name, default) {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let _ = write!(out, "# {title}\r\n");
        for line in lines(conn.shared, &name) {
            out.push_str(&line);
            out.push_str("\r\n");
        }
    }
    Reply::Verbatim(out)
}

type Fields = Vec<(&'static str, String)>;

/// A section's lines.
fn lines(shared: &Shared, section: &str) -> Vec<String> {
    if section == "keyspace" {
        return keyspace(shared);
    }
    fields(shared, section)
        .into_iter()
        .map(|(k, v)| format!("{k}:{v}"))
        .collect()
}

fn fields(shared: &Shared, section: &str) -> Fields {
    match section {
        "server" => server(shared),
        "clients" => clients(shared),
        "memory" => memory(),
        "persistence" => persistence(shared),
        "stats" => stats(shared),
        "replication" => replication(shared),
        "cpu" => cpu(),
        "cluster" => vec![("cluster_enabled", "0".into())],
        _ => vec![],
    }
}

fn server(shared: &Shared) -> Fields {
    let config = shared.config.read();
    let uptime = shared.started.elapsed().as_secs();
    let proc = |f: &str| {
        std::fs::read_to_string(format!("/proc/sys/kernel/{f}"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    vec![
        ("redis_version", crate::REDIS_VERSION.into()),
        ("redis_git_sha1", "00000000".into()),
        ("redis_git_dirty", "0".into()),
        ("redis_build_id", "0".into()),
        ("redis_mode", "standalone".into()),
        (
            "os",
            format!(
                "{} {} {}",
                proc("ostype"),
                proc("osrelease"),
                std::env::consts::ARCH
            ),
        ),
        ("arch_bits", (usize::BITS).to_string()),
        ("multiplexing_api", "thread-per-client".into()),
        ("process_id", std::process::id().to_string()),
        ("process_supervised", "no".into()),
        ("run_id", shared.run_id.clone()),
        ("tcp_port", config.port.to_string()),
        ("server_time_usec", (now_ms() * 1000).to_string()),
        ("uptime_in_seconds", uptime.to_string()),
        ("uptime_in_days", (uptime / 86400).to_string()),
        ("hz", config.hz.to_string()),
        ("configured_hz", config.hz.to_string()),
        (
            "executable",
            std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
        ),
        ("config_file", String::new()),
        ("io_threads_active", "0".into()),
        ("stitchdb_version", env!("CARGO_PKG_VERSION").into()),
    ]
}

fn clients(shared: &Shared) -> Fields {
    let (mut connected, mut watching, mut watched) = (0, 0, 0);
    for c in shared.clients.lock().values() {
        let n = c.info.lock().watching;
        connected += 1;
        watching += usize::from(n > 0);
        watched += n;
    }
    vec![
        ("connected_clients", connected.to_string()),
        ("cluster_connections", "0".into()),
        ("maxclients", shared.config.read().maxclients.to_string()),
        ("client_recent_max_input_buffer", "0".into()),
        ("client_recent_max_output_buffer", "0".into()),
        ("blocked_clients", "0".into()),
        ("tracking_clients", "0".into()),
        ("clients_in_timeout_table", "0".into()),
        ("watching_clients", watching.to_string()),
        ("total_watched_keys", watched.to_string()),
    ]
}

/// A field of `/proc/self/status` or `/proc/meminfo` in kB, as bytes.
fn proc_kb(file: &str, field: &str) -> u64 {
    std::fs::read_to_string(file)
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Bytes as Redis's `bytesToHuman` writes them (`1.11M`).
fn human(n: u64) -> String {
    const UNITS: [(u64, &str); 5] = [
        (1 << 50, "P"),
        (1 << 40, "T"),
        (1 << 30, "G"),
        (1 << 20, "M"),
        (1 << 10, "K"),
    ];
    UNITS
        .iter()
        .find(|&&(size, _)| n >= size)
        .map_or(format!("{n}B"), |&(size, unit)| {
            format!("{:.2}{unit}", n as f64 / size as f64)
        })
}

/// The process's resident memory stands for Redis's `used_memory`: the store's caches and
/// memtables are most of it.
fn memory() -> Fields {
    let rss = proc_kb("/proc/self/status", "VmRSS");
    let peak = proc_kb("/proc/self/status", "VmHWM");
    let total = proc_kb("/proc/meminfo", "MemTotal");
    vec![
        ("used_memory", rss.to_string()),
        ("used_memory_human", human(rss)),
        ("used_memory_rss", rss.to_string()),
        ("used_memory_rss_human", human(rss)),
        ("used_memory_peak", peak.to_string()),
        ("used_memory_peak_human", human(peak)),
        ("total_system_memory", total.to_string()),
        ("total_system_memory_human", human(total)),
        ("maxmemory", "0".into()),
        ("maxmemory_human", "0B".into()),
        ("maxmemory_policy", "noeviction".into()),
        ("mem_allocator", "libc".into()),
    ]
}

fn persistence(shared: &Shared) -> Fields {
    let durability = match shared.config.read().durability {
        stitchdb::Durability::Sync => "sync",
        stitchdb::Durability::Written => "written",
        stitchdb::Durability::Ordered => "ordered",
        stitchdb::Durability::Async => "async",
    };
    vec![
        ("loading", "0".into()),
        ("async_loading", "0".into()),
        ("rdb_changes_since_last_save", "0".into()),
        ("rdb_bgsave_in_progress", "0".into()),
        (
            "rdb_last_save_time",
            shared.last_save.load(Ordering::Relaxed).to_string(),
        ),
        ("rdb_last_bgsave_status", "ok".into()),
        ("rdb_last_bgsave_time_sec", "-1".into()),
        ("rdb_current_bgsave_time_sec", "-1".into()),
        ("aof_enabled", "0".into()),
        ("aof_rewrite_in_progress", "0".into()),
        ("aof_rewrite_scheduled", "0".into()),
        ("aof_last_rewrite_time_sec", "-1".into()),
        ("aof_current_rewrite_time_sec", "-1".into()),
        ("aof_last_bgrewrite_status", "ok".into()),
        ("aof_last_write_status", "ok".into()),
        ("stitchdb_durability", durability.into()),
        (
            "stitchdb_persistence",
            "every write is committed to the store, durable as its connection's durability says (SX.DURABILITY); RDB and AOF do not apply".into(),
        ),
    ]
}

fn stats(shared: &Shared) -> Fields {
    let s = &shared.stats;
    let n = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed).to_string();
    vec![
        ("total_connections_received", n(&s.connections)),
        ("total_commands_processed", n(&s.commands)),
        ("instantaneous_ops_per_sec", "0".into()),
        ("total_net_input_bytes", n(&s.net_in)),
        ("total_net_output_bytes", n(&s.net_out)),
        ("instantaneous_input_kbps", "0.00".into()),
        ("instantaneous_output_kbps", "0.00".into()),
        ("rejected_connections", n(&s.rejected)),
        ("expired_keys", n(&s.expired)),
        ("evicted_keys", "0".into()),
        ("keyspace_hits", "0".into()),
        ("keyspace_misses", "0".into()),
        ("pubsub_channels", "0".into()),
        ("pubsub_patterns", "0".into()),
        ("latest_fork_usec", "0".into()),
        ("total_forks", "0".into()),
        ("stitchdb_conflict_retries", n(&s.retries)),
    ]
}

fn replication(shared: &Shared) -> Fields {
    vec![
        ("role", "master".into()),
        ("connected_slaves", "0".into()),
        ("master_failover_state", "no-failover".into()),
        ("master_replid", shared.run_id.clone()),
        ("master_replid2", "0".repeat(40)),
        ("master_repl_offset", "0".into()),
        ("second_repl_offset", "-1".into()),
        ("repl_backlog_active", "0".into()),
        ("repl_backlog_size", "1048576".into()),
        ("repl_backlog_first_byte_offset", "0".into()),
        ("repl_backlog_histlen", "0".into()),
    ]
}

/// CPU time from `/proc/self/stat` (fields 14 to 17, in clock ticks of 1/100 s).
fn cpu() -> Fields {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The command name (field 2) may hold spaces: count fields after its closing ')'.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let tick: Vec<f64> = after
        .split_whitespace()
        .skip(11)
        .take(4)
        .map(|t| t.parse::<f64>().unwrap_or(0.0) / 100.0)
        .collect();
    let t = |i: usize| format!("{:.6}", tick.get(i).copied().unwrap_or(0.0));
    vec![
        ("used_cpu_sys", t(1)),
        ("used_cpu_user", t(0)),
        ("used_cpu_sys_children", t(3)),
        ("used_cpu_user_children", t(2)),
    ]
}

/// `dbN:keys=K,expires=E,avg_ttl=0` for each database with keys. `expires` is counted in the
/// database's expiry index (a scan of the keys that have a deadline); `avg_ttl` is not kept.
fn keyspace(shared: &Shared) -> Vec<String> {
    let ks = &shared.ks;
    let tables = ks.db.tables();
    let mut out = Vec::new();
    for db in 0..ks.databases() {
        let exists = ks.opened().contains(&db) || tables.contains(&format!("redis.{db}.keys"));
        let keys = if exists {
            ks.dbsize(db).unwrap_or(0)
        } else {
            0
        };
        if keys > 0 {
            let expires = expires(shared, db);
            out.push(format!("db{db}:keys={keys},expires={expires},avg_ttl=0"));
        }
    }
    out
}

fn expires(shared: &Shared, db: usize) -> usize {
    let Ok(mut ctx) = Ctx::new(&shared.ks, db, Slot::Own(None)) else {
        return 0;
    };
    ctx.scan(Table::Expires, Bound::Unbounded, Bound::Unbounded, false)
        .map_or(0, |pairs| pairs.count())
}
