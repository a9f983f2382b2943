//! `fair-lock`: [`locks::FairLock`], waiters served in arrival order.

use super::{api, from_wit, ms, released, run, to_wit, HostTransport};
use crate::locks;

/// The exported fair lock.
pub struct FairLock(locks::FairLock<HostTransport>);

impl api::GuestFairLock for FairLock {
    fn new(name: String, heartbeat_ms: u64) -> Self {
        FairLock(locks::FairLock::new(HostTransport, &name, ms(heartbeat_ms)))
    }

    fn acquire_wait(&self, ttl_ms: u64, deadline_ms: u64) -> Result<Option<api::Lease>, String> {
        run(self.0.acquire_wait(ms(ttl_ms), ms(deadline_ms))).map(|l| l.map(to_wit))
    }

    fn enqueue_once(&self, ttl_ms: u64) -> Result<api::FairEnqueued, String> {
        // Natively: `None` when the lock was taken, `Some(holder's remaining TTL)` when queued.
        run(self.0.enqueue_once(ms(ttl_ms))).map(|left| match left {
            None => api::FairEnqueued::Taken,
            Some(left) => api::FairEnqueued::Queued(left.as_millis() as u64),
        })
    }

    fn release(&self, lease: api::Lease) -> Result<api::Released, String> {
        run(self.0.release(&from_wit(lease))).map(released)
    }
}
