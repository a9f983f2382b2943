//! The bounds a tenant runs under: CPU (guest running time per call into the guest and per
//! second), memory (all of an instance's memories and tables together, through
//! [`InstanceLimiter`]), the rate of its host calls and of the bytes it sends (token buckets
//! shared by all instances of the tenant), and the quotas on what it may hand the host: leases,
//! subscriptions, argument lists, blocking time, WASI random bytes. SECURITY.md ("Tenants")
//! says which attack each bound answers.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Per-tenant bounds. [`Limits::default`] suits the lock client comfortably; every field is
/// also a `latchkey` command-line option.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Linear memory one memory of an instance may grow to, in bytes.
    pub memory_bytes: usize,
    /// Linear memory all the memories of one instance may hold together, in bytes.
    pub memory_total_bytes: usize,
    /// Linear memories one instance (a component: several core instances) may create.
    pub memories: usize,
    /// Core instances one component may create (a component is several).
    pub instances: usize,
    /// Tables one component may create.
    pub tables: usize,
    /// Elements one table may grow to.
    pub table_elements: usize,
    /// Guest running time one call into the guest may use in all, however many host calls it
    /// makes meanwhile (time suspended in a host call is not counted, nor time spent waiting
    /// for a core after yielding). Over it, the instance is trapped.
    pub cpu_budget: Duration,
    /// Guest running time a tenant (all its instances) may use per second of wall time, on
    /// average; up to one second's worth may be used at once. Over it, the running instance
    /// is trapped.
    pub cpu_per_sec: Duration,
    /// The epoch tick: how often a busy guest yields (host-wide; the first host's value wins).
    pub tick: Duration,
    /// Host calls per second a tenant may make (all its instances together), on average. Lease
    /// renewals the host makes for it count too.
    pub calls_per_sec: f64,
    /// How many calls may come in a burst above the average.
    pub burst: f64,
    /// Bytes of command arguments per second a tenant may send, on average (a burst of one
    /// second's worth): over it, its calls wait.
    pub bytes_per_sec: f64,
    /// Arguments one command may carry.
    pub args_per_call: usize,
    /// Bytes all the arguments of one command may carry together.
    pub bytes_per_call: usize,
    /// The longest any import may keep a guest suspended: `sleep` and `wait-message` are cut
    /// to it, and a blocking command (`WAIT`) must carry a timeout of at most this.
    pub max_block: Duration,
    /// The longest a key written with `SET` or `PEXPIRE` may live: `SET` must carry an expiry
    /// (`PX`/`EX`), and neither may exceed this.
    pub key_ttl_max: Duration,
    /// Leases the host keeps for a tenant at once (all its instances together).
    pub leases: usize,
    /// Bytes of a kept lease's key (as the tenant names it).
    pub lease_key_bytes: usize,
    /// Bytes of a kept lease's token.
    pub lease_token_bytes: usize,
    /// The shortest TTL the host renews (renewals come every ttl/3).
    pub lease_ttl_min: Duration,
    /// The longest TTL the host renews.
    pub lease_ttl_max: Duration,
    /// Subscriptions a tenant holds at once (all its instances together).
    pub subscriptions: usize,
    /// Bytes of a channel name (as the tenant names it), subscribed to or published to.
    pub channel_bytes: usize,
    /// Bytes of a published message.
    pub publish_bytes: usize,
    /// Bytes one WASI `get-random-bytes` (or insecure) call may ask for; more traps.
    pub random_bytes_per_call: u64,
    /// WASI random bytes per second a tenant may draw, on average (a burst of one second's
    /// worth): over it, its calls wait.
    pub random_bytes_per_sec: f64,
    /// Entries one instance may hold in its WASI resource table at once (streams, pollables,
    /// ...: each a host object the guest keeps alive until it drops the handle). Opening one
    /// more traps the instance.
    pub wasi_resources: usize,
    /// Keys that never expire a tenant may create through the lock client's scripts (fenced
    /// locks' counters, fair locks' queues), counted by name, over all its instances and
    /// across restarts of the host (the count is kept on the server). Past it, a script that
    /// would create one more is refused.
    pub persistent_keys: usize,
    /// `wasi:keyvalue` buckets a tenant may open (by name, over all its instances, counted on
    /// the server like [`Limits::persistent_keys`]); a bucket never written to is forgotten
    /// when the count is full.
    pub kv_buckets: usize,
    /// Keys one `wasi:keyvalue` bucket may hold.
    pub kv_entries: usize,
    /// Bytes of one `wasi:keyvalue` key.
    pub kv_key_bytes: usize,
    /// Bytes of one `wasi:keyvalue` value.
    pub kv_value_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            memory_bytes: 32 << 20,
            memory_total_bytes: 48 << 20,
            memories: 4,
            instances: 32,
            tables: 32,
            table_elements: 20_000,
            // Roomy: a debug build of the lock client on a loaded machine takes tens of ms a
            // call. Both are ceilings for runaways, not a scheduler.
            cpu_budget: Duration::from_secs(1),
            cpu_per_sec: Duration::from_secs(1),
            tick: Duration::from_millis(2),
            calls_per_sec: 100_000.0,
            burst: 10_000.0,
            bytes_per_sec: (16 << 20) as f64,
            args_per_call: 1_024,
            bytes_per_call: 1 << 20,
            max_block: Duration::from_secs(60),
            key_ttl_max: Duration::from_secs(3_600),
            leases: 256,
            lease_key_bytes: 1_024,
            lease_token_bytes: 256,
            lease_ttl_min: Duration::from_millis(100),
            lease_ttl_max: Duration::from_secs(3_600),
            subscriptions: 256,
            channel_bytes: 1_024,
            publish_bytes: 64 << 10,
            random_bytes_per_call: 64 << 10,
            random_bytes_per_sec: (1 << 20) as f64,
            wasi_resources: 1_024,
            persistent_keys: 10_000,
            kv_buckets: 16,
            kv_entries: 10_000,
            kv_key_bytes: 1_024,
            kv_value_bytes: 64 << 10,
        }
    }
}

