//! The hash commands end to end, with the replies and errors Redis 7.0 gives.

mod support;

use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use support::{bulk, ok, Client, TestServer, Value};

fn err(msg: &str) -> Value {
    Value::Error(msg.into())
}

fn int(n: i64) -> Value {
    Value::Int(n)
}

fn bulks(items: &[&str]) -> Value {
    Value::Array(items.iter().map(|s| bulk(s)).collect())
}

/// The texts of an array's (or set's) items, sorted: for replies whose order is Redis's
/// own.
fn sorted(v: Value) -> Vec<String> {
    let mut out: Vec<String> = match v {
        Value::Array(items) | Value::Set(items) => items.iter().map(Value::text).collect(),
        other => panic!("not an array: {other:?}"),
    };
    out.sort();
    out
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

#[test]
fn fields_are_set_read_and_deleted() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["HSET", "h", "a", "1", "b", "2"]), int(2));
    assert_eq!(c.cmd(&["HSET", "h", "a", "x", "c", "3", "c", "4"]), int(1));
    assert_eq!(c.cmd(&["HGET", "h", "a"]), bulk("x"));
    assert_eq!(c.cmd(&["HGET", "h", "c"]), bulk("4"));
    assert_eq!(c.cmd(&["HGET", "h", "nope"]), Value::Nil);
    assert_eq!(c.cmd(&["HGET", "nokey", "a"]), Value::Nil);
    assert_eq!(c.cmd(&["HMSET", "h", "d", "5"]), ok());
    assert_eq!(c.cmd(&["HLEN", "h"]), int(4));
    assert_eq!(c.cmd(&["HLEN", "nokey"]), int(0));
    assert_eq!(
        c.cmd(&["HMGET", "h", "a", "nope", "d"]),
        Value::Array(vec![bulk("x"), Value::Nil, bulk("5")])
    );
    assert_eq!(
        c.cmd(&["HMGET", "nokey", "a", "b"]),
        Value::Array(vec![Value::Nil, Value::Nil])
    );
    assert_eq!(c.cmd(&["HEXISTS", "h", "a"]), int(1));
    assert_eq!(c.cmd(&["HEXISTS", "h", "nope"]), int(0));
    assert_eq!(c.cmd(&["HEXISTS", "nokey", "a"]), int(0));
    assert_eq!(c.cmd(&["HSTRLEN", "h", "a"]), int(1));
    assert_eq!(c.cmd(&["HSTRLEN", "h", "nope"]), int(0));
    assert_eq!(c.cmd(&["HSTRLEN", "nokey", "a"]), int(0));
    assert_eq!(c.cmd(&["HSETNX", "h", "a", "y"]), int(0));
    assert_eq!(c.cmd(&["HSETNX", "h", "e", "y"]), int(1));
    assert_eq!(c.cmd(&["HSETNX", "new", "f", "v"]), int(1));
    assert_eq!(c.cmd(&["HGET", "h", "a"]), bulk("x"));
    assert_eq!(c.cmd(&["HDEL", "h", "a", "nope", "a", "b"]), int(2));
    assert_eq!(c.cmd(&["HDEL", "nokey", "a"]), int(0));
    assert_eq!(c.cmd(&["HLEN", "h"]), int(3));
    assert_eq!(c.cmd(&["TYPE", "h"]), Value::Simple("hash".into()));
    // Empty fields and values are fields and values.
    assert_eq!(c.cmd(&["HSET", "h", "", ""]), int(1));
    assert_eq!(c.cmd(&["HGET", "h", ""]), bulk(""));
    assert_eq!(c.cmd(&["HSTRLEN", "h", ""]), int(0));
    assert_eq!(c.cmd(&["HEXISTS", "h", ""]), int(1));
}

#[test]
fn a_hash_whose_last_field_goes_is_deleted() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["HSET", "h", "a", "1", "b", "2"]), int(2));
    assert_eq!(c.cmd(&["HDEL", "h", "a", "b"]), int(2));
    assert_eq!(c.cmd(&["EXISTS", "h"]), int(0));
    assert_eq!(c.cmd(&["TYPE", "h"]), Value::Simple("none".into()));
    assert_eq!(c.cmd(&["DBSIZE"]), int(0));
    assert_eq!(c.cmd(&["HDEL", "h", "a"]), int(0));
    // A new hash at the key starts empty: no field of the old one shows through.
    assert_eq!(c.cmd(&["HSET", "h", "c", "3"]), int(1));
    assert_eq!(c.cmd(&["HGETALL", "h"]), bulks(&["c", "3"]));
    assert_eq!(c.cmd(&["DEL", "h"]), int(1));
    assert_eq!(c.cmd(&["HSET", "h", "d", "4"]), int(1));
    assert_eq!(c.cmd(&["HKEYS", "h"]), bulks(&["d"]));
}

