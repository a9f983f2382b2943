//! `rw-lock`: [`locks::RwLock`], many readers or one writer. The mode travels in the
//! `rw-lease` record.

use super::{api, ms, run, HostTransport};
use crate::locks::{self, RwLease};

/// The exported read-write lock.
pub struct RwLock(locks::RwLock<HostTransport>);

fn to_wit(l: RwLease) -> api::RwLease {
    api::RwLease {
        token: l.token,
        mode: if l.write {
            api::RwMode::Write
        } else {
            api::RwMode::Read
        },
    }
}

impl api::GuestRwLock for RwLock {
    fn new(name: String) -> Self {
        RwLock(locks::RwLock::new(HostTransport, &name))
    }

    fn try_read(&self, ttl_ms: u64) -> Result<Option<api::RwLease>, String> {
        run(self.0.try_read(ms(ttl_ms))).map(|l| l.map(to_wit))
    }

    fn try_write(&self, ttl_ms: u64) -> Result<Option<api::RwLease>, String> {
        run(self.0.try_write(ms(ttl_ms))).map(|l| l.map(to_wit))
    }

    fn release(&self, lease: api::RwLease) -> Result<bool, String> {
        let lease = RwLease {
            token: lease.token,
            write: lease.mode == api::RwMode::Write,
        };
        run(self.0.release(&lease))
    }
}
