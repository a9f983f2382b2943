//! The stage a lesson runs on: latchkey servers in this process sharing one virtual clock (a
//! master and its replicas, or independent nodes), a storage node holding the shared
//! resource, and clients that are instances of the real lock-client component in the real
//! host. Every method that acts or measures records an [`Event`].

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use latchkey_client::Reply;
use latchkey_server::{Clock, Server, ServerHandle};

use super::event::{Check, Event, Holder, Lane, What};
use super::Env;
use crate::backend::{Backend, BoxFuture, Subscription};
use crate::bindings::latchkey::locks::redis::LostCause;
use crate::exports::latchkey::locks::locks::ReplicatedAcquired;
use crate::fault_proxy::FaultProxy;
use crate::{Host, HostConfig, Instance, Lease, Namespace, Plugin, Released};

/// The lesson clock starts here (a fixed Unix time, so every run reads the same times).
const T0_MS: u64 = 1_767_225_600_000;

/// The tenant every client belongs to: its instances contend for the same lock.
const TENANT: &str = "shop";

/// The lock's name as the component sees it (its key is `{stock}`).
pub(crate) const LOCK: &str = "stock";

/// How the servers are arranged.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Topology {
    /// `n1` a master, then this many replicas of it.
    Replicated(usize),
    /// This many independent masters (RedLock's nodes); clients' simple locks use `n1`.
    Independent(usize),
}

/// Where the resource lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// On the storage node, which never fails.
    Storage,
    /// Beside the lock, on whichever node is master, under the lock's hash tag.
    BesideLock,
}

/// How a stage is built.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Setup {
    pub topology: Topology,
    /// Every node logs each write to an AOF with this `appendfsync` policy (`None`: no AOF).
    pub aof: Option<&'static str>,
    pub place: Place,
    /// In process, replicas follow their master through a fault proxy too (as `--against`
    /// always does), so that their link can be cut both ways.
    pub proxied: bool,
}

/// Routes a tenant's commands to one node of the stage: the current master (`fixed: None`),
/// or a given node (RedLock). A node marked unreachable fails every command as a broken
/// connection would.
struct Routed {
    backends: Vec<Arc<dyn Backend>>,
    current: Arc<AtomicUsize>,
    down: Arc<[AtomicBool]>,
    fixed: Option<usize>,
}

impl Routed {
    fn target(&self) -> Result<&Arc<dyn Backend>, String> {
        let i = self
            .fixed
            .unwrap_or_else(|| self.current.load(Ordering::Acquire));
        if self.down[i].load(Ordering::Acquire) {
            return Err(format!("n{} is unreachable", i + 1));
        }
        Ok(&self.backends[i])
    }
}

impl Backend for Routed {
    fn command(&self, args: Vec<Vec<u8>>) -> BoxFuture<'_, Result<Reply, String>> {
        match self.target() {
            Ok(b) => b.command(args),
            Err(e) => Box::pin(async move { Err(e) }),
        }
    }

    fn subscribe(&self, channel: Vec<u8>) -> BoxFuture<'_, Result<Box<dyn Subscription>, String>> {
        match self.target() {
            Ok(b) => b.subscribe(channel),
            Err(e) => Box::pin(async move { Err(e) }),
        }
    }

    fn command_alone(&self, args: Vec<Vec<u8>>) -> BoxFuture<'_, Result<Reply, String>> {
        match self.target() {
            Ok(b) => b.command_alone(args),
            Err(e) => Box::pin(async move { Err(e) }),
        }
    }
}

/// One client: an instance of the lock-client component in its own host (its own process,
/// as it were), and what it holds.
pub(crate) struct Client {
    pub name: char,
    inst: Instance,
    lease: Option<Lease>,
    fence: Option<i64>,
    read: Option<i64>,
    /// The clock its host's lease keeper renews by: the lesson's time, except while the
    /// client's process is stopped ([`World::stop`]), when it stands still.
    clock: Clock,
    /// Since when (lesson time) the client's process is stopped, if it is.
    stopped: Option<u64>,
    /// Its `watchdog.watched-lock`, once it took one, and the token the lock key held
    /// right after.
    watched: Option<(wasmtime::component::ResourceAny, Option<String>)>,
}

/// A node of the stage: a latchkey server in this process, or a server the user started
/// (`--against`), whose replication stream, when it is a replica, runs through a fault proxy.
enum Node {
    Local(ServerHandle),
    Remote {
        addr: SocketAddr,
        proxy: Option<FaultProxy>,
    },
}

/// The lesson's time: a virtual clock every in-process server shares (moved by hand, so a
/// run is the same every time), or real time for `--against`.
enum LessonClock {
    Virtual(Clock),
    Real(Instant),
}

/// The stage, and the events recorded on it so far.
pub(crate) struct World {
    clock: LessonClock,
    pub events: Vec<Event>,
    nodes: Vec<Node>,
    /// `--against`: configuration to put back at the end (`node, name, value`).
    restore: Vec<(usize, String, String)>,
    admin: Vec<Arc<dyn Backend>>,
    current: Arc<AtomicUsize>,
    down: Arc<[AtomicBool]>,
    storage: ServerHandle,
    storage_admin: Arc<dyn Backend>,
    place: Place,
    tokens: Vec<(String, char)>,
    pub clients: Vec<Client>,
    /// The AOF directory, removed at the end.
    dir: Option<PathBuf>,
    ns: Namespace,
    /// In process with [`Setup::proxied`]: the fault proxy each replica follows through.
    links: Vec<Option<FaultProxy>>,
}

/// A command's arguments from string slices.
fn args(a: &[&str]) -> Vec<Vec<u8>> {
    a.iter().map(|s| s.as_bytes().to_vec()).collect()
}

