//! `replicated-lock`: [`locks::ReplicatedLock`], an acquisition confirmed by `WAIT`.

use super::{api, from_wit, ms, released, run, to_wit, HostTransport};
use crate::locks::{self, ReplicatedAcquire};

/// The exported replicated lock.
pub struct ReplicatedLock(locks::ReplicatedLock<HostTransport>);

impl api::GuestReplicatedLock for ReplicatedLock {
    fn new(name: String, replicas: u32, wait_ms: u64) -> Self {
        let lock = locks::ReplicatedLock::new(HostTransport, &name, replicas.into(), ms(wait_ms));
        ReplicatedLock(lock)
    }

    fn try_acquire(&self, ttl_ms: u64) -> Result<api::ReplicatedAcquired, String> {
        run(self.0.try_acquire(ms(ttl_ms))).map(|a| match a {
            ReplicatedAcquire::Confirmed(l) => api::ReplicatedAcquired::Confirmed(to_wit(l)),
            ReplicatedAcquire::NotReplicated { acked } => {
                api::ReplicatedAcquired::NotReplicated(acked)
            }
            ReplicatedAcquire::Held => api::ReplicatedAcquired::Held,
        })
    }

    fn release(&self, lease: api::Lease) -> Result<api::Released, String> {
        run(self.0.release(&from_wit(lease))).map(released)
    }
}