#[test]
fn arity_and_syntax_errors() {
    let s = TestServer::start();
    let mut c = s.client();
    for args in [
        &["HSET", "h"][..],
        &["HSET", "h", "a"],
        &["HSET", "h", "a", "1", "b"],
    ] {
        assert_eq!(
            c.cmd(args),
            err("ERR wrong number of arguments for 'hset' command")
        );
    }
    assert_eq!(
        c.cmd(&["HMSET", "h", "a", "1", "b"]),
        err("ERR wrong number of arguments for 'hmset' command")
    );
    assert_eq!(
        c.cmd(&["HGET", "h"]),
        err("ERR wrong number of arguments for 'hget' command")
    );
    assert_eq!(
        c.cmd(&["HSETNX", "h", "a"]),
        err("ERR wrong number of arguments for 'hsetnx' command")
    );
    assert_eq!(c.cmd(&["EXISTS", "h"]), int(0));
}

#[test]
fn every_command_refuses_a_key_of_another_type() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["SET", "s", "x"]), ok());
    let cmds: &[&[&str]] = &[
        &["HSET", "s", "a", "1"],
        &["HMSET", "s", "a", "1"],
        &["HSETNX", "s", "a", "1"],
        &["HGET", "s", "a"],
        &["HMGET", "s", "a"],
        &["HDEL", "s", "a"],
        &["HLEN", "s"],
        &["HEXISTS", "s", "a"],
        &["HSTRLEN", "s", "a"],
        &["HGETALL", "s"],
        &["HKEYS", "s"],
        &["HVALS", "s"],
        &["HINCRBY", "s", "a", "1"],
        &["HINCRBYFLOAT", "s", "a", "1"],
        &["HRANDFIELD", "s"],
        &["HRANDFIELD", "s", "0"],
        &["HRANDFIELD", "s", "2", "WITHVALUES"],
        &["HSCAN", "s", "0"],
        &["HSCAN", "s", "0", "COUNT", "0"],
    ];
    for args in cmds {
        assert_eq!(c.cmd(args), err(WRONGTYPE), "{args:?}");
    }
    // Arguments are read before the key.
    assert_eq!(
        c.cmd(&["HINCRBY", "s", "a", "x"]),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        c.cmd(&["HINCRBYFLOAT", "s", "a", "x"]),
        err("ERR value is not a valid float")
    );
    assert_eq!(
        c.cmd(&["HINCRBYFLOAT", "s", "a", "inf"]),
        err("ERR value is NaN or Infinity")
    );
    assert_eq!(
        c.cmd(&["HRANDFIELD", "s", "x"]),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(c.cmd(&["HSCAN", "s", "x"]), err("ERR invalid cursor"));
    assert_eq!(c.cmd(&["GET", "s"]), bulk("x"));
}

#[test]
fn hincrby_counts_and_refuses_what_is_not_an_integer() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["HINCRBY", "h", "n", "5"]), int(5));
    assert_eq!(c.cmd(&["HINCRBY", "h", "n", "-12"]), int(-7));
    assert_eq!(c.cmd(&["HGET", "h", "n"]), bulk("-7"));
    assert_eq!(
        c.cmd(&["HINCRBY", "h", "n", "1.5"]),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        c.cmd(&["HINCRBY", "h", "n", "9223372036854775808"]),
        err("ERR value is not an integer or out of range")
    );
    for v in ["x", " 1", "1 ", "01", "1.0", "", "9223372036854775808"] {
        assert_eq!(c.cmd(&["HSET", "h", "v", v]), int(i64::from(v == "x")));
        assert_eq!(
            c.cmd(&["HINCRBY", "h", "v", "1"]),
            err("ERR hash value is not an integer"),
            "{v:?}"
        );
    }
    assert_eq!(
        c.cmd(&[
            "HSET",
            "h",
            "max",
            "9223372036854775807",
            "min",
            "-9223372036854775808"
        ]),
        int(2)
    );
    assert_eq!(
        c.cmd(&["HINCRBY", "h", "max", "1"]),
        err("ERR increment or decrement would overflow")
    );
    assert_eq!(
        c.cmd(&["HINCRBY", "h", "min", "-1"]),
        err("ERR increment or decrement would overflow")
    );
    assert_eq!(
        c.cmd(&["HINCRBY", "h", "min", "9223372036854775807"]),
        int(-1)
    );
    assert_eq!(c.cmd(&["HGET", "h", "max"]), bulk("9223372036854775807"));
    assert_eq!(c.cmd(&["HINCRBY", "h", "max", "0"]), int(i64::MAX));
}

