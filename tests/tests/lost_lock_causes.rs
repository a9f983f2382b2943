//! The third way to lose a watched lock: the server cannot be reached. Renewals keep failing
//! until a whole TTL has passed since the last one that got through, and then the holder is
//! told `Unreachable` (the lock may have expired unseen), natively and inside wasm. The other
//! two causes (the key gone, another token in it) are scenarios of the conformance suite, on
//! every leg.

use std::time::Duration;

use latchkey_client::locks::{LostReason, ReplicatedAcquire, ReplicatedLock, SimpleLock, Watchdog};
use latchkey_client::native::RedisTransport;
use latchkey_client::{Reply, Transport};
use latchkey_plugin::Backend;
use latchkey_server::Server;
use latchkey_tests::lock_api::{Locks, Native, WatchOps};
use latchkey_tests::wasm_api::Wasm;
use latchkey_tests::RedisProcess;

/// A hang guard around the loss report: far longer than the TTL, never a timing assertion.
async fn lost(watch: &mut impl WatchOps) -> LostReason {
    tokio::time::timeout(Duration::from_secs(60), watch.lost())
        .await
        .expect("hang guard: the loss was never reported")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_holder_learns_the_server_is_unreachable() {
    let server = Server::builder().start().await.unwrap();
    let t = Native(RedisTransport::connect(&server.url()).await.unwrap());
    let mut watch = t
        .acquire_watched("gone", Duration::from_millis(600))
        .await
        .expect("free");
    assert!(!watch.is_lost().await);
    server.shutdown().await;
    assert_eq!(lost(&mut watch).await, LostReason::Unreachable);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wasm_holder_learns_the_server_is_unreachable() {
    let redis = RedisProcess::spawn(&[]);
    let backend = <dyn Backend>::redis(&redis.url()).await.unwrap();
    let t = Wasm::new(backend, "unreachable");
    let mut watch = t
        .acquire_watched("gone", Duration::from_millis(600))
        .await
        .expect("free");
    assert!(!watch.is_lost().await);
    drop(redis); // killed: every renewal fails from now on
    assert_eq!(lost(&mut watch).await, LostReason::Unreachable);
}

/// The other side of `Unreachable`: a server that is gone for less than the TTL costs the
/// holder nothing. The server restarts (every connection dropped, the lock key replayed from
/// its AOF); the renewal that meets the dropped connection fails, the transport connects
/// again, the next renewal gets through, and the lease was never reported lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_lock_survives_a_restart_shorter_than_its_ttl() {
    let tmp = tempfile::Builder::new()
        .prefix("latchkey-blip")
        .tempdir()
        .unwrap();
    let server = Server::builder()
        .config("dir", tmp.path().to_str().unwrap())
        .config("appendonly", "yes")
        .config("appendfsync", "always")
        .start()
        .await
        .unwrap();
    let t = RedisTransport::connect(&server.url()).await.unwrap();
    let ttl = Duration::from_secs(3);
    let lease = SimpleLock::new(t.clone(), "kept")
        .try_acquire(ttl)
        .await
        .unwrap()
        .expect("free");
    let dog = Watchdog::spawn(t.clone(), ttl);
    let watch = dog.watch(&lease);
    server.restart(true).await.unwrap();
    // Hang guard only: wait for a failed renewal and then a good one after it.
    let failures = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let m = dog.metrics().snapshot();
            if m.renewal_failures > 0 {
                return m;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("hang guard: no renewal ever met the dropped connection");
    tokio::time::timeout(Duration::from_secs(30), async {
        while dog.metrics().snapshot().renewals <= failures.renewals && !watch.is_lost() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("hang guard: renewals never got through again");
    assert!(
        !watch.is_lost(),
        "a restart shorter than the TTL lost the lease"
    );
    let held = t
        .command(vec![b"GET".to_vec(), lease.key.clone()])
        .await
        .unwrap();
    assert_eq!(held, Reply::Bulk(lease.token.clone().into_bytes()));
    server.shutdown().await;
}

/// A `WAIT` that takes longer than half a second gets its answer: the transport has no
/// reply deadline of its own (redis-rs's default would cut every reply at 500 ms). With no
/// replica, a lock confirmed by one replica within 1.5 s is refused as not replicated, on
/// latchkey and on redis-server alike, instead of failing as a transport error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_wait_gets_its_answer_not_a_timeout() {
    let redis = RedisProcess::spawn(&[]);
    let latchkey = Server::builder().start().await.unwrap();
    for url in [redis.url(), latchkey.url()] {
        let t = RedisTransport::connect(&url).await.unwrap();
        let lock = ReplicatedLock::new(t, "confirmed", 1, Duration::from_millis(1500));
        let outcome = lock.try_acquire(Duration::from_secs(10)).await;
        assert!(
            matches!(outcome, Ok(ReplicatedAcquire::NotReplicated { acked: 0 })),
            "{url}: {outcome:?}"
        );
    }
    latchkey.shutdown().await;
}

/// A server that stops answering (here: `CLIENT PAUSE ALL`) is as unreachable as one that is
/// down: a renewal round that gets no answer within a renewal period counts as failed, and
/// once the TTL has run out the holder is told `Unreachable` while the pause still lasts.
/// (The key cannot expire during a pause, but the holder cannot know that.) A watchdog that
/// waited for the answer would renew at the end of the pause and never report the loss: the
/// hang guard would fire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stops_answering_is_reported_unreachable() {
    let server = Server::builder().start().await.unwrap();
    let t = Native(RedisTransport::connect(&server.url()).await.unwrap());
    let mut watch = t
        .acquire_watched("paused", Duration::from_millis(600))
        .await
        .expect("free");
    // As in Redis, nothing ends a pause of every command early (`CLIENT UNPAUSE` waits too):
    // it lasts a few TTLs, and the shutdown below waits for its end.
    let mut admin = server.client();
    admin.cmd(["CLIENT", "PAUSE", "4000", "ALL"]).await;
    assert_eq!(lost(&mut watch).await, LostReason::Unreachable);
    server.shutdown().await;
}
