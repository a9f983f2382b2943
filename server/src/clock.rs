//! Where the server's time comes from.
//!
//! Every TTL, `TIME` reply and expiry decision reads the [`Clock`]. By default it is the system
//! clock. A test can opt into a virtual clock instead and move it forward by hand with
//! [`Clock::advance`], so a 30-second lock TTL expires without waiting 30 seconds.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::Notify;

/// The server's source of time, in milliseconds (and microseconds) since the Unix epoch.
///
/// Cloning a `Clock` gives another handle to the same time source.
#[derive(Clone, Debug)]
pub struct Clock {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// `None` for the system clock; the current virtual time in microseconds otherwise.
    virtual_us: Option<AtomicU64>,
    /// Woken whenever virtual time moves, so sleepers and the expiry cycle can react.
    advanced: Notify,
}

impl Default for Clock {
    fn default() -> Self {
        Clock::system()
    }
}

impl Clock {
    /// The real wall clock.
    pub fn system() -> Clock {
        Clock {
            inner: Arc::new(Inner {
                virtual_us: None,
                advanced: Notify::new(),
            }),
        }
    }

    /// A virtual clock that starts at the current wall-clock time and only moves when
    /// [`advance`](Clock::advance) or [`set_ms`](Clock::set_ms) is called.
    pub fn virtual_now() -> Clock {
        Clock::virtual_at_ms(system_us() / 1000)
    }

    /// A virtual clock that starts at the given Unix time in milliseconds.
    pub fn virtual_at_ms(ms: u64) -> Clock {
        Clock {
            inner: Arc::new(Inner {
                virtual_us: Some(AtomicU64::new(ms * 1000)),
                advanced: Notify::new(),
            }),
        }
    }

    /// Whether this clock is virtual (moved by hand).
    pub fn is_virtual(&self) -> bool {
        self.inner.virtual_us.is_some()
    }

    /// Current time in microseconds since the Unix epoch.
    pub fn now_us(&self) -> u64 {
        match &self.inner.virtual_us {
            Some(v) => v.load(Ordering::Acquire),
            None => system_us(),
        }
    }

    /// Current time in milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> u64 {
        self.now_us() / 1000
    }

    /// Moves a virtual clock forward. Panics on the system clock, which cannot be moved.
    pub fn advance(&self, by: Duration) {
        let v = self
            .inner
            .virtual_us
            .as_ref()
            .expect("Clock::advance needs a virtual clock (Builder::virtual_clock)");
        v.fetch_add(by.as_micros() as u64, Ordering::AcqRel);
        self.inner.advanced.notify_waiters();
    }

    /// Sets a virtual clock to an absolute time in milliseconds (it may go backwards, which is
    /// useful to show how a lock behaves when a server's clock jumps).
    pub fn set_ms(&self, ms: u64) {
        let v = self
            .inner
            .virtual_us
            .as_ref()
            .expect("Clock::set_ms needs a virtual clock (Builder::virtual_clock)");
        v.store(ms * 1000, Ordering::Release);
        self.inner.advanced.notify_waiters();
    }

    /// Waits until the clock reads at least `deadline_ms`. On the system clock this is an
    /// ordinary timer; on a virtual clock it returns once the clock has been advanced far enough.
    pub async fn sleep_until_ms(&self, deadline_ms: u64) {
        loop {
            let notified = self.inner.advanced.notified();
            let now = self.now_ms();
            if now >= deadline_ms {
                return;
            }
            if self.is_virtual() {
                notified.await;
            } else {
                tokio::time::sleep(Duration::from_millis(deadline_ms - now)).await;
            }
        }
    }

    /// Resolves the next time a virtual clock moves (never, for the system clock).
    pub async fn advanced(&self) {
        if self.is_virtual() {
            self.inner.advanced.notified().await;
        } else {
            std::future::pending::<()>().await;
        }
    }
}

fn system_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn virtual_clock_moves_only_when_told() {
        let c = Clock::virtual_at_ms(1_000);
        assert_eq!(c.now_ms(), 1_000);
        let c2 = c.clone();
        let sleeper = tokio::spawn(async move { c2.sleep_until_ms(31_000).await });
        tokio::task::yield_now().await;
        assert!(!sleeper.is_finished());
        c.advance(Duration::from_secs(30));
        sleeper.await.unwrap();
        assert_eq!(c.now_ms(), 31_000);
    }
}
