//! The lock-loss scenarios on real `redis-server` pairs, with the fault proxy between the
//! replica and its master making the link lose writes as latchkey's controls do.

use std::time::{Duration, Instant};

use latchkey_tests::{FaultProxy, RawConn, RedisProcess};

struct Pair {
    master: Option<RedisProcess>,
    replica: RedisProcess,
    proxy: FaultProxy,
}

async fn pair() -> Pair {
    let master = RedisProcess::spawn(&["--repl-diskless-sync-delay", "0"]);
    let proxy = FaultProxy::start(master.addr()).await;
    let port = proxy.addr().port().to_string();
    let replica = RedisProcess::spawn(&["--replicaof", "127.0.0.1", &port]);
    let addr = replica.addr();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info = tokio::task::spawn_blocking(move || {
            String::from_utf8(
                RawConn::connect(addr)
                    .unwrap()
                    .cmd(&["INFO", "replication"]),
            )
            .unwrap()
        })
        .await
        .unwrap();
        if info.contains("master_link_status:up") {
            break;
        }
        assert!(Instant::now() < deadline, "replica never synced: {info}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Pair {
        master: Some(master),
        replica,
        proxy,
    }
}

fn cmd(addr: std::net::SocketAddr, args: &[&str]) -> Vec<u8> {
    RawConn::connect(addr).unwrap().cmd(args)
}

impl Pair {
    /// The master dies; what it had not sent through the proxy is lost with it.
    fn crash_master(&mut self) {
        self.proxy.drop_held();
        self.proxy.cut();
        self.master.take();
    }

    fn promote(&self) {
        assert_eq!(
            cmd(self.replica.addr(), &["REPLICAOF", "NO", "ONE"]),
            b"+OK\r\n"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_redis_failover_loses_an_unreplicated_lock() {
    let mut p = pair().await;
    let m = p.master.as_ref().unwrap().addr();
    p.proxy.pause();
    assert_eq!(
        cmd(m, &["SET", "lock", "client-1", "NX", "PX", "30000"]),
        b"+OK\r\n"
    );
    p.crash_master();
    p.promote();
    assert_eq!(
        cmd(
            p.replica.addr(),
            &["SET", "lock", "client-2", "NX", "PX", "30000"]
        ),
        b"+OK\r\n",
        "the promoted replica should not know about client-1's lock"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_redis_wait_confirmed_locks_are_never_held_twice() {
    // Partitioned: WAIT answers 0, the first client gives the lock up.
    let mut p = pair().await;
    let m = p.master.as_ref().unwrap().addr();
    p.proxy.pause();
    let mut first = RawConn::connect(m).unwrap();
    first.cmd(&["SET", "lock", "client-1", "NX", "PX", "30000"]);
    assert_eq!(first.cmd(&["WAIT", "1", "200"]), b":0\r\n");
    first.cmd(&["DEL", "lock"]);
    p.crash_master();
    p.promote();
    assert_eq!(
        cmd(
            p.replica.addr(),
            &["SET", "lock", "client-2", "NX", "PX", "30000"]
        ),
        b"+OK\r\n"
    );

    // Healthy: WAIT confirms, and the promoted replica refuses a second holder.
    let mut p = pair().await;
    let m = p.master.as_ref().unwrap().addr();
    let mut first = RawConn::connect(m).unwrap();
    first.cmd(&["SET", "lock", "client-1", "NX", "PX", "30000"]);
    assert_eq!(first.cmd(&["WAIT", "1", "5000"]), b":1\r\n");
    p.crash_master();
    p.promote();
    assert_eq!(
        cmd(
            p.replica.addr(),
            &["SET", "lock", "client-2", "NX", "PX", "30000"]
        ),
        b"$-1\r\n"
    );
}
