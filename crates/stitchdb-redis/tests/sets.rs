//! The set commands end to end, with the replies and errors Redis 7.0 gives. Redis's order
//! of a set's members is its own, so replies of whole sets are compared sorted.

mod support;

use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use support::{bulk, ok, Client, TestServer, Value};

fn err(msg: &str) -> Value {
    Value::Error(msg.into())
}

fn int(n: i64) -> Value {
    Value::Int(n)
}

/// The texts of an array's (or set's) items, sorted.
fn sorted(v: Value) -> Vec<String> {
    let mut out: Vec<String> = match v {
        Value::Array(items) | Value::Set(items) => items.iter().map(Value::text).collect(),
        other => panic!("not an array: {other:?}"),
    };
    out.sort();
    out
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

#[test]
fn members_are_added_tested_and_removed() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["SADD", "s", "a", "b", "c", "a"]), int(3));
    assert_eq!(c.cmd(&["SADD", "s", "a", "d"]), int(1));
    assert_eq!(c.cmd(&["SCARD", "s"]), int(4));
    assert_eq!(c.cmd(&["SCARD", "nokey"]), int(0));
    assert_eq!(
        sorted(c.cmd(&["SMEMBERS", "s"])),
        strings(&["a", "b", "c", "d"])
    );
    assert_eq!(c.cmd(&["SMEMBERS", "nokey"]), Value::Array(vec![]));
    assert_eq!(c.cmd(&["SISMEMBER", "s", "a"]), int(1));
    assert_eq!(c.cmd(&["SISMEMBER", "s", "z"]), int(0));
    assert_eq!(c.cmd(&["SISMEMBER", "nokey", "a"]), int(0));
    assert_eq!(
        c.cmd(&["SMISMEMBER", "s", "a", "z", "d"]),
        Value::Array(vec![int(1), int(0), int(1)])
    );
    assert_eq!(
        c.cmd(&["SMISMEMBER", "nokey", "a"]),
        Value::Array(vec![int(0)])
    );
    assert_eq!(c.cmd(&["SREM", "s", "z"]), int(0));
    assert_eq!(c.cmd(&["SREM", "s", "a", "b", "a"]), int(2));
    assert_eq!(c.cmd(&["SREM", "nokey", "a"]), int(0));
    assert_eq!(c.cmd(&["SCARD", "s"]), int(2));
    assert_eq!(c.cmd(&["TYPE", "s"]), Value::Simple("set".into()));
    assert_eq!(c.cmd(&["SADD", "s", ""]), int(1));
    assert_eq!(c.cmd(&["SISMEMBER", "s", ""]), int(1));
    assert_eq!(
        c.cmd_bytes(&[b"SADD", b"bin", b"\x00\xff", b"\xff"]),
        int(2)
    );
    assert_eq!(c.cmd_bytes(&[b"SISMEMBER", b"bin", b"\x00\xff"]), int(1));
}

#[test]
fn a_set_whose_last_member_goes_is_deleted() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["SADD", "s", "a", "b"]), int(2));
    assert_eq!(c.cmd(&["SREM", "s", "a", "b"]), int(2));
    assert_eq!(c.cmd(&["EXISTS", "s"]), int(0));
    assert_eq!(c.cmd(&["DBSIZE"]), int(0));
    assert_eq!(c.cmd(&["SADD", "s", "c"]), int(1));
    assert_eq!(c.cmd(&["SPOP", "s"]), bulk("c"));
    assert_eq!(c.cmd(&["EXISTS", "s"]), int(0));
    assert_eq!(c.cmd(&["SADD", "s", "a", "b"]), int(2));
    assert_eq!(sorted(c.cmd(&["SPOP", "s", "5"])), strings(&["a", "b"]));
    assert_eq!(c.cmd(&["EXISTS", "s"]), int(0));
    assert_eq!(c.cmd(&["SADD", "s", "a"]), int(1));
    assert_eq!(c.cmd(&["SMOVE", "s", "t", "a"]), int(1));
    assert_eq!(c.cmd(&["EXISTS", "s"]), int(0));
    assert_eq!(c.cmd(&["SMEMBERS", "t"]), Value::Array(vec![bulk("a")]));
    // A new set at the key starts empty: no member of the old one shows through.
    assert_eq!(c.cmd(&["DEL", "t"]), int(1));
    assert_eq!(c.cmd(&["SADD", "t", "b"]), int(1));
    assert_eq!(c.cmd(&["SMEMBERS", "t"]), Value::Array(vec![bulk("b")]));
}

