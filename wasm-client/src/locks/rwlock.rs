//! The read-write lock: many readers, or one writer.

use std::time::Duration;

use super::{helper_key, lock_key, ms};
use crate::scripts::{READ_ACQUIRE, RW_RELEASE, WRITE_ACQUIRE};
use crate::transport::{eval, token};
use crate::{Error, Transport};

/// A reader's or writer's hold on a read-write lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RwLease {
    /// The holder's token.
    pub token: String,
    /// Whether this is the writer.
    pub write: bool,
}

/// Many readers or one writer, with TTL-bounded holds.
///
/// ```no_run
/// # async fn demo(t: latchkey_client::native::RedisTransport) -> Result<(), latchkey_client::Error> {
/// use std::time::Duration;
/// use latchkey_client::locks::RwLock;
///
/// let rw = RwLock::new(t, "catalog");
/// let r = rw.try_read(Duration::from_secs(5)).await?.expect("no writer");
/// assert!(rw.try_write(Duration::from_secs(5)).await?.is_none()); // a reader is in
/// rw.release(&r).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct RwLock<T: Transport + Clone> {
    t: T,
    key: Vec<u8>,
    channel: Vec<u8>,
}

impl<T: Transport + Clone> RwLock<T> {
    /// The read-write lock named `name`.
    pub fn new(t: T, name: &str) -> Self {
        RwLock {
            t,
            key: lock_key(name),
            channel: helper_key(name, "unlock"),
        }
    }

    async fn enter(&self, ttl: Duration, write: bool) -> Result<Option<RwLease>, Error> {
        let tok = token(&self.t);
        let script = if write { &WRITE_ACQUIRE } else { &READ_ACQUIRE };
        let r = eval(&self.t, script, &[&self.key], &[tok.as_bytes(), &ms(ttl)])
            .await?
            .int()?;
        Ok((r == 1).then_some(RwLease { token: tok, write }))
    }

    /// Enters as a reader unless a writer holds the lock.
    pub async fn try_read(&self, ttl: Duration) -> Result<Option<RwLease>, Error> {
        self.enter(ttl, false).await
    }

    /// Enters as the writer when nobody holds the lock.
    pub async fn try_write(&self, ttl: Duration) -> Result<Option<RwLease>, Error> {
        self.enter(ttl, true).await
    }

    /// Leaves; true if the lease still held the lock.
    pub async fn release(&self, l: &RwLease) -> Result<bool, Error> {
        Ok(eval(
            &self.t,
            &RW_RELEASE,
            &[&self.key, &self.channel],
            &[l.token.as_bytes()],
        )
        .await?
        .int()?
            == 1)
    }
}
