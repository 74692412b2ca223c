//! `CONFIG`: the settings under Redis's names. Those the server can change while it runs
//! change (`requirepass`, `maxclients`, `proto-max-bulk-len` for new connections,
//! `client-query-buffer-limit`, `hz`); those that are fixed, or that StitchDB does otherwise
//! (persistence), are shown with the value that describes the server.

use super::{ran, Conn};
use crate::cmd::subs::{find_sub, help};
use crate::cmd::{args, CmdResult, Failure};
use crate::config::Config;
use crate::resp::reply::Reply;
use std::sync::atomic::Ordering;
use stitchdb::Durability;

/// Changes a setting to a value, or says why not.
type Setter = fn(&mut Config, &str) -> Result<(), String>;

/// A setting: its name, its value as `CONFIG GET` shows it, and how `CONFIG SET` changes it
/// (`None`: it cannot).
struct Param {
    name: &'static str,
    get: fn(&Config) -> String,
    set: Option<Setter>,
}

const PARAMS: &[Param] = &[
    Param {
        name: "bind",
        get: |c| c.bind.clone(),
        set: None,
    },
    Param {
        name: "port",
        get: |c| c.port.to_string(),
        set: None,
    },
    Param {
        name: "requirepass",
        get: |c| c.requirepass.clone().unwrap_or_default(),
        set: Some(|c, v| {
            c.requirepass = (!v.is_empty()).then(|| v.to_string());
            Ok(())
        }),
    },
    Param {
        name: "maxclients",
        get: |c| c.maxclients.to_string(),
        set: Some(|c, v| {
            c.maxclients = int_in(v, 1, u32::MAX.into())? as usize;
            Ok(())
        }),
    },
    Param {
        name: "databases",
        get: |c| c.databases.to_string(),
        set: None,
    },
    Param {
        name: "proto-max-bulk-len",
        get: |c| c.parse.max_bulk_len.to_string(),
        set: Some(|c, v| {
            c.parse.max_bulk_len = memory_at_least_1mb(v)?;
            Ok(())
        }),
    },
    Param {
        name: "client-query-buffer-limit",
        get: |c| c.query_buffer_limit.to_string(),
        set: Some(|c, v| {
            c.query_buffer_limit = memory_at_least_1mb(v)?;
            Ok(())
        }),
    },
    Param {
        name: "hz",
        get: |c| c.hz.to_string(),
        set: Some(|c, v| {
            // Redis takes any, and runs within 1 to 500.
            c.hz = int_in(v, 0, i32::MAX.into())?.clamp(1, 500) as u32;
            Ok(())
        }),
    },
    Param {
        name: "appendonly",
        get: |_| "no".into(),
        set: Some(|_, v| only(v, "no", "persistence is the store's")),
    },
    Param {
        name: "appendfsync",
        get: |c| {
            match c.durability {
                Durability::Sync => "always",
                Durability::Written | Durability::Ordered => "everysec",
                Durability::Async => "no",
            }
            .into()
        },
        set: None,
    },
    Param {
        name: "save",
        get: |_| String::new(),
        set: Some(|_, v| only(v, "", "persistence is the store's")),
    },
    Param {
        name: "timeout",
        get: |_| "0".into(),
        set: Some(|_, v| only(v, "0", "idle clients are not closed")),
    },
    Param {
        name: "tcp-keepalive",
        get: |_| "0".into(),
        set: None,
    },
    Param {
        name: "maxmemory",
        get: |_| "0".into(),
        set: None,
    },
    Param {
        name: "maxmemory-policy",
        get: |_| "noeviction".into(),
        set: None,
    },
];

