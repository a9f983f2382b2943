//! The fault proxy itself, between a real `redis-server` master and replica: each fault acts
//! on the live replication connection, and the replica's own `INFO replication` and the
//! master's `WAIT` see it.

use std::time::Duration;

use latchkey_tests::pair::{acked_offset, cmd, info_field, info_offset, until};
use latchkey_tests::{RedisPair, ReplicatedPair};

const OK: &[u8] = b"+OK\r\n";

/// The replica's processed offset (a real replica reports it as `slave_repl_offset`).
fn replica_offset(p: &RedisPair) -> i64 {
    info_offset(p.replica(), "slave_repl_offset")
}

#[test]
fn delay_makes_the_replica_trail_and_wait_time_out() {
    let p = RedisPair::start();
    p.proxy().set_delay(Duration::from_secs(1));
    let mut master = latchkey_tests::RawConn::connect(p.master()).unwrap();
    assert_eq!(master.cmd(&["SET", "late", "v"]), OK);
    let written = info_offset(p.master(), "master_repl_offset");
    // The bytes of that SET sit in the proxy for a second: the replica has not got them.
    assert!(
        replica_offset(&p) < written,
        "the replica's offset should trail while delayed"
    );
    assert_eq!(cmd(p.replica(), &["GET", "late"]), b"$-1\r\n");
    assert_eq!(master.cmd(&["WAIT", "1", "50"]), b":0\r\n");
    // Once the delay has passed the replica applies and acknowledges.
    assert_eq!(master.cmd(&["WAIT", "1", "10000"]), b":1\r\n");
    assert_eq!(cmd(p.replica(), &["GET", "late"]), b"$1\r\nv\r\n");
    assert!(replica_offset(&p) >= written);
    assert!(acked_offset(p.master()).unwrap() >= written);

    // Many writes under a delay arrive complete and in order.
    p.proxy().set_delay(Duration::from_millis(200));
    for i in 0..50 {
        master.cmd(&["RPUSH", "order", &i.to_string()]);
    }
    assert_eq!(master.cmd(&["WAIT", "1", "10000"]), b":1\r\n");
    let expect = latchkey_tests::RawConn::connect(p.master())
        .unwrap()
        .cmd(&["LRANGE", "order", "0", "-1"]);
    assert_eq!(cmd(p.replica(), &["LRANGE", "order", "0", "-1"]), expect);

    // Back to no delay: WAIT is answered at once again.
    p.proxy().set_delay(Duration::ZERO);
    master.cmd(&["SET", "prompt", "1"]);
    assert_eq!(master.cmd(&["WAIT", "1", "10000"]), b":1\r\n");
}

#[test]
fn pause_holds_the_stream_and_resume_delivers_it_at_once() {
    let p = RedisPair::start();
    let mut master = latchkey_tests::RawConn::connect(p.master()).unwrap();
    p.pause();
    assert_eq!(master.cmd(&["SET", "held", "v"]), OK);
    assert_eq!(master.cmd(&["WAIT", "1", "100"]), b":0\r\n");
    // The master sends at once; the proxy reads it on its own task, soon.
    until(
        "the proxy to hold the write",
        Duration::from_secs(10),
        || p.proxy().held_bytes() > 0,
    );
    assert_eq!(cmd(p.replica(), &["GET", "held"]), b"$-1\r\n");
    // The link itself stays up: a pause is not a disconnection.
    assert_eq!(
        info_field(p.replica(), "master_link_status").as_deref(),
        Some("up")
    );
    p.resume();
    assert_eq!(master.cmd(&["WAIT", "1", "10000"]), b":1\r\n");
    assert_eq!(cmd(p.replica(), &["GET", "held"]), b"$1\r\nv\r\n");
    assert_eq!(p.proxy().held_bytes(), 0);
}

#[test]
fn dropped_bytes_never_reach_the_replica() {
    let p = RedisPair::start();
    let mut master = latchkey_tests::RawConn::connect(p.master()).unwrap();
    p.pause();
    assert_eq!(master.cmd(&["SET", "lost", "v"]), OK);
    until(
        "the proxy to hold the write",
        Duration::from_secs(10),
        || p.proxy().held_bytes() > 0,
    );
    p.proxy().drop_held();
    assert_eq!(p.proxy().held_bytes(), 0);
    p.resume();
    assert_eq!(master.cmd(&["SET", "after", "v"]), OK);
    until("the next write to arrive", Duration::from_secs(10), || {
        cmd(p.replica(), &["GET", "after"]) == b"$1\r\nv\r\n"
    });
    assert_eq!(cmd(p.replica(), &["GET", "lost"]), b"$-1\r\n");
    // The replica is now behind by the dropped bytes for good, so WAIT never counts it.
    assert!(replica_offset(&p) < info_offset(p.master(), "master_repl_offset"));
    assert_eq!(master.cmd(&["WAIT", "1", "100"]), b":0\r\n");
}

#[test]
fn cut_closes_the_live_link_and_keeps_it_down() {
    let p = RedisPair::start();
    p.proxy().cut();
    until(
        "the replica to see its link down",
        Duration::from_secs(10),
        || info_field(p.replica(), "master_link_status").as_deref() == Some("down"),
    );
    until(
        "the master to drop its replica",
        Duration::from_secs(10),
        || info_field(p.master(), "connected_slaves").as_deref() == Some("0"),
    );
    assert_eq!(cmd(p.master(), &["SET", "unseen", "v"]), OK);
    assert_eq!(cmd(p.master(), &["WAIT", "1", "100"]), b":0\r\n");
    assert_eq!(cmd(p.replica(), &["GET", "unseen"]), b"$-1\r\n");
    assert_eq!(
        info_field(p.replica(), "master_link_status").as_deref(),
        Some("down"),
        "the replica got back through a cut proxy"
    );
}

/// The proxy knows nothing of Redis: a latchkey replica behind it suffers the same pause.
#[test]
fn the_proxy_also_sits_between_latchkey_servers() {
    let master = latchkey_server::Server::builder().start_blocking().unwrap();
    let replica = latchkey_server::Server::builder().start_blocking().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let proxy = rt.block_on(latchkey_tests::FaultProxy::start(master.addr()));
    let port = proxy.addr().port().to_string();
    assert_eq!(cmd(replica.addr(), &["REPLICAOF", "127.0.0.1", &port]), OK);
    latchkey_tests::pair::wait_link_up(replica.addr());
    let mut m = latchkey_tests::RawConn::connect(master.addr()).unwrap();
    proxy.pause();
    assert_eq!(m.cmd(&["SET", "k", "v"]), OK);
    assert_eq!(m.cmd(&["WAIT", "1", "100"]), b":0\r\n");
    assert_eq!(cmd(replica.addr(), &["GET", "k"]), b"$-1\r\n");
    proxy.resume();
    assert_eq!(m.cmd(&["WAIT", "1", "10000"]), b":1\r\n");
    assert_eq!(cmd(replica.addr(), &["GET", "k"]), b"$1\r\nv\r\n");
    drop(proxy);
}
