//! StitchDB's own commands: SX.RANGE, SX.SNAPSHOT and SX.READAT, interactive transactions
//! (SX.BEGIN/COMMIT/ABORT), SX.DURABILITY and SX.PATCHGROUP.

mod support;

use stitchdb_redis::keyspace::ctx::{now_ms, Slot};
use stitchdb_redis::keyspace::encoding::{Kind, Meta};
use stitchdb_redis::keyspace::{Ctx, Keyspace};
use support::{bulk, ok, TestServer, Value};

fn err(s: &str) -> Value {
    Value::Error(s.into())
}

fn bulks(items: &[&str]) -> Value {
    Value::Array(items.iter().map(|s| bulk(s)).collect())
}

/// Writes keys the commands of this crate's other families make (an expired string, a
/// hash), straight through the keyspace, so SX.RANGE's skipping is tested on its own.
fn write_raw(s: &TestServer, db: usize, key: &str, meta: &Meta) {
    let ks = Keyspace::new(s.db.clone(), 16);
    let mut ctx = Ctx::new(&ks, db, Slot::Own(None)).expect("a view of the database");
    ctx.put_meta(key.as_bytes(), meta).expect("the write");
    ctx.finish(stitchdb::Durability::Sync).expect("the commit");
}

#[test]
fn range_reads_string_keys_in_order() {
    let s = TestServer::start();
    let mut c = s.client();
    for k in ["b", "a", "d", "c", "e"] {
        assert_eq!(c.cmd(&["SET", k, &format!("v{k}")]), ok());
    }
    let mut expired = Meta::string(b"old".to_vec());
    expired.expire_at = Some(now_ms() - 1);
    write_raw(&s, 0, "bb", &expired);
    write_raw(&s, 0, "cc", &Meta::collection(Kind::Hash, 1));
    assert_eq!(
        c.cmd(&["SX.RANGE", "0", "-", "+"]),
        bulks(&["a", "va", "b", "vb", "c", "vc", "d", "vd", "e", "ve"])
    );
    assert_eq!(
        c.cmd(&["SX.RANGE", "0", "b", "d"]),
        bulks(&["b", "vb", "c", "vc"]),
        "start inclusive, end exclusive, the expired and the hash skipped"
    );
    assert_eq!(
        c.cmd(&["SX.RANGE", "0", "b", "+", "LIMIT", "2"]),
        bulks(&["b", "vb", "c", "vc"])
    );
    assert_eq!(
        c.cmd(&["SX.RANGE", "0", "-", "d", "REV", "LIMIT", "2"]),
        bulks(&["c", "vc", "b", "vb"])
    );
    assert_eq!(
        c.cmd(&["SX.RANGE", "0", "-", "+", "limit", "-1", "rev"]),
        bulks(&["e", "ve", "d", "vd", "c", "vc", "b", "vb", "a", "va"])
    );
    assert_eq!(
        c.cmd(&["SX.RANGE", "0", "-", "+", "LIMIT", "0"]),
        bulks(&[])
    );
    assert_eq!(c.cmd(&["SX.RANGE", "0", "x", "y"]), bulks(&[]));
    assert_eq!(c.cmd(&["SX.RANGE", "0", "d", "b"]), bulks(&[]));
    // Another database, without changing the selected one.
    assert_eq!(c.cmd(&["SX.RANGE", "5", "-", "+"]), bulks(&[]));
    assert_eq!(c.cmd(&["SELECT", "5"]), ok());
    assert_eq!(c.cmd(&["SET", "z", "1"]), ok());
    assert_eq!(c.cmd(&["SX.RANGE", "0", "e", "+"]), bulks(&["e", "ve"]));
    assert_eq!(c.cmd(&["GET", "z"]), bulk("1"));
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(
        c.cmd(&["SX.RANGE", "0", "e", "+"]),
        Value::Simple("QUEUED".into())
    );
    assert_eq!(c.cmd(&["GET", "z"]), Value::Simple("QUEUED".into()));
    assert_eq!(
        c.cmd(&["EXEC"]),
        Value::Array(vec![bulks(&["e", "ve"]), bulk("1")])
    );
    // Errors.
    assert_eq!(
        c.cmd(&["SX.RANGE", "16", "-", "+"]),
        err("ERR DB index is out of range")
    );
    assert_eq!(
        c.cmd(&["SX.RANGE", "x", "-", "+"]),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        c.cmd(&["SX.RANGE", "0", "-", "+", "LIMIT"]),
        err("ERR syntax error")
    );
    assert_eq!(
        c.cmd(&["SX.RANGE", "0", "-", "+", "LIMIT", "x"]),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        c.cmd(&["SX.RANGE", "0", "-"]),
        err("ERR wrong number of arguments for 'sx.range' command")
    );
    // RESP3: a map.
    assert!(matches!(c.cmd(&["HELLO", "3"]), Value::Map(_)));
    assert_eq!(
        c.cmd(&["SX.RANGE", "0", "a", "c"]),
        Value::Map(vec![(bulk("a"), bulk("va")), (bulk("b"), bulk("vb"))])
    );
}

