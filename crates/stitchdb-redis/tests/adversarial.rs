//! Clients that misbehave: malformed RESP (answered byte for byte as Redis 7.0 answers it:
//! Redis's protocol error, then the connection closed), requests cut off by a disconnect,
//! clients that pipeline without ever reading their replies (the server's memory must not
//! grow with what they ask for), more connections than `maxclients`, and clients that have not
//! authenticated sending big bulks or many arguments. Throughout, a well-behaved client on
//! another connection keeps getting the right replies, and the server never panics (a panic
//! in a connection's thread would show as that client's connection closing, and a final
//! `PING` checks the server still answers). Each test takes a few seconds at most.

mod support;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use support::redis::RedisServer;
use support::{bulk, ok, Client, TestServer, Value};

/// Held by the test that measures the process's memory and by the test that may use much of
/// it, so that one does not measure the other (the tests of a file share a process).
static MEMORY: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// How long a connection may stay quiet before an exchange counts it as left open.
const QUIET: Duration = Duration::from_millis(400);

/// A client that keeps writing and reading back its own key on a connection of its own
/// while a test misbehaves on others; it fails the test if a reply is ever wrong.
struct GoodClient {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl GoodClient {
    fn start(addr: SocketAddr, password: Option<&str>) -> GoodClient {
        let stop = Arc::new(AtomicBool::new(false));
        let mut c = Client::connect(addr);
        if let Some(p) = password {
            assert_eq!(c.cmd(&["AUTH", p]), ok());
        }
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut rounds = 0u64;
            // At least one round, however soon the test is done.
            loop {
                let v = rounds.to_string();
                assert_eq!(c.cmd(&["SET", "good", &v]), ok(), "round {rounds}");
                assert_eq!(c.cmd(&["GET", "good"]), bulk(&v), "round {rounds}");
                rounds += 1;
                if flag.load(Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            assert_eq!(c.cmd(&["PING"]), Value::Simple("PONG".into()));
        });
        GoodClient { stop, thread }
    }

    /// Stops it; fails the test if it saw a wrong reply or lost its connection.
    fn finish(self) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .expect("the well-behaved client got a wrong reply or lost its connection");
    }
}

/// Sends `input` on a new connection and reads until the server closes it or goes quiet:
/// what it replied, and whether it closed the connection.
fn exchange(addr: SocketAddr, input: &[u8]) -> (Vec<u8>, bool) {
    let mut s = TcpStream::connect(addr).expect("connecting");
    s.set_read_timeout(Some(QUIET)).expect("a read timeout");
    // A server that closes before reading it all may reset the connection under the write.
    let _ = s.write_all(input);
    let mut got = Vec::new();
    let mut buf = [0; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return (got, true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return (got, false)
            }
            Err(_) => return (got, true),
        }
    }
}

