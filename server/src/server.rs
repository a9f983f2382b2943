//! Starting, embedding and stopping a server.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! let server = latchkey_server::Server::builder().virtual_clock().start().await?;
//! let mut client = server.client();
//! client.cmd(["SET", "lock", "token", "NX", "PX", "30000"]).await;
//! server.clock().advance(std::time::Duration::from_secs(31));
//! assert_eq!(client.cmd(["GET", "lock"]).await, latchkey_server::Frame::Null);
//! server.shutdown().await;
//! # Ok(()) }
//! ```

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use crate::client::{Client, Clients, PushReceiver};
use crate::clock::Clock;
use crate::cmd::{self, CommandSpec, WRITE};
use crate::config::Config;
use crate::db::Keyspace;
use crate::frame::Frame;
use crate::gate::Gate;
use crate::pubsub::PubSub;
use crate::scripting::Scripting;

/// Counters `INFO stats` reports.
#[derive(Debug, Default)]
pub struct Stats {
    /// Connections accepted since start.
    pub connections_received: AtomicU64,
    /// Commands run since start.
    pub commands_processed: AtomicU64,
    /// Connections refused because of `maxclients`.
    pub rejected_connections: AtomicU64,
    /// Keys deleted by expiry (lazy or active).
    pub expired_keys: AtomicU64,
    /// Changes since start (Redis's `dirty` counter).
    pub dirty: AtomicU64,
    /// Clients waiting in a blocking command (`BLPOP`, `WAIT`, ...) right now.
    pub blocked_clients: AtomicU64,
}

impl Stats {
    /// Counts one command.
    pub fn command_processed(&self) {
        self.commands_processed.fetch_add(1, Ordering::Relaxed);
    }
}

/// Server-wide state shared by every connection and background task.
#[derive(Debug)]
pub struct Shared {
    /// The sixteen databases.
    pub keyspace: Keyspace,
    /// The time source.
    pub clock: Clock,
    /// `CONFIG` parameters.
    pub config: Config,
    /// Shared/exclusive execution, for atomic scripts and transactions.
    pub gate: Gate,
    /// Connected clients.
    pub clients: Clients,
    /// Channel and pattern subscriptions.
    pub pubsub: PubSub,
    /// Lua scripts and functions.
    pub scripting: Scripting,
    /// Replication: the stream to replicas, or the link to a master.
    pub replication: crate::replication::Replication,
    /// The append-only file, when `appendonly yes`.
    pub aof: parking_lot::RwLock<Option<crate::aof::Aof>>,
    /// `INFO stats` counters.
    pub stats: Stats,
    /// `maxmemory` eviction: its candidate pool and `evicted_keys`.
    pub evictor: crate::evict::Evictor,
    /// `CLIENT PAUSE`: whose commands wait, and until when.
    pub(crate) pause: crate::pause::ClientPause,
    /// When the server started.
    pub started: Instant,
    /// 40 hex characters identifying this run (`INFO server`'s `run_id`).
    pub run_id: String,
    /// The bound TCP address, when listening.
    pub addr: parking_lot::Mutex<Option<SocketAddr>>,
    /// Whether the active expiry cycle runs (`DEBUG SET-ACTIVE-EXPIRE 0|1`, on by default);
    /// off, keys expire only when something reads them.
    pub active_expire: AtomicBool,
    /// Wake-ups and progress of the active expiry cycle (see [`crate::expire::caught_up`]).
    pub expiry: crate::expire::ExpiryState,
    replica: AtomicBool,
    shutdown_tx: watch::Sender<bool>,
    /// `true` while a [restart](crate::restart) reloads the keyspace: new connections wait.
    loading_tx: watch::Sender<bool>,
    /// Whether the once-a-second AOF flush task runs (started once, it serves any AOF).
    aof_flusher: AtomicBool,
}

impl Shared {
    fn new(clock: Clock) -> Shared {
        let (shutdown_tx, _) = watch::channel(false);
        let hex40 = || -> String {
            (0..40)
                .map(|_| char::from_digit(rand::random_range(0..16u32), 16).unwrap_or('0'))
                .collect()
        };
        let run_id = hex40();
        let config = Config::default();
        let replication = crate::replication::Replication::new(hex40());
        replication.set_limits(config.limits.clone());
        Shared {
            keyspace: Keyspace::with_limits(config.limits.clone()),
            clock,
            config,
            gate: Gate::default(),
            clients: Clients::default(),
            pubsub: PubSub::default(),
            scripting: Scripting::default(),
            replication,
            aof: parking_lot::RwLock::new(None),
            stats: Stats::default(),
            evictor: crate::evict::Evictor::default(),
            pause: crate::pause::ClientPause::default(),
            started: Instant::now(),
            run_id,
            addr: parking_lot::Mutex::new(None),
            active_expire: AtomicBool::new(true),
            expiry: crate::expire::ExpiryState::default(),
            replica: AtomicBool::new(false),
            shutdown_tx,
            loading_tx: watch::channel(false).0,
            aof_flusher: AtomicBool::new(false),
        }
    }

