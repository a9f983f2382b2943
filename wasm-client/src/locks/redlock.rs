//! RedLock: one lock over N independent servers. It is held when a majority granted it fast
//! enough; its validity is `ttl − elapsed − (0.01·ttl + 2 ms)` (clock drift), and a lock whose
//! validity has already passed is never returned. On failure everything is released.

use std::time::Duration;

use futures_util::future::join_all;

use super::{lock_key, ms};
use crate::scripts::RELEASE;
use crate::transport::{args, eval, token};
use crate::{Error, Transport};

/// A RedLock acquisition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedLease {
    /// The lock's key on every server.
    pub key: Vec<u8>,
    /// The token stored on the servers that granted it.
    pub token: String,
    /// How long the lock can be relied on from the moment `acquire` returned.
    pub validity: Duration,
    /// How many servers granted it.
    pub granted: usize,
}

/// The RedLock algorithm over independent servers.
///
/// ```no_run
/// # async fn demo(servers: Vec<latchkey_client::native::RedisTransport>) -> Result<(), latchkey_client::Error> {
/// use std::time::Duration;
/// use latchkey_client::locks::RedLock;
///
/// let redlock = RedLock::new(servers, Duration::from_millis(50));
/// if let Some(l) = redlock.acquire("payments", Duration::from_secs(10)).await? {
///     println!("valid for {:?} on {} servers", l.validity, l.granted);
///     redlock.release(&l).await;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct RedLock<T: Transport + Clone> {
    servers: Vec<T>,
    per_server_timeout: Duration,
}

impl<T: Transport + Clone> RedLock<T> {
    /// RedLock over `servers`, giving each at most `per_server_timeout` to answer.
    pub fn new(servers: Vec<T>, per_server_timeout: Duration) -> Self {
        RedLock {
            servers,
            per_server_timeout,
        }
    }

    /// The majority needed.
    pub fn quorum(&self) -> usize {
        self.servers.len() / 2 + 1
    }

    /// One attempt on every server in parallel.
    pub async fn acquire(&self, name: &str, ttl: Duration) -> Result<Option<RedLease>, Error> {
        let Some(first) = self.servers.first() else {
            return Ok(None);
        };
        let key = lock_key(name);
        let tok = token(first);
        let start = first.now();
        let cmd = args([&b"SET"[..], &key, tok.as_bytes(), b"NX", b"PX", &ms(ttl)]);
        let attempts = self.servers.iter().map(|s| {
            let cmd = cmd.clone();
            async move {
                matches!(
                    tokio::time::timeout(self.per_server_timeout, s.command(cmd)).await,
                    Ok(Ok(r)) if r.is_ok()
                )
            }
        });
        let granted = join_all(attempts)
            .await
            .into_iter()
            .filter(|ok| *ok)
            .count();
        let elapsed = first.now() - start;
        let drift = ttl / 100 + Duration::from_millis(2);
        let validity = ttl.checked_sub(elapsed).and_then(|v| v.checked_sub(drift));
        let lease = RedLease {
            key,
            token: tok,
            validity: validity.unwrap_or(Duration::ZERO),
            granted,
        };
        match validity {
            Some(v) if granted >= self.quorum() && !v.is_zero() => Ok(Some(lease)),
            _ => {
                self.release(&lease).await;
                Ok(None)
            }
        }
    }

    /// Releases on every server (token-checked); returns how many released it.
    pub async fn release(&self, lease: &RedLease) -> usize {
        let attempts = self.servers.iter().map(|s| async move {
            let r = tokio::time::timeout(
                self.per_server_timeout,
                eval(s, &RELEASE, &[&lease.key], &[lease.token.as_bytes()]),
            )
            .await;
            matches!(r, Ok(Ok(reply)) if reply.as_int() == Some(1))
        });
        join_all(attempts)
            .await
            .into_iter()
            .filter(|ok| *ok)
            .count()
    }
}
