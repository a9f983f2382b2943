//! Tenants' RedLock (the component's `red-lock`) on a host given five independent servers as
//! quorum nodes ([`Host::with_nodes`]): latchkey servers in this process (in-process backends,
//! and over TCP through redis-rs), and real `redis-server` processes. A lock is granted by all
//! five, refused to a second instance while held, granted by three of five with two down,
//! refused with three down, released everywhere, and lives in the tenant's namespace on every
//! node. A node that never answers costs the tenant's node timeout once per round, however many
//! nodes hang, and each node's command is charged to the tenant's rate limit.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use latchkey_client::Reply;
use latchkey_plugin::{Backend, Host, Instance, Limits, RedLease};
use latchkey_server::{Server, ServerHandle};

const TTL: Duration = Duration::from_secs(10);
const NODE_TIMEOUT: Duration = Duration::from_millis(200);

/// Five quorum nodes: what the host sends to, a view of each for the test (outside any
/// namespace), and a way to stop node `i`.
struct Nodes {
    host_side: Vec<Arc<dyn Backend>>,
    views: Vec<Arc<dyn Backend>>,
    stop: Box<dyn Fn(usize) + Send + Sync>,
    /// What a try-acquire finds with every node down: `Err` when stopped nodes cannot be
    /// reached at all, `Ok(None)` when they answer but refuse.
    all_down_is_error: bool,
}

/// A host over `nodes` (the first node is also the primary backend).
fn host(nodes: &Nodes, limits: Limits) -> Host {
    Host::with_nodes(
        nodes.host_side[0].clone(),
        nodes.host_side.clone(),
        common::config(limits),
    )
    .expect("host")
}

async fn get(view: &Arc<dyn Backend>, key: &str) -> Reply {
    view.command(vec![b"GET".to_vec(), key.as_bytes().to_vec()])
        .await
        .unwrap()
}

async fn try_red(t: &mut Instance, name: &str, ttl: Duration) -> Result<Option<RedLease>, String> {
    t.try_redlock(name, ttl, NODE_TIMEOUT).await.unwrap()
}

/// The whole RedLock session on five nodes.
async fn session(nodes: Nodes) {
    let host = host(&nodes, Limits::default());
    assert_eq!(host.nodes(), 5);
    let plugin = common::lock_client(&host);
    let mut a = host.tenant("alpha").instantiate(&plugin).await.unwrap();
    let mut b = host.tenant("alpha").instantiate(&plugin).await.unwrap();

    // All up: granted by all five, in alpha's namespace on each.
    let lease = try_red(&mut a, "ledger", TTL)
        .await
        .unwrap()
        .expect("5 of 5 up");
    assert_eq!(lease.granted, 5);
    assert!(lease.validity_ms > 0 && lease.validity_ms < TTL.as_millis() as u64);
    assert_eq!(lease.key, b"{ledger}", "the key as the tenant names it");
    for (i, view) in nodes.views.iter().enumerate() {
        let token = Reply::Bulk(lease.token.clone().into_bytes());
        assert_eq!(get(view, "{alpha:ledger}").await, token, "node {i}");
        assert_eq!(get(view, "{ledger}").await, Reply::Nil, "node {i}");
    }
    // Refused to another instance of the tenant while held; another tenant has its own.
    assert!(try_red(&mut b, "ledger", TTL).await.unwrap().is_none());
    let mut other = host.tenant("beta").instantiate(&plugin).await.unwrap();
    let theirs = try_red(&mut other, "ledger", TTL)
        .await
        .unwrap()
        .expect("beta's own");
    assert_eq!(theirs.granted, 5);
    let n = other.unlock_redlock("ledger", theirs, NODE_TIMEOUT).await;
    assert_eq!(n.unwrap().unwrap(), 5);

    // Extended on every node, then released everywhere.
    let longer = a
        .extend_redlock("ledger", lease.clone(), TTL * 2, NODE_TIMEOUT)
        .await
        .unwrap()
        .unwrap()
        .expect("still held on all five");
    assert_eq!((longer.granted, &longer.token), (5, &lease.token));
    assert!(longer.validity_ms > TTL.as_millis() as u64);
    let pttl = nodes.views[4]
        .command(vec![b"PTTL".to_vec(), b"{alpha:ledger}".to_vec()])
        .await
        .unwrap();
    assert!(pttl.as_int().unwrap() > TTL.as_millis() as i64, "{pttl:?}");
    let n = a
        .unlock_redlock("ledger", longer.clone(), NODE_TIMEOUT)
        .await;
    assert_eq!(n.unwrap().unwrap(), 5);
    for view in &nodes.views {
        assert_eq!(get(view, "{alpha:ledger}").await, Reply::Nil);
    }
    // A released lease extends nowhere, and the lock is free for the other instance.
    let gone = a.extend_redlock("ledger", longer, TTL, NODE_TIMEOUT).await;
    assert!(gone.unwrap().unwrap().is_none());
    let l = try_red(&mut b, "ledger", TTL)
        .await
        .unwrap()
        .expect("free again");
    assert_eq!(
        b.unlock_redlock("ledger", l, NODE_TIMEOUT)
            .await
            .unwrap()
            .unwrap(),
        5
    );

    // Two of five down: three is a majority.
    (nodes.stop)(0);
    (nodes.stop)(1);
    let l = try_red(&mut a, "two-down", TTL)
        .await
        .unwrap()
        .expect("3 of 5");
    assert_eq!(l.granted, 3);
    assert!(try_red(&mut b, "two-down", TTL).await.unwrap().is_none());
    assert_eq!(
        a.unlock_redlock("two-down", l, NODE_TIMEOUT)
            .await
            .unwrap()
            .unwrap(),
        3
    );

    // Three of five down: two is no majority, and what the two granted was released again.
    (nodes.stop)(2);
    assert!(try_red(&mut a, "three-down", TTL).await.unwrap().is_none());
    for view in &nodes.views[3..] {
        assert_eq!(get(view, "{alpha:three-down}").await, Reply::Nil);
    }

    // All down.
    (nodes.stop)(3);
    (nodes.stop)(4);
    let r = try_red(&mut a, "all-down", TTL).await;
    if nodes.all_down_is_error {
        assert!(r.is_err(), "no node answered, yet {r:?}");
    } else {
        assert!(matches!(r, Ok(None)), "{r:?}");
    }
    assert!(a.trapped().is_none() && b.trapped().is_none());
}