    /// Whether this server is a replica (read-only, never expires keys itself).
    pub fn is_replica(&self) -> bool {
        self.replica.load(Ordering::Acquire)
    }

    /// Makes this server a replica or a master again.
    pub fn set_replica(&self, replica: bool) {
        self.replica.store(replica, Ordering::Release);
    }

    /// Whether reads may delete expired keys (masters do; replicas wait for the master).
    pub fn lazy_expire_deletes(&self) -> bool {
        // During a `CLIENT PAUSE` an expired key reads as missing but stays: its `DEL`
        // would be a write, which the pause promises there are none of.
        !self.is_replica() && !self.pause.holds_expiry()
    }

    /// Checks that apply before a command runs (read-only replica, ...). `Some(error)` refuses.
    pub fn precheck(&self, client: &Client, spec: &CommandSpec) -> Option<Frame> {
        if spec.has(WRITE) && self.is_replica() && !client.is_replication_link {
            return Some(Frame::error(
                "READONLY You can't write against a read only replica.",
            ));
        }
        None
    }

    /// The stream-order lock, while writes are recorded anywhere: fed to replicas or a
    /// backlog, or appended to the AOF (else `None`, at no cost). Whoever changes the keyspace
    /// under the *shared* gate and records the change (a write on the fast path, a read that
    /// expired a key, the expiry cycle, a woken `BLPOP`) holds it from the change until the
    /// change is recorded. So the replicas, the backlog a returning replica continues from,
    /// and the AOF a restart replays all get the keyspace's order: two clients' `SET`s of one
    /// key are recorded in the order they were applied. It is re-entrant: a write that holds
    /// it may expire keys and record them under it.
    pub fn order_guard(&self) -> Option<parking_lot::ReentrantMutexGuard<'_, ()>> {
        let recorded = self.replication.feeds_stream() || self.aof.read().is_some();
        recorded.then(|| self.replication.lock_order())
    }

    /// Called after a command changed something: counts the change and feeds its effect to
    /// the replicas. Returns the replication offset after it (what `WAIT` waits for).
    pub fn after_write(&self, db: usize, spec: &CommandSpec, args: &[Bytes], dirty: u64) -> u64 {
        self.stats.dirty.fetch_add(dirty, Ordering::Relaxed);
        let aof = self.aof.read();
        if !self.replication.feeds_stream() && aof.is_none() {
            return self.replication.offset();
        }
        // Encoded once; the AOF writes these bytes, and the backlog and every replica share
        // them.
        let effects = crate::replication::stream_chunk(|out| {
            crate::replication::encode_effects(self, db, spec, args, out)
        });
        if let Some(aof) = aof.as_ref() {
            aof.append_encoded(db, &effects);
        }
        self.replication.feed_encoded(db, effects)
    }

    /// Called after keys expired (the expiry cycle's, or those a read found expired):
    /// replicas and the AOF receive a `DEL` for each, since replicas never expire keys
    /// themselves. The whole batch is encoded once, as one chunk that the AOF writes and the
    /// replicas share. The caller holds [`order_guard`](Shared::order_guard).
    pub fn propagate_expired(&self, db: usize, keys: &[Bytes]) {
        let aof = self.aof.read();
        let feeds = self.replication.feeds_stream();
        if keys.is_empty() || (!feeds && aof.is_none()) {
            return;
        }
        let dels = crate::replication::stream_chunk(|out| {
            for k in keys {
                crate::replication::encode(&[&b"DEL"[..], &k[..]], out);
            }
        });
        if let Some(aof) = aof.as_ref() {
            aof.append_encoded(db, &dels);
        }
        if feeds {
            self.replication.feed_encoded(db, dels);
        }
    }

    /// Called after each command: the keys its reads found expired and deleted (lazy
    /// expiry) go to the replicas and the AOF as `DEL`s, as the expiry cycle's do, and count
    /// in `expired_keys`. Runs before the command's own effects are fed, so a write that
    /// recreates such a key reaches the replicas after its `DEL`.
    pub fn propagate_lazy_expired(&self) {
        if !self.keyspace.may_have_lazily_expired() {
            return;
        }
        for (i, db) in self.keyspace.iter() {
            if !db.may_have_lazily_expired() {
                continue;
            }
            // Taken, then fed, in stream order: a write that recreated one of these keys
            // meanwhile drains them itself, under the same lock, before feeding its own effect.
            let _order = self.order_guard();
            let gone = db.take_lazily_expired();
            if gone.is_empty() {
                continue;
            }
            self.stats
                .expired_keys
                .fetch_add(gone.len() as u64, Ordering::Relaxed);
            self.propagate_expired(i, &gone);
        }
    }

    /// The body of `INFO replication`.
    pub fn replication_info(&self) -> String {
        self.replication.info()
    }

    /// Asks the server to shut down: the listener stops and every connection closes.
    pub fn request_shutdown(&self) {
        self.shutdown_tx.send_replace(true);
        self.clients.kill_all();
    }

    /// Marks the keyspace as being reloaded (a [restart](crate::restart)), or ready again.
    pub fn set_loading(&self, loading: bool) {
        self.loading_tx.send_replace(loading);
    }

    /// Resolves once the keyspace is not being reloaded (at once, almost always).
    pub async fn wait_loaded(&self) {
        let mut rx = self.loading_tx.subscribe();
        let _ = rx.wait_for(|loading| !*loading).await;
    }

    /// Whether a [restart](crate::restart) is reloading the keyspace.
    pub fn is_loading(&self) -> bool {
        *self.loading_tx.borrow()
    }

    /// A receiver that sees `true` once shutdown was requested.
    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown_tx.subscribe()
    }
}

