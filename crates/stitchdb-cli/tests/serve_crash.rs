//! `stitchdb serve` killed with SIGKILL while clients write: every write a client was told
//! was done must be there after a restart on the same store. Writers on connections of
//! their own `SET` (new keys), `INCR`, `HSET`, `RPUSH`, `ZADD`, set long TTLs (`SET ... PX`,
//! `EXPIRE`) and short ones, recording each acknowledged write; the server is killed mid-run,
//! restarted, and checked: each `SET` key holds its value, each counter is at least its last
//! acknowledged value, each list starts with its acknowledged pushes, each field and member
//! is there, each long TTL survived (`PTTL` positive and at most what was set), and each key
//! with a short TTL is gone once its deadline has passed. Then the next round writes more.
//! 3 rounds, or `STITCHDB_SERVE_CRASH_ROUNDS`.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WRITERS: usize = 4;
/// A TTL that outlives the test.
const LONG_TTL_MS: i64 = 3_600_000;
/// A TTL that runs out during the test.
const SHORT_TTL_MS: u64 = 700;

/// `stitchdb serve` in a child process, killed when dropped.
struct Served {
    child: Child,
    addr: SocketAddr,
}

impl Served {
    /// Starts `stitchdb serve STORE --port 0` and waits for its ready line.
    fn start(store: &Path, create: bool) -> Served {
        let mut child = Command::new(env!("CARGO_BIN_EXE_stitchdb"))
            .arg("serve")
            .arg(store)
            .args(["--port", "0"])
            .args(create.then_some("--create"))
            .env_remove("RUST_LOG")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim_end()
            .strip_prefix("ready: redis ")
            .unwrap_or_else(|| panic!("no ready line: {line:?}"))
            .parse()
            .unwrap();
        Served { child, addr }
    }

    /// SIGKILL, and wait for the process to be gone.
    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A reply.
#[derive(Debug, Clone, PartialEq)]
enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
}

impl Reply {
    fn text(&self) -> String {
        match self {
            Reply::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
            other => format!("{other:?}"),
        }
    }
}

/// A RESP client.
struct Conn {
    stream: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Conn {
    fn open(addr: SocketAddr) -> Conn {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let reader = BufReader::new(stream.try_clone().unwrap());
        Conn { stream, reader }
    }

    fn send(&mut self, cmds: &[Vec<String>]) -> std::io::Result<()> {
        let mut out = Vec::new();
        for args in cmds {
            out.extend(format!("*{}\r\n", args.len()).bytes());
            for a in args {
                out.extend(format!("${}\r\n{a}\r\n", a.len()).bytes());
            }
        }
        self.stream.write_all(&out)
    }

    /// One command; an error if the connection broke (the server was killed).
    fn call(&mut self, args: &[&str]) -> std::io::Result<Reply> {
        self.send(&[args.iter().map(|a| a.to_string()).collect()])?;
        self.read()
    }

    /// Many commands, pipelined.
    fn pipeline(&mut self, cmds: &[Vec<String>]) -> Vec<Reply> {
        let mut replies = Vec::with_capacity(cmds.len());
        for batch in cmds.chunks(1000) {
            self.send(batch).unwrap();
            for _ in batch {
                replies.push(self.read().unwrap());
            }
        }
        replies
    }

    fn read(&mut self) -> std::io::Result<Reply> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let body = line[1..].trim_end().to_string();
        let n = || body.parse::<i64>().unwrap();
        Ok(match line.as_bytes()[0] {
            b'+' => Reply::Simple(body),
            b'-' => Reply::Error(body),
            b':' => Reply::Int(n()),
            b'$' if n() < 0 => Reply::Bulk(None),
            b'$' => {
                let mut buf = vec![0; n() as usize + 2];
                self.reader.read_exact(&mut buf)?;
                buf.truncate(n() as usize);
                Reply::Bulk(Some(buf))
            }
            b'*' => Reply::Array((0..n()).map(|_| self.read()).collect::<Result<_, _>>()?),
            other => panic!("a reply of type {:?}", other as char),
        })
    }
}

