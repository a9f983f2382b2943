//! The WebAssembly component: the `locks` interface of `wit/latchkey.wit`, implemented with the
//! same lock code as the native crate, over a [`Transport`] made of the host's `redis` imports.
//!
//! Host calls are synchronous from the component's side (the host suspends it while a call is
//! pending), so every future the locks create is ready as soon as it is polled; a minimal
//! executor drives them.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::locks::{self, Extended, Released};
use crate::{Error, Reply, Transport};

wit_bindgen::generate!({
    world: "lock-client",
    path: "wit",
});

use exports::latchkey::locks::locks as api;
use latchkey::locks::redis as host;

/// Runs a future whose every await is a (synchronous) host call.
fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

/// Rebuilds a reply tree from the host's prefix-ordered frames.
fn build(frames: &mut std::slice::Iter<'_, host::Frame>) -> Reply {
    match frames.next() {
        None | Some(host::Frame::Nil) => Reply::Nil,
        Some(host::Frame::Integer(i)) => Reply::Int(*i),
        Some(host::Frame::Bulk(b)) => Reply::Bulk(b.clone()),
        Some(host::Frame::Status(s)) => Reply::Status(s.clone()),
        Some(host::Frame::Error(e)) => Reply::Error(e.clone()),
        Some(host::Frame::Double(d)) => Reply::Double(*d),
        Some(host::Frame::Boolean(b)) => Reply::Bool(*b),
        Some(host::Frame::Array(n)) => Reply::Array((0..*n).map(|_| build(frames)).collect()),
        Some(host::Frame::Pairs(n)) => {
            Reply::Map((0..*n).map(|_| (build(frames), build(frames))).collect())
        }
    }
}

/// The transport made of the host's imports.
#[derive(Debug, Clone, Copy)]
pub struct HostTransport;

/// A subscription held by the host.
#[derive(Debug)]
pub struct HostSubscription(u64);

impl Drop for HostSubscription {
    fn drop(&mut self) {
        host::unsubscribe(self.0);
    }
}

fn origin() -> Instant {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

impl Transport for HostTransport {
    type Subscription = HostSubscription;

    async fn command(&self, args: Vec<Vec<u8>>) -> Result<Reply, Error> {
        let frames = host::command(&args).map_err(Error::Transport)?;
        Ok(build(&mut frames.iter()))
    }

    async fn subscribe(&self, channel: &[u8]) -> Result<HostSubscription, Error> {
        host::subscribe(channel)
            .map(HostSubscription)
            .map_err(Error::Transport)
    }

    async fn wait_message<'a>(&'a self, sub: &'a mut HostSubscription, timeout: Duration) -> bool {
        host::wait_message(sub.0, timeout.as_millis() as u64)
    }

    async fn sleep(&self, d: Duration) {
        host::sleep(d.as_millis() as u64)
    }

    fn now(&self) -> Duration {
        origin().elapsed()
    }

    fn random_bytes(&self, buf: &mut [u8]) {
        // wasi:random from the host, through getrandom.
        if getrandom::fill(buf).is_err() {
            let t = origin().elapsed().as_nanos().to_le_bytes();
            for (i, b) in buf.iter_mut().enumerate() {
                *b = t[i % t.len()];
            }
        }
    }
}

fn text(e: Error) -> String {
    e.to_string()
}

fn to_wit(l: locks::Lease) -> api::Lease {
    api::Lease {
        key: l.key,
        token: l.token,
        ttl_ms: l.ttl.as_millis() as u64,
    }
}

fn from_wit(l: api::Lease) -> locks::Lease {
    locks::Lease {
        key: l.key,
        token: l.token,
        acquired_at: HostTransport.now(),
        ttl: Duration::from_millis(l.ttl_ms),
    }
}

fn released(r: Released) -> api::Released {
    match r {
        Released::Released => api::Released::Released,
        Released::AlreadyExpired => api::Released::AlreadyExpired,
        Released::NotOwner => api::Released::NotOwner,
    }
}

struct Component;

/// `simple-lock`.
pub struct SimpleLock(locks::SimpleLock<HostTransport>);

impl api::GuestSimpleLock for SimpleLock {
    fn new(name: String) -> Self {
        SimpleLock(locks::SimpleLock::new(HostTransport, &name))
    }

    fn try_acquire(&self, ttl_ms: u64) -> Result<Option<api::Lease>, String> {
        block_on(self.0.try_acquire(Duration::from_millis(ttl_ms)))
            .map(|l| l.map(to_wit))
            .map_err(text)
    }

    fn acquire_wait(&self, ttl_ms: u64, deadline_ms: u64) -> Result<Option<api::Lease>, String> {
        block_on(self.0.acquire_wait(
            Duration::from_millis(ttl_ms),
            Duration::from_millis(deadline_ms),
            locks::Backoff::default(),
        ))
        .map(|l| l.map(to_wit))
        .map_err(text)
    }

    fn release(&self, lease: api::Lease) -> Result<api::Released, String> {
        block_on(self.0.release(&from_wit(lease)))
            .map(released)
            .map_err(text)
    }

    fn extend(&self, lease: api::Lease, ttl_ms: u64) -> Result<api::Extended, String> {
        let mut l = from_wit(lease);
        block_on(self.0.extend(&mut l, Duration::from_millis(ttl_ms)))
            .map(|e| match e {
                Extended::Extended => api::Extended::Extended,
                Extended::AlreadyExpired => api::Extended::AlreadyExpired,
                Extended::NotOwner => api::Extended::NotOwner,
            })
            .map_err(text)
    }
}

/// `fenced-lock`.
pub struct FencedLock(locks::FencedLock<HostTransport>);

impl api::GuestFencedLock for FencedLock {
    fn new(name: String) -> Self {
        FencedLock(locks::FencedLock::new(HostTransport, &name))
    }

    fn try_acquire(&self, ttl_ms: u64) -> Result<Option<(api::Lease, i64)>, String> {
        block_on(self.0.try_acquire(Duration::from_millis(ttl_ms)))
            .map(|l| l.map(|f| (to_wit(f.lease), f.fence)))
            .map_err(text)
    }

    fn release(&self, lease: api::Lease) -> Result<api::Released, String> {
        let l = from_wit(lease);
        let fenced = locks::FencedLease { lease: l, fence: 0 };
        block_on(self.0.release(&fenced))
            .map(released)
            .map_err(text)
    }
}

/// `semaphore`.
pub struct Semaphore(locks::Semaphore<HostTransport>);

impl api::GuestSemaphore for Semaphore {
    fn new(name: String, permits: u32) -> Self {
        Semaphore(locks::Semaphore::new(HostTransport, &name, permits))
    }

    fn try_acquire(&self, ttl_ms: u64) -> Result<Option<String>, String> {
        block_on(self.0.try_acquire(Duration::from_millis(ttl_ms)))
            .map(|p| p.map(|p| p.id))
            .map_err(text)
    }

    fn release(&self, permit: String) -> Result<bool, String> {
        block_on(self.0.release(&locks::Permit { id: permit })).map_err(text)
    }
}

impl api::Guest for Component {
    type SimpleLock = SimpleLock;
    type FencedLock = FencedLock;
    type Semaphore = Semaphore;
}

export!(Component);