/// Configures and starts a server. Get one from [`Server::builder`].
#[derive(Debug, Clone)]
pub struct Builder {
    bind: String,
    port: u16,
    listen: bool,
    clock: Clock,
    config: Vec<(String, String)>,
}

/// Entry point of the embedding API.
#[derive(Debug)]
pub struct Server;

impl Server {
    /// A builder with Redis's defaults, except the port: 0, so the OS picks a free one.
    pub fn builder() -> Builder {
        Builder {
            bind: "127.0.0.1".into(),
            port: 0,
            listen: true,
            clock: Clock::system(),
            config: Vec::new(),
        }
    }
}

impl Builder {
    /// TCP port to listen on (0, the default, picks a free one).
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Address to bind (default `127.0.0.1`).
    pub fn bind(mut self, addr: impl Into<String>) -> Self {
        self.bind = addr.into();
        self
    }

    /// Serve only in-process clients: no TCP listener at all.
    pub fn no_listener(mut self) -> Self {
        self.listen = false;
        self
    }

    /// Use a virtual clock that only moves when told to (see [`ServerHandle::clock`]).
    pub fn virtual_clock(mut self) -> Self {
        self.clock = Clock::virtual_now();
        self
    }

    /// Use the given clock (share one virtual clock between several servers, say).
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Sets a configuration parameter, as `CONFIG SET` would (e.g. `("maxclients", "100")`).
    pub fn config(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.config.push((name.into(), value.into()));
        self
    }

    /// Starts the server on the current tokio runtime.
    pub async fn start(self) -> std::io::Result<ServerHandle> {
        let shared = Arc::new(Shared::new(self.clock));
        for (k, v) in &self.config {
            shared.config.set(k, v).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("bad config {k}={v}: {e:?}"),
                )
            })?;
        }
        if shared.config.get("appendonly").as_deref() == Some("yes") {
            open_aof(&shared).await?;
        }
        let (done_tx, done_rx) = mpsc::channel::<()>(1);
        let addr = if self.listen {
            let listener = TcpListener::bind((self.bind.as_str(), self.port)).await?;
            let addr = listener.local_addr()?;
            *shared.addr.lock() = Some(addr);
            shared.config.set("port", &addr.port().to_string()).ok();
            shared.config.set("bind", &self.bind).ok();
            tokio::spawn(accept_loop(shared.clone(), listener, done_tx.clone()));
            Some(addr)
        } else {
            None
        };
        tokio::spawn(crate::expire::active_expiry(shared.clone(), done_tx));
        Ok(ServerHandle {
            shared,
            addr,
            done: parking_lot::Mutex::new(Some(done_rx)),
        })
    }

    /// Starts the server on a runtime of its own, for synchronous code and tests.
    pub fn start_blocking(self) -> std::io::Result<BlockingServer> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .thread_name("latchkey-server")
            .build()?;
        let handle = rt.block_on(self.start())?;
        Ok(BlockingServer {
            handle: Some(handle),
            rt: Some(rt),
        })
    }
}

