//! One client's connection, on a thread of its own: read what arrived, run every whole
//! request in it, make the commits durable as the connection's durability says, then send
//! the replies. A pipeline of writes thus costs one sync, and concurrent clients' syncs are
//! one (the log's group commit): what Redis's `appendfsync always` does in its event loop.

mod admin;
mod group;
mod multi;
mod sx;

use crate::cmd::{self, args, Failure, Keys, Run, Session, Spec};
use crate::keyspace::ctx::Slot;
use crate::keyspace::ready::Waiting;
use crate::keyspace::watch::Dirty;
use crate::keyspace::{Ctx, Outcome};
use crate::resp::parse::{Parsed, Parser};
use crate::resp::reply::Reply;
use crate::shared::{Client, ClientInfo, Shared};
use parking_lot::Mutex;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use stitchdb::{Durability, Snapshot, Transaction};

/// Bytes read from the socket at a time (at least).
const READ_CHUNK: usize = 16 << 10;

/// The longest a connection about to sync waits for others still running requests.
const GATHER: Duration = Duration::from_micros(500);

/// Input buffer kept between requests; a larger one is given back once empty.
const KEPT_INPUT: usize = 1 << 20;

/// How often a blocked client checks that it is still connected.
const BLOCKED_POLL: Duration = Duration::from_millis(100);

/// Times a command is run again after a conflict with a concurrent transaction before the
/// conflict is the client's reply.
const RETRIES: usize = 16;

/// An interactive transaction (`SX.BEGIN`).
struct Open {
    txn: Transaction<'static>,
    /// What its commands changed so far.
    outcome: Outcome,
}

/// A connection's state.
pub(crate) struct Conn<'s> {
    shared: &'s Shared,
    stream: TcpStream,
    info: Arc<Mutex<ClientInfo>>,
    killed: Arc<AtomicBool>,
    parser: Parser,
    /// Input not parsed yet: `input[consumed..filled]`. The buffer's bytes past `filled`
    /// are room for the next read, zeroed once when the buffer grows rather than at every
    /// read.
    input: Vec<u8>,
    consumed: usize,
    filled: usize,
    /// Replies not sent yet.
    out: Vec<u8>,
    /// RESP version (2 or 3).
    resp: u8,
    /// The selected database.
    db: usize,
    authenticated: bool,
    /// Inside `MULTI`: the commands queued.
    multi: Option<multi::Queued>,
    /// `WATCH`ed keys, and the flag a change of one of them sets.
    watched: Vec<(usize, Vec<u8>)>,
    /// The watched keys that existed when watched: one of them expired by `EXEC` fails it.
    watched_live: Vec<(usize, Vec<u8>)>,
    dirty: Dirty,
    /// `SX.BEGIN`'s transaction.
    open: Option<Open>,
    /// Reads at this snapshot (`SX.READAT`).
    read_at: Option<Snapshot>,
    /// Patchgroups made and engaged (`SX.PATCHGROUP`).
    groups: sx::Groups,
    /// The durability of this connection's writes.
    durability: Durability,
    /// What the commits made since the replies were last sent are owed before the replies
    /// go out: `Sync` (a sync of the log) or `Written` (the log handed to the system).
    owed: Option<Durability>,
    /// Close after sending the replies so far.
    closing: bool,
}

/// Serves one client until it leaves, breaks the protocol, is killed, or the server stops.
pub(crate) fn serve(shared: &Shared, stream: TcpStream) {
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed) + 1;
    let (Ok(addr), Ok(laddr), Ok(handle)) =
        (stream.peer_addr(), stream.local_addr(), stream.try_clone())
    else {
        return;
    };
    let _ = stream.set_nodelay(true);
    let config = shared.config.read().clone();
    let info = Arc::new(Mutex::new(ClientInfo {
        id,
        addr,
        laddr,
        name: None,
        db: 0,
        created: Instant::now(),
        active: Instant::now(),
        last_cmd: "NULL".into(),
        multi: None,
        watching: 0,
        resp: 2,
        lib_name: String::new(),
        lib_ver: String::new(),
    }));
    let killed = Arc::new(AtomicBool::new(false));
    shared.clients.lock().insert(
        id,
        Client {
            stream: handle,
            info: info.clone(),
            killed: killed.clone(),
        },
    );
    // A server stopping between the accept and here would not have closed this one.
    if shared.is_stopping() {
        let _ = stream.shutdown(Shutdown::Both);
    }
    let mut conn = Conn {
        shared,
        stream,
        info,
        killed,
        parser: Parser::new(config.parse),
        input: Vec::new(),
        consumed: 0,
        filled: 0,
        out: Vec::new(),
        resp: 2,
        db: 0,
        authenticated: config.requirepass.is_none(),
        multi: None,
        watched: Vec::new(),
        watched_live: Vec::new(),
        dirty: Arc::new(AtomicBool::new(false)),
        open: None,
        read_at: None,
        groups: sx::Groups::default(),
        durability: config.durability,
        owed: None,
        closing: false,
    };
    if let Err(e) = conn.run() {
        tracing::debug!("client {id} ({addr}): {e}");
    }
    conn.unwatch_all();
    shared.clients.lock().remove(&id);
}

