//! List commands end to end, against the replies Redis 7.0 gives (see `script`), and a
//! randomized run against a `VecDeque` model.

mod script;
mod support;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;
use std::io::Read;
use std::time::Duration;
use support::{bulk, ok, Client, TestServer, Value};

fn run(script: &str) {
    let s = TestServer::start();
    script::run(&mut s.client(), script);
}

#[test]
fn pushes_and_pops() {
    run(r##"
    # Pushes return the new length; LPUSH puts its elements at the head one by one.
    LPUSH l a b c  => :3
    RPUSH l x y    => :5
    LRANGE l 0 -1  => ["c", "b", "a", "x", "y"]
    LLEN l         => :5
    LPUSHX l h     => :6
    RPUSHX l t u   => :8
    LRANGE l 0 -1  => ["h", "c", "b", "a", "x", "y", "t", "u"]
    LPUSHX nokey a => :0
    RPUSHX nokey a => :0
    EXISTS nokey   => :0
    LLEN nokey     => :0
    # Pops: one element, or a count (0: an empty array; more than there are: all).
    LPOP l         => "h"
    RPOP l         => "u"
    LPOP l 2       => ["c", "b"]
    RPOP l 2       => ["t", "y"]
    LPOP l 0       => []
    LRANGE l 0 -1  => ["a", "x"]
    LPOP l -1      => -ERR value is out of range, must be positive
    LPOP l x       => -ERR value is out of range, must be positive
    RPOP l 1 2     => -ERR wrong number of arguments for 'rpop' command
    RPOP l 10      => ["x", "a"]
    EXISTS l       => :0
    LPOP l         => nil
    LPOP l 1       => nil
    LPOP l 0       => nil
    RPOP nokey     => nil
    RPOP nokey 3   => nil
    # The same in RESP3: nil and a nil array are both null there.
    HELLO 3        => (hello)
    RPUSH r a b    => :2
    LPOP nokey     => nil
    LPOP nokey 2   => nil
    RPOP r 0       => []
    RPOP r 5       => ["b", "a"]
    RPOP r         => nil
    "##);
}

#[test]
fn ranges_indexes_and_sets() {
    run(r##"
    RPUSH l a b c d e                                 => :5
    LRANGE l 0 -1                                     => ["a", "b", "c", "d", "e"]
    LRANGE l 1 2                                      => ["b", "c"]
    LRANGE l -2 -1                                    => ["d", "e"]
    LRANGE l -100 1                                   => ["a", "b"]
    LRANGE l 3 100                                    => ["d", "e"]
    LRANGE l 5 10                                     => []
    LRANGE l 3 1                                      => []
    LRANGE l -1 -2                                    => []
    LRANGE l 0 -9223372036854775808                   => []
    LRANGE l -9223372036854775808 9223372036854775807 => ["a", "b", "c", "d", "e"]
    LRANGE l x 1                                      => -ERR value is not an integer or out of range
    LRANGE l 0 1.5                                    => -ERR value is not an integer or out of range
    LRANGE nokey 0 -1                                 => []
    LINDEX l 0                                        => "a"
    LINDEX l 4                                        => "e"
    LINDEX l -1                                       => "e"
    LINDEX l -5                                       => "a"
    LINDEX l 5                                        => nil
    LINDEX l -6                                       => nil
    LINDEX l 9223372036854775807                      => nil
    LINDEX l -9223372036854775808                     => nil
    LINDEX l x                                        => -ERR value is not an integer or out of range
    LINDEX nokey 0                                    => nil
    LSET l 0 A                                        => +OK
    LSET l -1 E                                       => +OK
    LSET l 2 C                                        => +OK
    LRANGE l 0 -1                                     => ["A", "b", "C", "d", "E"]
    LSET l 5 x                                        => -ERR index out of range
    LSET l -6 x                                       => -ERR index out of range
    LSET l x y                                        => -ERR value is not an integer or out of range
    LSET nokey 0 x                                    => -ERR no such key
    LSET nokey x y                                    => -ERR no such key
    "##);
}

#[test]
fn insert_and_remove() {
    run(r##"
    RPUSH l a b c a b c           => :6
    LINSERT l BEFORE a x          => :7
    LINSERT l after c y           => :8
    LINSERT l before c z          => :9
    LRANGE l 0 -1                 => ["x", "a", "b", "z", "c", "y", "a", "b", "c"]
    LINSERT l before nothere q    => :-1
    LINSERT l middle a q          => -ERR syntax error
    LINSERT nokey before a q      => :0
    EXISTS nokey                  => :0
    # LREM: count > 0 from the head, < 0 from the tail, 0 all of them.
    LREM l 1 a                    => :1
    LRANGE l 0 -1                 => ["x", "b", "z", "c", "y", "a", "b", "c"]
    LREM l -1 b                   => :1
    LRANGE l 0 -1                 => ["x", "b", "z", "c", "y", "a", "c"]
    LREM l 0 c                    => :2
    LRANGE l 0 -1                 => ["x", "b", "z", "y", "a"]
    LREM l 0 nothere              => :0
    LREM l x a                    => -ERR value is not an integer or out of range
    LREM nokey 0 a                => :0
    RPUSH r a b a c a d a         => :7
    LREM r -2 a                   => :2
    LRANGE r 0 -1                 => ["a", "b", "a", "c", "d"]
    LREM r 2 a                    => :2
    LRANGE r 0 -1                 => ["b", "c", "d"]
    LREM r 9223372036854775807 b  => :1
    LREM r -9223372036854775808 c => :1
    LREM r 0 d                    => :1
    EXISTS r                      => :0
    LLEN r                        => :0
    "##);
}

#[test]
fn trim() {
    run(r##"
    RPUSH l 1 2 3 4 5 6 7          => :7
    LTRIM l 1 -2                   => +OK
    LRANGE l 0 -1                  => ["2", "3", "4", "5", "6"]
    LTRIM l -2 100                 => +OK
    LRANGE l 0 -1                  => ["5", "6"]
    LTRIM l -100 0                 => +OK
    LRANGE l 0 -1                  => ["5"]
    LTRIM l 1 0                    => +OK
    EXISTS l                       => :0
    RPUSH l a b c                  => :3
    LTRIM l 5 10                   => +OK
    EXISTS l                       => :0
    RPUSH l a b c                  => :3
    LTRIM l 0 -9223372036854775808 => +OK
    EXISTS l                       => :0
    LTRIM nokey 0 1                => +OK
    LTRIM l x 1                    => -ERR value is not an integer or out of range
    LTRIM l 0 y                    => -ERR value is not an integer or out of range
    "##);
}

#[test]
fn lpos() {
    run(r##"
    RPUSH l a b c a b c a              => :7
    LPOS l a                           => :0
    LPOS l c                           => :2
    LPOS l nothere                     => nil
    LPOS l a RANK 2                    => :3
    LPOS l a RANK 3                    => :6
    LPOS l a RANK 4                    => nil
    LPOS l a RANK -1                   => :6
    LPOS l a RANK -2                   => :3
    LPOS l a COUNT 0                   => [:0, :3, :6]
    LPOS l a COUNT 2                   => [:0, :3]
    LPOS l a COUNT 2 RANK 2            => [:3, :6]
    LPOS l a COUNT 0 RANK -1           => [:6, :3, :0]
    LPOS l a COUNT 0 MAXLEN 4          => [:0, :3]
    LPOS l a COUNT 0 RANK -1 MAXLEN 1  => [:6]
    LPOS l a COUNT 0 RANK -1 MAXLEN 2  => [:6]
    LPOS l a MAXLEN 1 RANK 2           => nil
    LPOS l nothere COUNT 0             => []
    LPOS l a rank 1 rank 2             => :3
    LPOS l a RANK -9223372036854775808 => :6
    LPOS l a RANK 9223372036854775807  => nil
    LPOS l a COUNT 9223372036854775807 => [:0, :3, :6]
    LPOS l a RANK 0                    => -ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list
    LPOS l a RANK x                    => -ERR value is not an integer or out of range
    LPOS l a COUNT -1                  => -ERR COUNT can't be negative
    LPOS l a COUNT x                   => -ERR COUNT can't be negative
    LPOS l a MAXLEN -1                 => -ERR MAXLEN can't be negative
    LPOS l a MAXLEN x                  => -ERR MAXLEN can't be negative
    LPOS l a FOO 1                     => -ERR syntax error
    LPOS l a COUNT                     => -ERR syntax error
    LPOS nokey a                       => nil
    LPOS nokey a COUNT 0               => []
    LPOS nokey a RANK 0                => -ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list
    "##);
}

#[test]
fn move_and_rotate() {
    run(r##"
    RPUSH src a b c           => :3
    RPOPLPUSH src dst         => "c"
    LRANGE src 0 -1           => ["a", "b"]
    LRANGE dst 0 -1           => ["c"]
    LMOVE src dst LEFT RIGHT  => "a"
    LMOVE src dst left left   => "b"
    LRANGE dst 0 -1           => ["b", "c", "a"]
    LMOVE src dst right right => nil
    EXISTS src                => :0
    LMOVE src dst left right  => nil
    RPOPLPUSH nokey dst       => nil
    LRANGE dst 0 -1           => ["b", "c", "a"]
    # The same key rotates the list.
    LMOVE dst dst LEFT RIGHT  => "b"
    LRANGE dst 0 -1           => ["c", "a", "b"]
    LMOVE dst dst RIGHT LEFT  => "b"
    LRANGE dst 0 -1           => ["b", "c", "a"]
    RPOPLPUSH dst dst         => "a"
    LRANGE dst 0 -1           => ["a", "b", "c"]
    LMOVE dst dst left left   => "a"
    LRANGE dst 0 -1           => ["a", "b", "c"]
    RPUSH one x               => :1
    LMOVE one one left right  => "x"
    LRANGE one 0 -1           => ["x"]
    RPOPLPUSH one other       => "x"
    EXISTS one                => :0
    LRANGE other 0 -1         => ["x"]
    LMOVE other dst UP right  => -ERR syntax error
    LMOVE other dst left DOWN => -ERR syntax error
    LMOVE nokey dst up right  => -ERR syntax error
    "##);
}

#[test]
fn wrong_types_and_arguments() {
    run(r##"
    SET s x              => +OK
    LPUSH s a            => -WRONGTYPE Operation against a key holding the wrong kind of value
    RPUSH s a            => -WRONGTYPE Operation against a key holding the wrong kind of value
    LPUSHX s a           => -WRONGTYPE Operation against a key holding the wrong kind of value
    RPUSHX s a           => -WRONGTYPE Operation against a key holding the wrong kind of value
    LPOP s               => -WRONGTYPE Operation against a key holding the wrong kind of value
    RPOP s 1             => -WRONGTYPE Operation against a key holding the wrong kind of value
    LLEN s               => -WRONGTYPE Operation against a key holding the wrong kind of value
    LRANGE s 0 -1        => -WRONGTYPE Operation against a key holding the wrong kind of value
    LINDEX s 0           => -WRONGTYPE Operation against a key holding the wrong kind of value
    LSET s 0 x           => -WRONGTYPE Operation against a key holding the wrong kind of value
    LINSERT s before a b => -WRONGTYPE Operation against a key holding the wrong kind of value
    LREM s 0 a           => -WRONGTYPE Operation against a key holding the wrong kind of value
    LTRIM s 0 1          => -WRONGTYPE Operation against a key holding the wrong kind of value
    LPOS s a             => -WRONGTYPE Operation against a key holding the wrong kind of value
    RPUSH l a            => :1
    RPOPLPUSH l s        => -WRONGTYPE Operation against a key holding the wrong kind of value
    LMOVE l s left right => -WRONGTYPE Operation against a key holding the wrong kind of value
    LMOVE s l left right => -WRONGTYPE Operation against a key holding the wrong kind of value
    LRANGE l 0 -1        => ["a"]
    RPOPLPUSH nokey s    => nil
    GET s                => "x"
    # Argument checks come first where Redis makes them first.
    LPOS s a RANK 0      => -ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list
    LINSERT s middle a b => -ERR syntax error
    LPOP s -1            => -ERR value is out of range, must be positive
    LREM s x a           => -ERR value is not an integer or out of range
    LMOVE s l up right   => -ERR syntax error
    LSET s x y           => -WRONGTYPE Operation against a key holding the wrong kind of value
    LPUSH                => -ERR wrong number of arguments for 'lpush' command
    LPUSH k              => -ERR wrong number of arguments for 'lpush' command
    LINSERT k before a   => -ERR wrong number of arguments for 'linsert' command
    LRANGE k 0           => -ERR wrong number of arguments for 'lrange' command
    LPOS k               => -ERR wrong number of arguments for 'lpos' command
    RPOPLPUSH k          => -ERR wrong number of arguments for 'rpoplpush' command
    "##);
}

#[test]
fn blocking_pops_that_need_not_wait_and_lmpop() {
    run(r##"
    # With something to pop, the blocking pops reply at once.
    RPUSH l a b c                  => :3
    BLPOP nokey l 0                => ["l", "a"]
    BRPOP nokey l 0                => ["l", "c"]
    BLMOVE l dst LEFT RIGHT 0      => "b"
    RPUSH l d e                    => :2
    BRPOPLPUSH l dst 0             => "e"
    LRANGE dst 0 -1                => ["e", "b"]
    BLPOP nokey 0.01               => nil
    BRPOPLPUSH nokey dst 0.01      => nil
    # Timeouts are read as Redis reads them.
    BLPOP nokey x                  => -ERR timeout is not a float or out of range
    BLPOP nokey -1                 => -ERR timeout is negative
    BLPOP nokey inf                => -ERR timeout is negative
    BLPOP nokey 1e400              => -ERR timeout is negative
    BLPOP nokey 9223372036854776   => -ERR timeout is negative
    BLPOP nokey nan                => -ERR timeout is not a float or out of range
    BLPOP nokey \s1                => -ERR timeout is not a float or out of range
    BLPOP nokey 1e-400             => nil
    SET s x                        => +OK
    BLPOP s 0                      => -WRONGTYPE Operation against a key holding the wrong kind of value
    BLPOP nokey s 0                => -WRONGTYPE Operation against a key holding the wrong kind of value
    BLMOVE l s LEFT RIGHT 0        => -WRONGTYPE Operation against a key holding the wrong kind of value
    BLMOVE l dst UP RIGHT 0        => -ERR syntax error
    BLMOVE l dst LEFT RIGHT x      => -ERR timeout is not a float or out of range
    BRPOPLPUSH s dst 0             => -WRONGTYPE Operation against a key holding the wrong kind of value
    # Where a client cannot wait, the reply is at once: a nil array, or for BLMOVE a nil.
    MULTI                          => +OK
    BLPOP nokey 0                  => +QUEUED
    BLMOVE nokey dst LEFT LEFT 0   => +QUEUED
    BRPOPLPUSH nokey dst 0         => +QUEUED
    BLMPOP 0 1 nokey LEFT          => +QUEUED
    EXEC                           => [nil, nil, nil, nil]
    # LMPOP: the first list that has elements.
    RPUSH m a b c                  => :3
    LMPOP 1 m LEFT                 => ["m", ["a"]]
    LMPOP 2 nokey m RIGHT COUNT 5  => ["m", ["c", "b"]]
    EXISTS m                       => :0
    LMPOP 1 nokey LEFT             => nil
    LMPOP 2 nokey s LEFT           => -WRONGTYPE Operation against a key holding the wrong kind of value
    RPUSH m a                      => :1
    LMPOP 0 m LEFT                 => -ERR numkeys should be greater than 0
    LMPOP -1 m LEFT                => -ERR numkeys should be greater than 0
    LMPOP x m LEFT                 => -ERR numkeys should be greater than 0
    LMPOP 2 m LEFT                 => -ERR syntax error
    LMPOP 1 m UP                   => -ERR syntax error
    LMPOP 1 m LEFT COUNT 0         => -ERR count should be greater than 0
    LMPOP 1 m LEFT COUNT x         => -ERR count should be greater than 0
    LMPOP 1 m LEFT COUNT 1 COUNT 2 => -ERR syntax error
    LMPOP 1 m LEFT FOO             => -ERR syntax error
    LMPOP 1 m                      => -ERR wrong number of arguments for 'lmpop' command
    BLMPOP x 1 m LEFT              => -ERR timeout is not a float or out of range
    BLMPOP 0.01 0 m LEFT           => -ERR numkeys should be greater than 0
    BLMPOP 0 1 m RIGHT COUNT 2     => ["m", ["a"]]
    BLMPOP 0.01 1 m LEFT           => nil
    HELLO 3                        => (hello)
    BLPOP nokey 0.01               => nil
    RPUSH m a b                    => :2
    LMPOP 1 m LEFT COUNT 2         => ["m", ["a", "b"]]
    "##);
}

/// Sends `args` on a thread and returns it: its result is the reply, once there is one.
fn in_background(mut c: Client, args: &[&str]) -> std::thread::JoinHandle<Value> {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    std::thread::spawn(move || {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        c.cmd(&refs)
    })
}

fn pause() {
    std::thread::sleep(Duration::from_millis(200));
}

#[test]
fn blpop_waits_for_a_push_to_any_of_its_keys() {
    let s = TestServer::start();
    let mut c = s.client();
    let waiter = in_background(s.client(), &["BLPOP", "k1", "k2", "0"]);
    pause();
    assert!(!waiter.is_finished());
    assert_eq!(c.cmd(&["RPUSH", "k2", "x", "y"]), Value::Int(2));
    assert_eq!(
        waiter.join().unwrap(),
        Value::Array(vec![bulk("k2"), bulk("x")])
    );
    assert_eq!(
        c.cmd(&["LRANGE", "k2", "0", "-1"]),
        Value::Array(vec![bulk("y")])
    );
    // A write to another key does not serve it; one to its key does.
    let waiter = in_background(s.client(), &["BRPOP", "k3", "0"]);
    pause();
    c.cmd(&["RPUSH", "other", "x"]);
    pause();
    assert!(!waiter.is_finished());
    c.cmd(&["LPUSH", "k3", "a", "b"]);
    assert_eq!(
        waiter.join().unwrap(),
        Value::Array(vec![bulk("k3"), bulk("a")])
    );
}

#[test]
fn blmove_and_brpoplpush_wait_then_move() {
    let s = TestServer::start();
    let mut c = s.client();
    let mover = in_background(s.client(), &["BLMOVE", "src", "dst", "RIGHT", "LEFT", "5"]);
    let other = in_background(s.client(), &["BRPOPLPUSH", "src2", "dst", "5"]);
    pause();
    c.cmd(&["RPUSH", "src", "a", "b"]);
    c.cmd(&["RPUSH", "src2", "c"]);
    assert_eq!(mover.join().unwrap(), bulk("b"));
    assert_eq!(other.join().unwrap(), bulk("c"));
    let dst = c.cmd(&["LRANGE", "dst", "0", "-1"]);
    assert!(
        dst == Value::Array(vec![bulk("b"), bulk("c")])
            || dst == Value::Array(vec![bulk("c"), bulk("b")])
    );
    assert_eq!(c.cmd(&["EXISTS", "src2"]), Value::Int(0));
}

#[test]
fn each_blocked_client_gets_its_own_element() {
    let s = TestServer::start();
    let mut c = s.client();
    let waiters: Vec<_> = (0..3)
        .map(|_| in_background(s.client(), &["BLPOP", "q", "10"]))
        .collect();
    pause();
    c.cmd(&["RPUSH", "q", "a", "b", "c", "d"]);
    let mut got: Vec<String> = waiters
        .into_iter()
        .map(|w| match w.join().unwrap() {
            Value::Array(kv) => kv[1].text(),
            other => panic!("{other:?}"),
        })
        .collect();
    got.sort();
    assert_eq!(got, ["a", "b", "c"]);
    assert_eq!(
        c.cmd(&["LRANGE", "q", "0", "-1"]),
        Value::Array(vec![bulk("d")])
    );
}

#[test]
fn a_blocking_pop_times_out_with_a_nil_array() {
    let s = TestServer::start();
    let mut c = s.client();
    let start = std::time::Instant::now();
    assert_eq!(wire(&mut c, &["BLPOP", "nokey", "0.2"]), b"*-1\r\n");
    assert!(start.elapsed() >= Duration::from_millis(200));
    assert_eq!(
        wire(&mut c, &["BLMOVE", "nokey", "d", "LEFT", "LEFT", "0.05"]),
        b"*-1\r\n"
    );
    assert_eq!(
        wire(&mut c, &["BRPOPLPUSH", "nokey", "d", "0.05"]),
        b"*-1\r\n"
    );
    assert_eq!(
        wire(&mut c, &["BLMPOP", "0.05", "1", "nokey", "LEFT"]),
        b"*-1\r\n"
    );
    // Where it cannot wait, BLMOVE replies with a nil, and the others a nil array.
    c.cmd(&["MULTI"]);
    c.cmd(&["BLMOVE", "nokey", "d", "LEFT", "LEFT", "0"]);
    c.cmd(&["BLPOP", "nokey", "0"]);
    assert_eq!(wire(&mut c, &["EXEC"]), b"*2\r\n$-1\r\n*-1\r\n");
    assert!(matches!(c.cmd(&["HELLO", "3"]), Value::Map(_)));
    assert_eq!(wire(&mut c, &["BLPOP", "nokey", "0.01"]), b"_\r\n");
}

#[test]
fn replies_before_a_blocking_pop_are_sent_before_it_waits() {
    let s = TestServer::start();
    let mut c = s.client();
    let mut batch = Client::encode(&[b"RPUSH", b"a", b"x"]);
    batch.extend(Client::encode(&[b"BLPOP", b"k", b"0"]));
    c.send_raw(&batch);
    assert_eq!(c.read(), Some(Value::Int(1)));
    s.client().cmd(&["RPUSH", "k", "y"]);
    assert_eq!(c.read(), Some(Value::Array(vec![bulk("k"), bulk("y")])));
}

#[test]
fn a_client_gone_while_blocked_pops_nothing() {
    let s = TestServer::start();
    let mut c = s.client();
    let mut gone = s.client();
    gone.send_raw(&Client::encode(&[b"BLPOP", b"k", b"0"]));
    pause();
    gone.stream.shutdown(std::net::Shutdown::Both).unwrap();
    drop(gone);
    pause();
    c.cmd(&["RPUSH", "k", "x"]);
    pause();
    assert_eq!(
        c.cmd(&["LRANGE", "k", "0", "-1"]),
        Value::Array(vec![bulk("x")])
    );
}

#[test]
fn a_blocked_client_does_not_keep_the_server_from_stopping() {
    let mut s = TestServer::start();
    let mut blocked = s.client();
    blocked.send_raw(&Client::encode(&[b"BLPOP", b"k", b"0"]));
    pause();
    let start = std::time::Instant::now();
    s.stop().unwrap();
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(blocked.read(), None);
}

/// The bytes of one short reply, as sent.
fn wire(c: &mut Client, args: &[&str]) -> Vec<u8> {
    let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    c.send_raw(&Client::encode(&raw));
    let mut buf = [0u8; 64];
    let n = c.stream.read(&mut buf).expect("a reply");
    buf[..n].to_vec()
}

#[test]
fn a_missing_key_is_a_nil_bulk_or_a_nil_array_as_in_redis() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(wire(&mut c, &["LPOP", "nokey"]), b"$-1\r\n");
    assert_eq!(wire(&mut c, &["LPOP", "nokey", "2"]), b"*-1\r\n");
    assert_eq!(wire(&mut c, &["RPOP", "nokey", "0"]), b"*-1\r\n");
    assert_eq!(wire(&mut c, &["LPOS", "nokey", "a"]), b"$-1\r\n");
    assert_eq!(
        wire(&mut c, &["LPOS", "nokey", "a", "COUNT", "1"]),
        b"*0\r\n"
    );
    assert!(matches!(c.cmd(&["HELLO", "3"]), Value::Map(_)));
    assert_eq!(wire(&mut c, &["LPOP", "nokey", "2"]), b"_\r\n");
}

#[test]
fn elements_and_keys_are_binary_safe() {
    let s = TestServer::start();
    let mut c = s.client();
    let key: &[u8] = b"k\x00\xff";
    let big = vec![0xabu8; 100_000];
    let elems: [&[u8]; 4] = [b"", b"\x00", b"a b\r\n", &big];
    for e in elems {
        assert!(matches!(c.cmd_bytes(&[b"RPUSH", key, e]), Value::Int(_)));
    }
    let want = Value::Array(elems.iter().map(|e| Value::Bulk(e.to_vec())).collect());
    assert_eq!(c.cmd_bytes(&[b"LRANGE", key, b"0", b"-1"]), want);
    assert_eq!(c.cmd_bytes(&[b"LPOS", key, b"\x00"]), Value::Int(1));
    assert_eq!(c.cmd_bytes(&[b"LREM", key, b"0", b""]), Value::Int(1));
    assert_eq!(
        c.cmd_bytes(&[b"LINDEX", key, b"-1"]),
        Value::Bulk(big.clone())
    );
}

#[test]
fn a_failing_command_in_a_transaction_writes_nothing() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["RPUSH", "l", "a", "b"]), Value::Int(2));
    assert_eq!(c.cmd(&["MULTI"]), ok());
    for cmd in [
        &["LSET", "l", "9", "x"][..],
        &["LPOS", "l", "a", "RANK", "0"],
        &["LPOP", "l", "-1"],
        &["LINSERT", "l", "middle", "a", "x"],
        &["LMOVE", "l", "l", "left", "up"],
        &["RPUSH", "l", "c"],
    ] {
        assert_eq!(c.cmd(cmd), Value::Simple("QUEUED".into()));
    }
    let Value::Array(replies) = c.cmd(&["EXEC"]) else {
        panic!("EXEC replies with an array")
    };
    assert!(replies[..5].iter().all(|r| matches!(r, Value::Error(_))));
    assert_eq!(replies[5], Value::Int(3));
    let want = Value::Array(vec![bulk("a"), bulk("b"), bulk("c")]);
    assert_eq!(c.cmd(&["LRANGE", "l", "0", "-1"]), want);
}

#[test]
fn a_long_list_stays_contiguous_through_inserts_and_removals() {
    let s = TestServer::start();
    let mut c = s.client();
    let n = 2000;
    let mut model: VecDeque<String> = VecDeque::new();
    for i in 0..n {
        let e = format!("e{i}");
        c.cmd(&["RPUSH", "l", &e]);
        model.push_back(e);
    }
    // Inserts near either end and in the middle move the shorter side.
    for (pivot, v) in [("e3", "x1"), ("e1990", "x2"), ("e1000", "x3")] {
        let at = model.iter().position(|e| e == pivot).unwrap();
        model.insert(at, v.to_string());
        c.cmd(&["LINSERT", "l", "BEFORE", pivot, v]);
    }
    for i in (0..n).step_by(7) {
        let e = format!("e{i}");
        model.retain(|x| *x != e);
        assert_eq!(c.cmd(&["LREM", "l", "0", &e]), Value::Int(1));
    }
    assert_eq!(c.cmd(&["LLEN", "l"]), Value::Int(model.len() as i64));
    for i in [0, 1, 500, 1000, model.len() - 1] {
        let want = bulk(&model[i]);
        assert_eq!(c.cmd(&["LINDEX", "l", &i.to_string()]), want);
    }
    let all = Value::Array(model.iter().map(|e| bulk(e)).collect());
    assert_eq!(c.cmd(&["LRANGE", "l", "0", "-1"]), all);
}

/// Redis's `start..=end` over `len` elements, as a range of positions.
fn span(start: i64, end: i64, len: usize) -> Option<std::ops::Range<usize>> {
    let len = len as i64;
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let end = if end < 0 { len + end } else { end.min(len - 1) };
    (start <= end && start < len).then(|| start as usize..end as usize + 1)
}

/// What Redis replies to `args` on `lists` (updated as Redis would update them), for the
/// commands the randomized test sends.
struct ListModel {
    lists: [VecDeque<String>; 2],
}

fn bulks<'a>(items: impl IntoIterator<Item = &'a String>) -> Value {
    Value::Array(items.into_iter().map(|e| bulk(e)).collect())
}

fn err(msg: &str) -> Value {
    Value::Error(msg.into())
}

impl ListModel {
    fn pop(&mut self, k: usize, left: bool, count: Option<usize>) -> Value {
        let l = &mut self.lists[k];
        if count.is_some() && l.is_empty() {
            return Value::Nil;
        }
        let mut take = || if left { l.pop_front() } else { l.pop_back() };
        match count {
            None => take().map_or(Value::Nil, |e| bulk(&e)),
            Some(n) => {
                let popped: Vec<String> = (0..n).map_while(|_| take()).collect();
                bulks(&popped)
            }
        }
    }

    fn lpos(&self, k: usize, e: &str, rank: i64, count: Option<usize>, maxlen: usize) -> Value {
        let l = &self.lists[k];
        let look = if maxlen == 0 {
            l.len()
        } else {
            maxlen.min(l.len())
        };
        let order: Vec<usize> = if rank < 0 {
            (l.len() - look..l.len()).rev().collect()
        } else {
            (0..look).collect()
        };
        let hits: Vec<usize> = order.into_iter().filter(|&i| l[i] == e).collect();
        let hits = hits.into_iter().skip(rank.unsigned_abs() as usize - 1);
        match count {
            None => hits
                .into_iter()
                .next()
                .map_or(Value::Nil, |i| Value::Int(i as i64)),
            Some(n) => {
                let n = if n == 0 { usize::MAX } else { n };
                Value::Array(hits.take(n).map(|i| Value::Int(i as i64)).collect())
            }
        }
    }

    fn lrem(&mut self, k: usize, count: i64, e: &str) -> Value {
        let l = &mut self.lists[k];
        let limit = if count == 0 {
            usize::MAX
        } else {
            count.unsigned_abs() as usize
        };
        let mut at: Vec<usize> = (0..l.len()).filter(|&i| l[i] == e).collect();
        if count < 0 {
            at.reverse();
        }
        at.truncate(limit);
        at.sort_unstable();
        for i in at.iter().rev() {
            l.remove(*i);
        }
        Value::Int(at.len() as i64)
    }
}

#[test]
fn random_operations_match_a_vecdeque_model() {
    let s = TestServer::start();
    let mut c = s.client();
    let mut rng = ChaCha8Rng::seed_from_u64(0x11575);
    let mut m = ListModel {
        lists: Default::default(),
    };
    let keys = ["l0", "l1"];
    let (mut batch, mut batch_len) = (Vec::new(), 1);
    for step in 0..4000 {
        let k = rng.gen_range(0..2);
        let key = keys[k].to_string();
        let len = m.lists[k].len() as i64;
        let mut elem = || format!("e{}", rng.gen_range(0..4));
        let (e1, e2) = (elem(), elem());
        let i = rng.gen_range(-len - 2..=len + 2);
        let j = rng.gen_range(-len - 2..=len + 2);
        let op = rng.gen_range(0..15);
        let (args, want): (Vec<String>, Value) = match op {
            0 | 1 => {
                let n = rng.gen_range(1..4);
                let vals: Vec<String> = (0..n).map(|v| format!("{e1}{v}")).collect();
                for v in &vals {
                    if op == 0 {
                        m.lists[k].push_front(v.clone());
                    } else {
                        m.lists[k].push_back(v.clone());
                    }
                }
                let name = if op == 0 { "LPUSH" } else { "RPUSH" };
                let mut args = vec![name.to_string(), key];
                args.extend(vals);
                (args, Value::Int(m.lists[k].len() as i64))
            }
            2 | 3 => {
                let left = op == 2;
                let count = rng.gen_bool(0.5).then(|| rng.gen_range(0..4));
                let mut args = vec![if left { "LPOP" } else { "RPOP" }.to_string(), key];
                args.extend(count.map(|n| n.to_string()));
                let want = match count {
                    Some(0) if !m.lists[k].is_empty() => Value::Array(vec![]),
                    _ => m.pop(k, left, count),
                };
                (args, want)
            }
            4 => {
                let l = &m.lists[k];
                let at = if i < 0 { len + i } else { i };
                let want = if (0..len).contains(&at) {
                    bulk(&l[at as usize])
                } else {
                    Value::Nil
                };
                (vec!["LINDEX".into(), key, i.to_string()], want)
            }
            5 => {
                let l = &m.lists[k];
                let want = span(i, j, l.len()).map_or(Value::Array(vec![]), |r| bulks(l.range(r)));
                (
                    vec!["LRANGE".into(), key, i.to_string(), j.to_string()],
                    want,
                )
            }
            6 => {
                let at = if i < 0 { len + i } else { i };
                let want = if len == 0 {
                    err("ERR no such key")
                } else if !(0..len).contains(&at) {
                    err("ERR index out of range")
                } else {
                    m.lists[k][at as usize] = e1.clone();
                    ok()
                };
                (vec!["LSET".into(), key, i.to_string(), e1], want)
            }
            7 => {
                let after = rng.gen_bool(0.5);
                let l = &mut m.lists[k];
                let want = if l.is_empty() {
                    Value::Int(0)
                } else if let Some(p) = l.iter().position(|e| *e == e1) {
                    l.insert(p + usize::from(after), e2.clone());
                    Value::Int(l.len() as i64)
                } else {
                    Value::Int(-1)
                };
                let side = if after { "AFTER" } else { "BEFORE" };
                (vec!["LINSERT".into(), key, side.into(), e1, e2], want)
            }
            8 => {
                let count = rng.gen_range(-3..=3);
                let want = m.lrem(k, count, &e1);
                (vec!["LREM".into(), key, count.to_string(), e1], want)
            }
            9 => {
                let l = &mut m.lists[k];
                match span(i, j, l.len()) {
                    Some(r) => *l = l.range(r).cloned().collect(),
                    None => l.clear(),
                }
                (
                    vec!["LTRIM".into(), key, i.to_string(), j.to_string()],
                    ok(),
                )
            }
            10 => {
                let rank = [1, 2, -1, -2][rng.gen_range(0..4)];
                let count = rng.gen_bool(0.5).then(|| rng.gen_range(0..3));
                let maxlen = rng.gen_range(0..4);
                let want = m.lpos(k, &e1, rank, count, maxlen);
                let mut args = vec!["LPOS".into(), key, e1, "RANK".into(), rank.to_string()];
                if let Some(n) = count {
                    args.extend(["COUNT".into(), n.to_string()]);
                }
                args.extend(["MAXLEN".into(), maxlen.to_string()]);
                (args, want)
            }
            11 => {
                let to = rng.gen_range(0..2);
                let (from_left, to_left) = (rng.gen_bool(0.5), rng.gen_bool(0.5));
                let popped = if from_left {
                    m.lists[k].pop_front()
                } else {
                    m.lists[k].pop_back()
                };
                let want = popped.map_or(Value::Nil, |e| {
                    if to_left {
                        m.lists[to].push_front(e.clone());
                    } else {
                        m.lists[to].push_back(e.clone());
                    }
                    bulk(&e)
                });
                let side = |left: bool| if left { "LEFT" } else { "RIGHT" }.to_string();
                let args = vec![
                    "LMOVE".into(),
                    key,
                    keys[to].into(),
                    side(from_left),
                    side(to_left),
                ];
                (args, want)
            }
            12 | 13 => {
                let exists = !m.lists[k].is_empty();
                if exists {
                    if op == 12 {
                        m.lists[k].push_front(e1.clone());
                    } else {
                        m.lists[k].push_back(e1.clone());
                    }
                }
                let name = if op == 12 { "LPUSHX" } else { "RPUSHX" };
                (
                    vec![name.into(), key, e1],
                    Value::Int(m.lists[k].len() as i64),
                )
            }
            _ => (vec!["LLEN".into(), key], Value::Int(len)),
        };
        // Sent in pipelined batches, which the server runs as groups.
        batch.push((args, want, step));
        if batch.len() >= batch_len {
            script::pipelined(&mut c, &mut batch);
            batch_len = rng.gen_range(1..=8);
        }
        if step % 100 == 0 {
            script::pipelined(&mut c, &mut batch);
            for (k, key) in keys.iter().enumerate() {
                let l = &m.lists[k];
                assert_eq!(c.cmd(&["LRANGE", key, "0", "-1"]), bulks(l), "step {step}");
                let exists = Value::Int(i64::from(!l.is_empty()));
                assert_eq!(c.cmd(&["EXISTS", key]), exists, "step {step}");
            }
        }
    }
}