/// Replays the append-only file, then opens it for appending (and starts the everysec flush).
pub(crate) async fn open_aof(shared: &Arc<Shared>) -> std::io::Result<()> {
    let dir = shared.config.get("dir").unwrap_or_else(|| ".".into());
    let name = shared
        .config
        .get("appendfilename")
        .unwrap_or_else(|| "appendonly.aof".into());
    let path = std::path::Path::new(&dir).join(name);
    let commands = crate::aof::load(&path)?;
    let loaded = commands.len();
    crate::aof::replay(shared, commands).await;
    let fsync = crate::aof::Fsync::parse(&shared.config.get("appendfsync").unwrap_or_default());
    *shared.aof.write() = Some(crate::aof::Aof::open(path.clone(), fsync)?);
    tracing::info!("AOF {} loaded: {loaded} commands", path.display());
    if fsync == crate::aof::Fsync::EverySec && !shared.aof_flusher.swap(true, Ordering::AcqRel) {
        let weak = Arc::downgrade(shared);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let Some(shared) = weak.upgrade() else { return };
                let aof = shared.aof.read();
                if let Some(aof) = aof.as_ref() {
                    aof.flush_if_dirty();
                }
            }
        });
    }
    Ok(())
}

async fn accept_loop(shared: Arc<Shared>, listener: TcpListener, done: mpsc::Sender<()>) {
    let mut shutdown = shared.shutdown_signal();
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.wait_for(|s| *s) => break,
        };
        let (socket, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        shared
            .stats
            .connections_received
            .fetch_add(1, Ordering::Relaxed);
        let _ = socket.set_nodelay(true);
        tokio::spawn(crate::net::serve(
            shared.clone(),
            socket,
            peer,
            done.clone(),
        ));
    }
}

/// A running server: its address, its clock, in-process clients, and shutdown.
#[derive(Debug)]
pub struct ServerHandle {
    shared: Arc<Shared>,
    addr: Option<SocketAddr>,
    done: parking_lot::Mutex<Option<mpsc::Receiver<()>>>,
}

impl ServerHandle {
    /// The bound TCP address (panics for a server built with `no_listener`).
    pub fn addr(&self) -> SocketAddr {
        self.addr.expect("this server has no TCP listener")
    }

    /// `redis://host:port` for client libraries.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr())
    }

    /// The server's clock; advance it when the server was built with a virtual clock.
    pub fn clock(&self) -> &Clock {
        &self.shared.clock
    }

    /// Server-wide state, for advanced embedding and tests.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// A client that runs commands in-process, without a socket.
    pub fn client(&self) -> LocalClient {
        LocalClient::new(self.shared.clone())
    }

    /// Stops accepting connections, closes every connection and waits for their tasks.
    pub async fn shutdown(&self) {
        self.shared.request_shutdown();
        let rx = self.done.lock().take();
        if let Some(mut rx) = rx {
            // Every task holds a sender; recv returns None once all have finished.
            let _ = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
        }
    }

    /// Resolves once the active expiry cycle has caught up with the clock: every key whose
    /// deadline is at or before the current time has been deleted and its `DEL` fed to the
    /// replicas and the AOF. Wakes the cycle rather than waiting for its next tick, and never
    /// sleeps: after `clock().advance(...)` past many deadlines, a test awaits this before
    /// checking `DBSIZE`. Resolves at once on a replica, or with active expiry switched off.
    pub async fn expiry_caught_up(&self) {
        crate::expire::caught_up(&self.shared).await;
    }

    /// Makes this server a replica of `master` (like `REPLICAOF host port`).
    pub fn replicate_from(&self, master: SocketAddr) {
        crate::replication::start_replica(&self.shared, master.ip().to_string(), master.port());
    }

    /// Promotes a replica to master (like `REPLICAOF NO ONE`).
    pub fn promote(&self) {
        crate::replication::stop_replica(&self.shared);
    }

    /// Makes this replica apply its master's stream `lag` late (zero: at once).
    pub fn set_replication_lag(&self, lag: Duration) {
        self.shared.replication.set_lag(lag);
    }

    /// Pauses (or resumes) the replication stream to every replica. While paused, writes are
    /// held on this master: a crash loses them, as a real network partition would.
    pub fn pause_replication(&self, paused: bool) {
        self.shared.replication.set_paused(paused);
    }

    /// Crashes this master: writes not yet sent to a replica are lost, every connection is
    /// dropped and the listener closes. The in-process state stays readable for inspection.
    pub async fn crash(&self) {
        self.shared.replication.discard_held();
        self.shutdown().await;
    }

    /// Restarts this node in place, as a crash and a new start would: every connection
    /// closes, the keyspace is gone, and it comes back on the same port, replaying its
    /// append-only file when `aof` is true or empty when false (see [`crate::restart`]).
    /// Resolves once it serves again.
    pub async fn restart(&self, aof: bool) -> std::io::Result<()> {
        crate::restart::restart(&self.shared, aof).await
    }

    /// Whether this replica's link to its master is up (false for a master).
    pub fn replication_link_up(&self) -> bool {
        self.shared
            .replication
            .master_link()
            .is_some_and(|(_, _, up, _)| up)
    }

    /// Resolves when the server has been asked to shut down (e.g. by `SHUTDOWN`).
    pub async fn wait_for_shutdown(&self) {
        let mut rx = self.shared.shutdown_signal();
        let _ = rx.wait_for(|s| *s).await;
    }
}