#[test]
fn every_command_refuses_a_key_of_another_type() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["SET", "str", "x"]), ok());
    assert_eq!(c.cmd(&["SADD", "set", "a"]), int(1));
    let cmds: &[&[&str]] = &[
        &["SADD", "str", "a"],
        &["SREM", "str", "a"],
        &["SMEMBERS", "str"],
        &["SISMEMBER", "str", "a"],
        &["SMISMEMBER", "str", "a"],
        &["SCARD", "str"],
        &["SPOP", "str"],
        &["SPOP", "str", "0"],
        &["SRANDMEMBER", "str"],
        &["SRANDMEMBER", "str", "0"],
        &["SMOVE", "str", "set", "a"],
        &["SMOVE", "set", "str", "a"],
        &["SMOVE", "set", "str", "nope"],
        &["SINTER", "nokey", "str"],
        &["SINTER", "set", "str"],
        &["SUNION", "str", "nokey"],
        &["SDIFF", "nokey", "str"],
        &["SINTERSTORE", "d", "nokey", "str"],
        &["SUNIONSTORE", "d", "set", "str"],
        &["SDIFFSTORE", "d", "set", "str"],
        &["SINTERCARD", "2", "nokey", "str"],
        &["SSCAN", "str", "0"],
        &["SSCAN", "str", "0", "COUNT", "0"],
    ];
    for args in cmds {
        assert_eq!(c.cmd(args), err(WRONGTYPE), "{args:?}");
    }
    // A missing source: nothing to move, the destination unlooked at.
    assert_eq!(c.cmd(&["SMOVE", "nokey", "str", "a"]), int(0));
    assert_eq!(c.cmd(&["EXISTS", "d"]), int(0));
    assert_eq!(c.cmd(&["GET", "str"]), bulk("x"));
}

#[test]
fn arity_and_syntax_errors() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["SADD", "s", "a", "b", "c"]), int(3));
    assert_eq!(
        c.cmd(&["SADD", "s"]),
        err("ERR wrong number of arguments for 'sadd' command")
    );
    assert_eq!(
        c.cmd(&["SMOVE", "s", "t"]),
        err("ERR wrong number of arguments for 'smove' command")
    );
    assert_eq!(
        c.cmd(&["SINTERSTORE", "d"]),
        err("ERR wrong number of arguments for 'sinterstore' command")
    );
    assert_eq!(c.cmd(&["SPOP", "s", "1", "2"]), err("ERR syntax error"));
    assert_eq!(
        c.cmd(&["SRANDMEMBER", "s", "1", "2"]),
        err("ERR syntax error")
    );
    for count in ["-1", "x", "9223372036854775808"] {
        assert_eq!(
            c.cmd(&["SPOP", "s", count]),
            err("ERR value is out of range, must be positive")
        );
    }
    assert_eq!(
        c.cmd(&["SPOP", "nokey", "x"]),
        err("ERR value is out of range, must be positive")
    );
    assert_eq!(
        c.cmd(&["SRANDMEMBER", "s", "x"]),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        c.cmd(&["SRANDMEMBER", "nokey", "x"]),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        c.cmd(&["SRANDMEMBER", "s", "-9223372036854775808"]),
        err(
            "ERR value is out of range, value must between -9223372036854775807 and \
             9223372036854775807"
        )
    );
    assert_eq!(c.cmd(&["SCARD", "s"]), int(3));
}

