//! `CLIENT PAUSE`, `CLIENT UNPAUSE` and `CLIENT REPLY` do what they say, side by side with a
//! real redis-server: a paused write waits and runs when the pause ends, reads go on, keys do
//! not expire meanwhile; replies switched off are never sent.
//!
//! Every wait here is for a state the servers report (a `CLIENT LIST` line, a reply), never a
//! sleep standing in for one.

use std::net::SocketAddr;
use std::time::Duration;

use latchkey_server::Server;
use latchkey_tests::pair::until;
use latchkey_tests::{RawConn, RedisProcess};

/// How long a state the servers report may take to appear before the test fails.
const WAIT: Duration = Duration::from_secs(20);

/// The `CLIENT LIST` line of the client named `name`.
fn line_of(c: &mut RawConn, name: &str) -> Option<String> {
    let list = String::from_utf8_lossy(&c.cmd(&["CLIENT", "LIST"])).into_owned();
    list.lines()
        .find(|l| l.contains(&format!(" name={name} ")))
        .map(str::to_string)
}

/// A write sent during `CLIENT PAUSE WRITE` waits (the key is not written) while reads from
/// another client go on; `CLIENT UNPAUSE` lets it run. Returns the transcript of replies.
fn paused_write_waits(addr: SocketAddr) -> Vec<Vec<u8>> {
    let mut admin = RawConn::connect(addr).unwrap();
    let mut writer = RawConn::connect(addr).unwrap();
    let mut out = vec![
        admin.cmd(&["FLUSHALL"]),
        writer.cmd(&["CLIENT", "SETNAME", "writer"]),
        admin.cmd(&["CLIENT", "PAUSE", "100000", "WRITE"]),
    ];
    // A read of the writer is not held.
    out.push(writer.cmd(&["GET", "k"]));
    writer.send_raw(&RawConn::encode(&["SET", "k", "v"]));
    // The server has the SET (the writer's last command is `set`) but holds it.
    until("the writer's SET reached the server", WAIT, || {
        line_of(&mut admin, "writer").is_some_and(|l| l.contains(" cmd=set "))
    });
    out.push(admin.cmd(&["GET", "k"]));
    out.push(admin.cmd(&["EXISTS", "k"]));
    out.push(admin.cmd(&["CLIENT", "UNPAUSE"]));
    out.push(writer.read_reply());
    out.push(admin.cmd(&["GET", "k"]));
    out
}

#[test]
fn a_paused_write_waits_and_runs_on_unpause_as_in_redis() {
    let latchkey = Server::builder().start_blocking().expect("latchkey");
    let redis = RedisProcess::spawn(&[]);
    let ours = paused_write_waits(latchkey.addr());
    let theirs = paused_write_waits(redis.addr());
    assert_eq!(
        ours[4..],
        [
            b"$-1\r\n".to_vec(),
            b":0\r\n".to_vec(),
            b"+OK\r\n".to_vec(),
            b"+OK\r\n".to_vec(),
            b"$1\r\nv\r\n".to_vec()
        ]
    );
    assert_eq!(ours, theirs);
}

/// `CLIENT PAUSE ... ALL` holds reads too, and a pause ends by itself at its timeout.
fn pause_all_holds_reads(addr: SocketAddr) -> Vec<Vec<u8>> {
    let mut admin = RawConn::connect(addr).unwrap();
    let mut reader = RawConn::connect(addr).unwrap();
    let mut out = vec![
        admin.cmd(&["SET", "k", "before"]),
        reader.cmd(&["CLIENT", "SETNAME", "reader"]),
    ];
    // Long enough for the read below to be seen waiting, short enough to end by itself.
    out.push(admin.cmd(&["CLIENT", "PAUSE", "1500", "ALL"]));
    reader.send_raw(&RawConn::encode(&["GET", "k"]));
    // The admin's own commands are held as well; the read comes back once the pause ends.
    out.push(reader.read_reply());
    out.push(admin.cmd(&["GET", "k"]));
    out
}

#[test]
fn pause_all_holds_every_command_until_its_timeout_as_in_redis() {
    let latchkey = Server::builder().start_blocking().expect("latchkey");
    let redis = RedisProcess::spawn(&[]);
    let ours = pause_all_holds_reads(latchkey.addr());
    assert_eq!(ours, pause_all_holds_reads(redis.addr()));
    assert_eq!(ours[3], b"$6\r\nbefore\r\n");
}