/// A server running on its own runtime; stops when dropped.
#[derive(Debug)]
pub struct BlockingServer {
    handle: Option<ServerHandle>,
    rt: Option<tokio::runtime::Runtime>,
}

impl BlockingServer {
    /// The running server.
    pub fn handle(&self) -> &ServerHandle {
        self.handle.as_ref().expect("present until drop")
    }

    /// The bound TCP address.
    pub fn addr(&self) -> SocketAddr {
        self.handle().addr()
    }

    /// Runs one command in-process and waits for its reply.
    pub fn cmd<I, A>(&self, args: I) -> Frame
    where
        I: IntoIterator<Item = A>,
        A: AsRef<[u8]>,
    {
        let mut c = self.handle().client();
        let rt = self.rt.as_ref().expect("present until drop");
        rt.block_on(c.cmd(args))
    }
}

impl Drop for BlockingServer {
    fn drop(&mut self) {
        if let (Some(h), Some(rt)) = (self.handle.take(), self.rt.take()) {
            rt.block_on(h.shutdown());
            rt.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

/// A client living in the same process: same commands, same semantics, no socket.
#[derive(Debug)]
pub struct LocalClient {
    shared: Arc<Shared>,
    client: Client,
    pushes: PushReceiver,
}

impl LocalClient {
    /// A new in-process client of the server that owns `shared` (see [`ServerHandle::shared`]).
    pub fn new(shared: Arc<Shared>) -> LocalClient {
        let (client, pushes) = shared.clients.register(None, None);
        LocalClient {
            shared,
            client,
            pushes,
        }
    }

    /// Runs one command and returns its reply. Arguments are anything byte-like: `&str`,
    /// `String`, `&[u8]`, `Bytes`...
    pub async fn cmd<I, A>(&mut self, args: I) -> Frame
    where
        I: IntoIterator<Item = A>,
        A: AsRef<[u8]>,
    {
        let args: Vec<Bytes> = args
            .into_iter()
            .map(|a| Bytes::copy_from_slice(a.as_ref()))
            .collect();
        if args.is_empty() {
            return Frame::error("ERR empty command");
        }
        cmd::execute(&self.shared, &mut self.client, args).await
    }

    /// Waits for the next pub/sub message (or other push) sent to this client.
    pub async fn next_push(&mut self) -> Option<Frame> {
        let f = self.pushes.recv().await?;
        self.pushes.written(crate::pubsub::approx_size(&f));
        Some(f)
    }

    /// Takes this client's stream of push messages, so that one task can wait for pub/sub
    /// messages while another runs commands. Afterwards [`next_push`](LocalClient::next_push)
    /// returns `None`.
    pub fn take_pushes(&mut self) -> PushStream {
        let (_, empty) = tokio::sync::mpsc::unbounded_channel();
        PushStream {
            inner: std::mem::replace(
                &mut self.pushes,
                PushReceiver::detached(empty, self.client.handle.clone()),
            ),
        }
    }

    /// The client's id, as `CLIENT ID` reports it.
    pub fn id(&self) -> u64 {
        self.client.handle.id
    }
}

/// The push messages of a [`LocalClient`], taken with [`LocalClient::take_pushes`].
#[derive(Debug)]
pub struct PushStream {
    inner: PushReceiver,
}

impl PushStream {
    /// Waits for the next push message; `None` once the client is gone.
    pub async fn recv(&mut self) -> Option<Frame> {
        let f = self.inner.recv().await?;
        self.inner.written(crate::pubsub::approx_size(&f));
        Some(f)
    }
}

impl Drop for LocalClient {
    fn drop(&mut self) {
        crate::net::cleanup_client(&self.shared, &mut self.client);
    }
}
