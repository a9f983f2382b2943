//! The third way to lose a watched lock: the server cannot be reached. Renewals keep failing
//! until a whole TTL has passed since the last one that got through, and then the holder is
//! told `Unreachable` (the lock may have expired unseen), natively and inside wasm. The other
//! two causes (the key gone, another token in it) are scenarios of the conformance suite, on
//! every leg.

use std::time::Duration;

use latchkey_client::locks::LostReason;
use latchkey_client::native::RedisTransport;
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
