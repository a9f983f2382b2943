//! `FAILOVER`, Redis 6.2's coordinated failover: the master holds writes, waits for a replica
//! to have the whole stream, makes itself that replica's replica and asks it, with
//! `PSYNC ... FAILOVER`, to take over. Tried between two latchkey servers and with a real
//! `redis-server` on either side, so each half of the protocol meets Redis's other half; its
//! errors compared with redis-server's byte for byte; and its timeout, `FORCE` and `ABORT`,
//! including the write a forced failover loses.

use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::Duration;

use latchkey_server::{BlockingServer, Server};
use latchkey_tests::pair::{cmd, info_field, until, wait_link_up};
use latchkey_tests::{raw::show, RawConn, RedisProcess};

/// A bound for a loaded machine, not a speed check.
const WITHIN: Duration = Duration::from_secs(20);

/// One server of a test, latchkey (in this process) or redis-server (a child process).
enum Node {
    Latchkey(BlockingServer),
    Redis(RedisProcess),
}

impl Node {
    fn latchkey() -> Node {
        Node::Latchkey(Server::builder().start_blocking().expect("start latchkey"))
    }

    fn redis() -> Node {
        Node::Redis(RedisProcess::spawn(&[]))
    }

    fn addr(&self) -> SocketAddr {
        match self {
            Node::Latchkey(s) => s.addr(),
            Node::Redis(r) => r.addr(),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Node::Latchkey(_) => "latchkey",
            Node::Redis(_) => "redis-server",
        }
    }
}

fn ok(addr: SocketAddr, args: &[&str]) {
    let reply = cmd(addr, args);
    assert_eq!(reply, b"+OK\r\n", "{args:?} on {addr}: {}", show(&reply));
}

fn role(addr: SocketAddr) -> String {
    // `*3\r\n$6\r\nmaster\r\n...` or `*5\r\n$5\r\nslave\r\n...`: the first element.
    let reply = String::from_utf8_lossy(&cmd(addr, &["ROLE"])).into_owned();
    reply.lines().nth(2).unwrap_or_default().to_string()
}

fn failover_state(addr: SocketAddr) -> String {
    info_field(addr, "master_failover_state").unwrap_or_default()
}

/// Makes `replica` follow `master` and waits until the link is up and the master counts the
/// replica online.
fn replicate(master: &Node, replica: &Node) {
    let port = master.addr().port().to_string();
    ok(replica.addr(), &["REPLICAOF", "127.0.0.1", &port]);
    wait_link_up(replica.addr());
    // Online, not only connected: Redis puts a replica online a little after its snapshot,
    // and refuses `FAILOVER TO` a replica that is not ("target replica is not online").
    until("the master to see its replica online", WITHIN, || {
        info_field(master.addr(), "slave0").is_some_and(|l| l.contains("state=online"))
    });
}

/// Waits until `new` is the master and `old` its connected replica, the failover over.
fn wait_handed_over(old: SocketAddr, new: SocketAddr) {
    until("the roles to swap", WITHIN, || {
        role(new) == "master"
            && role(old) == "slave"
            && info_field(old, "master_link_status").as_deref() == Some("up")
            && failover_state(old) == "no-failover"
    });
}

/// The whole hand-over, with `master` and `replica` of the given kinds: what the master had
/// is on the new master, the old one follows it (a write there is refused, a write on the new
/// master reaches it), and nothing was lost.
fn hands_over(master: Node, replica: Node) {
    let who = format!("{} -> {}", master.name(), replica.name());
    replicate(&master, &replica);
    for i in 0..20 {
        ok(
            master.addr(),
            &["SET", &format!("lock:{i}"), "token", "PX", "600000"],
        );
    }
    let port = replica.addr().port().to_string();
    ok(
        master.addr(),
        &["FAILOVER", "TO", "127.0.0.1", &port, "TIMEOUT", "20000"],
    );
    wait_handed_over(master.addr(), replica.addr());
    for i in 0..20 {
        assert_eq!(
            cmd(replica.addr(), &["GET", &format!("lock:{i}")]),
            b"$5\r\ntoken\r\n",
            "{who}: lock:{i} on the new master"
        );
    }
    assert_eq!(
        cmd(master.addr(), &["SET", "late", "1"]),
        b"-READONLY You can't write against a read only replica.\r\n",
        "{who}: the old master is a replica now"
    );
    ok(replica.addr(), &["SET", "after", "1"]);
    until("the new master's write on the old master", WITHIN, || {
        cmd(master.addr(), &["GET", "after"]) == b"$1\r\n1\r\n"
    });
}

