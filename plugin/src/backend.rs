//! Where tenants' commands go: one trait, two kinds of server behind it.
//!
//! - the latchkey server in the same process (`<dyn Backend>::local`): commands run through
//!   in-process clients, with no socket;
//! - real Redis through redis-rs (`<dyn Backend>::redis`, `<dyn Backend>::sentinel`,
//!   `<dyn Backend>::cluster`): a multiplexed connection (or a slot-routing cluster connection)
//!   for commands and one shared pub/sub connection.
//!
//! Both are the lock client's own native transports ([`latchkey_client::native`]), so the host
//! does not carry a second Redis client. The [`Transport`] trait they implement is not
//! object-safe (it has an associated subscription type), so [`Backend`] wraps any transport
//! behind boxed futures; tenants share one `Arc<dyn Backend>`.
//!
//! A tenant's own commands, the hot path, do not box a future each: a command runs in a
//! [`CommandSlot`], an allocation taken from a small per-thread pool and given back when the
//! command ends, for the next command of any tenant to reuse ([`Backend::command_in`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use latchkey_client::native::{LocalTransport, RedisTransport};
use latchkey_client::{Reply, Transport};
use latchkey_server::ServerHandle;
use tokio_util::sync::ReusableBoxFuture;

/// A boxed, sendable future: what the object-safe backend methods return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A server the host sends (already namespaced) tenant commands to.
pub trait Backend: Send + Sync + 'static {
    /// Runs one command. Error replies are `Ok(Reply::Error)`; `Err` is a connection failure.
    fn command(&self, args: Vec<Vec<u8>>) -> BoxFuture<'_, Result<Reply, String>>;

    /// Subscribes to `channel`; messages published after this returns are not missed.
    fn subscribe(&self, channel: Vec<u8>) -> BoxFuture<'_, Result<Box<dyn Subscription>, String>>;

    /// Runs one command that may block the server's side of its connection (`WAIT`) on a
    /// connection no other command uses meanwhile. The in-process server gives every command
    /// a client of its own already, so by default this is [`Backend::command`].
    fn command_alone(&self, args: Vec<Vec<u8>>) -> BoxFuture<'_, Result<Reply, String>> {
        self.command(args)
    }

    /// [`Backend::command`], started in `slot` (then run with [`CommandSlot::run`]): the
    /// command's future goes where the slot's previous command was, without a new allocation
    /// when it is the same kind of future. The default runs [`Backend::command`]'s boxed
    /// future there; a backend whose futures are large (the in-process server's are
    /// kilobytes) puts its own future in the slot instead, which saves allocating and freeing
    /// it on every command.
    fn command_in(self: Arc<Self>, args: Vec<Vec<u8>>, slot: &mut CommandSlot) {
        slot.put(async move { self.command(args).await });
    }

    /// Where the lease keeper sends its renewals: a connection of their own when the backend
    /// multiplexes tenants' commands over one (real Redis), so that a renewal never queues
    /// behind a tenant's slow command; `None` means this backend itself will do.
    fn keeper(&self) -> Option<Arc<dyn Backend>> {
        None
    }
}

/// Where a command runs ([`Backend::command_in`]): a heap allocation reused from one command
/// to the next.
///
/// A command's future holds everything the command keeps across its awaits; for the
/// in-process server, several kilobytes. Boxing it anew for every tenant command cost one
/// large allocation and its free each time (the C allocator serves sizes past one kilobyte
/// from its slower bins, and tidies them up as it goes): about a twentieth of a wasm lock
/// cycle's instructions. A command takes a slot from its thread's pool instead
/// ([`CommandSlot::take`]) and gives it back when done ([`CommandSlot::give_back`]): the
/// slots in use are the commands running at once, not the instances alive (whose memory an
/// idle slot each would add to).
#[derive(Default)]
pub struct CommandSlot {
    fut: Option<ReusableBoxFuture<'static, Result<Reply, String>>>,
}