#[test]
fn hincrbyfloat_adds_and_prints_as_redis_does() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["HINCRBYFLOAT", "h", "f", "10.5"]), bulk("10.5"));
    assert_eq!(c.cmd(&["HINCRBYFLOAT", "h", "f", "0.1"]), bulk("10.6"));
    assert_eq!(c.cmd(&["HGET", "h", "f"]), bulk("10.6"));
    assert_eq!(c.cmd(&["HINCRBYFLOAT", "h", "f", "-10.6"]), bulk("0"));
    assert_eq!(c.cmd(&["HSET", "h", "g", "1000.1"]), int(1));
    assert_eq!(
        c.cmd(&["HINCRBYFLOAT", "h", "g", "0"]),
        bulk("1000.09999999999999998")
    );
    assert_eq!(c.cmd(&["HINCRBYFLOAT", "h", "i", "5.0e3"]), bulk("5000"));
    assert_eq!(c.cmd(&["HINCRBYFLOAT", "h", "i", "0x10"]), bulk("5016"));
    assert_eq!(c.cmd(&["HINCRBYFLOAT", "h", "i", "-1e-20"]), bulk("5016"));
    assert_eq!(c.cmd(&["HSET", "h", "big", "9223372036854775807"]), int(1));
    assert_eq!(
        c.cmd(&["HINCRBYFLOAT", "h", "big", "1"]),
        bulk("9223372036854775808")
    );
    for bad in ["x", "", " 1", "1 ", "nan", "1e", "0x"] {
        assert_eq!(
            c.cmd(&["HINCRBYFLOAT", "h", "f", bad]),
            err("ERR value is not a valid float"),
            "{bad:?}"
        );
    }
    for inf in ["inf", "-inf", "+Infinity"] {
        assert_eq!(
            c.cmd(&["HINCRBYFLOAT", "h", "f", inf]),
            err("ERR value is NaN or Infinity")
        );
    }
    assert_eq!(c.cmd(&["HSET", "h", "s", "abc"]), int(1));
    assert_eq!(
        c.cmd(&["HINCRBYFLOAT", "h", "s", "1"]),
        err("ERR hash value is not a float")
    );
    assert_eq!(c.cmd(&["HSET", "h", "inf", "inf"]), int(1));
    assert_eq!(
        c.cmd(&["HINCRBYFLOAT", "h", "inf", "1"]),
        err("ERR increment would produce NaN or Infinity")
    );
    let largest = "1.18973149535723176502e+4932";
    assert_eq!(c.cmd(&["HSET", "h", "l", largest]), int(1));
    assert_eq!(
        c.cmd(&["HINCRBYFLOAT", "h", "l", largest]),
        err("ERR increment would produce NaN or Infinity")
    );
    assert_eq!(c.cmd(&["HGET", "h", "l"]), bulk(largest));
    // Past a double's range, within a long double's.
    let Value::Bulk(huge) = c.cmd(&["HINCRBYFLOAT", "h", "huge", "1e400"]) else {
        panic!("a bulk reply");
    };
    assert_eq!(huge.len(), 401);
}