#[test]
fn latchkey_hands_over_to_latchkey() {
    hands_over(Node::latchkey(), Node::latchkey());
}

/// latchkey's master side against redis-server's replica side: redis-server accepts
/// latchkey's `PSYNC ... FAILOVER` and takes over.
#[test]
fn latchkey_hands_over_to_redis() {
    hands_over(Node::latchkey(), Node::redis());
}

/// redis-server's master side against latchkey's replica side: latchkey accepts Redis's
/// `PSYNC ... FAILOVER`, promotes itself and continues the old master's stream.
#[test]
fn redis_hands_over_to_latchkey() {
    hands_over(Node::redis(), Node::latchkey());
}

/// Every refusal, byte for byte as redis-server 7.0 gives it, on a master with no replica
/// and on a replica.
#[test]
fn errors_match_redis() {
    let cases: &[&[&str]] = &[
        &["FAILOVER"],
        &["FAILOVER", "ABORT"],
        &["FAILOVER", "ABORT", "FORCE"],
        &["FAILOVER", "BOGUS"],
        &["FAILOVER", "TIMEOUT", "0"],
        &["FAILOVER", "TIMEOUT", "-5"],
        &["FAILOVER", "TIMEOUT", "soon"],
        &["FAILOVER", "TIMEOUT", "5", "TIMEOUT", "6"],
        &["FAILOVER", "TIMEOUT"],
        &["FAILOVER", "TO", "127.0.0.1"],
        &["FAILOVER", "TO", "127.0.0.1", "port"],
        &["FAILOVER", "TO", "127.0.0.1", "1", "TO", "127.0.0.1", "2"],
        &["FAILOVER", "FORCE"],
        &["FAILOVER", "FORCE", "FORCE"],
        &["FAILOVER", "TO", "127.0.0.1", "1", "FORCE"],
        &["FAILOVER", "TIMEOUT", "100", "FORCE"],
        &["PSYNC", "?", "-1", "FAILOVER"],
    ];
    let (latchkey, redis) = (Node::latchkey(), Node::redis());
    for args in cases {
        let (l, r) = (cmd(latchkey.addr(), args), cmd(redis.addr(), args));
        assert_eq!(show(&l), show(&r), "{args:?}");
    }
    // With a replica: a target that is not one, FORCE without a target, and a replica asked
    // to fail over (or to take over for a history that is not its own).
    let (lm, rm) = (Node::latchkey(), Node::redis());
    let (lr, rr) = (Node::latchkey(), Node::redis());
    replicate(&lm, &lr);
    replicate(&rm, &rr);
    let cases: &[(&[&str], bool)] = &[
        (&["FAILOVER", "TO", "127.0.0.1", "1"], true),
        (
            &["FAILOVER", "TO", "10.9.8.7", "1", "TIMEOUT", "10", "FORCE"],
            true,
        ),
        (&["FAILOVER", "TIMEOUT", "10", "FORCE"], true),
        (&["FAILOVER"], false),
        (
            &[
                "PSYNC",
                "0123456789012345678901234567890123456789",
                "1",
                "FAILOVER",
            ],
            false,
        ),
    ];
    for (args, on_master) in cases {
        let (l, r) = if *on_master {
            (cmd(lm.addr(), args), cmd(rm.addr(), args))
        } else {
            (cmd(lr.addr(), args), cmd(rr.addr(), args))
        };
        assert_eq!(show(&l), show(&r), "{args:?}");
    }
}

/// Sends `SET key value` on its own connection and thread; the reply comes on the channel.
fn set_in_background(addr: SocketAddr, key: &str) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    let key = key.to_string();
    std::thread::spawn(move || {
        let mut c = RawConn::connect(addr).expect("connect");
        let _ = tx.send(c.cmd(&["SET", key.as_str(), "held"]));
    });
    rx
}

