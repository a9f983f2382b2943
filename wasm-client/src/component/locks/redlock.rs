//! `red-lock`: [`locks::RedLock`] over the host's quorum nodes ([`HostNodes`]: the `nodes` and
//! `command-all` imports). The same algorithm as natively; only the fan-out is the host's.

use super::{api, block_on, ms};
use crate::component::transport::HostNodes;
use crate::locks::{self, RedLease};

/// The exported RedLock: the lock's name and the native algorithm over the host's nodes.
pub struct RedLock {
    name: String,
    lock: locks::RedLock<HostNodes>,
}

/// A native RedLock lease as the WIT record.
fn to_wit(l: RedLease) -> api::RedLease {
    api::RedLease {
        key: l.key,
        token: l.token,
        validity_ms: u64::try_from(l.validity.as_millis()).unwrap_or(u64::MAX),
        granted: l.granted as u32,
    }
}

/// A WIT lease back as a native one (release and extend read only its key and token).
fn from_wit(l: api::RedLease) -> RedLease {
    RedLease {
        key: l.key,
        token: l.token,
        validity: ms(l.validity_ms),
        granted: l.granted as usize,
    }
}

impl api::GuestRedLock for RedLock {
    fn new(name: String, node_timeout_ms: u64) -> Self {
        RedLock {
            lock: locks::RedLock::new(HostNodes, ms(node_timeout_ms)),
            name,
        }
    }

    fn nodes(&self) -> u32 {
        self.lock.nodes() as u32
    }

    fn quorum(&self) -> u32 {
        self.lock.quorum() as u32
    }

    fn try_acquire(&self, ttl_ms: u64) -> Result<Option<api::RedLease>, String> {
        let a = block_on(self.lock.attempt(&self.name, ms(ttl_ms)));
        match (a.lease, a.first_error) {
            (Some(l), _) => Ok(Some(to_wit(l))),
            (None, Some(e)) if a.answered == 0 => Err(e.to_string()),
            (None, _) => Ok(None),
        }
    }

    fn extend(&self, lease: api::RedLease, ttl_ms: u64) -> Result<Option<api::RedLease>, String> {
        Ok(block_on(self.lock.extend(&from_wit(lease), ms(ttl_ms))).map(to_wit))
    }

    fn release(&self, lease: api::RedLease) -> Result<u32, String> {
        Ok(block_on(self.lock.release(&from_wit(lease))) as u32)
    }
}
