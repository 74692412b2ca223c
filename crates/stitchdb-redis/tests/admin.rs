//! The connection and server commands: CLIENT, COMMAND, INFO, CONFIG, SAVE, BGSAVE,
//! LASTSAVE, SHUTDOWN, with the replies Redis 7.0 gives.

mod support;

use support::{bulk, ok, Client, TestServer, Value};

fn err(s: &str) -> Value {
    Value::Error(s.into())
}

fn text(v: &Value) -> String {
    match v {
        Value::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
        Value::Verbatim(s) => s.clone(),
        other => panic!("not text: {other:?}"),
    }
}

/// `field=value` of a `CLIENT LIST` line.
fn field(line: &str, name: &str) -> String {
    line.split(' ')
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} in {line}"))
        .to_string()
}

#[test]
fn client_names_and_ids() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]), Value::Nil);
    assert_eq!(
        c.cmd(&["CLIENT", "SETNAME", "a b"]),
        err("ERR Client names cannot contain spaces, newlines or special characters.")
    );
    assert_eq!(
        c.cmd(&["CLIENT", "SETNAME", "é"]),
        err("ERR Client names cannot contain spaces, newlines or special characters.")
    );
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", "worker-1"]), ok());
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]), bulk("worker-1"));
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", ""]), ok());
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]), Value::Nil);
    let Value::Int(id) = c.cmd(&["CLIENT", "ID"]) else {
        panic!("CLIENT ID is an integer")
    };
    let Value::Int(other) = s.client().cmd(&["CLIENT", "ID"]) else {
        panic!("CLIENT ID is an integer")
    };
    assert!(other > id);
    assert_eq!(
        c.cmd(&["CLIENT", "SETNAME"]),
        err("ERR wrong number of arguments for 'client|setname' command")
    );
    assert_eq!(
        c.cmd(&["CLIENT", "GETNAME", "x"]),
        err("ERR wrong number of arguments for 'client|getname' command")
    );
    assert_eq!(
        c.cmd(&["CLIENT", "foo"]),
        err("ERR unknown subcommand 'foo'. Try CLIENT HELP.")
    );
    assert_eq!(
        c.cmd(&["CLIENT"]),
        err("ERR wrong number of arguments for 'client' command")
    );
    let Value::Array(help) = c.cmd(&["CLIENT", "HELP"]) else {
        panic!("CLIENT HELP is an array")
    };
    assert_eq!(
        help[0],
        Value::Simple("CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:".into())
    );
    assert_eq!(
        help.last(),
        Some(&Value::Simple("    Prints this help.".into()))
    );
}

