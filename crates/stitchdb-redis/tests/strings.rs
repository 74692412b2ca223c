//! String and bitmap commands end to end, each reply as Redis 7.0.15 gives it (every case
//! here was checked against a real redis-server).

#![allow(clippy::unwrap_used)]

mod fixtures;
mod support;

use std::time::Duration;
use support::{bulk, ok, Client, TestServer, Value};

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_INT: &str = "ERR value is not an integer or out of range";
const NOT_FLOAT: &str = "ERR value is not a valid float";
const SYNTAX: &str = "ERR syntax error";

fn e(msg: &str) -> Value {
    Value::Error(msg.into())
}

fn int(n: i64) -> Value {
    Value::Int(n)
}

/// Runs each command and checks its reply.
fn expect(c: &mut Client, cases: &[(&[&str], Value)]) {
    for (cmd, want) in cases {
        assert_eq!(&c.cmd(cmd), want, "{cmd:?}");
    }
}

/// A server with a list under `list` in database 0, for `WRONGTYPE`.
fn with_list() -> (TestServer, Client) {
    let s = TestServer::start();
    fixtures::plant_list(&s.db, 0, b"list", 1, &[b"a"]);
    let c = s.client();
    (s, c)
}

#[test]
fn get_and_set_with_their_conditions() {
    let (_s, mut c) = with_list();
    expect(
        &mut c,
        &[
            (&["GET", "k"], Value::Nil),
            (&["SET", "k", "v"], ok()),
            (&["GET", "k"], bulk("v")),
            (&["GET", "list"], e(WRONGTYPE)),
            (&["SET", "k", "w", "NX"], Value::Nil),
            (&["SET", "k2", "w", "XX"], Value::Nil),
            (&["EXISTS", "k2"], int(0)),
            (&["SET", "k", "w", "xx"], ok()),
            (&["SET", "k2", "w", "nx"], ok()),
            (&["SET", "k", "x", "GET"], bulk("w")),
            (&["SET", "new", "x", "GET"], Value::Nil),
            (&["SET", "k", "y", "NX", "GET"], bulk("x")),
            (&["GET", "k"], bulk("x")),
            (&["SET", "k3", "y", "NX", "GET"], Value::Nil),
            (&["GET", "k3"], bulk("y")),
            (&["SET", "k4", "y", "XX", "GET"], Value::Nil),
            (&["EXISTS", "k4"], int(0)),
            (&["SET", "k", "v", "nx", "nx"], Value::Nil),
            (&["SET", "k", "v", "get", "get"], bulk("x")),
            // GET on another type fails before anything is written; a plain SET replaces it.
            (&["SET", "list", "v", "GET"], e(WRONGTYPE)),
            (&["SET", "list", "v", "NX", "GET"], e(WRONGTYPE)),
            (&["SET", "list", "v", "EX", "abc", "GET"], e(NOT_INT)),
            (
                &["SET", "list", "v", "GET", "EX", "0"],
                e("ERR invalid expire time in 'set' command"),
            ),
            (&["TYPE", "list"], Value::Simple("list".into())),
            (&["SET", "list", "v"], ok()),
            (&["TYPE", "list"], Value::Simple("string".into())),
            (&["SET", "empty", ""], ok()),
            (&["GET", "empty"], bulk("")),
        ],
    );
    assert_eq!(
        c.cmd_bytes(&[b"SET", b"\x00bin\xff", b"\x00\r\n\xff"]),
        ok()
    );
    assert_eq!(
        c.cmd_bytes(&[b"GET", b"\x00bin\xff"]),
        Value::Bulk(b"\x00\r\n\xff".to_vec())
    );
}

