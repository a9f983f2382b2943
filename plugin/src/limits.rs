//! The bounds a tenant runs under: CPU (epoch ticks between host calls), memory (wasmtime's
//! `StoreLimits`), and the rate of its host calls (a token bucket shared by all instances of
//! the tenant).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Per-tenant bounds. [`Limits::default`] suits the lock client comfortably.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Linear memory an instance may grow to, in bytes (per memory).
    pub memory_bytes: usize,
    /// Core instances one component may create (a component is several).
    pub instances: usize,
    /// Tables one component may create.
    pub tables: usize,
    /// Elements one table may grow to.
    pub table_elements: usize,
    /// How long a guest may compute without calling the host before it is trapped (checked
    /// every [`Limits::tick`], when the guest also yields to other tenants).
    pub cpu_budget: Duration,
    /// The epoch tick: how often a busy guest yields (host-wide; the first host's value wins).
    pub tick: Duration,
    /// Host calls per second a tenant may make (all its instances together), on average.
    pub calls_per_sec: f64,
    /// How many calls may come in a burst above the average.
    pub burst: f64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            memory_bytes: 32 << 20,
            instances: 32,
            tables: 32,
            table_elements: 20_000,
            cpu_budget: Duration::from_millis(50),
            tick: Duration::from_millis(2),
            calls_per_sec: 100_000.0,
            burst: 10_000.0,
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
        let mut b = self.inner.lock().expect("bucket lock");
        let refill = now.duration_since(b.at).as_secs_f64() * b.rate;
        b.tokens = (b.tokens + refill).min(b.burst);
        b.at = b.at.max(now);
        b.tokens -= 1.0;
        (b.tokens < 0.0).then(|| Duration::from_secs_f64(-b.tokens / b.rate))
    }

    /// Takes a token, sleeping until it is due.
    pub async fn acquire(&self) {
        if let Some(wait) = self.reserve() {
            tokio::time::sleep(wait).await;
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
}