#[test]
fn client_list_and_info_lines() {
    let s = TestServer::start();
    let mut c = s.client();
    let mut other = s.client();
    assert_eq!(other.cmd(&["SELECT", "3"]), ok());
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", "me"]), ok());
    assert_eq!(c.cmd(&["CLIENT", "SETINFO", "lib-name", "redis-py"]), ok());
    assert_eq!(c.cmd(&["CLIENT", "SETINFO", "LIB-VER", "5.0.1"]), ok());
    assert_eq!(
        c.cmd(&["CLIENT", "SETINFO", "lib-name", "a b"]),
        err("ERR lib-name cannot contain spaces, newlines or special characters.")
    );
    assert_eq!(
        c.cmd(&["CLIENT", "SETINFO", "colour", "x"]),
        err("ERR Unrecognized option 'colour'")
    );
    let Value::Int(id) = c.cmd(&["CLIENT", "ID"]) else {
        panic!()
    };
    let list = text(&c.cmd(&["CLIENT", "LIST"]));
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(list.ends_with('\n'));
    let mine = lines.iter().find(|l| l.contains("name=me ")).unwrap();
    assert!(mine.starts_with(&format!("id={id} addr=127.0.0.1:")));
    assert_eq!(field(mine, "laddr"), s.addr.to_string());
    assert_eq!(field(mine, "cmd"), "client|list");
    assert_eq!(field(mine, "db"), "0");
    assert_eq!(field(mine, "flags"), "N");
    assert_eq!(field(mine, "multi"), "-1");
    assert_eq!(field(mine, "user"), "default");
    assert_eq!(field(mine, "resp"), "2");
    assert_eq!(field(mine, "lib-name"), "redis-py");
    assert_eq!(field(mine, "lib-ver"), "5.0.1");
    let theirs = lines.iter().find(|l| !l.contains("name=me ")).unwrap();
    assert_eq!(field(theirs, "db"), "3");
    assert_eq!(field(theirs, "cmd"), "select");
    // CLIENT INFO is this client's line; RESP3 makes it verbatim text.
    assert!(matches!(c.cmd(&["HELLO", "3"]), Value::Map(_)));
    let Value::Verbatim(info) = c.cmd(&["CLIENT", "INFO"]) else {
        panic!("CLIENT INFO is verbatim text in RESP3")
    };
    assert_eq!(field(&info, "cmd"), "client|info");
    assert_eq!(field(&info, "resp"), "3");
    assert!(info.ends_with('\n'));
    // Filters.
    let by_id = text(&c.cmd(&["CLIENT", "LIST", "ID", &id.to_string(), "999"]));
    assert_eq!(by_id.lines().count(), 1);
    assert_eq!(text(&c.cmd(&["CLIENT", "LIST", "ID", "0"])), "");
    assert_eq!(
        c.cmd(&["CLIENT", "LIST", "ID", "x"]),
        err("ERR Invalid client ID")
    );
    assert_eq!(
        text(&c.cmd(&["CLIENT", "LIST", "TYPE", "normal"]))
            .lines()
            .count(),
        2
    );
    assert_eq!(text(&c.cmd(&["CLIENT", "LIST", "TYPE", "pubsub"])), "");
    assert_eq!(
        c.cmd(&["CLIENT", "LIST", "TYPE", "foo"]),
        err("ERR Unknown client type 'foo'")
    );
    assert_eq!(c.cmd(&["CLIENT", "LIST", "foo"]), err("ERR syntax error"));
    assert_eq!(c.cmd(&["CLIENT", "NO-EVICT", "on"]), ok());
    assert_eq!(c.cmd(&["CLIENT", "NO-TOUCH", "OFF"]), ok());
    assert_eq!(
        c.cmd(&["CLIENT", "NO-EVICT", "maybe"]),
        err("ERR syntax error")
    );
}

#[test]
fn client_kill_in_both_forms() {
    let s = TestServer::start();
    let mut c = s.client();
    let mut victim = s.client();
    let Value::Int(vid) = victim.cmd(&["CLIENT", "ID"]) else {
        panic!()
    };
    let vaddr = victim.stream.local_addr().unwrap().to_string();
    assert_eq!(
        c.cmd(&["CLIENT", "KILL", "1.2.3.4:5"]),
        err("ERR No such client")
    );
    assert_eq!(c.cmd(&["CLIENT", "KILL", &vaddr]), ok());
    assert_eq!(victim.read(), None, "the killed client is disconnected");

    let mut victim = s.client();
    let Value::Int(vid2) = victim.cmd(&["CLIENT", "ID"]) else {
        panic!()
    };
    assert!(vid2 > vid);
    assert_eq!(c.cmd(&["CLIENT", "KILL", "ID", "999999"]), Value::Int(0));
    assert_eq!(
        c.cmd(&["CLIENT", "KILL", "ID", &vid2.to_string()]),
        Value::Int(1)
    );
    assert_eq!(victim.read(), None);

    for (args, reply) in [
        (vec!["ID", "0"], "ERR client-id should be greater than 0"),
        (vec!["ID", "abc"], "ERR client-id should be greater than 0"),
        (vec!["TYPE", "foo"], "ERR Unknown client type 'foo'"),
        (vec!["USER", "bob"], "ERR No such user 'bob'"),
        (vec!["SKIPME", "maybe"], "ERR syntax error"),
        (vec!["ID", "1", "ADDR"], "ERR syntax error"),
        (vec!["MAXAGE", "1"], "ERR syntax error"),
    ] {
        let mut cmd = vec!["CLIENT", "KILL"];
        cmd.extend(args);
        assert_eq!(c.cmd(&cmd), err(reply), "{cmd:?}");
    }
    assert_eq!(
        c.cmd(&["CLIENT", "KILL"]),
        err("ERR wrong number of arguments for 'client|kill' command")
    );
    // By local address, skipping me (the default), then not.
    let mut third = s.client();
    assert_eq!(third.cmd(&["PING"]), Value::Simple("PONG".into()));
    let laddr = s.addr.to_string();
    assert_eq!(
        c.cmd(&["CLIENT", "KILL", "LADDR", &laddr, "TYPE", "normal"]),
        Value::Int(1)
    );
    assert_eq!(c.cmd(&["CLIENT", "KILL", "USER", "default"]), Value::Int(0));
    assert_eq!(
        c.cmd(&["CLIENT", "KILL", "LADDR", &laddr, "SKIPME", "no"]),
        Value::Int(1),
        "the reply to the killer itself is still sent"
    );
    assert_eq!(c.read(), None);
}