#[test]
fn set_refuses_contradicting_options_and_bad_deadlines() {
    let s = TestServer::start();
    let mut c = s.client();
    let invalid = e("ERR invalid expire time in 'set' command");
    expect(
        &mut c,
        &[
            (&["SET", "k", "v", "nx", "xx"], e(SYNTAX)),
            (&["SET", "k", "v", "xx", "nx"], e(SYNTAX)),
            (&["SET", "k", "v", "ex", "10", "px", "100"], e(SYNTAX)),
            (&["SET", "k", "v", "px", "10", "exat", "100"], e(SYNTAX)),
            (&["SET", "k", "v", "ex", "10", "keepttl"], e(SYNTAX)),
            (&["SET", "k", "v", "keepttl", "ex", "10"], e(SYNTAX)),
            (&["SET", "k", "v", "ex"], e(SYNTAX)),
            (&["SET", "k", "v", "persist"], e(SYNTAX)),
            (&["SET", "k", "v", "foo"], e(SYNTAX)),
            (&["SET", "k", "v", "ex", "abc", "foo"], e(SYNTAX)),
            (&["SET", "k", "v", "ex", "0"], invalid.clone()),
            (&["SET", "k", "v", "ex", "-1"], invalid.clone()),
            (&["SET", "k", "v", "exat", "0"], invalid.clone()),
            (
                &["SET", "k", "v", "px", "9223372036854775807"],
                invalid.clone(),
            ),
            (
                &["SET", "k", "v", "ex", "9223372036854775"],
                invalid.clone(),
            ),
            (&["SET", "k", "v", "ex", "9223372036854776"], invalid),
            (&["SET", "k", "v", "ex", "abc"], e(NOT_INT)),
            (&["SET", "k", "v", "ex", "1.5"], e(NOT_INT)),
            (&["EXISTS", "k"], int(0)),
            (
                &["SET"],
                e("ERR wrong number of arguments for 'set' command"),
            ),
            (
                &["SET", "k"],
                e("ERR wrong number of arguments for 'set' command"),
            ),
        ],
    );
}

#[test]
fn set_deadlines_replace_keep_or_clear_the_ttl() {
    let s = TestServer::start();
    let mut c = s.client();
    expect(
        &mut c,
        &[
            (&["SET", "k", "v", "EX", "100"], ok()),
            (&["TTL", "k"], int(100)),
            (&["SET", "k", "v", "ex", "10", "ex", "20"], ok()),
            (&["TTL", "k"], int(20)),
            (&["SET", "k", "w", "KEEPTTL"], ok()),
            (&["TTL", "k"], int(20)),
            (&["SET", "k", "w"], ok()),
            (&["TTL", "k"], int(-1)),
            (&["SET", "k", "v", "PX", "100000", "GET"], bulk("w")),
            (&["SET", "k", "x", "KEEPTTL", "GET"], bulk("v")),
            (&["TTL", "k"], int(100)),
            (&["SET", "k", "v", "EXAT", "9223372036854775"], ok()),
            (&["EXPIRETIME", "k"], int(9223372036854775)),
            (&["SET", "k", "v", "PXAT", "4000000000123"], ok()),
            (&["PEXPIRETIME", "k"], int(4000000000123)),
            // A deadline already passed: the key is gone at once.
            (&["SET", "k", "v", "PXAT", "1"], ok()),
            (&["EXISTS", "k"], int(0)),
            (&["SET", "k", "v", "GET", "EXAT", "1"], Value::Nil),
            (&["GET", "k"], Value::Nil),
            (&["SET", "k", "v", "KEEPTTL"], ok()),
            (&["TTL", "k"], int(-1)),
        ],
    );
    assert_eq!(c.cmd(&["SET", "short", "v", "PX", "50"]), ok());
    std::thread::sleep(Duration::from_millis(80));
    assert_eq!(c.cmd(&["GET", "short"]), Value::Nil);
    assert_eq!(c.cmd(&["SET", "short", "w", "XX"]), Value::Nil);
}

#[test]
fn setnx_setex_psetex_getset_getdel() {
    let (_s, mut c) = with_list();
    expect(
        &mut c,
        &[
            (&["SETNX", "k", "v"], int(1)),
            (&["SETNX", "k", "w"], int(0)),
            (&["GET", "k"], bulk("v")),
            (&["SETNX", "list", "v"], int(0)),
            (&["SETEX", "k", "100", "x"], ok()),
            (&["TTL", "k"], int(100)),
            (&["GET", "k"], bulk("x")),
            (
                &["SETEX", "k", "0", "v"],
                e("ERR invalid expire time in 'setex' command"),
            ),
            (&["SETEX", "k", "abc", "v"], e(NOT_INT)),
            (
                &["SETEX", "k", "9223372036854775", "v"],
                e("ERR invalid expire time in 'setex' command"),
            ),
            (
                &["PSETEX", "k", "0", "v"],
                e("ERR invalid expire time in 'psetex' command"),
            ),
            (
                &["PSETEX", "k", "-1", "v"],
                e("ERR invalid expire time in 'psetex' command"),
            ),
            (&["PSETEX", "k", "100000", "y"], ok()),
            (&["TTL", "k"], int(100)),
            (&["GETSET", "k", "z"], bulk("y")),
            (&["TTL", "k"], int(-1)),
            (&["GETSET", "nokey", "v"], Value::Nil),
            (&["GET", "nokey"], bulk("v")),
            (&["GETSET", "list", "v"], e(WRONGTYPE)),
            (&["GETDEL", "list"], e(WRONGTYPE)),
            (&["GETDEL", "k"], bulk("z")),
            (&["GETDEL", "k"], Value::Nil),
            (&["EXISTS", "k"], int(0)),
            (&["SETEX", "list", "10", "v"], ok()),
            (&["TYPE", "list"], Value::Simple("string".into())),
        ],
    );
}

