//! RedLock: one lock over N independent servers. It is held when a majority granted it fast
//! enough; its validity is `ttl − elapsed − (0.01·ttl + 2 ms)` (clock drift), and a lock whose
//! validity has already passed is never returned. On failure everything is released.
//!
//! The algorithm runs over a [`Quorum`]: something that sends one command to every server at
//! once, each bounded by a timeout, and hands back every server's outcome. Natively that is a
//! `Vec` of transports driven concurrently on tokio; inside the WebAssembly component it is
//! the host's `command-all` import, which fans out on the host's side (the component cannot
//! run two blocking imports at once).

use std::future::Future;
use std::time::Duration;

use super::{lock_key, ms};
use crate::scripts::{Script, EXTEND, RELEASE};
use crate::transport::args;
use crate::{Error, Reply};

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

/// Independent servers that one command can be sent to all at once: what [`RedLock`] runs on.
///
/// Natively, `Vec<T>` of any [`crate::Transport`] is a quorum (its servers are asked
/// concurrently on tokio); the component implements it over the host's `command-all` import.
pub trait Quorum: Send + Sync + 'static {
    /// How many servers there are.
    fn nodes(&self) -> usize;

    /// Runs `args` on every server concurrently, giving each at most `timeout`, and returns
    /// each server's outcome in server order (`nodes()` entries). A server that did not
    /// answer in time is an `Err`.
    fn command_all(
        &self,
        args: Vec<Vec<u8>>,
        timeout: Duration,
    ) -> impl Future<Output = Vec<Result<Reply, Error>>> + Send;

    /// Monotonic time since an arbitrary origin; only differences matter.
    fn now(&self) -> Duration;

    /// Fills `buf` with random bytes (the owner token).
    fn random_bytes(&self, buf: &mut [u8]);
}

/// What one round over the servers found, before it is judged against the quorum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedAttempt {
    /// The lease, when a majority granted it and validity was left.
    pub lease: Option<RedLease>,
    /// How many servers answered at all (with any reply, error replies included).
    pub answered: usize,
    /// The first failure (connection, timeout) of a server that did not answer, if any.
    pub first_error: Option<Error>,
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
pub struct RedLock<Q: Quorum> {
    servers: Q,
    per_server_timeout: Duration,
}

impl<Q: Quorum> RedLock<Q> {
    /// RedLock over `servers`, giving each at most `per_server_timeout` to answer.
    pub fn new(servers: Q, per_server_timeout: Duration) -> Self {
        RedLock {
            servers,
            per_server_timeout,
        }
    }

    /// How many servers the lock runs on.
    pub fn nodes(&self) -> usize {
        self.servers.nodes()
    }

    /// The majority needed.
    pub fn quorum(&self) -> usize {
        self.servers.nodes() / 2 + 1
    }

    /// One attempt on every server in parallel: the lease when a majority granted it with
    /// validity left, else `None` (and whatever was granted is released again).
    pub async fn acquire(&self, name: &str, ttl: Duration) -> Result<Option<RedLease>, Error> {
        Ok(self.attempt(name, ttl).await.lease)
    }

    /// [`RedLock::acquire`], also telling how many servers answered and the first failure, so
    /// that a caller can tell "refused by the majority" from "no server reachable".
    pub async fn attempt(&self, name: &str, ttl: Duration) -> RedAttempt {
        let key = lock_key(name);
        if self.servers.nodes() == 0 {
            return RedAttempt {
                lease: None,
                answered: 0,
                first_error: Some(Error::Transport("no servers".into())),
            };
        }
        let tok = self.token();
        let start = self.servers.now();
        let cmd = args([&b"SET"[..], &key, tok.as_bytes(), b"NX", b"PX", &ms(ttl)]);
        let replies = self.servers.command_all(cmd, self.per_server_timeout).await;
        let elapsed = self.servers.now().saturating_sub(start);
        let granted = replies
            .iter()
            .filter(|r| matches!(r, Ok(r) if r.is_ok()))
            .count();
        let answered = replies.iter().filter(|r| r.is_ok()).count();
        let first_error = replies.into_iter().find_map(Result::err);
        let mut lease = RedLease {
            key,
            token: tok,
            validity: Duration::ZERO,
            granted,
        };
        let lease = match self.validity(ttl, elapsed, granted) {
            Some(v) => {
                lease.validity = v;
                Some(lease)
            }
            None => {
                self.release(&lease).await;
                None
            }
        };
        RedAttempt {
            lease,
            answered,
            first_error,
        }
    }