/// A replica that cannot catch up (the stream to it is held): writes wait while the master
/// waits for it, `CLIENT UNPAUSE` does not release them, and at the timeout the failover is
/// abandoned: the master stays master and the held write runs there.
#[test]
fn a_replica_that_never_catches_up_times_the_failover_out() {
    let (master, replica) = (Node::latchkey(), Node::latchkey());
    replicate(&master, &replica);
    ok(master.addr(), &["LATCHKEY.FAILOVER", "PAUSE"]);
    ok(master.addr(), &["SET", "unsent", "1"]);
    let port = replica.addr().port().to_string();
    ok(
        master.addr(),
        &["FAILOVER", "TO", "127.0.0.1", &port, "TIMEOUT", "1500"],
    );
    assert_eq!(failover_state(master.addr()), "waiting-for-sync");
    assert_eq!(
        cmd(master.addr(), &["FAILOVER"]),
        b"-ERR FAILOVER already in progress.\r\n"
    );
    ok(master.addr(), &["CLIENT", "UNPAUSE"]);
    let held = set_in_background(master.addr(), "during");
    // Reads are served meanwhile.
    assert_eq!(cmd(master.addr(), &["GET", "unsent"]), b"$1\r\n1\r\n");
    assert!(
        held.recv_timeout(Duration::from_millis(300)).is_err(),
        "a write ran while the failover held writes"
    );
    until("the failover to time out", WITHIN, || {
        failover_state(master.addr()) == "no-failover"
    });
    assert_eq!(held.recv_timeout(WITHIN).unwrap(), b"+OK\r\n");
    assert_eq!(role(master.addr()), "master");
    assert_eq!(cmd(master.addr(), &["GET", "during"]), b"$4\r\nheld\r\n");
    ok(master.addr(), &["LATCHKEY.FAILOVER", "RESUME"]);
}

/// `FORCE`: at the timeout the master fails over to a replica that is behind. The write it
/// acknowledged but never sent is lost on both nodes — the failover this command is meant to
/// avoid, on request — and the write held during the failover is refused, not lost silently.
#[test]
fn a_forced_failover_loses_what_the_replica_lacked() {
    let (master, replica) = (Node::latchkey(), Node::latchkey());
    replicate(&master, &replica);
    ok(master.addr(), &["SET", "sent", "1"]);
    until("the replica to have it", WITHIN, || {
        cmd(replica.addr(), &["GET", "sent"]) == b"$1\r\n1\r\n"
    });
    ok(master.addr(), &["LATCHKEY.FAILOVER", "PAUSE"]);
    ok(master.addr(), &["SET", "unsent", "1"]);
    let port = replica.addr().port().to_string();
    ok(
        master.addr(),
        &[
            "FAILOVER",
            "TO",
            "127.0.0.1",
            &port,
            "TIMEOUT",
            "500",
            "FORCE",
        ],
    );
    let held = set_in_background(master.addr(), "during");
    wait_handed_over(master.addr(), replica.addr());
    assert_eq!(
        held.recv_timeout(WITHIN).unwrap(),
        b"-READONLY You can't write against a read only replica.\r\n"
    );
    for node in [master.addr(), replica.addr()] {
        assert_eq!(cmd(node, &["GET", "sent"]), b"$1\r\n1\r\n");
        assert_eq!(cmd(node, &["GET", "unsent"]), b"$-1\r\n", "on {node}");
        assert_eq!(cmd(node, &["GET", "during"]), b"$-1\r\n");
    }
}

/// `FAILOVER ABORT` while waiting: writes run again on the master, which stays master.
#[test]
fn abort_while_waiting_releases_the_writes() {
    let (master, replica) = (Node::latchkey(), Node::latchkey());
    replicate(&master, &replica);
    ok(master.addr(), &["LATCHKEY.FAILOVER", "PAUSE"]);
    ok(master.addr(), &["SET", "unsent", "1"]);
    ok(master.addr(), &["FAILOVER"]);
    let held = set_in_background(master.addr(), "during");
    assert!(held.recv_timeout(Duration::from_millis(300)).is_err());
    ok(master.addr(), &["FAILOVER", "ABORT"]);
    assert_eq!(held.recv_timeout(WITHIN).unwrap(), b"+OK\r\n");
    assert_eq!(failover_state(master.addr()), "no-failover");
    assert_eq!(role(master.addr()), "master");
    assert_eq!(
        cmd(master.addr(), &["FAILOVER", "ABORT"]),
        b"-ERR No failover in progress.\r\n"
    );
    ok(master.addr(), &["LATCHKEY.FAILOVER", "RESUME"]);
}
