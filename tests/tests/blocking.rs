//! Blocking list pops: woken by pushes from other clients, timing out, never losing an element.

use std::time::Duration;

use latchkey_server::Server;
use latchkey_tests::raw::{wait_blocked_clients, wait_clients_in};
use latchkey_tests::{RawConn, RedisProcess};

fn both_servers() -> (RedisProcess, latchkey_server::BlockingServer) {
    (
        RedisProcess::spawn(&[]),
        Server::builder().start_blocking().expect("start latchkey"),
    )
}

#[test]
fn blpop_is_woken_by_a_push_from_another_client() {
    let (redis, latchkey) = both_servers();
    for addr in [redis.addr(), latchkey.addr()] {
        let mut waiter = RawConn::connect(addr).unwrap();
        waiter.send_raw(&RawConn::encode(&["BLPOP", "q1", "q2", "0"]));
        wait_clients_in(addr, "blpop", 1);
        let mut pusher = RawConn::connect(addr).unwrap();
        assert_eq!(pusher.cmd(&["RPUSH", "q2", "job"]), b":1\r\n");
        assert_eq!(waiter.read_reply(), b"*2\r\n$2\r\nq2\r\n$3\r\njob\r\n");
        assert_eq!(pusher.cmd(&["LLEN", "q2"]), b":0\r\n");
    }
}

#[test]
fn blpop_times_out_with_a_nil_array_and_serves_ready_keys_at_once() {
    let (redis, latchkey) = both_servers();
    for addr in [redis.addr(), latchkey.addr()] {
        let mut c = RawConn::connect(addr).unwrap();
        assert_eq!(c.cmd(&["BLPOP", "empty", "0.05"]), b"*-1\r\n");
        c.cmd(&["RPUSH", "ready", "x"]);
        // No timeout (0 blocks forever): only a reply served at once can come back.
        assert_eq!(
            c.cmd(&["BRPOP", "empty", "ready", "0"]),
            b"*2\r\n$5\r\nready\r\n$1\r\nx\r\n"
        );
    }
}

#[test]
fn two_blocked_clients_are_both_served() {
    let (redis, latchkey) = both_servers();
    for addr in [redis.addr(), latchkey.addr()] {
        let mut a = RawConn::connect(addr).unwrap();
        let mut b = RawConn::connect(addr).unwrap();
        a.send_raw(&RawConn::encode(&["BLPOP", "q", "0"]));
        b.send_raw(&RawConn::encode(&["BLPOP", "q", "0"]));
        wait_clients_in(addr, "blpop", 2);
        let mut p = RawConn::connect(addr).unwrap();
        p.cmd(&["RPUSH", "q", "1"]);
        p.cmd(&["RPUSH", "q", "2"]);
        let mut got = vec![a.read_reply(), b.read_reply()];
        got.sort();
        assert_eq!(
            got,
            vec![
                b"*2\r\n$1\r\nq\r\n$1\r\n1\r\n".to_vec(),
                b"*2\r\n$1\r\nq\r\n$1\r\n2\r\n".to_vec()
            ]
        );
    }
}

/// Blocked clients are served in the order they blocked, as Redis serves them: five clients
/// block one after another, one push of five elements gives the first client the first
/// element and so on, and so does a push of one element at a time after they all blocked
/// again, with one client that timed out and one that disconnected in the line (their turn
/// passes to the next). Asserted on both servers.
#[test]
fn blocked_clients_are_served_in_the_order_they_blocked() {
    let (redis, latchkey) = both_servers();
    for addr in [redis.addr(), latchkey.addr()] {
        let mut clients: Vec<RawConn> = Vec::new();
        for i in 0..5 {
            let mut c = RawConn::connect(addr).unwrap();
            c.send_raw(&RawConn::encode(&["BLPOP", "fifo", "0"]));
            wait_blocked_clients(addr, i + 1);
            clients.push(c);
        }
        let mut p = RawConn::connect(addr).unwrap();
        assert_eq!(
            p.cmd(&["RPUSH", "fifo", "e0", "e1", "e2", "e3", "e4"]),
            b":5\r\n"
        );
        for (i, c) in clients.iter_mut().enumerate() {
            let want = format!("*2\r\n$4\r\nfifo\r\n$2\r\ne{i}\r\n");
            assert_eq!(c.read_reply(), want.as_bytes(), "client {i}");
        }
        // Again, one element at a time; the second client's wait ends by its timeout and the
        // fourth disconnects before anything is pushed.
        for (i, c) in clients.iter_mut().enumerate() {
            // The second client gives up after 3 s; the pushes wait for its nil reply.
            let timeout = if i == 1 { "3" } else { "0" };
            c.send_raw(&RawConn::encode(&["BLPOP", "fifo", timeout]));
            wait_blocked_clients(addr, i + 1);
        }
        let gone = clients.remove(3);
        drop(gone);
        wait_blocked_clients(addr, 4);
        assert_eq!(clients[1].read_reply(), b"*-1\r\n", "the timed-out client");
        wait_blocked_clients(addr, 3);
        for (turn, i) in [0, 2, 4].into_iter().enumerate() {
            let c = &mut clients[if i == 4 { 3 } else { i }];
            let element = format!("x{turn}");
            p.cmd(&["RPUSH", "fifo", &element]);
            let want = format!("*2\r\n$4\r\nfifo\r\n$2\r\n{element}\r\n");
            assert_eq!(c.read_reply(), want.as_bytes(), "client {i}");
        }
        assert_eq!(p.cmd(&["LLEN", "fifo"]), b":0\r\n");
    }
}