    /// Sets a new TTL on every server that still holds the lease's token. The renewed lease
    /// (validity counted afresh, `granted` = servers that extended it) when a majority did so
    /// with validity left; `None` when not, and the lock must then be taken as lost.
    pub async fn extend(&self, lease: &RedLease, ttl: Duration) -> Option<RedLease> {
        let start = self.servers.now();
        let replies = self
            .eval_all(&EXTEND, &lease.key, &[lease.token.as_bytes(), &ms(ttl)])
            .await;
        let elapsed = self.servers.now().saturating_sub(start);
        let extended = replies
            .iter()
            .filter(|r| matches!(r, Ok(r) if r.as_int() == Some(1)))
            .count();
        let validity = self.validity(ttl, elapsed, extended)?;
        Some(RedLease {
            key: lease.key.clone(),
            token: lease.token.clone(),
            validity,
            granted: extended,
        })
    }

    /// Releases on every server (token-checked); returns how many released it.
    pub async fn release(&self, lease: &RedLease) -> usize {
        self.eval_all(&RELEASE, &lease.key, &[lease.token.as_bytes()])
            .await
            .iter()
            .filter(|r| matches!(r, Ok(r) if r.as_int() == Some(1)))
            .count()
    }

    /// The validity left of a round that took `elapsed` and won `granted` servers, if it won
    /// a majority and some validity is left.
    fn validity(&self, ttl: Duration, elapsed: Duration, granted: usize) -> Option<Duration> {
        let drift = ttl / 100 + Duration::from_millis(2);
        let v = ttl.checked_sub(elapsed)?.checked_sub(drift)?;
        (granted >= self.quorum() && !v.is_zero()).then_some(v)
    }

    /// A fresh opaque owner token: 20 random bytes, hex encoded.
    fn token(&self) -> String {
        let mut b = [0u8; 20];
        self.servers.random_bytes(&mut b);
        hex::encode(b)
    }

    /// Runs `script` on one key on every server: `EVALSHA` everywhere, then `EVAL` (one more
    /// round, on every server) only if some server did not know the script; each server's
    /// outcome is its `EVAL` reply where it needed one, else its `EVALSHA` reply. The lock's
    /// scripts are token-checked, so running one twice on a server changes nothing.
    async fn eval_all(
        &self,
        script: &Script,
        key: &[u8],
        argv: &[&[u8]],
    ) -> Vec<Result<Reply, Error>> {
        let build = |verb: &str, first: &[u8]| {
            let mut a = vec![verb.as_bytes().to_vec(), first.to_vec(), b"1".to_vec()];
            a.push(key.to_vec());
            a.extend(argv.iter().map(|v| v.to_vec()));
            a
        };
        let t = self.per_server_timeout;
        let noscript = |r: &Result<Reply, Error>| matches!(r, Ok(Reply::Error(e)) if e.starts_with("NOSCRIPT"));
        let mut replies = self
            .servers
            .command_all(build("EVALSHA", script.sha().as_bytes()), t)
            .await;
        if replies.iter().any(noscript) {
            let evals = self
                .servers
                .command_all(build("EVAL", script.body.as_bytes()), t)
                .await;
            for (r, e) in replies.iter_mut().zip(evals) {
                if noscript(r) {
                    *r = e;
                }
            }
        }
        replies
            .into_iter()
            .map(|r| r.and_then(Reply::into_result))
            .collect()
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use std::time::Duration;

    use futures_util::future::join_all;

    use super::Quorum;
    use crate::{Error, Reply, Transport};

    /// Servers reached each through its own transport, asked concurrently on tokio.
    impl<T: Transport + Clone> Quorum for Vec<T> {
        fn nodes(&self) -> usize {
            self.len()
        }

        async fn command_all(
            &self,
            args: Vec<Vec<u8>>,
            timeout: Duration,
        ) -> Vec<Result<Reply, Error>> {
            join_all(self.iter().map(|s| {
                let args = args.clone();
                async move {
                    match tokio::time::timeout(timeout, s.command(args)).await {
                        Ok(r) => r,
                        Err(_) => Err(Error::Transport(format!(
                            "no answer within {} ms",
                            timeout.as_millis()
                        ))),
                    }
                }
            }))
            .await
        }

        fn now(&self) -> Duration {
            // Every transport's clock is the same monotonic one; with no server, any origin.
            self.first().map(Transport::now).unwrap_or_default()
        }

        fn random_bytes(&self, buf: &mut [u8]) {
            if let Some(s) = self.first() {
                s.random_bytes(buf);
            }
        }
    }
}
