//! The fenced lock: a monotonically increasing token issued in the same script that takes the
//! lock, so a storage that remembers the highest token it saw can reject a stale holder.

use std::time::Duration;

use super::{helper_key, lock_key, ms, Lease, Released, SimpleLock};
use crate::scripts::FENCED_ACQUIRE;
use crate::transport::{eval, token};
use crate::{Error, Transport};

/// A lease plus its fencing token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FencedLease {
    /// The lease (release and extend as for a simple lock).
    pub lease: Lease,
    /// The fencing token: larger than every token issued before it by this server.
    pub fence: i64,
}

/// A lock whose every acquisition comes with a fencing token.
///
/// ```no_run
/// # async fn demo(t: latchkey_client::native::RedisTransport) -> Result<(), latchkey_client::Error> {
/// use std::time::Duration;
/// use latchkey_client::locks::FencedLock;
///
/// let lock = FencedLock::new(t, "ledger");
/// if let Some(l) = lock.try_acquire(Duration::from_secs(10)).await? {
///     // Send l.fence with every write; storage rejects writes with an older token.
///     println!("token {}", l.fence);
///     lock.release(&l).await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct FencedLock<T: Transport + Clone> {
    t: T,
    key: Vec<u8>,
    counter: Vec<u8>,
    simple: SimpleLock<T>,
}

impl<T: Transport + Clone> FencedLock<T> {
    /// The fenced lock named `name` (counter at `{name}:fence`).
    pub fn new(t: T, name: &str) -> Self {
        FencedLock {
            key: lock_key(name),
            counter: helper_key(name, "fence"),
            simple: SimpleLock::new(t.clone(), name),
            t,
        }
    }

    /// One attempt; `None` when the lock is held.
    pub async fn try_acquire(&self, ttl: Duration) -> Result<Option<FencedLease>, Error> {
        let tok = token(&self.t);
        let fence = eval(
            &self.t,
            &FENCED_ACQUIRE,
            &[&self.key, &self.counter],
            &[tok.as_bytes(), &ms(ttl)],
        )
        .await?
        .int()?;
        if fence < 0 {
            return Ok(None);
        }
        Ok(Some(FencedLease {
            lease: Lease {
                key: self.key.clone(),
                token: tok,
                acquired_at: self.t.now(),
                ttl,
            },
            fence,
        }))
    }

    /// Acquires, waiting up to `deadline` (see [`SimpleLock::acquire_wait`]).
    pub async fn acquire_wait(
        &self,
        ttl: Duration,
        deadline: Duration,
        backoff: super::Backoff,
    ) -> Result<Option<FencedLease>, Error> {
        let start = self.t.now();
        let mut sub = None;
        let mut attempt = 0;
        loop {
            if let Some(l) = self.try_acquire(ttl).await? {
                return Ok(Some(l));
            }
            let elapsed = self.t.now() - start;
            if elapsed >= deadline {
                return Ok(None);
            }
            if sub.is_none() {
                sub = Some(self.t.subscribe(&helper_key_of(&self.key)).await?);
                continue;
            }
            let left = self.simple.pttl().await?.unwrap_or(Duration::ZERO);
            let wait = crate::transport::jitter(&self.t, backoff.cap(attempt))
                .min(deadline - elapsed)
                .min(left.max(Duration::from_millis(1)));
            if let Some(s) = sub.as_mut() {
                self.t.wait_message(s, wait).await;
            }
            attempt += 1;
        }
    }

    /// Releases (token-checked) and wakes waiters.
    pub async fn release(&self, l: &FencedLease) -> Result<Released, Error> {
        self.simple.release(&l.lease).await
    }
}

/// `{name}:unlock` from `{name}`.
fn helper_key_of(key: &[u8]) -> Vec<u8> {
    let mut k = key.to_vec();
    k.extend_from_slice(b":unlock");
    k
}
