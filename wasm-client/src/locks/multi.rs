//! The multi-lock: several locks taken together, all or none, in one script (so on a Cluster
//! the keys must share a slot: give them a common hash tag).

use std::time::Duration;

use super::ms;
use crate::scripts::{MULTI_ACQUIRE, MULTI_RELEASE};
use crate::transport::{eval, token};
use crate::{Error, Transport};

/// Proof of holding every key of a multi-lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultiLease {
    /// The keys held.
    pub keys: Vec<Vec<u8>>,
    /// The token stored in each.
    pub token: String,
}

/// Several named locks, taken all at once or not at all.
///
/// ```no_run
/// # async fn demo(t: latchkey_client::native::RedisTransport) -> Result<(), latchkey_client::Error> {
/// use std::time::Duration;
/// use latchkey_client::locks::MultiLock;
///
/// let both = MultiLock::new(t, &["{bank}:alice", "{bank}:bob"]);
/// if let Some(l) = both.try_acquire(Duration::from_secs(5)).await? {
///     // ... transfer between the two accounts ...
///     both.release(&l).await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct MultiLock<T: Transport + Clone> {
    t: T,
    keys: Vec<Vec<u8>>,
}

impl<T: Transport + Clone> MultiLock<T> {
    /// A multi-lock over the given keys (used as they are).
    pub fn new(t: T, keys: &[&str]) -> Self {
        MultiLock {
            t,
            keys: keys.iter().map(|k| k.as_bytes().to_vec()).collect(),
        }
    }

    /// Takes every key, or none when any is held.
    pub async fn try_acquire(&self, ttl: Duration) -> Result<Option<MultiLease>, Error> {
        let tok = token(&self.t);
        let keys: Vec<&[u8]> = self.keys.iter().map(|k| k.as_slice()).collect();
        let r = eval(&self.t, &MULTI_ACQUIRE, &keys, &[tok.as_bytes(), &ms(ttl)])
            .await?
            .int()?;
        Ok((r == 1).then(|| MultiLease {
            keys: self.keys.clone(),
            token: tok,
        }))
    }

    /// Releases every key still ours; returns how many.
    pub async fn release(&self, l: &MultiLease) -> Result<i64, Error> {
        let keys: Vec<&[u8]> = l.keys.iter().map(|k| k.as_slice()).collect();
        eval(&self.t, &MULTI_RELEASE, &keys, &[l.token.as_bytes()])
            .await?
            .int()
    }
}