#[test]
fn snapshots_and_reads_at_them() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["SET", "k", "v1"]), ok());
    assert_eq!(c.cmd(&["SET", "gone", "x"]), ok());
    assert_eq!(c.cmd(&["SX.SNAPSHOT", "CREATE", "s1"]), ok());
    assert_eq!(
        c.cmd(&["SX.SNAPSHOT", "CREATE", "s1"]),
        err("ERR a snapshot named \"s1\" already exists")
    );
    assert_eq!(c.cmd(&["SET", "k", "v2"]), ok());
    assert_eq!(c.cmd(&["DEL", "gone"]), Value::Int(1));
    assert_eq!(c.cmd(&["SET", "new", "n"]), ok());
    let Value::Array(list) = c.cmd(&["SX.SNAPSHOT", "LIST"]) else {
        panic!()
    };
    assert_eq!(list.len(), 1);
    let Value::Array(fields) = &list[0] else {
        panic!()
    };
    assert_eq!(&fields[..2], &[bulk("name"), bulk("s1")]);
    // The same snapshots the engine (and a mount's /.stitch/snapshots/) lists.
    assert_eq!(s.db.snapshots()[0].name, "s1");

    assert_eq!(c.cmd(&["SX.READAT", "s1"]), ok());
    assert_eq!(c.cmd(&["GET", "k"]), bulk("v1"));
    assert_eq!(c.cmd(&["GET", "gone"]), bulk("x"));
    assert_eq!(c.cmd(&["EXISTS", "new"]), Value::Int(0));
    assert_eq!(
        c.cmd(&["SX.RANGE", "0", "-", "+"]),
        bulks(&["gone", "x", "k", "v1"])
    );
    assert_eq!(
        c.cmd(&["SET", "k", "v3"]),
        err("READONLY You can't write against a snapshot.")
    );
    assert_eq!(c.cmd(&["SELECT", "3"]), ok());
    assert_eq!(
        c.cmd(&["GET", "k"]),
        Value::Nil,
        "a database the snapshot lacks"
    );
    assert_eq!(c.cmd(&["SELECT", "0"]), ok());
    // MULTI at a snapshot: reads run there, writes are refused while queueing.
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["GET", "k"]), Value::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["EXEC"]), Value::Array(vec![bulk("v1")]));
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(
        c.cmd(&["SET", "k", "v3"]),
        err("READONLY You can't write against a snapshot.")
    );
    assert_eq!(
        c.cmd(&["EXEC"]),
        err("EXECABORT Transaction discarded because of previous errors.")
    );
    assert_eq!(
        c.cmd(&["SX.BEGIN"]),
        err("ERR SX.BEGIN while reading at a snapshot: SX.READAT LIVE first")
    );
    assert_eq!(c.cmd(&["SX.READAT", "live"]), ok());
    assert_eq!(c.cmd(&["GET", "k"]), bulk("v2"));
    // Errors and dropping.
    assert_eq!(
        c.cmd(&["SX.READAT", "nosuch"]),
        err("ERR no snapshot named \"nosuch\"")
    );
    assert_eq!(c.cmd(&["SX.SNAPSHOT", "DROP", "s1"]), ok());
    assert_eq!(
        c.cmd(&["SX.SNAPSHOT", "DROP", "s1"]),
        err("ERR no snapshot named \"s1\"")
    );
    assert_eq!(c.cmd(&["SX.SNAPSHOT", "LIST"]), Value::Array(vec![]));
    assert_eq!(
        c.cmd(&["SX.SNAPSHOT", "CREATE", ""]),
        err("ERR invalid snapshot name \"\": must be 1 to 255 bytes")
    );
    assert_eq!(
        c.cmd(&["SX.SNAPSHOT", "CREATE"]),
        err("ERR wrong number of arguments for 'sx.snapshot|create' command")
    );
    assert_eq!(
        c.cmd(&["SX.SNAPSHOT", "x"]),
        err("ERR unknown subcommand 'x'. Try SX.SNAPSHOT HELP.")
    );
    assert!(matches!(c.cmd(&["SX.SNAPSHOT", "HELP"]), Value::Array(_)));
}

