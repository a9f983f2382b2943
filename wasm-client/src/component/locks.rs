//! The `locks` interface the component exports: each resource wraps the lock of the same name
//! from [`crate::locks`], driven over [`HostTransport`].

use std::time::Duration;

use super::transport::HostTransport;
use super::{api, block_on, Component};
use crate::locks::{self, Extended, Released};
use crate::{Error, Transport};

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
