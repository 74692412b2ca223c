//! Shared by the integration tests: a server over a fresh store on a free port, and a plain
//! RESP client that reads replies as values.

#![allow(dead_code, clippy::unwrap_used)]

pub mod redis;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;
use stitchdb_redis::{Config, Server, Stopper};

/// A reply as the tests see it.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    Nil,
    Array(Vec<Value>),
    Map(Vec<(Value, Value)>),
    Set(Vec<Value>),
    Double(String),
    Bool(bool),
    Verbatim(String),
}

impl Value {
    /// A bulk string's text.
    pub fn text(&self) -> String {
        match self {
            Value::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
            Value::Simple(s) | Value::Error(s) | Value::Verbatim(s) | Value::Double(s) => s.clone(),
            Value::Int(n) => n.to_string(),
            other => format!("{other:?}"),
        }
    }
}

/// A server over a store in a temporary directory, stopped when dropped.
pub struct TestServer {
    pub addr: SocketAddr,
    pub db: Arc<stitchdb::Db>,
    stopper: Stopper,
    thread: Option<std::thread::JoinHandle<Result<(), String>>>,
    pub dir: tempfile::TempDir,
}

impl TestServer {
    pub fn start() -> TestServer {
        Self::with(|_| {})
    }

    pub fn with(configure: impl FnOnce(&mut Config)) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(
            stitchdb::Db::create(dir.path().join("store"), stitchdb::Options::default()).unwrap(),
        );
        let mut config = Config {
            port: 0,
            ..Config::default()
        };
        configure(&mut config);
        let server = Server::start(db.clone(), config).unwrap();
        let addr = server.local_addr();
        let stopper = server.stopper();
        let thread = Some(std::thread::spawn(move || server.wait()));
        TestServer {
            addr,
            db,
            stopper,
            thread,
            dir,
        }
    }

    pub fn client(&self) -> Client {
        Client::connect(self.addr)
    }

    /// Stops the server and waits for it.
    pub fn stop(&mut self) -> Result<(), String> {
        self.stopper.stop();
        match self.thread.take() {
            Some(t) => t.join().unwrap(),
            None => Ok(()),
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// A RESP client.
pub struct Client {
    pub stream: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let reader = BufReader::new(stream.try_clone().unwrap());
        Client { stream, reader }
    }

    /// The encoding of one request.
    pub fn encode(args: &[&[u8]]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        out
    }

    /// Sends a command and reads its reply.
    pub fn cmd(&mut self, args: &[&str]) -> Value {
        let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.cmd_bytes(&raw)
    }

    pub fn cmd_bytes(&mut self, args: &[&[u8]]) -> Value {
        self.send_raw(&Self::encode(args));
        self.read().expect("a reply")
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// Reads one reply (`None`: the server closed the connection).
    pub fn read(&mut self) -> Option<Value> {
        let mut line = Vec::new();
        if self.reader.read_until(b'\n', &mut line).ok()? == 0 {
            return None;
        }
        let body = String::from_utf8_lossy(&line[1..line.len() - 2]).into_owned();
        Some(match line[0] {
            b'+' => Value::Simple(body),
            b'-' => Value::Error(body),
            b':' => Value::Int(body.parse().unwrap()),
            b',' => Value::Double(body),
            b'#' => Value::Bool(body == "t"),
            b'_' => Value::Nil,
            b'$' | b'=' => {
                let n: i64 = body.parse().unwrap();
                if n < 0 {
                    return Some(Value::Nil);
                }
                let mut buf = vec![0; n as usize + 2];
                self.reader.read_exact(&mut buf).ok()?;
                buf.truncate(n as usize);
                if line[0] == b'=' {
                    Value::Verbatim(String::from_utf8_lossy(&buf[4..]).into_owned())
                } else {
                    Value::Bulk(buf)
                }
            }
            b'*' | b'~' => {
                let n: i64 = body.parse().unwrap();
                if n < 0 {
                    return Some(Value::Nil);
                }
                let items = (0..n).map(|_| self.read()).collect::<Option<Vec<_>>>()?;
                if line[0] == b'~' {
                    Value::Set(items)
                } else {
                    Value::Array(items)
                }
            }
            b'%' => {
                let n: i64 = body.parse().unwrap();
                let mut pairs = Vec::new();
                for _ in 0..n {
                    pairs.push((self.read()?, self.read()?));
                }
                Value::Map(pairs)
            }
            other => panic!("unexpected reply type {:?}", other as char),
        })
    }
}

pub fn bulk(s: &str) -> Value {
    Value::Bulk(s.as_bytes().to_vec())
}

pub fn ok() -> Value {
    Value::Simple("OK".into())
}
