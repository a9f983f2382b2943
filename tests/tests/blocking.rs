//! Blocking list pops: woken by pushes from other clients, timing out, never losing an element.

use std::time::Duration;

use latchkey_server::{Frame, Server};
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
        std::thread::sleep(Duration::from_millis(50));
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
        assert_eq!(
            c.cmd(&["BRPOP", "empty", "ready", "5"]),
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
        std::thread::sleep(Duration::from_millis(50));
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

#[test]
fn a_client_that_disconnects_while_blocked_takes_nothing() {
    let (redis, latchkey) = both_servers();
    for addr in [redis.addr(), latchkey.addr()] {
        let mut gone = RawConn::connect(addr).unwrap();
        gone.send_raw(&RawConn::encode(&["BLPOP", "q", "0"]));
        std::thread::sleep(Duration::from_millis(50));
        drop(gone);
        std::thread::sleep(Duration::from_millis(50));
        let mut p = RawConn::connect(addr).unwrap();
        p.cmd(&["RPUSH", "q", "kept"]);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(p.cmd(&["LLEN", "q"]), b":1\r\n");
    }
}

#[test]
fn blpop_inside_multi_does_not_block() {
    let (redis, latchkey) = both_servers();
    for addr in [redis.addr(), latchkey.addr()] {
        let mut c = RawConn::connect(addr).unwrap();
        c.cmd(&["MULTI"]);
        c.cmd(&["BLPOP", "empty", "0"]);
        assert_eq!(c.cmd(&["EXEC"]), b"*1\r\n*-1\r\n");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blpop_timeout_follows_the_virtual_clock() {
    let server = Server::builder()
        .virtual_clock()
        .no_listener()
        .start()
        .await
        .unwrap();
    let mut c = server.client();
    let waiter = tokio::spawn(async move { c.cmd(["BLPOP", "q", "30"]).await });
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert!(
        !waiter.is_finished(),
        "BLPOP returned before its (virtual) timeout"
    );
    server.clock().advance(Duration::from_secs(31));
    let reply = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reply, Frame::NullArray);
}
