//! The lock API as the conformance scenarios see it, so that one scenario runs unchanged with
//! the lock client compiled natively ([`Native`]) and with the lock client running inside a
//! WebAssembly component in the latchkey host (`crate::wasm_api`).
//!
//! Each lock kind is a small trait whose methods mirror the native lock's own; values that
//! cross it (leases, outcomes) are the native crate's types, which a wasm implementation
//! converts to and from the component's WIT records. Test code only: a transport failure
//! panics with its message instead of being returned.

use std::future::Future;
use std::time::Duration;

use latchkey_client::locks::{
    self, Backoff, Extended, FencedLease, Lease, LostReason, MultiLease, Permit, RedLease,
    ReentrantRelease, Released, ReplicatedAcquire, RwLease,
};
use latchkey_client::{Reply, Transport};

/// Shorthand for the futures the traits return: every one must be `Send` so that scenarios can
/// spawn contending tasks.
pub trait Fut<T>: Future<Output = T> + Send {}
impl<T, F: Future<Output = T> + Send> Fut<T> for F {}

/// The simple lock (`SET NX PX`; token-checked release and extend; waiting acquisition).
pub trait SimpleOps: Clone + Send + Sync + 'static {
    /// One attempt.
    fn try_acquire(&self, ttl: Duration) -> impl Fut<Option<Lease>>;
    /// Attempts until `deadline`, backing off, woken by unlock messages.
    fn acquire_wait(
        &self,
        ttl: Duration,
        deadline: Duration,
        backoff: Backoff,
    ) -> impl Fut<Option<Lease>>;
    /// Token-checked release.
    fn release(&self, lease: &Lease) -> impl Fut<Released>;
    /// Token-checked extension to `ttl`.
    fn extend(&self, lease: &mut Lease, ttl: Duration) -> impl Fut<Extended>;
    /// The token of whoever holds the lock now.
    fn holder(&self) -> impl Fut<Option<String>>;
    /// The lock's remaining time to live, if it is held.
    fn pttl(&self) -> impl Fut<Option<Duration>>;
}

/// The fencing lock: every acquisition carries a larger token.
pub trait FencedOps: Clone + Send + Sync + 'static {
    /// One attempt.
    fn try_acquire(&self, ttl: Duration) -> impl Fut<Option<FencedLease>>;
    /// Attempts until `deadline`.
    fn acquire_wait(
        &self,
        ttl: Duration,
        deadline: Duration,
        backoff: Backoff,
    ) -> impl Fut<Option<FencedLease>>;
    /// Token-checked release.
    fn release(&self, lease: &FencedLease) -> impl Fut<Released>;
}

/// The reentrant lock; one value of this type is one owner.
pub trait ReentrantOps: Clone + Send + Sync + 'static {
    /// Takes (or re-takes) the lock: `None` when this owner now holds it, else the holder's
    /// remaining TTL.
    fn try_acquire(&self, ttl: Duration) -> impl Fut<Option<Duration>>;
    /// Gives back one hold.
    fn release(&self, ttl: Duration) -> impl Fut<ReentrantRelease>;
    /// How many times this owner holds the lock.
    fn hold_count(&self) -> impl Fut<i64>;
}

/// The semaphore of N leased permits.
pub trait SemaphoreOps: Clone + Send + Sync + 'static {
    /// One attempt at a permit.
    fn try_acquire(&self, ttl: Duration) -> impl Fut<Option<Permit>>;
    /// Gives a permit back; false when it had already expired.
    fn release(&self, permit: &Permit) -> impl Fut<bool>;
}

/// Several keys locked all or none.
pub trait MultiOps: Clone + Send + Sync + 'static {
    /// One attempt at every key.
    fn try_acquire(&self, ttl: Duration) -> impl Fut<Option<MultiLease>>;
    /// Releases the keys still held; how many were.
    fn release(&self, lease: &MultiLease) -> impl Fut<i64>;
}

