//! Blocking sorted-set pops (`BZPOPMIN`, `BZPOPMAX`, `BZMPOP`): woken by a `ZADD` or a
//! `ZUNIONSTORE` from another client, timing out with a null array, answering at once inside
//! `MULTI`, and left waiting by a transaction that adds and deletes. Every scenario runs on a
//! real redis-server and on latchkey, and the replies must be the same bytes.

use latchkey_server::Server;
use latchkey_tests::raw::wait_clients_in;
use latchkey_tests::{RawConn, RedisProcess};

fn both_servers() -> (RedisProcess, latchkey_server::BlockingServer) {
    (
        RedisProcess::spawn(&[]),
        Server::builder().start_blocking().expect("start latchkey"),
    )
}

#[test]
fn bzpopmin_and_bzpopmax_are_served_by_a_zadd() {
    let (redis, latchkey) = both_servers();
    for addr in [redis.addr(), latchkey.addr()] {
        let mut waiter = RawConn::connect(addr).unwrap();
        let mut other = RawConn::connect(addr).unwrap();
        waiter.send_raw(&RawConn::encode(&["BZPOPMIN", "z1", "z2", "0"]));
        wait_clients_in(addr, "bzpopmin", 1);
        assert_eq!(other.cmd(&["ZADD", "z2", "5", "e", "1", "a"]), b":2\r\n");
        assert_eq!(
            waiter.read_reply(),
            b"*3\r\n$2\r\nz2\r\n$1\r\na\r\n$1\r\n1\r\n"
        );
        waiter.send_raw(&RawConn::encode(&["BZPOPMAX", "z1", "0"]));
        wait_clients_in(addr, "bzpopmax", 1);
        assert_eq!(other.cmd(&["ZADD", "z1", "2", "b", "3", "c"]), b":2\r\n");
        assert_eq!(
            waiter.read_reply(),
            b"*3\r\n$2\r\nz1\r\n$1\r\nc\r\n$1\r\n3\r\n"
        );
        // What was not popped is still there.
        assert_eq!(
            other.cmd(&["ZRANGE", "z1", "0", "-1"]),
            b"*1\r\n$1\r\nb\r\n"
        );
        assert_eq!(
            other.cmd(&["ZRANGE", "z2", "0", "-1"]),
            b"*1\r\n$1\r\ne\r\n"
        );
    }
}

#[test]
fn bzmpop_is_served_by_a_zadd_and_by_a_store() {
    let (redis, latchkey) = both_servers();
    for addr in [redis.addr(), latchkey.addr()] {
        let mut waiter = RawConn::connect(addr).unwrap();
        let mut other = RawConn::connect(addr).unwrap();
        waiter.send_raw(&RawConn::encode(&[
            "BZMPOP", "0", "2", "a", "b", "MAX", "COUNT", "2",
        ]));
        wait_clients_in(addr, "bzmpop", 1);
        assert_eq!(
            other.cmd(&["ZADD", "b", "1", "x", "2", "y", "3", "z"]),
            b":3\r\n"
        );
        assert_eq!(
            waiter.read_reply(),
            b"*2\r\n$1\r\nb\r\n*2\r\n*2\r\n$1\r\nz\r\n$1\r\n3\r\n*2\r\n$1\r\ny\r\n$1\r\n2\r\n"
        );
        // A sorted set stored onto the key serves the waiting client as an add does.
        waiter.send_raw(&RawConn::encode(&["BZMPOP", "0", "1", "a", "MIN"]));
        wait_clients_in(addr, "bzmpop", 1);
        assert_eq!(other.cmd(&["ZUNIONSTORE", "a", "1", "b"]), b":1\r\n");
        assert_eq!(
            waiter.read_reply(),
            b"*2\r\n$1\r\na\r\n*1\r\n*2\r\n$1\r\nx\r\n$1\r\n1\r\n"
        );
        assert_eq!(other.cmd(&["EXISTS", "a"]), b":0\r\n");
    }
}

