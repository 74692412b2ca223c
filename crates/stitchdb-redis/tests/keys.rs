//! Key commands and expiry end to end, each reply as Redis 7.0.15 gives it (every case here
//! was checked against a real redis-server; the order of `KEYS` and `SCAN`, Redis's hash
//! order, is key order here).

#![allow(clippy::unwrap_used)]

mod fixtures;
mod support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use stitchdb_redis::keyspace::encoding::{members_prefix, Kind};
use support::{bulk, ok, Client, TestServer, Value};

const NOT_INT: &str = "ERR value is not an integer or out of range";
const SYNTAX: &str = "ERR syntax error";

fn e(msg: &str) -> Value {
    Value::Error(msg.into())
}

fn int(n: i64) -> Value {
    Value::Int(n)
}

fn simple(s: &str) -> Value {
    Value::Simple(s.into())
}

fn bulks(items: &[&str]) -> Value {
    Value::Array(items.iter().map(|s| bulk(s)).collect())
}

/// Runs each command and checks its reply.
fn expect(c: &mut Client, cases: &[(&[&str], Value)]) {
    for (cmd, want) in cases {
        assert_eq!(&c.cmd(cmd), want, "{cmd:?}");
    }
}

/// Waits up to 5 s for `f` to hold.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn int_of(v: Value) -> i64 {
    match v {
        Value::Int(n) => n,
        other => panic!("not an integer: {other:?}"),
    }
}

#[test]
fn del_unlink_exists_type() {
    let s = TestServer::start();
    fixtures::plant_list(&s.db, 0, b"list", 1, &[b"a", b"b"]);
    let mut c = s.client();
    expect(
        &mut c,
        &[
            (&["SET", "a", "1"], ok()),
            (&["SET", "b", "2"], ok()),
            (&["EXISTS", "a", "a", "a", "nokey"], int(3)),
            (&["EXISTS", "list"], int(1)),
            (&["TYPE", "a"], simple("string")),
            (&["TYPE", "list"], simple("list")),
            (&["TYPE", "nokey"], simple("none")),
            (&["DEL", "a", "b", "c", "a"], int(2)),
            (&["EXISTS", "a", "b"], int(0)),
            (&["DEL", "a"], int(0)),
            (&["SET", "a", "1"], ok()),
            (&["UNLINK", "a", "nokey"], int(1)),
            (&["DEL", "list"], int(1)),
            (&["TYPE", "list"], simple("none")),
            (
                &["DEL"],
                e("ERR wrong number of arguments for 'del' command"),
            ),
        ],
    );
    // The list's members went with it, in one range delete.
    assert!(fixtures::member_records(&s.db, 0, &members_prefix(b"list", 1)).is_empty());
    // An expired key does not exist, and deleting it does not count.
    assert_eq!(c.cmd(&["SET", "gone", "v", "PX", "30"]), ok());
    std::thread::sleep(Duration::from_millis(60));
    expect(
        &mut c,
        &[
            (&["EXISTS", "gone"], int(0)),
            (&["TYPE", "gone"], simple("none")),
            (&["DEL", "gone"], int(0)),
        ],
    );
}

