//! Replication between latchkey servers, and the failover scenarios that lose a lock, driven
//! with the in-process Rust controls (`ServerHandle`). `failover_redis.rs` runs the same
//! scenarios over the wire on latchkey and on real `redis-server` pairs.

use std::time::{Duration, Instant};

use latchkey_server::{Frame, Server, ServerHandle};
use latchkey_tests::fencing::{TokenCheckedStore, LEASE_CHECKED_WRITE};
use latchkey_tests::RawConn;

async fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn pair() -> (ServerHandle, ServerHandle) {
    let master = Server::builder().start().await.unwrap();
    let replica = Server::builder().start().await.unwrap();
    replica.replicate_from(master.addr());
    until("the replication link", || replica.replication_link_up()).await;
    (master, replica)
}

async fn get(s: &ServerHandle, key: &str) -> Frame {
    s.client().cmd(["GET", key]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_snapshot_expiry_and_read_only_replica() {
    let master = Server::builder().start().await.unwrap();
    let mut m = master.client();
    m.cmd(["SET", "before", "snapshot"]).await;
    m.cmd(["HSET", "h", "f", "v"]).await;
    let replica = Server::builder().start().await.unwrap();
    replica.replicate_from(master.addr());
    until("the replication link", || replica.replication_link_up()).await;
    let mut r = replica.client();
    assert_eq!(r.cmd(["GET", "before"]).await, Frame::bulk("snapshot"));
    assert_eq!(r.cmd(["HGET", "h", "f"]).await, Frame::bulk("v"));
    // Live stream, relative TTL made absolute, other databases.
    m.cmd(["SET", "lock", "tok", "PX", "60000"]).await;
    m.cmd(["SELECT", "3"]).await;
    m.cmd(["RPUSH", "q", "a", "b"]).await;
    m.cmd(["SELECT", "0"]).await;
    let mut waited = 0;
    while r.cmd(["GET", "lock"]).await != Frame::bulk("tok") {
        tokio::time::sleep(Duration::from_millis(10)).await;
        waited += 1;
        assert!(waited < 500, "write never reached the replica");
    }
    let (Frame::Integer(mt), Frame::Integer(rt)) = (
        m.cmd(["PEXPIRETIME", "lock"]).await,
        r.cmd(["PEXPIRETIME", "lock"]).await,
    ) else {
        panic!("PEXPIRETIME")
    };
    assert_eq!(mt, rt, "the replica's deadline differs from the master's");
    r.cmd(["SELECT", "3"]).await;
    for _ in 0..500 {
        if r.cmd(["LLEN", "q"]).await == Frame::Integer(2) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        r.cmd(["LRANGE", "q", "0", "-1"]).await,
        Frame::bulks(["a", "b"])
    );
    // Replicas are read-only for clients.
    assert_eq!(
        r.cmd(["SET", "x", "y"]).await,
        Frame::error("READONLY You can't write against a read only replica.")
    );
    // ROLE and INFO replication, both sides.
    let Frame::Array(role) = replica.client().cmd(["ROLE"]).await else {
        panic!()
    };
    assert_eq!(role[0], Frame::bulk("slave"));
    let Frame::Array(role) = m.cmd(["ROLE"]).await else {
        panic!()
    };
    assert_eq!(role[0], Frame::bulk("master"));
    let Frame::Bulk(info) = m.cmd(["INFO", "replication"]).await else {
        panic!()
    };
    let info = String::from_utf8_lossy(&info);
    assert!(info.contains("connected_slaves:1"), "{info}");
    // A key expiring on the master is deleted on the replica by the master's DEL.
    m.cmd(["SET", "short", "v", "PX", "50"]).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(get(&replica, "short").await, Frame::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_counts_acknowledging_replicas() {
    let (master, _replica) = pair().await;
    let mut m = master.client();
    m.cmd(["SET", "k", "v"]).await;
    assert_eq!(m.cmd(["WAIT", "1", "2000"]).await, Frame::Integer(1));
    master.pause_replication(true);
    m.cmd(["SET", "k", "v2"]).await;
    assert_eq!(m.cmd(["WAIT", "1", "100"]).await, Frame::Integer(0));
    master.pause_replication(false);
    assert_eq!(m.cmd(["WAIT", "1", "2000"]).await, Frame::Integer(1));
}

/// Scenario (a): a lock taken on the master, the master crashes before the write replicates,
/// the replica is promoted, and a second client takes the same lock: two holders.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_loses_an_unreplicated_lock() {
    let (master, replica) = pair().await;
    master.pause_replication(true);
    let mut first = master.client();
    assert_eq!(
        first
            .cmd(["SET", "lock", "client-1", "NX", "PX", "30000"])
            .await,
        Frame::ok()
    );
    master.crash().await;
    replica.promote();
    let mut second = replica.client();
    assert_eq!(
        second
            .cmd(["SET", "lock", "client-2", "NX", "PX", "30000"])
            .await,
        Frame::ok(),
        "the promoted replica should not know about client-1's lock"
    );
    // Two clients now both believe they hold "lock": the violation this scenario teaches.
    assert_eq!(first.cmd(["GET", "lock"]).await, Frame::bulk("client-1"));
    assert_eq!(second.cmd(["GET", "lock"]).await, Frame::bulk("client-2"));
}

/// Scenario (b): the same, but the acquisition is confirmed with WAIT. Unconfirmed, the first
/// client gives the lock up; confirmed, the promoted replica refuses the second client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_confirmed_locks_are_never_held_twice() {
    // Partitioned: WAIT answers 0 and the first client gives up.
    let (master, replica) = pair().await;
    master.pause_replication(true);
    let mut first = master.client();
    first
        .cmd(["SET", "lock", "client-1", "NX", "PX", "30000"])
        .await;
    assert_eq!(first.cmd(["WAIT", "1", "100"]).await, Frame::Integer(0));
    first.cmd(["DEL", "lock"]).await; // not confirmed: not held
    master.crash().await;
    replica.promote();
    assert_eq!(
        replica
            .client()
            .cmd(["SET", "lock", "client-2", "NX", "PX", "30000"])
            .await,
        Frame::ok()
    );

    // Healthy: WAIT confirms, and after the failover the lock is still there.
    let (master, replica) = pair().await;
    let mut first = master.client();
    first
        .cmd(["SET", "lock", "client-1", "NX", "PX", "30000"])
        .await;
    assert_eq!(first.cmd(["WAIT", "1", "2000"]).await, Frame::Integer(1));
    master.crash().await;
    replica.promote();
    assert_eq!(
        replica
            .client()
            .cmd(["SET", "lock", "client-2", "NX", "PX", "30000"])
            .await,
        Frame::Null,
        "a WAIT-confirmed lock was lost in the failover"
    );
}

/// The same controls over the wire, under `LATCHKEY.FAILOVER`, and `REPLICAOF` itself.
#[test]
fn failover_over_the_wire() {
    let master = Server::builder().start_blocking().unwrap();
    let replica = Server::builder().start_blocking().unwrap();
    let mut r = RawConn::connect(replica.addr()).unwrap();
    let port = master.addr().port().to_string();
    assert_eq!(r.cmd(&["REPLICAOF", "127.0.0.1", &port]), b"+OK\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !replica.handle().replication_link_up() {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut m = RawConn::connect(master.addr()).unwrap();
    assert_eq!(m.cmd(&["LATCHKEY.FAILOVER", "PAUSE"]), b"+OK\r\n");
    assert_eq!(m.cmd(&["SET", "lock", "a", "NX"]), b"+OK\r\n");
    assert_eq!(m.cmd(&["LATCHKEY.FAILOVER", "CRASH"]), b"+OK\r\n");
    assert!(
        m.try_read_reply().is_err(),
        "a crashed master still answers"
    );
    assert_eq!(r.cmd(&["LATCHKEY.FAILOVER", "PROMOTE"]), b"+OK\r\n");
    assert_eq!(r.cmd(&["SET", "lock", "b", "NX"]), b"+OK\r\n");
    assert_eq!(r.cmd(&["ROLE"])[..12], b"*3\r\n$6\r\nmast"[..12]);
}

fn int(f: Frame) -> i64 {
    match f {
        Frame::Integer(i) => i,
        other => panic!("expected an integer, got {other:?}"),
    }
}

/// Scenario (c): after the failover of scenario (a), which protection stops the stale holder?
/// The `INCR` fencing token goes backwards (it is issued again), so a token-checking store
/// cannot tell the two holders apart; a store that checks the lease itself on the current
/// primary (compare-and-set against the lock's value) refuses the stale holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_across_a_failover() {
    let (master, replica) = pair().await;
    let mut setup = master.client();
    setup.cmd(["SET", "fence", "5"]).await;
    assert_eq!(setup.cmd(["WAIT", "1", "2000"]).await, Frame::Integer(1));

    master.pause_replication(true);
    let mut first = master.client();
    first
        .cmd(["SET", "lock", "client-1", "NX", "PX", "30000"])
        .await;
    let token_1 = int(first.cmd(["INCR", "fence"]).await);
    master.crash().await;
    replica.promote();
    let mut second = replica.client();
    assert_eq!(
        second
            .cmd(["SET", "lock", "client-2", "NX", "PX", "30000"])
            .await,
        Frame::ok()
    );
    let token_2 = int(second.cmd(["INCR", "fence"]).await);
    assert!(
        token_2 <= token_1,
        "the fencing counter did not go back: {token_1} then {token_2}"
    );

    // Token-checked storage: the stale holder writes first and wins; the rightful one loses.
    let mut store = TokenCheckedStore::default();
    assert!(store.write("client-1", token_1));
    assert!(
        !store.write("client-2", token_2),
        "equal tokens cannot both pass"
    );
    assert_eq!(store.writes, vec!["client-1"]);

    // Lease-checked storage: a write passes only if the lock on the current primary still
    // holds the writer's token, checked and applied atomically.
    let cas = LEASE_CHECKED_WRITE;
    let mut stale = replica.client();
    assert_eq!(
        stale
            .cmd(["EVAL", cas, "2", "lock", "resource", "client-1", "stale"])
            .await,
        Frame::Integer(0)
    );
    assert_eq!(
        second
            .cmd(["EVAL", cas, "2", "lock", "resource", "client-2", "fresh"])
            .await,
        Frame::Integer(1)
    );
    assert_eq!(second.cmd(["GET", "resource"]).await, Frame::bulk("fresh"));
}

/// Scenario (e): a holder pauses (a long GC) past its TTL, a second client acquires, the first
/// wakes and writes: fencing tokens catch it.
#[tokio::test]
async fn a_paused_holder_is_caught_by_fencing() {
    let server = Server::builder()
        .virtual_clock()
        .no_listener()
        .start()
        .await
        .unwrap();
    let acquire = latchkey_client::scripts::FENCED_ACQUIRE.body;
    let mut c1 = server.client();
    let mut c2 = server.client();
    let t1 = int(c1
        .cmd(["EVAL", acquire, "2", "lock", "fence", "c1", "10000"])
        .await);
    assert!(t1 > 0);
    // c1 stops for 15 s: its lease (10 s) runs out.
    server.clock().advance(Duration::from_secs(15));
    let t2 = int(c2
        .cmd(["EVAL", acquire, "2", "lock", "fence", "c2", "10000"])
        .await);
    assert!(t2 > t1);
    let mut store = TokenCheckedStore::default();
    assert!(store.write("c2", t2));
    assert!(
        !store.write("c1", t1),
        "the paused holder's late write got through"
    );
    assert_eq!(store.writes, vec!["c2"]);
}

/// A lagging replica: writes reach it late, and WAIT says so in the meantime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_replica_applies_late() {
    let (master, replica) = pair().await;
    // A lag far longer than the steps before the first read, so that a loaded machine does
    // not reach it first; the outcome, not the time, is asserted.
    replica.set_replication_lag(Duration::from_secs(3));
    let mut m = master.client();
    m.cmd(["SET", "late", "v"]).await;
    assert_eq!(m.cmd(["WAIT", "1", "50"]).await, Frame::Integer(0));
    assert_eq!(
        get(&replica, "late").await,
        Frame::Null,
        "applied before its lag"
    );
    assert_eq!(m.cmd(["WAIT", "1", "30000"]).await, Frame::Integer(1));
    assert_eq!(get(&replica, "late").await, Frame::bulk("v"));
}