/// The writes the server acknowledged.
#[derive(Default)]
struct Acked {
    /// `SET key value` (a new key each time).
    strings: Vec<(String, String)>,
    /// `INCR key`: the last value acknowledged.
    counters: BTreeMap<String, i64>,
    /// `HSET key field value`.
    fields: Vec<(String, String, String)>,
    /// `RPUSH key element`: the elements acknowledged, in order.
    lists: BTreeMap<String, Vec<String>>,
    /// `ZADD key score member`.
    members: Vec<(String, String, i64)>,
    /// Keys given a TTL (`SET ... PX`, `EXPIRE`) of this many milliseconds.
    ttls: Vec<(String, i64)>,
    /// Keys given a short TTL, and when it runs out.
    short: Vec<(String, Instant)>,
}

/// Writes until the server goes away, recording what it acknowledged.
fn write(addr: SocketAddr, prefix: String, acked: Arc<Mutex<Acked>>) {
    let mut c = Conn::open(addr);
    for i in 0i64.. {
        let (key, value) = (format!("{prefix}:{i}"), format!("v{i}"));
        let done = match i % 8 {
            0 => c.call(&["SET", &key, &value]).map(|r| {
                assert_eq!(r, Reply::Simple("OK".into()), "SET");
                acked.lock().unwrap().strings.push((key, value));
            }),
            1 => {
                let counter = format!("{prefix}:counter");
                c.call(&["INCR", &counter]).map(|r| {
                    let Reply::Int(n) = r else {
                        panic!("INCR: {r:?}")
                    };
                    acked.lock().unwrap().counters.insert(counter, n);
                })
            }
            2 => {
                let hash = format!("{prefix}:hash");
                c.call(&["HSET", &hash, &key, &value]).map(|r| {
                    assert_eq!(r, Reply::Int(1), "HSET");
                    acked.lock().unwrap().fields.push((hash, key, value));
                })
            }
            3 => {
                let list = format!("{prefix}:list");
                c.call(&["RPUSH", &list, &value]).map(|r| {
                    let mut a = acked.lock().unwrap();
                    let pushed = a.lists.entry(list).or_default();
                    pushed.push(value);
                    assert_eq!(r, Reply::Int(pushed.len() as i64), "RPUSH");
                })
            }
            4 => {
                let zset = format!("{prefix}:zset");
                c.call(&["ZADD", &zset, &i.to_string(), &key]).map(|r| {
                    assert_eq!(r, Reply::Int(1), "ZADD");
                    acked.lock().unwrap().members.push((zset, key, i));
                })
            }
            5 => {
                let ttl = LONG_TTL_MS.to_string();
                c.call(&["SET", &key, &value, "PX", &ttl]).map(|r| {
                    assert_eq!(r, Reply::Simple("OK".into()), "SET PX");
                    acked.lock().unwrap().ttls.push((key, LONG_TTL_MS));
                })
            }
            6 => c.call(&["SET", &key, &value]).and_then(|r| {
                assert_eq!(r, Reply::Simple("OK".into()), "SET");
                let r = c.call(&["EXPIRE", &key, &(LONG_TTL_MS / 1000).to_string()])?;
                assert_eq!(r, Reply::Int(1), "EXPIRE");
                acked.lock().unwrap().ttls.push((key, LONG_TTL_MS));
                Ok(())
            }),
            _ => {
                let deadline = Instant::now() + Duration::from_millis(SHORT_TTL_MS);
                let ttl = SHORT_TTL_MS.to_string();
                c.call(&["SET", &key, &value, "PX", &ttl]).map(|r| {
                    assert_eq!(r, Reply::Simple("OK".into()), "SET PX");
                    acked.lock().unwrap().short.push((key, deadline));
                })
            }
        };
        if done.is_err() {
            return;
        }
    }
}