#[test]
fn expire_options_and_their_errors() {
    let s = TestServer::start();
    let mut c = s.client();
    let invalid = |cmd: &str| e(&format!("ERR invalid expire time in '{cmd}' command"));
    expect(
        &mut c,
        &[
            (&["SET", "k", "v"], ok()),
            (
                &["EXPIRE", "k", "100", "foo"],
                e("ERR Unsupported option foo"),
            ),
            (
                &["EXPIRE", "k", "abc", "foo"],
                e("ERR Unsupported option foo"),
            ),
            (
                &["EXPIRE", "k", "100", "nx", "xx"],
                e("ERR NX and XX, GT or LT options at the same time are not compatible"),
            ),
            (
                &["EXPIRE", "k", "100", "nx", "gt"],
                e("ERR NX and XX, GT or LT options at the same time are not compatible"),
            ),
            (
                &["EXPIRE", "k", "100", "gt", "lt"],
                e("ERR GT and LT options at the same time are not compatible"),
            ),
            (&["EXPIRE", "k", "abc"], e(NOT_INT)),
            (&["EXPIRE", "k", "1.5"], e(NOT_INT)),
            (&["EXPIRE", "k", "9223372036854775807"], invalid("expire")),
            (&["EXPIRE", "k", "9223372036854774"], invalid("expire")),
            (&["EXPIRE", "k", "-9223372036854776"], invalid("expire")),
            (&["PEXPIRE", "k", "9223372036854775807"], invalid("pexpire")),
            (
                &["EXPIREAT", "k", "-9223372036854775808"],
                invalid("expireat"),
            ),
            (&["EXPIREAT", "k", "9223372036854776"], invalid("expireat")),
            (&["TTL", "k"], int(-1)),
            (&["EXPIREAT", "k", "9223372036854775"], int(1)),
            (&["EXPIRETIME", "k"], int(9223372036854775)),
            (&["PEXPIRETIME", "k"], int(9223372036854775000)),
            (&["PEXPIREAT", "k", "9223372036854775807"], int(1)),
            (&["PEXPIRETIME", "k"], int(9223372036854775807)),
            (&["EXPIRETIME", "k"], int(9223372036854776)),
            (&["EXPIRE", "nokey", "10"], int(0)),
            (&["PERSIST", "k"], int(1)),
            // Without a deadline: NX and LT pass, XX and GT do not.
            (&["EXPIRE", "k", "100", "xx"], int(0)),
            (&["EXPIRE", "k", "100", "gt"], int(0)),
            (&["EXPIRE", "k", "100", "lt"], int(1)),
            (&["TTL", "k"], int(100)),
            (&["EXPIRE", "k", "50", "lt"], int(1)),
            (&["EXPIRE", "k", "60", "lt"], int(0)),
            (&["EXPIRE", "k", "60", "gt"], int(1)),
            (&["EXPIRE", "k", "50", "gt"], int(0)),
            (&["EXPIRE", "k", "60", "nx"], int(0)),
            (&["EXPIRE", "k", "70", "GT", "XX"], int(1)),
            (&["EXPIRE", "k", "10", "XX", "XX"], int(1)),
            (&["TTL", "k"], int(10)),
            (&["EXPIREAT", "k", "4000000000"], int(1)),
            (&["EXPIREAT", "k", "4000000001", "lt"], int(0)),
            (&["EXPIREAT", "k", "3999999999", "lt"], int(1)),
            (&["EXPIREAT", "k", "3999999999", "gt"], int(0)),
            (&["EXPIREAT", "k", "4000000000", "gt"], int(1)),
            (&["EXPIRETIME", "k"], int(4000000000)),
            // EXPIRETIME rounds the millisecond deadline to the nearest second.
            (&["PEXPIREAT", "k", "4000000000499"], int(1)),
            (&["EXPIRETIME", "k"], int(4000000000)),
            (&["PEXPIREAT", "k", "4000000000500"], int(1)),
            (&["EXPIRETIME", "k"], int(4000000001)),
            (
                &["EXPIRE", "k"],
                e("ERR wrong number of arguments for 'expire' command"),
            ),
        ],
    );
}

#[test]
fn a_deadline_in_the_past_deletes_the_key() {
    let s = TestServer::start();
    let mut c = s.client();
    for cmd in [
        ["EXPIRE", "k", "0"],
        ["EXPIRE", "k", "-5"],
        ["PEXPIRE", "k", "-9223372036854775808"],
        ["EXPIREAT", "k", "1"],
        ["PEXPIREAT", "k", "-1"],
    ] {
        assert_eq!(c.cmd(&["SET", "k", "v", "EX", "100"]), ok());
        assert_eq!(c.cmd(&["DBSIZE"]), int(1));
        assert_eq!(c.cmd(&cmd), int(1), "{cmd:?}");
        assert_eq!(c.cmd(&["EXISTS", "k"]), int(0), "{cmd:?}");
        assert_eq!(c.cmd(&["DBSIZE"]), int(0), "{cmd:?}");
        assert_eq!(c.cmd(&cmd), int(0), "{cmd:?}");
    }
    assert!(fixtures::expiry_entries(&s.db, 0).is_empty());
}