#[test]
fn spop_and_srandmember_pick_members() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["SPOP", "nokey"]), Value::Nil);
    assert_eq!(c.cmd(&["SPOP", "nokey", "2"]), Value::Array(vec![]));
    assert_eq!(c.cmd(&["SRANDMEMBER", "nokey"]), Value::Nil);
    assert_eq!(c.cmd(&["SRANDMEMBER", "nokey", "3"]), Value::Array(vec![]));
    assert_eq!(c.cmd(&["SRANDMEMBER", "nokey", "-3"]), Value::Array(vec![]));
    let all = ["a", "b", "c", "d", "e"];
    let mut args = vec!["SADD", "s"];
    args.extend(all);
    assert_eq!(c.cmd(&args), int(5));
    assert_eq!(c.cmd(&["SPOP", "s", "0"]), Value::Array(vec![]));
    assert_eq!(c.cmd(&["SRANDMEMBER", "s", "0"]), Value::Array(vec![]));
    assert_eq!(sorted(c.cmd(&["SRANDMEMBER", "s", "9"])), strings(&all));
    let three = sorted(c.cmd(&["SRANDMEMBER", "s", "3"]));
    assert_eq!(three.len(), 3);
    assert_eq!(three.iter().collect::<BTreeSet<_>>().len(), 3);
    let repeats = sorted(c.cmd(&["SRANDMEMBER", "s", "-40"]));
    assert_eq!(repeats.len(), 40);
    assert!(repeats.iter().all(|m| all.contains(&m.as_str())));
    let one = c.cmd(&["SRANDMEMBER", "s"]).text();
    assert!(all.contains(&one.as_str()));
    assert_eq!(c.cmd(&["SCARD", "s"]), int(5));
    let popped = c.cmd(&["SPOP", "s"]).text();
    assert_eq!(c.cmd(&["SISMEMBER", "s", &popped]), int(0));
    let two = sorted(c.cmd(&["SPOP", "s", "2"]));
    assert_eq!(two.len(), 2);
    for m in &two {
        assert_ne!(m, &popped);
        assert_eq!(c.cmd(&["SISMEMBER", "s", m]), int(0));
    }
    assert_eq!(c.cmd(&["SCARD", "s"]), int(2));
    assert!(matches!(
        c.cmd(&["SRANDMEMBER", "s", "-9223372036854775807"]),
        Value::Error(e) if e.starts_with("ERR value is out of range")
    ));
    // RESP3: SPOP with a count is a set, SRANDMEMBER's an array.
    assert!(matches!(c.cmd(&["HELLO", "3"]), Value::Map(_)));
    assert!(matches!(c.cmd(&["SRANDMEMBER", "s", "2"]), Value::Array(a) if a.len() == 2));
    assert_eq!(c.cmd(&["SPOP", "s", "0"]), Value::Set(vec![]));
    assert!(matches!(c.cmd(&["SPOP", "s", "5"]), Value::Set(a) if a.len() == 2));
    assert_eq!(c.cmd(&["EXISTS", "s"]), int(0));
    assert_eq!(c.cmd(&["SPOP", "s"]), Value::Nil);
}

#[test]
fn random_picks_are_uniform() {
    let s = TestServer::start();
    let mut c = s.client();
    // Names with very different gaps between them: a seek to a random name would all but
    // never find "item:10" after "item:1".
    let names = ["a", "b", "item:1", "item:10", "item:100", "zzzzzz"];
    let mut args = vec!["SADD", "s"];
    args.extend(names);
    assert_eq!(c.cmd(&args), int(6));
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..3000 {
        *counts
            .entry(c.cmd(&["SRANDMEMBER", "s"]).text())
            .or_default() += 1;
    }
    let Value::Array(picks) = c.cmd(&["SRANDMEMBER", "s", "-3000"]) else {
        panic!("an array");
    };
    for p in picks {
        *counts.entry(p.text()).or_default() += 1;
    }
    assert_eq!(counts.len(), 6);
    // 1000 each expected; a uniform pick is off by more than 25% with negligible odds.
    for (name, n) in counts {
        assert!((750..1250).contains(&n), "{name}: {n} of 6000");
    }
}

