//! `multi-lock`: [`locks::MultiLock`], several keys all or none. The key set travels in the
//! `multi-lease` record.

use super::{api, ms, run, HostTransport};
use crate::locks::{self, MultiLease};

/// The exported multi-lock.
pub struct MultiLock(locks::MultiLock<HostTransport>);

impl api::GuestMultiLock for MultiLock {
    fn new(keys: Vec<String>) -> Self {
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        MultiLock(locks::MultiLock::new(HostTransport, &keys))
    }

    fn try_acquire(&self, ttl_ms: u64) -> Result<Option<api::MultiLease>, String> {
        run(self.0.try_acquire(ms(ttl_ms))).map(|l| {
            l.map(|l| api::MultiLease {
                keys: l.keys,
                token: l.token,
            })
        })
    }

    fn release(&self, lease: api::MultiLease) -> Result<u32, String> {
        let lease = MultiLease {
            keys: lease.keys,
            token: lease.token,
        };
        run(self.0.release(&lease)).map(|n| n.max(0) as u32)
    }
}