#[test]
fn getex_changes_the_deadline_after_reading() {
    let (_s, mut c) = with_list();
    let invalid = e("ERR invalid expire time in 'getex' command");
    expect(
        &mut c,
        &[
            (&["SET", "k", "v"], ok()),
            (&["GETEX", "k"], bulk("v")),
            (&["GETEX", "k", "EX", "10"], bulk("v")),
            (&["TTL", "k"], int(10)),
            (&["GETEX", "k", "ex", "10", "ex", "20"], bulk("v")),
            (&["TTL", "k"], int(20)),
            (&["GETEX", "k", "PX", "100000"], bulk("v")),
            (&["TTL", "k"], int(100)),
            (&["GETEX", "k", "EXAT", "4000000000"], bulk("v")),
            (&["EXPIRETIME", "k"], int(4000000000)),
            (&["GETEX", "k", "PXAT", "4000000001000"], bulk("v")),
            (&["EXPIRETIME", "k"], int(4000000001)),
            (&["GETEX", "k", "PERSIST"], bulk("v")),
            (&["TTL", "k"], int(-1)),
            (&["GETEX", "k", "persist", "persist"], bulk("v")),
            (&["GETEX", "k", "px", "10", "persist"], e(SYNTAX)),
            (&["GETEX", "k", "ex", "10", "px", "20"], e(SYNTAX)),
            (&["GETEX", "k", "keepttl"], e(SYNTAX)),
            (&["GETEX", "k", "get"], e(SYNTAX)),
            (&["GETEX", "k", "nx"], e(SYNTAX)),
            (&["GETEX", "k", "ex"], e(SYNTAX)),
            (&["GETEX", "k", "ex", "0"], invalid.clone()),
            (&["GETEX", "k", "pxat", "-5"], invalid),
            (&["GETEX", "k", "ex", "abc"], e(NOT_INT)),
            // A missing key is nil whatever the deadline; another type fails first.
            (&["GETEX", "nokey", "ex", "0"], Value::Nil),
            (&["GETEX", "nokey", "ex", "abc"], Value::Nil),
            (&["GETEX", "nokey", "foo"], e(SYNTAX)),
            (&["GETEX", "list"], e(WRONGTYPE)),
            (&["GETEX", "list", "ex", "0"], e(WRONGTYPE)),
            (&["GETEX", "list", "persist"], e(WRONGTYPE)),
            // A deadline already passed deletes the key once it was read.
            (&["GETEX", "k", "EXAT", "1"], bulk("v")),
            (&["EXISTS", "k"], int(0)),
            (&["GETEX", "k"], Value::Nil),
        ],
    );
}

#[test]
fn mget_mset_msetnx() {
    let (_s, mut c) = with_list();
    expect(
        &mut c,
        &[
            (
                &["MSET", "a"],
                e("ERR wrong number of arguments for 'mset' command"),
            ),
            (
                &["MSET", "a", "1", "b"],
                e("ERR wrong number of arguments for 'mset' command"),
            ),
            (
                &["MSETNX", "a", "1", "b"],
                e("ERR wrong number of arguments for 'msetnx' command"),
            ),
            (&["MSET", "a", "1", "b", "2"], ok()),
            (&["MSETNX", "a", "1", "c", "2"], int(0)),
            (&["EXISTS", "c"], int(0)),
            (&["MSETNX", "c", "1", "d", "2"], int(1)),
            (&["MSETNX", "list", "1"], int(0)),
            (&["MSETNX", "e", "1", "e", "2"], int(1)),
            (&["GET", "e"], bulk("2")),
            (
                &["MGET", "a", "list", "c", "zz", "d"],
                Value::Array(vec![
                    bulk("1"),
                    Value::Nil,
                    bulk("1"),
                    Value::Nil,
                    bulk("2"),
                ]),
            ),
            (&["SET", "x", "5", "EX", "100"], ok()),
            (&["MSET", "x", "6", "a", "3"], ok()),
            (&["TTL", "x"], int(-1)),
            (
                &["MGET", "x", "a", "a"],
                Value::Array(vec![bulk("6"), bulk("3"), bulk("3")]),
            ),
            (&["MSET", "list", "v"], ok()),
            (&["GET", "list"], bulk("v")),
        ],
    );
}