thread_local! {
    /// Idle slots kept for reuse on this thread, at most [`IDLE_SLOTS`]: a command takes one on
    /// the thread it starts on and gives it back on the one it ends on, with no lock.
    static IDLE: std::cell::RefCell<Vec<CommandSlot>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// How many idle slots each thread keeps (a few kilobytes each); more are freed.
const IDLE_SLOTS: usize = 16;

impl CommandSlot {
    /// A slot from this thread's pool, or a new one (empty: its first command allocates).
    pub fn take() -> CommandSlot {
        IDLE.with(|idle| idle.borrow_mut().pop())
            .unwrap_or_default()
    }

    /// Gives the slot back to this thread's pool once its command is done, or frees it if the
    /// pool is full. A slot dropped instead (say, with its command unfinished) frees its
    /// allocation.
    pub fn give_back(self) {
        IDLE.with(|idle| {
            let mut idle = idle.borrow_mut();
            if idle.len() < IDLE_SLOTS {
                idle.push(self);
            }
        });
    }

    /// Puts `command` in the slot, dropping the finished command before it. The allocation is
    /// reused when the new future has the same size and alignment as the old one.
    pub fn put(&mut self, command: impl Future<Output = Result<Reply, String>> + Send + 'static) {
        match &mut self.fut {
            Some(f) => f.set(command),
            None => self.fut = Some(ReusableBoxFuture::new(command)),
        }
    }

    /// The command last put in the slot, to await. Whoever drops the slot drops an unfinished
    /// command with it, at once, as a boxed future would be: a command can hold the server's
    /// locks across an await (a host function owns its slot, so an abandoned guest call ends
    /// its command).
    pub fn run(&mut self) -> &mut ReusableBoxFuture<'static, Result<Reply, String>> {
        self.fut.get_or_insert_with(|| {
            ReusableBoxFuture::new(std::future::ready(Err("no command was started".into())))
        })
    }
}

/// A live subscription; dropping it unsubscribes.
pub trait Subscription: Send {
    /// Waits up to `timeout` for a message; true if one arrived.
    fn wait(&mut self, timeout: Duration) -> BoxFuture<'_, bool>;
}

impl dyn Backend {
    /// The latchkey server `server`, in-process (it must outlive the backend's use).
    pub fn local(server: &ServerHandle) -> Arc<dyn Backend> {
        Arc::new(Wrap(LocalTransport::new(server)))
    }

    /// A single Redis node at `redis://host:port`.
    pub async fn redis(url: &str) -> Result<Arc<dyn Backend>, String> {
        let url = url.to_string();
        Redis::open(Arc::new(
            move || -> BoxFuture<'static, Result<RedisTransport, latchkey_client::Error>> {
                let url = url.clone();
                Box::pin(async move { RedisTransport::connect(&url).await })
            },
        ))
        .await
    }

    /// The master that the Sentinels at `sentinels` report for `service`.
    pub async fn sentinel(sentinels: &[String], service: &str) -> Result<Arc<dyn Backend>, String> {
        let (sentinels, service) = (sentinels.to_vec(), service.to_string());
        Redis::open(Arc::new(
            move || -> BoxFuture<'static, Result<RedisTransport, latchkey_client::Error>> {
                let (sentinels, service) = (sentinels.clone(), service.clone());
                Box::pin(
                    async move { RedisTransport::connect_sentinel(&sentinels, &service).await },
                )
            },
        ))
        .await
    }

    /// A Redis Cluster reached through any of `nodes`; commands are routed by slot (a
    /// tenant's lock keys keep one hash tag, so a lock's scripts stay in one slot).
    pub async fn cluster(nodes: &[String]) -> Result<Arc<dyn Backend>, String> {
        let nodes = nodes.to_vec();
        Redis::open(Arc::new(
            move || -> BoxFuture<'static, Result<RedisTransport, latchkey_client::Error>> {
                let nodes = nodes.clone();
                Box::pin(async move { RedisTransport::connect_cluster(&nodes).await })
            },
        ))
        .await
    }
}

/// Opens a fresh set of connections to the same Redis deployment.
type Opener = Arc<
    dyn Fn() -> BoxFuture<'static, Result<RedisTransport, latchkey_client::Error>> + Send + Sync,
>;

/// The channel of the `PUBLISH` sent before a tenant's `WAIT` (see `Redis::command_alone`):
/// outside every tenant's namespace, since tenants' channels start with their name and a `:`.
const WAIT_MARK: &[u8] = b"__latchkey-host__:wait";

/// How many idle connections for blocking commands a Redis backend keeps for reuse.
const ALONE_IDLE: usize = 4;

