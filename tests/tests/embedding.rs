//! The embedding API: in-process clients, the virtual clock, the blocking variant, shutdown.

use std::time::Duration;

use latchkey_server::{Frame, Server};
use latchkey_tests::RawConn;

#[tokio::test]
async fn in_process_client_and_virtual_clock_expiry() {
    let server = Server::builder()
        .virtual_clock()
        .no_listener()
        .start()
        .await
        .unwrap();
    let mut c = server.client();
    assert_eq!(c.cmd(["PING"]).await, Frame::simple("PONG"));
    assert_eq!(
        c.cmd(["SET", "lock", "tok", "NX", "PX", "30000"]).await,
        Frame::ok()
    );
    assert_eq!(c.cmd(["PTTL", "lock"]).await, Frame::Integer(30000));
    server.clock().advance(Duration::from_secs(29));
    assert_eq!(c.cmd(["GET", "lock"]).await, Frame::bulk("tok"));
    assert_eq!(c.cmd(["PTTL", "lock"]).await, Frame::Integer(1000));
    server.clock().advance(Duration::from_secs(2));
    assert_eq!(c.cmd(["GET", "lock"]).await, Frame::Null);
    // Keys nobody reads disappear too: the active cycle runs when the clock moves.
    for i in 0..50 {
        c.cmd(["SET", &format!("k{i}"), "v", "PX", "100"]).await;
    }
    assert_eq!(c.cmd(["DBSIZE"]).await, Frame::Integer(50));
    server.clock().advance(Duration::from_millis(200));
    let mut size = Frame::Integer(-1);
    for _ in 0..100 {
        size = c.cmd(["DBSIZE"]).await;
        if size == Frame::Integer(0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(size, Frame::Integer(0), "expired keys were not collected");
    // TIME follows the virtual clock.
    let before = server.clock().now_ms();
    let Frame::Array(t) = c.cmd(["TIME"]).await else {
        panic!()
    };
    assert_eq!(t[0], Frame::bulk((before / 1000).to_string()));
}

#[tokio::test]
async fn tcp_and_in_process_clients_share_the_keyspace_and_shutdown_closes_connections() {
    let server = Server::builder().start().await.unwrap();
    let addr = server.addr();
    let mut local = server.client();
    local.cmd(["SET", "shared", "yes"]).await;
    let reply = tokio::task::spawn_blocking(move || {
        let mut c = RawConn::connect(addr).unwrap();
        let got = c.cmd(&["GET", "shared"]);
        (got, c)
    })
    .await
    .unwrap();
    assert_eq!(reply.0, b"$3\r\nyes\r\n");
    let mut conn = reply.1;
    server.shutdown().await;
    let closed = tokio::task::spawn_blocking(move || conn.try_read_reply().is_err())
        .await
        .unwrap();
    assert!(closed, "the connection stayed open after shutdown");
    assert!(
        std::net::TcpStream::connect(addr).is_err() || {
            // A connect may still succeed on some systems while the socket lingers; a command must not.
            let mut c = RawConn::connect(addr).unwrap();
            c.send_raw(b"PING\r\n");
            c.try_read_reply().is_err()
        }
    );
}

#[test]
fn blocking_variant_for_synchronous_tests() {
    let server = Server::builder().start_blocking().unwrap();
    assert_eq!(server.cmd(["SET", "a", "1"]), Frame::ok());
    assert_eq!(server.cmd(["INCR", "a"]), Frame::Integer(2));
    let mut c = RawConn::connect(server.addr()).unwrap();
    assert_eq!(c.cmd(&["GET", "a"]), b"$1\r\n2\r\n");
}

#[tokio::test]
async fn pubsub_in_process() {
    let server = Server::builder().no_listener().start().await.unwrap();
    let mut sub = server.client();
    let mut publ = server.client();
    sub.cmd(["SUBSCRIBE", "unlock:{x}"]).await;
    assert_eq!(
        publ.cmd(["PUBLISH", "unlock:{x}", "bye"]).await,
        Frame::Integer(1)
    );
    let msg = tokio::time::timeout(Duration::from_secs(5), sub.next_push())
        .await
        .unwrap();
    assert_eq!(
        msg,
        Some(Frame::Push(vec![
            Frame::bulk("message"),
            Frame::bulk("unlock:{x}"),
            Frame::bulk("bye")
        ]))
    );
}