#[test]
fn command_reports_the_command_table() {
    let s = TestServer::start();
    let mut c = s.client();
    let Value::Int(count) = c.cmd(&["COMMAND", "COUNT"]) else {
        panic!()
    };
    let Value::Array(all) = c.cmd(&["COMMAND"]) else {
        panic!()
    };
    assert_eq!(all.len() as i64, count);
    let Value::Array(names) = c.cmd(&["COMMAND", "LIST"]) else {
        panic!()
    };
    assert!(names.contains(&bulk("get")));
    assert!(names.contains(&bulk("client|setname")));
    assert!(names.contains(&bulk("sx.range")));
    let get = c.cmd(&["COMMAND", "INFO", "get"]);
    let simple = |s: &str| Value::Simple(s.into());
    let spec = Value::Array(vec![
        bulk("flags"),
        Value::Array(vec![simple("RO"), simple("access")]),
        bulk("begin_search"),
        Value::Array(vec![
            bulk("type"),
            bulk("index"),
            bulk("spec"),
            Value::Array(vec![bulk("index"), Value::Int(1)]),
        ]),
        bulk("find_keys"),
        Value::Array(vec![
            bulk("type"),
            bulk("range"),
            bulk("spec"),
            Value::Array(vec![
                bulk("lastkey"),
                Value::Int(0),
                bulk("keystep"),
                Value::Int(1),
                bulk("limit"),
                Value::Int(0),
            ]),
        ]),
    ]);
    assert_eq!(
        get,
        Value::Array(vec![Value::Array(vec![
            bulk("get"),
            Value::Int(2),
            Value::Array(vec![simple("readonly"), simple("fast")]),
            Value::Int(1),
            Value::Int(1),
            Value::Int(1),
            Value::Array(vec![simple("@read"), simple("@string"), simple("@fast")]),
            Value::Array(vec![]),
            Value::Array(vec![spec]),
            Value::Array(vec![]),
        ])])
    );
    let Value::Array(info) = c.cmd(&["COMMAND", "INFO", "client", "nosuch", "config|get"]) else {
        panic!()
    };
    assert_eq!(info[1], Value::Nil);
    let Value::Array(client) = &info[0] else {
        panic!()
    };
    assert_eq!(client[0], bulk("client"));
    assert_eq!(client[6], Value::Array(vec![simple("@slow")]));
    let Value::Array(subs) = &client[9] else {
        panic!()
    };
    assert!(subs.iter().any(
        |s| matches!(s, Value::Array(f) if f[0] == bulk("client|kill") && f[1] == Value::Int(-3))
    ));
    let Value::Array(config_get) = &info[2] else {
        panic!()
    };
    assert_eq!(config_get[1], Value::Int(-3));
    assert_eq!(
        config_get[6],
        Value::Array(vec![
            simple("@admin"),
            simple("@slow"),
            simple("@dangerous")
        ])
    );

    // DOCS: a map of maps, what redis-cli builds its help from.
    let docs = c.cmd(&["COMMAND", "DOCS", "get", "nosuch", "sx.range"]);
    let Value::Array(docs) = docs else { panic!() };
    assert_eq!(docs.len(), 4);
    assert_eq!(docs[0], bulk("get"));
    assert_eq!(
        docs[1],
        Value::Array(vec![
            bulk("summary"),
            bulk("Get the value of a key"),
            bulk("since"),
            bulk("1.0.0"),
            bulk("group"),
            bulk("string"),
        ])
    );
    assert_eq!(docs[2], bulk("sx.range"));
    let Value::Array(all_docs) = c.cmd(&["COMMAND", "DOCS"]) else {
        panic!()
    };
    assert_eq!(all_docs.len() as i64, 2 * count);

    // GETKEYS.
    assert_eq!(
        c.cmd(&["COMMAND", "GETKEYS", "set", "a", "b"]),
        Value::Array(vec![bulk("a")])
    );
    assert_eq!(
        c.cmd(&["COMMAND", "GETKEYS", "DEL", "a", "b", "c"]),
        Value::Array(vec![bulk("a"), bulk("b"), bulk("c")])
    );
    assert_eq!(
        c.cmd(&["COMMAND", "GETKEYS", "nosuch", "a"]),
        err("ERR Invalid command specified")
    );
    assert_eq!(
        c.cmd(&["COMMAND", "GETKEYS", "ping", "x"]),
        err("ERR The command has no key arguments")
    );
    assert_eq!(
        c.cmd(&["COMMAND", "GETKEYS", "get", "a", "b"]),
        err("ERR Invalid number of arguments specified for command")
    );
    assert_eq!(
        c.cmd(&["COMMAND", "GETKEYS", "get"]),
        err("ERR wrong number of arguments for 'command|getkeys' command")
    );
    // LIST filters, errors.
    assert_eq!(
        c.cmd(&["COMMAND", "LIST", "FILTERBY", "PATTERN", "sx.r*"]),
        Value::Array(vec![bulk("sx.range"), bulk("sx.readat")])
    );
    assert_eq!(
        c.cmd(&["COMMAND", "LIST", "FILTERBY", "MODULE", "x"]),
        Value::Array(vec![])
    );
    let Value::Array(conn) = c.cmd(&["COMMAND", "LIST", "FILTERBY", "ACLCAT", "connection"]) else {
        panic!()
    };
    assert!(conn.contains(&bulk("client|setname")) && !conn.contains(&bulk("get")));
    assert_eq!(
        c.cmd(&["COMMAND", "LIST", "FILTERBY", "foo", "x"]),
        err("ERR syntax error")
    );
    assert_eq!(
        c.cmd(&["COMMAND", "foo"]),
        err("ERR unknown subcommand 'foo'. Try COMMAND HELP.")
    );
    assert_eq!(
        c.cmd(&["COMMAND", "COUNT", "x"]),
        err("ERR wrong number of arguments for 'command|count' command")
    );
    // RESP3: key specifications and docs are maps.
    assert!(matches!(c.cmd(&["HELLO", "3"]), Value::Map(_)));
    let Value::Map(docs) = c.cmd(&["COMMAND", "DOCS", "get"]) else {
        panic!("COMMAND DOCS is a map in RESP3")
    };
    assert!(matches!(&docs[0].1, Value::Map(m) if m.len() == 3));
}