/// Real Redis: tenants' commands multiplexed over one connection, the keeper's renewals over
/// another, and each blocking command on a connection of its own (taken from a few idle ones,
/// or opened).
struct Redis {
    shared: Wrap<RedisTransport>,
    keeper: Arc<dyn Backend>,
    open: Opener,
    idle: std::sync::Mutex<Vec<RedisTransport>>,
}

impl Redis {
    async fn open(open: Opener) -> Result<Arc<dyn Backend>, String> {
        let shared = Wrap(open().await.map_err(|e| e.to_string())?);
        let keeper: Arc<dyn Backend> = Arc::new(Wrap(open().await.map_err(|e| e.to_string())?));
        Ok(Arc::new(Redis {
            shared,
            keeper,
            open,
            idle: std::sync::Mutex::new(Vec::new()),
        }))
    }
}

impl Backend for Redis {
    fn command(&self, args: Vec<Vec<u8>>) -> BoxFuture<'_, Result<Reply, String>> {
        self.shared.command(args)
    }

    fn command_in(self: Arc<Self>, args: Vec<Vec<u8>>, slot: &mut CommandSlot) {
        slot.put(async move { self.shared.0.command(args).await.map_err(|e| e.to_string()) });
    }

    fn subscribe(&self, channel: Vec<u8>) -> BoxFuture<'_, Result<Box<dyn Subscription>, String>> {
        self.shared.subscribe(channel)
    }

    fn command_alone(&self, args: Vec<Vec<u8>>) -> BoxFuture<'_, Result<Reply, String>> {
        Box::pin(async move {
            let idle = self.idle.lock().expect("idle connections").pop();
            let conn = match idle {
                Some(c) => c,
                None => (self.open)().await.map_err(|e| e.to_string())?,
            };
            // `WAIT` counts the replicas that acknowledged this connection's last write, and
            // this connection made none: it would answer at once with every replica. The
            // tenant's write went over the shared connection and has been answered, so it is
            // in the stream already; a `PUBLISH` (propagated to replicas, on no tenant's
            // channel) makes this connection's last write come after it.
            if args
                .first()
                .is_some_and(|c| c.eq_ignore_ascii_case(b"wait"))
            {
                let mark = vec![b"PUBLISH".to_vec(), WAIT_MARK.to_vec(), Vec::new()];
                if let Err(e) = conn.command(mark).await {
                    return Err(e.to_string());
                }
            }
            let reply = conn.command(args).await;
            // A connection is reused only once its command has answered (the caller's timeout
            // may drop this future earlier: then the connection is dropped with it).
            let mut idle = self.idle.lock().expect("idle connections");
            if reply.is_ok() && idle.len() < ALONE_IDLE {
                idle.push(conn);
            }
            reply.map_err(|e| e.to_string())
        })
    }

    fn keeper(&self) -> Option<Arc<dyn Backend>> {
        Some(self.keeper.clone())
    }
}

/// Any lock-client transport, as a [`Backend`].
struct Wrap<T>(T);

/// A transport's subscription, with the transport it waits through.
struct WrapSub<T: Transport> {
    t: T,
    sub: T::Subscription,
}

impl<T: Transport + Clone> Backend for Wrap<T> {
    fn command(&self, args: Vec<Vec<u8>>) -> BoxFuture<'_, Result<Reply, String>> {
        Box::pin(async move { self.0.command(args).await.map_err(|e| e.to_string()) })
    }

    fn command_in(self: Arc<Self>, args: Vec<Vec<u8>>, slot: &mut CommandSlot) {
        slot.put(async move { self.0.command(args).await.map_err(|e| e.to_string()) });
    }

    fn subscribe(&self, channel: Vec<u8>) -> BoxFuture<'_, Result<Box<dyn Subscription>, String>> {
        Box::pin(async move {
            let sub = self
                .0
                .subscribe(&channel)
                .await
                .map_err(|e| e.to_string())?;
            Ok(Box::new(WrapSub {
                t: self.0.clone(),
                sub,
            }) as Box<dyn Subscription>)
        })
    }
}

impl<T: Transport + Clone> Subscription for WrapSub<T> {
    fn wait(&mut self, timeout: Duration) -> BoxFuture<'_, bool> {
        Box::pin(self.t.wait_message(&mut self.sub, timeout))
    }
}
