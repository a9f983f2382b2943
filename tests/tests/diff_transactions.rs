//! Differential tests of MULTI/EXEC/DISCARD/WATCH against a real redis-server.

use latchkey_tests::{Diff, RawConn};

#[test]
fn queueing_exec_and_errors() {
    let mut d = Diff::new();
    d.table(&[
        "EXEC",
        "DISCARD",
        "MULTI",
        "MULTI",
        "SET a 1",
        "INCR a",
        "GET a",
        "EXEC",
        "MULTI",
        "SET a 1",
        "NOSUCH x",
        "EXEC",
        "GET a",
        "MULTI",
        "GET",
        "SET b 2",
        "EXEC",
        "EXISTS b",
        "MULTI",
        "SET s str",
        "INCR s",
        "SET t 1",
        "EXEC",
        "GET t",
        "MULTI",
        "SET x 1",
        "DISCARD",
        "EXISTS x",
        "MULTI",
        "WATCH a",
        "SELECT 1",
        "SET inone 1",
        "EXEC",
        "EXISTS inone",
        "SELECT 1",
        "EXISTS inone",
        "SELECT 0",
    ]);
}

#[test]
fn watch_aborts_on_a_change_by_another_client() {
    let mut d = Diff::new();
    let mut r2 = RawConn::connect(d.redis_proc.addr()).unwrap();
    let mut l2 = RawConn::connect(d.latchkey_server.addr()).unwrap();
    d.table(&["SET lock 1", "WATCH lock", "MULTI", "INCR lock"]);
    assert_eq!(r2.cmd(&["SET", "lock", "2"]), l2.cmd(&["SET", "lock", "2"]));
    let aborted = d.check(&["EXEC"]);
    assert_eq!(aborted, b"*-1\r\n");
    d.table(&["GET lock", "WATCH lock", "MULTI", "INCR lock", "EXEC"]);
    // WATCH is released by EXEC: a later change does not matter.
    d.table(&["WATCH lock", "UNWATCH", "MULTI", "INCR lock"]);
    r2.cmd(&["SET", "lock", "5"]);
    l2.cmd(&["SET", "lock", "5"]);
    d.table(&["EXEC", "GET lock"]);
    // Our own writes inside the transaction do not abort it; a DEL by another client does.
    d.table(&["WATCH lock", "MULTI", "SET lock 10", "EXEC"]);
    d.table(&["WATCH lock"]);
    r2.cmd(&["DEL", "lock"]);
    l2.cmd(&["DEL", "lock"]);
    d.table(&["MULTI", "SET lock 11", "EXEC", "GET lock"]);
}

#[test]
fn watched_key_expiring_aborts() {
    let mut d = Diff::new();
    d.table(&["SET k v PX 50", "WATCH k"]);
    std::thread::sleep(std::time::Duration::from_millis(120));
    d.table(&["MULTI", "SET other 1", "EXEC", "EXISTS other"]);
}

#[test]
fn multi_under_resp3() {
    let mut d = Diff::new();
    d.both(&["HELLO", "3"]);
    d.table(&["MULTI", "SET a 1", "GET a", "GET nokey", "EXEC"]);
}

/// Emptying a database dooms only the transactions watching a key it held, as Redis 7.0's
/// `touchAllWatchedKeysInDb` decides: a watched key that did not exist is not changed by the
/// flush, so that transaction runs. Both flushes, sync and async, on both servers.
#[test]
fn a_flush_dooms_only_transactions_watching_a_key_it_removed() {
    let mut d = Diff::new();
    for flush in ["FLUSHALL", "FLUSHDB", "FLUSHALL ASYNC", "FLUSHDB ASYNC"] {
        // The watched key does not exist: the transaction runs.
        d.table(&["DEL absent", "WATCH absent", flush, "MULTI", "PING"]);
        assert_eq!(
            d.check(&["EXEC"]),
            b"*1\r\n+PONG\r\n",
            "{flush}, key absent"
        );
        // The watched key existed: the transaction is aborted.
        d.table(&[
            "SET present 1",
            "WATCH absent present",
            flush,
            "MULTI",
            "PING",
        ]);
        assert_eq!(d.check(&["EXEC"]), b"*-1\r\n", "{flush}, key present");
    }
    // A key in another database is not this flush's business.
    d.table(&[
        "SELECT 1",
        "SET elsewhere 1",
        "SELECT 0",
        "WATCH absent",
        "SELECT 1",
        "FLUSHDB",
        "SELECT 0",
        "MULTI",
        "PING",
    ]);
    assert_eq!(d.check(&["EXEC"]), b"*1\r\n+PONG\r\n");
}