#[test]
fn a_snapshot_read_survives_its_drop() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["SET", "k", "v1"]), ok());
    assert_eq!(c.cmd(&["SX.SNAPSHOT", "CREATE", "s"]), ok());
    assert_eq!(c.cmd(&["SX.READAT", "s"]), ok());
    assert_eq!(s.client().cmd(&["SX.SNAPSHOT", "DROP", "s"]), ok());
    assert_eq!(c.cmd(&["GET", "k"]), bulk("v1"));
}

#[test]
fn interactive_transactions_read_their_writes_and_commit_at_once() {
    let s = TestServer::start();
    let mut a = s.client();
    let mut b = s.client();
    assert_eq!(a.cmd(&["SET", "x", "0"]), ok());
    assert_eq!(a.cmd(&["SX.BEGIN"]), ok());
    assert_eq!(a.cmd(&["SET", "x", "1"]), ok());
    assert_eq!(a.cmd(&["SET", "y", "1"]), ok());
    assert_eq!(a.cmd(&["GET", "x"]), bulk("1"), "read-your-writes");
    assert_eq!(
        a.cmd(&["SX.RANGE", "0", "-", "+"]),
        bulks(&["x", "1", "y", "1"])
    );
    assert_eq!(
        b.cmd(&["GET", "x"]),
        bulk("0"),
        "not visible before the commit"
    );
    assert_eq!(b.cmd(&["EXISTS", "y"]), Value::Int(0));
    assert_eq!(b.cmd(&["WATCH", "y"]), ok());
    // A failing command inside leaves nothing behind, and the transaction goes on.
    assert_eq!(a.cmd(&["SET", "x", "2", "bogus"]), err("ERR syntax error"));
    assert_eq!(
        a.cmd(&["SX.BEGIN"]),
        err("ERR SX.BEGIN inside a transaction")
    );
    assert_eq!(a.cmd(&["SX.COMMIT"]), ok());
    assert_eq!(b.cmd(&["GET", "x"]), bulk("1"));
    assert_eq!(
        b.cmd(&["DBSIZE"]),
        Value::Int(2),
        "key counts follow the commit"
    );
    assert_eq!(b.cmd(&["MULTI"]), ok());
    assert_eq!(b.cmd(&["GET", "y"]), Value::Simple("QUEUED".into()));
    assert_eq!(
        b.cmd(&["EXEC"]),
        Value::Nil,
        "the commit touched a watched key"
    );
    assert_eq!(a.cmd(&["SX.COMMIT"]), err("ERR SX.COMMIT without SX.BEGIN"));
    assert_eq!(a.cmd(&["SX.ABORT"]), err("ERR SX.ABORT without SX.BEGIN"));
    assert_eq!(a.cmd(&["SX.BEGIN", "bogus"]), err("ERR syntax error"));
    assert_eq!(
        a.cmd(&["SX.BEGIN", "snapshot", "x"]),
        err("ERR syntax error")
    );
    // SX commands do not queue.
    assert_eq!(a.cmd(&["MULTI"]), ok());
    assert_eq!(
        a.cmd(&["SX.BEGIN"]),
        err("ERR Command not allowed inside a transaction")
    );
    assert_eq!(a.cmd(&["DISCARD"]), ok());
}

