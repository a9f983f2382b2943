//! `CLIENT UNBLOCK id [TIMEOUT|ERROR]`, byte for byte on latchkey and redis-server: a client
//! blocked in `BLPOP`, `BZPOPMIN`, `BLMOVE` or `WAIT` is ended early, as if it timed out or with
//! an `-UNBLOCKED` error; a client that is not blocked, or no client, gives `:0`; bad arguments
//! get Redis's errors.

use std::net::SocketAddr;

use latchkey_server::Server;
use latchkey_tests::pair::until;
use latchkey_tests::{raw::show, RawConn, RedisProcess};

/// The client id of `c`.
fn id(c: &mut RawConn) -> String {
    let reply = String::from_utf8_lossy(&c.cmd(&["CLIENT", "ID"])).into_owned();
    reply.trim().trim_start_matches(':').to_string()
}

/// `blocked_clients` of `INFO clients`.
fn blocked(addr: SocketAddr) -> String {
    latchkey_tests::pair::cmd(addr, &["INFO", "clients"])
        .split(|b| *b == b'\n')
        .filter_map(|l| std::str::from_utf8(l).ok())
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Blocks a client in `command`, ends it with `CLIENT UNBLOCK id how...`, and returns what the
/// unblocker and the blocked client got.
fn unblock(addr: SocketAddr, command: &[&str], how: &[&str]) -> (Vec<u8>, Vec<u8>) {
    let mut waiter = RawConn::connect(addr).expect("connect");
    let mut other = RawConn::connect(addr).expect("connect");
    let waiter_id = id(&mut waiter);
    waiter.send_raw(&RawConn::encode(command));
    until(
        "the client to block",
        std::time::Duration::from_secs(20),
        || blocked(addr) == "1",
    );
    let mut args = vec!["CLIENT", "UNBLOCK", waiter_id.as_str()];
    args.extend_from_slice(how);
    let answer = other.cmd(&args);
    (answer, waiter.read_reply())
}

/// Everything the other helpers check, on one server.
fn transcript(addr: SocketAddr) -> Vec<String> {
    let mut out = Vec::new();
    let cases: &[(&[&str], &[&str])] = &[
        (&["BLPOP", "nolist", "0"], &[]),
        (&["BLPOP", "nolist", "0"], &["TIMEOUT"]),
        (&["BLPOP", "nolist", "0"], &["ERROR"]),
        (&["BZPOPMIN", "nozset", "0"], &["error"]),
        (&["BLMOVE", "a", "b", "LEFT", "RIGHT", "0"], &[]),
        (&["WAIT", "1", "0"], &[]),
        (&["WAIT", "1", "0"], &["ERROR"]),
    ];
    for (command, how) in cases {
        let (answer, got) = unblock(addr, command, how);
        out.push(format!(
            "{command:?} {how:?}: {} / {}",
            show(&answer),
            show(&got)
        ));
    }
    let mut c = RawConn::connect(addr).expect("connect");
    let me = id(&mut c);
    out.push(format!(
        "itself: {}",
        show(&c.cmd(&["CLIENT", "UNBLOCK", me.as_str()]))
    ));
    for args in [
        vec!["CLIENT", "UNBLOCK", "999999"],
        vec!["CLIENT", "UNBLOCK", "-1"],
        vec!["CLIENT", "UNBLOCK", "abc"],
        vec!["CLIENT", "UNBLOCK", "1", "SOON"],
        vec!["CLIENT", "UNBLOCK", "abc", "SOON"],
        vec!["CLIENT", "UNBLOCK", "1", "ERROR", "x"],
        vec!["CLIENT", "UNBLOCK"],
    ] {
        out.push(format!("{args:?}: {}", show(&c.cmd(&args))));
    }
    // The unblocked clients went on: the connection still answers.
    out.push(show(&c.cmd(&["PING"])));
    out
}

#[test]
fn client_unblock_ends_waits_as_redis_does() {
    let latchkey = Server::builder().start_blocking().expect("start latchkey");
    let redis = RedisProcess::spawn(&[]);
    let (l, r) = (transcript(latchkey.addr()), transcript(redis.addr()));
    for (mine, theirs) in l.iter().zip(&r) {
        assert_eq!(mine, theirs);
    }
    assert_eq!(l.len(), r.len());
    // And the transcript says what this test is about.
    assert!(l[0].ends_with(r":1\r\n / *-1\r\n"), "{}", l[0]);
    assert!(
        l[2].contains("-UNBLOCKED client unblocked via CLIENT UNBLOCK"),
        "{}",
        l[2]
    );
}