#[test]
fn ttl_pttl_expiretime_persist() {
    let s = TestServer::start();
    let mut c = s.client();
    expect(
        &mut c,
        &[
            (&["TTL", "nokey"], int(-2)),
            (&["PTTL", "nokey"], int(-2)),
            (&["EXPIRETIME", "nokey"], int(-2)),
            (&["PEXPIRETIME", "nokey"], int(-2)),
            (&["PERSIST", "nokey"], int(0)),
            (&["SET", "k", "v"], ok()),
            (&["TTL", "k"], int(-1)),
            (&["PTTL", "k"], int(-1)),
            (&["EXPIRETIME", "k"], int(-1)),
            (&["PEXPIRETIME", "k"], int(-1)),
            (&["PERSIST", "k"], int(0)),
            // TTL rounds to the nearest second.
            (&["PEXPIRE", "k", "1600"], int(1)),
            (&["TTL", "k"], int(2)),
            (&["PEXPIRE", "k", "1400"], int(1)),
            (&["TTL", "k"], int(1)),
            (&["PERSIST", "k"], int(1)),
            (&["PERSIST", "k"], int(0)),
            (&["TTL", "k"], int(-1)),
        ],
    );
    let before = now_ms();
    assert_eq!(c.cmd(&["EXPIRE", "k", "100"]), int(1));
    let pttl = int_of(c.cmd(&["PTTL", "k"]));
    assert!((99_000..=100_000).contains(&pttl), "{pttl}");
    let at = int_of(c.cmd(&["PEXPIRETIME", "k"]));
    assert!(
        (before + 100_000..=now_ms() + 100_000).contains(&at),
        "{at}"
    );
    assert_eq!(c.cmd(&["EXPIRETIME", "k"]), int((at + 500) / 1000));
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[test]
fn the_expiry_index_follows_every_deadline_change() {
    let s = TestServer::start();
    let mut c = s.client();
    let entries = |s: &TestServer| -> Vec<Vec<u8>> {
        fixtures::expiry_entries(&s.db, 0)
            .into_iter()
            .map(|(_, k)| k)
            .collect()
    };
    assert_eq!(c.cmd(&["SET", "k", "v", "EX", "100"]), ok());
    assert_eq!(entries(&s), vec![b"k".to_vec()]);
    assert_eq!(c.cmd(&["EXPIRE", "k", "200"]), int(1));
    assert_eq!(c.cmd(&["PEXPIRE", "k", "300000"]), int(1));
    assert_eq!(entries(&s), vec![b"k".to_vec()]);
    assert_eq!(
        fixtures::expiry_entries(&s.db, 0)[0].0,
        int_of(c.cmd(&["PEXPIRETIME", "k"])) as u64
    );
    assert_eq!(c.cmd(&["SET", "k", "w", "KEEPTTL"]), ok());
    assert_eq!(entries(&s), vec![b"k".to_vec()]);
    assert_eq!(c.cmd(&["SET", "k", "w"]), ok());
    assert!(entries(&s).is_empty());
    assert_eq!(c.cmd(&["GETEX", "k", "EX", "100"]), bulk("w"));
    assert_eq!(entries(&s), vec![b"k".to_vec()]);
    assert_eq!(c.cmd(&["GETEX", "k", "PERSIST"]), bulk("w"));
    assert!(entries(&s).is_empty());
    assert_eq!(c.cmd(&["SETEX", "k", "100", "v"]), ok());
    assert_eq!(c.cmd(&["PERSIST", "k"]), int(1));
    assert!(entries(&s).is_empty());
    assert_eq!(c.cmd(&["SETEX", "k", "100", "v"]), ok());
    assert_eq!(c.cmd(&["RENAME", "k", "k2"]), ok());
    assert_eq!(entries(&s), vec![b"k2".to_vec()]);
    assert_eq!(c.cmd(&["COPY", "k2", "k3"]), int(1));
    assert_eq!(entries(&s), vec![b"k2".to_vec(), b"k3".to_vec()]);
    assert_eq!(c.cmd(&["MSET", "k2", "x"]), ok());
    assert_eq!(c.cmd(&["DEL", "k3"]), int(1));
    assert!(entries(&s).is_empty());
    assert_eq!(c.cmd(&["SETEX", "k", "100", "v"]), ok());
    assert_eq!(c.cmd(&["MOVE", "k", "1"]), int(1));
    assert!(entries(&s).is_empty());
    assert_eq!(fixtures::expiry_entries(&s.db, 1).len(), 1);
}

#[test]
fn active_expiry_removes_keys_nobody_reads() {
    let s = TestServer::start();
    let mut c = s.client();
    for i in 0..300 {
        let key = format!("k{i}");
        assert_eq!(c.cmd(&["SET", &key, "v", "PX", "100"]), ok());
    }
    assert_eq!(c.cmd(&["SET", "stays", "v"]), ok());
    assert_eq!(c.cmd(&["SELECT", "3"]), ok());
    assert_eq!(c.cmd(&["SET", "k", "v", "PX", "100"]), ok());
    assert_eq!(c.cmd(&["DBSIZE"]), int(1));
    eventually("database 3's key to expire", || {
        c.cmd(&["DBSIZE"]) == int(0)
    });
    assert_eq!(c.cmd(&["SELECT", "0"]), ok());
    eventually("database 0's keys to expire", || {
        c.cmd(&["DBSIZE"]) == int(1)
    });
    assert_eq!(c.cmd(&["KEYS", "*"]), bulks(&["stays"]));
    assert!(fixtures::expiry_entries(&s.db, 0).is_empty());
}

#[test]
fn deadlines_survive_a_restart() {
    let mut s = TestServer::start();
    {
        let mut c = s.client();
        assert_eq!(c.cmd(&["SET", "k", "v", "PX", "1500"]), ok());
        assert_eq!(c.cmd(&["SET", "later", "v", "EX", "1000"]), ok());
        assert_eq!(c.cmd(&["SET", "forever", "v"]), ok());
    }
    s.stop().unwrap();
    // Take the store's directory, and close the store with the server.
    let dir = std::mem::replace(&mut s.dir, tempfile::tempdir().unwrap());
    drop(s);
    let db = Arc::new(
        stitchdb::Db::open(dir.path().join("store"), stitchdb::Options::default()).unwrap(),
    );
    let config = stitchdb_redis::Config {
        port: 0,
        ..stitchdb_redis::Config::default()
    };
    let server = stitchdb_redis::Server::start(db, config).unwrap();
    let addr = server.local_addr();
    let stopper = server.stopper();
    let thread = std::thread::spawn(move || server.wait());
    let mut c = Client::connect(addr);
    let pttl = int_of(c.cmd(&["PTTL", "k"]));
    assert!((1..=1500).contains(&pttl), "{pttl}");
    assert_eq!(c.cmd(&["GET", "k"]), bulk("v"));
    assert_eq!(c.cmd(&["TTL", "later"]), int(1000));
    assert_eq!(c.cmd(&["TTL", "forever"]), int(-1));
    assert_eq!(c.cmd(&["DBSIZE"]), int(3));
    // Gone once due, by the active expiry: nobody reads it.
    eventually("the key to expire after the restart", || {
        c.cmd(&["DBSIZE"]) == int(2)
    });
    assert_eq!(c.cmd(&["GET", "k"]), Value::Nil);
    assert_eq!(c.cmd(&["PTTL", "k"]), int(-2));
    drop(c);
    stopper.stop();
    thread.join().unwrap().unwrap();
}

#[test]
fn rename_and_renamenx() {
    let s = TestServer::start();
    let mut c = s.client();
    expect(
        &mut c,
        &[
            (&["RENAME", "a", "b"], e("ERR no such key")),
            (&["RENAMENX", "a", "b"], e("ERR no such key")),
            (&["RENAME", "a", "a"], e("ERR no such key")),
            (&["SET", "a", "1"], ok()),
            (&["EXPIRE", "a", "100"], int(1)),
            (&["RENAME", "a", "a"], ok()),
            (&["RENAMENX", "a", "a"], int(0)),
            (&["RENAME", "a", "b"], ok()),
            (&["EXISTS", "a"], int(0)),
            (&["GET", "b"], bulk("1")),
            (&["TTL", "b"], int(100)),
            (&["SET", "c", "2"], ok()),
            (&["RENAMENX", "b", "c"], int(0)),
            (&["RENAMENX", "b", "d"], int(1)),
            (&["TTL", "d"], int(100)),
            (&["SET", "c", "3", "EX", "50"], ok()),
            (&["PERSIST", "d"], int(1)),
            // The destination's value and deadline are replaced by the source's.
            (&["RENAME", "d", "c"], ok()),
            (&["TTL", "c"], int(-1)),
            (&["GET", "c"], bulk("1")),
            (&["DBSIZE"], int(1)),
        ],
    );
}

#[test]
fn renaming_a_collection_moves_its_members() {
    let s = TestServer::start();
    fixtures::plant_list(&s.db, 0, b"l", 7, &[b"x", b"y", b"z"]);
    fixtures::plant_list(&s.db, 0, b"old", 8, &[b"gone"]);
    let mut c = s.client();
    assert_eq!(c.cmd(&["EXPIRE", "l", "100"]), int(1));
    assert_eq!(c.cmd(&["RENAME", "l", "a-much-longer-name"]), ok());
    assert_eq!(
        fixtures::list_items(&s.db, 0, b"a-much-longer-name"),
        Some(vec![b"x".to_vec(), b"y".to_vec(), b"z".to_vec()])
    );
    assert_eq!(c.cmd(&["TTL", "a-much-longer-name"]), int(100));
    assert_eq!(c.cmd(&["TYPE", "a-much-longer-name"]), simple("list"));
    assert!(fixtures::member_records(&s.db, 0, &members_prefix(b"l", 7)).is_empty());
    // Renamed over another list, whose members go.
    assert_eq!(c.cmd(&["RENAME", "a-much-longer-name", "old"]), ok());
    assert_eq!(
        fixtures::list_items(&s.db, 0, b"old").map(|i| i.len()),
        Some(3)
    );
    assert!(fixtures::member_records(&s.db, 0, &members_prefix(b"old", 8)).is_empty());
    // Over a string, and a string over the list.
    assert_eq!(c.cmd(&["SET", "s", "v"]), ok());
    assert_eq!(c.cmd(&["RENAME", "old", "s"]), ok());
    assert_eq!(c.cmd(&["TYPE", "s"]), simple("list"));
    assert_eq!(c.cmd(&["SET", "t", "v"]), ok());
    assert_eq!(c.cmd(&["RENAME", "t", "s"]), ok());
    assert_eq!(c.cmd(&["GET", "s"]), bulk("v"));
    let version = fixtures::meta(&s.db, 0, b"old");
    assert!(version.is_none());
}

#[test]
fn copy_with_its_options() {
    let s = TestServer::start();
    let mut c = s.client();
    expect(
        &mut c,
        &[
            (&["SET", "c", "2", "EX", "100"], ok()),
            (&["COPY", "c", "e"], int(1)),
            (&["TTL", "e"], int(100)),
            (&["GET", "e"], bulk("2")),
            (&["COPY", "c", "e"], int(0)),
            (&["SET", "c", "3"], ok()),
            (&["COPY", "c", "e", "replace"], int(1)),
            (&["GET", "e"], bulk("3")),
            (&["TTL", "e"], int(-1)),
            (&["COPY", "c", "e", "REPLACE", "replace"], int(1)),
            (&["COPY", "c", "e", "db", "1"], int(1)),
            (&["COPY", "c", "e", "db", "1"], int(0)),
            (
                &["COPY", "c", "e", "DB", "16"],
                e("ERR DB index is out of range"),
            ),
            (
                &["COPY", "c", "e", "db", "-1"],
                e("ERR DB index is out of range"),
            ),
            (&["COPY", "c", "e", "db", "x"], e(NOT_INT)),
            (
                &["COPY", "c", "e", "db", "99999999999"],
                e("ERR value is out of range, value must between -2147483648 and 2147483647"),
            ),
            (&["COPY", "c", "e", "foo"], e(SYNTAX)),
            (&["COPY", "c", "e", "db"], e(SYNTAX)),
            (&["COPY", "nokey", "e"], int(0)),
            (
                &["COPY", "c", "c"],
                e("ERR source and destination objects are the same"),
            ),
            (
                &["COPY", "c", "c", "db", "0"],
                e("ERR source and destination objects are the same"),
            ),
            (&["COPY", "c", "c", "db", "1"], int(1)),
            (&["SET", "c", "4"], ok()),
            (&["COPY", "c", "e", "db", "1", "replace"], int(1)),
            (&["DBSIZE"], int(2)),
            (&["SELECT", "1"], ok()),
            (&["GET", "e"], bulk("4")),
            (&["GET", "c"], bulk("3")),
            (&["DBSIZE"], int(2)),
            (
                &["COPY", "a"],
                e("ERR wrong number of arguments for 'copy' command"),
            ),
        ],
    );
}

#[test]
fn copying_a_collection_copies_its_members_under_a_new_version() {
    let s = TestServer::start();
    fixtures::plant_list(&s.db, 0, b"l", 7, &[b"x", b"y"]);
    let mut c = s.client();
    assert_eq!(c.cmd(&["COPY", "l", "l2"]), int(1));
    assert_eq!(c.cmd(&["COPY", "l", "l", "DB", "2"]), int(1));
    let items = Some(vec![b"x".to_vec(), b"y".to_vec()]);
    assert_eq!(fixtures::list_items(&s.db, 0, b"l"), items);
    assert_eq!(fixtures::list_items(&s.db, 0, b"l2"), items);
    assert_eq!(fixtures::list_items(&s.db, 2, b"l"), items);
    let version = |db, key: &[u8]| {
        let m = fixtures::meta(&s.db, db, key).unwrap();
        assert_eq!(m.kind, Kind::List);
        m.coll().unwrap().version
    };
    assert_ne!(version(0, b"l2"), 7);
    assert_ne!(version(2, b"l"), 7);
    // Deleting the copy leaves the original whole.
    assert_eq!(c.cmd(&["DEL", "l2"]), int(1));
    assert_eq!(fixtures::list_items(&s.db, 0, b"l"), items);
}

#[test]
fn move_to_another_database() {
    let s = TestServer::start();
    let mut c = s.client();
    expect(
        &mut c,
        &[
            (&["SET", "c", "1"], ok()),
            (
                &["MOVE", "c", "0"],
                e("ERR source and destination objects are the same"),
            ),
            (&["MOVE", "c", "16"], e("ERR DB index is out of range")),
            (&["MOVE", "c", "-1"], e("ERR DB index is out of range")),
            (&["MOVE", "c", "x"], e(NOT_INT)),
            (
                &["MOVE", "c", "99999999999"],
                e("ERR value is out of range, value must between -2147483648 and 2147483647"),
            ),
            (&["MOVE", "nokey", "1"], int(0)),
            (&["SET", "f", "9", "EX", "77"], ok()),
            (&["MOVE", "f", "2"], int(1)),
            (&["EXISTS", "f"], int(0)),
            (&["DBSIZE"], int(1)),
            (&["SET", "f", "1"], ok()),
            (&["MOVE", "f", "2"], int(0)),
            (&["GET", "f"], bulk("1")),
            (&["SELECT", "2"], ok()),
            (&["TTL", "f"], int(77)),
            (&["GET", "f"], bulk("9")),
            (&["DBSIZE"], int(1)),
            (&["MOVE", "f", "0"], int(0)),
            (&["MOVE", "f", "3"], int(1)),
            (&["DBSIZE"], int(0)),
        ],
    );
    fixtures::plant_list(&s.db, 0, b"l", 7, &[b"x"]);
    assert_eq!(c.cmd(&["SELECT", "0"]), ok());
    assert_eq!(c.cmd(&["MOVE", "l", "5"]), int(1));
    assert_eq!(c.cmd(&["TYPE", "l"]), simple("none"));
    assert_eq!(
        fixtures::list_items(&s.db, 5, b"l"),
        Some(vec![b"x".to_vec()])
    );
    assert!(fixtures::member_records(&s.db, 0, &members_prefix(b"l", 7)).is_empty());
}

#[test]
fn a_transaction_stays_in_its_database_across_copy_and_move() {
    let s = TestServer::start();
    let mut c = s.client();
    let queued = simple("QUEUED");
    expect(
        &mut c,
        &[
            (&["SET", "a", "1"], ok()),
            (&["MULTI"], ok()),
            (&["COPY", "a", "b", "DB", "1"], queued.clone()),
            (&["COPY", "a", "b", "DB", "99"], queued.clone()),
            (&["MOVE", "a", "2"], queued.clone()),
            (&["SET", "c", "3"], queued),
            (
                &["EXEC"],
                Value::Array(vec![
                    int(1),
                    e("ERR DB index is out of range"),
                    int(1),
                    ok(),
                ]),
            ),
            (&["GET", "c"], bulk("3")),
            (&["EXISTS", "a", "b"], int(0)),
            (&["SELECT", "1"], ok()),
            (&["GET", "b"], bulk("1")),
            (&["SELECT", "2"], ok()),
            (&["GET", "a"], bulk("1")),
        ],
    );
}

#[test]
fn a_watched_key_renamed_onto_aborts_exec() {
    let s = TestServer::start();
    let mut a = s.client();
    let mut b = s.client();
    assert_eq!(a.cmd(&["SET", "src", "1"]), ok());
    assert_eq!(a.cmd(&["WATCH", "dst"]), ok());
    assert_eq!(b.cmd(&["RENAME", "src", "dst"]), ok());
    assert_eq!(a.cmd(&["MULTI"]), ok());
    assert_eq!(a.cmd(&["GET", "dst"]), simple("QUEUED"));
    assert_eq!(a.cmd(&["EXEC"]), Value::Nil);
}

#[test]
fn concurrent_moves_and_writes_in_the_other_database_lose_nothing() {
    const ROUNDS: usize = 2000;
    const WRITERS: usize = 3;
    let s = TestServer::start();
    let mut setup = s.client();
    assert_eq!(setup.cmd(&["SET", "k", "mover"]), ok());
    let addr = s.addr;
    // One client moves `k` from database 0 to 1 and back. Others, in database 1, set `k`
    // if it is missing (a read, then a write) and delete their value again if it is still
    // theirs (WATCH). Whatever the interleaving, "mover" is never overwritten: it is in
    // exactly one database once they all stop. (Were `MOVE` to write database 1 without
    // holding its key, a `SETNX` that read `k` missing just before could overwrite it.)
    let mover = std::thread::spawn(move || {
        let mut c = Client::connect(addr);
        for _ in 0..ROUNDS {
            c.cmd(&["MOVE", "k", "1"]);
            assert_eq!(c.cmd(&["SELECT", "1"]), ok());
            c.cmd(&["MOVE", "k", "0"]);
            assert_eq!(c.cmd(&["SELECT", "0"]), ok());
        }
    });
    let writers: Vec<_> = (0..WRITERS)
        .map(|_| {
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                assert_eq!(c.cmd(&["SELECT", "1"]), ok());
                for _ in 0..ROUNDS {
                    c.cmd(&["SETNX", "k", "other"]);
                    assert_eq!(c.cmd(&["WATCH", "k"]), ok());
                    if c.cmd(&["GET", "k"]) == bulk("other") {
                        assert_eq!(c.cmd(&["MULTI"]), ok());
                        assert_eq!(c.cmd(&["DEL", "k"]), simple("QUEUED"));
                        c.cmd(&["EXEC"]);
                    } else {
                        assert_eq!(c.cmd(&["UNWATCH"]), ok());
                    }
                }
            })
        })
        .collect();
    mover.join().unwrap();
    for w in writers {
        w.join().unwrap();
    }
    let mut found = 0;
    for db in ["0", "1"] {
        assert_eq!(setup.cmd(&["SELECT", db]), ok());
        if setup.cmd(&["GET", "k"]) == bulk("mover") {
            found += 1;
        }
    }
    assert_eq!(found, 1);
}