#[test]
fn info_sections_in_redis_format() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["SET", "a", "1"]), ok());
    let all = text(&c.cmd(&["INFO"]));
    let titles: Vec<&str> = all.lines().filter(|l| l.starts_with('#')).collect();
    assert_eq!(
        titles,
        [
            "# Server",
            "# Clients",
            "# Memory",
            "# Persistence",
            "# Stats",
            "# Replication",
            "# CPU",
            "# Modules",
            "# Errorstats",
            "# Cluster",
            "# Keyspace"
        ]
    );
    assert!(all.starts_with("# Server\r\nredis_version:7.0.15\r\n"));
    assert!(all.contains("\r\n\r\n# Clients\r\n"));
    assert!(all.ends_with("db0:keys=1,expires=0,avg_ttl=0\r\n"));
    for line in all.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
        assert!(line.contains(':'), "{line}");
    }
    let field = |text: &str, name: &str| -> String {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .unwrap_or_else(|| panic!("no {name}"))
            .to_string()
    };
    assert_eq!(field(&all, "tcp_port"), s.addr.port().to_string());
    assert_eq!(field(&all, "process_id"), std::process::id().to_string());
    assert_eq!(field(&all, "role"), "master");
    assert_eq!(field(&all, "aof_enabled"), "0");
    assert_eq!(field(&all, "connected_clients"), "1");
    assert_eq!(field(&all, "stitchdb_durability"), "sync");
    assert!(field(&all, "used_memory").parse::<u64>().unwrap() > 0);
    assert!(
        field(&all, "total_commands_processed")
            .parse::<u64>()
            .unwrap()
            >= 2
    );
    assert_eq!(
        c.cmd(&["INFO", "keyspace"]),
        bulk("# Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0\r\n")
    );
    assert_eq!(c.cmd(&["INFO", "nosuch"]), bulk(""));
    let two = text(&c.cmd(&["INFO", "KEYSPACE", "server"]));
    assert!(two.starts_with("# Server\r\n"), "sections in Redis's order");
    assert!(two.contains("\r\n\r\n# Keyspace\r\n"));
    let every = text(&c.cmd(&["INFO", "everything"]));
    assert!(every.contains("# Commandstats\r\n"));
    assert_eq!(c.cmd(&["SELECT", "2"]), ok());
    assert_eq!(c.cmd(&["SET", "b", "1"]), ok());
    assert_eq!(
        c.cmd(&["INFO", "keyspace"]),
        bulk("# Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0\r\ndb2:keys=1,expires=0,avg_ttl=0\r\n")
    );
    assert!(matches!(c.cmd(&["HELLO", "3"]), Value::Map(_)));
    assert!(
        matches!(c.cmd(&["INFO", "cpu"]), Value::Verbatim(t) if t.starts_with("# CPU\r\nused_cpu_sys:"))
    );
}

