//! Real clients, as separate processes, against our server: `redis-cli` (its plain commands,
//! `--raw`, `--no-raw`, `-3`, commands from standard input, `-x`, and `--pipe` mass
//! insertion), whose
//! output must be what it prints against Redis 7.0; and redis-py (`tests/clients/redis_py.py`:
//! pipelines with and without `MULTI`, `WATCH` with retries, hashes, lists, sorted sets and
//! RESP3), which must run as it runs against Redis.
//!
//! `redis-cli` comes with `redis-tools`; redis-py is the `redis` package of the Python that
//! `STITCHDB_PYTHON` names (`.ci/run` makes a virtual environment with it and sets that), or of
//! `python3`. A missing client fails the test, saying so.

mod support;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use support::redis::RedisServer;
use support::TestServer;

/// Runs `redis-cli` against `port` with `args`, `stdin` on its standard input.
fn redis_cli(port: u16, args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("running redis-cli ({e}): it comes with redis-tools, which .ci/run installs")
        });
    let mut input = child.stdin.take().expect("redis-cli's standard input");
    input.write_all(stdin).expect("writing to redis-cli");
    drop(input);
    child.wait_with_output().expect("redis-cli's output")
}

/// What a run printed, for comparing and for messages.
fn printed(o: &Output) -> String {
    format!(
        "status {:?}\n{}{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `redis-cli` invocations, in order: arguments, and standard input.
const INVOCATIONS: &[(&[&str], &str)] = &[
    (&["PING"], ""),
    (&["SET", "k", "v"], ""),
    (&["GET", "k"], ""),
    (&["GET", "missing"], ""),
    (&["--raw", "GET", "k"], ""),
    (&["SET", "n", "10"], ""),
    (&["INCR", "n"], ""),
    (&["INCRBYFLOAT", "n", "0.5"], ""),
    (&["HSET", "h", "f", "v", "g", "2"], ""),
    (&["HGET", "h", "f"], ""),
    (&["HLEN", "h"], ""),
    (&["RPUSH", "l", "a", "b", "c"], ""),
    (&["LRANGE", "l", "0", "-1"], ""),
    (&["ZADD", "z", "1.5", "m", "-2", "n"], ""),
    (&["ZRANGE", "z", "0", "-1", "WITHSCORES"], ""),
    (&["ZSCORE", "z", "m"], ""),
    (&["SADD", "s", "x"], ""),
    (&["SMEMBERS", "s"], ""),
    (&["GET", "h"], ""),
    (&["NOSUCH", "a"], ""),
    (&["-3", "PING"], ""),
    (&["-3", "GET", "missing"], ""),
    (&["-3", "HGET", "h", "f"], ""),
    (&["-3", "ZSCORE", "z", "m"], ""),
    (&["-3", "ZRANGE", "z", "0", "-1", "WITHSCORES"], ""),
    (&["-3", "SMEMBERS", "s"], ""),
    (&["-3", "EXISTS", "k", "h", "none"], ""),
    // As on a terminal: types shown.
    (&["--no-raw", "GET", "missing"], ""),
    (&["--no-raw", "INCR", "n2"], ""),
    (&["--no-raw", "HGETALL", "h"], ""),
    (&["--no-raw", "ZRANGE", "z", "0", "-1", "WITHSCORES"], ""),
    (&["--no-raw", "GET", "h"], ""),
    (&["--no-raw", "-3", "HGETALL", "h"], ""),
    (&["--no-raw", "-3", "ZSCORE", "z", "m"], ""),
    (
        &["--no-raw", "-3", "ZRANGE", "z", "0", "-1", "WITHSCORES"],
        "",
    ),
    (&["--no-raw", "-3", "SMEMBERS", "s"], ""),
    (&["--no-raw", "-3", "GET", "missing"], ""),
    (&["-n", "1", "SET", "k", "one"], ""),
    (&["-n", "1", "GET", "k"], ""),
    (&["GET", "k"], ""),
    (&[], "SET a 1\nGET a\nINCR a\nGET 'quoted key'\n"),
    (&["-x", "SET", "stdin"], "from standard input"),
    (&["GET", "stdin"], ""),
    (&["DBSIZE"], ""),
];

/// Every invocation prints against our server what it prints against Redis.
#[test]
fn redis_cli_prints_what_it_prints_against_redis() {
    let redis = RedisServer::start();
    let ours = TestServer::start();
    let mut wrong = Vec::new();
    for (args, stdin) in INVOCATIONS {
        let want = printed(&redis_cli(redis.addr.port(), args, stdin.as_bytes()));
        let got = printed(&redis_cli(ours.addr.port(), args, stdin.as_bytes()));
        if want != got {
            wrong.push(format!(
                "redis-cli {args:?} (stdin {stdin:?}):\n--- redis:\n{want}--- ours:\n{got}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// `redis-cli --pipe` sends a few thousand `SET`s as one stream and counts the replies.
#[test]
fn redis_cli_pipe_inserts_in_mass() {
    const N: usize = 5000;
    let ours = TestServer::start();
    let mut input = Vec::new();
    for i in 0..N {
        let (k, v) = (format!("key:{i}"), format!("value:{i}"));
        input.extend(support::Client::encode(&[
            b"SET",
            k.as_bytes(),
            v.as_bytes(),
        ]));
    }
    let out = redis_cli(ours.addr.port(), &["--pipe"], &input);
    let text = printed(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(&format!("errors: 0, replies: {N}")),
        "redis-cli --pipe said:\n{text}"
    );
    let mut c = ours.client();
    assert_eq!(c.cmd(&["DBSIZE"]), support::Value::Int(N as i64));
    assert_eq!(c.cmd(&["GET", "key:4321"]), support::bulk("value:4321"));
}

/// The Python with redis-py: `STITCHDB_PYTHON`, or `python3` if it has redis-py.
fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("STITCHDB_PYTHON") {
        return PathBuf::from(p);
    }
    let has_redis_py = Command::new("python3")
        .args(["-c", "import redis"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        has_redis_py,
        "no redis-py: set STITCHDB_PYTHON to a Python with the redis package; .ci/run makes \
         one (a virtual environment under target/ with `pip install redis`)"
    );
    PathBuf::from("python3")
}

fn redis_py(port: u16) -> Output {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients/redis_py.py");
    Command::new(python())
        .arg(script)
        .arg(port.to_string())
        .output()
        .expect("running Python")
}

/// redis-py's pipelines, transactions, `WATCH` retries, collection commands and RESP3 work
/// against our server as against Redis.
#[test]
fn redis_py_runs_as_against_redis() {
    let redis = RedisServer::start();
    let against_redis = redis_py(redis.addr.port());
    assert!(
        against_redis.status.success(),
        "the redis-py script fails against Redis itself:\n{}",
        printed(&against_redis)
    );
    let ours = TestServer::start();
    let out = redis_py(ours.addr.port());
    assert!(
        out.status.success(),
        "redis-py against our server:\n{}",
        printed(&out)
    );
}