#[test]
fn keys_matches_patterns() {
    let s = TestServer::start();
    let mut c = s.client();
    for k in [
        "hello", "hallo", "hxllo", "hllo", "heeeello", "user:1", "user:2", "a*b",
    ] {
        assert_eq!(c.cmd(&["SET", k, "v"]), ok());
    }
    assert_eq!(c.cmd(&["SET", "user:3", "v", "PX", "1"]), ok());
    std::thread::sleep(Duration::from_millis(10));
    expect(
        &mut c,
        &[
            (&["KEYS", "h?llo"], bulks(&["hallo", "hello", "hxllo"])),
            (
                &["KEYS", "h*llo"],
                bulks(&["hallo", "heeeello", "hello", "hllo", "hxllo"]),
            ),
            (&["KEYS", "h[ae]llo"], bulks(&["hallo", "hello"])),
            (&["KEYS", "h[^e]llo"], bulks(&["hallo", "hxllo"])),
            (&["KEYS", "h[a-b]llo"], bulks(&["hallo"])),
            (&["KEYS", "user:*"], bulks(&["user:1", "user:2"])),
            (&["KEYS", "a\\*b"], bulks(&["a*b"])),
            (&["KEYS", "nomatch*"], bulks(&[])),
            (&["KEYS", "hello"], bulks(&["hello"])),
            (
                &["KEYS", "*"],
                bulks(&[
                    "a*b", "hallo", "heeeello", "hello", "hllo", "hxllo", "user:1", "user:2",
                ]),
            ),
        ],
    );
    assert_eq!(c.cmd_bytes(&[b"SET", b"\xff\x00", b"v"]), ok());
    assert_eq!(
        c.cmd_bytes(&[b"KEYS", b"\xff*"]),
        Value::Array(vec![Value::Bulk(b"\xff\x00".to_vec())])
    );
}

