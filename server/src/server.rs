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
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::client::{Client, PushReceiver};
use crate::clock::Clock;
use crate::cmd;
use crate::durability::PowerLoss;
use crate::frame::Frame;
pub(crate) use crate::state::Shared;

/// Configures and starts a server. Get one from [`Server::builder`].
#[derive(Debug, Clone)]
pub struct Builder {
    bind: String,
    port: u16,
    listen: bool,
    clock: Clock,
    config: Vec<(String, String)>,
    load_snapshot: bool,
}

/// Entry point of the embedding API.
#[derive(Debug)]
pub struct Server;

impl Server {
    /// The tokio runtime a server is best served by, with `io_threads` worker threads (Redis's
    /// `io-threads` parameter; [`Builder::start_blocking`] and the `latchkey-server` binary
    /// build theirs here).
    ///
    /// With one thread (the default, as in Redis), commands from different connections run in
    /// the order their bytes arrived, as on Redis's single event loop: a client that sends
    /// `SET` without waiting, followed at once by another client's `GET`, sees its value. That
    /// takes turning off tokio's LIFO slot, which otherwise runs the last of the connections
    /// woken together first (most of the time, in measurements here); the switch exists only
    /// in builds with `--cfg tokio_unstable`, which this workspace's `.cargo/config.toml`
    /// sets. With more threads, connections are served in parallel, and two commands sent at
    /// once from two connections may run in either order.
    pub fn runtime(io_threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(io_threads.max(1))
            .enable_all()
            .thread_name("latchkey-server");
        // With several workers the slot stays: a long command's hand-off (`hand_off`) counts
        // on it to keep its marker task from other workers.
        #[cfg(tokio_unstable)]
        if io_threads <= 1 {
            b.disable_lifo_slot();
        }
        b.build()
    }

    /// A builder with Redis's defaults, except the port: 0, so the OS picks a free one.
    pub fn builder() -> Builder {
        Builder {
            bind: "127.0.0.1".into(),
            port: 0,
            listen: true,
            clock: Clock::system(),
            config: Vec::new(),
            load_snapshot: false,
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

    /// Loads the snapshot file (`dir`/`dbfilename`, which `SAVE` and `BGSAVE` write) at
    /// start when `appendonly` is off, as `redis-server` does. Off by default: an embedded
    /// server starts empty whatever files its working folder holds; the `latchkey-server`
    /// binary turns it on.
    pub fn load_snapshot(mut self, load: bool) -> Self {
        self.load_snapshot = load;
        self
    }

    /// Starts the server on the current tokio runtime.
    pub async fn start(self) -> std::io::Result<ServerHandle> {
        cmd::install();
        let io_threads = self.io_threads();
        let scripting = crate::state::Plugged::new(crate::scripting::Scripting::default());
        let shared = Arc::new(Shared::new(self.clock, scripting));
        for (k, v) in &self.config {
            shared.set_config(k, v).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("bad config {k}={v}: {e:?}"),
                )
            })?;
        }
        // `io-threads` is the worker count of the runtime the server runs on, which
        // `Server::runtime` builds from it; on a runtime someone else built, it says what that
        // runtime has, and a different number asked for is refused rather than ignored.
        let workers = tokio::runtime::Handle::current().metrics().num_workers();
        let asked = self
            .config
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("io-threads"));
        if asked && io_threads != workers {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "io-threads {io_threads} asked for, but the runtime the server starts on has \
                     {workers} worker thread(s): build it with Server::runtime, or use \
                     start_blocking"
                ),
            ));
        }
        shared.config.set("io-threads", &workers.to_string()).ok();
        // `aclfile`: its users, before any client connects (Redis exits on an error in it).
        if let Some(file) = shared.config.get("aclfile").filter(|f| !f.is_empty()) {
            shared
                .acl
                .load_file(&file)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        }
        if shared.config.get("appendonly").as_deref() == Some("yes") {
            crate::restart::open_aof(&shared).await?;
        } else if self.load_snapshot {
            crate::restart::load_snapshot(&shared).await?;
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
        tokio::spawn(crate::clients_cron::run(shared.clone(), done_tx.clone()));
        tokio::spawn(cmd::save_points::run(shared.clone(), done_tx.clone()));
        tokio::spawn(crate::expire::active_expiry(shared.clone(), done_tx));
        Ok(ServerHandle {
            shared,
            addr,
            done: parking_lot::Mutex::new(Some(done_rx)),
        })
    }

    /// The `io-threads` this builder was given (the last one), or Redis's default of 1: the
    /// worker count to build its runtime with ([`Server::runtime`]). A value that is not a
    /// number counts as 1 here and is refused by [`Builder::start`].
    pub fn io_threads(&self) -> usize {
        self.config
            .iter()
            .rev()
            .find(|(k, _)| k.eq_ignore_ascii_case("io-threads"))
            .and_then(|(_, v)| v.trim().parse().ok())
            .unwrap_or(1)
    }

    /// Starts the server on a runtime of its own ([`Server::runtime`], with the `io-threads`
    /// given to the builder: one by default), for synchronous code and tests.
    pub fn start_blocking(self) -> std::io::Result<BlockingServer> {
        let rt = Server::runtime(self.io_threads())?;
        let handle = rt.block_on(self.start())?;
        Ok(BlockingServer {
            handle: Some(handle),
            rt: Some(rt),
        })
    }
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

