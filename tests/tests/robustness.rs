//! Bad input and bad clients: protocol errors get Redis's text and a closed connection, a
//! subscriber that never reads is cut off at its output-buffer limit, and nothing of this
//! disturbs other clients.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use latchkey_server::Server;
use latchkey_tests::raw::show;
use latchkey_tests::{Diff, RawConn};

/// Sends raw bytes and reads until the server closes the connection.
fn send_and_read_to_close(addr: std::net::SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

#[test]
fn protocol_errors_match_redis_and_close_the_connection() {
    let d = Diff::new();
    for bad in [
        &b"*3000000000\r\n"[..],
        b"*1\r\n$600000000\r\n",
        b"*1\r\n$-5\r\n",
        b"*1\r\n+foo\r\n",
        b"*x\r\n",
        b"SET a \"unbalanced\r\n",
    ] {
        let r = send_and_read_to_close(d.redis_proc.addr(), bad);
        let l = send_and_read_to_close(d.latchkey_server.addr(), bad);
        assert!(
            l == r,
            "for {}: redis {} latchkey {}",
            show(bad),
            show(&r),
            show(&l)
        );
        assert!(r.starts_with(b"-ERR Protocol error"), "{r:?}");
    }
    // The server is still fine for everyone else.
    let mut c = RawConn::connect(d.latchkey_server.addr()).unwrap();
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
}

#[test]
fn a_claimed_huge_bulk_neither_waits_nor_stops_the_server() {
    let server = Server::builder().start_blocking().unwrap();
    // Claim 500 MB, send a few bytes, and leave: the server must not wait for the claimed
    // bytes before serving others, and must keep serving after the claimant left. (Whether it
    // reserves the claimed size is not visible over the wire: a reservation of untouched
    // memory costs no resident pages. The name says only what is checked.)
    let mut s = TcpStream::connect(server.addr()).unwrap();
    s.write_all(b"*2\r\n$3\r\nGET\r\n$500000000\r\nabc")
        .unwrap();
    let mut c = RawConn::connect(server.addr()).unwrap();
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    drop(s);
    assert_eq!(c.cmd(&["SET", "k", "v"]), b"+OK\r\n");
}

#[test]
fn a_subscriber_that_never_reads_is_disconnected_at_its_limit() {
    let server = Server::builder()
        .config("client-output-buffer-limit", "pubsub 4mb 1mb 60")
        .start_blocking()
        .unwrap();
    let addr = server.addr();
    // Subscribe, then never read again.
    let mut sleeper = TcpStream::connect(addr).unwrap();
    sleeper
        .write_all(&RawConn::encode(&["SUBSCRIBE", "firehose"]))
        .unwrap();
    let mut publisher = RawConn::connect(addr).unwrap();
    let subscribed = Instant::now() + Duration::from_secs(10);
    while publisher.cmd(&["PUBSUB", "NUMSUB", "firehose"]) != b"*2\r\n$8\r\nfirehose\r\n:1\r\n" {
        assert!(
            Instant::now() < subscribed,
            "the subscriber never subscribed"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let payload = "x".repeat(1024);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut published = 0u64;
    loop {
        let r = publisher.cmd(&["PUBLISH", "firehose", &payload]);
        published += 1;
        if r == b":0\r\n" {
            break; // the subscriber is gone
        }
        assert!(
            Instant::now() < deadline,
            "the slow subscriber was never disconnected"
        );
        assert!(
            published < 200_000,
            "published {published} KiB without a disconnect"
        );
    }
    // The connection task leaves the registry as it closes.
    let gone = Instant::now() + Duration::from_secs(10);
    while publisher.cmd(&["PUBSUB", "NUMSUB", "firehose"]) != b"*2\r\n$8\r\nfirehose\r\n:0\r\n" {
        assert!(
            Instant::now() < gone,
            "the disconnected subscriber stayed registered"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // What was queued for it is bounded by the limit, and it is gone from the registry.
    for (id, queued) in latchkey_server::internals::node(server.handle()).queued_push_bytes() {
        assert!(
            queued < 8 << 20,
            "client {id} still has {queued} bytes queued"
        );
    }
    assert_eq!(publisher.cmd(&["PING"]), b"+PONG\r\n");
}
