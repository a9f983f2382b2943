//! The simple lock: `SET key token NX PX ttl`, with token-checked release and extend, and a
//! waiting acquisition that backs off with full jitter and is woken early by the holder's
//! release.
//!
//! Waking is one waiter at a time. A waiter queues itself on the server (`{name}:waiters`, in
//! arrival order, with a lease in `{name}:leases` that each of its attempts renews) and
//! listens on a channel of its own, `{name}:unlock:<its token>`. A release wakes the longest
//! waiter whose lease has not lapsed, and nobody else: with 64 waiters an unlock costs one
//! message and one acquisition attempt, where a broadcast woke all 64 to race for it and 63
//! to lose. The lock stays unfair (a newcomer's `SET NX` may win before the woken waiter's),
//! but a woken waiter that loses keeps its place at the head, so the next release wakes it
//! again: nobody waits behind later arrivals forever. A waiter that dies stops renewing its
//! lease, and the first release after the lease lapses skips it; until then the others still
//! poll on their own backoff. A waiter that gives up leaves the queue and, if the lock is
//! free, passes its wake-up on.

use std::sync::Arc;
use std::time::Duration;

use super::{helper_key, lock_key, ms};
use crate::metrics::Metrics;
use crate::scripts::{EXTEND, RELEASE_AND_PUBLISH, SIMPLE_LEAVE, SIMPLE_WAIT};
use crate::transport::{args, eval, jitter, token};
use crate::{Error, Reply, Transport};

/// Proof of holding a lock: its key, the owner token, and when and for how long it was taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The lock's key.
    pub key: Vec<u8>,
    /// The opaque owner token stored in the key.
    pub token: String,
    /// Transport time of the acquisition.
    pub acquired_at: Duration,
    /// The TTL it was taken (or last extended) with.
    pub ttl: Duration,
}

/// What `release` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Released {
    /// The lock was ours and is now free.
    Released,
    /// The lock had already expired (nobody holds it).
    AlreadyExpired,
    /// Someone else holds the lock now; it was left alone.
    NotOwner,
}

/// What `extend` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extended {
    /// The lock is ours for the new TTL.
    Extended,
    /// The lock had already expired.
    AlreadyExpired,
    /// Someone else holds the lock now.
    NotOwner,
}

/// Exponential backoff with full jitter: attempt `n` sleeps a random time in
/// `0..=min(max, base * 2^n)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first cap.
    pub base: Duration,
    /// The largest cap.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: Duration::from_millis(10),
            max: Duration::from_secs(1),
        }
    }
}

impl Backoff {
    /// The cap for attempt `n`.
    pub fn cap(&self, attempt: u32) -> Duration {
        self.base
            .saturating_mul(1u32 << attempt.min(20))
            .min(self.max)
    }
}

/// What one attempt of a waiter found.
enum Attempt {
    /// The lock is the waiter's.
    Acquired,
    /// Someone holds it, for this much longer (`Duration::MAX`: with no TTL).
    Held(Duration),
}

/// A named lock on one server.
///
/// ```no_run
/// # async fn demo(t: latchkey_client::native::RedisTransport) -> Result<(), latchkey_client::Error> {
/// use std::time::Duration;
/// use latchkey_client::locks::{Backoff, Released, SimpleLock};
///
/// let lock = SimpleLock::new(t, "invoice-42");
/// let lease = lock
///     .acquire_wait(Duration::from_secs(10), Duration::from_secs(5), Backoff::default())
///     .await?
///     .expect("acquired within 5 s");
/// // ... work ...
/// assert_eq!(lock.release(&lease).await?, Released::Released);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct SimpleLock<T: Transport + Clone> {
    t: T,
    key: Vec<u8>,
    channel: Vec<u8>,
    /// The waiters in arrival order (token → arrival number).
    queue: Vec<u8>,
    /// Each waiter's lease (token → server time in ms until which it counts as alive).
    leases: Vec<u8>,
    metrics: Arc<Metrics>,
}

