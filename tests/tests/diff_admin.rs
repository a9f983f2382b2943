//! Differential tests of the connection and server commands against a real redis-server.

use latchkey_tests::{Diff, RawConn};

#[test]
fn config_get_and_set() {
    let mut d = Diff::new();
    d.table(&[
        "CONFIG GET maxclients",
        "CONFIG GET save",
        "CONFIG GET appendonly",
        "CONFIG GET proto-max-bulk-len",
        "CONFIG GET busy-reply-threshold",
        "CONFIG GET lua-time-limit",
        "CONFIG GET maxmemory",
        "CONFIG GET nosuch",
        "CONFIG GET",
        "CONFIG SET nosuch 1",
        "CONFIG SET maxclients abc",
        "CONFIG SET maxclients",
        "CONFIG SET busy-reply-threshold 4000",
        "CONFIG GET lua-time-limit",
        "CONFIG SET busy-reply-threshold 5000",
        "CONFIG REWRITE",
        "CONFIG FOO",
    ]);
}

#[test]
fn keyspace_wide_and_client_commands() {
    let mut d = Diff::new();
    d.table(&[
        "DBSIZE",
        "SET a 1",
        "SET b 2",
        "DBSIZE",
        "SELECT 2",
        "SET c 3",
        "DBSIZE",
        "FLUSHDB",
        "DBSIZE",
        "SELECT 0",
        "DBSIZE",
        "FLUSHDB bogus",
        "FLUSHALL bogus",
        "FLUSHALL ASYNC",
        "DBSIZE",
        "CLIENT GETNAME",
        "CLIENT SETNAME worker-1",
        "CLIENT GETNAME",
        "CLIENT SETNAME",
        "CLIENT FOO",
        "CLIENT KILL",
        "CLIENT KILL 1.2.3.4:5",
        "CLIENT KILL ID 999999",
        "CLIENT NO-EVICT",
        "CLIENT NO-EVICT on",
        "COMMAND FOO",
        "COMMAND COUNT x",
        "TIME x",
        "ECHO",
        "HELLO 4",
        "HELLO x",
        "RESET",
        "CLIENT GETNAME",
    ]);
    d.check(&["CLIENT", "SETNAME", "a b"]);
}

#[test]
fn hello_and_info_shapes() {
    let mut d = Diff::new();
    let (r, l) = d.both(&["HELLO", "3"]);
    assert!(r.starts_with(b"%7\r\n") && l.starts_with(b"%7\r\n"));
    let (r, l) = d.both(&["INFO", "keyspace"]);
    assert_eq!(r, l, "empty keyspace section");
    d.check(&["SET", "k", "v"]);
    let (_, l) = d.both(&["INFO"]);
    let text = String::from_utf8_lossy(&l);
    for needle in [
        "# Server",
        "redis_version:",
        "# Clients",
        "connected_clients:",
        "# Replication",
        "role:master",
        "# Keyspace",
        "db0:keys=1,expires=0",
    ] {
        assert!(text.contains(needle), "INFO lacks {needle}: {text}");
    }
    let (_, l) = d.both(&["CLIENT", "ID"]);
    assert!(l.starts_with(b":"));
}

#[test]
fn wait_without_replicas() {
    let mut d = Diff::new();
    d.table(&[
        "SET k v",
        "WAIT 0 0",
        "WAIT 1 50",
        "WAIT -1 10",
        "WAIT 1 -1",
        "WAIT x 1",
        "WAIT 1",
    ]);
    d.check(&["EVAL", "return redis.call('wait', 0, 0)", "0"]);
}

/// `CLIENT KILL`'s two forms and every filter's error, with only the caller connected (whom
/// the new form skips by default).
#[test]
fn client_kill_filters_and_errors() {
    let mut d = Diff::new();
    d.table(&[
        "CLIENT KILL 1.2.3.4:5",
        "CLIENT KILL ID",
        "CLIENT KILL ID 999999",
        "CLIENT KILL ID 0",
        "CLIENT KILL ID -1",
        "CLIENT KILL ID abc",
        "CLIENT KILL ID abc TYPE",
        "CLIENT KILL ID 5 SKIPME",
        "CLIENT KILL TYPE foo",
        "CLIENT KILL TYPE normal",
        "CLIENT KILL TYPE NORMAL SKIPME yes",
        "CLIENT KILL TYPE master",
        "CLIENT KILL TYPE replica",
        "CLIENT KILL TYPE slave",
        "CLIENT KILL TYPE pubsub",
        "CLIENT KILL USER nobody",
        "CLIENT KILL USER default",
        "CLIENT KILL SKIPME maybe",
        "CLIENT KILL SKIPME no TYPE pubsub",
        "CLIENT KILL ADDR 1.2.3.4:5",
        "CLIENT KILL LADDR 1.2.3.4:5 ADDR 1.2.3.4:6",
        "CLIENT KILL MAXAGE 10",
        "CLIENT KILL FOO bar",
        "CLIENT LIST TYPE foo",
        "CLIENT LIST TYPE master",
        "CLIENT LIST TYPE replica",
        "PING",
    ]);
}