#[test]
fn append_strlen_getrange_setrange() {
    let (_s, mut c) = with_list();
    expect(
        &mut c,
        &[
            (&["APPEND", "z", "1"], int(1)),
            (&["APPEND", "z", "23"], int(3)),
            (&["GET", "z"], bulk("123")),
            (&["APPEND", "list", "1"], e(WRONGTYPE)),
            (&["APPEND", "new", ""], int(0)),
            (&["EXISTS", "new"], int(1)),
            (&["STRLEN", "new"], int(0)),
            (&["STRLEN", "z"], int(3)),
            (&["STRLEN", "list"], e(WRONGTYPE)),
            (&["STRLEN", "nope"], int(0)),
            (&["SET", "x", "5", "EX", "100"], ok()),
            (&["APPEND", "x", "5"], int(2)),
            (&["TTL", "x"], int(100)),
            (&["SET", "k", "hello"], ok()),
            (&["GETRANGE", "k", "0", "-1"], bulk("hello")),
            (&["GETRANGE", "k", "-3", "-1"], bulk("llo")),
            (&["GETRANGE", "k", "-1", "-3"], bulk("")),
            (&["GETRANGE", "k", "-10", "-20"], bulk("")),
            (&["GETRANGE", "k", "-100", "100"], bulk("hello")),
            (&["GETRANGE", "k", "5", "10"], bulk("")),
            (&["GETRANGE", "k", "3", "2"], bulk("")),
            (&["GETRANGE", "k", "0", "0"], bulk("h")),
            (&["GETRANGE", "k", "4", "-1"], bulk("o")),
            (
                &[
                    "GETRANGE",
                    "k",
                    "-9223372036854775808",
                    "9223372036854775807",
                ],
                bulk("hello"),
            ),
            (&["GETRANGE", "k", "a", "1"], e(NOT_INT)),
            (&["GETRANGE", "k", "1", "a"], e(NOT_INT)),
            (&["GETRANGE", "nokey", "0", "-1"], bulk("")),
            (&["GETRANGE", "nokey", "a", "b"], e(NOT_INT)),
            (&["GETRANGE", "list", "0", "1"], e(WRONGTYPE)),
            (&["GETRANGE", "list", "a", "b"], e(NOT_INT)),
            (&["GETRANGE", "new", "0", "0"], bulk("")),
            (&["SUBSTR", "k", "1", "2"], bulk("el")),
            (
                &["SETRANGE", "k", "-1", "x"],
                e("ERR offset is out of range"),
            ),
            (&["SETRANGE", "k", "a", "x"], e(NOT_INT)),
            (&["SETRANGE", "k", "0", ""], int(5)),
            (&["SETRANGE", "k", "1", "EY"], int(5)),
            (&["GET", "k"], bulk("hEYlo")),
            (&["SETRANGE", "k", "7", "!"], int(8)),
            (&["GET", "k"], Value::Bulk(b"hEYlo\0\0!".to_vec())),
            (&["SETRANGE", "nokey", "0", ""], int(0)),
            (&["EXISTS", "nokey"], int(0)),
            (&["SETRANGE", "nokey", "3", "ab"], int(5)),
            (&["GET", "nokey"], Value::Bulk(b"\0\0\0ab".to_vec())),
            (&["SETRANGE", "list", "0", "a"], e(WRONGTYPE)),
            (
                &["SETRANGE", "list", "-1", "a"],
                e("ERR offset is out of range"),
            ),
            (&["SETRANGE", "list", "0", ""], e(WRONGTYPE)),
            (
                &["SETRANGE", "k", "536870912", "a"],
                e("ERR string exceeds maximum allowed size (proto-max-bulk-len)"),
            ),
            (
                &["SETRANGE", "k", "536870911", "ab"],
                e("ERR string exceeds maximum allowed size (proto-max-bulk-len)"),
            ),
            (
                &["SETRANGE", "k", "9223372036854775807", "a"],
                e("ERR string exceeds maximum allowed size (proto-max-bulk-len)"),
            ),
            (&["SET", "t", "10", "EX", "100"], ok()),
            (&["SETRANGE", "t", "0", "2"], int(2)),
            (&["TTL", "t"], int(100)),
        ],
    );
}

