//! The reentrant lock, in Redisson's shape: a hash `{owner: count}` under the lock key. The
//! same owner may take it again; it is free when the count returns to zero.

use std::time::Duration;

use super::{helper_key, lock_key, ms};
use crate::scripts::{REENTRANT_ACQUIRE, REENTRANT_RELEASE, REENTRANT_RENEW};
use crate::transport::{eval, token};
use crate::{Error, Reply, Transport};

/// What leaving one level of a reentrant lock did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReentrantRelease {
    /// Still held by this owner (it had entered more than once).
    StillHeld,
    /// Fully released; waiters were told.
    Released,
    /// This owner did not hold the lock (expired, or never taken).
    NotOwner,
}

/// A reentrant lock for one owner (make one per logical owner: task, request, ...).
///
/// ```no_run
/// # async fn demo(t: latchkey_client::native::RedisTransport) -> Result<(), latchkey_client::Error> {
/// use std::time::Duration;
/// use latchkey_client::locks::{ReentrantLock, ReentrantRelease};
///
/// let lock = ReentrantLock::new(t, "account-7");
/// assert!(lock.try_acquire(Duration::from_secs(30)).await?.is_none());   // taken
/// assert!(lock.try_acquire(Duration::from_secs(30)).await?.is_none());   // re-entered
/// assert_eq!(lock.release(Duration::from_secs(30)).await?, ReentrantRelease::StillHeld);
/// assert_eq!(lock.release(Duration::from_secs(30)).await?, ReentrantRelease::Released);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ReentrantLock<T: Transport + Clone> {
    t: T,
    key: Vec<u8>,
    channel: Vec<u8>,
    owner: String,
}

impl<T: Transport + Clone> ReentrantLock<T> {
    /// The reentrant lock named `name`, for a fresh owner identity.
    pub fn new(t: T, name: &str) -> Self {
        let owner = token(&t);
        Self::with_owner(t, name, owner)
    }

    /// The reentrant lock named `name`, acting as an existing owner (an id from
    /// [`ReentrantLock::owner`]): how a holder hands its holds from one handle to the next,
    /// for example across calls into a WebAssembly component.
    pub fn with_owner(t: T, name: &str, owner: String) -> Self {
        ReentrantLock {
            key: lock_key(name),
            channel: helper_key(name, "unlock"),
            owner,
            t,
        }
    }

    /// This owner's opaque identity.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Takes or re-enters the lock: `None` on success, else the holder's remaining TTL.
    pub async fn try_acquire(&self, ttl: Duration) -> Result<Option<Duration>, Error> {
        let r = eval(
            &self.t,
            &REENTRANT_ACQUIRE,
            &[&self.key],
            &[&ms(ttl), self.owner.as_bytes()],
        )
        .await?;
        Ok(match r {
            Reply::Nil => None,
            other => Some(Duration::from_millis(other.int()?.max(0) as u64)),
        })
    }

    /// Leaves one level.
    pub async fn release(&self, ttl: Duration) -> Result<ReentrantRelease, Error> {
        let r = eval(
            &self.t,
            &REENTRANT_RELEASE,
            &[&self.key, &self.channel],
            &[&ms(ttl), self.owner.as_bytes()],
        )
        .await?
        .int()?;
        Ok(match r {
            0 => ReentrantRelease::StillHeld,
            1 => ReentrantRelease::Released,
            _ => ReentrantRelease::NotOwner,
        })
    }

    /// How many times this owner holds the lock (0 when it does not).
    pub async fn hold_count(&self) -> Result<i64, Error> {
        let r = self
            .t
            .command(vec![
                b"HGET".to_vec(),
                self.key.clone(),
                self.owner.as_bytes().to_vec(),
            ])
            .await?
            .into_result()?;
        Ok(r.as_int().unwrap_or(0))
    }

    /// Renews the TTL if this owner holds the lock.
    pub async fn renew(&self, ttl: Duration) -> Result<bool, Error> {
        Ok(eval(
            &self.t,
            &REENTRANT_RENEW,
            &[&self.key],
            &[&ms(ttl), self.owner.as_bytes()],
        )
        .await?
        .int()?
            == 1)
    }
}
