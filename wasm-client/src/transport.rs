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
        let mut a = Vec::with_capacity(3 + keys.len() + argv.len());
        a.push(verb.as_bytes().to_vec());
        a.push(first.to_vec());
        a.push(decimal(keys.len() as u64));
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

/// `n` in decimal ASCII, as Redis reads integer arguments: written digit by digit into a
/// buffer, without the formatting machinery (`to_string` on every command showed in the
/// component's profiles).
pub fn decimal(mut n: u64) -> Vec<u8> {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    digits[at..].to_vec()
}

/// A fresh opaque owner token: 20 random bytes, hex encoded.
pub fn token<T: Transport>(t: &T) -> String {
    let mut b = [0u8; 20];
    t.random_bytes(&mut b);
    hex_token(b)
}

/// 20 bytes as 40 lowercase hex digits, encoded into a buffer of the exact size, a digit per
/// nibble, then one allocation: a token is made on every acquisition.
fn hex_token(b: [u8; 20]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut hex = [0u8; 40];
    for (pair, byte) in hex.chunks_exact_mut(2).zip(b) {
        pair[0] = DIGITS[usize::from(byte >> 4)];
        pair[1] = DIGITS[usize::from(byte & 0x0f)];
    }
    String::from_utf8(hex.to_vec()).expect("hex digits are ASCII")
}

/// A uniformly random duration in `0..=max` (full jitter).
pub fn jitter<T: Transport>(t: &T, max: Duration) -> Duration {
    let mut b = [0u8; 8];
    t.random_bytes(&mut b);
    let r = u64::from_le_bytes(b) as f64 / u64::MAX as f64;
    max.mul_f64(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_writes_what_to_string_writes() {
        for n in [0, 1, 9, 10, 99, 100, 30_000, 1 << 40, u64::MAX] {
            assert_eq!(decimal(n), n.to_string().into_bytes(), "{n}");
        }
    }

    #[test]
    fn a_token_is_its_bytes_in_lowercase_hex() {
        let b: [u8; 20] = std::array::from_fn(|i| (i as u8).wrapping_mul(37) ^ 0xa5);
        assert_eq!(hex_token(b), hex::encode(b));
        assert_eq!(hex_token([0xff; 20]), "f".repeat(40));
    }
}
