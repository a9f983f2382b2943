//! A master and its replica, on latchkey or on real `redis-server`, behind one trait, so that
//! a failover scenario is written once and run on both servers.
//!
//! Both kinds are driven over real sockets. The faults come from different places:
//!
//! | fault | latchkey ([`LatchkeyPair`]) | redis-server ([`RedisPair`]) |
//! |---|---|---|
//! | lag | `LATCHKEY.FAILOVER LAG ms` on the replica | the [`FaultProxy`] delays the stream |
//! | pause / resume | `LATCHKEY.FAILOVER PAUSE`/`RESUME` on the master | the proxy holds the stream |
//! | crash the master | `LATCHKEY.FAILOVER CRASH` | proxy drops what it held, cuts; `SIGKILL` |
//! | promote | `REPLICAOF NO ONE` | `REPLICAOF NO ONE` |

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use latchkey_server::{BlockingServer, Server};

use crate::raw::show;
use crate::{FaultProxy, RawConn, RedisProcess};

/// Sends one command on a fresh connection and returns the reply's bytes.
pub fn cmd(addr: SocketAddr, args: &[&str]) -> Vec<u8> {
    RawConn::connect(addr)
        .unwrap_or_else(|e| panic!("connect to {addr}: {e}"))
        .cmd(args)
}

/// One field of `INFO replication` (e.g. `master_repl_offset`), if present.
pub fn info_field(addr: SocketAddr, field: &str) -> Option<String> {
    let info = String::from_utf8_lossy(&cmd(addr, &["INFO", "replication"])).into_owned();
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .map(str::to_string)
}

/// An integer field of `INFO replication`, panicking when it is absent.
pub fn info_offset(addr: SocketAddr, field: &str) -> i64 {
    info_field(addr, field)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no integer {field} in INFO replication of {addr}"))
}

/// The offset the master's first replica acknowledged (`slave0:...,offset=N,...`).
pub fn acked_offset(master: SocketAddr) -> Option<i64> {
    let line = info_field(master, "slave0")?;
    line.split(',')
        .find_map(|kv| kv.strip_prefix("offset="))
        .and_then(|v| v.parse().ok())
}

/// Polls `what` every 10 ms until it holds, for at most `within`.
pub fn until(what: &str, within: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until `replica` reports `master_link_status:up`.
pub fn wait_link_up(replica: SocketAddr) {
    until("the replication link", Duration::from_secs(20), || {
        info_field(replica, "master_link_status").as_deref() == Some("up")
    });
}

/// A master with one replica, whose replication stream can be made to fail.
pub trait ReplicatedPair {
    /// Which server this is, for messages.
    fn name(&self) -> &'static str;

    /// The master's address (it stops answering once crashed).
    fn master(&self) -> SocketAddr;

    /// The replica's address (the new master once promoted).
    fn replica(&self) -> SocketAddr;

    /// Makes the replica receive (so apply and acknowledge) the stream `lag` late.
    fn set_lag(&self, lag: Duration);

    /// Holds the replication stream: the master's writes stop reaching the replica.
    fn pause(&self);

    /// Lets the held stream through again, in order.
    fn resume(&self);

    /// The master dies: it stops answering, and the writes the replica had not received are
    /// gone with it.
    fn crash_master(&mut self);

    /// Promotes the replica to master, as a failover (Sentinel, an operator) would.
    fn promote(&self) {
        let reply = cmd(self.replica(), &["REPLICAOF", "NO", "ONE"]);
        assert_eq!(reply, b"+OK\r\n", "{}: {}", self.name(), show(&reply));
    }
}

/// Two latchkey servers in this process, the second a replica of the first, driven over the
/// wire with `REPLICAOF` and `LATCHKEY.FAILOVER`.
pub struct LatchkeyPair {
    master: BlockingServer,
    replica: BlockingServer,
}

impl LatchkeyPair {
    /// Starts both servers and waits until the replica is in sync.
    pub fn start() -> LatchkeyPair {
        let master = Server::builder().start_blocking().expect("start master");
        let replica = Server::builder().start_blocking().expect("start replica");
        let port = master.addr().port().to_string();
        assert_eq!(
            cmd(replica.addr(), &["REPLICAOF", "127.0.0.1", &port]),
            b"+OK\r\n"
        );
        wait_link_up(replica.addr());
        LatchkeyPair { master, replica }
    }

    fn failover(addr: SocketAddr, args: &[&str]) {
        let mut full = vec!["LATCHKEY.FAILOVER"];
        full.extend_from_slice(args);
        let reply = cmd(addr, &full);
        assert_eq!(reply, b"+OK\r\n", "{full:?}: {}", show(&reply));
    }
}

impl ReplicatedPair for LatchkeyPair {
    fn name(&self) -> &'static str {
        "latchkey"
    }

    fn master(&self) -> SocketAddr {
        self.master.addr()
    }

    fn replica(&self) -> SocketAddr {
        self.replica.addr()
    }

    fn set_lag(&self, lag: Duration) {
        Self::failover(self.replica(), &["LAG", &lag.as_millis().to_string()]);
    }

    fn pause(&self) {
        Self::failover(self.master(), &["PAUSE"]);
    }

    fn resume(&self) {
        Self::failover(self.master(), &["RESUME"]);
    }

    fn crash_master(&mut self) {
        Self::failover(self.master(), &["CRASH"]);
        let master = self.master();
        until(
            "the crashed master to stop answering",
            Duration::from_secs(10),
            || RawConn::connect(master).is_err(),
        );
    }
}

