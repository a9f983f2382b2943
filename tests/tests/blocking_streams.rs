//! `XREAD BLOCK`: readers woken by `XADD` from another client, all of them at once (each reads
//! the same entries), timing out with a null array, `$` meaning "after what is there now" —
//! on redis-server and on latchkey alike, with the same reply bytes.

use latchkey_server::Server;
use latchkey_tests::raw::{wait_blocked_clients, wait_clients_in};
use latchkey_tests::{RawConn, RedisProcess};

fn both_servers() -> (RedisProcess, latchkey_server::BlockingServer) {
    (
        RedisProcess::spawn(&[]),
        Server::builder().start_blocking().expect("start latchkey"),
    )
}

/// Every blocked reader of a key gets the entry one `XADD` appended, whatever IDs they
/// waited after, and readers of other keys keep waiting.
#[test]
fn every_blocked_reader_is_woken_by_one_xadd() {
    let (redis, latchkey) = both_servers();
    let mut replies = Vec::new();
    for addr in [redis.addr(), latchkey.addr()] {
        let mut p = RawConn::connect(addr).unwrap();
        p.cmd(&["XADD", "s", "1-1", "old", "x"]);
        let mut readers: Vec<RawConn> = (0..5).map(|_| RawConn::connect(addr).unwrap()).collect();
        for (i, r) in readers.iter_mut().enumerate() {
            let id = if i % 2 == 0 { "$" } else { "1-1" };
            r.send_raw(&RawConn::encode(&[
                "XREAD", "BLOCK", "0", "STREAMS", "other", "s", "0", id,
            ]));
        }
        let mut other = RawConn::connect(addr).unwrap();
        other.send_raw(&RawConn::encode(&[
            "XREAD", "BLOCK", "0", "STREAMS", "other", "$",
        ]));
        wait_clients_in(addr, "xread", 6);
        assert_eq!(p.cmd(&["XADD", "s", "2-0", "f", "v"]), b"$3\r\n2-0\r\n");
        let got: Vec<Vec<u8>> = readers.iter_mut().map(|r| r.read_reply()).collect();
        for g in &got {
            assert_eq!(
                g,
                b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n2-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
            );
        }
        // The reader of `other` is still waiting: the next entry there is what it gets.
        p.cmd(&["XADD", "other", "7-7", "o", "p"]);
        replies.push((got, other.read_reply()));
    }
    assert_eq!(replies[0], replies[1]);
    assert_eq!(
        replies[1].1,
        b"*1\r\n*2\r\n$5\r\nother\r\n*1\r\n*2\r\n$3\r\n7-7\r\n*2\r\n$1\r\no\r\n$1\r\np\r\n"
    );
}