/// Under RESP3 the score is a double and a timeout is the null type.
#[test]
fn resp3_replies_and_timeouts() {
    let (redis, latchkey) = both_servers();
    for addr in [redis.addr(), latchkey.addr()] {
        let mut c = RawConn::connect(addr).unwrap();
        c.cmd(&["HELLO", "3"]);
        assert_eq!(c.cmd(&["BZPOPMIN", "none", "0.01"]), b"_\r\n");
        assert_eq!(c.cmd(&["BZMPOP", "0.01", "1", "none", "MIN"]), b"_\r\n");
        c.cmd(&["ZADD", "z", "1.5", "m"]);
        assert_eq!(
            c.cmd(&["BZPOPMIN", "z", "0"]),
            b"*3\r\n$1\r\nz\r\n$1\r\nm\r\n,1.5\r\n"
        );
        let mut resp2 = RawConn::connect(addr).unwrap();
        assert_eq!(resp2.cmd(&["BZPOPMAX", "none", "0.01"]), b"*-1\r\n");
        assert_eq!(
            resp2.cmd(&["BZMPOP", "0.01", "1", "none", "MAX"]),
            b"*-1\r\n"
        );
    }
}

/// Inside `MULTI` the blocking pops never block, even with no timeout: they answer what a
/// timeout answers, or pop at once when there is something.
#[test]
fn blocking_pops_inside_multi_answer_at_once() {
    let (redis, latchkey) = both_servers();
    for addr in [redis.addr(), latchkey.addr()] {
        let mut c = RawConn::connect(addr).unwrap();
        c.cmd(&["MULTI"]);
        c.cmd(&["BZPOPMIN", "empty", "0"]);
        c.cmd(&["BZMPOP", "0", "1", "empty", "MIN"]);
        c.cmd(&["ZADD", "full", "1", "a"]);
        c.cmd(&["BZPOPMAX", "full", "0"]);
        assert_eq!(
            c.cmd(&["EXEC"]),
            b"*4\r\n*-1\r\n*-1\r\n:1\r\n*3\r\n$4\r\nfull\r\n$1\r\na\r\n$1\r\n1\r\n"
        );
    }
}

/// A transaction that adds to the key and deletes it before it ends leaves the client
/// blocked (the key was never non-empty between commands); a later add serves it.
#[test]
fn an_add_undone_in_the_same_transaction_does_not_serve() {
    let (redis, latchkey) = both_servers();
    for addr in [redis.addr(), latchkey.addr()] {
        let mut waiter = RawConn::connect(addr).unwrap();
        let mut other = RawConn::connect(addr).unwrap();
        waiter.send_raw(&RawConn::encode(&["BZPOPMIN", "k", "0"]));
        wait_clients_in(addr, "bzpopmin", 1);
        other.cmd(&["MULTI"]);
        other.cmd(&["ZADD", "k", "1", "gone"]);
        other.cmd(&["DEL", "k"]);
        assert_eq!(other.cmd(&["EXEC"]), b"*2\r\n:1\r\n:1\r\n");
        // Still waiting: the next add is what it gets.
        assert_eq!(other.cmd(&["ZADD", "k", "2", "kept"]), b":1\r\n");
        assert_eq!(
            waiter.read_reply(),
            b"*3\r\n$1\r\nk\r\n$4\r\nkept\r\n$1\r\n2\r\n"
        );
    }
}

/// A wrong type among the keys is refused for a client that arrives, but a waiting client
/// is left waiting by a key that becomes a string (as Redis leaves it).
#[test]
fn wrong_types() {
    let (redis, latchkey) = both_servers();
    for addr in [redis.addr(), latchkey.addr()] {
        let mut c = RawConn::connect(addr).unwrap();
        c.cmd(&["SET", "s", "v"]);
        assert_eq!(
            c.cmd(&["BZPOPMIN", "s", "0"]),
            b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
        );
        assert_eq!(
            c.cmd(&["BZMPOP", "0", "2", "missing", "s", "MIN"]),
            b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
        );
        let mut waiter = RawConn::connect(addr).unwrap();
        waiter.send_raw(&RawConn::encode(&["BZPOPMIN", "w", "0"]));
        wait_clients_in(addr, "bzpopmin", 1);
        c.cmd(&["SET", "w", "string"]);
        c.cmd(&["DEL", "w"]);
        c.cmd(&["ZADD", "w", "7", "m"]);
        assert_eq!(
            waiter.read_reply(),
            b"*3\r\n$1\r\nw\r\n$1\r\nm\r\n$1\r\n7\r\n"
        );
    }
}