#[test]
fn config_get_and_set() {
    let s = TestServer::start();
    let mut c = s.client();
    // What redis-benchmark asks when it starts.
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "save"]),
        Value::Array(vec![bulk("save"), bulk("")])
    );
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "appendonly"]),
        Value::Array(vec![bulk("appendonly"), bulk("no")])
    );
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "MAXCLIENTS", "max*", "port"]),
        Value::Array(vec![
            bulk("port"),
            bulk(&s.addr.port().to_string()),
            bulk("maxclients"),
            bulk("10000"),
            bulk("maxmemory"),
            bulk("0"),
            bulk("maxmemory-policy"),
            bulk("noeviction"),
        ])
    );
    assert_eq!(c.cmd(&["CONFIG", "GET", "nosuch"]), Value::Array(vec![]));
    assert_eq!(
        c.cmd(&["CONFIG", "GET"]),
        err("ERR wrong number of arguments for 'config|get' command")
    );
    let failed = |name: &str, why: &str| {
        err(&format!(
            "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
        ))
    };
    for (args, reply) in [
        (
            vec!["nosuch", "1"],
            err("ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'"),
        ),
        (
            vec!["databases", "3"],
            failed("databases", "can't set immutable config"),
        ),
        (
            vec!["maxclients", "abc"],
            failed("maxclients", "argument couldn't be parsed into an integer"),
        ),
        (
            vec!["maxclients", "0"],
            failed(
                "maxclients",
                "argument must be between 1 and 4294967295 inclusive",
            ),
        ),
        (
            vec!["hz", "-1"],
            failed("hz", "argument must be between 0 and 2147483647 inclusive"),
        ),
        (
            vec!["proto-max-bulk-len", "10"],
            failed(
                "proto-max-bulk-len",
                "argument must be between 1048576 and 9223372036854775807 inclusive",
            ),
        ),
        (
            vec!["client-query-buffer-limit", "abc"],
            failed(
                "client-query-buffer-limit",
                "argument must be a memory value",
            ),
        ),
        (
            vec!["maxclients", "100", "maxclients", "200"],
            failed("maxclients", "duplicate parameter"),
        ),
        (vec!["maxclients", "100", "hz"], err("ERR syntax error")),
    ] {
        let mut cmd = vec!["CONFIG", "SET"];
        cmd.extend(args);
        assert_eq!(c.cmd(&cmd), reply, "{cmd:?}");
    }
    // A refused pair leaves the others unchanged.
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "hz", "20", "databases", "1"]),
        failed("databases", "can't set immutable config")
    );
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "hz"]),
        Value::Array(vec![bulk("hz"), bulk("10")])
    );
    assert_eq!(c.cmd(&["CONFIG", "SET", "hz", "0"]), ok());
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "hz"]),
        Value::Array(vec![bulk("hz"), bulk("1")])
    );
    assert_eq!(c.cmd(&["CONFIG", "SET", "hz", "600"]), ok());
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "hz"]),
        Value::Array(vec![bulk("hz"), bulk("500")])
    );
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "proto-max-bulk-len",
            "1gb",
            "client-query-buffer-limit",
            "2mb"
        ]),
        ok()
    );
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "GET",
            "proto-max-bulk-len",
            "client-query-buffer-limit"
        ]),
        Value::Array(vec![
            bulk("proto-max-bulk-len"),
            bulk("1073741824"),
            bulk("client-query-buffer-limit"),
            bulk("2097152"),
        ])
    );
    assert_eq!(c.cmd(&["CONFIG", "SET", "save", ""]), ok());
    assert_eq!(c.cmd(&["CONFIG", "SET", "appendonly", "no"]), ok());
    assert!(matches!(
        c.cmd(&["CONFIG", "SET", "appendonly", "yes"]),
        Value::Error(_)
    ));
    // requirepass: new clients must authenticate, this one stays in.
    assert_eq!(c.cmd(&["CONFIG", "SET", "requirepass", "pw"]), ok());
    assert_eq!(
        s.client().cmd(&["GET", "k"]),
        err("NOAUTH Authentication required.")
    );
    assert_eq!(c.cmd(&["GET", "k"]), Value::Nil);
    assert_eq!(c.cmd(&["CONFIG", "SET", "requirepass", ""]), ok());
    assert_eq!(s.client().cmd(&["GET", "k"]), Value::Nil);
    // maxclients: one more is refused.
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxclients", "1"]), ok());
    let mut refused = Client::connect(s.addr);
    assert_eq!(
        refused.read(),
        Some(err("ERR max number of clients reached"))
    );
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxclients", "10000"]), ok());
    // RESETSTAT, REWRITE, RESP3.
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), ok());
    let stats = text(&c.cmd(&["INFO", "stats"]));
    assert!(
        stats.contains("\r\ntotal_commands_processed:1\r\n"),
        "{stats}"
    );
    assert_eq!(
        c.cmd(&["CONFIG", "REWRITE"]),
        err("ERR The server is running without a config file")
    );
    assert_eq!(
        c.cmd(&["CONFIG", "foo"]),
        err("ERR unknown subcommand 'foo'. Try CONFIG HELP.")
    );
    assert!(matches!(c.cmd(&["HELLO", "3"]), Value::Map(_)));
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "timeout"]),
        Value::Map(vec![(bulk("timeout"), bulk("0"))])
    );
}

