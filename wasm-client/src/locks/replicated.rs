//! The replicated lock: an acquisition confirmed with `WAIT`, so that a failover that promotes
//! an acknowledging replica keeps it. If too few replicas acknowledge in time, the lock is
//! released again and the caller is told how many did.
//!
//! What `WAIT` does not do: it makes the one write it follows reach `replicas` replicas, and
//! nothing more. Redis stays asynchronous: a later write of the same holder (an extension, a
//! release) is not confirmed, and a failover can lose it (the promoted replica then expires the
//! lock at the old deadline while the holder believes it holds it longer); and a failover that
//! promotes a replica which did not acknowledge loses the lock itself. The failover tests
//! (`tests/tests/failover_replicated_lock.rs`) show both the promise and the first limit, on
//! latchkey and on real Redis.

use std::time::Duration;

use super::{Lease, SimpleLock};
use crate::transport::args;
use crate::{Error, Transport};

/// What a replicated acquisition found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplicatedAcquire {
    /// Taken and acknowledged by enough replicas.
    Confirmed(Lease),
    /// Taken on the master but not acknowledged by enough replicas in time: released again.
    NotReplicated {
        /// How many replicas did acknowledge.
        acked: i64,
    },
    /// Someone else holds the lock.
    Held,
}

/// A simple lock whose acquisition must reach `replicas` replicas within `wait`.
///
/// ```no_run
/// # async fn demo(t: latchkey_client::native::RedisTransport) -> Result<(), latchkey_client::Error> {
/// use std::time::Duration;
/// use latchkey_client::locks::{ReplicatedAcquire, ReplicatedLock};
///
/// let lock = ReplicatedLock::new(t, "leader", 1, Duration::from_millis(100));
/// match lock.try_acquire(Duration::from_secs(10)).await? {
///     ReplicatedAcquire::Confirmed(lease) => { /* safe across a failover */ lock.release(&lease).await?; }
///     ReplicatedAcquire::NotReplicated { acked } => eprintln!("only {acked} replicas: not taken"),
///     ReplicatedAcquire::Held => {}
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ReplicatedLock<T: Transport + Clone> {
    t: T,
    simple: SimpleLock<T>,
    replicas: i64,
    wait: Duration,
}

impl<T: Transport + Clone> ReplicatedLock<T> {
    /// The lock named `name`, confirmed by `replicas` replicas within `wait`.
    pub fn new(t: T, name: &str, replicas: i64, wait: Duration) -> Self {
        ReplicatedLock {
            simple: SimpleLock::new(t.clone(), name),
            t,
            replicas,
            wait,
        }
    }

    /// One attempt, confirmed with `WAIT`.
    pub async fn try_acquire(&self, ttl: Duration) -> Result<ReplicatedAcquire, Error> {
        let Some(lease) = self.simple.try_acquire(ttl).await? else {
            return Ok(ReplicatedAcquire::Held);
        };
        let acked = self
            .t
            .command(args([
                "WAIT".to_string(),
                self.replicas.to_string(),
                self.wait.as_millis().max(1).to_string(),
            ]))
            .await?
            .into_result()?
            .int()?;
        if acked >= self.replicas {
            return Ok(ReplicatedAcquire::Confirmed(lease));
        }
        self.simple.release(&lease).await?;
        Ok(ReplicatedAcquire::NotReplicated { acked })
    }

    /// Releases (token-checked).
    pub async fn release(&self, lease: &Lease) -> Result<super::Released, Error> {
        self.simple.release(lease).await
    }
}