fn int(r: &Reply) -> Option<i64> {
    match r {
        Reply::Int(i) => Some(*i),
        Reply::Bulk(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

fn text(r: &Reply) -> Option<String> {
    match r {
        Reply::Bulk(b) => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    }
}

/// A field of an `INFO` reply.
fn info_field(r: &Reply, field: &str) -> Option<u64> {
    let t = text(r)?;
    t.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
}

/// A field of an `INFO` reply, as text.
fn info_text(r: &Reply, field: &str) -> Option<String> {
    let t = text(r)?;
    t.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .map(|v| v.trim().to_string())
}

/// An error reply as an error.
fn expect_ok(r: Reply) -> Result<Reply, String> {
    match r {
        Reply::Error(e) => Err(e),
        r => Ok(r),
    }
}

/// The cache keys [`World::fill`] may write (and `--against` deletes first).
pub(crate) const CACHE_KEYS: u64 = 200;

impl World {
    /// Starts the servers, the storage and one client per name in `clients`.
    pub(crate) async fn start(setup: Setup, clients: &[char], env: &Env) -> Result<World, String> {
        let e = |e: std::io::Error| e.to_string();
        let count = match setup.topology {
            Topology::Replicated(r) => 1 + r,
            Topology::Independent(n) => n,
        };
        if !env.against.is_empty() {
            return Self::start_remote(setup, count, clients, env).await;
        }
        let clock = Clock::virtual_at_ms(T0_MS);
        let dir = setup.aof.map(|_| {
            static RUN: AtomicUsize = AtomicUsize::new(0);
            std::env::temp_dir().join(format!(
                "latchkey-lesson-{}-{}",
                std::process::id(),
                RUN.fetch_add(1, Ordering::Relaxed)
            ))
        });
        let mut nodes = Vec::new();
        for i in 0..count {
            let mut b = Server::builder().clock(clock.clone());
            if let (Some(d), Some(fsync)) = (&dir, setup.aof) {
                let d = d.join(format!("n{}", i + 1));
                std::fs::create_dir_all(&d).map_err(e)?;
                b = b
                    .config("dir", d.to_string_lossy().into_owned())
                    .config("appendonly", "yes")
                    .config("appendfsync", fsync);
            }
            nodes.push(b.start().await.map_err(e)?);
        }
        let storage = Server::builder()
            .clock(clock.clone())
            .no_listener()
            .start()
            .await
            .map_err(e)?;
        let admin: Vec<Arc<dyn Backend>> = nodes.iter().map(<dyn Backend>::local).collect();
        let nodes = nodes.into_iter().map(Node::Local).collect();
        Self::assemble(
            setup,
            count,
            clients,
            env,
            LessonClock::Virtual(clock),
            nodes,
            admin,
            storage,
            dir,
        )
        .await
    }

    /// `--against`: the first `count` servers given; every one is made a master and the
    /// lesson's keys are deleted, then the replicas follow the first through fault proxies.
    async fn start_remote(
        setup: Setup,
        count: usize,
        clients: &[char],
        env: &Env,
    ) -> Result<World, String> {
        if env.against.len() < count {
            return Err(format!(
                "this act needs {count} server(s); --against gave {}",
                env.against.len()
            ));
        }
        if setup.aof.is_some() {
            return Err(
                "this act restarts a node, which --against does not do to your servers".into(),
            );
        }
        let mut nodes = Vec::new();
        let mut admin = Vec::new();
        for url in &env.against[..count] {
            let hostport = url.strip_prefix("redis://").unwrap_or(url);
            let addr = hostport
                .to_socket_addrs()
                .map_err(|e| format!("{url}: {e}"))?
                .next()
                .ok_or_else(|| format!("{url}: no address"))?;
            admin.push(<dyn Backend>::redis(url).await?);
            nodes.push(Node::Remote { addr, proxy: None });
        }
        let storage = Server::builder()
            .no_listener()
            .start()
            .await
            .map_err(|e| e.to_string())?;
        Self::assemble(
            setup,
            count,
            clients,
            env,
            LessonClock::Real(Instant::now()),
            nodes,
            admin,
            storage,
            None,
        )
        .await
    }

    /// Builds the host, its clients and the stage on the nodes, and links the replicas.
    #[allow(clippy::too_many_arguments)]
    async fn assemble(
        setup: Setup,
        count: usize,
        clients: &[char],
        env: &Env,
        clock: LessonClock,
        nodes: Vec<Node>,
        admin: Vec<Arc<dyn Backend>>,
        storage: ServerHandle,
        dir: Option<PathBuf>,
    ) -> Result<World, String> {
        let down: Arc<[AtomicBool]> = (0..count).map(|_| AtomicBool::new(false)).collect();
        let current = Arc::new(AtomicUsize::new(0));
        let routed = |fixed| -> Arc<dyn Backend> {
            Arc::new(Routed {
                backends: admin.clone(),
                current: current.clone(),
                down: down.clone(),
                fixed,
            })
        };
        let quorum = match setup.topology {
            Topology::Independent(n) => (0..n).map(|i| routed(Some(i))).collect(),
            Topology::Replicated(_) => Vec::new(),
        };
        // One host per client, as if each ran in its own process: each has its own lease
        // keeper, on its own clock, which stops when the client's process does.
        let mut cs = Vec::new();
        for &name in clients {
            let clock = Clock::virtual_at_ms(T0_MS);
            let host = Host::with_nodes(
                routed(None),
                quorum.clone(),
                HostConfig {
                    pool_instances: 0,
                    cache_dir: env.cache.clone(),
                    keeper_clock: Some(clock.clone()),
                    ..HostConfig::default()
                },
            )
            .map_err(|e| format!("{e:#}"))?;
            let plugin: Plugin = host.load(&env.component).map_err(|e| format!("{e:#}"))?;
            let inst = host
                .tenant(TENANT)
                .instantiate(&plugin)
                .await
                .map_err(|e| format!("{e:#}"))?;
            cs.push(Client {
                name,
                inst,
                lease: None,
                fence: None,
                read: None,
                clock,
                stopped: None,
                watched: None,
            });
        }
        let storage_admin = <dyn Backend>::local(&storage);
        let mut w = World {
            clock,
            events: Vec::new(),
            nodes,
            restore: Vec::new(),
            admin,
            current,
            down,
            storage,
            storage_admin,
            place: setup.place,
            tokens: Vec::new(),
            clients: cs,
            dir,
            ns: Namespace::new(TENANT)?,
            links: (0..count).map(|_| None).collect(),
        };
        if matches!(w.nodes[0], Node::Remote { .. }) {
            w.reset_remote().await?;
        }
        for i in 0..count {
            let replica_of = match setup.topology {
                Topology::Replicated(_) if i > 0 => Some(0),
                _ => None,
            };
            if replica_of.is_some() {
                w.follow(i, setup.proxied).await?;
            }
            // The node answers before it is said to be up.
            w.admin(i, &["PING"]).await?;
            w.record(What::NodeStarted {
                node: i,
                replica_of,
                aof: setup.aof.map(str::to_string),
            });
        }
        for i in 1..count {
            if matches!(setup.topology, Topology::Replicated(_)) {
                w.link_up(i).await?;
            }
        }
        if count > 1
            && matches!(setup.topology, Topology::Replicated(_))
            && matches!(w.nodes[0], Node::Remote { .. })
        {
            w.acks_flow(count - 1).await?;
        }
        Ok(w)
    }

    /// Waits (real time, bounded) until a write on the master is acknowledged by all its
    /// `replicas`: after a diskless sync a redis-server master sometimes counts a replica's
    /// acknowledgements only from its next once-a-second ACK, and a lesson that starts before
    /// that sees `WAIT` answer 0.
    async fn acks_flow(&self, replicas: usize) -> Result<(), String> {
        let probe = format!("{}:in-sync", self.lock_key());
        let want = replicas.to_string();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            self.admin(0, &["SET", &probe, "1"]).await?;
            let acked = self.admin(0, &["WAIT", &want, "100"]).await?;
            if acked == Reply::Int(replicas as i64) {
                break;
            }
            if Instant::now() > deadline {
                return Err("the replicas never acknowledged a write".to_string());
            }
        }
        self.admin(0, &["DEL", &probe]).await?;
        Ok(())
    }

    /// `--against`: every node a master again, and the lesson's keys gone from it.
    async fn reset_remote(&mut self) -> Result<(), String> {
        let lock = self.lock_key();
        let mut keys = vec![
            "DEL".to_string(),
            lock.clone(),
            format!("{lock}:fence"),
            self.resource_key(),
            format!("{}:top-fence", self.resource_key()),
        ];
        keys.extend((0..CACHE_KEYS).map(|i| format!("cache:{i}")));
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        for i in 0..self.nodes.len() {
            expect_ok(self.admin(i, &["REPLICAOF", "NO", "ONE"]).await?)?;
            expect_ok(self.admin(i, &refs).await?)?;
            // A master waits 5 s by default before a diskless full sync, for more replicas
            // to join it; the lesson's replicas are all there at once.
            self.set_config(i, "repl-diskless-sync-delay", "0").await?;
        }
        Ok(())
    }

    /// `CONFIG SET name value` on `node`; on a user's server, the old value is put back at
    /// the end.
    async fn set_config(&mut self, node: usize, name: &str, value: &str) -> Result<(), String> {
        if matches!(self.nodes[node], Node::Remote { .. }) {
            if let Reply::Array(v) = self.admin(node, &["CONFIG", "GET", name]).await? {
                if let Some(old) = v.get(1).and_then(text) {
                    self.restore.push((node, name.to_string(), old));
                }
            }
        }
        expect_ok(self.admin(node, &["CONFIG", "SET", name, value]).await?)?;
        Ok(())
    }

    /// Makes `replica` follow `n1`: in process directly (or through a fault proxy when
    /// `proxied`), a remote server through a fault proxy.
    async fn follow(&mut self, replica: usize, proxied: bool) -> Result<(), String> {
        let master = match &self.nodes[0] {
            Node::Local(s) => s.addr(),
            Node::Remote { addr, .. } => *addr,
        };
        match &mut self.nodes[replica] {
            Node::Local(s) if proxied => {
                let p = FaultProxy::start(master).await;
                s.replicate_from(p.addr());
                self.links[replica] = Some(p);
            }
            Node::Local(s) => s.replicate_from(master),
            Node::Remote { proxy, .. } => {
                let p = FaultProxy::start(master).await;
                let (host, port) = (p.addr().ip().to_string(), p.addr().port().to_string());
                *proxy = Some(p);
                expect_ok(self.admin(replica, &["REPLICAOF", &host, &port]).await?)?;
            }
        }
        Ok(())
    }

    /// Waits (real time, bounded) until `replica`'s link to its master is up.
    async fn link_up(&self, replica: usize) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let up = match &self.nodes[replica] {
                Node::Local(s) => s.replication_link_up(),
                Node::Remote { .. } => {
                    let r = self.admin(replica, &["INFO", "replication"]).await?;
                    text(&r).is_some_and(|t| t.contains("master_link_status:up"))
                }
            };
            if up {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("n{}'s replication link never came up", replica + 1));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Lesson time, ms.
    pub(crate) fn now(&self) -> u64 {
        match &self.clock {
            LessonClock::Virtual(c) => c.now_ms() - T0_MS,
            LessonClock::Real(start) => start.elapsed().as_millis() as u64,
        }
    }

    /// Records `what` at the current lesson time.
    pub(crate) fn record(&mut self, what: What) {
        let at_ms = self.now();
        self.events.push(Event { at_ms, what });
    }

    /// Moves the lesson clock (every server's clock) forward; in real time, sleeps.
    pub(crate) async fn advance(&mut self, ms: u64) {
        match &self.clock {
            LessonClock::Virtual(c) => c.advance(Duration::from_millis(ms)),
            LessonClock::Real(_) => tokio::time::sleep(Duration::from_millis(ms)).await,
        }
        // The clients' own clocks follow, unless their process is stopped.
        let now = T0_MS + self.now();
        for c in &self.clients {
            if c.stopped.is_none() {
                c.clock.set_ms(now);
            }
        }
    }

    /// Time passes for everyone; recorded.
    pub(crate) async fn wait(&mut self, ms: u64) {
        self.advance(ms).await;
        self.settle().await;
        self.record(What::Waited { ms });
    }

    /// Lets every node's active expiry catch up with the clock.
    async fn settle(&self) {
        for n in &self.nodes {
            if let Node::Local(s) = n {
                s.expiry_caught_up().await;
            }
        }
        self.storage.expiry_caught_up().await;
    }

    async fn admin(&self, node: usize, a: &[&str]) -> Result<Reply, String> {
        self.admin[node].command(args(a)).await
    }

    /// The lock's key on the servers (the tenant's namespace applied).
    fn lock_key(&self) -> String {
        String::from_utf8_lossy(&self.ns.key(format!("{{{LOCK}}}").as_bytes())).into_owned()
    }

    fn resource_key(&self) -> String {
        format!("{}:resource", self.lock_key())
    }

    fn resource_lane(&self) -> Lane {
        match self.place {
            Place::Storage => Lane::Storage,
            Place::BesideLock => Lane::Node(self.master()),
        }
    }

    async fn resource_cmd(&self, a: &[&str]) -> Result<Reply, String> {
        match self.place {
            Place::Storage => self.storage_admin.command(args(a)).await,
            Place::BesideLock => self.admin(self.master(), a).await,
        }
    }

    /// The node clients currently send their commands to.
    pub(crate) fn master(&self) -> usize {
        self.current.load(Ordering::Acquire)
    }

    fn client(&mut self, name: char) -> &mut Client {
        self.clients
            .iter_mut()
            .find(|c| c.name == name)
            .expect("a client of this lesson")
    }

    /// Replication offsets of every node (`master_repl_offset`), recorded.
    pub(crate) async fn offsets(&mut self) -> Result<Vec<(usize, u64)>, String> {
        let mut out = Vec::new();
        for i in 0..self.nodes.len() {
            let r = self.admin(i, &["INFO", "replication"]).await?;
            let o = info_field(&r, "master_repl_offset").ok_or("no replication offset")?;
            out.push((i, o));
        }
        self.record(What::Offsets {
            offsets: out.clone(),
        });
        Ok(out)
    }

    async fn offset(&self, node: usize) -> Result<u64, String> {
        let r = self.admin(node, &["INFO", "replication"]).await?;
        info_field(&r, "master_repl_offset").ok_or_else(|| "no replication offset".into())
    }

    /// Waits until `replica` has applied everything its master wrote, then records it.
    pub(crate) async fn caught_up(&mut self, replica: usize) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (m, r) = (self.offset(0).await?, self.offset(replica).await?);
            if m == r {
                self.record(What::CaughtUp { replica, offset: r });
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("n{} never caught up ({r} of {m})", replica + 1));
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Waits (real time, bounded) until `replica` has synchronised with its master's current
    /// history (a master that restarted starts a new one): its link is up, it names the
    /// master's replication ID and stands at the master's offset. Then records it.
    pub(crate) async fn resynced(&mut self, replica: usize) -> Result<(), String> {
        let m = self.master();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let mi = self.admin(m, &["INFO", "replication"]).await?;
            let ri = self.admin(replica, &["INFO", "replication"]).await?;
            let id = |r: &Reply| info_text(r, "master_replid");
            let up = info_text(&ri, "master_link_status").as_deref() == Some("up");
            let (mo, ro) = (
                info_field(&mi, "master_repl_offset"),
                info_field(&ri, "master_repl_offset"),
            );
            if up && id(&mi).is_some() && id(&mi) == id(&ri) && mo.is_some() && mo == ro {
                self.record(What::Resynced {
                    replica,
                    offset: ro.unwrap_or(0),
                });
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("n{} never resynchronised", replica + 1));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Sets `min-replicas-to-write` and `min-replicas-max-lag` on the master, then waits
    /// (real time, bounded) until it counts every connected replica good: a replica
    /// acknowledges once a second, so a rule set before its first acknowledgement arrived
    /// would refuse the lesson's first write.
    pub(crate) async fn min_replicas(
        &mut self,
        to_write: u64,
        max_lag_s: u64,
    ) -> Result<(), String> {
        let m = self.master();
        self.set_config(m, "min-replicas-max-lag", &max_lag_s.to_string())
            .await?;
        self.set_config(m, "min-replicas-to-write", &to_write.to_string())
            .await?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (connected, good) = self.replica_counts(m).await?;
            if good == connected {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("n{} never counted its replicas good", m + 1));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.record(What::MinReplicas {
            node: m,
            to_write,
            max_lag_s,
        });
        Ok(())
    }

    /// `connected_slaves` and `min_slaves_good_slaves` of `node`.
    async fn replica_counts(&self, node: usize) -> Result<(u64, u64), String> {
        let r = self.admin(node, &["INFO", "replication"]).await?;
        let connected = info_field(&r, "connected_slaves").ok_or("no connected_slaves")?;
        let good = info_field(&r, "min_slaves_good_slaves").ok_or("no min_slaves_good_slaves")?;
        Ok((connected, good))
    }

    /// The master's count of connected and good replicas, recorded.
    pub(crate) async fn good_replicas(&mut self) -> Result<u64, String> {
        let m = self.master();
        let (connected, good) = self.replica_counts(m).await?;
        self.record(What::GoodReplicas {
            node: m,
            connected,
            good,
        });
        Ok(good)
    }

    /// Cuts `replica`'s link to its master both ways (its fault proxy closes every
    /// connection and accepts no new one), and waits (real time, bounded) until the master
    /// counts one connected replica fewer.
    pub(crate) async fn cut_link(&mut self, replica: usize) -> Result<(), String> {
        let m = self.master();
        let (before, _) = self.replica_counts(m).await?;
        let proxy = match &self.nodes[replica] {
            Node::Remote { proxy, .. } => proxy.as_ref(),
            Node::Local(_) => self.links[replica].as_ref(),
        };
        proxy
            .ok_or("this replica does not follow through a fault proxy")?
            .cut();
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.replica_counts(m).await?.0 >= before {
            if Instant::now() > deadline {
                return Err(format!("n{} still counts n{}", m + 1, replica + 1));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.record(What::LinkCut { replica });
        Ok(())
    }

    /// Holds back the master's stream from now on.
    pub(crate) fn pause_replication(&mut self) {
        let m = self.master();
        match &self.nodes[m] {
            Node::Local(s) => s.pause_replication(true),
            // A user's master: its replicas' proxies hold the stream.
            Node::Remote { .. } => {
                for n in &self.nodes {
                    if let Node::Remote { proxy: Some(p), .. } = n {
                        p.pause();
                    }
                }
            }
        }
        self.record(What::ReplicationPaused { master: m });
    }

    /// Makes `replica` apply its stream `ms` late (real time).
    pub(crate) fn lag(&mut self, replica: usize, ms: u64) {
        let lag = Duration::from_millis(ms);
        match &self.nodes[replica] {
            Node::Local(s) => s.set_replication_lag(lag),
            Node::Remote { proxy: Some(p), .. } => p.set_delay(lag),
            Node::Remote { proxy: None, .. } => {}
        }
        self.record(What::ReplicaLag { replica, ms });
    }

    /// Sets the resource to `value` (and lets the replicas have it when it lives beside the
    /// lock).
    pub(crate) async fn set_resource(&mut self, value: i64) -> Result<(), String> {
        let (k, v) = (self.resource_key(), value.to_string());
        self.resource_cmd(&["SET", &k, &v]).await?;
        let lane = self.resource_lane();
        self.record(What::ResourceSet { lane, value });
        Ok(())
    }

    /// Who holds the lock according to `node`, recorded.
    pub(crate) async fn look(&mut self, node: usize) -> Result<Holder, String> {
        let key = self.lock_key();
        let got = self.admin(node, &["GET", &key]).await?;
        let holder = match text(&got) {
            None => Holder::Nobody,
            Some(t) => self
                .tokens
                .iter()
                .find(|(tok, _)| *tok == t)
                .map_or(Holder::Other, |(_, c)| Holder::Client(*c)),
        };
        let pttl = match holder {
            Holder::Nobody => None,
            _ => int(&self.admin(node, &["PTTL", &key]).await?),
        };
        self.record(What::LockSeen {
            node,
            holder: holder.clone(),
            pttl,
        });
        Ok(holder)
    }

    fn remember(&mut self, token: &str, client: char) {
        self.tokens.push((token.to_string(), client));
    }

    /// `client` tries the simple lock once (`SET NX PX` in the component).
    pub(crate) async fn try_lock(&mut self, client: char, ttl_ms: u64) -> Result<bool, String> {
        let node = self.master();
        let c = self.client(client);
        let r = c
            .inst
            .try_lock(LOCK, Duration::from_millis(ttl_ms))
            .await
            .map_err(|e| e.to_string())?;
        self.after_simple(client, node, r.map(|l| l.map(|l| (l, None))))
    }

    /// `client` tries the fenced lock once: a lease and an `INCR` token.
    pub(crate) async fn try_fenced(&mut self, client: char, ttl_ms: u64) -> Result<bool, String> {
        let node = self.master();
        let c = self.client(client);
        let r = c
            .inst
            .try_fenced(LOCK, Duration::from_millis(ttl_ms))
            .await
            .map_err(|e| e.to_string())?;
        self.after_simple(client, node, r.map(|l| l.map(|(l, f)| (l, Some(f)))))
    }

    /// `client` takes a `watchdog.watched-lock` once: `SET NX PX`, and its host's lease
    /// keeper renews it every ttl/3 of the client's clock from then on.
    pub(crate) async fn try_watched(&mut self, client: char, ttl_ms: u64) -> Result<bool, String> {
        let node = self.master();
        let c = self.client(client);
        let (lock, r) = c
            .inst
            .run(move |(store, _, l)| {
                Box::pin(async move {
                    let l = l.ok_or_else(|| wasmtime::format_err!("not the lock client"))?;
                    let w = l.latchkey_locks_watchdog().watched_lock();
                    let lock = w.call_constructor(&mut *store, LOCK).await?;
                    let r = w.call_acquire(&mut *store, lock, ttl_ms).await?;
                    Ok((lock, r))
                })
            })
            .await
            .map_err(|e| e.to_string())?;
        c.watched = Some((lock, None));
        match r {
            Ok(true) => {
                // The component keeps its token to itself: the key's value, read at once
                // (nothing else ran in between), is the token it was given.
                let key = self.lock_key();
                let token = text(&self.admin(node, &["GET", &key]).await?)
                    .ok_or("the watched lock's key is missing right after it was taken")?;
                self.client(client).watched = Some((lock, Some(token.clone())));
                self.remember(&token, client);
                self.record(What::Acquired {
                    client,
                    nodes: vec![node],
                    fence: None,
                    acked: None,
                    valid_until: None,
                    renewed_every: Some(ttl_ms / 3),
                });
                Ok(true)
            }
            Ok(false) => {
                self.record(What::NotAcquired {
                    client,
                    nodes: vec![node],
                    acked: None,
                });
                Ok(false)
            }
            Err(error) => {
                self.record(What::AcquireError { client, error });
                Ok(false)
            }
        }
    }

    /// `client` asks its watched lock whether it still holds it (`held`, and `lost` for why
    /// not). A renewal that came due while its process was
    /// stopped runs as soon as its clock moves again, in the host's own task: this asks until
    /// the answer is "lost", for at most a few seconds of real time, and records the last
    /// answer. Returns whether it is still held.
    pub(crate) async fn check_watched(&mut self, client: char) -> Result<bool, String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let c = self.client(client);
            let lock = c.watched.as_ref().ok_or("no watched lock")?.0;
            let (held, lost) = c
                .inst
                .run(move |(store, _, l)| {
                    Box::pin(async move {
                        let l = l.ok_or_else(|| wasmtime::format_err!("not the lock client"))?;
                        let w = l.latchkey_locks_watchdog().watched_lock();
                        let held = w.call_held(&mut *store, lock).await?;
                        let lost = w.call_lost(&mut *store, lock).await?;
                        Ok((held, lost))
                    })
                })
                .await
                .map_err(|e| e.to_string())?;
            if !held || Instant::now() > deadline {
                let cause = lost.map(|c| {
                    match c {
                        LostCause::Expired => "the lock expired or was deleted",
                        LostCause::Taken => "another holder took the lock",
                        LostCause::Unreachable => "renewals could not reach the server for a TTL",
                    }
                    .to_string()
                });
                self.record(What::LeaseChecked {
                    client,
                    held,
                    cause,
                });
                return Ok(held);
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// `client` carries on with a call into its host (`simple-lock.holder`, a read): an
    /// instance whose lease the host found lost is interrupted, and the call traps with the
    /// host's reason. Recorded either way.
    pub(crate) async fn next_host_call(&mut self, client: char) -> Result<(), String> {
        let c = self.client(client);
        let r = c
            .inst
            .run(move |(store, _, l)| {
                Box::pin(async move {
                    let l = l.ok_or_else(|| wasmtime::format_err!("not the lock client"))?;
                    let locks = l.latchkey_locks_locks().simple_lock();
                    let lock = locks.call_constructor(&mut *store, LOCK).await?;
                    let r = locks.call_holder(&mut *store, lock).await?;
                    lock.resource_drop_async(&mut *store).await?;
                    Ok(r)
                })
            })
            .await;
        let stopped = match r {
            Ok(_) => None,
            // The host's own words, without wasmtime's backtrace around them.
            Err(t) => Some(match t.0.find("lease on '") {
                Some(i) => {
                    let rest = &t.0[i..];
                    let end = rest
                        .find("tenant interrupted")
                        .map_or(rest.len(), |e| e + "tenant interrupted".len());
                    rest[..end].to_string()
                }
                None => t.0.lines().next().unwrap_or_default().to_string(),
            }),
        };
        self.record(What::HostCall { client, stopped });
        Ok(())
    }

    /// `client`'s whole process stops (a VM stop, a long GC pause): neither it nor its
    /// host's lease keeper runs until [`World::resume`].
    pub(crate) fn stop(&mut self, client: char) {
        let now = self.now();
        self.client(client).stopped = Some(now);
        self.record(What::Stopped { client });
    }

    /// `client`'s process runs again: its clock jumps to the lesson's time, so a renewal
    /// that came due meanwhile is overdue now.
    pub(crate) fn resume(&mut self, client: char) {
        let now = self.now();
        let c = self.client(client);
        let since = c.stopped.take().unwrap_or(now);
        c.clock.set_ms(T0_MS + now);
        self.record(What::Resumed {
            client,
            ms: now - since,
        });
    }

    fn after_simple(
        &mut self,
        client: char,
        node: usize,
        r: Result<Option<(Lease, Option<i64>)>, String>,
    ) -> Result<bool, String> {
        match r {
            Ok(Some((lease, fence))) => {
                self.remember(&lease.token.clone(), client);
                let c = self.client(client);
                c.lease = Some(lease);
                c.fence = fence;
                self.record(What::Acquired {
                    client,
                    nodes: vec![node],
                    fence,
                    acked: None,
                    valid_until: None,
                    renewed_every: None,
                });
                Ok(true)
            }
            Ok(None) => {
                self.record(What::NotAcquired {
                    client,
                    nodes: vec![node],
                    acked: None,
                });
                Ok(false)
            }
            Err(error) => {
                self.record(What::AcquireError { client, error });
                Ok(false)
            }
        }
    }

    /// `client` tries the replicated lock once: `SET NX PX`, then `WAIT replicas wait_ms`.
    pub(crate) async fn try_replicated(
        &mut self,
        client: char,
        ttl_ms: u64,
        replicas: u32,
        wait_ms: u64,
    ) -> Result<bool, String> {
        let node = self.master();
        let c = self.client(client);
        let r = c
            .inst
            .run(move |(store, _, l)| {
                Box::pin(async move {
                    let l = l.ok_or_else(|| wasmtime::format_err!("not the lock client"))?;
                    let locks = l.latchkey_locks_locks().replicated_lock();
                    let lock = locks
                        .call_constructor(&mut *store, LOCK, replicas, wait_ms)
                        .await?;
                    let r = locks.call_try_acquire(&mut *store, lock, ttl_ms).await?;
                    lock.resource_drop_async(&mut *store).await?;
                    Ok(r)
                })
            })
            .await
            .map_err(|e| e.to_string())?;
        match r {
            Ok(ReplicatedAcquired::Confirmed(lease)) => {
                let acked = self.acks(&lease.token).await?;
                self.remember(&lease.token.clone(), client);
                self.client(client).lease = Some(lease);
                self.record(What::Acquired {
                    client,
                    nodes: vec![node],
                    fence: None,
                    acked: Some(acked),
                    valid_until: None,
                    renewed_every: None,
                });
                Ok(true)
            }
            Ok(ReplicatedAcquired::NotReplicated(acked)) => {
                self.record(What::NotAcquired {
                    client,
                    nodes: vec![node],
                    acked: Some(acked),
                });
                Ok(false)
            }
            Ok(ReplicatedAcquired::Held) => {
                self.record(What::NotAcquired {
                    client,
                    nodes: vec![node],
                    acked: None,
                });
                Ok(false)
            }
            Err(error) => {
                self.record(What::AcquireError { client, error });
                Ok(false)
            }
        }
    }

    /// How many nodes other than the master hold the lock key with the token just handed
    /// out, asked right after the acquisition: what "acknowledged" turned into on the replicas.
    async fn acks(&self, token: &str) -> Result<i64, String> {
        let (m, key) = (self.master(), self.lock_key());
        let mut n = 0;
        for i in 0..self.nodes.len() {
            if i != m && text(&self.admin(i, &["GET", &key]).await?).as_deref() == Some(token) {
                n += 1;
            }
        }
        Ok(n)
    }

    /// `client` tries the RedLock once over every node; the nodes that granted it are read
    /// back from the nodes themselves.
    pub(crate) async fn try_redlock(&mut self, client: char, ttl_ms: u64) -> Result<bool, String> {
        let c = self.client(client);
        let r = c
            .inst
            .try_redlock(
                LOCK,
                Duration::from_millis(ttl_ms),
                Duration::from_millis(50),
            )
            .await
            .map_err(|e| e.to_string())?;
        let all: Vec<usize> = (0..self.nodes.len()).collect();
        match r {
            Ok(Some(lease)) => {
                self.remember(&lease.token.clone(), client);
                let key = self.lock_key();
                let mut granted = Vec::new();
                for i in 0..self.nodes.len() {
                    let got = self.admin(i, &["GET", &key]).await?;
                    if text(&got).as_deref() == Some(lease.token.as_str()) {
                        granted.push(i);
                    }
                }
                // RedLock's rule on the lesson clock, on which the acquisition took no time:
                // valid for the TTL less the drift allowance (1% of the TTL + 2 ms).
                let valid_until = self.now() + ttl_ms - (ttl_ms / 100 + 2);
                self.record(What::Acquired {
                    client,
                    nodes: granted,
                    fence: None,
                    acked: None,
                    valid_until: Some(valid_until),
                    renewed_every: None,
                });
                Ok(true)
            }
            Ok(None) => {
                self.record(What::NotAcquired {
                    client,
                    nodes: all,
                    acked: None,
                });
                Ok(false)
            }
            Err(error) => {
                self.record(What::AcquireError { client, error });
                Ok(false)
            }
        }
    }

    /// The RedLock validity of `client`'s last acquisition, if it is over on the lesson clock.
    pub(crate) fn red_validity_over(&self, client: char) -> bool {
        let until = self.events.iter().rev().find_map(|e| match &e.what {
            What::Acquired {
                client: c,
                valid_until,
                ..
            } if *c == client => Some(*valid_until),
            _ => None,
        });
        matches!(until, Some(Some(u)) if self.now() >= u)
    }

    /// `client` releases its simple-lock lease (token-checked).
    pub(crate) async fn release(&mut self, client: char) -> Result<(), String> {
        let c = self.client(client);
        let Some(lease) = c.lease.take() else {
            return Err(format!("{client} holds no lease"));
        };
        let r = c
            .inst
            .unlock(LOCK, lease)
            .await
            .map_err(|e| e.to_string())?;
        let outcome = match r {
            Ok(Released::Released) => "released".to_string(),
            Ok(Released::AlreadyExpired) => "it had already expired".to_string(),
            Ok(Released::NotOwner) => "someone else holds the lock; left alone".to_string(),
            Err(e) => format!("error: {e}"),
        };
        self.record(What::Released { client, outcome });
        Ok(())
    }

    /// `client` reads the resource.
    pub(crate) async fn read(&mut self, client: char) -> Result<i64, String> {
        let k = self.resource_key();
        let r = self.resource_cmd(&["GET", &k]).await?;
        let value = int(&r).ok_or("the resource is not a number")?;
        self.client(client).read = Some(value);
        self.record(What::Read { client, value });
        Ok(value)
    }

    /// `client` writes its read plus `delta`, under `check`.
    pub(crate) async fn write(
        &mut self,
        client: char,
        delta: i64,
        check: CheckKind,
    ) -> Result<bool, String> {
        let c = self.client(client);
        let read = c.read.ok_or("write before read")?;
        let token = match (&c.lease, &c.watched) {
            (Some(l), _) => Some(l.token.clone()),
            (None, Some((_, t))) => t.clone(),
            (None, None) => None,
        };
        let fence = c.fence;
        let value = read + delta;
        let (k, v) = (self.resource_key(), value.to_string());
        let (reply, check) = match check {
            CheckKind::None => (self.resource_cmd(&["SET", &k, &v]).await?, Check::None),
            CheckKind::Fence => {
                let f = fence.ok_or("a fenced write needs a fencing token")?;
                let top = format!("{k}:top-fence");
                let script = "local top = tonumber(redis.call('GET', KEYS[2]) or '-1') \
                     if tonumber(ARGV[1]) < top then return 0 end \
                     redis.call('SET', KEYS[2], ARGV[1]) redis.call('SET', KEYS[1], ARGV[2]) return 1";
                let fs = f.to_string();
                let r = self
                    .resource_cmd(&["EVAL", script, "2", &k, &top, &fs, &v])
                    .await?;
                (r, Check::Fence(f))
            }
            CheckKind::Lease => {
                let token = token.unwrap_or_default();
                let script = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
                     redis.call('SET', KEYS[2], ARGV[2]) return 1 end return 0";
                let lock = self.lock_key();
                let r = self
                    .resource_cmd(&["EVAL", script, "2", &lock, &k, &token, &v])
                    .await?;
                (r, Check::Lease)
            }
        };
        let accepted = match reply {
            Reply::Int(1) | Reply::Status(_) => true,
            Reply::Int(0) => false,
            other => return Err(format!("the storage answered {other:?}")),
        };
        self.record(What::Wrote {
            client,
            value,
            delta,
            check,
            accepted,
        });
        Ok(accepted)
    }

    /// `client` does not write: its lease's validity is over.
    pub(crate) fn hold_back(&mut self, client: char) {
        self.record(What::HeldBack { client });
    }

    /// `client` stands still for `ms` while the lesson clock moves on.
    pub(crate) async fn pause(&mut self, client: char, ms: u64) {
        self.advance(ms).await;
        self.settle().await;
        self.record(What::Paused { client, ms });
    }

    /// Crashes the master: held stream bytes are lost.
    pub(crate) async fn crash(&mut self) -> Result<(), String> {
        let m = self.master();
        let offset = self.offset(m).await?;
        match &self.nodes[m] {
            Node::Local(s) => {
                s.crash().await;
                self.record(What::Crashed { node: m, offset });
            }
            Node::Remote { .. } => {
                // A user's server is not killed: its replicas lose what the proxies held and
                // their links, and the clients can no longer reach it.
                for n in &self.nodes {
                    if let Node::Remote { proxy: Some(p), .. } = n {
                        p.drop_held();
                        p.cut();
                    }
                }
                self.down[m].store(true, Ordering::Release);
                self.record(What::CutOff { node: m, offset });
            }
        }
        Ok(())
    }

    /// Promotes `node`; clients send their commands to it from now on.
    pub(crate) async fn promote(&mut self, node: usize) -> Result<(), String> {
        match &self.nodes[node] {
            Node::Local(s) => s.promote(),
            Node::Remote { .. } => {
                expect_ok(self.admin(node, &["REPLICAOF", "NO", "ONE"]).await?)?;
            }
        }
        let offset = self.offset(node).await?;
        self.current.store(node, Ordering::Release);
        self.record(What::Promoted { node, offset });
        Ok(())
    }

    /// Restarts `node` in place, from its AOF or empty.
    pub(crate) async fn restart(&mut self, node: usize, aof: bool) -> Result<(), String> {
        let Node::Local(s) = &self.nodes[node] else {
            return Err("--against does not restart your servers".into());
        };
        s.restart(aof).await.map_err(|e| e.to_string())?;
        let keys = int(&self.admin(node, &["DBSIZE"]).await?).unwrap_or(-1);
        self.record(What::Restarted { node, aof, keys });
        Ok(())
    }

    /// Cuts the power to `node`'s machine and boots it again from what its AOF kept on disk.
    pub(crate) async fn power_loss(&mut self, node: usize) -> Result<(), String> {
        let Node::Local(s) = &self.nodes[node] else {
            return Err("--against does not cut the power to your servers".into());
        };
        let cut = s.power_loss().await.map_err(|e| e.to_string())?;
        self.record(What::PowerLost {
            node,
            written: cut.written,
            durable: cut.durable,
            last_fsync_ms: cut.last_fsync_ms.map(|t| t.saturating_sub(T0_MS)),
        });
        let keys = int(&self.admin(node, &["DBSIZE"]).await?).unwrap_or(-1);
        self.record(What::Restarted {
            node,
            aof: true,
            keys,
        });
        Ok(())
    }

    /// Cuts the clients off `nodes` (or lets them through again).
    pub(crate) fn network(&mut self, nodes: &[usize], cut: bool) {
        for &n in nodes {
            self.down[n].store(cut, Ordering::Release);
        }
        self.record(What::Network {
            nodes: nodes.to_vec(),
            cut,
        });
    }

    /// Gives `node` a memory limit `headroom` bytes above what it uses now.
    pub(crate) async fn limit_memory(
        &mut self,
        node: usize,
        headroom: u64,
        policy: &str,
    ) -> Result<(), String> {
        let used = info_field(&self.admin(node, &["INFO", "memory"]).await?, "used_memory")
            .ok_or("no used_memory")?;
        let bytes = used + headroom;
        let b = bytes.to_string();
        self.set_config(node, "maxmemory-policy", policy).await?;
        self.set_config(node, "maxmemory", &b).await?;
        self.record(What::MemoryLimit {
            node,
            used,
            bytes,
            policy: policy.to_string(),
        });
        Ok(())
    }

    /// Another application writes `keys` cache keys of `size` bytes (no TTL) to `node`.
    pub(crate) async fn fill(&mut self, node: usize, keys: u64, size: usize) -> Result<(), String> {
        let value = "x".repeat(size);
        let mut refused = 0;
        for i in 0..keys {
            let k = format!("cache:{i}");
            if let Reply::Error(_) = self.admin(node, &["SET", &k, &value]).await? {
                refused += 1;
            }
        }
        let evicted = info_field(&self.admin(node, &["INFO", "stats"]).await?, "evicted_keys")
            .ok_or("no evicted_keys")?;
        self.record(What::Filled {
            node,
            keys,
            refused,
            evicted,
        });
        Ok(())
    }

    /// Deletes the `keys` cache keys [`World::fill`] wrote.
    pub(crate) async fn free(&mut self, node: usize, keys: u64) -> Result<(), String> {
        let mut a = vec!["DEL".to_string()];
        a.extend((0..keys).map(|i| format!("cache:{i}")));
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        let deleted = int(&self.admin(node, &refs).await?).ok_or("DEL did not count")?;
        self.record(What::Freed {
            node,
            keys: deleted,
        });
        Ok(())
    }

    /// Reads the resource's final value, recorded.
    pub(crate) async fn finish(&mut self) -> Result<i64, String> {
        let k = self.resource_key();
        let value = int(&self.resource_cmd(&["GET", &k]).await?).ok_or("no resource")?;
        let lane = self.resource_lane();
        self.record(What::Final { lane, value });
        Ok(value)
    }

    /// Stops every server and removes the AOF directory; returns the events.
    pub(crate) async fn end(self) -> Vec<Event> {
        // `--against`: the user's servers get their settings back, and stand alone again.
        for (node, name, value) in self.restore.iter().rev() {
            let _ = self.admin(*node, &["CONFIG", "SET", name, value]).await;
        }
        for (i, n) in self.nodes.iter().enumerate() {
            if let Node::Remote { proxy, .. } = n {
                if proxy.is_some() {
                    let _ = self.admin(i, &["REPLICAOF", "NO", "ONE"]).await;
                }
            }
        }
        for c in self.clients {
            c.inst.close().await;
        }
        for n in &self.nodes {
            if let Node::Local(s) = n {
                s.shutdown().await;
            }
        }
        self.storage.shutdown().await;
        if let Some(d) = &self.dir {
            let _ = std::fs::remove_dir_all(d);
        }
        self.events
    }
}

/// Which check a write goes through (the storage's side of [`Check`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CheckKind {
    /// None: the storage applies every write.
    None,
    /// The fencing token must be at least the highest seen.
    Fence,
    /// The lock key must still hold the writer's token.
    Lease,
}
