//! The component's [`Transport`]: the host's `redis` imports, plus WASI clocks and random.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use super::host;
use crate::{Error, Reply, Transport};

/// Rebuilds a reply tree from the host's prefix-ordered frames, moving their strings and
/// bytes into it (no copies).
fn build(frames: &mut std::vec::IntoIter<host::Frame>) -> Reply {
    match frames.next() {
        None | Some(host::Frame::Nil) => Reply::Nil,
        Some(host::Frame::Integer(i)) => Reply::Int(i),
        Some(host::Frame::Bulk(b)) => Reply::Bulk(b),
        Some(host::Frame::Status(s)) => Reply::Status(s),
        Some(host::Frame::Error(e)) => Reply::Error(e),
        Some(host::Frame::Double(d)) => Reply::Double(d),
        Some(host::Frame::Boolean(b)) => Reply::Bool(b),
        Some(host::Frame::Array(n)) => Reply::Array((0..n).map(|_| build(frames)).collect()),
        Some(host::Frame::Pairs(n)) => {
            Reply::Map((0..n).map(|_| (build(frames), build(frames))).collect())
        }
    }
}

/// The transport made of the host's imports.
#[derive(Debug, Clone, Copy)]
pub struct HostTransport;

/// A subscription held by the host.
#[derive(Debug)]
pub struct HostSubscription(u64);

impl Drop for HostSubscription {
    fn drop(&mut self) {
        host::unsubscribe(self.0);
    }
}

fn origin() -> Instant {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

impl Transport for HostTransport {
    type Subscription = HostSubscription;

    async fn command(&self, args: Vec<Vec<u8>>) -> Result<Reply, Error> {
        let frames = host::command(&args).map_err(Error::Transport)?;
        Ok(build(&mut frames.into_iter()))
    }

    async fn subscribe(&self, channel: &[u8]) -> Result<HostSubscription, Error> {
        host::subscribe(channel)
            .map(HostSubscription)
            .map_err(Error::Transport)
    }

    async fn wait_message<'a>(&'a self, sub: &'a mut HostSubscription, timeout: Duration) -> bool {
        host::wait_message(sub.0, timeout.as_millis() as u64)
    }

    async fn sleep(&self, d: Duration) {
        host::sleep(d.as_millis() as u64)
    }

    fn now(&self) -> Duration {
        origin().elapsed()
    }

    fn random_bytes(&self, buf: &mut [u8]) {
        RANDOM.with(|r| r.borrow_mut().fill(buf));
    }
}

/// Random bytes asked of the host at once ([`Random`]).
const RANDOM_BATCH: usize = 256;

/// Random bytes from the host's `wasi:random` (its cryptographically secure generator), asked
/// for [`RANDOM_BATCH`] at a time and handed out in order, each byte once. A lock token takes
/// 20: asking the host for each cost three host calls per acquisition (`get-random-u64`, as
/// the `getrandom` crate asks), where now one call serves a dozen tokens. The bytes are the
/// host's own, only fetched earlier; they sit in this instance's memory, which no one else
/// reads.
struct Random {
    bytes: [u8; RANDOM_BATCH],
    /// How many of `bytes` were handed out already.
    used: usize,
}

impl Random {
    /// Fills `buf` with the next bytes, asking the host for more as needed.
    fn fill(&mut self, mut buf: &mut [u8]) {
        while !buf.is_empty() {
            if self.used == RANDOM_BATCH {
                let fresh = wasip2::random::random::get_random_bytes(RANDOM_BATCH as u64);
                // The host gives exactly what was asked for; anything short is never handed
                // out twice: what is missing is asked for again.
                let n = fresh.len().min(RANDOM_BATCH);
                self.bytes[RANDOM_BATCH - n..].copy_from_slice(&fresh[..n]);
                self.used = RANDOM_BATCH - n;
                continue;
            }
            let n = buf.len().min(RANDOM_BATCH - self.used);
            let (now, rest) = std::mem::take(&mut buf).split_at_mut(n);
            now.copy_from_slice(&self.bytes[self.used..self.used + n]);
            // Handed out: forget them here.
            self.bytes[self.used..self.used + n].fill(0);
            self.used += n;
            buf = rest;
        }
    }
}

thread_local! {
    /// The instance's random bytes (a component runs on one thread).
    static RANDOM: RefCell<Random> = const {
        RefCell::new(Random {
            bytes: [0; RANDOM_BATCH],
            used: RANDOM_BATCH,
        })
    };
}

/// The independent servers the host offers for quorum locks (`nodes`, `command-all`), as a
/// [`Quorum`](crate::locks::Quorum): one host call asks them all, concurrently on the host's
/// side, so RedLock's round costs one timeout however many servers are down.
#[derive(Debug, Clone, Copy)]
pub struct HostNodes;

impl crate::locks::Quorum for HostNodes {
    fn nodes(&self) -> usize {
        host::nodes() as usize
    }

    async fn command_all(
        &self,
        args: Vec<Vec<u8>>,
        timeout: Duration,
    ) -> Vec<Result<Reply, Error>> {
        let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        host::command_all(&args, timeout_ms)
            .into_iter()
            .map(|r| {
                r.map(|frames| build(&mut frames.into_iter()))
                    .map_err(Error::Transport)
            })
            .collect()
    }

    fn now(&self) -> Duration {
        HostTransport.now()
    }

    fn random_bytes(&self, buf: &mut [u8]) {
        HostTransport.random_bytes(buf)
    }
}