/// Malformed requests, by what is wrong with them.
fn malformed() -> Vec<(String, Vec<u8>)> {
    let mut cases: Vec<(String, Vec<u8>)> = [
        ("a count that is not a number", &b"*x\r\n"[..]),
        ("an empty count", b"*\r\n"),
        ("a count with a plus sign", b"*+1\r\n$4\r\nPING\r\n"),
        ("a count with a leading zero", b"*01\r\n$4\r\nPING\r\n"),
        ("a count over 2^31", b"*3000000000\r\n"),
        ("a negative count: skipped", b"*-5\r\nPING\r\n"),
        ("a negative bulk length", b"*1\r\n$-1\r\n"),
        ("a bulk length past i64", b"*1\r\n$99999999999999999999\r\n"),
        ("a bulk length over 512 MiB", b"*1\r\n$536870913\r\n"),
        (
            "a bulk length that is not a number",
            b"*1\r\n$3x\r\nfoo\r\n",
        ),
        ("an array inside a request", b"*2\r\n*1\r\n$4\r\nPING\r\n"),
        ("a simple string inside a request", b"*1\r\n+PING\r\n"),
        ("an integer inside a request", b"*1\r\n:1\r\n"),
        ("an empty command name", b"*1\r\n$0\r\n\r\n"),
        (
            "a bulk not followed by CRLF",
            b"*1\r\n$4\r\nPINGxx*1\r\n$4\r\nPING\r\n",
        ),
        ("an inline line ending in a bare LF", b"PING\n"),
        ("an unbalanced double quote", b"SET a \"b\r\n"),
        ("an unbalanced single quote", b"SET a 'b\r\n"),
        ("a closing quote followed by a letter", b"SET a \"b\"c\r\n"),
        ("escapes in quotes", b"ECHO \"a\\x41\\n\\\"\"\r\n"),
        (
            "a NUL before a line's end: Redis waits for the end",
            b"PI\x00NG\r\n",
        ),
        (
            "requests after a protocol error are not run",
            b"*x\r\nSET pwned 1\r\nPING\r\n",
        ),
        ("a NUL in a count line", b"*\x00\xff\xfe\r\n"),
        ("a NUL in a bulk length line", b"*1\r\n$\x004\r\nPING\r\n"),
    ]
    .iter()
    .map(|(what, input)| (what.to_string(), input.to_vec()))
    .collect();
    let long = |prefix: &[u8], fill: u8| {
        let mut v = prefix.to_vec();
        v.extend(std::iter::repeat_n(fill, 70 << 10));
        v
    };
    // Without its line end: Redis reads a long line in pieces and gives up past 64 KiB
    // without seeing it.
    cases.push(("a 70 KB inline line".into(), long(b"", b'a')));
    cases.push(("a 70 KB count line".into(), long(b"*", b'1')));
    cases.push(("a 70 KB bulk length line".into(), long(b"*1\r\n$", b'1')));
    // Inline lines of what splits arguments: spaces of every kind, quotes, escapes.
    let alphabet = b"ab1 \t\x0b\x0c\r\"'\\xn";
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for i in 0..12 {
        let mut garbage: Vec<u8> = (0..rng.gen_range(1..200))
            .map(|_| alphabet[rng.gen_range(0..alphabet.len())])
            .collect();
        garbage.extend_from_slice(b"\r\n");
        cases.push((format!("quotes and spaces {i}"), garbage));
    }
    cases
}

/// Sends each input on connections of its own to Redis and to our server, all at once;
/// the inputs (by what they are) where the two answered differently, or closed differently.
fn differences(redis: SocketAddr, ours: SocketAddr, cases: Vec<(String, Vec<u8>)>) -> Vec<String> {
    let runs: Vec<_> = cases
        .into_iter()
        .map(|(what, input)| {
            std::thread::spawn(move || (what, exchange(redis, &input), exchange(ours, &input)))
        })
        .collect();
    let mut wrong = Vec::new();
    for run in runs {
        let (what, want, got) = run.join().expect("an exchange");
        if want != got {
            wrong.push(format!(
                "{what}:\n  redis: {:?} closed={}\n  ours:  {:?} closed={}",
                String::from_utf8_lossy(&want.0),
                want.1,
                String::from_utf8_lossy(&got.0),
                got.1
            ));
        }
    }
    wrong
}

/// Every malformed request gets exactly Redis's reply (a protocol error, for most), and the
/// connection is closed where Redis closes it.
#[test]
fn malformed_requests_get_what_redis_answers() {
    let redis = RedisServer::start();
    let ours = TestServer::start();
    let good = GoodClient::start(ours.addr, None);
    let wrong = differences(redis.addr, ours.addr, malformed());
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let mut c = ours.client();
    assert_eq!(c.cmd(&["GET", "pwned"]), Value::Nil);
    good.finish();
}

/// Requests cut short by a disconnect, at every byte of a request, run nothing and leave
/// the server well.
#[test]
fn requests_cut_off_by_a_disconnect_run_nothing() {
    let s = TestServer::start();
    let good = GoodClient::start(s.addr, None);
    let request = Client::encode(&[b"SET", b"cut", b"value"]);
    for len in 0..request.len() {
        let mut c = TcpStream::connect(s.addr).expect("connecting");
        c.write_all(&request[..len]).expect("sending");
        // Half closed, then gone: the server sees the end of the stream mid-request.
        let _ = c.shutdown(Shutdown::Write);
        drop(c);
    }
    let mut c = s.client();
    assert_eq!(c.cmd(&["GET", "cut"]), Value::Nil);
    good.finish();
}