#[test]
fn whole_hashes_in_both_protocols() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["HSET", "h", "b", "2", "a", "1", "c", "3"]), int(3));
    assert_eq!(
        c.cmd(&["HGETALL", "h"]),
        bulks(&["a", "1", "b", "2", "c", "3"])
    );
    assert_eq!(c.cmd(&["HKEYS", "h"]), bulks(&["a", "b", "c"]));
    assert_eq!(c.cmd(&["HVALS", "h"]), bulks(&["1", "2", "3"]));
    assert_eq!(c.cmd(&["HGETALL", "nokey"]), Value::Array(vec![]));
    assert_eq!(c.cmd(&["HKEYS", "nokey"]), Value::Array(vec![]));
    assert_eq!(c.cmd(&["HVALS", "nokey"]), Value::Array(vec![]));
    assert!(matches!(c.cmd(&["HELLO", "3"]), Value::Map(_)));
    assert_eq!(
        c.cmd(&["HGETALL", "h"]),
        Value::Map(vec![
            (bulk("a"), bulk("1")),
            (bulk("b"), bulk("2")),
            (bulk("c"), bulk("3")),
        ])
    );
    assert_eq!(c.cmd(&["HGETALL", "nokey"]), Value::Map(vec![]));
    assert_eq!(c.cmd(&["HKEYS", "h"]), bulks(&["a", "b", "c"]));
    assert_eq!(c.cmd(&["HGET", "h", "nope"]), Value::Nil);
    assert_eq!(
        c.cmd(&["HMGET", "h", "a", "nope"]),
        Value::Array(vec![bulk("1"), Value::Nil])
    );
}

/// The (field, value) pairs of a `HRANDFIELD ... WITHVALUES` reply in RESP2.
fn flat_pairs(v: Value) -> Vec<(String, String)> {
    let Value::Array(items) = v else {
        panic!("not an array: {v:?}");
    };
    items
        .chunks(2)
        .map(|p| (p[0].text(), p[1].text()))
        .collect()
}

#[test]
fn hrandfield_picks_fields_with_and_without_repeats() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["HRANDFIELD", "nokey"]), Value::Nil);
    assert_eq!(c.cmd(&["HRANDFIELD", "nokey", "5"]), Value::Array(vec![]));
    assert_eq!(c.cmd(&["HRANDFIELD", "nokey", "-5"]), Value::Array(vec![]));
    assert_eq!(
        c.cmd(&["HRANDFIELD", "nokey", "-5", "WITHVALUES"]),
        Value::Array(vec![])
    );
    assert_eq!(c.cmd(&["HSET", "h", "a", "1", "b", "2", "c", "3"]), int(3));
    let fields = ["a", "b", "c"];
    for _ in 0..20 {
        let one = c.cmd(&["HRANDFIELD", "h"]).text();
        assert!(fields.contains(&one.as_str()));
    }
    assert_eq!(c.cmd(&["HRANDFIELD", "h", "0"]), Value::Array(vec![]));
    assert_eq!(sorted(c.cmd(&["HRANDFIELD", "h", "10"])), fields);
    assert_eq!(sorted(c.cmd(&["HRANDFIELD", "h", "3"])), fields);
    let two = sorted(c.cmd(&["HRANDFIELD", "h", "2"]));
    assert_eq!(two.len(), 2);
    assert_ne!(two[0], two[1]);
    let many = sorted(c.cmd(&["HRANDFIELD", "h", "-50"]));
    assert_eq!(many.len(), 50);
    assert!(many.iter().all(|f| fields.contains(&f.as_str())));
    for count in ["-20", "2", "5"] {
        let pairs = flat_pairs(c.cmd(&["HRANDFIELD", "h", count, "withvalues"]));
        let want = match count {
            "-20" => 20,
            "2" => 2,
            _ => 3,
        };
        assert_eq!(pairs.len(), want);
        for (f, v) in pairs {
            assert_eq!(c.cmd(&["HGET", "h", &f]), bulk(&v));
        }
    }
    assert!(matches!(c.cmd(&["HELLO", "3"]), Value::Map(_)));
    let Value::Array(pairs) = c.cmd(&["HRANDFIELD", "h", "-4", "WITHVALUES"]) else {
        panic!("an array");
    };
    assert_eq!(pairs.len(), 4);
    for p in pairs {
        let Value::Array(p) = p else {
            panic!("RESP3 pairs are arrays");
        };
        assert_eq!(c.cmd(&["HGET", "h", &p[0].text()]), p[1]);
    }
    assert_eq!(c.cmd(&["HRANDFIELD", "nokey"]), Value::Nil);
    assert!(matches!(c.cmd(&["HRANDFIELD", "h", "2"]), Value::Array(a) if a.len() == 2));
}