/// The shortest lease a waiter takes in the queue, and the longest: a waiter renews its lease
/// at least every third of it, so a dead waiter holds up the wake-ups for at most this long.
const LEASE_MIN: Duration = Duration::from_secs(3);
const LEASE_MAX: Duration = Duration::from_secs(3600);

/// A waiter's lease in the queue for `backoff`: three of its longest sleeps (within
/// [`LEASE_MIN`], [`LEASE_MAX`]), so that backing off never lets it lapse.
fn queue_lease(backoff: Backoff) -> Duration {
    backoff.max.saturating_mul(3).clamp(LEASE_MIN, LEASE_MAX)
}

impl<T: Transport + Clone> SimpleLock<T> {
    /// The lock named `name` (key `{name}`, unlock channel `{name}:unlock`, waiters queued in
    /// `{name}:waiters` and `{name}:leases`).
    pub fn new(t: T, name: &str) -> Self {
        SimpleLock {
            t,
            key: lock_key(name),
            channel: helper_key(name, "unlock"),
            queue: helper_key(name, "waiters"),
            leases: helper_key(name, "leases"),
            metrics: Arc::new(Metrics::default()),
        }
    }

    /// Shares metrics with other locks.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// The counters of this lock.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The lock's key.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// One attempt: the lease when the lock was free, `None` when someone holds it.
    pub async fn try_acquire(&self, ttl: Duration) -> Result<Option<Lease>, Error> {
        let tok = token(&self.t);
        let reply = self
            .t
            .command(args([
                &b"SET"[..],
                &self.key,
                tok.as_bytes(),
                b"NX",
                b"PX",
                &ms(ttl),
            ]))
            .await?
            .into_result()?;
        if !reply.is_ok() {
            return Ok(None);
        }
        Ok(Some(Lease {
            key: self.key.clone(),
            token: tok,
            acquired_at: self.t.now(),
            ttl,
        }))
    }

    /// Acquires, waiting up to `deadline`: retries with exponential backoff and full jitter,
    /// and wakes early when its turn comes: a release wakes the longest waiter (see the
    /// module's doc). Each wait is also bounded by the holder's remaining TTL, so a lost
    /// message costs at most that, and by a third of the waiter's lease in the queue (three
    /// times `backoff.max`, from 3 s to an hour), which each attempt renews.
    pub async fn acquire_wait(
        &self,
        ttl: Duration,
        deadline: Duration,
        backoff: Backoff,
    ) -> Result<Option<Lease>, Error> {
        let start = self.t.now();
        if let Some(l) = self.try_acquire(ttl).await? {
            self.metrics.acquired(self.t.now() - start, false);
            return Ok(Some(l));
        }
        // The waiter's token names its channel and its place in the queue, and becomes the
        // lease's token when it gets the lock. It listens before it queues, so that the
        // wake-up of a release right after it queued is not missed.
        let tok = token(&self.t);
        let mut own = self.channel.clone();
        own.push(b':');
        own.extend_from_slice(tok.as_bytes());
        let mut sub = self.t.subscribe(&own).await?;
        let lease = queue_lease(backoff);
        let mut attempt = 0;
        loop {
            let holder_left = match self.attempt(&tok, ttl, lease).await? {
                Attempt::Acquired => {
                    self.metrics.acquired(self.t.now() - start, true);
                    return Ok(Some(Lease {
                        key: self.key.clone(),
                        token: tok,
                        acquired_at: self.t.now(),
                        ttl,
                    }));
                }
                Attempt::Held(left) => left,
            };
            let elapsed = self.t.now() - start;
            if elapsed >= deadline {
                self.leave(&tok).await?;
                return Ok(None);
            }
            let wait = jitter(&self.t, backoff.cap(attempt))
                .min(deadline - elapsed)
                .min(holder_left.max(Duration::from_millis(1)))
                .min(lease / 3);
            self.t.wait_message(&mut sub, wait).await;
            attempt += 1;
        }
    }