/// Five latchkey servers in this process, as in-process backends (no socket). "Down" here
/// is a node that refuses every write (a read-only replica): it answers, and grants nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_on_five_in_process_latchkey_servers() {
    let mut servers = Vec::new();
    for _ in 0..5 {
        servers.push(Server::builder().no_listener().start().await.unwrap());
    }
    let backends: Vec<Arc<dyn Backend>> = servers.iter().map(<dyn Backend>::local).collect();
    let shared: Vec<_> = servers
        .iter()
        .map(latchkey_server::internals::node)
        .collect();
    session(Nodes {
        host_side: backends.clone(),
        views: backends,
        stop: Box::new(move |i| shared[i].set_replica(true)),
        all_down_is_error: false,
    })
    .await;
}

/// Five latchkey servers in this process over TCP, through the redis-rs backend: stopped
/// nodes are really shut down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_on_five_latchkey_servers_over_tcp() {
    let mut servers: Vec<ServerHandle> = Vec::new();
    let mut backends = Vec::new();
    for _ in 0..5 {
        let s = Server::builder().start().await.unwrap();
        backends.push(<dyn Backend>::redis(&s.url()).await.unwrap());
        servers.push(s);
    }
    // The views run in-process, so they still read a stopped node's keys.
    let views = servers.iter().map(<dyn Backend>::local).collect();
    let shared: Vec<_> = servers
        .iter()
        .map(latchkey_server::internals::node)
        .collect();
    session(Nodes {
        host_side: backends,
        views,
        stop: Box::new(move |i| shared[i].request_shutdown()),
        all_down_is_error: true,
    })
    .await;
}

/// Five `redis-server` processes, with a connection to each for the host and one for the
/// test's own view.
async fn five_redis_servers() -> (
    Vec<common::RedisProcess>,
    Vec<Arc<dyn Backend>>,
    Vec<Arc<dyn Backend>>,
) {
    let procs: Vec<_> = (0..5).map(|_| common::RedisProcess::spawn()).collect();
    let mut backends = Vec::new();
    let mut views = Vec::new();
    for p in &procs {
        backends.push(<dyn Backend>::redis(&p.url()).await.unwrap());
        views.push(<dyn Backend>::redis(&p.url()).await.unwrap());
    }
    (procs, backends, views)
}

/// Five real `redis-server` processes; stopped nodes are killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_on_five_redis_servers() {
    let (procs, backends, views) = five_redis_servers().await;
    let procs = std::sync::Mutex::new(procs.into_iter().map(Some).collect::<Vec<_>>());
    session(Nodes {
        host_side: backends,
        views,
        stop: Box::new(move |i| drop(procs.lock().unwrap()[i].take())),
        all_down_is_error: true,
    })
    .await;
}