#[test]
fn hrandfield_counts_are_checked_as_redis_checks_them() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["HSET", "h", "a", "1"]), int(1));
    assert_eq!(
        c.cmd(&["HRANDFIELD", "h", "x"]),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        c.cmd(&["HRANDFIELD", "h", "-9223372036854775808"]),
        err(
            "ERR value is out of range, value must between -9223372036854775807 and \
             9223372036854775807"
        )
    );
    assert_eq!(
        c.cmd(&["HRANDFIELD", "h", "1", "x"]),
        err("ERR syntax error")
    );
    assert_eq!(
        c.cmd(&["HRANDFIELD", "h", "1", "WITHVALUES", "x"]),
        err("ERR syntax error")
    );
    assert_eq!(
        c.cmd(&["HRANDFIELD", "nokey", "1", "x"]),
        err("ERR syntax error")
    );
    for n in ["-9223372036854775807", "4611686018427387904"] {
        assert_eq!(
            c.cmd(&["HRANDFIELD", "h", n, "WITHVALUES"]),
            err("ERR value is out of range")
        );
    }
    assert_eq!(
        c.cmd(&["HRANDFIELD", "h", "4611686018427387903", "WITHVALUES"]),
        bulks(&["a", "1"])
    );
    assert_eq!(
        c.cmd(&["HRANDFIELD", "h", "9223372036854775807"]),
        bulks(&["a"])
    );
    // This server builds a reply whole: picks with repeats are bounded.
    assert!(matches!(
        c.cmd(&["HRANDFIELD", "h", "-9223372036854775807"]),
        Value::Error(e) if e.starts_with("ERR value is out of range")
    ));
}

/// Every (field, value) of an `HSCAN` to its end, with `options`.
fn hscan_all(c: &mut Client, key: &str, options: &[&str]) -> Vec<(String, String)> {
    let mut cursor = "0".to_string();
    let mut out = Vec::new();
    loop {
        let mut args = vec!["HSCAN", key, &cursor];
        args.extend_from_slice(options);
        let Value::Array(reply) = c.cmd(&args) else {
            panic!("an array");
        };
        out.extend(flat_pairs(reply[1].clone()));
        cursor = reply[0].text();
        if cursor == "0" {
            return out;
        }
    }
}