/// Runs `CONFIG <subcommand> ...`.
pub(super) fn run(conn: &mut Conn<'_>, a: &[Vec<u8>]) -> CmdResult {
    let sub = find_sub("config", a)?;
    ran(conn, sub.name);
    match sub.name {
        "config|get" => Ok(get(&conn.shared.config.read(), &a[2..])),
        "config|set" => set(conn, &a[2..]),
        "config|resetstat" => {
            let s = &conn.shared.stats;
            for counter in [
                &s.connections,
                &s.rejected,
                &s.commands,
                &s.net_in,
                &s.net_out,
                &s.expired,
                &s.retries,
            ] {
                counter.store(0, Ordering::Relaxed);
            }
            Ok(Reply::Ok)
        }
        "config|rewrite" => Err(args::err("ERR The server is running without a config file")),
        _ => Ok(help("config")),
    }
}

/// `CONFIG GET pattern ...`: every setting a pattern matches, once.
fn get(config: &Config, patterns: &[Vec<u8>]) -> Reply {
    Reply::Map(
        PARAMS
            .iter()
            .filter(|p| {
                patterns
                    .iter()
                    .any(|pat| args::glob(pat, p.name.as_bytes(), true))
            })
            .map(|p| (Reply::bulk(p.name), Reply::bulk((p.get)(config))))
            .collect(),
    )
}

/// `CONFIG SET name value ...`: all of them, or none if one is refused.
fn set(conn: &mut Conn<'_>, pairs: &[Vec<u8>]) -> CmdResult {
    if pairs.len() % 2 != 0 {
        return Err(args::syntax());
    }
    let failed = |name: &str, why: &str| {
        args::err(format!(
            "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
        ))
    };
    let mut next = conn.shared.config.read().clone();
    let mut seen: Vec<&str> = Vec::new();
    for pair in pairs.chunks(2) {
        let name = args::text(&pair[0]).to_ascii_lowercase();
        let param = PARAMS.iter().find(|p| p.name == name).ok_or_else(|| {
            args::err(format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{}'",
                args::text(&pair[0])
            ))
        })?;
        if seen.contains(&param.name) {
            return Err(failed(param.name, "duplicate parameter"));
        }
        seen.push(param.name);
        let setter = param
            .set
            .ok_or_else(|| failed(param.name, "can't set immutable config"))?;
        setter(&mut next, &args::text(&pair[1])).map_err(|why| failed(param.name, &why))?;
    }
    *conn.shared.config.write() = next;
    Ok(Reply::Ok)
}

/// An integer setting within Redis's bounds for it.
fn int_in(v: &str, min: i64, max: i64) -> Result<i64, String> {
    let n: i64 = args::int(v.as_bytes())
        .map_err(|_: Failure| "argument couldn't be parsed into an integer".to_string())?;
    if n < min || n > max {
        return Err(format!(
            "argument must be between {min} and {max} inclusive"
        ));
    }
    Ok(n)
}

/// A size as Redis's `memtoull` reads one: digits, then `b`, `k`, `kb`, `m`, `mb`, `g` or
/// `gb` (any case; `k` is 1000, `kb` 1024), at least 1 MiB as Redis wants for these limits.
fn memory_at_least_1mb(v: &str) -> Result<usize, String> {
    const MIN: u64 = 1 << 20;
    let bad = || "argument must be a memory value".to_string();
    let lower = v.to_ascii_lowercase();
    let digits = lower.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit: u64 = match &lower[digits.len()..] {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1 << 10,
        "m" => 1_000_000,
        "mb" => 1 << 20,
        "g" => 1_000_000_000,
        "gb" => 1 << 30,
        _ => return Err(bad()),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n = digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .ok_or_else(bad)?;
    if n < MIN || n > i64::MAX as u64 {
        return Err(format!(
            "argument must be between {MIN} and {} inclusive",
            i64::MAX
        ));
    }
    usize::try_from(n).map_err(|_| bad())
}

/// A setting that has one value here: setting it to that value is accepted (clients and
/// test suites set them), to another refused, saying why.
fn only(v: &str, value: &str, why: &str) -> Result<(), String> {
    if v.eq_ignore_ascii_case(value) {
        Ok(())
    } else {
        Err(format!("{why}: only {value:?} is supported here"))
    }
}
