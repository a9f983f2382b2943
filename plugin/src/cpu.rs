//! Counting a guest's CPU: the time it runs, from the moment it is entered (or a host call
//! returns to it) to the moment it calls the host (or returns), without the time it spends
//! suspended in a host call or yielded to other tenants at an epoch tick waiting for a core.
//!
//! wasmtime's call hook tells every crossing ([`CpuClock::hook`]); the epoch callback adds the
//! stretch since the last crossing at every tick ([`CpuClock::tick`]). The count starts at zero
//! when the embedder calls into the guest, and only then: neither a host call nor a re-entry of
//! the guest from inside one (its allocator, called to hold a returned list) restarts it. The
//! same time is charged to the tenant's per-second bucket ([`CpuBucket`]).
//!
//! A crossing happens several times per host call, so it is kept cheap: one read of the CPU's
//! time-stamp counter (`quanta`, as the server's command timings; the same counter the
//! kernel's monotonic clock reads, without the system call's bookkeeping), integer
//! nanoseconds, no lock. The shared bucket is charged in batches ([`BUCKET_BATCH`] of running
//! time, or when the guest returns, or at a tick), so the per-second share is judged at most
//! that late.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::CallHook;

use crate::limits::CpuBucket;

/// How many CPU budgets of wall time (time outside host calls, yielded time included) one call
/// into the guest may last, however little of it the guest was running: a ceiling for a guest
/// scheduled only now and then on a starved machine.
pub(crate) const WALL_CEILING: u32 = 20;

/// Running time gathered before it is charged to the tenant's shared per-second bucket (a
/// lock): the share is judged at most this late, the budget of one call not at all.
const BUCKET_BATCH: Duration = Duration::from_millis(1);

/// [`BUCKET_BATCH`] in nanoseconds.
const BUCKET_BATCH_NS: u64 = BUCKET_BATCH.as_nanos() as u64;

/// Times as nanoseconds after one instant: a crossing subtracts and compares integers.
#[derive(Debug, Clone, Copy)]
struct Clock {
    base: quanta::Instant,
}

impl Clock {
    fn now(&self) -> u64 {
        let ns = quanta::Instant::now()
            .saturating_duration_since(self.base)
            .as_nanos();
        u64::try_from(ns).unwrap_or(u64::MAX - 1)
    }
}

/// When a yielded guest was resumed, written by the yield outside the store and taken by the
/// next charge: nanoseconds on the instance's [`Clock`], plus one (zero: not resumed since).
#[derive(Debug, Clone)]
pub(crate) struct Resumed {
    clock: Clock,
    at: Arc<AtomicU64>,
}

impl Resumed {
    /// Notes that the guest runs again from now.
    pub(crate) fn now(&self) {
        self.at.store(self.clock.now() + 1, Ordering::Release);
    }

    /// The resumption noted since the last call, if any.
    fn take(&self) -> Option<u64> {
        match self.at.swap(0, Ordering::Acquire) {
            0 => None,
            ns => Some(ns - 1),
        }
    }

    /// Forgets a resumption noted before a new call.
    fn clear(&self) {
        self.at.store(0, Ordering::Relaxed);
    }
}

/// The CPU accounting of one instance.
#[derive(Debug)]
pub(crate) struct CpuClock {
    /// The instance's time line (nanoseconds since it was made).
    clock: Clock,
    /// When the guest's current stretch of running began; `None` while it is in the host.
    since: Option<u64>,
    /// When the guest, yielded at an epoch tick, was resumed: set by the yield itself, which
    /// runs outside the store.
    pub(crate) resumed_at: Resumed,
    /// Host calls the guest is inside of (a guest re-entered from a host call is at depth 1).
    depth: u32,
    /// Running time of the current call into the guest, in nanoseconds.
    busy: u64,
    /// Wall time of the current call into the guest outside host calls, in nanoseconds.
    wall: u64,
    /// The tenant's per-second bucket.
    bucket: CpuBucket,
    /// Running time not yet charged to `bucket` (see [`BUCKET_BATCH`]), in nanoseconds.
    unbilled: u64,
    /// Set once the tenant used more than its per-second share.
    pub(crate) over_rate: bool,
}

impl CpuClock {
    pub(crate) fn new(bucket: CpuBucket) -> CpuClock {
        let clock = Clock {
            base: quanta::Instant::now(),
        };
        CpuClock {
            clock,
            since: None,
            resumed_at: Resumed {
                clock,
                at: Arc::default(),
            },
            depth: 0,
            busy: 0,
            wall: 0,
            bucket,
            unbilled: 0,
            over_rate: false,
        }
    }

    /// Running time of the current call into the guest.
    pub(crate) fn busy(&self) -> Duration {
        Duration::from_nanos(self.busy)
    }