/// A cheap, cloneable way to open in-process clients of one server later, without borrowing
/// its [`ServerHandle`]: a connection pool or a task that outlives the borrow keeps one.
#[derive(Clone, Debug)]
pub struct Connector {
    shared: Arc<Shared>,
}

impl Connector {
    /// A new in-process client, as [`ServerHandle::client`] gives.
    pub fn client(&self) -> LocalClient {
        LocalClient::new(self.shared.clone())
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

    /// Server-wide state, for the crate's own modules.
    #[cfg(any(test, feature = "internals"))]
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// A client that runs commands in-process, without a socket.
    pub fn client(&self) -> LocalClient {
        LocalClient::new(self.shared.clone())
    }

    /// A cloneable source of in-process clients of this server (see [`Connector`]).
    pub fn connector(&self) -> Connector {
        Connector {
            shared: self.shared.clone(),
        }
    }

    /// Stops accepting connections, closes every connection and waits for their tasks. A
    /// running AOF rewrite is given up (the file stays as it was), as when the process exits.
    pub async fn shutdown(&self) {
        cmd::bgrewriteaof::give_up(&self.shared);
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
        crate::replica::start_replica(&self.shared, master.ip().to_string(), master.port());
    }

    /// Makes this server a replica of the master at `host:port`, a name or an address (like
    /// `REPLICAOF host port`; the name is resolved on each connection attempt).
    pub fn replicate_from_host(&self, host: impl Into<String>, port: u16) {
        crate::replica::start_replica(&self.shared, host.into(), port);
    }

    /// Promotes a replica to master (like `REPLICAOF NO ONE`).
    pub fn promote(&self) {
        crate::promote::stop_replica(&self.shared);
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
    /// append-only file when `aof` is true or empty when false.
    /// Resolves once it serves again.
    pub async fn restart(&self, aof: bool) -> std::io::Result<()> {
        crate::restart::restart(&self.shared, aof).await
    }

    /// Cuts the power to this node's machine and boots it again: the process dies as in
    /// [`restart`](Self::restart), and its append-only file loses every byte that was only in
    /// the kernel's page cache, as a real power cut (or kernel panic) loses it. Then the node
    /// starts, replaying what is left of its AOF (or empty, when it kept none).
    ///
    /// Which bytes were on disk follows `appendfsync`, on the server's clock: `always`,
    /// everything acknowledged; `everysec`, what Redis's once-a-second fsync had covered (a
    /// write less than a second after the previous fsync waits for the next); `no`, what the
    /// kernel had written back (modelled as Linux's 30-second `dirty_expire`). With a virtual
    /// clock the outcome depends only on how far the clock was advanced.
    /// Resolves once the node serves again.
    pub async fn power_loss(&self) -> std::io::Result<PowerLoss> {
        crate::restart::power_loss(&self.shared).await
    }

    /// Whether this replica's link to its master is up (false for a master).
    pub fn replication_link_up(&self) -> bool {
        self.shared
            .replication
            .master_link()
            .is_some_and(|(_, _, up, _)| up)
    }

    /// What `redis-server` does when the process receives `signal`: the shutdown `SHUTDOWN`
    /// runs, with the options `shutdown-on-sigterm` or `shutdown-on-sigint` name (`default`:
    /// write the snapshot file while save points are set; `save`, `nosave`, `now`, `force`
    /// as `SHUTDOWN`'s options). A running AOF rewrite or background save is given up and the
    /// AOF fsynced. It waits for the running command or transaction to finish and holds the
    /// others back, so the snapshot is one moment's keyspace, and the connections are closed
    /// before any command waiting behind it runs. Returns whether the server is now shutting
    /// down: `false` when the snapshot could not be written, or while an AOF turned on at run
    /// time is still being written for the first time (both without `force`), and then it
    /// goes on serving, as Redis does. The caller then stops it with
    /// [`shutdown`](Self::shutdown).
    pub async fn stop_on_signal(&self, signal: StopSignal) -> bool {
        let (name, param) = match signal {
            StopSignal::Terminate => ("SIGTERM", "shutdown-on-sigterm"),
            StopSignal::Interrupt => ("SIGINT", "shutdown-on-sigint"),
        };
        tracing::info!("Received {name} scheduling shutdown...");
        let flags = self
            .shared
            .config
            .get(param)
            .and_then(|v| crate::config::ShutdownFlags::parse(&v).ok())
            .unwrap_or_default();
        // Past `busy-reply-threshold` a script would hold the gate for as long as it runs: go
        // on without it then, as `SHUTDOWN NOSAVE` may run beside a busy script.
        let gate = self
            .shared
            .gate
            .exclusive(self.shared.config.busy_reply_threshold())
            .await
            .ok();
        tracing::info!("User requested shutdown...");
        let prepared = cmd::server::prepare_shutdown(&self.shared, flags);
        if prepared.is_err() {
            tracing::warn!(
                "Errors trying to shut down the server. Check the logs for more information."
            );
            return false;
        }
        self.shared.request_shutdown();
        drop(gate);
        tracing::info!("latchkey is now ready to exit, bye bye...");
        true
    }

    /// Resolves when the server has been asked to shut down (e.g. by `SHUTDOWN`).
    pub async fn wait_for_shutdown(&self) {
        let mut rx = self.shared.shutdown_signal();
        let _ = rx.wait_for(|s| *s).await;
    }
}

/// A signal that asks a server process to stop, for [`ServerHandle::stop_on_signal`]: the two
/// `redis-server` answers with a clean shutdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    /// SIGTERM: what `kill`, systemd and container runtimes send.
    Terminate,
    /// SIGINT: Ctrl-C in a terminal.
    Interrupt,
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
    /// A new in-process client of the server that owns `shared`.
    pub(crate) fn new(shared: Arc<Shared>) -> LocalClient {
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
        let reply = cmd::execute(&self.shared, &mut self.client, args).await;
        // Invalidations of keys the command changed itself come after its reply.
        for f in self.client.after_reply.drain(..) {
            let size = crate::pubsub::approx_size(&f);
            self.client.push.send(f, size);
        }
        reply
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
        crate::state::cleanup_client(&self.shared, &mut self.client);
    }
}