#[test]
fn values_past_the_store_limit_are_refused_whole() {
    let s = TestServer::start();
    let mut c = s.client();
    let refused = |v: Value| matches!(v, Value::Error(m) if m.starts_with("ERR string of ") && m.contains("over this store's limit"));
    assert_eq!(c.cmd(&["SET", "k", "abc"]), ok());
    // Past the store's limit (about 2 MiB) but within Redis's 512 MiB.
    assert!(refused(c.cmd(&["SETRANGE", "k", "100000000", "x"])));
    assert!(refused(c.cmd(&["SETRANGE", "new", "3000000", "x"])));
    assert!(refused(c.cmd(&["SETBIT", "new", "30000000", "1"])));
    assert_eq!(c.cmd(&["EXISTS", "new"]), int(0));
    let big = "x".repeat(3 << 20);
    assert!(refused(c.cmd(&["APPEND", "k", &big])));
    assert!(refused(c.cmd(&["SET", "k", &big])));
    assert!(refused(c.cmd(&["MSET", "a", "1", "b", &big])));
    assert_eq!(
        c.cmd(&["MGET", "a", "k"]),
        Value::Array(vec![Value::Nil, bulk("abc")])
    );
    // Inside a transaction the failing command leaves nothing of itself.
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(
        c.cmd(&["MSET", "a", "1", "b", &big]),
        Value::Simple("QUEUED".into())
    );
    assert_eq!(c.cmd(&["SET", "c", "3"]), Value::Simple("QUEUED".into()));
    match c.cmd(&["EXEC"]) {
        Value::Array(r) => {
            assert!(refused(r[0].clone()));
            assert_eq!(r[1], ok());
        }
        other => panic!("EXEC: {other:?}"),
    }
    assert_eq!(
        c.cmd(&["MGET", "a", "b", "c"]),
        Value::Array(vec![Value::Nil, Value::Nil, bulk("3")])
    );
    assert_eq!(c.cmd(&["DBSIZE"]), int(2));
    // A key too long for an expiry entry.
    let long = "k".repeat(stitchdb::MAX_KEY_LEN - 4);
    assert_eq!(c.cmd(&["SET", &long, "v"]), ok());
    assert!(
        matches!(c.cmd(&["EXPIRE", &long, "100"]), Value::Error(m) if m.contains("for a key with a TTL"))
    );
    assert!(
        matches!(c.cmd(&["SET", &long, "v", "EX", "100"]), Value::Error(m) if m.contains("for a key with a TTL"))
    );
    assert_eq!(c.cmd(&["TTL", &long]), int(-1));
}

#[test]
fn incr_decr_and_their_overflows() {
    let (_s, mut c) = with_list();
    let overflow = e("ERR increment or decrement would overflow");
    expect(
        &mut c,
        &[
            (&["SET", "s", "abc"], ok()),
            (&["SET", "big", "9223372036854775807"], ok()),
            (&["SET", "small", "-9223372036854775808"], ok()),
            (&["SET", "sp", " 1"], ok()),
            (&["SET", "f", "1.5"], ok()),
            (&["SET", "z", "007"], ok()),
            (&["SET", "plus", "+1"], ok()),
            (&["INCR", "list"], e(WRONGTYPE)),
            (&["INCR", "s"], e(NOT_INT)),
            (&["INCR", "sp"], e(NOT_INT)),
            (&["INCR", "f"], e(NOT_INT)),
            (&["INCR", "z"], e(NOT_INT)),
            (&["INCR", "plus"], e(NOT_INT)),
            (&["INCR", "big"], overflow.clone()),
            (&["DECR", "small"], overflow.clone()),
            (&["INCRBY", "big", "0"], int(9223372036854775807)),
            (&["INCRBY", "small", "-1"], overflow.clone()),
            (&["DECRBY", "small", "1"], overflow.clone()),
            (&["INCRBY", "list", "a"], e(NOT_INT)),
            (&["INCRBY", "s", "a"], e(NOT_INT)),
            (
                &["DECRBY", "n", "-9223372036854775808"],
                e("ERR decrement would overflow"),
            ),
            (
                &["DECRBY", "n", "9223372036854775807"],
                int(-9223372036854775807),
            ),
            (&["INCRBY", "n", "5"], int(-9223372036854775802)),
            (&["DECR", "n"], int(-9223372036854775803)),
            (
                &["INCRBY", "n2", "9223372036854775807"],
                int(9223372036854775807),
            ),
            (&["INCRBY", "n2", "1"], overflow),
            (&["INCR", "n3"], int(1)),
            (&["DECR", "n4"], int(-1)),
            (&["DECRBY", "n5", "-5"], int(5)),
            (&["GET", "n5"], bulk("5")),
            (&["SET", "t", "10", "EX", "100"], ok()),
            (&["INCR", "t"], int(11)),
            (&["TTL", "t"], int(100)),
            (&["GET", "t"], bulk("11")),
        ],
    );
}