#[test]
fn smove_moves_one_member() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["SADD", "a", "1", "2"]), int(2));
    assert_eq!(c.cmd(&["SMOVE", "a", "a", "1"]), int(1));
    assert_eq!(c.cmd(&["SMOVE", "a", "a", "9"]), int(0));
    assert_eq!(c.cmd(&["SMOVE", "a", "b", "9"]), int(0));
    assert_eq!(c.cmd(&["EXISTS", "b"]), int(0));
    assert_eq!(c.cmd(&["SMOVE", "a", "b", "1"]), int(1));
    assert_eq!(c.cmd(&["SMEMBERS", "a"]), Value::Array(vec![bulk("2")]));
    assert_eq!(c.cmd(&["SMEMBERS", "b"]), Value::Array(vec![bulk("1")]));
    assert_eq!(c.cmd(&["SADD", "a", "1"]), int(1));
    // Already in the destination: it only leaves the source.
    assert_eq!(c.cmd(&["SMOVE", "a", "b", "1"]), int(1));
    assert_eq!(c.cmd(&["SCARD", "b"]), int(1));
    assert_eq!(c.cmd(&["SMOVE", "a", "b", "2"]), int(1));
    assert_eq!(c.cmd(&["EXISTS", "a"]), int(0));
    assert_eq!(sorted(c.cmd(&["SMEMBERS", "b"])), strings(&["1", "2"]));
    assert_eq!(c.cmd(&["SMOVE", "nokey", "nokey", "1"]), int(0));
}

#[test]
fn set_algebra() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["SADD", "a", "1", "2", "3", "x"]), int(4));
    assert_eq!(c.cmd(&["SADD", "b", "2", "3", "4"]), int(3));
    assert_eq!(c.cmd(&["SADD", "c", "3", "x", "y"]), int(3));
    assert_eq!(sorted(c.cmd(&["SINTER", "a", "b"])), strings(&["2", "3"]));
    assert_eq!(sorted(c.cmd(&["SINTER", "a", "b", "c"])), strings(&["3"]));
    assert_eq!(
        sorted(c.cmd(&["SINTER", "a"])),
        strings(&["1", "2", "3", "x"])
    );
    assert_eq!(c.cmd(&["SINTER", "a", "nokey"]), Value::Array(vec![]));
    assert_eq!(
        sorted(c.cmd(&["SUNION", "a", "b", "nokey"])),
        strings(&["1", "2", "3", "4", "x"])
    );
    assert_eq!(c.cmd(&["SUNION", "nokey"]), Value::Array(vec![]));
    assert_eq!(sorted(c.cmd(&["SDIFF", "a", "b"])), strings(&["1", "x"]));
    assert_eq!(sorted(c.cmd(&["SDIFF", "a", "b", "c"])), strings(&["1"]));
    assert_eq!(
        sorted(c.cmd(&["SDIFF", "a", "nokey"])),
        strings(&["1", "2", "3", "x"])
    );
    assert_eq!(c.cmd(&["SDIFF", "nokey", "a"]), Value::Array(vec![]));
    assert_eq!(c.cmd(&["SDIFF", "a", "a"]), Value::Array(vec![]));
    assert!(matches!(c.cmd(&["HELLO", "3"]), Value::Map(_)));
    assert!(matches!(c.cmd(&["SINTER", "a", "b"]), Value::Set(m) if m.len() == 2));
    assert!(matches!(c.cmd(&["SUNION", "a", "b"]), Value::Set(m) if m.len() == 5));
    assert!(matches!(c.cmd(&["SDIFF", "a", "b"]), Value::Set(m) if m.len() == 2));
    assert_eq!(c.cmd(&["SMEMBERS", "nokey"]), Value::Set(vec![]));
    assert!(matches!(c.cmd(&["SMEMBERS", "a"]), Value::Set(m) if m.len() == 4));
}