/// A token bucket. Over the limit, a call is not refused: it waits (the guest is suspended,
/// holding no thread) until its token is due, so a chatty tenant slows down and others do not
/// notice. Waiting keeps the lock client's semantics intact (an error would look like a
/// connection failure to it).
#[derive(Debug, Clone)]
pub struct RateLimiter {
    inner: Arc<Mutex<Bucket>>,
}

#[derive(Debug)]
struct Bucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// Refills up to `now` and takes `n` tokens (the level may go below zero: a debt).
    fn take(&mut self, n: f64, now: Instant) -> f64 {
        let refill = now.saturating_duration_since(self.at).as_secs_f64() * self.rate;
        self.tokens = (self.tokens + refill).min(self.burst);
        self.at = self.at.max(now);
        self.tokens -= n;
        self.tokens
    }
}

impl RateLimiter {
    /// `rate` tokens per second, up to `burst` saved up.
    pub fn new(rate: f64, burst: f64) -> RateLimiter {
        RateLimiter {
            inner: Arc::new(Mutex::new(Bucket {
                rate: rate.max(1e-3),
                burst: burst.max(1.0),
                tokens: burst.max(1.0),
                at: Instant::now(),
            })),
        }
    }

    /// Takes a token now, or says how long to wait for the one reserved for this call.
    pub fn reserve(&self) -> Option<Duration> {
        self.reserve_at(Instant::now())
    }

    /// [`RateLimiter::reserve`] at `now`, for a caller that has just read the clock.
    pub fn reserve_at(&self, now: Instant) -> Option<Duration> {
        self.reserve_n_at(1.0, now)
    }

    /// Takes `n` tokens at `now`, or says how long to wait until they are due.
    pub fn reserve_n_at(&self, n: f64, now: Instant) -> Option<Duration> {
        let mut b = self.inner.lock().expect("bucket lock");
        let rate = b.rate;
        let left = b.take(n, now);
        (left < 0.0).then(|| Duration::from_secs_f64(-left / rate))
    }

    /// Takes a token, sleeping until it is due.
    pub async fn acquire(&self) {
        if let Some(wait) = self.reserve() {
            tokio::time::sleep(wait).await;
        }
    }

    /// Takes `n` tokens, sleeping until they are due.
    pub async fn acquire_n(&self, n: f64) {
        if let Some(wait) = self.reserve_n_at(n, Instant::now()) {
            tokio::time::sleep(wait).await;
        }
    }
}

/// The CPU a tenant may use per second of wall time: a bucket of running time, refilled at
/// [`Limits::cpu_per_sec`] per second, holding at most one second's worth. Unlike the call
/// rate, running over it is not waited out (the guest is computing, not calling): the
/// instance is trapped.
#[derive(Debug, Clone)]
pub struct CpuBucket {
    inner: Arc<Mutex<Bucket>>,
}

impl CpuBucket {
    /// A bucket allowing `per_sec` of running time per second.
    pub fn new(per_sec: Duration) -> CpuBucket {
        let secs = per_sec.as_secs_f64().max(1e-6);
        CpuBucket {
            inner: Arc::new(Mutex::new(Bucket {
                rate: secs,
                burst: secs,
                tokens: secs,
                at: Instant::now(),
            })),
        }
    }

    /// Charges `used` running time at `now`: false when the tenant is over its budget.
    pub fn charge(&self, used: Duration, now: Instant) -> bool {
        let mut b = self.inner.lock().expect("cpu bucket lock");
        b.take(used.as_secs_f64(), now) >= 0.0
    }
}

/// How many of something a tenant holds at once, over all its instances (kept leases,
/// subscriptions): a shared counter with a ceiling. A [`Slot`] is one unit, given back when
/// dropped.
#[derive(Debug, Clone)]
pub struct Quota {
    used: Arc<Mutex<usize>>,
    max: usize,
}

/// One unit of a [`Quota`], returned when dropped.
#[derive(Debug)]
pub struct Slot {
    used: Arc<Mutex<usize>>,
}

impl Quota {
    /// A quota of `max` units.
    pub fn new(max: usize) -> Quota {
        Quota {
            used: Arc::default(),
            max,
        }
    }