/// During a pause an expired key reads as missing but is not deleted (`DBSIZE` still counts
/// it); after `UNPAUSE` it goes.
fn expiry_waits_for_the_pause(addr: SocketAddr) -> Vec<Vec<u8>> {
    let mut c = RawConn::connect(addr).unwrap();
    let mut out = vec![
        c.cmd(&["FLUSHALL"]),
        c.cmd(&["SET", "lease", "t", "PX", "200"]),
        c.cmd(&["CLIENT", "PAUSE", "100000", "WRITE"]),
    ];
    until("the lease's time passed", WAIT, || {
        c.cmd(&["PTTL", "lease"]) == b":-2\r\n"
    });
    out.push(c.cmd(&["GET", "lease"]));
    out.push(c.cmd(&["DBSIZE"]));
    out.push(c.cmd(&["CLIENT", "UNPAUSE"]));
    until("the expired lease was deleted", WAIT, || {
        // A read deletes it now, or the active cycle did.
        let _ = c.cmd(&["GET", "lease"]);
        c.cmd(&["DBSIZE"]) == b":0\r\n"
    });
    out
}

#[test]
fn keys_do_not_expire_during_a_pause_as_in_redis() {
    let latchkey = Server::builder().start_blocking().expect("latchkey");
    let redis = RedisProcess::spawn(&[]);
    let ours = expiry_waits_for_the_pause(latchkey.addr());
    assert_eq!(ours, expiry_waits_for_the_pause(redis.addr()));
    assert_eq!(ours[3], b"$-1\r\n");
    assert_eq!(
        ours[4], b":1\r\n",
        "the expired key was deleted during the pause"
    );
}

/// `CLIENT REPLY SKIP` drops its own reply and the next one; `OFF` drops every reply until
/// `ON`, whose `+OK` is sent. The bytes that arrive are compared exactly.
fn reply_modes(addr: SocketAddr) -> Vec<u8> {
    let mut c = RawConn::connect(addr).unwrap();
    let mut pipeline = Vec::new();
    for cmd in [
        &["SET", "a", "1"][..],
        &["CLIENT", "REPLY", "SKIP"],
        &["SET", "a", "2"],
        &["GET", "a"],
        &["CLIENT", "REPLY", "OFF"],
        &["SET", "b", "1"],
        &["GET", "b"],
        &["CLIENT", "REPLY", "BOGUS"],
        &["CLIENT", "REPLY", "ON"],
        &["GET", "b"],
        &["CLIENT", "REPLY", "BOGUS"],
        &["PING"],
    ] {
        pipeline.extend(RawConn::encode(cmd));
    }
    c.send_raw(&pipeline);
    let mut got = Vec::new();
    for _ in 0..6 {
        got.extend(c.read_reply());
    }
    got
}

#[test]
fn client_reply_off_and_skip_send_nothing_as_in_redis() {
    let latchkey = Server::builder().start_blocking().expect("latchkey");
    let redis = RedisProcess::spawn(&[]);
    let ours = reply_modes(latchkey.addr());
    assert_eq!(
        String::from_utf8_lossy(&ours),
        "+OK\r\n$1\r\n2\r\n+OK\r\n$1\r\n1\r\n-ERR syntax error\r\n+PONG\r\n"
    );
    assert_eq!(ours, reply_modes(redis.addr()));
}

/// Pub/sub confirmations and messages are not replies that `CLIENT REPLY OFF|SKIP` silences:
/// a (un)subscribe is confirmed, in RESP2 and in RESP3, and a skip is spent on the command
/// whose confirmation went out anyway (the `PING` after it is answered).
fn pubsub_under_reply_off(addr: SocketAddr, resp3: bool) -> Vec<u8> {
    let mut c = RawConn::connect(addr).unwrap();
    let mut publisher = RawConn::connect(addr).unwrap();
    if resp3 {
        c.cmd(&["HELLO", "3"]);
    }
    let mut pipeline = Vec::new();
    for cmd in [
        &["CLIENT", "REPLY", "OFF"][..],
        &["SUBSCRIBE", "ch", "other"],
        &["PSUBSCRIBE", "c*"],
    ] {
        pipeline.extend(RawConn::encode(cmd));
    }
    c.send_raw(&pipeline);
    let mut got = Vec::new();
    for _ in 0..3 {
        got.extend(c.read_reply());
    }
    assert_eq!(publisher.cmd(&["PUBLISH", "ch", "hello"]), b":2\r\n");
    for _ in 0..2 {
        got.extend(c.read_reply());
    }
    // Out of every subscription (in RESP2, `CLIENT REPLY` is refused while subscribed), then
    // a skip spent on a SUBSCRIBE.
    let mut pipeline = Vec::new();
    for cmd in [
        &["UNSUBSCRIBE", "ch"][..],
        &["PUNSUBSCRIBE"],
        &["UNSUBSCRIBE"],
        &["CLIENT", "REPLY", "ON"],
        &["CLIENT", "REPLY", "SKIP"],
        &["SUBSCRIBE", "x"],
        &["PING"],
    ] {
        pipeline.extend(RawConn::encode(cmd));
    }
    c.send_raw(&pipeline);
    // Three confirmations, ON's +OK, SUBSCRIBE's confirmation, PING's answer.
    for _ in 0..6 {
        got.extend(c.read_reply());
    }
    got
}

