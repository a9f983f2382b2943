//! Native transports (not built for wasm32): real Redis through redis-rs, and the latchkey
//! server in-process (with the `embedded` feature). Both share one subscription connection per transport among all
//! waiters, with per-channel reference counting ([`hub`]).

/// The `Transport` methods both native transports share (fields `hub` and `rt`): pub/sub
/// through the shared hub, tokio's sleep, the monotonic clock, OS randomness.
macro_rules! native_transport_common {
    () => {
        async fn subscribe(&self, channel: &[u8]) -> Result<NativeSubscription, Error> {
            self.hub.subscribe(channel).await
        }

        async fn wait_message<'a>(
            &'a self,
            sub: &'a mut NativeSubscription,
            timeout: Duration,
        ) -> bool {
            sub.wait(timeout).await
        }

        async fn sleep(&self, d: Duration) {
            tokio::time::sleep(d).await
        }

        fn now(&self) -> Duration {
            self.rt.now()
        }

        fn random_bytes(&self, buf: &mut [u8]) {
            Runtime::random_bytes(buf)
        }
    };
}

mod hub;
#[cfg(feature = "embedded")]
mod local;
mod redis_rs;

pub use hub::NativeSubscription;
#[cfg(feature = "embedded")]
pub use local::LocalTransport;
pub use redis_rs::RedisTransport;

use std::time::{Duration, Instant};

/// The clock, sleep and randomness both native transports share.
#[derive(Debug, Clone, Copy)]
struct Runtime {
    origin: Instant,
}

impl Runtime {
    fn new() -> Runtime {
        Runtime {
            origin: Instant::now(),
        }
    }

    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn random_bytes(buf: &mut [u8]) {
        rand::fill(buf);
    }
}