/// Two real `redis-server` processes, the replica following the master through a
/// [`FaultProxy`], which this pair runs on a small runtime of its own.
pub struct RedisPair {
    // Fields drop in order: the proxy (its drop cuts every connection) before the runtime
    // its tasks run on.
    proxy: FaultProxy,
    master: Option<RedisProcess>,
    master_addr: SocketAddr,
    replica: RedisProcess,
    _rt: tokio::runtime::Runtime,
}

impl RedisPair {
    /// Starts the master, the proxy and the replica, and waits until the replica is in sync.
    pub fn start() -> RedisPair {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .thread_name("fault-proxy")
            .build()
            .expect("proxy runtime");
        let master = RedisProcess::spawn(&["--repl-diskless-sync-delay", "0"]);
        let proxy = rt.block_on(FaultProxy::start(master.addr()));
        let port = proxy.addr().port().to_string();
        let replica = RedisProcess::spawn(&["--replicaof", "127.0.0.1", &port]);
        wait_link_up(replica.addr());
        // After a diskless sync the master counts the replica for `WAIT` only once it sent its
        // first acknowledgement (up to a second after the replica says its link is up).
        // And its acknowledgements reach the master: a write confirmed by `WAIT` before the
        // test's own (the first ones after a sync sometimes came only with the once-a-second
        // acknowledgement, after a client's reply timeout).
        let mut probe = crate::RawConn::connect(master.addr()).expect("connect to the master");
        until(
            "the replica acknowledges a write",
            Duration::from_secs(20),
            || {
                probe.cmd(&["SET", "pair:in-sync", "1"]);
                probe.cmd(&["WAIT", "1", "100"]) == b":1\r\n"
            },
        );
        probe.cmd(&["DEL", "pair:in-sync"]);
        until(
            "the replica acknowledges the cleanup",
            Duration::from_secs(20),
            || probe.cmd(&["WAIT", "1", "100"]) == b":1\r\n",
        );
        RedisPair {
            proxy,
            master_addr: master.addr(),
            master: Some(master),
            replica,
            _rt: rt,
        }
    }

    /// The proxy between the replica and the master, for faults beyond the trait's.
    pub fn proxy(&self) -> &FaultProxy {
        &self.proxy
    }
}

impl ReplicatedPair for RedisPair {
    fn name(&self) -> &'static str {
        "redis-server"
    }

    fn master(&self) -> SocketAddr {
        self.master_addr
    }

    fn replica(&self) -> SocketAddr {
        self.replica.addr()
    }

    fn set_lag(&self, lag: Duration) {
        self.proxy.set_delay(lag);
    }

    fn pause(&self) {
        self.proxy.pause();
    }

    fn resume(&self) {
        self.proxy.resume();
    }

    fn crash_master(&mut self) {
        // Order matters: what the proxy held must not slip through while the process dies.
        self.proxy.drop_held();
        self.proxy.cut();
        self.master.take(); // SIGKILL
    }
}