/// The read-write lock.
pub trait RwOps: Clone + Send + Sync + 'static {
    /// A shared hold.
    fn try_read(&self, ttl: Duration) -> impl Fut<Option<RwLease>>;
    /// The exclusive hold.
    fn try_write(&self, ttl: Duration) -> impl Fut<Option<RwLease>>;
    /// Gives a hold back; false when it was no longer held.
    fn release(&self, lease: &RwLease) -> impl Fut<bool>;
}

/// The fair (FIFO) lock.
pub trait FairOps: Clone + Send + Sync + 'static {
    /// Queues and waits up to `deadline` for this waiter's turn.
    fn acquire_wait(&self, ttl: Duration, deadline: Duration) -> impl Fut<Option<Lease>>;
    /// Queues once and leaves, like a waiter that died.
    fn enqueue_once(&self, ttl: Duration) -> impl Fut<Option<Duration>>;
    /// Token-checked release that wakes the queue.
    fn release(&self, lease: &Lease) -> impl Fut<Released>;
}

/// The lock confirmed by `WAIT`.
pub trait ReplicatedOps: Clone + Send + Sync + 'static {
    /// One attempt, confirmed or given up.
    fn try_acquire(&self, ttl: Duration) -> impl Fut<ReplicatedAcquire>;
}

/// RedLock over the leg's servers: its one server, a majority of one (natively a
/// [`locks::RedLock`] over a one-element `Vec`; in wasm the component's `red-lock` on a host
/// whose quorum is its one backend).
pub trait RedOps: Clone + Send + Sync + 'static {
    /// One attempt on every server.
    fn try_acquire(&self, ttl: Duration) -> impl Fut<Option<RedLease>>;
    /// Token-checked extension to `ttl` on every server: the renewed lease if a majority did.
    fn extend(&self, lease: &RedLease, ttl: Duration) -> impl Fut<Option<RedLease>>;
    /// Token-checked release on every server; how many released it.
    fn release(&self, lease: &RedLease) -> impl Fut<usize>;
}

/// A lock kept alive in the background, and the news of its loss.
pub trait WatchOps: Send + 'static {
    /// Whether the lease is known to be lost.
    fn is_lost(&mut self) -> impl Fut<bool>;
    /// Waits until the lease is lost.
    fn lost(&mut self) -> impl Fut<LostReason>;
}

/// The whole API: a factory of every lock kind, plus raw commands for the scenarios' own
/// bookkeeping (a counter, deleting a key behind a holder's back), run in the same namespace
/// as the locks.
pub trait Locks: Clone + Send + Sync + 'static {
    /// See [`SimpleOps`].
    type Simple: SimpleOps;
    /// See [`FencedOps`].
    type Fenced: FencedOps;
    /// See [`ReentrantOps`].
    type Reentrant: ReentrantOps;
    /// See [`SemaphoreOps`].
    type Semaphore: SemaphoreOps;
    /// See [`MultiOps`].
    type Multi: MultiOps;
    /// See [`RwOps`].
    type Rw: RwOps;
    /// See [`FairOps`].
    type Fair: FairOps;
    /// See [`ReplicatedOps`].
    type Replicated: ReplicatedOps;
    /// See [`WatchOps`].
    type Watch: WatchOps;
    /// See [`RedOps`].
    type Red: RedOps;

    /// The simple lock `name`.
    fn simple(&self, name: &str) -> Self::Simple;
    /// The fencing lock `name`.
    fn fenced(&self, name: &str) -> Self::Fenced;
    /// A new owner of the reentrant lock `name`.
    fn reentrant(&self, name: &str) -> Self::Reentrant;
    /// The semaphore `name` of `permits` permits.
    fn semaphore(&self, name: &str, permits: u32) -> Self::Semaphore;
    /// The keys `keys` (hash-tagged lock keys) locked together.
    fn multi(&self, keys: &[&str]) -> Self::Multi;
    /// The read-write lock `name`.
    fn rw(&self, name: &str) -> Self::Rw;
    /// The fair lock `name`, whose waiters check in every `heartbeat`.
    fn fair(&self, name: &str, heartbeat: Duration) -> Self::Fair;
    /// The lock `name` confirmed by `replicas` replicas within `wait`.
    fn replicated(&self, name: &str, replicas: i64, wait: Duration) -> Self::Replicated;
    /// The RedLock `name`, giving each server at most `node_timeout`.
    fn red(&self, name: &str, node_timeout: Duration) -> Self::Red;
    /// Takes the simple lock `name` for `ttl` and keeps it alive in the background (a
    /// watchdog natively, the host's lease keeper in wasm) until it is lost; none when held.
    fn acquire_watched(&self, name: &str, ttl: Duration) -> impl Fut<Option<Self::Watch>>;
    /// Runs one command in the locks' namespace.
    fn command(&self, args: Vec<Vec<u8>>) -> impl Fut<Reply>;
}