#[test]
fn hscan_walks_every_field_once() {
    let s = TestServer::start();
    let mut c = s.client();
    let mut args = vec!["HSET".to_string(), "h".to_string()];
    for i in 0..500 {
        args.push(format!("f{i}"));
        args.push(format!("v{i}"));
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(c.cmd(&refs), int(500));
    let all = hscan_all(&mut c, "h", &["COUNT", "7"]);
    assert_eq!(all.len(), 500);
    let distinct: BTreeMap<_, _> = all.into_iter().collect();
    assert_eq!(distinct.len(), 500);
    assert!(distinct.iter().all(|(f, v)| f[1..] == v[1..]));
    let matched = hscan_all(&mut c, "h", &["MATCH", "f1?", "COUNT", "50"]);
    assert_eq!(matched.len(), 10);
    assert_eq!(hscan_all(&mut c, "h", &[]).len(), 500);
    assert_eq!(
        c.cmd(&["HSCAN", "nokey", "0"]),
        Value::Array(vec![bulk("0"), Value::Array(vec![])])
    );
    // Redis reads a missing key's options not at all, but its cursor first.
    assert_eq!(
        c.cmd(&["HSCAN", "nokey", "0", "COUNT", "0"]),
        Value::Array(vec![bulk("0"), Value::Array(vec![])])
    );
    assert_eq!(c.cmd(&["HSCAN", "nokey", "x"]), err("ERR invalid cursor"));
    assert_eq!(c.cmd(&["HSCAN", "h", "x"]), err("ERR invalid cursor"));
    assert_eq!(
        c.cmd(&["HSCAN", "h", "0", "COUNT", "0"]),
        err("ERR syntax error")
    );
    assert_eq!(
        c.cmd(&["HSCAN", "h", "0", "COUNT", "x"]),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        c.cmd(&["HSCAN", "h", "0", "MATCH"]),
        err("ERR syntax error")
    );
    assert_eq!(
        c.cmd(&["HSCAN", "h", "0", "NOVALUES"]),
        err("ERR syntax error")
    );
}

#[test]
fn a_failing_command_in_exec_writes_nothing() {
    let s = TestServer::start();
    let mut c = s.client();
    let long = "f".repeat(17_000);
    assert!(matches!(
        c.cmd(&["HSET", "h", "a", "1", &long, "2"]),
        Value::Error(e) if e.contains("over this store's limit")
    ));
    assert_eq!(c.cmd(&["EXISTS", "h"]), int(0));
    let big_value = "v".repeat(5 << 20);
    assert_eq!(c.cmd(&["MULTI"]), ok());
    for args in [
        &["HSET", "h", "a", "1", &long, "2"][..],
        &["HSET", "h2", "a", "1", "b", &big_value],
        &["HSET", "h3", "c", "3"],
    ] {
        assert_eq!(c.cmd(args), Value::Simple("QUEUED".into()));
    }
    let Value::Array(replies) = c.cmd(&["EXEC"]) else {
        panic!("EXEC's replies");
    };
    assert!(matches!(&replies[0], Value::Error(_)));
    assert!(matches!(&replies[1], Value::Error(_)));
    assert_eq!(replies[2], int(1));
    assert_eq!(c.cmd(&["EXISTS", "h", "h2", "h3"]), int(1));
}

#[test]
fn a_large_hash_stays_exact() {
    let s = TestServer::start();
    let mut c = s.client();
    let mut batch = Vec::new();
    for i in 0..20_000 {
        batch.extend(Client::encode(&[
            b"HSET",
            b"big",
            format!("f{i}").as_bytes(),
            b"v",
        ]));
    }
    c.send_raw(&batch);
    for _ in 0..20_000 {
        assert_eq!(c.read(), Some(int(1)));
    }
    assert_eq!(c.cmd(&["HLEN", "big"]), int(20_000));
    assert_eq!(c.cmd(&["HSET", "big", "f7", "w", "new", "n"]), int(1));
    assert_eq!(c.cmd(&["HDEL", "big", "f8", "nope"]), int(1));
    assert_eq!(c.cmd(&["HLEN", "big"]), int(20_000));
    assert_eq!(c.cmd(&["HGET", "big", "f7"]), bulk("w"));
    assert_eq!(sorted(c.cmd(&["HRANDFIELD", "big", "-3"])).len(), 3);
    assert_eq!(c.cmd(&["DEL", "big"]), int(1));
    assert_eq!(c.cmd(&["HLEN", "big"]), int(0));
}

/// What a model key holds.
#[derive(Clone, Debug)]
enum Held {
    Str,
    Hash(BTreeMap<String, String>),
}

/// One random operation on the hash `h` (as the model holds it; `None`: the key holds a
/// string), its arguments and the reply it should get; the model changes as the
/// operation would change it.
fn random_op(
    rng: &mut impl Rng,
    key: &str,
    h: &mut BTreeMap<String, String>,
) -> (Vec<String>, Value) {
    const FIELDS: [&str; 8] = ["", "a", "b", "c", "d", "e", "n1", "n2"];
    const VALUES: [&str; 6] = ["", "x", "1", "-3", "9223372036854775807", "abc"];
    let f = FIELDS[rng.gen_range(0..FIELDS.len())].to_string();
    let g = FIELDS[rng.gen_range(0..FIELDS.len())].to_string();
    let v = VALUES[rng.gen_range(0..VALUES.len())].to_string();
    let args = |words: &[&str]| -> Vec<String> {
        let mut out = vec![words[0].to_string(), key.to_string()];
        out.extend(words[1..].iter().map(|w| w.to_string()));
        out
    };
    let get = |h: &BTreeMap<String, String>, f: &str| h.get(f).map_or(Value::Nil, |v| bulk(v));
    match rng.gen_range(0..11) {
        0 => {
            let added = [&f, &g]
                .into_iter()
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .filter(|x| !h.contains_key(*x))
                .count();
            h.insert(f.clone(), v.clone());
            h.insert(g.clone(), "z".into());
            (args(&["HSET", &f, &v, &g, "z"]), int(added as i64))
        }
        1 => {
            let removed = [&f, &g]
                .into_iter()
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .filter(|x| h.remove(*x).is_some())
                .count();
            (args(&["HDEL", &f, &g]), int(removed as i64))
        }
        2 => (args(&["HGET", &f]), get(h, &f)),
        3 => (args(&["HLEN"]), int(h.len() as i64)),
        4 => (args(&["HEXISTS", &f]), int(i64::from(h.contains_key(&f)))),
        5 => {
            let by: i64 = rng.gen_range(-5..5);
            let want = match h.get(&f).map(|v| v.parse::<i64>()) {
                None => Ok(by),
                Some(Ok(n)) => n
                    .checked_add(by)
                    .ok_or("ERR increment or decrement would overflow"),
                Some(Err(_)) => Err("ERR hash value is not an integer"),
            };
            if let Ok(n) = want {
                h.insert(f.clone(), n.to_string());
            }
            (
                args(&["HINCRBY", &f, &by.to_string()]),
                want.map_or_else(err, int),
            )
        }
        6 => {
            let new = !h.contains_key(&f);
            h.entry(f.clone()).or_insert(v.clone());
            (args(&["HSETNX", &f, &v]), int(i64::from(new)))
        }
        7 => (
            args(&["HGETALL"]),
            Value::Array(h.iter().flat_map(|(f, v)| [bulk(f), bulk(v)]).collect()),
        ),
        8 => (
            args(&["HSTRLEN", &f]),
            int(h.get(&f).map_or(0, |v| v.len() as i64)),
        ),
        9 => (
            args(&["HMGET", &f, &g]),
            Value::Array(vec![get(h, &f), get(h, &g)]),
        ),
        _ => (
            args(&["HKEYS"]),
            Value::Array(h.keys().map(|f| bulk(f)).collect()),
        ),
    }
}

/// Thousands of random operations over a few keys, each reply checked against a model
/// (fields sort as this server returns them), and each key's existence after each.
#[test]
fn random_operations_match_a_model() {
    let s = TestServer::start();
    let mut c = s.client();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0x4a5e);
    let mut model: BTreeMap<String, Held> = BTreeMap::new();
    for step in 0..4000 {
        let key = ["k0", "k1", "k2"][rng.gen_range(0..3)].to_string();
        match rng.gen_range(0..20) {
            0 => {
                let existed = model.remove(&key).is_some();
                assert_eq!(c.cmd(&["DEL", &key]), int(i64::from(existed)));
            }
            1 => {
                model.insert(key.clone(), Held::Str);
                assert_eq!(c.cmd(&["SET", &key, "s"]), ok());
            }
            _ => {
                let (mut h, wrong) = match model.get(&key) {
                    Some(Held::Hash(h)) => (h.clone(), false),
                    Some(Held::Str) => (BTreeMap::new(), true),
                    None => (BTreeMap::new(), false),
                };
                let (args, want) = random_op(&mut rng, &key, &mut h);
                let want = if wrong { err(WRONGTYPE) } else { want };
                let refs: Vec<&str> = args.iter().map(String::as_str).collect();
                assert_eq!(c.cmd(&refs), want, "step {step}: {args:?}");
                if !wrong {
                    if h.is_empty() {
                        model.remove(&key);
                    } else {
                        model.insert(key.clone(), Held::Hash(h));
                    }
                }
            }
        }
        let exists = i64::from(model.contains_key(&key));
        assert_eq!(c.cmd(&["EXISTS", &key]), int(exists), "step {step}");
    }
}