/// Nodes that accept and never reply (the redis-rs backend behind a proxy that goes silent):
/// one hung node of five is waited for up to its node timeout and left out, and the lock is
/// still granted by the other four; with all five hung, the round fails with the host's own
/// timeout, which the tenant hears. (How long a round takes beyond the timeout it must wait
/// is for benchmarks, not assertions.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_never_answers_is_left_out_after_its_timeout() {
    let timeout = Duration::from_millis(300);
    let mut servers = Vec::new();
    let mut proxies = Vec::new();
    let mut backends = Vec::new();
    for _ in 0..5 {
        let s = Server::builder().start().await.unwrap();
        let p = common::SilentProxy::start(s.addr()).await;
        backends.push(<dyn Backend>::redis(&p.url()).await.unwrap());
        servers.push(s);
        proxies.push(p);
    }
    let host = Host::with_nodes(
        backends[0].clone(),
        backends,
        common::config(Limits::default()),
    )
    .unwrap();
    let plugin = common::lock_client(&host);
    let mut t = host.tenant("hang").instantiate(&plugin).await.unwrap();

    proxies[4].silence();
    let start = Instant::now();
    let l = t
        .try_redlock("slow", TTL, timeout)
        .await
        .unwrap()
        .unwrap()
        .expect("four of five answer");
    let took = start.elapsed();
    assert_eq!(l.granted, 4);
    assert!(took >= timeout, "the hung node was waited for: {took:?}");
    assert!(l.validity_ms <= (TTL - timeout).as_millis() as u64);
    let mut view = servers[4].client();
    assert_eq!(
        view.cmd(["EXISTS", "{hang:slow}"]).await,
        latchkey_server::Frame::Integer(0),
        "nothing reached the hung node"
    );

    for p in &proxies {
        p.silence();
    }
    // A failed round is two rounds (the attempt, then the release of whatever may have been
    // granted late): at least two timeouts.
    let start = Instant::now();
    let r = t.try_redlock("all-hung", TTL, timeout).await.unwrap();
    let took = start.elapsed();
    let e = r.expect_err("no node answered");
    assert!(e.contains("no answer within 300 ms"), "{e}");
    assert!(took >= timeout * 2, "{took:?}");
    assert!(t.trapped().is_none());
}

/// Every node's command costs the tenant one call of its rate limit: with a burst of five
/// calls at 10 per second, one round over five nodes spends the burst and the next round
/// waits for five new tokens, so two rounds take at least half a second. Charged once per
/// round, they would not wait at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_node_is_charged_to_the_rate_limit() {
    let mut servers = Vec::new();
    for _ in 0..5 {
        servers.push(Server::builder().no_listener().start().await.unwrap());
    }
    let backends: Vec<Arc<dyn Backend>> = servers.iter().map(<dyn Backend>::local).collect();
    let nodes = Nodes {
        host_side: backends.clone(),
        views: backends,
        stop: Box::new(|_| {}),
        all_down_is_error: false,
    };
    let limits = Limits {
        calls_per_sec: 10.0,
        burst: 5.0,
        ..Limits::default()
    };
    let host = host(&nodes, limits);
    let plugin = common::lock_client(&host);
    let mut t = host.tenant("metered").instantiate(&plugin).await.unwrap();
    let start = Instant::now();
    let first = try_red(&mut t, "one", TTL).await.unwrap().expect("free");
    let second = try_red(&mut t, "two", TTL).await.unwrap().expect("free");
    let took = start.elapsed();
    assert_eq!((first.granted, second.granted), (5, 5));
    assert!(
        took >= Duration::from_millis(450),
        "five nodes' calls were not charged: {took:?}"
    );
}

/// `watched-red-lock` calls, one per `run`, so that the test can act between them.
mod watched {
    use latchkey_plugin::{Instance, Trapped};
    use wasmtime::component::ResourceAny;

    pub(super) async fn new(inst: &mut Instance, name: &str, node_timeout_ms: u64) -> ResourceAny {
        let name = name.to_string();
        inst.run(move |(store, _, l)| {
            Box::pin(async move {
                let w = l.unwrap().latchkey_locks_watchdog().watched_red_lock();
                w.call_constructor(&mut *store, &name, node_timeout_ms)
                    .await
            })
        })
        .await
        .unwrap()
    }

    pub(super) async fn acquire(
        inst: &mut Instance,
        lock: ResourceAny,
        ttl_ms: u64,
    ) -> Option<u32> {
        inst.run(move |(store, _, l)| {
            Box::pin(async move {
                let w = l.unwrap().latchkey_locks_watchdog().watched_red_lock();
                w.call_acquire(&mut *store, lock, ttl_ms).await
            })
        })
        .await
        .unwrap()
        .unwrap()
    }

    pub(super) async fn held(inst: &mut Instance, lock: ResourceAny) -> bool {
        inst.run(move |(store, _, l)| {
            Box::pin(async move {
                let w = l.unwrap().latchkey_locks_watchdog().watched_red_lock();
                w.call_held(&mut *store, lock).await
            })
        })
        .await
        .unwrap()
    }