/// The lock client compiled natively, over any transport.
#[derive(Clone)]
pub struct Native<T>(pub T);

fn ok<V>(r: Result<V, latchkey_client::Error>) -> V {
    r.unwrap_or_else(|e| panic!("transport failed: {e}"))
}

/// Implements one trait method by forwarding to the native lock's method of the same name and
/// unwrapping its result.
macro_rules! forward {
    ($name:ident(&self $(, $arg:ident: $ty:ty)*) -> $out:ty) => {
        async fn $name(&self $(, $arg: $ty)*) -> $out {
            ok(self.$name($($arg),*).await)
        }
    };
}

impl<T: Transport + Clone> SimpleOps for locks::SimpleLock<T> {
    forward!(try_acquire(&self, ttl: Duration) -> Option<Lease>);
    forward!(acquire_wait(&self, ttl: Duration, deadline: Duration, backoff: Backoff) -> Option<Lease>);
    forward!(release(&self, lease: &Lease) -> Released);
    forward!(extend(&self, lease: &mut Lease, ttl: Duration) -> Extended);
    forward!(holder(&self) -> Option<String>);
    forward!(pttl(&self) -> Option<Duration>);
}

impl<T: Transport + Clone> FencedOps for locks::FencedLock<T> {
    forward!(try_acquire(&self, ttl: Duration) -> Option<FencedLease>);
    forward!(acquire_wait(&self, ttl: Duration, deadline: Duration, backoff: Backoff) -> Option<FencedLease>);
    forward!(release(&self, lease: &FencedLease) -> Released);
}

impl<T: Transport + Clone> ReentrantOps for locks::ReentrantLock<T> {
    forward!(try_acquire(&self, ttl: Duration) -> Option<Duration>);
    forward!(release(&self, ttl: Duration) -> ReentrantRelease);
    forward!(hold_count(&self) -> i64);
}

impl<T: Transport + Clone> SemaphoreOps for locks::Semaphore<T> {
    forward!(try_acquire(&self, ttl: Duration) -> Option<Permit>);
    forward!(release(&self, permit: &Permit) -> bool);
}

impl<T: Transport + Clone> MultiOps for locks::MultiLock<T> {
    forward!(try_acquire(&self, ttl: Duration) -> Option<MultiLease>);
    forward!(release(&self, lease: &MultiLease) -> i64);
}

impl<T: Transport + Clone> RwOps for locks::RwLock<T> {
    forward!(try_read(&self, ttl: Duration) -> Option<RwLease>);
    forward!(try_write(&self, ttl: Duration) -> Option<RwLease>);
    forward!(release(&self, lease: &RwLease) -> bool);
}