    /// Adds the stretch from `since` (or from the resumption after a yield, if later) to `now`.
    fn charge(&mut self, now: u64) {
        let resumed = self.resumed_at.take();
        let Some(since) = self.since else { return };
        let start = resumed.map_or(since, |r| r.max(since));
        let ran = now.saturating_sub(start);
        self.busy = self.busy.saturating_add(ran);
        self.wall = self.wall.saturating_add(now.saturating_sub(since));
        self.unbilled = self.unbilled.saturating_add(ran);
        if self.unbilled >= BUCKET_BATCH_NS {
            self.bill();
        }
    }

    /// Charges the running time gathered so far to the tenant's per-second bucket (shared by
    /// the tenant's instances, each on its own time line: the bucket reads the system's clock).
    fn bill(&mut self) {
        if self.unbilled == 0 {
            return;
        }
        let used = Duration::from_nanos(std::mem::take(&mut self.unbilled));
        if !self.bucket.charge(used, Instant::now()) {
            self.over_rate = true;
        }
    }

    /// A crossing between host and guest.
    pub(crate) fn hook(&mut self, hook: CallHook) {
        let now = self.clock.now();
        match hook {
            CallHook::CallingWasm => {
                if self.depth == 0 {
                    // The embedder calls in: a new call, a new budget.
                    self.busy = 0;
                    self.wall = 0;
                    self.resumed_at.clear();
                } else {
                    self.charge(now);
                }
                self.since = Some(now);
            }
            CallHook::ReturningFromHost => {
                self.depth = self.depth.saturating_sub(1);
                self.since = Some(now);
            }
            CallHook::CallingHost => {
                self.charge(now);
                self.since = None;
                self.depth += 1;
            }
            CallHook::ReturningFromWasm => {
                self.charge(now);
                if self.depth == 0 {
                    // Back to the embedder: the whole call is billed.
                    self.bill();
                }
                self.since = None;
            }
        }
    }

    /// An epoch tick while the guest runs.
    pub(crate) fn tick(&mut self) {
        let now = self.clock.now();
        self.charge(now);
        self.bill();
        if self.since.is_some() {
            self.since = Some(now);
        }
    }

    /// Why the guest must stop, if it went over `budget` in this call or over its share.
    pub(crate) fn over(&self, budget: Duration, per_sec: Duration) -> Option<String> {
        let budget_ns = u64::try_from(budget.as_nanos()).unwrap_or(u64::MAX);
        if self.busy > budget_ns {
            return Some(format!(
                "ran for over {} ms of CPU in one call; interrupted",
                budget.as_millis()
            ));
        }
        if self.wall > budget_ns.saturating_mul(u64::from(WALL_CEILING)) {
            return Some(format!(
                "ran for over {} ms of CPU in one call (wall time outside host calls: {} ms); interrupted",
                budget.as_millis(),
                self.wall / 1_000_000
            ));
        }
        if self.over_rate {
            return Some(format!(
                "used over {} ms of CPU per second; interrupted",
                per_sec.as_millis()
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_time_counts_from_entry_to_host_call_and_excludes_a_yield() {
        let mut c = CpuClock::new(CpuBucket::new(Duration::from_secs(100)));
        c.hook(CallHook::CallingWasm);
        std::thread::sleep(Duration::from_millis(5));
        c.hook(CallHook::CallingHost);
        assert!(c.busy() >= Duration::from_millis(5), "{:?}", c.busy());
        let before = c.busy;
        // Time inside the host is not the guest's.
        std::thread::sleep(Duration::from_millis(5));
        c.hook(CallHook::ReturningFromHost);
        // Yielded at a tick for 50 ms, then resumed: that stretch counts as wall time only.
        std::thread::sleep(Duration::from_millis(50));
        c.resumed_at.now();
        c.hook(CallHook::ReturningFromWasm);
        let ran = Duration::from_nanos(c.busy - before);
        let outside_host = Duration::from_nanos(c.wall - before);
        assert!(
            outside_host >= ran + Duration::from_millis(50),
            "ran {ran:?}, wall outside host calls {outside_host:?}"
        );
        // A new call from the embedder starts from zero.
        c.hook(CallHook::CallingWasm);
        assert_eq!(c.busy(), Duration::ZERO);
    }

    #[test]
    fn the_share_per_second_is_charged_by_the_end_of_the_call() {
        // 1 ms a second: a call of 3 ms goes over, even though every stretch is billed late.
        let mut c = CpuClock::new(CpuBucket::new(Duration::from_millis(1)));
        c.hook(CallHook::CallingWasm);
        std::thread::sleep(Duration::from_millis(3));
        c.hook(CallHook::ReturningFromWasm);
        assert!(c.over_rate);
        assert!(c
            .over(Duration::from_secs(1), Duration::from_millis(1))
            .is_some_and(|why| why.contains("per second")));
    }
}
