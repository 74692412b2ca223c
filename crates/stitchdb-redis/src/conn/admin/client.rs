//! `CLIENT`: the connection's name and id, the list of clients in Redis's line format, and
//! killing clients.

use super::{ran, Conn};
use crate::cmd::subs::{find_sub, help};
use crate::cmd::{args, CmdResult, Failure};
use crate::resp::reply::Reply;
use crate::shared::{Client, ClientInfo};
use std::fmt::Write;
use std::net::Shutdown;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;

/// Runs `CLIENT <subcommand> ...`.
pub(super) fn run(conn: &mut Conn<'_>, a: &[Vec<u8>]) -> CmdResult {
    let sub = find_sub("client", a)?;
    ran(conn, sub.name);
    match sub.name {
        "client|setname" => {
            let name = valid_name(&a[2], "Client names")?;
            conn.info.lock().name = (!name.is_empty()).then_some(name);
            Ok(Reply::Ok)
        }
        "client|getname" => Ok(Reply::opt_bulk(
            conn.info.lock().name.clone().map(String::into_bytes),
        )),
        "client|id" => Ok(Reply::Int(conn.id() as i64)),
        "client|info" => {
            let filter = Filter {
                ids: Some(vec![conn.id()]),
                ..Filter::default()
            };
            Ok(Reply::Verbatim(listing(conn, &filter)))
        }
        "client|list" => list(conn, a),
        "client|kill" => kill(conn, a),
        "client|setinfo" => setinfo(conn, a),
        "client|no-evict" | "client|no-touch" => {
            if args::is(&a[2], "on") || args::is(&a[2], "off") {
                Ok(Reply::Ok)
            } else {
                Err(args::syntax())
            }
        }
        _ => Ok(help("client")),
    }
}

/// A name as Redis takes one: printable ASCII without spaces (empty: none).
fn valid_name(raw: &[u8], what: &str) -> Result<String, Failure> {
    if raw.iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
        return Err(args::err(format!(
            "ERR {what} cannot contain spaces, newlines or special characters."
        )));
    }
    Ok(args::text(raw))
}

/// `CLIENT SETINFO LIB-NAME|LIB-VER value`, as Redis 7.2 takes it (clients send it when
/// they connect).
fn setinfo(conn: &mut Conn<'_>, a: &[Vec<u8>]) -> CmdResult {
    let attr = args::text(&a[2]).to_ascii_lowercase();
    let value = match attr.as_str() {
        "lib-name" | "lib-ver" => valid_name(&a[3], &attr)?,
        _ => {
            return Err(args::err(format!(
                "ERR Unrecognized option '{}'",
                args::text(&a[2])
            )))
        }
    };
    let mut info = conn.info.lock();
    if attr == "lib-name" {
        info.lib_name = value;
    } else {
        info.lib_ver = value;
    }
    Ok(Reply::Ok)
}

/// A client's line in `CLIENT LIST` (Redis 7's fields; those that do not apply here are 0),
/// newline included.
fn describe(c: &ClientInfo, fd: i32) -> String {
    let mut s = String::with_capacity(320);
    let _ = writeln!(
        s,
        "id={} addr={} laddr={} fd={fd} name={} age={} idle={} flags={} db={} sub=0 psub=0 \
         ssub=0 multi={} watch={} qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=16384 rbp=0 \
         obl=0 oll=0 omem=0 tot-mem=20480 events=r cmd={} user=default redir=-1 resp={} \
         lib-name={} lib-ver={}",
        c.id,
        c.addr,
        c.laddr,
        c.name.as_deref().unwrap_or(""),
        c.created.elapsed().as_secs(),
        c.active.elapsed().as_secs(),
        if c.multi.is_some() { "x" } else { "N" },
        c.db,
        c.multi.map_or(-1, |n| n as i64),
        c.watching,
        c.last_cmd,
        c.resp,
        c.lib_name,
        c.lib_ver,
    );
    s
}

/// What `CLIENT LIST` and `CLIENT KILL` select clients by.
#[derive(Default)]
struct Filter {
    ids: Option<Vec<u64>>,
    addr: Option<String>,
    laddr: Option<String>,
    /// `TYPE` other than `normal` (or `USER` other than `default`): no client here is one.
    none: bool,
}

impl Filter {
    fn matches(&self, c: &ClientInfo) -> bool {
        !self.none
            && self.ids.as_ref().is_none_or(|ids| ids.contains(&c.id))
            && self.addr.as_ref().is_none_or(|a| *a == c.addr.to_string())
            && self
                .laddr
                .as_ref()
                .is_none_or(|a| *a == c.laddr.to_string())
    }