    /// One attempt of a waiter with token `tok`: the lock, or a place in the queue (kept if
    /// it had one) with a lease renewed for `lease`, and the holder's remaining TTL.
    async fn attempt(&self, tok: &str, ttl: Duration, lease: Duration) -> Result<Attempt, Error> {
        let r = eval(
            &self.t,
            &SIMPLE_WAIT,
            &[&self.key, &self.queue, &self.leases],
            &[tok.as_bytes(), &ms(ttl), &ms(lease)],
        )
        .await?
        .int()?;
        Ok(match r {
            -2 => Attempt::Acquired,
            // A holder without a TTL (-1) gives no bound: the backoff alone does.
            -1 => Attempt::Held(Duration::MAX),
            r => Attempt::Held(Duration::from_millis(r.max(0) as u64)),
        })
    }

    /// A waiter that gives up leaves the queue, passing its wake-up on if the lock is free.
    async fn leave(&self, tok: &str) -> Result<(), Error> {
        eval(
            &self.t,
            &SIMPLE_LEAVE,
            &[&self.key, &self.channel, &self.queue, &self.leases],
            &[tok.as_bytes()],
        )
        .await?;
        Ok(())
    }

    /// The lock's remaining TTL, `None` when it is free.
    pub async fn pttl(&self) -> Result<Option<Duration>, Error> {
        let r = self
            .t
            .command(args([&b"PTTL"[..], &self.key]))
            .await?
            .into_result()?
            .int()?;
        Ok((r >= 0).then(|| Duration::from_millis(r as u64)))
    }

    /// Releases the lock if the lease is still the owner, and wakes waiters. Idempotent: a
    /// second release answers `AlreadyExpired` (or `NotOwner` if someone took it since).
    pub async fn release(&self, lease: &Lease) -> Result<Released, Error> {
        let r = eval(
            &self.t,
            &RELEASE_AND_PUBLISH,
            &[&lease.key, &self.channel, &self.queue, &self.leases],
            &[lease.token.as_bytes()],
        )
        .await?
        .int()?;
        Ok(match r {
            1 => {
                // The hold time reads the clock: only for metrics someone keeps.
                if self.metrics.is_on() {
                    self.metrics
                        .released(self.t.now().saturating_sub(lease.acquired_at));
                }
                Released::Released
            }
            -1 => Released::AlreadyExpired,
            _ => Released::NotOwner,
        })
    }

    /// Sets a new TTL if the lease is still the owner.
    pub async fn extend(&self, lease: &mut Lease, ttl: Duration) -> Result<Extended, Error> {
        let r = eval(
            &self.t,
            &EXTEND,
            &[&lease.key],
            &[lease.token.as_bytes(), &ms(ttl)],
        )
        .await?
        .int()?;
        Ok(match r {
            1 => {
                lease.ttl = ttl;
                Extended::Extended
            }
            -1 => Extended::AlreadyExpired,
            _ => Extended::NotOwner,
        })
    }

    /// The current holder's token, if any (for diagnostics and tests).
    pub async fn holder(&self) -> Result<Option<String>, Error> {
        Ok(
            match self
                .t
                .command(args([&b"GET"[..], &self.key]))
                .await?
                .into_result()?
            {
                Reply::Bulk(b) => Some(String::from_utf8_lossy(&b).into_owned()),
                _ => None,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_cap_doubles_from_its_base_up_to_its_max() {
        let b = Backoff {
            base: Duration::from_millis(10),
            max: Duration::from_secs(1),
        };
        assert_eq!(b.cap(0), Duration::from_millis(10));
        assert_eq!(b.cap(1), Duration::from_millis(20));
        assert_eq!(b.cap(3), Duration::from_millis(80));
        assert_eq!(b.cap(6), Duration::from_millis(640));
        assert_eq!(b.cap(7), Duration::from_secs(1));
        // A huge attempt count neither overflows the shift nor passes the max.
        assert_eq!(b.cap(u32::MAX), Duration::from_secs(1));
    }
}