#[test]
fn stores_replace_their_destination() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["SADD", "a", "1", "2", "3", "x"]), int(4));
    assert_eq!(c.cmd(&["SADD", "b", "2", "3", "4"]), int(3));
    assert_eq!(c.cmd(&["SINTERSTORE", "d", "a", "b"]), int(2));
    assert_eq!(sorted(c.cmd(&["SMEMBERS", "d"])), strings(&["2", "3"]));
    // An empty result deletes the destination, whatever it held.
    assert_eq!(c.cmd(&["SINTERSTORE", "d", "a", "nokey"]), int(0));
    assert_eq!(c.cmd(&["EXISTS", "d"]), int(0));
    assert_eq!(c.cmd(&["SET", "d", "x"]), ok());
    assert_eq!(c.cmd(&["SDIFFSTORE", "d", "nokey", "a"]), int(0));
    assert_eq!(c.cmd(&["EXISTS", "d"]), int(0));
    assert_eq!(c.cmd(&["SET", "d", "x"]), ok());
    assert_eq!(c.cmd(&["SUNIONSTORE", "d", "a", "b"]), int(5));
    assert_eq!(c.cmd(&["TYPE", "d"]), Value::Simple("set".into()));
    assert_eq!(c.cmd(&["SCARD", "d"]), int(5));
    // The destination among the sources.
    assert_eq!(c.cmd(&["SDIFFSTORE", "a", "a", "b"]), int(2));
    assert_eq!(sorted(c.cmd(&["SMEMBERS", "a"])), strings(&["1", "x"]));
    assert_eq!(c.cmd(&["SUNIONSTORE", "a", "a", "b"]), int(5));
    assert_eq!(c.cmd(&["SCARD", "a"]), int(5));
    assert_eq!(c.cmd(&["SINTERSTORE", "b", "b", "b"]), int(3));
    assert_eq!(sorted(c.cmd(&["SMEMBERS", "b"])), strings(&["2", "3", "4"]));
    assert_eq!(c.cmd(&["SINTERSTORE", "b", "b", "nokey"]), int(0));
    assert_eq!(c.cmd(&["EXISTS", "b"]), int(0));
    assert_eq!(c.cmd(&["DBSIZE"]), int(2));
}

#[test]
fn sintercard_counts_up_to_its_limit() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["SADD", "a", "1", "2", "3", "4"]), int(4));
    assert_eq!(c.cmd(&["SADD", "b", "2", "3", "4", "5"]), int(4));
    assert_eq!(c.cmd(&["SINTERCARD", "2", "a", "b"]), int(3));
    assert_eq!(c.cmd(&["SINTERCARD", "1", "a"]), int(4));
    assert_eq!(c.cmd(&["SINTERCARD", "2", "a", "b", "LIMIT", "2"]), int(2));
    assert_eq!(c.cmd(&["SINTERCARD", "2", "a", "b", "limit", "0"]), int(3));
    assert_eq!(c.cmd(&["SINTERCARD", "2", "a", "b", "LIMIT", "9"]), int(3));
    assert_eq!(
        c.cmd(&["SINTERCARD", "1", "a", "LIMIT", "1", "LIMIT", "3"]),
        int(3)
    );
    assert_eq!(c.cmd(&["SINTERCARD", "2", "a", "nokey"]), int(0));
    for n in ["0", "-1", "x", "9223372036854775808"] {
        assert_eq!(
            c.cmd(&["SINTERCARD", n, "a"]),
            err("ERR numkeys should be greater than 0")
        );
    }
    assert_eq!(
        c.cmd(&["SINTERCARD", "3", "a", "b"]),
        err("ERR Number of keys can't be greater than number of args")
    );
    for limit in ["-1", "x"] {
        assert_eq!(
            c.cmd(&["SINTERCARD", "1", "a", "LIMIT", limit]),
            err("ERR LIMIT can't be negative")
        );
    }
    assert_eq!(
        c.cmd(&["SINTERCARD", "1", "a", "LIMIT"]),
        err("ERR syntax error")
    );
    assert_eq!(
        c.cmd(&["SINTERCARD", "1", "a", "FOO", "1"]),
        err("ERR syntax error")
    );
    assert_eq!(
        c.cmd(&["SINTERCARD", "1"]),
        err("ERR wrong number of arguments for 'sintercard' command")
    );
}

/// Every member an `SSCAN` returns, to its end.
fn sscan_all(c: &mut Client, key: &str, options: &[&str]) -> Vec<String> {
    let mut cursor = "0".to_string();
    let mut out = Vec::new();
    loop {
        let mut args = vec!["SSCAN", key, &cursor];
        args.extend_from_slice(options);
        let Value::Array(reply) = c.cmd(&args) else {
            panic!("an array");
        };
        out.extend(sorted(reply[1].clone()));
        cursor = reply[0].text();
        if cursor == "0" {
            return out;
        }
    }
}

