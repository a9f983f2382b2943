//! The `watchdog` interface the component exports: a simple lock and a RedLock whose leases the
//! host's lease keeper renews (imports `keep-lease`, `keep-quorum-lease`, `drop-lease`,
//! `lease-alive`, `lease-lost`), so a critical section may outlast the TTL without the component having to
//! wake up and extend it.
//!
//! Natively, [`crate::locks::Watchdog`] renews from a tokio task; a component has no
//! background tasks, which is why the host does the renewing here.

use std::cell::RefCell;
use std::time::Duration;

use super::exports::latchkey::locks::watchdog as api;
use super::transport::{HostNodes, HostTransport};
use super::{block_on, host, Component};
use crate::locks::{self, RedLease, Released};

/// A held lease and the id under which the host keeps it.
struct Kept {
    lease: locks::Lease,
    id: u64,
}

/// `watched-lock`: a [`locks::SimpleLock`] plus the kept lease, if any.
pub struct WatchedLock {
    lock: locks::SimpleLock<HostTransport>,
    kept: RefCell<Option<Kept>>,
}

impl api::GuestWatchedLock for WatchedLock {
    fn new(name: String) -> Self {
        WatchedLock {
            lock: locks::SimpleLock::new(HostTransport, &name),
            kept: RefCell::new(None),
        }
    }

    fn acquire(&self, ttl_ms: u64) -> Result<bool, String> {
        if self.kept.borrow().is_some() {
            return Ok(false);
        }
        let Some(lease) = block_on(self.lock.try_acquire(Duration::from_millis(ttl_ms)))
            .map_err(|e| e.to_string())?
        else {
            return Ok(false);
        };
        match host::keep_lease(&lease.key, &lease.token, ttl_ms) {
            Ok(id) => {
                *self.kept.borrow_mut() = Some(Kept { lease, id });
                Ok(true)
            }
            Err(e) => {
                // The host would not keep it: do not hold a lock nobody renews.
                let _ = block_on(self.lock.release(&lease));
                Err(e)
            }
        }
    }

    fn held(&self) -> bool {
        self.kept
            .borrow()
            .as_ref()
            .is_some_and(|k| host::lease_alive(k.id))
    }

    fn lost(&self) -> Option<api::LostCause> {
        self.kept
            .borrow()
            .as_ref()
            .and_then(|k| host::lease_lost(k.id))
    }

    fn release(&self) -> Result<api::Released, String> {
        let Some(kept) = self.kept.borrow_mut().take() else {
            return Ok(api::Released::AlreadyExpired);
        };
        host::drop_lease(kept.id);
        block_on(self.lock.release(&kept.lease))
            .map(|r| match r {
                Released::Released => api::Released::Released,
                Released::AlreadyExpired => api::Released::AlreadyExpired,
                Released::NotOwner => api::Released::NotOwner,
            })
            .map_err(|e| e.to_string())
    }
}

/// A held RedLock lease and the id under which the host keeps it.
struct KeptRed {
    lease: RedLease,
    id: u64,
}

/// `watched-red-lock`: a [`locks::RedLock`] over the host's quorum nodes plus the kept lease.
pub struct WatchedRedLock {
    name: String,
    lock: locks::RedLock<HostNodes>,
    kept: RefCell<Option<KeptRed>>,
}

impl api::GuestWatchedRedLock for WatchedRedLock {
    fn new(name: String, node_timeout_ms: u64) -> Self {
        WatchedRedLock {
            name,
            lock: locks::RedLock::new(HostNodes, Duration::from_millis(node_timeout_ms)),
            kept: RefCell::new(None),
        }
    }

    fn acquire(&self, ttl_ms: u64) -> Result<Option<u32>, String> {
        if self.kept.borrow().is_some() {
            return Ok(None);
        }
        let attempt = block_on(self.lock.attempt(&self.name, Duration::from_millis(ttl_ms)));
        let lease = match (attempt.lease, attempt.first_error) {
            (Some(lease), _) => lease,
            (None, Some(e)) if attempt.answered == 0 => return Err(e.to_string()),
            (None, _) => return Ok(None),
        };
        match host::keep_quorum_lease(&lease.key, &lease.token, ttl_ms) {
            Ok(id) => {
                let granted = lease.granted as u32;
                *self.kept.borrow_mut() = Some(KeptRed { lease, id });
                Ok(Some(granted))
            }
            Err(e) => {
                // The host would not keep it: do not hold a lock nobody renews.
                block_on(self.lock.release(&lease));
                Err(e)
            }
        }
    }

    fn held(&self) -> bool {
        self.kept
            .borrow()
            .as_ref()
            .is_some_and(|k| host::lease_alive(k.id))
    }

    fn release(&self) -> Result<u32, String> {
        let Some(kept) = self.kept.borrow_mut().take() else {
            return Ok(0);
        };
        host::drop_lease(kept.id);
        Ok(block_on(self.lock.release(&kept.lease)) as u32)
    }
}

impl api::Guest for Component {
    type WatchedLock = WatchedLock;
    type WatchedRedLock = WatchedRedLock;
}