#[test]
fn pubsub_confirmations_pass_client_reply_off_as_in_redis() {
    let latchkey = Server::builder().start_blocking().expect("latchkey");
    let redis = RedisProcess::spawn(&[]);
    for resp3 in [false, true] {
        let ours = pubsub_under_reply_off(latchkey.addr(), resp3);
        let theirs = pubsub_under_reply_off(redis.addr(), resp3);
        assert_eq!(
            String::from_utf8_lossy(&ours),
            String::from_utf8_lossy(&theirs),
            "RESP3: {resp3}"
        );
        assert!(
            String::from_utf8_lossy(&theirs).contains("subscribe\r\n$5\r\nother\r\n:2"),
            "{}",
            String::from_utf8_lossy(&theirs)
        );
    }
}

/// Bad arguments get Redis's errors, and the 7.2 subcommands a 7.0 server lacks are unknown.
#[test]
fn bad_pause_and_reply_arguments_get_redis_errors() {
    let latchkey = Server::builder().start_blocking().expect("latchkey");
    let redis = RedisProcess::spawn(&[]);
    let cases: &[&[&str]] = &[
        &["CLIENT", "PAUSE", "-1"],
        &["CLIENT", "PAUSE", "1.5"],
        &["CLIENT", "PAUSE", "10", "FOO"],
        &["CLIENT", "PAUSE", "10", "ALL", "x"],
        &["CLIENT", "PAUSE"],
        &["CLIENT", "UNPAUSE", "x"],
        &["CLIENT", "REPLY"],
        &["CLIENT", "NO-EVICT", "maybe"],
        &["CLIENT", "NO-EVICT", "on"],
        &["CLIENT", "NO-TOUCH", "on"],
        &["CLIENT", "SETINFO", "lib-name", "x"],
        &["CLIENT", "UNPAUSE"],
    ];
    let mut ours = RawConn::connect(latchkey.addr()).unwrap();
    let mut theirs = RawConn::connect(redis.addr()).unwrap();
    for case in cases {
        let a = ours.cmd(case);
        assert_eq!(
            String::from_utf8_lossy(&a),
            String::from_utf8_lossy(&theirs.cmd(case)),
            "{case:?}"
        );
    }
}

/// `HELLO` and `INFO` name the release the server follows, the one the suite compares with.
#[test]
fn the_version_reported_is_the_redis_release_followed() {
    let latchkey = Server::builder().start_blocking().expect("latchkey");
    let mut c = RawConn::connect(latchkey.addr()).unwrap();
    let info = String::from_utf8_lossy(&c.cmd(&["INFO", "server"])).into_owned();
    assert!(
        info.contains(&format!(
            "redis_version:{}\r\n",
            latchkey_server::REDIS_VERSION
        )),
        "{info}"
    );
    assert!(latchkey_server::REDIS_VERSION.starts_with(latchkey_tests::redis_proc::EXPECTED_REDIS));
}

/// On a server with a virtual clock, a pause lasts virtual time, as its keys' TTLs do: a write
/// held by `CLIENT PAUSE 1000 WRITE` stays held however long real time passes, and runs once
/// the clock is moved past the pause's end.
#[tokio::test]
async fn a_pause_on_a_virtual_clock_ends_when_the_clock_passes_it() {
    let server = Server::builder()
        .no_listener()
        .virtual_clock()
        .start()
        .await
        .unwrap();
    let mut admin = server.client();
    assert_eq!(
        admin.cmd(["CLIENT", "PAUSE", "1000", "WRITE"]).await,
        latchkey_server::Frame::ok()
    );
    let mut writer = server.client();
    let write = tokio::spawn(async move { writer.cmd(["SET", "k", "v"]).await });
    // Real time passes; the virtual clock does not.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(!write.is_finished(), "the write ran while the pause lasted");
    assert_eq!(
        admin.cmd(["GET", "k"]).await,
        latchkey_server::Frame::Null,
        "reads run during a WRITE pause"
    );
    server.clock().advance(Duration::from_millis(999));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!write.is_finished(), "the pause ended early");
    server.clock().advance(Duration::from_millis(2));
    assert_eq!(write.await.unwrap(), latchkey_server::Frame::ok());
    assert_eq!(
        admin.cmd(["GET", "k"]).await,
        latchkey_server::Frame::bulk("v")
    );
    server.shutdown().await;
}
