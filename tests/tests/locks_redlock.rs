//! RedLock over five independent servers of each kind: it acquires (and extends) with two of
//! five down, fails with three down, and a server that accepts the connection but never
//! answers (or stops halfway through a reply) costs it one per-server timeout and nothing of its
//! promise: the lock it returns stays held on a majority for the whole validity it states.

use std::time::Duration;

use latchkey_client::locks::RedLock;
use latchkey_client::native::{LocalTransport, RedisTransport};
use latchkey_client::Transport;
use latchkey_server::Server;
use latchkey_tests::{FaultProxy, RawConn, RedisProcess};

const TTL: Duration = Duration::from_secs(10);

/// RedLock's allowance for clock drift on a lock of `ttl`: the validity it states is at most
/// `ttl` minus this.
fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

async fn check_majority<T: Transport + Clone>(servers: Vec<T>, stop: impl Fn(usize)) {
    let redlock = RedLock::new(servers.clone(), Duration::from_millis(200));
    assert_eq!((redlock.nodes(), redlock.quorum()), (5, 3));
    let l = redlock
        .acquire("all-up", TTL)
        .await
        .unwrap()
        .expect("5 of 5 up");
    assert_eq!(l.granted, 5);
    assert!(l.validity > Duration::ZERO && l.validity < TTL);
    // The validity leaves out the clock-drift allowance (1 % of the TTL plus 2 ms) whatever
    // the round took.
    assert!(l.validity <= TTL - drift(TTL), "{l:?}");
    // A second acquisition of the same resource fails while the first is held.
    assert!(redlock.acquire("all-up", TTL).await.unwrap().is_none());
    // Extended on all five (validity counted afresh), then released on all five.
    let longer = redlock.extend(&l, TTL * 2).await.expect("held on all five");
    assert_eq!((longer.granted, &longer.token), (5, &l.token));
    assert!(longer.validity > TTL, "{longer:?}");
    assert!(longer.validity <= TTL * 2 - drift(TTL * 2), "{longer:?}");
    assert_eq!(redlock.release(&longer).await, 5);
    assert!(redlock.extend(&longer, TTL).await.is_none(), "released");

    stop(0);
    stop(1);
    let l = redlock
        .acquire("two-down", TTL)
        .await
        .unwrap()
        .expect("3 of 5 is a majority");
    assert_eq!(l.granted, 3);
    let longer = redlock.extend(&l, TTL).await.expect("3 of 5 is a majority");
    assert_eq!(longer.granted, 3);
    assert_eq!(redlock.release(&longer).await, 3);

    stop(2);
    assert!(
        redlock.acquire("three-down", TTL).await.unwrap().is_none(),
        "2 of 5 is no majority"
    );
    // Failure released what the two live servers had granted.
    let again = RedLock::new(servers[3..].to_vec(), Duration::from_millis(200));
    assert_eq!((again.nodes(), again.quorum()), (2, 2));
    let l = again
        .acquire("three-down", TTL)
        .await
        .unwrap()
        .expect("released after the failure");
    assert_eq!(l.granted, 2);

    // No servers at all: no lease, nobody answered, and the failure says why.
    let none = RedLock::new(Vec::<T>::new(), Duration::from_millis(200));
    assert_eq!((none.nodes(), none.quorum()), (0, 1));
    let attempt = none.attempt("nowhere", TTL).await;
    assert_eq!((attempt.lease, attempt.answered), (None, 0));
    assert!(attempt.first_error.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_in_process() {
    let mut handles = Vec::new();
    for _ in 0..5 {
        handles.push(Server::builder().no_listener().start().await.unwrap());
    }
    let transports: Vec<LocalTransport> = handles.iter().map(LocalTransport::new).collect();
    // "Down" in-process: the server refuses every write (a read-only replica), so it grants
    // nothing, like one that is unreachable.
    let shared: Vec<_> = handles
        .iter()
        .map(latchkey_server::internals::node)
        .collect();
    check_majority(transports, |i| {
        shared[i].set_replica(true);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_latchkey_tcp() {
    let mut handles = Vec::new();
    let mut transports = Vec::new();
    for _ in 0..5 {
        let h = Server::builder().start().await.unwrap();
        transports.push(RedisTransport::connect(&h.url()).await.unwrap());
        handles.push(h);
    }
    let shared: Vec<_> = handles
        .iter()
        .map(latchkey_server::internals::node)
        .collect();
    check_majority(transports, |i| shared[i].request_shutdown()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_real_redis() {
    let procs: Vec<RedisProcess> = (0..5).map(|_| RedisProcess::spawn(&[])).collect();
    let mut transports = Vec::new();
    for p in &procs {
        transports.push(RedisTransport::connect(&p.url()).await.unwrap());
    }
    let procs = std::sync::Mutex::new(procs.into_iter().map(Some).collect::<Vec<_>>());
    check_majority(transports, |i| {
        procs.lock().unwrap()[i].take();
    })
    .await;
}

/// Milliseconds since the Unix epoch now, the clock `PEXPIRETIME` answers in.
fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64
}

/// Five servers, the last behind a fault proxy that `stick` makes stop answering (the
/// connection stays open, commands still reach the server, replies never come back); RedLock
/// returns with the four others, and its timing promise holds: when `acquire` returned at time
/// `t` with validity `v`, the key expires no earlier than `t + v` on every healthy node that
/// granted it (read with `PEXPIRETIME`, an absolute time, so nothing here depends on how fast
/// the machine is).
async fn stuck_node_keeps_the_validity_promise(
    addrs: Vec<std::net::SocketAddr>,
    stick: impl Fn(&FaultProxy),
) {
    assert_eq!(addrs.len(), 5);
    let proxy = FaultProxy::start(addrs[4]).await;
    let mut transports = Vec::new();
    for a in &addrs[..4] {
        transports.push(
            RedisTransport::connect(&format!("redis://{a}"))
                .await
                .unwrap(),
        );
    }
    // Connected (handshake done) through the proxy before it gets stuck.
    transports.push(
        RedisTransport::connect(&format!("redis://{}", proxy.addr()))
            .await
            .unwrap(),
    );
    stick(&proxy);
    let redlock = RedLock::new(transports, Duration::from_millis(100));
    let l = redlock
        .acquire("stuck", TTL)
        .await
        .unwrap()
        .expect("a majority of live servers");
    let returned_at = unix_ms();
    assert_eq!(l.granted, 4, "the stuck server cannot have been counted");
    // The stuck node did get the command: its reply (or the rest of it) is held in the proxy.
    // (A hang guard: the node answers when it gets to it, however loaded the machine is.)
    let guard = std::time::Instant::now() + Duration::from_secs(30);
    while proxy.held_bytes() == 0 {
        assert!(
            std::time::Instant::now() < guard,
            "nothing of the stuck node's reply is held"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let promised_until = returned_at + l.validity.as_millis() as i64;
    for (i, a) in addrs[..4].iter().enumerate() {
        let mut c = RawConn::connect(*a).unwrap();
        assert_eq!(
            c.cmd(&["GET", "{stuck}"]),
            format!("${}\r\n{}\r\n", l.token.len(), l.token).into_bytes(),
            "node {i} holds the lock's token"
        );
        let reply = String::from_utf8(c.cmd(&["PEXPIRETIME", "{stuck}"])).unwrap();
        let expires_at: i64 = reply
            .trim()
            .strip_prefix(':')
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("PEXPIRETIME: {reply:?}"));
        assert!(
            expires_at >= promised_until,
            "node {i}: the key expires at {expires_at}, before the promised {promised_until} \
             (returned at {returned_at}, validity {:?})",
            l.validity
        );
    }
    // The stuck node did receive the SET (only its reply is held): the lock is released on
    // the four that answer, and the stuck one keeps its copy until its TTL.
    assert_eq!(redlock.release(&l).await, 4);
    proxy.resume();
}

/// Starts five latchkey servers over TCP; returns them (to keep) and their addresses.
async fn five_latchkeys() -> (
    Vec<latchkey_server::ServerHandle>,
    Vec<std::net::SocketAddr>,
) {
    let mut keep = Vec::new();
    for _ in 0..5 {
        keep.push(Server::builder().start().await.unwrap());
    }
    let addrs = keep.iter().map(|h| h.addr()).collect();
    (keep, addrs)
}

/// A node that accepts the connection and never replies, on latchkey.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_node_does_not_shorten_the_validity_latchkey() {
    let (_keep, addrs) = five_latchkeys().await;
    stuck_node_keeps_the_validity_promise(addrs, FaultProxy::pause).await;
}

/// A node that accepts the connection and never replies, on real Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_node_does_not_shorten_the_validity_real_redis() {
    let procs: Vec<RedisProcess> = (0..5).map(|_| RedisProcess::spawn(&[])).collect();
    let addrs = procs.iter().map(RedisProcess::addr).collect();
    stuck_node_keeps_the_validity_promise(addrs, FaultProxy::pause).await;
}

/// A node that stops halfway through its reply (`+OK\r\n` cut after `+O`), on latchkey.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_paused_mid_reply_does_not_shorten_the_validity_latchkey() {
    let (_keep, addrs) = five_latchkeys().await;
    stuck_node_keeps_the_validity_promise(addrs, |p| p.pause_after(2)).await;
}

/// A node that stops halfway through its reply, on real Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_paused_mid_reply_does_not_shorten_the_validity_real_redis() {
    let procs: Vec<RedisProcess> = (0..5).map(|_| RedisProcess::spawn(&[])).collect();
    let addrs = procs.iter().map(RedisProcess::addr).collect();
    stuck_node_keeps_the_validity_promise(addrs, |p| p.pause_after(2)).await;
}