#[test]
fn abort_reset_and_quit_discard_the_transaction() {
    let s = TestServer::start();
    let mut a = s.client();
    let mut b = s.client();
    assert_eq!(a.cmd(&["SX.BEGIN"]), ok());
    assert_eq!(a.cmd(&["SET", "k", "1"]), ok());
    assert_eq!(a.cmd(&["FLUSHDB"]), ok());
    assert_eq!(a.cmd(&["SET", "j", "1"]), ok());
    assert_eq!(a.cmd(&["SX.ABORT"]), ok());
    assert_eq!(a.cmd(&["EXISTS", "k", "j"]), Value::Int(0));
    assert_eq!(a.cmd(&["SX.BEGIN"]), ok());
    assert_eq!(a.cmd(&["SET", "k", "1"]), ok());
    assert_eq!(a.cmd(&["RESET"]), Value::Simple("RESET".into()));
    assert_eq!(a.cmd(&["SX.COMMIT"]), err("ERR SX.COMMIT without SX.BEGIN"));
    assert_eq!(a.cmd(&["SX.BEGIN", "SERIALIZABLE"]), ok());
    assert_eq!(a.cmd(&["SET", "k", "1"]), ok());
    assert_eq!(a.cmd(&["QUIT"]), ok());
    assert_eq!(b.cmd(&["EXISTS", "k"]), Value::Int(0));
    assert_eq!(b.cmd(&["DBSIZE"]), Value::Int(0));
    // A FLUSHDB inside a transaction empties the database when it commits.
    assert_eq!(b.cmd(&["SET", "k", "1"]), ok());
    assert_eq!(b.cmd(&["SX.BEGIN"]), ok());
    assert_eq!(b.cmd(&["FLUSHDB"]), ok());
    assert_eq!(b.cmd(&["SET", "j", "1"]), ok());
    assert_eq!(b.cmd(&["SX.COMMIT"]), ok());
    assert_eq!(b.cmd(&["DBSIZE"]), Value::Int(1));
    assert_eq!(b.cmd(&["EXISTS", "k"]), Value::Int(0));
}

fn is_conflict(v: &Value) -> bool {
    matches!(v, Value::Error(e) if e.starts_with("CONFLICT "))
}

#[test]
fn conflicts_are_their_own_reply() {
    let s = TestServer::start();
    let mut a = s.client();
    let mut b = s.client();
    // Write-write: the later commit loses, whole.
    assert_eq!(a.cmd(&["SX.BEGIN"]), ok());
    assert_eq!(a.cmd(&["SET", "k", "a"]), ok());
    assert_eq!(a.cmd(&["SET", "other", "a"]), ok());
    assert_eq!(
        b.cmd(&["SET", "k", "b"]),
        ok(),
        "a plain write does not wait"
    );
    let reply = a.cmd(&["SX.COMMIT"]);
    assert!(is_conflict(&reply), "{reply:?}");
    assert_eq!(b.cmd(&["GET", "k"]), bulk("b"));
    assert_eq!(b.cmd(&["EXISTS", "other"]), Value::Int(0));
    assert_eq!(a.cmd(&["SX.ABORT"]), err("ERR SX.ABORT without SX.BEGIN"));

    // Read-write: snapshot isolation lets it commit, serializable does not.
    for (level, conflicts) in [("SNAPSHOT", false), ("SERIALIZABLE", true)] {
        assert_eq!(a.cmd(&["SX.BEGIN", level]), ok());
        assert_eq!(a.cmd(&["GET", "x"]), Value::Nil);
        assert_eq!(b.cmd(&["SET", "x", "b"]), ok());
        assert_eq!(a.cmd(&["SET", "y", level]), ok());
        let reply = a.cmd(&["SX.COMMIT"]);
        assert_eq!(is_conflict(&reply), conflicts, "{level}: {reply:?}");
        assert_eq!(b.cmd(&["EXISTS", "y"]), Value::Int(i64::from(!conflicts)));
        assert_eq!(
            b.cmd(&["DEL", "x", "y"]),
            Value::Int(1 + i64::from(!conflicts))
        );
    }
    assert_eq!(b.cmd(&["DBSIZE"]), Value::Int(1));
}

#[test]
fn durability_levels() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["SX.DURABILITY"]), bulk("sync"));
    for level in ["written", "ORDERED", "async", "sync"] {
        assert_eq!(c.cmd(&["SX.DURABILITY", level]), ok());
        assert_eq!(c.cmd(&["SX.DURABILITY"]), bulk(&level.to_ascii_lowercase()));
        assert_eq!(c.cmd(&["SET", "k", level]), ok());
        assert_eq!(s.client().cmd(&["GET", "k"]), bulk(level));
    }
    assert_eq!(c.cmd(&["SX.DURABILITY", "never"]), err("ERR syntax error"));
    assert_eq!(
        c.cmd(&["SX.DURABILITY", "sync", "x"]),
        err("ERR syntax error")
    );
    assert_eq!(c.cmd(&["SX.DURABILITY", "async"]), ok());
    assert_eq!(c.cmd(&["RESET"]), Value::Simple("RESET".into()));
    assert_eq!(c.cmd(&["SX.DURABILITY"]), bulk("sync"), "RESET restores it");
}