/// The process's resident memory in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status");
    kb << 10
}

/// The most a socket buffer of the kind (`tcp_wmem`, `tcp_rmem`) may grow to.
fn socket_buffer_max(kind: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/sys/net/ipv4/{kind}"))
        .ok()
        .and_then(|s| s.split_whitespace().nth(2).and_then(|n| n.parse().ok()))
        .unwrap_or(64 << 20)
}

/// Pipelines `SET c:<client>:<i> 1` and `GET big` on a connection until the server stops
/// reading it (a write blocks for a second), never reading a reply. Returns the connection,
/// to be dropped when the test is done with it.
fn pipeline_without_reading(addr: SocketAddr, client: usize) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connecting");
    s.set_write_timeout(Some(Duration::from_secs(1)))
        .expect("a write timeout");
    let mut i = 0u64;
    loop {
        let mut batch = Vec::new();
        for _ in 0..100 {
            let key = format!("c:{client}:{i}");
            batch.extend(Client::encode(&[b"SET", key.as_bytes(), b"1"]));
            batch.extend(Client::encode(&[b"GET", b"big"]));
            i += 1;
        }
        if s.write_all(&batch).is_err() {
            return s;
        }
    }
}

/// Clients that send requests and never read the replies hold their thread, not the
/// server's memory: each has at most `reply_chunk` of replies waiting besides what the
/// sockets hold.
#[test]
fn clients_that_never_read_do_not_grow_the_server() {
    const CLIENTS: usize = 8;
    const BIG: usize = 100 << 10;
    let s = TestServer::with(|c| c.durability = stitchdb::Durability::Written);
    let chunk = stitchdb_redis::Config::default().reply_chunk as u64;
    let mut c = s.client();
    assert_eq!(c.cmd_bytes(&[b"SET", b"big", &vec![b'x'; BIG]]), ok());
    let good = GoodClient::start(s.addr, None);
    let _alone = MEMORY.lock().unwrap_or_else(|e| e.into_inner());
    let before = rss();
    let started = Instant::now();
    let addr = s.addr;
    let stuck: Vec<TcpStream> = (0..CLIENTS)
        .map(|i| std::thread::spawn(move || pipeline_without_reading(addr, i)))
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().expect("a pipelining client"))
        .collect();
    let grown = rss().saturating_sub(before);
    assert!(
        grown < 200 << 20,
        "{CLIENTS} clients that never read grew the process by {} MiB",
        grown >> 20
    );
    // Each SET ran has its GET's reply sent or waiting: the replies of a stuck client are
    // bounded by the chunk, one reply, and the two sockets' buffers.
    let Value::Int(keys) = c.cmd(&["DBSIZE"]) else {
        panic!("DBSIZE")
    };
    let ran = keys as u64 - 2;
    let reply = BIG as u64 + 16;
    let per_client =
        (chunk + reply + socket_buffer_max("tcp_wmem") + socket_buffer_max("tcp_rmem")) / reply;
    assert!(
        ran <= CLIENTS as u64 * per_client,
        "{ran} requests ran for clients that read nothing (at most {per_client} each)"
    );
    drop(stuck);
    assert_eq!(c.cmd(&["PING"]), Value::Simple("PONG".into()));
    good.finish();
    assert!(started.elapsed() < Duration::from_secs(30));
}

/// Reads one line of a reply (up to its CRLF), or what came before the connection closed.
fn read_line(c: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let mut byte = [0];
    while !got.ends_with(b"\r\n") {
        match c.read(&mut byte) {
            Ok(1) => got.push(byte[0]),
            _ => break,
        }
    }
    got
}