/// A client first in line that cannot take what arrived (a `BZPOPMIN` waiting on a key that
/// a push makes a list) does not hold up the clients behind it: the `BLPOP` behind it gets the
/// element, and the `BZPOPMIN` goes on waiting. Both servers.
#[test]
fn a_waiter_of_another_type_does_not_hold_up_the_line() {
    let (redis, latchkey) = both_servers();
    for addr in [redis.addr(), latchkey.addr()] {
        let mut zset_waiter = RawConn::connect(addr).unwrap();
        zset_waiter.send_raw(&RawConn::encode(&["BZPOPMIN", "mixed", "0"]));
        wait_blocked_clients(addr, 1);
        let mut list_waiter = RawConn::connect(addr).unwrap();
        list_waiter.send_raw(&RawConn::encode(&["BLPOP", "mixed", "0"]));
        wait_blocked_clients(addr, 2);
        let mut p = RawConn::connect(addr).unwrap();
        assert_eq!(p.cmd(&["RPUSH", "mixed", "x"]), b":1\r\n");
        assert_eq!(
            list_waiter.read_reply(),
            b"*2\r\n$5\r\nmixed\r\n$1\r\nx\r\n"
        );
        wait_blocked_clients(addr, 1);
        assert_eq!(p.cmd(&["ZADD", "other", "1", "m"]), b":1\r\n");
        // Still waiting on `mixed`: it gets a member once that key is a sorted set.
        assert_eq!(p.cmd(&["RENAME", "other", "mixed"]), b"+OK\r\n");
        assert_eq!(
            zset_waiter.read_reply(),
            b"*3\r\n$5\r\nmixed\r\n$1\r\nm\r\n$1\r\n1\r\n"
        );
    }
}

#[test]
fn a_client_that_disconnects_while_blocked_takes_nothing() {
    let (redis, latchkey) = both_servers();
    for addr in [redis.addr(), latchkey.addr()] {
        let mut gone = RawConn::connect(addr).unwrap();
        gone.send_raw(&RawConn::encode(&["BLPOP", "q", "0"]));
        wait_clients_in(addr, "blpop", 1);
        drop(gone);
        // The server has seen the disconnect once the client is gone from its list.
        wait_clients_in(addr, "blpop", 0);
        let mut p = RawConn::connect(addr).unwrap();
        assert_eq!(p.cmd(&["RPUSH", "q", "kept"]), b":1\r\n");
        assert_eq!(p.cmd(&["LRANGE", "q", "0", "-1"]), b"*1\r\n$4\r\nkept\r\n");
    }
}

#[test]
fn blpop_inside_multi_does_not_block() {
    let (redis, latchkey) = both_servers();
    for addr in [redis.addr(), latchkey.addr()] {
        let mut c = RawConn::connect(addr).unwrap();
        c.cmd(&["MULTI"]);
        c.cmd(&["BLPOP", "empty", "0"]);
        // BLPOP with no timeout inside MULTI answers nil at once: a block would hang here.
        assert_eq!(c.cmd(&["EXEC"]), b"*1\r\n*-1\r\n");
    }
}

/// The timeout is counted on the server's (virtual) clock, not in real time: 29 virtual
/// seconds into a 30-second BLPOP the client still waits (a push then serves it), and a second
/// BLPOP returns its nil once the clock passes its timeout.
#[test]
fn blpop_timeout_follows_the_virtual_clock() {
    let server = Server::builder().virtual_clock().start_blocking().unwrap();
    let addr = server.addr();
    let clock = server.handle().clock().clone();
    let mut first = RawConn::connect(addr).unwrap();
    first.send_raw(&RawConn::encode(&["BLPOP", "q", "30"]));
    wait_clients_in(addr, "blpop", 1);
    clock.advance(Duration::from_secs(29));
    // Still waiting after 29 of its 30 seconds: the push serves it.
    let mut pusher = RawConn::connect(addr).unwrap();
    assert_eq!(pusher.cmd(&["RPUSH", "q", "job"]), b":1\r\n");
    assert_eq!(first.read_reply(), b"*2\r\n$1\r\nq\r\n$3\r\njob\r\n");
    // A second client's BLPOP times out once the virtual clock passes its timeout.
    let mut second = RawConn::connect(addr).unwrap();
    second.send_raw(&RawConn::encode(&["BLPOP", "q", "30"]));
    wait_clients_in(addr, "blpop", 2); // the first client's last command was a BLPOP too
    clock.advance(Duration::from_secs(31));
    assert_eq!(second.read_reply(), b"*-1\r\n");
}