#[test]
fn sscan_walks_every_member_once() {
    let s = TestServer::start();
    let mut c = s.client();
    let members: Vec<String> = (0..300).map(|i| format!("m{i}")).collect();
    let mut args = vec!["SADD", "s", ""];
    args.extend(members.iter().map(String::as_str));
    assert_eq!(c.cmd(&args), int(301));
    let all = sscan_all(&mut c, "s", &["COUNT", "9"]);
    assert_eq!(all.len(), 301);
    assert_eq!(all.iter().collect::<BTreeSet<_>>().len(), 301);
    assert_eq!(sscan_all(&mut c, "s", &["MATCH", "m2?"]).len(), 10);
    assert_eq!(sscan_all(&mut c, "s", &["COUNT", "1"]).len(), 301);
    assert_eq!(
        c.cmd(&["SSCAN", "nokey", "0", "COUNT", "0"]),
        Value::Array(vec![bulk("0"), Value::Array(vec![])])
    );
    assert_eq!(c.cmd(&["SSCAN", "nokey", "x"]), err("ERR invalid cursor"));
    assert_eq!(
        c.cmd(&["SSCAN", "s", "0", "COUNT", "0"]),
        err("ERR syntax error")
    );
    assert_eq!(
        c.cmd(&["SSCAN", "s", "0", "TYPE", "set"]),
        err("ERR syntax error")
    );
}

#[test]
fn a_failing_command_in_exec_writes_nothing() {
    let s = TestServer::start();
    let mut c = s.client();
    let long = "m".repeat(17_000);
    assert_eq!(c.cmd(&["SADD", "src", "a", "b"]), int(2));
    assert_eq!(c.cmd(&["MULTI"]), ok());
    for args in [
        &["SADD", "s", "a", &long][..],
        &["SMOVE", "src", &"d".repeat(16_380), "a"],
        &["SADD", "t", "x"],
    ] {
        assert_eq!(c.cmd(args), Value::Simple("QUEUED".into()));
    }
    let Value::Array(replies) = c.cmd(&["EXEC"]) else {
        panic!("EXEC's replies");
    };
    assert!(matches!(&replies[0], Value::Error(e) if e.contains("over this store's limit")));
    assert!(matches!(&replies[1], Value::Error(e) if e.contains("over this store's limit")));
    assert_eq!(replies[2], int(1));
    assert_eq!(c.cmd(&["EXISTS", "s", "t"]), int(1));
    assert_eq!(c.cmd(&["SCARD", "src"]), int(2));
}

#[test]
fn a_large_set_stays_exact() {
    let s = TestServer::start();
    let mut c = s.client();
    let mut batch = Vec::new();
    for i in 0..20_000 {
        batch.extend(Client::encode(&[
            b"SADD",
            b"big",
            format!("m{i}").as_bytes(),
        ]));
    }
    c.send_raw(&batch);
    for _ in 0..20_000 {
        assert_eq!(c.read(), Some(int(1)));
    }
    assert_eq!(c.cmd(&["SCARD", "big"]), int(20_000));
    assert_eq!(c.cmd(&["SADD", "big", "m1", "new"]), int(1));
    assert_eq!(c.cmd(&["SREM", "big", "m2", "nope"]), int(1));
    assert_eq!(c.cmd(&["SISMEMBER", "big", "m19999"]), int(1));
    assert_eq!(sorted(c.cmd(&["SPOP", "big", "100"])).len(), 100);
    assert_eq!(c.cmd(&["SCARD", "big"]), int(19_900));
    assert_eq!(c.cmd(&["SINTERCARD", "1", "big", "LIMIT", "10"]), int(10));
    assert_eq!(c.cmd(&["SUNIONSTORE", "copy", "big"]), int(19_900));
    assert_eq!(c.cmd(&["SDIFFSTORE", "copy", "copy", "big"]), int(0));
    assert_eq!(c.cmd(&["DEL", "big"]), int(1));
    assert_eq!(c.cmd(&["DBSIZE"]), int(0));
}