/// Every key `SCAN` returns with `options`, following the cursor to 0, in order.
fn scan_all(c: &mut Client, options: &[&str]) -> Vec<String> {
    let mut cursor = "0".to_string();
    let mut out = Vec::new();
    loop {
        let mut cmd = vec!["SCAN", cursor.as_str()];
        cmd.extend_from_slice(options);
        let Value::Array(reply) = c.cmd(&cmd) else {
            panic!("SCAN reply");
        };
        let Value::Array(items) = &reply[1] else {
            panic!("SCAN items");
        };
        out.extend(items.iter().map(Value::text));
        cursor = reply[0].text();
        if cursor == "0" {
            return out;
        }
    }
}

#[test]
fn scan_walks_every_key_once() {
    let s = TestServer::start();
    fixtures::plant_list(&s.db, 0, b"key:list", 1, &[b"x"]);
    let mut c = s.client();
    let mut all = BTreeSet::new();
    for i in 0..500 {
        let key = format!("key:{i}");
        assert_eq!(c.cmd(&["SET", &key, "v"]), ok());
        all.insert(key);
    }
    assert_eq!(c.cmd(&["SET", "other", "v"]), ok());
    assert_eq!(c.cmd(&["SET", "key:expired", "v", "PX", "1"]), ok());
    std::thread::sleep(Duration::from_millis(10));
    for count in ["1", "7", "10", "1000"] {
        let got = scan_all(
            &mut c,
            &["COUNT", count, "MATCH", "key:*", "TYPE", "string"],
        );
        let set: BTreeSet<String> = got.iter().cloned().collect();
        assert_eq!(set.len(), got.len(), "no key twice");
        assert_eq!(set, all, "COUNT {count}");
    }
    assert_eq!(scan_all(&mut c, &["TYPE", "LIST"]), vec!["key:list"]);
    assert_eq!(scan_all(&mut c, &["TYPE", "hash"]), Vec::<String>::new());
    assert_eq!(scan_all(&mut c, &["MATCH", "oth*"]), vec!["other"]);
    assert_eq!(scan_all(&mut c, &[]).len(), 502);
    // A small COUNT looks at that many keys per call.
    let Value::Array(reply) = c.cmd(&["SCAN", "0", "COUNT", "3"]) else {
        panic!("SCAN reply");
    };
    assert_ne!(reply[0], bulk("0"));
    assert_eq!(reply[1], bulks(&["key:0", "key:1", "key:10"]));
    // Keys deleted ahead of the cursor are not returned; those present throughout are.
    let Value::Array(reply) = c.cmd(&["SCAN", "0", "COUNT", "100"]) else {
        panic!("SCAN reply");
    };
    for i in 300..400 {
        assert_eq!(c.cmd(&["DEL", &format!("key:{i}")]), int(1));
    }
    let cursor = reply[0].text();
    let Value::Array(rest) = c.cmd(&["SCAN", &cursor, "COUNT", "1000"]) else {
        panic!("SCAN reply");
    };
    assert_eq!(rest[0], bulk("0"));
    let Value::Array(rest) = &rest[1] else {
        panic!("SCAN items");
    };
    assert_eq!(rest.len(), 502 - 100 - 100);
    assert!(!rest.contains(&bulk("key:350")));
}

