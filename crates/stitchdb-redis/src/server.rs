//! The listener: one thread accepting clients, one thread per client (`conn`), and one
//! removing expired keys. A thread per client, because a command that waits for its commit
//! to be durable then waits on its own thread while other clients' commits join the same
//! sync (group commit); the engine's calls block, so an async runtime would have to hand
//! each of them to a thread pool anyway.

use crate::config::Config;
use crate::keyspace::{expire, Keyspace};
use crate::shared::Shared;
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use stitchdb::Db;

/// A running server.
pub struct Server {
    shared: Arc<Shared>,
    addr: SocketAddr,
    accept: JoinHandle<()>,
    expiry: JoinHandle<()>,
    /// One clone per client thread: the threads still running are its count less one.
    running: Arc<()>,
}

/// Stops a server from anywhere: a signal handler's thread, a hosting layer.
#[derive(Clone)]
pub struct Stopper {
    shared: Arc<Shared>,
}

impl Stopper {
    /// Asks the server to stop: it stops accepting, closes every connection and returns from
    /// [`Server::wait`].
    pub fn stop(&self) {
        self.shared.stop();
    }
}

/// Keys removed per database per expiry round.
const EXPIRE_BATCH: usize = 1000;

impl Server {
    /// Listens as `config` says, over `db`, and starts serving.
    pub fn start(db: Arc<Db>, config: Config) -> Result<Server, String> {
        let ip: IpAddr = config
            .bind
            .parse()
            .map_err(|e| format!("bind address {:?}: {e}", config.bind))?;
        let listener = TcpListener::bind((ip, config.port))
            .map_err(|e| format!("listening on {}:{}: {e}", config.bind, config.port))?;
        let addr = listener
            .local_addr()
            .map_err(|e| format!("listening socket: {e}"))?;
        // `CONFIG GET port` and `INFO` show the port listened on (when 0 picked one).
        let config = Config {
            port: addr.port(),
            ..config
        };
        let ks = Keyspace::new(db, config.databases);
        // The default database, and every database the store already holds, are opened (their
        // keys counted) now rather than during someone's first command, and the expiry
        // thread looks after them from the start.
        for n in ks.stored_databases() {
            ks.tables(n)
                .map_err(|e| format!("opening database {n}: {e:?}"))?;
        }
        let shared = Arc::new(Shared::new(ks, config));
        let running = Arc::new(());
        let accept = {
            let (shared, running) = (shared.clone(), running.clone());
            spawn("redis-accept", move || {
                accept_loop(listener, shared, running)
            })?
        };
        let expiry = {
            let shared = shared.clone();
            spawn("redis-expire", move || expire_loop(&shared))?
        };
        tracing::info!("serving the Redis protocol on {addr}");
        Ok(Server {
            shared,
            addr,
            accept,
            expiry,
            running,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// A handle that stops it.
    pub fn stopper(&self) -> Stopper {
        Stopper {
            shared: self.shared.clone(),
        }
    }

    /// Serves until stopped (by a [`Stopper`] or `SHUTDOWN`), then closes every connection,
    /// waits for their threads, and makes every commit durable.
    pub fn wait(self) -> Result<(), String> {
        while !self.shared.wait_stop(Duration::from_secs(3600)) {}
        // Wake the accept loop, which looks at the flag after each connection.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        let _ = self.accept.join();
        for c in self.shared.clients.lock().values() {
            let _ = c.stream.shutdown(Shutdown::Both);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Arc::strong_count(&self.running) > 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.expiry.join();
        self.shared
            .ks
            .db
            .sync()
            .map_err(|e| format!("making the last commits durable: {e}"))?;
        tracing::info!("stopped serving the Redis protocol on {}", self.addr);
        Ok(())
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, String> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map_err(|e| format!("starting a thread: {e}"))
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>, running: Arc<()>) {
    for stream in listener.incoming() {
        if shared.is_stopping() {
            return;
        }
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                // Out of descriptors, most likely: wait for some to be closed.
                tracing::warn!("accepting a client: {e}");
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        shared.count(&shared.stats.connections, 1);
        let max = shared.config.read().maxclients;
        // The client threads started and not ended, counted here: a thread registers its
        // client only once it runs, so a burst of connections would all pass a count of
        // the registered ones. (`running` is held by the server, this loop, and each.)
        if Arc::strong_count(&running) - 2 >= max {
            shared.count(&shared.stats.rejected, 1);
            let mut s = stream;
            let _ = std::io::Write::write_all(&mut s, b"-ERR max number of clients reached\r\n");
            continue;
        }
        let (shared, token) = (shared.clone(), running.clone());
        let started = spawn("redis-client", move || {
            crate::conn::serve(&shared, stream);
            drop(token);
        });
        if let Err(e) = started {
            tracing::warn!("{e}");
        }
    }
}

fn expire_loop(shared: &Shared) {
    loop {
        let hz = shared.config.read().hz.clamp(1, 500);
        if shared.wait_stop(Duration::from_millis(1000 / u64::from(hz))) {
            return;
        }
        for db in shared.ks.opened() {
            match expire::expire_due(&shared.ks, db, EXPIRE_BATCH) {
                Ok(n) => shared.count(&shared.stats.expired, n as u64),
                Err(e) => tracing::warn!("expiring keys of database {db}: {e:?}"),
            }
        }
    }
}
