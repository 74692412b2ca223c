//! `COMMAND`: what the server's one command table ([`cmd::table`]) says of each command, in
//! Redis 7.0's shapes, for clients' handshakes and `redis-cli`'s help and hints. The ACL
//! categories are derived from a command's flags and group; summaries, groups and versions
//! come from Redis 7.0.15's `COMMAND DOCS` (`redis-docs.tsv`, and the `sx.*` lines ours).

use super::{ran, Conn};
use crate::cmd::subcommands;
use crate::cmd::subs::{find_sub, help, Sub};
use crate::cmd::{self, args, CmdResult, Keys, Spec};
use crate::resp::reply::Reply;
use std::collections::HashMap;
use std::sync::OnceLock;

/// Runs `COMMAND [<subcommand> ...]`.
pub(super) fn run(conn: &mut Conn<'_>, a: &[Vec<u8>]) -> CmdResult {
    if a.len() == 1 {
        return Ok(Reply::Array(cmd::table().map(info).collect()));
    }
    let sub = find_sub("command", a)?;
    ran(conn, sub.name);
    Ok(match sub.name {
        "command|count" => Reply::Int(cmd::table().count() as i64),
        "command|info" if a.len() == 2 => Reply::Array(cmd::table().map(info).collect()),
        "command|info" => Reply::Array(a[2..].iter().map(|n| info_of(n)).collect()),
        "command|docs" => docs(&a[2..]),
        "command|list" => list(a)?,
        "command|getkeys" => getkeys(&a[2..])?,
        _ => help("command"),
    })
}

/// A command's or subcommand's name, whole (`get`, `client|list`), in lower case.
fn known(name: &[u8]) -> Option<Entry> {
    let name = args::text(name).to_ascii_lowercase();
    match name.split_once('|') {
        None => cmd::lookup(name.as_bytes()).map(Entry::Command),
        Some((parent, _)) => subcommands(parent)
            .iter()
            .find(|s| s.name == name)
            .map(Entry::Sub),
    }
}

/// A command or one of its subcommands.
#[derive(Clone, Copy)]
enum Entry {
    Command(&'static Spec),
    Sub(&'static Sub),
}

fn info_of(name: &[u8]) -> Reply {
    match known(name) {
        Some(Entry::Command(spec)) => info(spec),
        Some(Entry::Sub(sub)) => sub_info(sub),
        None => Reply::Nil,
    }
}

/// `COMMAND INFO`'s entry: name, arity, flags, first key, last key, step, ACL categories,
/// tips, key specifications, subcommands.
fn info(spec: &Spec) -> Reply {
    let (first, last, step) = spec.key_range();
    Reply::Array(vec![
        Reply::bulk(spec.name),
        Reply::Int(i64::from(spec.arity)),
        simples(spec.flags.iter().copied()),
        Reply::Int(i64::from(first)),
        Reply::Int(i64::from(last)),
        Reply::Int(i64::from(step)),
        simples(categories(spec.name, spec.flags)),
        Reply::Array(vec![]),
        Reply::Array(key_specs(spec)),
        Reply::Array(subcommands(spec.name).iter().map(sub_info).collect()),
    ])
}

fn sub_info(sub: &Sub) -> Reply {
    Reply::Array(vec![
        Reply::bulk(sub.name),
        Reply::Int(i64::from(sub.arity)),
        simples(sub.flags.iter().copied()),
        Reply::Int(0),
        Reply::Int(0),
        Reply::Int(0),
        simples(categories(sub.name, sub.flags)),
        Reply::Array(vec![]),
        Reply::Array(vec![]),
        Reply::Array(vec![]),
    ])
}

fn simples<'a>(words: impl IntoIterator<Item = &'a str>) -> Reply {
    Reply::Array(words.into_iter().map(|w| Reply::Simple(w.into())).collect())
}

/// Redis's ACL categories, in Redis's order, from the flags and the command's group.
const CATEGORY_ORDER: &[&str] = &[
    "@keyspace",
    "@read",
    "@write",
    "@set",
    "@sortedset",
    "@list",
    "@hash",
    "@string",
    "@admin",
    "@fast",
    "@slow",
    "@blocking",
    "@dangerous",
    "@connection",
    "@transaction",
];

fn categories(name: &str, flags: &[&str]) -> Vec<&'static str> {
    let has = |f: &str| flags.contains(&f);
    // A container (`CLIENT`) is in its subcommands' group, not itself.
    let container = !subcommands(name).is_empty();
    let group = docs_of(name).filter(|_| !container).map_or("", |d| d.group);
    let by_group = match group {
        "generic" => "@keyspace",
        "set" => "@set",
        "sorted-set" => "@sortedset",
        "list" => "@list",
        "hash" => "@hash",
        "string" => "@string",
        "connection" => "@connection",
        "transactions" => "@transaction",
        _ => "",
    };
    CATEGORY_ORDER
        .iter()
        .copied()
        .filter(|&c| match c {
            "@read" => has("readonly"),
            "@write" => has("write"),
            "@admin" | "@dangerous" => has("admin"),
            "@fast" => has("fast"),
            "@slow" => !has("fast"),
            "@blocking" => has("blocking"),
            c => c == by_group,
        })
        .collect()
}

