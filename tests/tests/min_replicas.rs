//! `min-replicas-to-write` (alias `min-slaves-to-write`), side by side with redis-server 7.0:
//! a master refuses writes (a lock's `SET NX PX` among them) unless enough replicas
//! acknowledged within `min-replicas-max-lag` seconds — in plain commands, in scripts, in
//! transactions at queueing time and at `EXEC` — and says how many are good in `INFO`.
//!
//! It is the one setting of Redis itself that narrows the window in which a failover loses a
//! lock: a master cut off from its replicas stops handing out locks the replicas never saw.

use std::net::SocketAddr;
use std::time::Duration;

use latchkey_server::Server;
use latchkey_tests::pair::{until, wait_link_up};
use latchkey_tests::raw::show;
use latchkey_tests::{Diff, RawConn, RedisProcess};

/// With no replica at all: every kind of write is refused with Redis's error, reads and
/// `PUBLISH` go on, and the settings read, validate and switch off as Redis's do.
#[test]
fn writes_need_enough_good_replicas() {
    let mut d = Diff::new();
    for args in [
        &["CONFIG", "GET", "min-slaves-to-write"][..],
        &["CONFIG", "SET", "min-replicas-to-write", "-1"],
        &["CONFIG", "SET", "min-replicas-to-write", "abc"],
        &["CONFIG", "SET", "min-replicas-to-write", "2147483648"],
        &["CONFIG", "SET", "min-slaves-max-lag", "5"],
        &["CONFIG", "GET", "min-replicas-max-lag"],
        &["CONFIG", "SET", "min-replicas-max-lag", "10"],
        &["SET", "k", "before"],
        &["CONFIG", "SET", "min-replicas-to-write", "1"],
        &["CONFIG", "GET", "min-slaves-to-write"],
        &["SET", "k", "v"],
        &["SET", "lock:job", "token", "NX", "PX", "30000"],
        &["INCR", "counter"],
        &["DEL", "k"],
        &["GET", "k"],
        &["PUBLISH", "channel", "message"],
        &["EVAL", "return redis.call('set', KEYS[1], 'x')", "1", "k"],
        &["EVAL", "return redis.pcall('set', KEYS[1], 'x')", "1", "k"],
        &["EVAL", "return redis.call('get', KEYS[1])", "1", "k"],
        &["MULTI"],
        &["GET", "k"],
        &["SET", "k", "in-multi"],
        &["EXEC"],
        &["MULTI"],
        &["GET", "k"],
        &["EXEC"],
        // `min-replicas-max-lag 0` switches the rule off.
        &["CONFIG", "SET", "min-replicas-max-lag", "0"],
        &["SET", "k", "lag-zero"],
        &["CONFIG", "SET", "min-replicas-max-lag", "10"],
        &["SET", "k", "lag-ten"],
        &["CONFIG", "SET", "min-replicas-to-write", "0"],
        &["SET", "k", "after"],
        &["GET", "k"],
    ] {
        d.check(args);
    }
}

/// `INFO replication` shows the count of good replicas, right after `connected_slaves`, only
/// while the rule is on.
#[test]
fn info_shows_the_good_replicas_while_the_rule_is_on() {
    let mut d = Diff::new();
    let lines = |d: &mut Diff| {
        let (r, l) = d.both(&["INFO", "replication"]);
        let keep = |b: &[u8]| -> Vec<String> {
            String::from_utf8_lossy(b)
                .lines()
                .filter(|l| l.starts_with("connected_slaves") || l.starts_with("min_slaves"))
                .map(str::to_string)
                .collect()
        };
        (keep(&r), keep(&l))
    };
    let (r, l) = lines(&mut d);
    assert_eq!(r, l);
    assert_eq!(l, ["connected_slaves:0"]);
    d.check(&["CONFIG", "SET", "min-replicas-to-write", "2"]);
    let (r, l) = lines(&mut d);
    assert_eq!(r, l);
    assert_eq!(l, ["connected_slaves:0", "min_slaves_good_slaves:0"]);
}