/// Connections past `maxclients` are told so and closed; the ones before them are served,
/// and once they leave, others can come.
#[test]
fn a_flood_of_connections_past_maxclients_is_turned_away() {
    const MAX: usize = 20;
    let s = TestServer::with(|c| c.maxclients = MAX);
    let good = GoodClient::start(s.addr, None);
    let mut flood: Vec<TcpStream> = (0..3 * MAX)
        .map(|_| {
            let c = TcpStream::connect(s.addr).expect("connecting");
            c.set_read_timeout(Some(Duration::from_secs(5)))
                .expect("a read timeout");
            c
        })
        .collect();
    let mut served = 0;
    let mut turned_away = 0;
    for c in &mut flood {
        let _ = c.write_all(b"PING\r\n");
        match read_line(c).as_slice() {
            b"+PONG\r\n" => served += 1,
            b"-ERR max number of clients reached\r\n" => {
                // Closed: an end of stream, or a reset when the server closed with this
                // client's PING still unread (the kernel answers that with RST).
                let next = c.read(&mut [0]);
                assert!(
                    matches!(next, Ok(0))
                        || next.as_ref().is_err_and(|e| matches!(
                            e.kind(),
                            std::io::ErrorKind::ConnectionReset
                                | std::io::ErrorKind::ConnectionAborted
                        )),
                    "a turned away client is closed: {next:?}"
                );
                turned_away += 1;
            }
            other => panic!("a flooding client got {:?}", String::from_utf8_lossy(other)),
        }
    }
    // The well-behaved client holds one of the places.
    assert_eq!((served, turned_away), (MAX - 1, 2 * MAX + 1));
    drop(flood);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (reply, _) = exchange(s.addr, b"PING\r\n");
        if reply == b"+PONG\r\n" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no place again after the flood left"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    good.finish();
}

/// Before `AUTH`, a client can make the server hold little: a bulk over 16 KiB or more
/// than 10 arguments is a protocol error that closes it; under those limits it is told to
/// authenticate. All as Redis answers.
#[test]
fn unauthenticated_clients_cannot_send_much() {
    let redis = RedisServer::with_args(&["--requirepass", "secret"]);
    let s = TestServer::with(|c| c.requirepass = Some("secret".into()));
    let good = GoodClient::start(s.addr, Some("secret"));
    let big = vec![b'x'; 16 << 10];
    let mut over = big.clone();
    over.push(b'x');
    let keys: Vec<&[u8]> = std::iter::once(&b"DEL"[..])
        .chain(std::iter::repeat_n(&b"k"[..], 10))
        .collect();
    let cases = [
        ("a bulk over 16 KiB", Client::encode(&[b"SET", b"k", &over])),
        ("11 arguments", Client::encode(&keys)),
        ("a bulk of 16 KiB", Client::encode(&[b"SET", b"k", &big])),
        ("10 arguments", Client::encode(&keys[..10])),
        (
            "AUTH with a password over 16 KiB",
            Client::encode(&[b"AUTH", &over]),
        ),
    ];
    // Each a few times over, at once.
    let repeated: Vec<(String, Vec<u8>)> = (0..5)
        .flat_map(|i| {
            cases
                .iter()
                .map(move |(what, input)| (format!("{what} ({i})"), input.clone()))
        })
        .collect();
    let wrong = differences(redis.addr, s.addr, repeated);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // Once authenticated, the limits are the usual ones.
    let mut c = s.client();
    assert_eq!(c.cmd(&["AUTH", "secret"]), ok());
    assert_eq!(c.cmd_bytes(&[b"SET", b"k", &over]), ok());
    good.finish();
}

/// A client that empties its database over and over leaves a store that still takes writes:
/// each `FLUSHDB` is a few range deletes, and they must not pile up past what the store can
/// hold (600 of them once made it read-only: their upper bounds were 16 KiB keys, and the
/// store put all its range deletes in one extent, which outgrew a zone).
#[test]
fn flushing_over_and_over_keeps_the_store_writable() {
    let _alone = MEMORY.lock().unwrap_or_else(|e| e.into_inner());
    let s = TestServer::with(|c| c.durability = stitchdb::Durability::Written);
    let good = GoodClient::start(s.addr, None);
    let mut c = s.client();
    // Away from the well-behaved client's database.
    assert_eq!(c.cmd(&["SELECT", "1"]), ok());
    let mut batch = Vec::new();
    for i in 0..600 {
        batch.extend(Client::encode(&[b"SET", b"k", i.to_string().as_bytes()]));
        batch.extend(Client::encode(&[b"FLUSHDB"]));
    }
    c.send_raw(&batch);
    for i in 0..1200 {
        assert_eq!(c.read(), Some(ok()), "reply {i}");
    }
    assert_eq!(c.cmd(&["SET", "k", "v"]), ok());
    good.finish();
}