    pub(super) async fn release(
        inst: &mut Instance,
        lock: ResourceAny,
    ) -> Result<Result<u32, String>, Trapped> {
        inst.run(move |(store, _, l)| {
            Box::pin(async move {
                let w = l.unwrap().latchkey_locks_watchdog().watched_red_lock();
                w.call_release(&mut *store, lock).await
            })
        })
        .await
    }
}

/// Whether node `view` holds `key` with a TTL left.
async fn has_ttl(view: &Arc<dyn Backend>, key: &str) -> bool {
    let pttl = view
        .command(vec![b"PTTL".to_vec(), key.as_bytes().to_vec()])
        .await
        .unwrap();
    pttl.as_int().is_some_and(|ms| ms > 0)
}

async fn del(view: &Arc<dyn Backend>, key: &str) {
    view.command(vec![b"DEL".to_vec(), key.as_bytes().to_vec()])
        .await
        .unwrap();
}

/// A RedLock whose lease the host keeps (`watched-red-lock`, `keep-quorum-lease`) on five
/// nodes: it outlives its TTL on every node while the tenant does nothing, survives the loss of
/// two nodes' keys (three still make a majority), and is lost, with the tenant interrupted,
/// once a third node lost it. A second lock released by the tenant is gone from every node,
/// and one left held when the instance closes is released by the host.
async fn watched_session(nodes: Nodes) {
    let host = host(&nodes, Limits::default());
    let plugin = common::lock_client(&host);
    let tenant = host.tenant("alpha");
    let mut a = tenant.instantiate(&plugin).await.unwrap();
    let mut b = tenant.instantiate(&plugin).await.unwrap();

    // Released by the tenant: gone everywhere, nothing kept.
    let lock = watched::new(&mut a, "short", 200).await;
    assert_eq!(watched::acquire(&mut a, lock, 300).await, Some(5));
    assert_eq!(watched::acquire(&mut a, lock, 300).await, None, "held");
    assert_eq!(a.kept_leases(), 1);
    assert_eq!(watched::release(&mut a, lock).await.unwrap().unwrap(), 5);
    assert_eq!(a.kept_leases(), 0);
    assert!(!watched::held(&mut a, lock).await);
    for view in &nodes.views {
        assert_eq!(get(view, "{alpha:short}").await, Reply::Nil);
    }

    // Kept: three TTLs pass while the tenant does nothing, and every node still holds it.
    let lock = watched::new(&mut a, "job", 200).await;
    assert_eq!(watched::acquire(&mut a, lock, 300).await, Some(5));
    tokio::time::sleep(Duration::from_millis(900)).await;
    for (i, view) in nodes.views.iter().enumerate() {
        assert!(has_ttl(view, "{alpha:job}").await, "node {i}");
    }
    let other = watched::new(&mut b, "job", 200).await;
    assert_eq!(watched::acquire(&mut b, other, 300).await, None);
    // Two nodes lose the key (restarted without persistence, say): three still renew it.
    del(&nodes.views[0], "{alpha:job}").await;
    del(&nodes.views[1], "{alpha:job}").await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(watched::held(&mut a, lock).await, "3 of 5 is a majority");
    assert!(a.trapped().is_none());
    // A third: no majority can renew it any more. The keeper notices at its next round.
    del(&nodes.views[2], "{alpha:job}").await;
    let mut lost = false;
    for _ in 0..100 {
        if !watched::held(&mut a, lock).await {
            lost = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(lost, "the keeper never noticed");
    let err = watched::release(&mut a, lock).await.unwrap_err();
    assert!(
        err.0.contains("lost (3 of 5 nodes no longer hold it"),
        "{err}"
    );

    // Left held when the instance closes: the host releases it on every node.
    let lock = watched::new(&mut b, "closed", 200).await;
    assert_eq!(watched::acquire(&mut b, lock, 60_000).await, Some(5));
    b.close().await;
    for view in &nodes.views {
        assert_eq!(get(view, "{alpha:closed}").await, Reply::Nil);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keeper_keeps_a_redlock_on_five_in_process_latchkey_servers() {
    let mut servers = Vec::new();
    for _ in 0..5 {
        servers.push(Server::builder().no_listener().start().await.unwrap());
    }
    let backends: Vec<Arc<dyn Backend>> = servers.iter().map(<dyn Backend>::local).collect();
    watched_session(Nodes {
        host_side: backends.clone(),
        views: backends,
        stop: Box::new(|_| {}),
        all_down_is_error: false,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keeper_keeps_a_redlock_on_five_redis_servers() {
    let (_procs, backends, views) = five_redis_servers().await;
    watched_session(Nodes {
        host_side: backends,
        views,
        stop: Box::new(|_| {}),
        all_down_is_error: true,
    })
    .await;
}
