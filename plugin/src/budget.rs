//! A tenant's budget: what every instance of one tenant shares, however the embedder got it
//! (rates, CPU, quotas, the keys it keeps on the server). Made of the limits' parts
//! ([`crate::limits`]) and the storage quotas ([`crate::storage`]).

use crate::limits::{CpuBucket, Limits, Quota, RateLimiter};
use crate::storage::PersistentKeys;

/// What the instances of one tenant share: its buckets (calls, bytes sent, WASI random bytes,
/// CPU) and its quotas (kept leases, subscriptions, keys that never expire).
#[derive(Debug, Clone)]
pub(crate) struct TenantBudget {
    pub(crate) calls: RateLimiter,
    pub(crate) bytes: RateLimiter,
    pub(crate) random: RateLimiter,
    pub(crate) cpu: CpuBucket,
    pub(crate) leases: Quota,
    pub(crate) subscriptions: Quota,
    /// The keys it holds that never expire (see [`crate::storage`]).
    pub(crate) persistent: PersistentKeys,
    /// Its `wasi:keyvalue` buckets (see [`crate::keyvalue`]).
    pub(crate) buckets: PersistentKeys,
}

impl TenantBudget {
    /// A fresh budget under `l`.
    pub(crate) fn new(l: &Limits) -> TenantBudget {
        TenantBudget {
            calls: RateLimiter::new(l.calls_per_sec, l.burst),
            bytes: RateLimiter::new(l.bytes_per_sec, l.bytes_per_sec),
            random: RateLimiter::new(l.random_bytes_per_sec, l.random_bytes_per_sec),
            cpu: CpuBucket::new(l.cpu_per_sec),
            leases: Quota::new(l.leases),
            subscriptions: Quota::new(l.subscriptions),
            persistent: PersistentKeys::new(
                "persistent",
                l.persistent_keys,
                "keys that never expire (fenced locks' counters, fair locks' queues)",
            ),
            buckets: PersistentKeys::new("buckets", l.kv_buckets, "wasi:keyvalue buckets"),
        }
    }
}