/// Checks that everything acknowledged is there; forgets the short TTLs checked.
fn check(addr: SocketAddr, acked: &mut Acked) {
    let mut c = Conn::open(addr);
    let gets: Vec<Vec<String>> = acked
        .strings
        .iter()
        .map(|(k, _)| vec!["GET".into(), k.clone()])
        .collect();
    for ((key, value), got) in acked.strings.iter().zip(c.pipeline(&gets)) {
        assert_eq!(got.text(), *value, "the acknowledged SET of {key}");
    }
    for (key, n) in &acked.counters {
        let got = c.call(&["GET", key]).unwrap().text();
        assert!(got.parse::<i64>().unwrap() >= *n, "{key} is {got}, was {n}");
    }
    let hgets: Vec<Vec<String>> = acked
        .fields
        .iter()
        .map(|(k, f, _)| vec!["HGET".into(), k.clone(), f.clone()])
        .collect();
    for ((key, field, value), got) in acked.fields.iter().zip(c.pipeline(&hgets)) {
        assert_eq!(got.text(), *value, "the acknowledged HSET of {key} {field}");
    }
    for (key, pushed) in &acked.lists {
        let Reply::Array(got) = c.call(&["LRANGE", key, "0", "-1"]).unwrap() else {
            panic!("LRANGE {key}")
        };
        let got: Vec<String> = got.iter().map(Reply::text).collect();
        assert!(
            got.starts_with(pushed),
            "{key} holds {} elements, {} acknowledged",
            got.len(),
            pushed.len()
        );
    }
    let scores: Vec<Vec<String>> = acked
        .members
        .iter()
        .map(|(k, m, _)| vec!["ZSCORE".into(), k.clone(), m.clone()])
        .collect();
    for ((key, member, score), got) in acked.members.iter().zip(c.pipeline(&scores)) {
        assert_eq!(got.text(), score.to_string(), "ZADD {key} {member}");
    }
    let pttls: Vec<Vec<String>> = acked
        .ttls
        .iter()
        .map(|(k, _)| vec!["PTTL".into(), k.clone()])
        .collect();
    for ((key, ttl), got) in acked.ttls.iter().zip(c.pipeline(&pttls)) {
        let Reply::Int(left) = got else {
            panic!("PTTL {key}: {got:?}")
        };
        assert!(
            0 < left && left <= *ttl,
            "{key}'s TTL is {left} ms of {ttl}"
        );
    }
    // The server's deadline comes a round trip after the writer's.
    if let Some(last) = acked.short.iter().map(|(_, d)| *d).max() {
        let margin = Duration::from_millis(200);
        std::thread::sleep((last + margin).saturating_duration_since(Instant::now()));
    }
    for (key, _) in acked.short.drain(..) {
        let got = c.call(&["GET", &key]).unwrap();
        assert_eq!(got, Reply::Bulk(None), "{key} outlived its TTL");
    }
}

#[test]
fn acknowledged_writes_survive_a_kill_9() {
    let rounds: usize = std::env::var("STITCHDB_SERVE_CRASH_ROUNDS")
        .map(|v| v.parse().unwrap())
        .unwrap_or(3);
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s.store");
    let mut acked = Acked::default();
    let mut served = Served::start(&store, true);
    for round in 0..rounds {
        let shared = Arc::new(Mutex::new(std::mem::take(&mut acked)));
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (addr, shared) = (served.addr, shared.clone());
                std::thread::spawn(move || write(addr, format!("r{round}:w{w}"), shared))
            })
            .collect();
        // Killed at a different moment each round.
        std::thread::sleep(Duration::from_millis(300 + 450 * (round as u64 % 3)));
        // The writers end when their connections break.
        served.kill();
        for w in writers {
            w.join().expect("a writer got a wrong reply");
        }
        acked = Arc::try_unwrap(shared).ok().unwrap().into_inner().unwrap();
        assert!(
            acked
                .strings
                .iter()
                .any(|(k, _)| k.starts_with(&format!("r{round}:"))),
            "nothing was acknowledged in round {round}"
        );
        let writes = acked.strings.len()
            + acked.counters.len()
            + acked.fields.len()
            + acked.lists.values().map(Vec::len).sum::<usize>()
            + acked.members.len()
            + acked.ttls.len()
            + acked.short.len();
        println!("round {round}: killed with {writes} writes to check");
        served = Served::start(&store, false);
        check(served.addr, &mut acked);
    }
}