/// A list renamed onto the key a `BLPOP` waits for serves it, as a push would (Redis's Tcl
/// suite, `unit/type/list` "BLPOP when new key is moved into place": latchkey once left the
/// client blocked for good).
#[test]
fn blpop_is_woken_by_a_list_renamed_into_place() {
    let (redis, latchkey) = both_servers();
    for addr in [redis.addr(), latchkey.addr()] {
        let mut waiter = RawConn::connect(addr).unwrap();
        waiter.send_raw(&RawConn::encode(&["BLPOP", "foo", "0"]));
        wait_clients_in(addr, "blpop", 1);
        let mut other = RawConn::connect(addr).unwrap();
        assert_eq!(other.cmd(&["LPUSH", "bob", "abc", "def", "hij"]), b":3\r\n");
        assert_eq!(other.cmd(&["RENAME", "bob", "foo"]), b"+OK\r\n");
        assert_eq!(waiter.read_reply(), b"*2\r\n$3\r\nfoo\r\n$3\r\nhij\r\n");
        assert_eq!(
            other.cmd(&["LRANGE", "foo", "0", "-1"]),
            b"*2\r\n$3\r\ndef\r\n$3\r\nabc\r\n"
        );
    }
}

/// `BLMPOP`, `BLMOVE` and `BRPOPLPUSH` wait for a push and are then served, as on Redis: the
/// pop takes up to its count from the first list that has elements, the moves land the
/// element in the destination.
#[test]
fn blmpop_blmove_and_brpoplpush_are_woken_by_a_push() {
    let (redis, latchkey) = both_servers();
    for addr in [redis.addr(), latchkey.addr()] {
        let mut other = RawConn::connect(addr).unwrap();
        let mut waiter = RawConn::connect(addr).unwrap();
        waiter.send_raw(&RawConn::encode(&[
            "BLMPOP", "0", "2", "a", "b", "LEFT", "COUNT", "2",
        ]));
        wait_clients_in(addr, "blmpop", 1);
        assert_eq!(other.cmd(&["RPUSH", "b", "x", "y", "z"]), b":3\r\n");
        assert_eq!(
            waiter.read_reply(),
            b"*2\r\n$1\r\nb\r\n*2\r\n$1\r\nx\r\n$1\r\ny\r\n"
        );
        waiter.send_raw(&RawConn::encode(&[
            "BLMOVE", "src", "dst", "RIGHT", "LEFT", "0",
        ]));
        wait_clients_in(addr, "blmove", 1);
        other.cmd(&["RPUSH", "src", "m1"]);
        assert_eq!(waiter.read_reply(), b"$2\r\nm1\r\n");
        waiter.send_raw(&RawConn::encode(&["BRPOPLPUSH", "src", "dst", "0"]));
        wait_clients_in(addr, "brpoplpush", 1);
        other.cmd(&["RPUSH", "src", "m2"]);
        assert_eq!(waiter.read_reply(), b"$2\r\nm2\r\n");
        assert_eq!(
            other.cmd(&["LRANGE", "dst", "0", "-1"]),
            b"*2\r\n$2\r\nm2\r\n$2\r\nm1\r\n"
        );
        assert_eq!(other.cmd(&["EXISTS", "src"]), b":0\r\n");
        // A timeout answers a null array.
        assert_eq!(
            other.cmd(&["BLMOVE", "src", "dst", "LEFT", "LEFT", "0.01"]),
            b"*-1\r\n"
        );
    }
}

/// A waiting `BLPOP` or `BLMPOP` whose key becomes a string stays blocked (Redis serves a
/// blocked client only from a list), and is served by the list that comes next. latchkey once
/// answered it WRONGTYPE (Redis's Tcl suite, "LPUSH + DEL + SET should not awake blocked
/// client").
#[test]
fn a_key_recreated_as_a_string_does_not_wake_a_blocked_pop() {
    let (redis, latchkey) = both_servers();
    for addr in [redis.addr(), latchkey.addr()] {
        for (pop, name) in [
            (&["BLPOP", "k", "0"][..], "blpop"),
            (&["BLMPOP", "0", "1", "k", "LEFT"][..], "blmpop"),
        ] {
            let mut other = RawConn::connect(addr).unwrap();
            let mut waiter = RawConn::connect(addr).unwrap();
            other.cmd(&["DEL", "k"]);
            waiter.send_raw(&RawConn::encode(pop));
            wait_clients_in(addr, name, 1);
            other.cmd(&["MULTI"]);
            other.cmd(&["LPUSH", "k", "a"]);
            other.cmd(&["DEL", "k"]);
            other.cmd(&["SET", "k", "foo"]);
            assert_eq!(other.cmd(&["EXEC"]), b"*3\r\n:1\r\n:1\r\n+OK\r\n");
            other.cmd(&["DEL", "k"]);
            other.cmd(&["LPUSH", "k", "b"]);
            let reply = waiter.read_reply();
            assert!(
                reply.ends_with(b"$1\r\nb\r\n"),
                "{name}: {}",
                String::from_utf8_lossy(&reply)
            );
        }
    }
}
