//! `reentrant-lock`: [`locks::ReentrantLock`]. The handle carries its owner id, which a host
//! can take out (`owner`) and put back (`resume`) to act as the same owner later.

use super::{api, ms, run, HostTransport};
use crate::locks::{self, ReentrantRelease};

/// The exported reentrant lock: the native lock and the name it was made with (to rebuild
/// the `reentrant-owner` record).
pub struct ReentrantLock {
    lock: locks::ReentrantLock<HostTransport>,
    name: String,
}

impl api::GuestReentrantLock for ReentrantLock {
    fn new(name: String) -> Self {
        let lock = locks::ReentrantLock::new(HostTransport, &name);
        ReentrantLock { lock, name }
    }

    fn resume(owner: api::ReentrantOwner) -> api::ReentrantLock {
        let lock = locks::ReentrantLock::with_owner(HostTransport, &owner.name, owner.owner);
        api::ReentrantLock::new(ReentrantLock {
            lock,
            name: owner.name,
        })
    }

    fn owner(&self) -> api::ReentrantOwner {
        api::ReentrantOwner {
            name: self.name.clone(),
            owner: self.lock.owner().to_string(),
        }
    }

    fn try_acquire(&self, ttl_ms: u64) -> Result<api::ReentrantAcquired, String> {
        // Natively: `None` when ours, `Some(holder's remaining TTL)` when someone else's.
        run(self.lock.try_acquire(ms(ttl_ms))).map(|left| match left {
            None => api::ReentrantAcquired::Acquired,
            Some(left) => api::ReentrantAcquired::Held(left.as_millis() as u64),
        })
    }

    fn release(&self, ttl_ms: u64) -> Result<api::ReentrantReleased, String> {
        run(self.lock.release(ms(ttl_ms))).map(|r| match r {
            ReentrantRelease::StillHeld => api::ReentrantReleased::StillHeld,
            ReentrantRelease::Released => api::ReentrantReleased::Released,
            ReentrantRelease::NotOwner => api::ReentrantReleased::NotOwner,
        })
    }

    fn hold_count(&self) -> Result<i64, String> {
        run(self.lock.hold_count())
    }

    fn renew(&self, ttl_ms: u64) -> Result<bool, String> {
        run(self.lock.renew(ms(ttl_ms)))
    }
}