const MEMBERS: [&str; 7] = ["", "a", "b", "c", "d", "1", "2"];

fn pick_key(rng: &mut impl Rng) -> String {
    ["k0", "k1", "k2"][rng.gen_range(0..3)].to_string()
}

/// One random operation on the sets of `model` (the keys in `strings` hold strings), its
/// reply checked; the model changes as the command changes the keys.
fn random_op(
    rng: &mut impl Rng,
    c: &mut Client,
    model: &mut BTreeMap<String, BTreeSet<String>>,
    strings: &mut BTreeSet<String>,
    step: usize,
) {
    let (k, k2, d) = (pick_key(rng), pick_key(rng), pick_key(rng));
    let m = MEMBERS[rng.gen_range(0..MEMBERS.len())].to_string();
    let m2 = MEMBERS[rng.gen_range(0..MEMBERS.len())].to_string();
    let set = |k: &str| model.get(k).cloned().unwrap_or_default();
    let op = rng.gen_range(0..14);
    let args: Vec<String> = match op {
        0 => vec!["SADD".into(), k.clone(), m.clone(), m2.clone()],
        1 => vec!["SREM".into(), k.clone(), m.clone(), m2.clone()],
        2 => vec!["SISMEMBER".into(), k.clone(), m.clone()],
        3 => vec!["SMISMEMBER".into(), k.clone(), m.clone(), m2.clone()],
        4 => vec!["SCARD".into(), k.clone()],
        5 => vec!["SMEMBERS".into(), k.clone()],
        6 => vec!["SMOVE".into(), k.clone(), k2.clone(), m.clone()],
        7 => vec!["SINTER".into(), k.clone(), k2.clone()],
        8 => vec!["SUNION".into(), k.clone(), k2.clone()],
        9 => vec!["SDIFF".into(), k.clone(), k2.clone()],
        10 => vec!["SINTERSTORE".into(), d.clone(), k.clone(), k2.clone()],
        11 => vec!["SUNIONSTORE".into(), d.clone(), k.clone(), k2.clone()],
        12 => vec!["SDIFFSTORE".into(), d.clone(), k.clone(), k2.clone()],
        _ => vec!["SPOP".into(), k.clone(), rng.gen_range(0..3).to_string()],
    };
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let got = c.cmd(&refs);
    let wrong = match op {
        // A missing source has nothing to move: its destination is not looked at.
        6 => strings.contains(&k) || (model.contains_key(&k) && strings.contains(&k2)),
        7..=12 => strings.contains(&k) || strings.contains(&k2),
        _ => strings.contains(&k),
    };
    if wrong {
        assert_eq!(got, err(WRONGTYPE), "step {step}: {args:?}");
        return;
    }
    let members = |s: &BTreeSet<String>| Value::Array(s.iter().map(|m| bulk(m)).collect());
    let (a, b) = (set(&k), set(&k2));
    let want = match op {
        0 => {
            let e = model.entry(k.clone()).or_default();
            let added = usize::from(e.insert(m.clone())) + usize::from(e.insert(m2.clone()));
            int(added as i64)
        }
        1 => {
            let e = model.entry(k.clone()).or_default();
            let removed = usize::from(e.remove(&m)) + usize::from(e.remove(&m2));
            int(removed as i64)
        }
        2 => int(i64::from(a.contains(&m))),
        3 => Value::Array(vec![
            int(i64::from(a.contains(&m))),
            int(i64::from(a.contains(&m2))),
        ]),
        4 => int(a.len() as i64),
        5 => members(&a),
        6 => {
            let moved = a.contains(&m);
            if moved && k != k2 {
                model.entry(k.clone()).or_default().remove(&m);
                model.entry(k2.clone()).or_default().insert(m.clone());
            }
            int(i64::from(moved))
        }
        7 => members(&a.intersection(&b).cloned().collect()),
        8 => members(&a.union(&b).cloned().collect()),
        9 => members(&a.difference(&b).cloned().collect()),
        10..=12 => {
            let result: BTreeSet<String> = match op {
                10 => a.intersection(&b).cloned().collect(),
                11 => a.union(&b).cloned().collect(),
                _ => a.difference(&b).cloned().collect(),
            };
            let n = result.len();
            strings.remove(&d);
            model.insert(d.clone(), result);
            int(n as i64)
        }
        _ => {
            let popped = sorted(got.clone());
            assert!(popped.len() <= a.len());
            let e = model.entry(k.clone()).or_default();
            for p in &popped {
                assert!(e.remove(p), "step {step}: popped {p:?} not in {a:?}");
            }
            got.clone()
        }
    };
    assert_eq!(got, want, "step {step}: {args:?}");
    model.retain(|_, s| !s.is_empty());
}