#[test]
fn incrbyfloat_computes_in_long_double_as_redis_does() {
    let (_s, mut c) = with_list();
    let inf = e("ERR increment would produce NaN or Infinity");
    expect(
        &mut c,
        &[
            (&["SET", "g", "10.5"], ok()),
            (&["INCRBYFLOAT", "g", "0.1"], bulk("10.6")),
            (&["SET", "h", "3.0e3"], ok()),
            (&["INCRBYFLOAT", "h", "200"], bulk("3200")),
            (
                &["INCRBYFLOAT", "f", "1000.1"],
                bulk("1000.09999999999999998"),
            ),
            (
                &["INCRBYFLOAT", "f", "10.5"],
                bulk("1010.59999999999999998"),
            ),
            (&["INCRBYFLOAT", "f", "-1010.6"], bulk("0")),
            (&["INCRBYFLOAT", "a", "0.1"], bulk("0.1")),
            (&["INCRBYFLOAT", "a", "0.2"], bulk("0.3")),
            (&["INCRBYFLOAT", "b", "-0.0"], bulk("0")),
            (&["INCRBYFLOAT", "c", "1e-20"], bulk("0")),
            (
                &["INCRBYFLOAT", "d", "1.23456789012345678901"],
                bulk("1.23456789012345679"),
            ),
            (
                &["INCRBYFLOAT", "e", "123456789.123456789"],
                bulk("123456789.12345678899873747"),
            ),
            (&["INCRBYFLOAT", "i", "0x1.8p1"], bulk("3")),
            (&["INCRBYFLOAT", "i", ".5"], bulk("3.5")),
            (&["INCRBYFLOAT", "i", "+.5e1"], bulk("8.5")),
            (&["SET", "big", "9223372036854775807"], ok()),
            (&["INCRBYFLOAT", "big", "1"], bulk("9223372036854775808")),
            (&["INCRBYFLOAT", "list", "1"], e(WRONGTYPE)),
            (&["INCRBYFLOAT", "list", "a"], e(WRONGTYPE)),
            (&["SET", "s", "abc"], ok()),
            (&["INCRBYFLOAT", "s", "1"], e(NOT_FLOAT)),
            (&["INCRBYFLOAT", "g", "a"], e(NOT_FLOAT)),
            (&["INCRBYFLOAT", "g", "1e5000"], e(NOT_FLOAT)),
            (&["INCRBYFLOAT", "g", " 1"], e(NOT_FLOAT)),
            (&["INCRBYFLOAT", "g", "1 "], e(NOT_FLOAT)),
            (&["INCRBYFLOAT", "g", ""], e(NOT_FLOAT)),
            (&["INCRBYFLOAT", "g", "nan"], e(NOT_FLOAT)),
            (&["INCRBYFLOAT", "g", "1e"], e(NOT_FLOAT)),
            (&["INCRBYFLOAT", "g", "infinity"], inf.clone()),
            (&["SET", "inf", "inf"], ok()),
            (&["INCRBYFLOAT", "inf", "1"], inf.clone()),
        ],
    );
    // Near the largest long double every digit is written; twice it overflows.
    let top = c.cmd(&["INCRBYFLOAT", "top", "1.18e4932"]).text();
    assert_eq!(top.len(), 4933);
    assert!(
        top.starts_with("11800000000000000000006528129180936992"),
        "{top}"
    );
    assert_eq!(c.cmd(&["INCRBYFLOAT", "top", "1.18e4932"]), inf);
    assert_eq!(c.cmd(&["SET", "t", "10", "EX", "100"]), ok());
    assert_eq!(c.cmd(&["INCRBYFLOAT", "t", "1.5"]), bulk("11.5"));
    assert_eq!(c.cmd(&["TTL", "t"]), int(100));
}

