//! latchkey-client: the distributed locks of the literature, written once over a small
//! [`Transport`] so that the same code runs natively on tokio and inside a WebAssembly
//! component.
//!
//! | lock | type |
//! |---|---|
//! | simple (`SET NX PX`, token-checked release and extend) | [`locks::SimpleLock`] |
//! | waiting (backoff with full jitter; each release wakes the longest live waiter, alone) | [`locks::SimpleLock::acquire_wait`] |
//! | watchdog (renewed every ttl/3, loss signalled at once) | [`locks::Watchdog`] |
//! | reentrant (hash `{owner: count}`, Redisson's shape) | [`locks::ReentrantLock`] |
//! | fencing (token from `INCR` in the acquisition script) | [`locks::FencedLock`] |
//! | semaphore (N permits, each leased with a TTL) | [`locks::Semaphore`] |
//! | RedLock (majority of N independent servers) | [`locks::RedLock`] |
//!
//! Every script is a named constant ([`scripts`]) sent as `EVALSHA`, re-sent as `EVAL` on
//! `NOSCRIPT`. Keys use hash tags (`{name}`) so a lock's several keys share a Cluster slot.
//! Ownership is an opaque random token carried by the guard, never a thread id.
//!
//! ```no_run
//! # async fn demo() -> Result<(), latchkey_client::Error> {
//! use std::time::Duration;
//! use latchkey_client::{locks::SimpleLock, native::RedisTransport};
//!
//! let transport = RedisTransport::connect("redis://127.0.0.1:6379").await?;
//! let lock = SimpleLock::new(transport, "orders");
//! if let Some(guard) = lock.try_acquire(Duration::from_secs(30)).await? {
//!     // ... the critical section ...
//!     println!("released: {:?}", lock.release(&guard).await?);
//! }
//! # Ok(()) }
//! ```

// The component's generated bindings (wasm only) carry no docs of their own.
#![cfg_attr(not(target_arch = "wasm32"), warn(missing_docs))]

pub mod error;
pub mod locks;
pub mod metrics;
pub mod reply;
pub mod scripts;
pub mod transport;

#[cfg(not(target_arch = "wasm32"))]
pub mod native;

#[cfg(target_arch = "wasm32")]
pub mod component;

// The component's allocator, tested natively (its own module is wasm-only).
#[cfg(all(test, not(target_arch = "wasm32")))]
#[path = "component/alloc.rs"]
mod component_alloc;

pub use error::Error;
pub use reply::Reply;
pub use transport::Transport;