#[test]
fn save_bgsave_lastsave() {
    let s = TestServer::start();
    let mut c = s.client();
    let Value::Int(before) = c.cmd(&["LASTSAVE"]) else {
        panic!()
    };
    assert_eq!(c.cmd(&["SX.DURABILITY", "async"]), ok());
    assert_eq!(c.cmd(&["SET", "k", "v"]), ok());
    assert_eq!(c.cmd(&["SAVE"]), ok());
    assert_eq!(
        c.cmd(&["BGSAVE"]),
        Value::Simple("Background saving started".into())
    );
    assert_eq!(
        c.cmd(&["BGSAVE", "SCHEDULE"]),
        Value::Simple("Background saving started".into())
    );
    assert_eq!(c.cmd(&["BGSAVE", "x"]), err("ERR syntax error"));
    let Value::Int(after) = c.cmd(&["LASTSAVE"]) else {
        panic!()
    };
    assert!(after >= before);
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(
        c.cmd(&["SAVE"]),
        err("ERR Command not allowed inside a transaction")
    );
    assert_eq!(
        c.cmd(&["EXEC"]),
        err("EXECABORT Transaction discarded because of previous errors.")
    );
}

#[test]
fn shutdown_stops_the_server() {
    let mut s = TestServer::start();
    let mut c = s.client();
    let mut other = s.client();
    assert_eq!(
        c.cmd(&["SHUTDOWN", "ABORT"]),
        err("ERR No shutdown in progress.")
    );
    assert_eq!(c.cmd(&["SHUTDOWN", "foo"]), err("ERR syntax error"));
    assert_eq!(
        c.cmd(&["SHUTDOWN", "NOSAVE", "SAVE"]),
        err("ERR syntax error")
    );
    assert_eq!(
        c.cmd(&["SHUTDOWN", "ABORT", "NOW"]),
        err("ERR syntax error")
    );
    assert_eq!(c.cmd(&["SET", "k", "v"]), ok());
    c.send_raw(&Client::encode(&[b"SHUTDOWN", b"NOW"]));
    assert_eq!(c.read(), None, "no reply: the connection closes");
    assert_eq!(other.read(), None, "every connection closes");
    assert_eq!(s.stop(), Ok(()));
    assert!(std::net::TcpStream::connect(s.addr).is_err());
}
