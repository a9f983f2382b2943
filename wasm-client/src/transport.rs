//! The one seam between the lock algorithms and the world: run a command, wait for a pub/sub
//! message, sleep, read a monotonic clock, get random bytes. Natively these are tokio and a
//! Redis connection ([`crate::native`]); inside wasm they are host calls.

use std::future::Future;
use std::time::Duration;

use crate::scripts::Script;
use crate::{Error, Reply};

/// What a lock needs from its environment.
pub trait Transport: Send + Sync + 'static {
    /// A live subscription to one channel; dropping it unsubscribes (reference counted: many
    /// waiters on one channel share one server-side subscription).
    type Subscription: Send;

    /// Runs one command and returns its reply (error replies are `Ok(Reply::Error)`).
    fn command(&self, args: Vec<Vec<u8>>) -> impl Future<Output = Result<Reply, Error>> + Send;

    /// Subscribes to `channel`. Messages published after this returns are not missed.
    fn subscribe(
        &self,
        channel: &[u8],
    ) -> impl Future<Output = Result<Self::Subscription, Error>> + Send;

    /// Waits up to `timeout` for a message on the subscription; true if one arrived.
    fn wait_message<'a>(
        &'a self,
        sub: &'a mut Self::Subscription,
        timeout: Duration,
    ) -> impl Future<Output = bool> + Send + 'a;

    /// Sleeps.
    fn sleep(&self, d: Duration) -> impl Future<Output = ()> + Send;

    /// Monotonic time since an arbitrary origin; only differences matter.
    fn now(&self) -> Duration;

    /// Fills `buf` with random bytes (tokens, jitter).
    fn random_bytes(&self, buf: &mut [u8]);
}

/// Builds a command from string-like arguments.
pub fn args<I, A>(items: I) -> Vec<Vec<u8>>
where
    I: IntoIterator<Item = A>,
    A: AsRef<[u8]>,
{
    items.into_iter().map(|a| a.as_ref().to_vec()).collect()
}

/// Runs `script` with `EVALSHA`, and with `EVAL` if the server does not know it yet.
pub async fn eval<T: Transport>(
    t: &T,
    script: &Script,
    keys: &[&[u8]],
    argv: &[&[u8]],
) -> Result<Reply, Error> {
    let build = |verb: &str, first: &[u8]| {
        let mut a = vec![verb.as_bytes().to_vec(), first.to_vec()];
        a.push(keys.len().to_string().into_bytes());
        a.extend(keys.iter().map(|k| k.to_vec()));
        a.extend(argv.iter().map(|v| v.to_vec()));
        a
    };
    let reply = t.command(build("EVALSHA", script.sha().as_bytes())).await?;
    match &reply {
        Reply::Error(e) if e.starts_with("NOSCRIPT") => t
            .command(build("EVAL", script.body.as_bytes()))
            .await?
            .into_result(),
        _ => reply.into_result(),
    }
}

/// A fresh opaque owner token: 20 random bytes, hex encoded.
pub fn token<T: Transport>(t: &T) -> String {
    let mut b = [0u8; 20];
    t.random_bytes(&mut b);
    // Encoded into a buffer of the exact size, then one allocation: a token is made on every
    // acquisition, and `hex::encode`'s char-by-char string growth showed in profiles.
    let mut hex = [0u8; 40];
    hex::encode_to_slice(b, &mut hex).expect("40 hex digits for 20 bytes");
    String::from_utf8(hex.to_vec()).expect("hex digits are ASCII")
}

/// A uniformly random duration in `0..=max` (full jitter).
pub fn jitter<T: Transport>(t: &T, max: Duration) -> Duration {
    let mut b = [0u8; 8];
    t.random_bytes(&mut b);
    let r = u64::from_le_bytes(b) as f64 / u64::MAX as f64;
    max.mul_f64(r)
}
