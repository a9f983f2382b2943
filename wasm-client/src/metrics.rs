//! Counters a user can read: how long acquisitions waited, how long locks were held, how often
//! there was contention, how renewals went, and why locks were lost.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Lock metrics, shared by every lock made from one client (all counters are cumulative).
#[derive(Debug, Default)]
pub struct Metrics {
    /// Set for counters nobody reads ([`Metrics::off`]).
    off: bool,
    acquisitions: AtomicU64,
    contended: AtomicU64,
    acquire_wait_us: AtomicU64,
    hold_us: AtomicU64,
    releases: AtomicU64,
    renewals: AtomicU64,
    renewal_failures: AtomicU64,
    lost_expired: AtomicU64,
    lost_taken: AtomicU64,
}

/// A copy of the counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Successful acquisitions.
    pub acquisitions: u64,
    /// Acquisitions that found the lock held at least once.
    pub contended: u64,
    /// Total time spent waiting to acquire.
    pub acquire_wait: Duration,
    /// Total time locks were held (acquire to release).
    pub hold: Duration,
    /// Releases that found the lock still ours.
    pub releases: u64,
    /// Successful renewals.
    pub renewals: u64,
    /// Renewals that failed (the lock was gone or taken).
    pub renewal_failures: u64,
    /// Locks lost because they expired.
    pub lost_expired: u64,
    /// Locks lost because someone else held them.
    pub lost_taken: u64,
}

impl Metrics {
    /// Counters nobody will read: nothing is recorded, and the locks skip the clock reads that
    /// would only feed them (how long a lock was held). The WebAssembly component keeps its
    /// locks' metrics off: its interface exports none, and each clock read there is a call
    /// to the host.
    pub fn off() -> Metrics {
        Metrics {
            off: true,
            ..Metrics::default()
        }
    }

    /// Whether anything is recorded (see [`Metrics::off`]).
    pub fn is_on(&self) -> bool {
        !self.off
    }

    pub(crate) fn acquired(&self, waited: Duration, contended: bool) {
        if self.off {
            return;
        }
        self.acquisitions.fetch_add(1, Ordering::Relaxed);
        self.acquire_wait_us
            .fetch_add(waited.as_micros() as u64, Ordering::Relaxed);
        if contended {
            self.contended.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn released(&self, held: Duration) {
        if self.off {
            return;
        }
        self.releases.fetch_add(1, Ordering::Relaxed);
        self.hold_us
            .fetch_add(held.as_micros() as u64, Ordering::Relaxed);
    }

    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    pub(crate) fn renewal(&self, ok: bool) {
        if ok {
            self.renewals.fetch_add(1, Ordering::Relaxed);
        } else {
            self.renewal_failures.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    pub(crate) fn lost(&self, taken: bool) {
        if taken {
            self.lost_taken.fetch_add(1, Ordering::Relaxed);
        } else {
            self.lost_expired.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Reads every counter.
    pub fn snapshot(&self) -> Snapshot {
        let d = |a: &AtomicU64| Duration::from_micros(a.load(Ordering::Relaxed));
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Snapshot {
            acquisitions: n(&self.acquisitions),
            contended: n(&self.contended),
            acquire_wait: d(&self.acquire_wait_us),
            hold: d(&self.hold_us),
            releases: n(&self.releases),
            renewals: n(&self.renewals),
            renewal_failures: n(&self.renewal_failures),
            lost_expired: n(&self.lost_expired),
            lost_taken: n(&self.lost_taken),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_that_are_off_record_nothing_and_say_so() {
        let on = Metrics::default();
        on.acquired(Duration::from_millis(2), true);
        on.released(Duration::from_millis(5));
        assert!(on.is_on());
        let s = on.snapshot();
        assert_eq!((s.acquisitions, s.contended, s.releases), (1, 1, 1));
        assert_eq!(s.hold, Duration::from_millis(5));

        let off = Metrics::off();
        off.acquired(Duration::from_millis(2), true);
        off.released(Duration::from_millis(5));
        assert!(!off.is_on());
        assert_eq!(off.snapshot(), Snapshot::default());
    }
}