/// Thousands of random operations over a few keys, each reply checked against a model
/// (members sort as this server returns them), and every key's existence after each.
#[test]
fn random_operations_match_a_model() {
    let s = TestServer::start();
    let mut c = s.client();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0x5e75);
    let mut model: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut strings: BTreeSet<String> = BTreeSet::new();
    for step in 0..4000 {
        match rng.gen_range(0..40) {
            0 => {
                let k = pick_key(&mut rng);
                let existed = model.remove(&k).is_some() | strings.remove(&k);
                assert_eq!(c.cmd(&["DEL", &k]), int(i64::from(existed)));
            }
            1 => {
                let k = pick_key(&mut rng);
                model.remove(&k);
                strings.insert(k.clone());
                assert_eq!(c.cmd(&["SET", &k, "s"]), ok());
            }
            _ => random_op(&mut rng, &mut c, &mut model, &mut strings, step),
        }
        for k in ["k0", "k1", "k2"] {
            let exists = model.contains_key(k) || strings.contains(k);
            assert_eq!(c.cmd(&["EXISTS", k]), int(i64::from(exists)), "step {step}");
        }
    }
}

/// Whether a `WATCH` of `key` in `a`, then `change` run by `b`, makes `a`'s `EXEC` fail.
fn dirties(a: &mut Client, b: &mut Client, key: &str, change: &[&str]) -> bool {
    assert_eq!(a.cmd(&["WATCH", key]), ok());
    assert!(!matches!(b.cmd(change), Value::Error(_)), "{change:?}");
    assert_eq!(a.cmd(&["MULTI"]), ok());
    assert_eq!(a.cmd(&["SCARD", key]), Value::Simple("QUEUED".into()));
    a.cmd(&["EXEC"]) == Value::Nil
}

#[test]
fn watch_sees_only_what_changed_a_set() {
    let s = TestServer::start();
    let (mut a, mut b) = (s.client(), s.client());
    assert_eq!(a.cmd(&["SADD", "s", "x", "y"]), int(2));
    assert!(!dirties(&mut a, &mut b, "s", &["SADD", "s", "x"]));
    assert!(!dirties(&mut a, &mut b, "s", &["SREM", "s", "nope"]));
    assert!(!dirties(&mut a, &mut b, "s", &["SMOVE", "s", "s", "x"]));
    assert!(!dirties(&mut a, &mut b, "s", &["SPOP", "s", "0"]));
    assert!(dirties(&mut a, &mut b, "s", &["SADD", "s", "z"]));
    assert!(dirties(&mut a, &mut b, "s", &["SREM", "s", "z"]));
    assert_eq!(b.cmd(&["SADD", "t", "x"]), int(1));
    // Moving a member the destination has already changes only the source.
    assert!(!dirties(&mut a, &mut b, "t", &["SMOVE", "s", "t", "x"]));
    assert!(dirties(&mut a, &mut b, "t", &["SMOVE", "s", "t", "y"]));
    assert!(dirties(&mut a, &mut b, "s", &["SADD", "s", "w"]));
    assert!(dirties(
        &mut a,
        &mut b,
        "d",
        &["SUNIONSTORE", "d", "s", "t"]
    ));
    assert!(!dirties(
        &mut a,
        &mut b,
        "e",
        &["SINTERSTORE", "e", "s", "nokey"]
    ));
}
