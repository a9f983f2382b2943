//! Lock-client throughput and hand-off, against each server kind, side by side:
//!
//!     cargo run --release -p latchkey-tests --example lock_bench
//!
//! Prints uncontended acquire+release cycles per second for one client, and the median time
//! from a release to the next holder's acquisition under contention, woken by the unlock
//! PUBLISH versus by polling alone.

use std::time::{Duration, Instant};

use latchkey_client::locks::{Backoff, SimpleLock};
use latchkey_client::native::{LocalTransport, RedisTransport};
use latchkey_client::Transport;
use latchkey_server::Server;
use latchkey_tests::RedisProcess;

async fn cycles<T: Transport + Clone>(t: T) -> f64 {
    let lock = SimpleLock::new(t, "bench");
    let n = 5000;
    let start = Instant::now();
    for _ in 0..n {
        let l = lock
            .try_acquire(Duration::from_secs(10))
            .await
            .unwrap()
            .unwrap();
        lock.release(&l).await.unwrap();
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// Median release -> next-acquire time with one waiter. With `pubsub` the waiter's backoff is
/// long, so the unlock message wakes it; without, the waiter polls every millisecond or so.
async fn handoff<T: Transport + Clone>(t: T, pubsub: bool) -> Duration {
    let lock = SimpleLock::new(t, "handoff");
    let mut samples = Vec::new();
    for _ in 0..200 {
        let held = lock
            .try_acquire(Duration::from_secs(10))
            .await
            .unwrap()
            .unwrap();
        let waiter = {
            let lock = lock.clone();
            tokio::spawn(async move {
                let backoff = if pubsub {
                    Backoff {
                        base: Duration::from_secs(5),
                        max: Duration::from_secs(5),
                    }
                } else {
                    Backoff {
                        base: Duration::from_millis(2),
                        max: Duration::from_millis(2),
                    }
                };
                let l = lock
                    .acquire_wait(Duration::from_secs(10), Duration::from_secs(30), backoff)
                    .await
                    .unwrap()
                    .unwrap();
                let at = Instant::now();
                lock.release(&l).await.unwrap();
                at
            })
        };
        tokio::time::sleep(Duration::from_millis(5)).await;
        let released = Instant::now();
        lock.release(&held).await.unwrap();
        let acquired = waiter.await.unwrap();
        samples.push(acquired.saturating_duration_since(released));
    }
    samples.sort();
    samples[samples.len() / 2]
}

#[tokio::main]
async fn main() {
    let embedded = Server::builder().start().await.unwrap();
    let redis = RedisProcess::spawn(&[]);
    let local = LocalTransport::new(&embedded);
    let tcp = RedisTransport::connect(&embedded.url()).await.unwrap();
    let real = RedisTransport::connect(&redis.url()).await.unwrap();
    println!(
        "{:<26} {:>14} {:>16} {:>16}",
        "server", "cycles/s", "handoff pubsub", "handoff polling"
    );
    let row = |name: &str, c: f64, p: Duration, q: Duration| {
        println!(
            "{name:<26} {c:>14.0} {:>14.0}µs {:>14.0}µs",
            p.as_micros(),
            q.as_micros()
        )
    };
    row(
        "latchkey in-process",
        cycles(local.clone()).await,
        handoff(local.clone(), true).await,
        handoff(local, false).await,
    );
    row(
        "latchkey over TCP",
        cycles(tcp.clone()).await,
        handoff(tcp.clone(), true).await,
        handoff(tcp, false).await,
    );
    row(
        "redis-server over TCP",
        cycles(real.clone()).await,
        handoff(real.clone(), true).await,
        handoff(real, false).await,
    );
}
