//! A private real `redis-server` (the oracle): on a free port, in a temporary directory, with
//! no persistence (`--save '' --appendonly no`), killed when dropped, a failing test's
//! unwinding included.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a starting `redis-server` gets to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Ports tried before giving up (another process may take the free port between our probe
/// and the server's bind).
const START_ATTEMPTS: usize = 5;

/// A running `redis-server`.
pub struct RedisServer {
    pub addr: SocketAddr,
    child: Child,
    _dir: tempfile::TempDir,
}

impl RedisServer {
    /// Starts one; fails the test if `redis-server` is not installed.
    pub fn start() -> RedisServer {
        Self::with_args(&[])
    }

    /// Starts one with extra configuration arguments (`["--maxclients", "20"]`).
    pub fn with_args(extra: &[&str]) -> RedisServer {
        let mut last_error = String::new();
        for _ in 0..START_ATTEMPTS {
            match Self::try_start(extra) {
                Ok(s) => return s,
                Err(e) => last_error = e,
            }
        }
        panic!("redis-server did not start: {last_error}");
    }

    fn try_start(extra: &[&str]) -> Result<RedisServer, String> {
        let port = free_port();
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(dir.path())
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
                "redis-server is not on PATH: these tests compare against a real Redis 7.0; \
                 .ci/run installs it (apt-get install redis-server redis-tools)"
            ),
            Err(e) => return Err(format!("spawning redis-server: {e}")),
        };
        let mut server = RedisServer {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            child,
            _dir: dir,
        };
        server.wait_ready()?;
        Ok(server)
    }

    /// Waits until it accepts connections (or has exited: its port was taken).
    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("redis-server exited with {status}"));
            }
            if TcpStream::connect_timeout(&self.addr, Duration::from_millis(100)).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!("redis-server not accepting on {}", self.addr))
    }

    pub fn client(&self) -> super::Client {
        super::Client::connect(self.addr)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port no one listens on now: bound, then released.
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("binding a free port");
    l.local_addr().expect("a bound address").port()
}