#[test]
fn scan_refuses_bad_arguments() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["SET", "a", "1"]), ok());
    let empty_scan = Value::Array(vec![bulk("0"), bulks(&["a"])]);
    expect(
        &mut c,
        &[
            (&["SCAN", "abc"], e("ERR invalid cursor")),
            (&["SCAN", "18446744073709551616"], e("ERR invalid cursor")),
            (&["SCAN", " 0"], e("ERR invalid cursor")),
            (&["SCAN", "0", "count", "0"], e(SYNTAX)),
            (&["SCAN", "0", "count", "-1"], e(SYNTAX)),
            (&["SCAN", "0", "count", "abc"], e(NOT_INT)),
            (&["SCAN", "0", "count"], e(SYNTAX)),
            (&["SCAN", "0", "match"], e(SYNTAX)),
            (&["SCAN", "0", "foo", "bar"], e(SYNTAX)),
            (&["SCAN", "0", "count", "abc", "match"], e(NOT_INT)),
            (
                &["SCAN", "0", "type", "foo"],
                Value::Array(vec![bulk("0"), bulks(&[])]),
            ),
            (&["SCAN", "0"], empty_scan.clone()),
            (&["SCAN", "00"], empty_scan.clone()),
            (&["SCAN", "+0"], empty_scan.clone()),
            // An unknown cursor starts over (Redis's would resume somewhere in its table).
            (&["SCAN", "18446744073709551615"], empty_scan.clone()),
            (&["SCAN", "-1"], empty_scan),
        ],
    );
}