#[test]
fn setbit_and_getbit() {
    let (_s, mut c) = with_list();
    let bad_offset = e("ERR bit offset is not an integer or out of range");
    let bad_bit = e("ERR bit is not an integer or out of range");
    expect(
        &mut c,
        &[
            (&["SETBIT", "b", "0", "1"], int(0)),
            (&["SETBIT", "b", "0", "1"], int(1)),
            (&["SETBIT", "b", "7", "0"], int(0)),
            (&["SETBIT", "b", "9", "1"], int(0)),
            (&["GET", "b"], Value::Bulk(b"\x80\x40".to_vec())),
            (&["GETBIT", "b", "0"], int(1)),
            (&["GETBIT", "b", "7"], int(0)),
            (&["GETBIT", "b", "9"], int(1)),
            (&["GETBIT", "b", "1000"], int(0)),
            (&["GETBIT", "nokey", "0"], int(0)),
            (&["SETBIT", "b", "-1", "1"], bad_offset.clone()),
            (&["SETBIT", "b", "a", "1"], bad_offset.clone()),
            (&["SETBIT", "b", "4294967296", "1"], bad_offset.clone()),
            (&["SETBIT", "b", "0", "2"], bad_bit.clone()),
            (&["SETBIT", "b", "0", "-1"], bad_bit.clone()),
            (&["SETBIT", "b", "0", "a"], bad_bit.clone()),
            (&["SETBIT", "list", "0", "1"], e(WRONGTYPE)),
            (&["SETBIT", "list", "a", "1"], bad_offset.clone()),
            (&["SETBIT", "list", "0", "2"], bad_bit),
            (&["GETBIT", "b", "-1"], bad_offset.clone()),
            (&["GETBIT", "b", "a"], bad_offset.clone()),
            (&["GETBIT", "b", "4294967296"], bad_offset.clone()),
            (&["GETBIT", "list", "0"], e(WRONGTYPE)),
            (&["GETBIT", "list", "a"], bad_offset),
            // Clearing a bit of a missing key creates it, zeros up to the bit's byte.
            (&["SETBIT", "z", "100", "0"], int(0)),
            (&["STRLEN", "z"], int(13)),
            (&["EXPIRE", "b", "100"], int(1)),
            (&["SETBIT", "b", "3", "1"], int(0)),
            (&["TTL", "b"], int(100)),
        ],
    );
}

#[test]
fn bitcount_with_ranges_in_bytes_and_bits() {
    let (_s, mut c) = with_list();
    expect(
        &mut c,
        &[
            (&["SET", "foobar", "foobar"], ok()),
            (&["SET", "e", ""], ok()),
            // A missing key counts 0 before its arguments are read, as in Redis 7.0.
            (&["BITCOUNT", "missing", "a", "b"], int(0)),
            (&["BITCOUNT", "missing", "1"], int(0)),
            (&["BITCOUNT", "list"], e(WRONGTYPE)),
            (&["BITCOUNT", "list", "x", "y"], e(WRONGTYPE)),
            (&["BITCOUNT", "foobar"], int(26)),
            (&["BITCOUNT", "foobar", "1"], e(SYNTAX)),
            (&["BITCOUNT", "foobar", "1", "2", "3", "4"], e(SYNTAX)),
            (&["BITCOUNT", "foobar", "a", "1"], e(NOT_INT)),
            (&["BITCOUNT", "foobar", "-1", "-2", "xyz"], int(0)),
            (&["BITCOUNT", "foobar", "1", "1", "xyz"], e(SYNTAX)),
            (&["BITCOUNT", "foobar", "1", "1"], int(6)),
            (&["BITCOUNT", "foobar", "-2", "-1"], int(7)),
            (&["BITCOUNT", "foobar", "-100", "100"], int(26)),
            (&["BITCOUNT", "foobar", "10", "20"], int(0)),
            (&["BITCOUNT", "foobar", "0", "-1", "BYTE"], int(26)),
            (&["BITCOUNT", "foobar", "5", "30", "bit"], int(17)),
            (&["BITCOUNT", "foobar", "0", "-1", "bit"], int(26)),
            (&["BITCOUNT", "foobar", "-5", "-1", "bit"], int(2)),
            (&["BITCOUNT", "foobar", "47", "47", "bit"], int(0)),
            (&["BITCOUNT", "foobar", "46", "100", "bit"], int(1)),
            (&["BITCOUNT", "e"], int(0)),
            (&["BITCOUNT", "e", "0", "-1"], int(0)),
        ],
    );
}