/// A timeout answers a null array (`*-1`, `_` in RESP3); data already there is served at
/// once even with `BLOCK 0`; inside `MULTI` the read does not block.
#[test]
fn timeouts_and_immediate_replies() {
    let (redis, latchkey) = both_servers();
    for addr in [redis.addr(), latchkey.addr()] {
        let mut c = RawConn::connect(addr).unwrap();
        assert_eq!(
            c.cmd(&["XREAD", "BLOCK", "30", "STREAMS", "none", "$"]),
            b"*-1\r\n"
        );
        c.cmd(&["XADD", "s", "5-0", "a", "b"]);
        assert_eq!(
            c.cmd(&["XREAD", "BLOCK", "0", "STREAMS", "s", "0"]),
            b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n5-0\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n"
        );
        c.cmd(&["MULTI"]);
        c.cmd(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
        assert_eq!(c.cmd(&["EXEC"]), b"*1\r\n*-1\r\n");
        c.cmd(&["HELLO", "3"]);
        assert_eq!(
            c.cmd(&["XREAD", "BLOCK", "30", "STREAMS", "s", "$"]),
            b"_\r\n"
        );
    }
}

/// A blocked reader in RESP3 gets a map; a stream renamed into place wakes its readers.
#[test]
fn resp3_readers_and_a_stream_renamed_into_place() {
    let (redis, latchkey) = both_servers();
    let mut replies = Vec::new();
    for addr in [redis.addr(), latchkey.addr()] {
        let mut a = RawConn::connect(addr).unwrap();
        a.cmd(&["HELLO", "3"]);
        a.send_raw(&RawConn::encode(&[
            "XREAD", "BLOCK", "0", "STREAMS", "dst", "0",
        ]));
        let mut b = RawConn::connect(addr).unwrap();
        b.send_raw(&RawConn::encode(&[
            "XREAD", "BLOCK", "0", "STREAMS", "dst", "0",
        ]));
        wait_clients_in(addr, "xread", 2);
        let mut p = RawConn::connect(addr).unwrap();
        p.cmd(&["XADD", "src", "3-3", "k", "v"]);
        assert_eq!(p.cmd(&["RENAME", "src", "dst"]), b"+OK\r\n");
        replies.push((a.read_reply(), b.read_reply()));
    }
    assert_eq!(replies[0], replies[1]);
    assert!(
        replies[1].0.starts_with(b"%1\r\n$3\r\ndst\r\n"),
        "{:?}",
        replies[1]
    );
}

/// A reader blocked with `COUNT` gets at most that many of what arrived; one whose client
/// goes away leaves nothing behind (the next `XADD` is served to the others).
#[test]
fn count_bounds_a_woken_reader_and_a_gone_reader_is_forgotten() {
    let (redis, latchkey) = both_servers();
    for addr in [redis.addr(), latchkey.addr()] {
        let mut gone = RawConn::connect(addr).unwrap();
        gone.send_raw(&RawConn::encode(&[
            "XREAD", "BLOCK", "0", "STREAMS", "s", "$",
        ]));
        let mut r = RawConn::connect(addr).unwrap();
        r.send_raw(&RawConn::encode(&[
            "XREAD", "COUNT", "1", "BLOCK", "0", "STREAMS", "s", "0",
        ]));
        wait_clients_in(addr, "xread", 2);
        drop(gone);
        wait_clients_in(addr, "xread", 1);
        let mut p = RawConn::connect(addr).unwrap();
        // One XADD of one entry wakes the reader with that entry.
        p.cmd(&["XADD", "s", "1-0", "a", "1"]);
        assert_eq!(
            r.read_reply(),
            b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n"
        );
        p.cmd(&["XADD", "s", "2-0", "a", "2"]);
        p.cmd(&["XADD", "s", "3-0", "a", "3"]);
        assert_eq!(
            p.cmd(&["XREAD", "COUNT", "1", "BLOCK", "0", "STREAMS", "s", "1-0"]),
            b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n2-0\r\n*2\r\n$1\r\na\r\n$1\r\n2\r\n"
        );
    }
}

/// A stream reader first in line on a key that a push makes a list does not hold up the
/// `BLPOP` behind it: the pop gets the element. Both servers.
#[test]
fn a_stream_reader_does_not_hold_up_a_list_pop_behind_it() {
    let (redis, latchkey) = both_servers();
    for addr in [redis.addr(), latchkey.addr()] {
        let mut reader = RawConn::connect(addr).unwrap();
        reader.send_raw(&RawConn::encode(&[
            "XREAD", "BLOCK", "0", "STREAMS", "mix", "$",
        ]));
        wait_blocked_clients(addr, 1);
        let mut popper = RawConn::connect(addr).unwrap();
        popper.send_raw(&RawConn::encode(&["BLPOP", "mix", "0"]));
        wait_blocked_clients(addr, 2);
        let mut p = RawConn::connect(addr).unwrap();
        assert_eq!(p.cmd(&["RPUSH", "mix", "x"]), b":1\r\n");
        assert_eq!(popper.read_reply(), b"*2\r\n$3\r\nmix\r\n$1\r\nx\r\n");
    }
}

/// A reader that names one stream twice waits like any other (it once woke itself over and
/// over, never counted as blocked) and is served once by an `XADD`. Both servers.
#[test]
fn a_reader_naming_a_stream_twice_waits_and_is_served() {
    let (redis, latchkey) = both_servers();
    for addr in [redis.addr(), latchkey.addr()] {
        let mut p = RawConn::connect(addr).unwrap();
        p.cmd(&["XADD", "twice", "1-1", "f", "v"]);
        let mut reader = RawConn::connect(addr).unwrap();
        reader.send_raw(&RawConn::encode(&[
            "XREAD", "BLOCK", "0", "STREAMS", "twice", "twice", "$", "$",
        ]));
        wait_blocked_clients(addr, 1);
        p.cmd(&["XADD", "twice", "2-1", "f", "w"]);
        let reply = reader.read_reply();
        assert!(
            reply.windows(3).any(|w| w == b"2-1"),
            "{}",
            String::from_utf8_lossy(&reply)
        );
        wait_blocked_clients(addr, 0);
    }
}
