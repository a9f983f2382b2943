//! Test harness shared by every suite in this crate: spawn a real `redis-server` on a free
//! port, start a latchkey server, talk raw RESP to both, and compare replies byte for byte.

#![warn(missing_docs)]

pub mod diff;
/// The fault proxy lives in the host crate, whose `latchkey lesson --against` uses it too.
pub use latchkey_plugin::fault_proxy;
pub mod lock_api;
pub mod persisted;
pub mod wasm_api;

// The helpers every crate's tests share live in latchkey-testkit; re-exported here under the
// paths this crate's tests use.
pub use latchkey_testkit::{raw, redis_proc, tools as testkit};

// The failover harness: replicated pairs to drive, fencing resources, node restarts.
pub mod fencing;
pub mod pair;
pub mod restart;

pub use diff::Diff;
pub use fault_proxy::FaultProxy;
pub use pair::{LatchkeyPair, RedisPair, ReplicatedPair};
pub use raw::RawConn;
pub use redis_proc::RedisProcess;

pub use latchkey_testkit::{RedisCluster, RedisSentinel};
pub use testkit::{require_tool, tool_available};