impl<'s> Conn<'s> {
    fn run(&mut self) -> std::io::Result<()> {
        let shared: &'s Shared = self.shared;
        loop {
            // Counted as executing while it runs the requests it read.
            shared.executing.fetch_add(1, Ordering::SeqCst);
            let ran = self.run_requests();
            shared.executing.fetch_sub(1, Ordering::SeqCst);
            ran?;
            self.gather();
            self.send()?;
            if self.closing || self.killed.load(Ordering::Relaxed) {
                let _ = self.stream.shutdown(Shutdown::Both);
                return Ok(());
            }
            if !self.read_more()? {
                return Ok(());
            }
        }
    }

    /// Before a sync, waits a moment (at most `GATHER`) while other connections are still
    /// running requests they read: their commits then share this sync (the log's group
    /// commit covers every commit made before its flush starts). Without it, the first
    /// connection to finish leads a flush with its own commit alone, and the rest wait for
    /// that flush and then make another: what Redis's event loop gets by running every ready
    /// client before its `fsync`.
    fn gather(&self) {
        if self.owed != Some(Durability::Sync) {
            return;
        }
        let start = Instant::now();
        while self.shared.executing.load(Ordering::SeqCst) > 0 && start.elapsed() < GATHER {
            std::thread::yield_now();
        }
    }

    /// Reads what the client sent; false once it has closed.
    fn read_more(&mut self) -> std::io::Result<bool> {
        if self.consumed == self.filled {
            self.consumed = 0;
            self.filled = 0;
            // A big request came and went: do not keep its room for the client's lifetime.
            if self.input.len() > KEPT_INPUT {
                self.input = Vec::new();
            }
        }
        if self.input.len() - self.filled < READ_CHUNK {
            if self.consumed > 0 {
                // Move what is left to the front rather than grow.
                self.input.copy_within(self.consumed..self.filled, 0);
                self.filled -= self.consumed;
                self.consumed = 0;
            }
            if self.input.len() - self.filled < READ_CHUNK {
                let want = (self.filled + READ_CHUNK).max(self.input.len() * 2);
                self.input.resize(want, 0);
            }
        }
        let n = match self.stream.read(&mut self.input[self.filled..]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => return Ok(true),
            Err(e) => return Err(e),
        };
        self.filled += n;
        self.shared.count(&self.shared.stats.net_in, n as u64);
        if n == 0 {
            return Ok(false);
        }
        let held = self.filled - self.consumed + self.parser.held();
        if held > self.shared.config.read().query_buffer_limit {
            tracing::warn!(
                "closing client {}: it reached the query buffer limit",
                self.id()
            );
            self.closing = true;
        }
        Ok(true)
    }

    /// Runs every whole request received, sending replies whenever a chunk of them waits.
    fn run_requests(&mut self) -> std::io::Result<()> {
        let chunk = self.shared.config.read().reply_chunk;
        // Plain data commands that arrived together wait here to run as one (`group`).
        let mut run = Vec::new();
        while !self.closing {
            let (used, parsed) = self
                .parser
                .parse(&self.input[self.consumed..self.filled], self.authenticated);
            self.consumed += used;
            let args = match parsed {
                Parsed::Request(args) => args,
                other => {
                    self.run_pending(&mut run);
                    if let Parsed::Error(msg) = other {
                        self.reply(Reply::Error(format!("ERR {msg}")));
                        self.closing = true;
                    }
                    break;
                }
            };
            if let Some(spec) = self.groupable(&args) {
                run.push((spec, args));
                if run.len() < group::GROUP_MAX {
                    continue;
                }
                self.run_pending(&mut run);
            } else {
                self.run_pending(&mut run);
                if let Some(r) = self.request(args) {
                    self.reply(r);
                }
            }
            if self.out.len() >= chunk {
                self.send()?;
            }
        }
        Ok(())
    }

