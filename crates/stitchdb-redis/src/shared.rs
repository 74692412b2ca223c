//! What the server's threads share: the keyspace, the settings, the clients, the counters,
//! and whether the server is stopping.

use crate::config::Config;
use crate::keyspace::Keyspace;
use parking_lot::{Condvar, Mutex, RwLock};
use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// What `CLIENT LIST` and `CLIENT INFO` show of a client, kept current by its thread.
#[derive(Debug, Clone)]
pub struct ClientInfo {
    /// `CLIENT ID`.
    pub id: u64,
    /// The peer's address.
    pub addr: SocketAddr,
    /// The server's side of the connection.
    pub laddr: SocketAddr,
    /// `CLIENT SETNAME`.
    pub name: Option<String>,
    /// The selected database.
    pub db: usize,
    /// When it connected.
    pub created: Instant,
    /// When it last sent a command.
    pub active: Instant,
    /// Its last command's name.
    pub last_cmd: String,
    /// Inside `MULTI`: commands queued (`None`: not inside).
    pub multi: Option<usize>,
    /// Keys it watches.
    pub watching: usize,
    /// RESP version.
    pub resp: u8,
    /// `CLIENT SETINFO LIB-NAME`.
    pub lib_name: String,
    /// `CLIENT SETINFO LIB-VER`.
    pub lib_ver: String,
}

/// A client as the server holds it.
pub struct Client {
    /// Its connection, to close from outside (`CLIENT KILL`, stopping).
    pub stream: TcpStream,
    /// What it shows.
    pub info: Arc<Mutex<ClientInfo>>,
    /// Set by `CLIENT KILL`: the client's thread closes it after the current command.
    pub killed: Arc<AtomicBool>,
}

/// Counters `INFO` shows.
#[derive(Default)]
pub struct Stats {
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Connections refused (`maxclients`).
    pub rejected: AtomicU64,
    /// Commands run.
    pub commands: AtomicU64,
    /// Bytes read from clients.
    pub net_in: AtomicU64,
    /// Bytes written to clients.
    pub net_out: AtomicU64,
    /// Keys removed by expiry.
    pub expired: AtomicU64,
    /// Commands retried after a conflict with a concurrent transaction.
    pub retries: AtomicU64,
}

/// The server's shared state.
pub struct Shared {
    /// The databases.
    pub ks: Keyspace,
    /// The settings (`CONFIG SET` changes them).
    pub config: RwLock<Config>,
    /// Connected clients by id.
    pub clients: Mutex<BTreeMap<u64, Client>>,
    /// The last client id handed out.
    pub next_id: AtomicU64,
    /// Counters.
    pub stats: Stats,
    /// When the server started.
    pub started: Instant,
    /// Set once, when the server is to stop; `stopped` is notified then.
    stopping: Mutex<bool>,
    stopped: Condvar,
    /// Unix seconds of the last commit made durable by a `SAVE` (for `LASTSAVE`).
    pub last_save: AtomicU64,
    /// Connections between reading requests and sending their replies: a connection about
    /// to sync waits a moment for them, so their commits join its sync (see `conn`).
    pub executing: std::sync::atomic::AtomicUsize,
    /// This run's random id (`INFO`'s `run_id`).
    pub run_id: String,
}

impl Shared {
    /// The shared state of a server over `ks` with `config`.
    pub fn new(ks: Keyspace, config: Config) -> Shared {
        Shared {
            ks,
            config: RwLock::new(config),
            clients: Mutex::new(BTreeMap::new()),
            next_id: AtomicU64::new(0),
            stats: Stats::default(),
            started: Instant::now(),
            stopping: Mutex::new(false),
            stopped: Condvar::new(),
            executing: std::sync::atomic::AtomicUsize::new(0),
            last_save: AtomicU64::new(crate::keyspace::ctx::now_ms() / 1000),
            run_id: (0..40)
                .map(|_| char::from(b"0123456789abcdef"[rand::random::<usize>() % 16]))
                .collect(),
        }
    }

    /// Asks the server to stop.
    pub fn stop(&self) {
        let mut s = self.stopping.lock();
        *s = true;
        self.stopped.notify_all();
    }

    /// Whether the server is stopping.
    pub fn is_stopping(&self) -> bool {
        *self.stopping.lock()
    }

    /// Waits until the server is asked to stop, or for `timeout`; whether it is stopping.
    pub fn wait_stop(&self, timeout: std::time::Duration) -> bool {
        let mut s = self.stopping.lock();
        if !*s {
            self.stopped.wait_for(&mut s, timeout);
        }
        *s
    }

    /// Counts a command run.
    pub fn count(&self, counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}
