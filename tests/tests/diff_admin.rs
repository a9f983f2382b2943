//! Differential tests of the connection and server commands against a real redis-server.

use latchkey_tests::Diff;

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