    /// `TYPE t`: every client here is a normal one.
    fn client_type(&mut self, t: &[u8]) -> Result<(), Failure> {
        match args::text(t).to_ascii_lowercase().as_str() {
            "normal" => {}
            "master" | "replica" | "slave" | "pubsub" => self.none = true,
            _ => {
                return Err(args::err(format!(
                    "ERR Unknown client type '{}'",
                    args::text(t)
                )))
            }
        }
        Ok(())
    }
}

/// `CLIENT LIST [TYPE t | ID id ...]`.
fn list(conn: &mut Conn<'_>, a: &[Vec<u8>]) -> CmdResult {
    let mut filter = Filter::default();
    match a.len() {
        2 => {}
        4 if args::is(&a[2], "type") => filter.client_type(&a[3])?,
        n if n >= 4 && args::is(&a[2], "id") => {
            let ids = a[3..]
                .iter()
                .map(|s| args::int(s).map_err(|_| args::err("ERR Invalid client ID")))
                .collect::<Result<Vec<i64>, _>>()?;
            filter.ids = Some(ids.into_iter().map(|i| i as u64).collect());
        }
        _ => return Err(args::syntax()),
    }
    Ok(Reply::Verbatim(listing(conn, &filter)))
}

/// The lines of the clients `filter` selects.
fn listing(conn: &Conn<'_>, filter: &Filter) -> String {
    let mut out = String::new();
    for c in conn.shared.clients.lock().values() {
        let info = c.info.lock();
        // A killed client is gone for Redis at once, though its thread may still be ending.
        if filter.matches(&info) && !c.killed.load(Ordering::SeqCst) {
            out.push_str(&describe(&info, c.stream.as_raw_fd()));
        }
    }
    out
}

/// `CLIENT KILL addr:port`, or `CLIENT KILL <filter> <value> ...` with `ID`, `ADDR`,
/// `LADDR`, `TYPE`, `USER`, `SKIPME`.
fn kill(conn: &mut Conn<'_>, a: &[Vec<u8>]) -> CmdResult {
    if a.len() == 3 {
        let filter = Filter {
            addr: Some(args::text(&a[2])),
            ..Filter::default()
        };
        return match kill_matching(conn, &filter, false) {
            0 => Err(args::err("ERR No such client")),
            _ => Ok(Reply::Ok),
        };
    }
    let mut filter = Filter::default();
    let mut skip_me = true;
    for pair in a[2..].chunks(2) {
        let [option, value] = pair else {
            return Err(args::syntax());
        };
        match args::text(option).to_ascii_lowercase().as_str() {
            "id" => {
                let id = args::int(value)
                    .ok()
                    .filter(|&i| i > 0)
                    .ok_or_else(|| args::err("ERR client-id should be greater than 0"))?;
                filter.ids = Some(vec![id as u64]);
            }
            "addr" => filter.addr = Some(args::text(value)),
            "laddr" => filter.laddr = Some(args::text(value)),
            "type" => filter.client_type(value)?,
            "user" if args::is(value, "default") => {}
            "user" => {
                return Err(args::err(format!(
                    "ERR No such user '{}'",
                    args::text(value)
                )))
            }
            "skipme" if args::is(value, "yes") => skip_me = true,
            "skipme" if args::is(value, "no") => skip_me = false,
            _ => return Err(args::syntax()),
        }
    }
    Ok(Reply::Int(kill_matching(conn, &filter, skip_me) as i64))
}

/// Kills the clients `filter` selects (this one too unless `skip_me`); how many. Another
/// client's connection is shut down at once, which ends its thread's read; this one is closed
/// once its reply is sent.
fn kill_matching(conn: &Conn<'_>, filter: &Filter, skip_me: bool) -> usize {
    let me = conn.id();
    let clients = conn.shared.clients.lock();
    let mut killed = 0;
    for (&id, c) in clients.iter() {
        let gone = c.killed.load(Ordering::SeqCst);
        if gone || (skip_me && id == me) || !filter.matches(&c.info.lock()) {
            continue;
        }
        stop(c, id == me);
        killed += 1;
    }
    killed
}

fn stop(c: &Client, me: bool) {
    c.killed.store(true, Ordering::SeqCst);
    if !me {
        let _ = c.stream.shutdown(Shutdown::Both);
    }
}