    /// Runs the commands waiting to run as one: alone if there is just one.
    fn run_pending(&mut self, run: &mut Vec<(&'static Spec, Vec<Vec<u8>>)>) {
        match run.len() {
            0 => {}
            1 => {
                if let Some((_, args)) = run.pop() {
                    if let Some(r) = self.request(args) {
                        self.reply(r);
                    }
                }
            }
            _ => self.run_group(std::mem::take(run)),
        }
    }

    fn reply(&mut self, r: Reply) {
        r.encode(self.resp, &mut self.out);
    }

    /// Makes this connection's commits durable if its replies promise that, then sends them.
    fn send(&mut self) -> std::io::Result<()> {
        let db = &self.shared.ks.db;
        let settled = match self.owed.take() {
            Some(Durability::Sync) => db.sync(),
            Some(Durability::Written) => db.write_out(),
            _ => Ok(()),
        };
        if let Err(e) = settled {
            // Nothing is acknowledged that is not durable: the replies are dropped with the
            // connection.
            tracing::error!("making client {}'s commits durable: {e}", self.id());
            self.out.clear();
            self.closing = true;
            return Err(std::io::Error::other(e.to_string()));
        }
        if !self.out.is_empty() {
            self.stream.write_all(&self.out)?;
            self.shared
                .count(&self.shared.stats.net_out, self.out.len() as u64);
            self.out.clear();
        }
        Ok(())
    }

    fn id(&self) -> u64 {
        self.info.lock().id
    }

    /// Runs one request; its reply (`None`: no reply, as after `QUIT`'s or `SHUTDOWN`'s, or
    /// for a blocked client gone).
    fn request(&mut self, args: Vec<Vec<u8>>) -> Option<Reply> {
        self.shared.count(&self.shared.stats.commands, 1);
        let Some(spec) = cmd::lookup(&args[0]) else {
            self.queue_failed();
            return Some(Reply::Error(cmd::unknown_command(&args)));
        };
        {
            let mut info = self.info.lock();
            info.active = Instant::now();
            info.last_cmd.clear();
            info.last_cmd.push_str(spec.name);
        }
        if let Err(e) = cmd::check_arity(spec, args.len()) {
            self.queue_failed();
            return Some(Reply::Error(e));
        }
        if !self.authenticated && !spec.flags.contains(&"no_auth") {
            self.queue_failed();
            return Some(Reply::Error("NOAUTH Authentication required.".into()));
        }
        if self.multi.is_some() && !multi::runs_at_once(spec) {
            return Some(self.queue(spec, args));
        }
        match spec.run {
            Run::Data(f) => self.data(spec, f, &args),
            Run::Session(s) => self.session(s, &args),
        }
    }

    /// Runs a command over data, alone: under its keys' locks, in a transaction of its own
    /// (or in the connection's open one), committed once it succeeded. Its reply (`None`: a
    /// blocked client gone, which gets none).
    fn data(&mut self, spec: &Spec, f: cmd::DataFn, args: &[Vec<u8>]) -> Option<Reply> {
        let shared: &'s Shared = self.shared;
        let ks = &shared.ks;
        if let Some(snap) = &self.read_at {
            if spec.writes() {
                return Some(Reply::Error(
                    "READONLY You can't write against a snapshot.".into(),
                ));
            }
            let run = Ctx::at_snapshot(ks, self.db, snap)
                .map_err(Failure::from)
                .and_then(|mut ctx| f(&mut ctx, args));
            return Some(run.unwrap_or_else(Failure::reply));
        }
        if let Some(open) = &mut self.open {
            return Some(sx::run_in(ks, self.db, open, f, args));
        }
        if spec.flags.contains(&"blocking") {
            return self.blocking(spec, f, args);
        }
        Some(self.locked(spec, f, args).0)
    }

    /// Runs a command under its keys' locks (see `data`); with how long it asked to wait,
    /// if it found nothing to pop (`Failure::Blocked`).
    fn locked(
        &mut self,
        spec: &Spec,
        f: cmd::DataFn,
        args: &[Vec<u8>],
    ) -> (Reply, Option<Option<Duration>>) {
        let shared: &'s Shared = self.shared;
        let ks = &shared.ks;
        let _whole_shared;
        let _whole_alone;
        if matches!(spec.keys, Keys::All) {
            _whole_alone = ks.whole.write();
        } else {
            _whole_shared = ks.whole.read();
        }
        let db = self.db;
        let keys: Vec<usize> = spec.key_positions(args);
        let _held = ks
            .locks
            .lock(keys.iter().map(|&i| (db, args[i].as_slice())));
        let mut blocked = None;
        let reply = self.run_alone(|ctx| {
            f(ctx, args).inspect_err(|e| {
                if let Failure::Blocked { timeout, .. } = e {
                    blocked = Some(*timeout);
                }
            })
        });
        (reply, blocked)
    }

    /// Runs a blocking command (`BLPOP` ...): again each time a commit touches one of its
    /// keys, until it pops something, its timeout passes (a nil array), or the client or
    /// the server goes away (no reply; the connection closes). Its keys are registered
    /// before it first runs, so no change after that is missed. Clients blocked on one key
    /// are not served in the order they blocked (Redis's are): whichever takes the key's
    /// lock first pops.
    fn blocking(&mut self, spec: &Spec, f: cmd::DataFn, args: &[Vec<u8>]) -> Option<Reply> {
        let shared: &'s Shared = self.shared;
        let keys: Vec<&[u8]> = spec
            .key_positions(args)
            .into_iter()
            .map(|i| args[i].as_slice())
            .collect();
        let mut waiting = shared.ks.ready.register(self.db, &keys);
        let mut deadline = None;
        loop {
            let (reply, blocked) = self.locked(spec, f, args);
            let Some(timeout) = blocked else {
                return Some(reply);
            };
            if deadline.is_none() && self.send().is_err() {
                // The replies before it, sent (and made durable) before it waits.
                self.closing = true;
                return None;
            }
            // From the first run, as Redis times it; too far to reach is never.
            let until: Option<Instant> = *deadline
                .get_or_insert_with(|| timeout.and_then(|t| Instant::now().checked_add(t)));
            match self.wait_for_keys(&mut waiting, until) {
                Some(true) => {}
                Some(false) => return Some(Reply::NilArray),
                None => {
                    self.closing = true;
                    return None;
                }
            }
        }
    }

    /// Waits until a commit touches one of the keys `waiting` is registered for (true) or
    /// `until` passes (false), a slice at a time to notice a client gone (`None`). The
    /// connection does not count as executing meanwhile, so others' syncs do not wait for it.
    fn wait_for_keys(&self, waiting: &mut Waiting<'_>, until: Option<Instant>) -> Option<bool> {
        let executing = &self.shared.executing;
        executing.fetch_sub(1, Ordering::SeqCst);
        let woke = loop {
            if self.gone() {
                break None;
            }
            let now = Instant::now();
            if until.is_some_and(|u| now >= u) {
                break Some(false);
            }
            let slice = now + BLOCKED_POLL;
            if waiting.wait(until.map_or(slice, |u| u.min(slice))) && !self.gone() {
                break Some(true);
            }
        };
        executing.fetch_add(1, Ordering::SeqCst);
        woke
    }

    /// Whether a blocked client should stop waiting: it closed its connection, was killed,
    /// or the server is stopping.
    fn gone(&self) -> bool {
        if self.killed.load(Ordering::Relaxed) || self.shared.is_stopping() {
            return true;
        }
        if self.stream.set_nonblocking(true).is_err() {
            return true;
        }
        let mut byte = [0u8; 1];
        let closed = match self.stream.peek(&mut byte) {
            Ok(n) => n == 0,
            Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
        };
        closed || self.stream.set_nonblocking(false).is_err()
    }

    /// Runs `body` in a transaction of its own and commits it, again after a conflict with
    /// an interactive transaction (the caller holds the keys' locks, so only those conflict).
    fn run_alone(&mut self, mut body: impl FnMut(&mut Ctx<'s>) -> cmd::CmdResult) -> Reply {
        let shared: &'s Shared = self.shared;
        let mut failure = None;
        for _ in 0..RETRIES {
            let mut ctx = match Ctx::new(&shared.ks, self.db, Slot::Own(None)) {
                Ok(c) => c,
                Err(e) => return Failure::from(e).reply(),
            };
            let done = body(&mut ctx).and_then(|reply| self.commit(ctx).map(|()| reply));
            match done {
                Ok(reply) => return reply,
                Err(f) if f.is_conflict() => {
                    shared.count(&shared.stats.retries, 1);
                    failure = Some(f);
                }
                Err(f) => return f.reply(),
            }
        }
        failure.map_or(Reply::Ok, Failure::reply)
    }

    /// Commits a command's own transaction as the connection's durability says (a `Sync`
    /// connection's is made durable before its reply is sent, with the others in the
    /// pipeline), and tells the server what changed.
    fn commit(&mut self, ctx: Ctx<'s>) -> Result<(), Failure> {
        let outcome = ctx.finish(self.commit_durability())?;
        self.shared.ks.apply(&outcome);
        self.owe(outcome.wrote);
        Ok(())
    }

    /// The durability the connection's commits are made with: `Sync` and `Written` commits
    /// are made `Async`, and what they are owed is settled once for the whole pipeline, and
    /// for every client waiting at once, before the replies are sent (`send`).
    fn commit_durability(&self) -> Durability {
        match self.durability {
            Durability::Sync | Durability::Written => Durability::Async,
            d => d,
        }
    }

    /// Notes that a commit was made (`wrote`: it changed something): its durability is owed
    /// before the next replies are sent.
    fn owe(&mut self, wrote: bool) {
        if !wrote {
            return;
        }
        self.owed = match (self.owed, self.durability) {
            (Some(Durability::Sync), _) | (_, Durability::Sync) => Some(Durability::Sync),
            (_, Durability::Written) => Some(Durability::Written),
            (owed, _) => owed,
        };
    }

    /// Runs a command of the connection's own.
    fn session(&mut self, s: Session, args: &[Vec<u8>]) -> Option<Reply> {
        let r = match s {
            Session::Quit => {
                self.closing = true;
                Ok(Reply::Ok)
            }
            Session::Shutdown => return admin::shutdown(self, args),
            Session::Select => self.select(&args[1]),
            Session::Reset => Ok(self.reset()),
            Session::Auth | Session::Hello | Session::Client | Session::Command => {
                admin::run(self, s, args)
            }
            Session::Info | Session::Config | Session::Save | Session::LastSave => {
                admin::run(self, s, args)
            }
            Session::Multi
            | Session::Exec
            | Session::Discard
            | Session::Watch
            | Session::Unwatch => multi::run(self, s, args),
            Session::SxBegin
            | Session::SxCommit
            | Session::SxAbort
            | Session::SxDurability
            | Session::SxReadAt
            | Session::SxPatchgroup => sx::run(self, s, args),
        };
        Some(r.unwrap_or_else(Failure::reply))
    }

    fn select(&mut self, arg: &[u8]) -> cmd::CmdResult {
        let n =
            args::int(arg).map_err(|_| args::err("ERR value is not an integer or out of range"))?;
        if n < 0 || n as usize >= self.shared.ks.databases() {
            return Err(args::err("ERR DB index is out of range"));
        }
        self.shared.ks.tables(n as usize)?;
        self.db = n as usize;
        self.info.lock().db = self.db;
        Ok(Reply::Ok)
    }

    /// `RESET`: the connection as new, but still connected (and still authenticated if no
    /// password is set).
    fn reset(&mut self) -> Reply {
        self.multi = None;
        self.unwatch_all();
        self.open = None;
        self.read_at = None;
        self.groups = sx::Groups::default();
        self.db = 0;
        self.resp = 2;
        self.durability = self.shared.config.read().durability;
        self.authenticated = self.shared.config.read().requirepass.is_none();
        {
            let mut info = self.info.lock();
            info.db = 0;
            info.name = None;
            info.resp = 2;
            info.multi = None;
        }
        Reply::Simple("RESET".into())
    }

    fn unwatch_all(&mut self) {
        if !self.watched.is_empty() {
            self.shared.ks.watches.unwatch(&self.watched, &self.dirty);
            self.watched.clear();
            self.watched_live.clear();
        }
        self.dirty.store(false, Ordering::SeqCst);
        self.info.lock().watching = 0;
    }
}