/// A transaction queued while the rule allowed it is refused at `EXEC` once it no longer
/// does, and nothing of it runs.
#[test]
fn exec_checks_the_rule_again() {
    let d = Diff::new();
    for addr in [d.redis_proc.addr(), d.latchkey_server.addr()] {
        let mut a = RawConn::connect(addr).unwrap();
        let mut b = RawConn::connect(addr).unwrap();
        assert_eq!(a.cmd(&["MULTI"]), b"+OK\r\n");
        assert_eq!(a.cmd(&["SET", "k", "queued"]), b"+QUEUED\r\n");
        assert_eq!(
            b.cmd(&["CONFIG", "SET", "min-replicas-to-write", "1"]),
            b"+OK\r\n"
        );
        let exec = a.cmd(&["EXEC"]);
        assert_eq!(
            exec,
            b"-EXECABORT Transaction discarded because of: NOREPLICAS Not enough good replicas to write.\r\n",
            "{addr}: {}",
            show(&exec)
        );
        assert_eq!(a.cmd(&["GET", "k"]), b"$-1\r\n");
        // Out of the transaction: a later EXEC has no MULTI.
        assert_eq!(a.cmd(&["EXEC"]), b"-ERR EXEC without MULTI\r\n");
        assert_eq!(
            b.cmd(&["CONFIG", "SET", "min-replicas-to-write", "0"]),
            b"+OK\r\n"
        );
    }
}

/// The rule with a real replica, on both servers: while the replica acknowledges, a lock is
/// taken; once the replica is gone, the master refuses the next lock, and says it has no
/// good replica left.
#[test]
fn a_master_that_lost_its_replica_refuses_locks() {
    // redis-server: two processes.
    let master = RedisProcess::spawn(&[]);
    let replica = RedisProcess::spawn(&[
        "--replicaof",
        "127.0.0.1",
        &master.addr().port().to_string(),
    ]);
    wait_link_up(replica.addr());
    lose_the_replica("redis-server", master.addr(), move || drop(replica));

    // latchkey: two servers in this process.
    let master = Server::builder().start_blocking().expect("start master");
    let replica = Server::builder().start_blocking().expect("start replica");
    let port = master.addr().port().to_string();
    assert_eq!(
        RawConn::connect(replica.addr())
            .unwrap()
            .cmd(&["REPLICAOF", "127.0.0.1", &port]),
        b"+OK\r\n"
    );
    wait_link_up(replica.addr());
    lose_the_replica("latchkey", master.addr(), move || drop(replica));
}

fn lose_the_replica(name: &str, master: SocketAddr, stop_replica: impl FnOnce()) {
    let mut c = RawConn::connect(master).unwrap();
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "min-replicas-to-write", "1"]),
        b"+OK\r\n"
    );
    // The replica counts once it has acknowledged (within a second of its sync).
    until(
        &format!("{name}: the replica to count as good"),
        Duration::from_secs(20),
        || info(&mut c).contains("min_slaves_good_slaves:1"),
    );
    let taken = c.cmd(&["SET", "lock:job", "a", "NX", "PX", "30000"]);
    assert_eq!(taken, b"+OK\r\n", "{name}: {}", show(&taken));
    stop_replica();
    until(
        &format!("{name}: the master to notice its replica is gone"),
        Duration::from_secs(20),
        || info(&mut c).contains("min_slaves_good_slaves:0"),
    );
    let refused = c.cmd(&["SET", "lock:other", "b", "NX", "PX", "30000"]);
    assert_eq!(
        refused,
        b"-NOREPLICAS Not enough good replicas to write.\r\n",
        "{name}: {}",
        show(&refused)
    );
    assert_eq!(c.cmd(&["EXISTS", "lock:other"]), b":0\r\n", "{name}");
}

fn info(c: &mut RawConn) -> String {
    String::from_utf8_lossy(&c.cmd(&["INFO", "replication"])).into_owned()
}

/// The AOF replayed at a restart is obeyed, never refused: a master that needs a good replica
/// loads its own writes back before any replica is there (Redis obeys its AOF the same way).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_replays_its_aof_whatever_min_replicas_says() {
    use latchkey_server::Frame;
    let dir = tempfile::Builder::new()
        .prefix("latchkey-min-replicas-")
        .tempdir()
        .unwrap();
    let node = Server::builder()
        .config("dir", dir.path().to_str().unwrap())
        .config("appendonly", "yes")
        .config("appendfsync", "always")
        .start()
        .await
        .unwrap();
    let mut c = node.client();
    assert_eq!(c.cmd(["SET", "lock:job", "a"]).await, Frame::simple("OK"));
    assert_eq!(
        c.cmd(["CONFIG", "SET", "min-replicas-to-write", "1"]).await,
        Frame::simple("OK")
    );
    node.restart(true).await.unwrap();
    let mut c = node.client();
    assert_eq!(
        c.cmd(["GET", "lock:job"]).await,
        Frame::Bulk(bytes::Bytes::from_static(b"a")),
        "the AOF's write was refused on replay"
    );
    // And the rule still holds for clients.
    assert_eq!(
        c.cmd(["SET", "lock:other", "b"]).await,
        Frame::error("NOREPLICAS Not enough good replicas to write.")
    );
}