/// Whether a `WATCH` of `key` in `a`, then `change` run by `b`, makes `a`'s `EXEC` fail.
fn dirties(a: &mut Client, b: &mut Client, key: &str, change: &[&str]) -> bool {
    assert_eq!(a.cmd(&["WATCH", key]), ok());
    assert!(!matches!(b.cmd(change), Value::Error(_)), "{change:?}");
    assert_eq!(a.cmd(&["MULTI"]), ok());
    assert_eq!(a.cmd(&["HLEN", key]), Value::Simple("QUEUED".into()));
    a.cmd(&["EXEC"]) == Value::Nil
}

#[test]
fn watch_sees_what_changed_a_hash() {
    let s = TestServer::start();
    let (mut a, mut b) = (s.client(), s.client());
    assert_eq!(a.cmd(&["HSET", "h", "f", "1"]), int(1));
    assert!(!dirties(&mut a, &mut b, "h", &["HDEL", "h", "nope"]));
    assert!(!dirties(&mut a, &mut b, "h", &["HSETNX", "h", "f", "2"]));
    assert!(!dirties(&mut a, &mut b, "h", &["HGET", "h", "f"]));
    // Redis counts a field set to the value it had as a change.
    assert!(dirties(&mut a, &mut b, "h", &["HSET", "h", "f", "1"]));
    assert!(dirties(&mut a, &mut b, "h", &["HINCRBY", "h", "f", "0"]));
    assert!(dirties(&mut a, &mut b, "h", &["HSETNX", "h", "g", "2"]));
    assert!(dirties(&mut a, &mut b, "h", &["HDEL", "h", "g"]));
}
