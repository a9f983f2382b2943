//! Hostile connections (issue 11, item 4): random bytes, half-closed sockets, clients that
//! leave mid-command, mid-script, mid-`BLPOP` and mid-`WAIT`, a request trickled one byte at a
//! time, and thousands of idle connections. After each, the server answers another client and
//! a canary key set at the start is intact.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::Duration;

use latchkey_server::{BlockingServer, Server};
use latchkey_tests::{Diff, RawConn};
use rand::{Rng, SeedableRng};

const CANARY: &str = "canary";

/// A server over TCP with the canary set.
fn server() -> BlockingServer {
    let server = Server::builder().start_blocking().unwrap();
    let mut c = RawConn::connect(server.addr()).unwrap();
    assert_eq!(c.cmd(&["SET", CANARY, "alive"]), b"+OK\r\n");
    server
}

/// Another client is served, and the canary holds its value with no TTL.
fn assert_unharmed(addr: SocketAddr) {
    let mut c = RawConn::connect(addr).unwrap();
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(c.cmd(&["GET", CANARY]), b"$5\r\nalive\r\n");
    assert_eq!(c.cmd(&["TTL", CANARY]), b":-1\r\n");
}

/// Sends `bytes`, half-closes, and reads whatever comes back until the server closes.
fn send_half_close_read(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // The server may close first (a protocol error): then the rest cannot be written.
    let _ = s.write_all(bytes);
    let _ = s.shutdown(Shutdown::Write);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

/// The number of clients in a `CLIENT LIST` reply.
fn clients(list: &str) -> usize {
    list.lines().filter(|l| l.starts_with("id=")).count()
}

/// Polls `CLIENT LIST` until `pred` holds for it (bounded: a server that never gets there
/// fails the test).
fn wait_for_client_list(c: &mut RawConn, what: &str, pred: impl Fn(&str) -> bool) {
    for _ in 0..3000 {
        let list = String::from_utf8_lossy(&c.cmd(&["CLIENT", "LIST"])).into_owned();
        if pred(&list) {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("CLIENT LIST never showed {what}");
}

#[test]
fn random_bytes_leave_the_server_serving() {
    let server = server();
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    for i in 0..300 {
        let len = rng.random_range(1..2048);
        // Every third one starts like a request, to get past the first byte.
        let prefix: &[u8] = match i % 3 {
            0 => b"*3\r\n$3\r\n",
            1 => b"SET k ",
            _ => b"",
        };
        let mut bytes = prefix.to_vec();
        bytes.extend((0..len).map(|_| rng.random::<u8>()));
        let reply = send_half_close_read(server.addr(), &bytes);
        // Whatever came back is RESP: replies and at most one closing error.
        assert!(
            reply.is_empty() || b"+-:$*_,#(=%~>|!".contains(&reply[0]),
            "not RESP: {:?}",
            String::from_utf8_lossy(&reply)
        );
    }
    assert_unharmed(server.addr());
}

#[test]
fn a_half_closed_socket_gets_its_reply_and_loses_nothing() {
    let server = server();
    // A complete request, then FIN: the reply still comes (the write side is open).
    let reply = send_half_close_read(server.addr(), b"PING\r\n");
    assert_eq!(reply, b"+PONG\r\n");
    // Half a request, then FIN: nothing runs.
    let reply = send_half_close_read(server.addr(), b"*3\r\n$3\r\nSET\r\n$4\r\nhalf\r\n$5\r\nval");
    assert_eq!(reply, b"");
    let mut c = RawConn::connect(server.addr()).unwrap();
    assert_eq!(c.cmd(&["EXISTS", "half"]), b":0\r\n");
    assert_unharmed(server.addr());
}

#[test]
fn a_client_that_leaves_mid_command_runs_nothing() {
    let server = server();
    for cut in [1, 5, 12, 20, 27] {
        let req = RawConn::encode(&["SET", "left", "value"]);
        let mut s = TcpStream::connect(server.addr()).unwrap();
        s.write_all(&req[..cut]).unwrap();
        drop(s);
    }
    // Wait until every one of those connections is gone.
    let mut c = RawConn::connect(server.addr()).unwrap();
    wait_for_client_list(&mut c, "only this client", |l| clients(l) == 1);
    assert_eq!(c.cmd(&["EXISTS", "left"]), b":0\r\n");
    assert_unharmed(server.addr());
}

#[test]
fn a_client_that_leaves_mid_script_does_not_stop_the_script_or_the_server() {
    let server = server();
    let mut s = RawConn::connect(server.addr()).unwrap();
    // A long loop, bounded in iterations, then a write.
    s.send_raw(&RawConn::encode(&[
        "EVAL",
        "local i = 0 while i < 3000000 do i = i + 1 end redis.call('SET', KEYS[1], i) return i",
        "1",
        "script-done",
    ]));
    let mut c = RawConn::connect(server.addr()).unwrap();
    wait_for_client_list(&mut c, "the script running", |l| l.contains("cmd=eval"));
    drop(s);
    // The script finishes (a script is atomic: it is not cut in half by its client leaving),
    // and then everyone is served.
    assert_eq!(c.cmd(&["GET", "script-done"]), b"$7\r\n3000000\r\n");
    assert_unharmed(server.addr());
}

#[test]
fn a_client_that_leaves_mid_blpop_takes_no_element_with_it() {
    let server = server();
    let mut blocked = RawConn::connect(server.addr()).unwrap();
    blocked.send_raw(&RawConn::encode(&["BLPOP", "queue", "0"]));
    let mut c = RawConn::connect(server.addr()).unwrap();
    wait_for_client_list(&mut c, "the BLPOP", |l| l.contains("cmd=blpop"));
    drop(blocked);
    wait_for_client_list(&mut c, "the BLPOP client gone", |l| {
        !l.contains("cmd=blpop")
    });
    // The element pushed now stays in the list: nobody is waiting for it any more.
    assert_eq!(c.cmd(&["RPUSH", "queue", "job"]), b":1\r\n");
    assert_eq!(
        c.cmd(&["LRANGE", "queue", "0", "-1"]),
        b"*1\r\n$3\r\njob\r\n"
    );
    assert_unharmed(server.addr());
}

#[test]
fn a_client_that_leaves_mid_wait_is_forgotten() {
    let server = server();
    let mut waiting = RawConn::connect(server.addr()).unwrap();
    assert_eq!(waiting.cmd(&["SET", "w", "1"]), b"+OK\r\n");
    // No replica will ever acknowledge: WAIT 1 0 waits forever.
    waiting.send_raw(&RawConn::encode(&["WAIT", "1", "0"]));
    let mut c = RawConn::connect(server.addr()).unwrap();
    wait_for_client_list(&mut c, "the WAIT", |l| l.contains("cmd=wait"));
    drop(waiting);
    wait_for_client_list(&mut c, "the WAIT client gone", |l| !l.contains("cmd=wait"));
    assert_unharmed(server.addr());
}

#[test]
fn a_request_trickled_one_byte_at_a_time_is_served_and_others_meanwhile() {
    let server = server();
    let mut slow = TcpStream::connect(server.addr()).unwrap();
    slow.set_nodelay(true).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut other = RawConn::connect(server.addr()).unwrap();
    let req = RawConn::encode(&["SET", "slow", "trickled"]);
    for (i, b) in req.iter().enumerate() {
        slow.write_all(&[*b]).unwrap();
        std::thread::sleep(Duration::from_millis(2));
        if i % 8 == 0 {
            // Between two of the slow client's bytes, another client is served in full.
            assert_eq!(other.cmd(&["PING"]), b"+PONG\r\n");
        }
    }
    let mut reply = [0u8; 5];
    slow.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"+OK\r\n");
    assert_eq!(other.cmd(&["GET", "slow"]), b"$8\r\ntrickled\r\n");
    assert_unharmed(server.addr());
}

/// This process's soft limit on open files, from /proc.
fn open_files_limit() -> usize {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let soft = line.split_whitespace().nth(3).unwrap();
    soft.parse().unwrap_or(usize::MAX)
}

#[test]
fn thousands_of_idle_connections_do_not_stop_the_server() {
    let server = server();
    // Both ends of each connection live in this process: two descriptors each, and room for
    // the other tests running in parallel.
    let n = 2000.min(open_files_limit().saturating_sub(1000) / 2);
    assert!(
        n >= 500,
        "the open-files limit leaves room for only {n} connections"
    );
    let idle: Vec<TcpStream> = (0..n)
        .map(|_| TcpStream::connect(server.addr()).unwrap())
        .collect();
    let mut c = RawConn::connect(server.addr()).unwrap();
    wait_for_client_list(&mut c, "every idle connection", |l| clients(l) > n);
    assert_unharmed(server.addr());
    drop(idle);
    wait_for_client_list(&mut c, "the idle connections gone", |l| clients(l) == 1);
    assert_unharmed(server.addr());
}

/// The request of issue 11: three bytes, a NUL and CRLF, once made the inline parser add empty
/// arguments forever (the server allocated until the kernel killed it). Redis looks for an
/// inline line's newline with C's `strchr`, which stops at the NUL: the line never completes,
/// nothing after it runs, and once the connection has sent more than 64 KiB without a
/// (visible) newline it gets `too big inline request` and is closed. latchkey must do exactly
/// that, and serve everyone else meanwhile.
#[test]
fn three_bytes_with_a_nul_are_what_redis_makes_of_them() {
    let d = Diff::new();
    for request in [
        &b"\0\r\n"[..],
        b"\0\r\nPING\r\n",
        b"SET nul-key v\0junk\r\nGET nul-key\r\n",
        b"SET nul-key \"v\0\"\r\n",
    ] {
        let mut replies = Vec::new();
        for addr in [d.redis_proc.addr(), d.latchkey_server.addr()] {
            // One byte past the 64 KiB limit, and not one more: the server reads every byte
            // before it closes, so the close is clean and the error reply cannot be lost to a
            // reset.
            let mut bytes = request.to_vec();
            bytes.resize(64 * 1024 + 1, b'x');
            replies.push(send_half_close_read(addr, &bytes));
        }
        let (redis, latchkey) = (&replies[0], &replies[1]);
        assert_eq!(
            String::from_utf8_lossy(latchkey),
            String::from_utf8_lossy(redis),
            "for {:?}",
            String::from_utf8_lossy(request)
        );
        // Nothing before the NUL ran: the only reply is the closing error.
        assert_eq!(
            &redis[..],
            b"-ERR Protocol error: too big inline request\r\n"
        );
    }
    for addr in [d.redis_proc.addr(), d.latchkey_server.addr()] {
        let mut c = RawConn::connect(addr).unwrap();
        assert_eq!(c.cmd(&["EXISTS", "nul-key"]), b":0\r\n");
    }
    // Just the three bytes on a connection of its own, left open: another client is served
    // meanwhile, and the server's memory for it stays bounded (it never completes a line).
    let mut three = TcpStream::connect(d.latchkey_server.addr()).unwrap();
    three.write_all(b"\0\r\n").unwrap();
    let mut other = RawConn::connect(d.latchkey_server.addr()).unwrap();
    assert_eq!(other.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(other.cmd(&["SET", CANARY, "alive"]), b"+OK\r\n");
    drop(three);
    assert_unharmed(d.latchkey_server.addr());
}
