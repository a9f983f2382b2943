//! The `locks` interface the component exports: each resource wraps the lock of the same name
//! from [`crate::locks`], driven over [`HostTransport`] (RedLock over the host's quorum nodes,
//! [`super::transport::HostNodes`]). The simple, fenced and semaphore
//! resources live here with the conversions every resource shares; the others have a file
//! each under `locks/`.

use std::sync::Arc;
use std::time::Duration;

use super::transport::HostTransport;
use super::{api, block_on, Component};
use crate::locks::{self, Extended, Released};
use crate::metrics::Metrics;
use crate::Error;

mod fair;
mod multi;
mod redlock;
mod reentrant;
mod replicated;
mod rwlock;

pub use fair::FairLock;
pub use multi::MultiLock;
pub use redlock::RedLock;
pub use reentrant::ReentrantLock;
pub use replicated::ReplicatedLock;
pub use rwlock::RwLock;

/// Milliseconds from the WIT side as a [`Duration`].
fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// Runs one lock operation to completion, turning a transport failure into the `err` string
/// of the WIT `result`.
fn run<T>(f: impl std::future::Future<Output = Result<T, Error>>) -> Result<T, String> {
    block_on(f).map_err(|e| e.to_string())
}

/// A native lease as the WIT record.
fn to_wit(l: locks::Lease) -> api::Lease {
    api::Lease {
        key: l.key,
        token: l.token,
        ttl_ms: l.ttl.as_millis() as u64,
    }
}

/// A WIT lease back as a native one. The acquisition time (which the WIT lease does not
/// carry) only feeds metrics, which the component's locks keep off ([`Metrics::off`]): zero,
/// without asking the host for the time.
fn from_wit(l: api::Lease) -> locks::Lease {
    locks::Lease {
        key: l.key,
        token: l.token,
        acquired_at: Duration::ZERO,
        ttl: ms(l.ttl_ms),
    }
}

fn released(r: Released) -> api::Released {
    match r {
        Released::Released => api::Released::Released,
        Released::AlreadyExpired => api::Released::AlreadyExpired,
        Released::NotOwner => api::Released::NotOwner,
    }
}

/// `simple-lock`: [`locks::SimpleLock`].
pub struct SimpleLock(locks::SimpleLock<HostTransport>);

impl api::GuestSimpleLock for SimpleLock {
    fn new(name: String) -> Self {
        let lock = locks::SimpleLock::new(HostTransport, &name);
        SimpleLock(lock.with_metrics(Arc::new(Metrics::off())))
    }

    fn try_acquire(&self, ttl_ms: u64) -> Result<Option<api::Lease>, String> {
        run(self.0.try_acquire(ms(ttl_ms))).map(|l| l.map(to_wit))
    }

    fn acquire_wait(&self, ttl_ms: u64, deadline_ms: u64) -> Result<Option<api::Lease>, String> {
        let backoff = locks::Backoff::default();
        run(self.0.acquire_wait(ms(ttl_ms), ms(deadline_ms), backoff)).map(|l| l.map(to_wit))
    }

    fn acquire_wait_backoff(
        &self,
        ttl_ms: u64,
        deadline_ms: u64,
        backoff: api::Backoff,
    ) -> Result<Option<api::Lease>, String> {
        let backoff = locks::Backoff {
            base: ms(backoff.base_ms),
            max: ms(backoff.max_ms),
        };
        run(self.0.acquire_wait(ms(ttl_ms), ms(deadline_ms), backoff)).map(|l| l.map(to_wit))
    }

    fn release(&self, lease: api::Lease) -> Result<api::Released, String> {
        run(self.0.release(&from_wit(lease))).map(released)
    }

    fn extend(&self, lease: api::Lease, ttl_ms: u64) -> Result<api::Extended, String> {
        let mut l = from_wit(lease);
        run(self.0.extend(&mut l, ms(ttl_ms))).map(|e| match e {
            Extended::Extended => api::Extended::Extended,
            Extended::AlreadyExpired => api::Extended::AlreadyExpired,
            Extended::NotOwner => api::Extended::NotOwner,
        })
    }

    fn holder(&self) -> Result<Option<String>, String> {
        run(self.0.holder())
    }

    fn pttl(&self) -> Result<Option<u64>, String> {
        run(self.0.pttl()).map(|d| d.map(|d| d.as_millis() as u64))
    }
}

/// `fenced-lock`: [`locks::FencedLock`].
pub struct FencedLock(locks::FencedLock<HostTransport>);

/// A native fenced lease as the WIT pair (lease, fencing token).
fn fenced_to_wit(f: locks::FencedLease) -> (api::Lease, i64) {
    (to_wit(f.lease), f.fence)
}

impl api::GuestFencedLock for FencedLock {
    fn new(name: String) -> Self {
        FencedLock(locks::FencedLock::new(HostTransport, &name))
    }

    fn try_acquire(&self, ttl_ms: u64) -> Result<Option<(api::Lease, i64)>, String> {
        run(self.0.try_acquire(ms(ttl_ms))).map(|l| l.map(fenced_to_wit))
    }

    fn acquire_wait(
        &self,
        ttl_ms: u64,
        deadline_ms: u64,
    ) -> Result<Option<(api::Lease, i64)>, String> {
        let backoff = locks::Backoff::default();
        run(self.0.acquire_wait(ms(ttl_ms), ms(deadline_ms), backoff)).map(|l| l.map(fenced_to_wit))
    }

    fn release(&self, lease: api::Lease) -> Result<api::Released, String> {
        // Release checks the owner token only; the fencing token plays no part.
        let fenced = locks::FencedLease {
            lease: from_wit(lease),
            fence: 0,
        };
        run(self.0.release(&fenced)).map(released)
    }
}

/// `semaphore`: [`locks::Semaphore`].
pub struct Semaphore(locks::Semaphore<HostTransport>);

impl api::GuestSemaphore for Semaphore {
    fn new(name: String, permits: u32) -> Self {
        Semaphore(locks::Semaphore::new(HostTransport, &name, permits))
    }

    fn try_acquire(&self, ttl_ms: u64) -> Result<Option<String>, String> {
        run(self.0.try_acquire(ms(ttl_ms))).map(|p| p.map(|p| p.id))
    }

    fn release(&self, permit: String) -> Result<bool, String> {
        run(self.0.release(&locks::Permit { id: permit }))
    }
}

impl api::Guest for Component {
    type SimpleLock = SimpleLock;
    type FencedLock = FencedLock;
    type Semaphore = Semaphore;
    type ReentrantLock = ReentrantLock;
    type FairLock = FairLock;
    type RwLock = RwLock;
    type MultiLock = MultiLock;
    type ReplicatedLock = ReplicatedLock;
    type RedLock = RedLock;
}
