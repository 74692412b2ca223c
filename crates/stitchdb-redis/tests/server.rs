//! The server end to end over TCP: the protocol, the connection commands, transactions.

mod support;

use support::{bulk, ok, Client, TestServer, Value};

#[test]
fn set_then_get_over_the_wire_in_both_protocols() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["PING"]), Value::Simple("PONG".into()));
    assert_eq!(c.cmd(&["set", "k", "v"]), ok());
    assert_eq!(c.cmd(&["GET", "k"]), bulk("v"));
    assert_eq!(c.cmd(&["GET", "nope"]), Value::Nil);
    assert_eq!(c.cmd(&["DBSIZE"]), Value::Int(1));
    assert!(matches!(c.cmd(&["HELLO", "3"]), Value::Map(_)));
    assert_eq!(c.cmd(&["GET", "nope"]), Value::Nil);
    assert_eq!(
        c.cmd(&["nosuch", "a"]),
        Value::Error("ERR unknown command 'nosuch', with args beginning with: 'a' ".into())
    );
    assert_eq!(
        c.cmd(&["get"]),
        Value::Error("ERR wrong number of arguments for 'get' command".into())
    );
}

#[test]
fn pipelined_and_inline_requests_are_answered_in_order() {
    let s = TestServer::start();
    let mut c = s.client();
    let mut batch = Vec::new();
    for i in 0..100 {
        batch.extend(Client::encode(&[b"SET", format!("k{i}").as_bytes(), b"x"]));
    }
    batch.extend_from_slice(b"GET k7\r\nPING\r\n");
    c.send_raw(&batch);
    for _ in 0..100 {
        assert_eq!(c.read(), Some(ok()));
    }
    assert_eq!(c.read(), Some(bulk("x")));
    assert_eq!(c.read(), Some(Value::Simple("PONG".into())));
}

#[test]
fn multi_exec_and_a_touched_watch() {
    let s = TestServer::start();
    let mut a = s.client();
    let mut b = s.client();
    assert_eq!(a.cmd(&["MULTI"]), ok());
    assert_eq!(a.cmd(&["SET", "x", "1"]), Value::Simple("QUEUED".into()));
    assert_eq!(a.cmd(&["GET", "x"]), Value::Simple("QUEUED".into()));
    assert_eq!(a.cmd(&["EXEC"]), Value::Array(vec![ok(), bulk("1")]));
    assert_eq!(a.cmd(&["WATCH", "x"]), ok());
    assert_eq!(b.cmd(&["SET", "x", "2"]), ok());
    assert_eq!(a.cmd(&["MULTI"]), ok());
    assert_eq!(a.cmd(&["SET", "x", "3"]), Value::Simple("QUEUED".into()));
    assert_eq!(a.cmd(&["EXEC"]), Value::Nil);
    assert_eq!(a.cmd(&["GET", "x"]), bulk("2"));
    assert_eq!(a.cmd(&["MULTI"]), ok());
    assert!(matches!(a.cmd(&["nosuch"]), Value::Error(_)));
    assert_eq!(
        a.cmd(&["EXEC"]),
        Value::Error("EXECABORT Transaction discarded because of previous errors.".into())
    );
}

#[test]
fn a_password_keeps_out_who_does_not_know_it() {
    let s = TestServer::with(|c| c.requirepass = Some("secret".into()));
    let mut c = s.client();
    assert_eq!(
        c.cmd(&["GET", "k"]),
        Value::Error("NOAUTH Authentication required.".into())
    );
    assert!(matches!(c.cmd(&["AUTH", "wrong"]), Value::Error(e) if e.starts_with("WRONGPASS")));
    assert_eq!(c.cmd(&["AUTH", "secret"]), ok());
    assert_eq!(c.cmd(&["GET", "k"]), Value::Nil);
}

#[test]
fn interactive_transactions_read_their_writes_and_conflict() {
    let s = TestServer::start();
    let mut a = s.client();
    let mut b = s.client();
    assert_eq!(a.cmd(&["SX.BEGIN"]), ok());
    assert_eq!(a.cmd(&["SET", "k", "a"]), ok());
    assert_eq!(a.cmd(&["GET", "k"]), bulk("a"));
    assert_eq!(b.cmd(&["GET", "k"]), Value::Nil);
    assert_eq!(b.cmd(&["SET", "k", "b"]), ok());
    assert!(matches!(a.cmd(&["SX.COMMIT"]), Value::Error(e) if e.starts_with("CONFLICT")));
    assert_eq!(a.cmd(&["GET", "k"]), bulk("b"));
}