#[test]
fn randomkey_draws_live_keys_about_evenly() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["RANDOMKEY"]), Value::Nil);
    for i in 0..100 {
        assert_eq!(c.cmd(&["SET", &format!("key:{i:02}"), "v"]), ok());
    }
    let mut seen = BTreeSet::new();
    for _ in 0..1000 {
        match c.cmd(&["RANDOMKEY"]) {
            Value::Bulk(k) => {
                seen.insert(k);
            }
            other => panic!("RANDOMKEY: {other:?}"),
        }
    }
    assert!(seen.len() >= 60, "only {} of 100 keys drawn", seen.len());
    assert_eq!(c.cmd(&["FLUSHDB"]), ok());
    assert_eq!(c.cmd(&["SET", "only", "v"]), ok());
    assert_eq!(c.cmd(&["RANDOMKEY"]), bulk("only"));
    // Expired keys are never drawn, even before they are removed.
    assert_eq!(c.cmd(&["FLUSHDB"]), ok());
    for k in ["a", "b", "c"] {
        assert_eq!(c.cmd(&["SET", k, "v", "PX", "1"]), ok());
    }
    std::thread::sleep(Duration::from_millis(10));
    assert_eq!(c.cmd(&["RANDOMKEY"]), Value::Nil);
    assert_eq!(c.cmd(&["SET", "b2", "v"]), ok());
    for _ in 0..20 {
        assert_eq!(c.cmd(&["RANDOMKEY"]), bulk("b2"));
    }
}
