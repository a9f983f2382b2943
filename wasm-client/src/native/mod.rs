//! Native transports (not built for wasm32): real Redis through redis-rs, and the latchkey
//! server in-process. Both share one subscription connection per transport among all
//! waiters, with per-channel reference counting ([`hub`]).

mod hub;
mod local;
mod redis_rs;

pub use hub::NativeSubscription;
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