fn group(c: &mut support::Client) -> String {
    match c.cmd(&["SX.PATCHGROUP", "CREATE"]) {
        Value::Int(id) => id.to_string(),
        other => panic!("CREATE replies with an id: {other:?}"),
    }
}

#[test]
fn patchgroups_order_and_sync_a_connections_commits() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["SX.DURABILITY", "async"]), ok());
    let g1 = group(&mut c);
    let g2 = group(&mut c);
    assert_ne!(g1, g2);
    assert_eq!(c.cmd(&["SX.PATCHGROUP", "ENGAGE", &g1]), ok());
    assert_eq!(c.cmd(&["SET", "a", "1"]), ok());
    assert_eq!(c.cmd(&["SX.BEGIN"]), ok());
    assert_eq!(c.cmd(&["SET", "b", "1"]), ok());
    assert_eq!(c.cmd(&["SX.COMMIT"]), ok());
    // An engaged group's set of writes is not final: nothing may depend on it yet.
    let Value::Error(e) = c.cmd(&["SX.PATCHGROUP", "DEPEND", &g2, &g1]) else {
        panic!("depending on an engaged group is refused")
    };
    assert!(
        e.starts_with("ERR patchgroup") && e.ends_with("is engaged"),
        "{e}"
    );
    assert_eq!(c.cmd(&["SX.PATCHGROUP", "DISENGAGE", &g1]), ok());
    assert_eq!(c.cmd(&["SX.PATCHGROUP", "DEPEND", &g2, &g1]), ok());
    let Value::Error(e) = c.cmd(&["SX.PATCHGROUP", "ENGAGE", &g1]) else {
        panic!("a group another depends on is sealed")
    };
    assert!(e.contains("is sealed"), "{e}");
    assert_eq!(c.cmd(&["SX.PATCHGROUP", "ENGAGE", &g2]), ok());
    assert_eq!(c.cmd(&["SET", "c", "1"]), ok());
    assert_eq!(c.cmd(&["SX.PATCHGROUP", "DISENGAGE", &g2]), ok());
    // SYNC makes the group's writes durable, and what they follow (g1's).
    assert_eq!(c.cmd(&["SX.PATCHGROUP", "SYNC", &g2]), ok());
    assert_eq!(c.cmd(&["SX.PATCHGROUP", "SYNC", &g1]), ok());
    assert_eq!(c.cmd(&["SX.PATCHGROUP", "RELEASE", &g1]), ok());
    let Value::Error(e) = c.cmd(&["SX.PATCHGROUP", "SYNC", &g1]) else {
        panic!("a released group is unknown")
    };
    assert!(e.starts_with("ERR no patchgroup"), "{e}");
    assert_eq!(
        c.cmd(&["SX.PATCHGROUP", "ENGAGE", "-1"]),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        c.cmd(&["SX.PATCHGROUP", "DEPEND", &g2]),
        err("ERR wrong number of arguments for 'sx.patchgroup|depend' command")
    );
    assert_eq!(
        c.cmd(&["SX.PATCHGROUP", "nope"]),
        err("ERR unknown subcommand 'nope'. Try SX.PATCHGROUP HELP.")
    );
    // Engaged while the connection goes: its groups are closed with it.
    let g3 = group(&mut c);
    assert_eq!(c.cmd(&["SX.PATCHGROUP", "ENGAGE", &g3]), ok());
    assert_eq!(c.cmd(&["QUIT"]), ok());
    let mut d = s.client();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        match d.cmd(&["SX.PATCHGROUP", "SYNC", &g3]) {
            Value::Error(e) if e.starts_with("ERR no patchgroup") => break,
            _ if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            other => panic!("the group outlived its connection: {other:?}"),
        }
    }
    for k in ["a", "b", "c"] {
        assert_eq!(d.cmd(&["GET", k]), bulk("1"));
    }
}
