//! A runaway script: other clients get `-BUSY` past the threshold, `SCRIPT KILL` stops it, and
//! a script that has written cannot be killed.

use std::time::{Duration, Instant};

use latchkey_server::Server;
use latchkey_tests::RawConn;

fn busy_server() -> latchkey_server::BlockingServer {
    Server::builder()
        .config("busy-reply-threshold", "50")
        .start_blocking()
        .unwrap()
}

/// Sends GET until the server answers -BUSY (the script is running and past the threshold).
fn wait_until_busy(conn: &mut RawConn) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let reply = String::from_utf8(conn.cmd(&["GET", "probe"])).unwrap();
        if reply.starts_with("-BUSY Redis is busy running a script") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the script never became busy: {reply}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn busy_script_is_reported_and_killed() {
    let server = busy_server();
    let addr = server.addr();
    let mut runner = RawConn::connect(addr).unwrap();
    runner.send_raw(&RawConn::encode(&["EVAL", "while true do end", "0"]));
    let mut other = RawConn::connect(addr).unwrap();
    wait_until_busy(&mut other);
    assert_eq!(other.cmd(&["SCRIPT", "KILL"]), b"+OK\r\n");
    let killed = String::from_utf8(runner.read_reply()).unwrap();
    assert!(
        killed.starts_with("-ERR Script killed by user with SCRIPT KILL..."),
        "{killed}"
    );
    // The server is usable again, for both clients.
    assert_eq!(other.cmd(&["SET", "k", "v"]), b"+OK\r\n");
    assert_eq!(runner.cmd(&["GET", "k"]), b"$1\r\nv\r\n");
    assert_eq!(
        other.cmd(&["SCRIPT", "KILL"]),
        b"-NOTBUSY No scripts in execution right now.\r\n"
    );
}

#[test]
fn a_script_that_wrote_is_unkillable() {
    let server = busy_server();
    let addr = server.addr();
    let mut runner = RawConn::connect(addr).unwrap();
    // Writes, then spins for a bounded time (the test must end on its own).
    runner.send_raw(&RawConn::encode(&[
        "EVAL",
        "redis.call('set','w','1'); local i = 0; while i < 300000000 do i = i + 1 end; return i",
        "0",
    ]));
    let mut other = RawConn::connect(addr).unwrap();
    wait_until_busy(&mut other);
    let reply = String::from_utf8(other.cmd(&["SCRIPT", "KILL"])).unwrap();
    assert!(reply.starts_with("-UNKILLABLE"), "{reply}");
    assert_eq!(runner.read_reply(), b":300000000\r\n");
    assert_eq!(other.cmd(&["GET", "w"]), b"$1\r\n1\r\n");
}
