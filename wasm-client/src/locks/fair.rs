//! The fair lock: waiters are served in arrival order (a FIFO queue with per-waiter deadlines
//! kept by the server's clock), and a waiter that dies stalls the queue only until its deadline.

use std::time::Duration;

use super::{helper_key, lock_key, ms, Lease, Released, SimpleLock};
use crate::scripts::FAIR_ACQUIRE;
use crate::transport::{eval, token};
use crate::{Error, Transport};

/// A first-come, first-served lock.
///
/// ```no_run
/// # async fn demo(t: latchkey_client::native::RedisTransport) -> Result<(), latchkey_client::Error> {
/// use std::time::Duration;
/// use latchkey_client::locks::FairLock;
///
/// let lock = FairLock::new(t, "printer", Duration::from_millis(500));
/// if let Some(l) = lock.acquire_wait(Duration::from_secs(10), Duration::from_secs(30)).await? {
///     lock.release(&l).await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct FairLock<T: Transport + Clone> {
    t: T,
    key: Vec<u8>,
    queue: Vec<u8>,
    deadlines: Vec<u8>,
    channel: Vec<u8>,
    heartbeat: Duration,
    simple: SimpleLock<T>,
}

impl<T: Transport + Clone> FairLock<T> {
    /// The fair lock named `name`. A waiter re-announces itself every `heartbeat`; one silent
    /// for three heartbeats is considered dead and dropped from the queue.
    pub fn new(t: T, name: &str, heartbeat: Duration) -> Self {
        FairLock {
            key: lock_key(name),
            queue: helper_key(name, "queue"),
            deadlines: helper_key(name, "deadlines"),
            channel: helper_key(name, "unlock"),
            heartbeat,
            simple: SimpleLock::new(t.clone(), name),
            t,
        }
    }

    /// One attempt with this token: `Ok(None)` when acquired, else the holder's TTL (the caller
    /// is then queued).
    async fn attempt(&self, tok: &str, ttl: Duration) -> Result<Option<Duration>, Error> {
        let r = eval(
            &self.t,
            &FAIR_ACQUIRE,
            &[&self.key, &self.queue, &self.deadlines],
            &[tok.as_bytes(), &ms(ttl), &ms(self.heartbeat * 3)],
        )
        .await?
        .int()?;
        Ok((r >= 0).then(|| Duration::from_millis(r as u64)))
    }

    /// Joins the queue and waits up to `deadline` for this waiter's turn.
    pub async fn acquire_wait(
        &self,
        ttl: Duration,
        deadline: Duration,
    ) -> Result<Option<Lease>, Error> {
        let start = self.t.now();
        let tok = token(&self.t);
        let mut sub = self.t.subscribe(&self.channel).await?;
        loop {
            match self.attempt(&tok, ttl).await? {
                None => {
                    return Ok(Some(Lease {
                        key: self.key.clone(),
                        token: tok,
                        acquired_at: self.t.now(),
                        ttl,
                    }))
                }
                Some(holder_left) => {
                    let elapsed = self.t.now() - start;
                    if elapsed >= deadline {
                        return Ok(None);
                    }
                    let wait = self
                        .heartbeat
                        .min(deadline - elapsed)
                        .min(holder_left.max(Duration::from_millis(1)));
                    self.t.wait_message(&mut sub, wait).await;
                }
            }
        }
    }

    /// Joins the queue once and leaves (a waiter that then dies); for tests and diagnostics.
    pub async fn enqueue_once(&self, ttl: Duration) -> Result<Option<Duration>, Error> {
        let tok = token(&self.t);
        self.attempt(&tok, ttl).await
    }

    /// Releases (token-checked) and wakes the queue.
    pub async fn release(&self, l: &Lease) -> Result<Released, Error> {
        self.simple.release(l).await
    }
}