/// Whether the server closed `c` (end of stream or reset; a read timeout is not that).
fn closed(c: &mut RawConn) -> bool {
    use std::io::ErrorKind::*;
    match c.try_read_reply() {
        Ok(_) => false,
        Err(e) => matches!(
            e.kind(),
            UnexpectedEof | ConnectionReset | ConnectionAborted
        ),
    }
}

/// The filters really select: a subscriber falls to `TYPE pubsub`, a normal client to its
/// `ADDR` and `ID`, the caller to `SKIPME no` and to the old form with its own address.
#[test]
fn client_kill_closes_what_it_matches() {
    let d = Diff::new();
    for addr in [d.redis_proc.addr(), d.latchkey_server.addr()] {
        let mut me = RawConn::connect(addr).expect("connect");
        let mut sub = RawConn::connect(addr).expect("connect");
        sub.cmd(&["SUBSCRIBE", "news"]);
        let mut other = RawConn::connect(addr).expect("connect");
        assert_eq!(other.cmd(&["PING"]), b"+PONG\r\n");
        assert_eq!(
            me.cmd(&["CLIENT", "KILL", "TYPE", "pubsub"]),
            b":1\r\n",
            "{addr}"
        );
        assert!(closed(&mut sub), "{addr}: subscriber alive");
        // The other client's own view of its address and id.
        let info = String::from_utf8_lossy(&other.cmd(&["CLIENT", "INFO"])).into_owned();
        let field = |name: &str| {
            info.split_whitespace()
                .find_map(|f| f.strip_prefix(&format!("{name}=")))
                .map(str::to_string)
                .unwrap_or_else(|| panic!("no {name} in {info}"))
        };
        let (id, other_addr) = (field("id"), field("addr"));
        assert_eq!(
            me.cmd(&["CLIENT", "KILL", "ID", &id, "ADDR", "1.2.3.4:5"]),
            b":0\r\n",
            "{addr}: both filters must match"
        );
        assert_eq!(
            me.cmd(&["CLIENT", "KILL", "ID", &id, "ADDR", &other_addr]),
            b":1\r\n",
            "{addr}"
        );
        assert!(closed(&mut other), "{addr}: client alive");
        // The caller and the differential test's own connection.
        assert_eq!(
            me.cmd(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "no"]),
            b":2\r\n",
            "{addr}"
        );
        assert!(closed(&mut me), "{addr}: caller alive");
        // The old form may name the caller itself: +OK, then the connection closes.
        let mut me = RawConn::connect(addr).expect("connect");
        let info = String::from_utf8_lossy(&me.cmd(&["CLIENT", "INFO"])).into_owned();
        let own = info
            .split_whitespace()
            .find_map(|f| f.strip_prefix("addr="))
            .expect("addr")
            .to_string();
        assert_eq!(me.cmd(&["CLIENT", "KILL", &own]), b"+OK\r\n", "{addr}");
        assert!(closed(&mut me), "{addr}: caller alive");
    }
}

/// latchkey is no cluster node: `CLUSTER`'s subcommands are looked up and their arity checked
/// as Redis does, then answer that cluster support is disabled, as do `READONLY`, `READWRITE`
/// and `ASKING` (client libraries send them to learn what they talk to).
#[test]
fn cluster_commands_on_a_standalone_node() {
    let mut d = Diff::new();
    d.table(&[
        "CLUSTER INFO",
        "CLUSTER SLOTS",
        "CLUSTER SHARDS",
        "CLUSTER NODES",
        "CLUSTER MYID",
        "CLUSTER KEYSLOT foo",
        "CLUSTER KEYSLOT",
        "CLUSTER INFO extra",
        "CLUSTER HELP",
        "CLUSTER RESET HARD",
        "CLUSTER SETSLOT 1 NODE",
        "CLUSTER GETKEYSINSLOT 1 10",
        "CLUSTER nosuch",
        "CLUSTER",
        "READONLY",
        "READONLY x",
        "READWRITE",
        "ASKING",
    ]);
}