/// Redis 7.0's key specifications, from the legacy range: where the first key is, and how far
/// the keys go from it (`lastkey` relative to it, or from the end if negative).
fn key_specs(spec: &Spec) -> Vec<Reply> {
    let (first, last, step) = match spec.keys {
        Keys::Range { first, last, step } | Keys::Custom(_, first, last, step) => {
            (first, last, step)
        }
        Keys::None | Keys::All => return vec![],
    };
    if first <= 0 {
        return vec![];
    }
    let flags: &[&str] = if spec.writes() {
        &["RW", "update"]
    } else {
        &["RO", "access"]
    };
    let lastkey = if last < 0 { last } else { last - first };
    let kv = |pairs: Vec<(&str, Reply)>| {
        Reply::Map(
            pairs
                .into_iter()
                .map(|(k, v)| (Reply::bulk(k), v))
                .collect(),
        )
    };
    vec![kv(vec![
        ("flags", simples(flags.iter().copied())),
        (
            "begin_search",
            kv(vec![
                ("type", Reply::bulk("index")),
                ("spec", kv(vec![("index", Reply::Int(i64::from(first)))])),
            ]),
        ),
        (
            "find_keys",
            kv(vec![
                ("type", Reply::bulk("range")),
                (
                    "spec",
                    kv(vec![
                        ("lastkey", Reply::Int(i64::from(lastkey))),
                        ("keystep", Reply::Int(i64::from(step))),
                        ("limit", Reply::Int(0)),
                    ]),
                ),
            ]),
        ),
    ])]
}

/// One command's documentation.
struct Doc {
    since: &'static str,
    group: &'static str,
    summary: &'static str,
}

/// The documentation of `name` (`get`, `client|list`), if there is any.
fn docs_of(name: &str) -> Option<&'static Doc> {
    static DOCS: OnceLock<HashMap<&'static str, Doc>> = OnceLock::new();
    DOCS.get_or_init(|| {
        include_str!("redis-docs.tsv")
            .lines()
            .filter_map(|line| {
                let mut f = line.splitn(4, '\t');
                let name = f.next()?;
                let since = f.next()?;
                let since = if since == "-" {
                    env!("CARGO_PKG_VERSION")
                } else {
                    since
                };
                let (group, summary) = (f.next()?, f.next()?);
                Some((
                    name,
                    Doc {
                        since,
                        group,
                        summary,
                    },
                ))
            })
            .collect()
    })
    .get(name)
}

/// `COMMAND DOCS [name ...]`: a map of each command known to its summary, version and
/// group (and its subcommands'); names not known are left out, as Redis leaves them.
fn docs(names: &[Vec<u8>]) -> Reply {
    let entries: Vec<Entry> = if names.is_empty() {
        cmd::table().map(Entry::Command).collect()
    } else {
        names.iter().filter_map(|n| known(n)).collect()
    };
    Reply::Map(
        entries
            .into_iter()
            .map(|e| match e {
                Entry::Command(spec) => (Reply::bulk(spec.name), doc(spec.name, true)),
                Entry::Sub(sub) => (Reply::bulk(sub.name), doc(sub.name, false)),
            })
            .collect(),
    )
}

fn doc(name: &str, with_subs: bool) -> Reply {
    let d = docs_of(name);
    let mut fields = vec![
        (
            Reply::bulk("summary"),
            Reply::bulk(d.map_or("", |d| d.summary)),
        ),
        (Reply::bulk("since"), Reply::bulk(d.map_or("", |d| d.since))),
        (
            Reply::bulk("group"),
            Reply::bulk(d.map_or("server", |d| d.group)),
        ),
    ];
    let subs = subcommands(name);
    if with_subs && !subs.is_empty() {
        fields.push((
            Reply::bulk("subcommands"),
            Reply::Map(
                subs.iter()
                    .map(|s| (Reply::bulk(s.name), doc(s.name, false)))
                    .collect(),
            ),
        ));
    }
    Reply::Map(fields)
}

/// Which commands `COMMAND LIST` keeps, by name and flags.
type Keep = Box<dyn Fn(&str, &[&str]) -> bool>;

/// `COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]`: the names of
/// the commands and subcommands.
fn list(a: &[Vec<u8>]) -> CmdResult {
    let names = cmd::table().flat_map(|spec| {
        std::iter::once((spec.name, spec.flags))
            .chain(subcommands(spec.name).iter().map(|s| (s.name, s.flags)))
    });
    let keep: Keep = match a.len() {
        2 => Box::new(|_, _| true),
        5 if args::is(&a[2], "filterby") => {
            let value = a[4].clone();
            if args::is(&a[3], "module") {
                Box::new(|_, _| false)
            } else if args::is(&a[3], "aclcat") {
                let want = format!("@{}", args::text(&value).to_ascii_lowercase());
                Box::new(move |n, f| categories(n, f).contains(&want.as_str()))
            } else if args::is(&a[3], "pattern") {
                Box::new(move |n, _| args::glob(&value, n.as_bytes(), true))
            } else {
                return Err(args::syntax());
            }
        }
        _ => return Err(args::syntax()),
    };
    Ok(Reply::Array(
        names
            .filter(|(n, f)| keep(n, f))
            .map(|(n, _)| Reply::bulk(n))
            .collect(),
    ))
}

/// `COMMAND GETKEYS command arg ...`: the keys of a command as the server finds them.
fn getkeys(full: &[Vec<u8>]) -> CmdResult {
    let spec = cmd::lookup(&full[0]).ok_or_else(|| args::err("ERR Invalid command specified"))?;
    if matches!(spec.keys, Keys::None | Keys::All) {
        return Err(args::err("ERR The command has no key arguments"));
    }
    if cmd::check_arity(spec, full.len()).is_err() {
        return Err(args::err(
            "ERR Invalid number of arguments specified for command",
        ));
    }
    let keys = spec.key_positions(full);
    if keys.is_empty() {
        return Err(args::err("ERR Invalid arguments specified for command"));
    }
    Ok(Reply::Array(
        keys.into_iter()
            .filter_map(|i| full.get(i).cloned().map(Reply::Bulk))
            .collect(),
    ))
}