    /// Takes a unit, or `None` when all `max` are in use.
    pub fn take(&self) -> Option<Slot> {
        let mut used = self.used.lock().expect("quota lock");
        if *used >= self.max {
            return None;
        }
        *used += 1;
        Some(Slot {
            used: self.used.clone(),
        })
    }

    /// Units in use.
    pub fn used(&self) -> usize {
        *self.used.lock().expect("quota lock")
    }

    /// The ceiling.
    pub fn max(&self) -> usize {
        self.max
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut used = self.used.lock().expect("quota lock");
        *used = used.saturating_sub(1);
    }
}

/// The memory bounds of one instance, as wasmtime's `ResourceLimiter`: each memory up to
/// [`Limits::memory_bytes`], all of them together up to [`Limits::memory_total_bytes`], at
/// most [`Limits::memories`] memories, [`Limits::tables`] tables of at most
/// [`Limits::table_elements`] elements, [`Limits::instances`] core instances. Memories and
/// tables live as long as the store, so the total only grows.
#[derive(Debug)]
pub struct InstanceLimiter {
    memory_bytes: usize,
    memory_total_bytes: usize,
    memories: usize,
    tables: usize,
    table_elements: usize,
    instances: usize,
    /// Bytes of linear memory granted so far, over all memories.
    pub(crate) memory_total: usize,
}

impl InstanceLimiter {
    /// The limiter for `l`.
    pub fn new(l: &Limits) -> InstanceLimiter {
        InstanceLimiter {
            memory_bytes: l.memory_bytes,
            memory_total_bytes: l.memory_total_bytes,
            memories: l.memories,
            tables: l.tables,
            table_elements: l.table_elements,
            instances: l.instances,
            memory_total: 0,
        }
    }
}

impl wasmtime::ResourceLimiter for InstanceLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let more = desired.saturating_sub(current);
        let total = self.memory_total.saturating_add(more);
        if desired > self.memory_bytes {
            wasmtime::bail!(
                "growing memory to {desired} bytes exceeds the tenant's limit of {} bytes per memory",
                self.memory_bytes
            );
        }
        if total > self.memory_total_bytes {
            wasmtime::bail!(
                "growing memory to {desired} bytes would bring the instance's memories to {total} bytes, over the tenant's limit of {} bytes",
                self.memory_total_bytes
            );
        }
        self.memory_total = total;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.table_elements {
            wasmtime::bail!(
                "growing a table to {desired} elements exceeds the tenant's limit of {}",
                self.table_elements
            );
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        self.instances
    }

    fn tables(&self) -> usize {
        self.tables
    }

    fn memories(&self) -> usize {
        self.memories
    }
}

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
    pub(crate) persistent: crate::storage::PersistentKeys,
    /// Its `wasi:keyvalue` buckets (see [`crate::keyvalue`]).
    pub(crate) buckets: crate::storage::PersistentKeys,
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
            persistent: crate::storage::PersistentKeys::new(
                "persistent",
                l.persistent_keys,
                "keys that never expire (fenced locks' counters, fair locks' queues)",
            ),
            buckets: crate::storage::PersistentKeys::new(
                "buckets",
                l.kv_buckets,
                "wasi:keyvalue buckets",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_lets_a_burst_through_then_makes_calls_wait_their_turn() {
        let bucket = RateLimiter::new(10.0, 3.0);
        for _ in 0..3 {
            assert_eq!(bucket.reserve(), None, "within the burst");
        }
        let first = bucket.reserve().expect("over the burst: wait");
        let second = bucket.reserve().expect("and the next waits longer");
        assert!(first <= Duration::from_millis(100), "{first:?}");
        assert!(
            second > first && second <= Duration::from_millis(200),
            "{second:?}"
        );
        // A clone is the same bucket (instances of one tenant share it).
        assert!(bucket.clone().reserve().expect("shared") > second);
    }

    #[test]
    fn a_clock_read_older_than_the_last_one_neither_panics_nor_refills() {
        let bucket = RateLimiter::new(10.0, 1.0);
        let before = Instant::now();
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(bucket.reserve(), None, "the one token of the burst");
        // Another instance read the clock earlier but reserves later: it waits like any
        // other call over the burst.
        let wait = bucket.reserve_at(before).expect("over the burst");
        assert!(wait <= Duration::from_millis(100), "{wait:?}");
    }

    #[test]
    fn the_cpu_bucket_holds_one_seconds_worth_and_refuses_beyond() {
        let cpu = CpuBucket::new(Duration::from_millis(100));
        let now = Instant::now();
        assert!(cpu.charge(Duration::from_millis(60), now));
        assert!(cpu.charge(Duration::from_millis(40), now));
        assert!(!cpu.charge(Duration::from_millis(1), now), "over");
    }

    #[test]
    fn a_quota_gives_units_back_when_their_slots_drop() {
        let q = Quota::new(2);
        let a = q.take().unwrap();
        let _b = q.clone().take().unwrap();
        assert!(q.take().is_none());
        drop(a);
        assert_eq!(q.used(), 1);
        assert!(q.take().is_some());
    }
}