#[test]
fn bitpos_finds_set_and_clear_bits() {
    let (_s, mut c) = with_list();
    expect(
        &mut c,
        &[
            (&["BITPOS", "missing", "1"], int(-1)),
            (&["BITPOS", "missing", "0"], int(0)),
            (
                &["BITPOS", "missing", "2"],
                e("ERR The bit argument must be 1 or 0."),
            ),
            (&["BITPOS", "missing", "x"], e(NOT_INT)),
            (&["BITPOS", "missing", "1", "0", "1", "bit", "5"], int(-1)),
            (&["BITPOS", "list", "1"], e(WRONGTYPE)),
            (
                &["BITPOS", "list", "3"],
                e("ERR The bit argument must be 1 or 0."),
            ),
            (&["SET", "e", ""], ok()),
            (&["BITPOS", "e", "0"], int(-1)),
            (&["BITPOS", "e", "1"], int(-1)),
        ],
    );
    assert_eq!(c.cmd_bytes(&[b"SET", b"ff", b"\xff\xff"]), ok());
    assert_eq!(c.cmd_bytes(&[b"SET", b"s", b"\x00\xff\xf0"]), ok());
    expect(
        &mut c,
        &[
            // Without an end, the string is as if followed by zeros.
            (&["BITPOS", "ff", "0"], int(16)),
            (&["BITPOS", "ff", "0", "0"], int(16)),
            (&["BITPOS", "ff", "0", "1"], int(16)),
            (&["BITPOS", "ff", "0", "5"], int(-1)),
            (&["BITPOS", "ff", "0", "0", "-1"], int(-1)),
            (&["BITPOS", "ff", "0", "-1"], int(16)),
            (&["BITPOS", "ff", "0", "1", "2", "bit"], int(-1)),
            (&["BITPOS", "ff", "1", "7", "15", "bit"], int(7)),
            (&["BITPOS", "ff", "0", "0", "-1", "bit"], int(-1)),
            (&["BITPOS", "ff", "1", "a"], e(NOT_INT)),
            (&["BITPOS", "ff", "1", "0", "1", "xyz"], e(SYNTAX)),
            (&["BITPOS", "ff", "1", "0", "1", "bit", "5"], e(SYNTAX)),
            (&["BITPOS", "ff", "0", "3", "bit"], e(NOT_INT)),
            (&["BITPOS", "s", "1", "0"], int(8)),
            (&["BITPOS", "s", "1", "2", "-1", "byte"], int(16)),
            (&["BITPOS", "s", "0", "1", "2"], int(20)),
            (&["BITPOS", "s", "1", "7", "15", "bit"], int(8)),
            (&["BITPOS", "s", "0", "8", "20", "bit"], int(20)),
            (&["BITPOS", "s", "0", "16", "23", "bit"], int(20)),
            (&["BITPOS", "s", "0", "-3", "-1", "bit"], int(21)),
            (&["BITPOS", "s", "1", "-10", "-20"], int(-1)),
            (&["BITPOS", "s", "0", "100"], int(-1)),
            (&["BITPOS", "s", "1", "-100", "100"], int(8)),
            (&["BITPOS", "s", "0", "2"], int(20)),
            (&["BITPOS", "s", "0", "1", "1"], int(-1)),
            (&["BITPOS", "s", "1", "17", "17", "bit"], int(17)),
        ],
    );
}

#[test]
fn resp3_clients_get_resp3_nulls() {
    let s = TestServer::start();
    let mut c = s.client();
    assert!(matches!(c.cmd(&["HELLO", "3"]), Value::Map(_)));
    c.send_raw(&Client::encode(&[b"GET", b"nokey"]));
    assert_eq!(c.read(), Some(Value::Nil));
    assert_eq!(
        c.cmd(&["MGET", "nokey", "nokey"]),
        Value::Array(vec![Value::Nil, Value::Nil])
    );
    assert_eq!(c.cmd(&["INCRBYFLOAT", "f", "1.5"]), bulk("1.5"));
}