impl<T: Transport + Clone> FairOps for locks::FairLock<T> {
    forward!(acquire_wait(&self, ttl: Duration, deadline: Duration) -> Option<Lease>);
    forward!(enqueue_once(&self, ttl: Duration) -> Option<Duration>);
    forward!(release(&self, lease: &Lease) -> Released);
}

impl<T: Transport + Clone> ReplicatedOps for locks::ReplicatedLock<T> {
    forward!(try_acquire(&self, ttl: Duration) -> ReplicatedAcquire);
}

/// A native RedLock over the leg's one transport, with the lock's name.
#[derive(Clone)]
pub struct NativeRed<T: Transport + Clone> {
    lock: locks::RedLock<Vec<T>>,
    name: String,
}

impl<T: Transport + Clone> RedOps for NativeRed<T> {
    async fn try_acquire(&self, ttl: Duration) -> Option<RedLease> {
        ok(self.lock.acquire(&self.name, ttl).await)
    }
    async fn extend(&self, lease: &RedLease, ttl: Duration) -> Option<RedLease> {
        self.lock.extend(lease, ttl).await
    }
    async fn release(&self, lease: &RedLease) -> usize {
        self.lock.release(lease).await
    }
}

/// A native watchdog renewing one lease.
pub struct NativeWatch {
    _dog: locks::Watchdog,
    watch: locks::LeaseWatch,
}

impl WatchOps for NativeWatch {
    async fn is_lost(&mut self) -> bool {
        self.watch.is_lost()
    }

    async fn lost(&mut self) -> LostReason {
        self.watch.lost().await
    }
}

impl<T: Transport + Clone> Locks for Native<T> {
    type Simple = locks::SimpleLock<T>;
    type Fenced = locks::FencedLock<T>;
    type Reentrant = locks::ReentrantLock<T>;
    type Semaphore = locks::Semaphore<T>;
    type Multi = locks::MultiLock<T>;
    type Rw = locks::RwLock<T>;
    type Fair = locks::FairLock<T>;
    type Replicated = locks::ReplicatedLock<T>;
    type Watch = NativeWatch;
    type Red = NativeRed<T>;

    fn simple(&self, name: &str) -> Self::Simple {
        locks::SimpleLock::new(self.0.clone(), name)
    }
    fn fenced(&self, name: &str) -> Self::Fenced {
        locks::FencedLock::new(self.0.clone(), name)
    }
    fn reentrant(&self, name: &str) -> Self::Reentrant {
        locks::ReentrantLock::new(self.0.clone(), name)
    }
    fn semaphore(&self, name: &str, permits: u32) -> Self::Semaphore {
        locks::Semaphore::new(self.0.clone(), name, permits)
    }
    fn multi(&self, keys: &[&str]) -> Self::Multi {
        locks::MultiLock::new(self.0.clone(), keys)
    }
    fn rw(&self, name: &str) -> Self::Rw {
        locks::RwLock::new(self.0.clone(), name)
    }
    fn fair(&self, name: &str, heartbeat: Duration) -> Self::Fair {
        locks::FairLock::new(self.0.clone(), name, heartbeat)
    }
    fn replicated(&self, name: &str, replicas: i64, wait: Duration) -> Self::Replicated {
        locks::ReplicatedLock::new(self.0.clone(), name, replicas, wait)
    }
    fn red(&self, name: &str, node_timeout: Duration) -> Self::Red {
        NativeRed {
            lock: locks::RedLock::new(vec![self.0.clone()], node_timeout),
            name: name.into(),
        }
    }
    async fn acquire_watched(&self, name: &str, ttl: Duration) -> Option<NativeWatch> {
        let lease = ok(self.simple(name).try_acquire(ttl).await)?;
        let dog = locks::Watchdog::spawn(self.0.clone(), ttl);
        let watch = dog.watch(&lease);
        Some(NativeWatch { _dog: dog, watch })
    }
    async fn command(&self, args: Vec<Vec<u8>>) -> Reply {
        ok(self.0.command(args).await)
    }
}
