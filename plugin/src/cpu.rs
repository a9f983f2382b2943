//! Counting a guest's CPU: the time it runs, from the moment it is entered (or a host call
//! returns to it) to the moment it calls the host (or returns), without the time it spends
//! suspended in a host call or yielded to other tenants at an epoch tick waiting for a core.
//!
//! wasmtime's call hook tells every crossing ([`CpuClock::hook`]); the epoch callback adds the
//! stretch since the last crossing at every tick ([`CpuClock::tick`]). The count starts at zero
//! when the embedder calls into the guest, and only then: neither a host call nor a re-entry of
//! the guest from inside one (its allocator, called to hold a returned list) restarts it. The
//! same time is charged to the tenant's per-second bucket ([`CpuBucket`]).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wasmtime::CallHook;

use crate::limits::CpuBucket;

/// How many CPU budgets of wall time (time outside host calls, yielded time included) one call
/// into the guest may last, however little of it the guest was running: a ceiling for a guest
/// scheduled only now and then on a starved machine.
pub(crate) const WALL_CEILING: u32 = 20;

/// The CPU accounting of one instance.
#[derive(Debug)]
pub(crate) struct CpuClock {
    /// When the guest's current stretch of running began; `None` while it is in the host.
    since: Option<Instant>,
    /// When the guest, yielded at an epoch tick, was resumed: set by the yield itself, which
    /// runs outside the store.
    pub(crate) resumed_at: Arc<Mutex<Option<Instant>>>,
    /// Host calls the guest is inside of (a guest re-entered from a host call is at depth 1).
    depth: u32,
    /// Running time of the current call into the guest.
    pub(crate) busy: Duration,
    /// Wall time of the current call into the guest outside host calls.
    pub(crate) wall: Duration,
    /// The tenant's per-second bucket.
    bucket: CpuBucket,
    /// Set once the tenant used more than its per-second share.
    pub(crate) over_rate: bool,
}

impl CpuClock {
    pub(crate) fn new(bucket: CpuBucket) -> CpuClock {
        CpuClock {
            since: None,
            resumed_at: Arc::default(),
            depth: 0,
            busy: Duration::ZERO,
            wall: Duration::ZERO,
            bucket,
            over_rate: false,
        }
    }

    /// Adds the stretch from `since` (or from the resumption after a yield, if later) to `now`.
    fn charge(&mut self, now: Instant) {
        let resumed = self.resumed_at.lock().expect("resume time").take();
        let Some(since) = self.since else { return };
        let start = resumed.map_or(since, |r| r.max(since));
        let ran = now.saturating_duration_since(start);
        self.busy += ran;
        self.wall += now.saturating_duration_since(since);
        if !self.bucket.charge(ran, now) {
            self.over_rate = true;
        }
    }

    /// A crossing between host and guest.
    pub(crate) fn hook(&mut self, hook: CallHook) {
        let now = Instant::now();
        match hook {
            CallHook::CallingWasm => {
                if self.depth == 0 {
                    // The embedder calls in: a new call, a new budget.
                    self.busy = Duration::ZERO;
                    self.wall = Duration::ZERO;
                    *self.resumed_at.lock().expect("resume time") = None;
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
                self.since = None;
            }
        }
    }

    /// An epoch tick while the guest runs.
    pub(crate) fn tick(&mut self) {
        let now = Instant::now();
        self.charge(now);
        if self.since.is_some() {
            self.since = Some(now);
        }
    }

    /// Why the guest must stop, if it went over `budget` in this call or over its share.
    pub(crate) fn over(&self, budget: Duration, per_sec: Duration) -> Option<String> {
        if self.busy > budget {
            return Some(format!(
                "ran for over {} ms of CPU in one call; interrupted",
                budget.as_millis()
            ));
        }
        if self.wall > budget * WALL_CEILING {
            return Some(format!(
                "ran for over {} ms of CPU in one call (wall time outside host calls: {} ms); interrupted",
                budget.as_millis(),
                self.wall.as_millis()
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
