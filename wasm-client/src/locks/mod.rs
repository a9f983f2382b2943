//! The locks. Each returns typed outcomes for the normal cases (held by someone else, expired,
//! not the owner) and keeps [`crate::Error`] for transport failures.

mod fair;
mod fenced;
mod multi;
mod redlock;
mod reentrant;
mod replicated;
mod rwlock;
mod semaphore;
mod simple;
#[cfg(not(target_arch = "wasm32"))]
mod watchdog;

pub use fair::FairLock;
pub use fenced::{FencedLease, FencedLock};
pub use multi::{MultiLease, MultiLock};
pub use redlock::{Quorum, RedAttempt, RedLease, RedLock};
pub use reentrant::{ReentrantLock, ReentrantRelease};
pub use replicated::{ReplicatedAcquire, ReplicatedLock};
pub use rwlock::{RwLease, RwLock};
pub use semaphore::{Permit, Semaphore};
pub use simple::{Backoff, Extended, Lease, Released, SimpleLock};
#[cfg(not(target_arch = "wasm32"))]
pub use watchdog::{LeaseWatch, LostReason, Watchdog};

/// The key of a lock named `name`: the whole name is the hash tag, so that every helper key
/// of the lock (`{name}:fence`, `{name}:unlock`, ...) lands in the same Cluster slot.
pub fn lock_key(name: &str) -> Vec<u8> {
    format!("{{{name}}}").into_bytes()
}

/// A helper key of the lock named `name` (`{name}:suffix`).
pub fn helper_key(name: &str, suffix: &str) -> Vec<u8> {
    format!("{{{name}}}:{suffix}").into_bytes()
}

fn ms(d: std::time::Duration) -> Vec<u8> {
    crate::transport::decimal(u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1))
}
