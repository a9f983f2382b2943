//! A counting semaphore: at most N permits, each leased with a TTL measured by the server's
//! clock, so a crashed holder's permit comes back by itself.

use std::time::Duration;

use super::{helper_key, ms};
use crate::scripts::{SEMAPHORE_ACQUIRE, SEMAPHORE_RELEASE};
use crate::transport::{eval, token};
use crate::{Error, Transport};

/// One leased permit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permit {
    /// The permit's opaque id.
    pub id: String,
}

/// A semaphore named `name` with `permits` permits.
///
/// ```no_run
/// # async fn demo(t: latchkey_client::native::RedisTransport) -> Result<(), latchkey_client::Error> {
/// use std::time::Duration;
/// use latchkey_client::locks::Semaphore;
///
/// let pool = Semaphore::new(t, "db-connections", 3);
/// if let Some(p) = pool.try_acquire(Duration::from_secs(30)).await? {
///     // ... use one of the three ...
///     pool.release(&p).await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Semaphore<T: Transport + Clone> {
    t: T,
    key: Vec<u8>,
    channel: Vec<u8>,
    permits: u32,
}

impl<T: Transport + Clone> Semaphore<T> {
    /// The semaphore (sorted set `{name}:permits`, release channel `{name}:released`).
    pub fn new(t: T, name: &str, permits: u32) -> Self {
        Semaphore {
            t,
            key: helper_key(name, "permits"),
            channel: helper_key(name, "released"),
            permits,
        }
    }

    /// One attempt: a permit leased for `ttl`, or `None` when all are taken.
    pub async fn try_acquire(&self, ttl: Duration) -> Result<Option<Permit>, Error> {
        let id = token(&self.t);
        let r = eval(
            &self.t,
            &SEMAPHORE_ACQUIRE,
            &[&self.key],
            &[self.permits.to_string().as_bytes(), id.as_bytes(), &ms(ttl)],
        )
        .await?
        .int()?;
        Ok((r == 1).then_some(Permit { id }))
    }

    /// Gives the permit back: true if it was still leased.
    pub async fn release(&self, p: &Permit) -> Result<bool, Error> {
        Ok(eval(
            &self.t,
            &SEMAPHORE_RELEASE,
            &[&self.key, &self.channel],
            &[p.id.as_bytes()],
        )
        .await?
        .int()?
            == 1)
    }
}
