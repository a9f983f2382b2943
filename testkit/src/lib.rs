//! latchkey-testkit: the one copy of the helpers the workspace's tests share, so that every
//! crate spawns `redis-server`, picks a port and drives a faulty link the same way.
//!
//! - [`redis_proc`]: a real `redis-server` on a free port, in a directory of its own, killed
//!   (and its directory removed) on drop; [`redis_proc::free_port`] for any server a test
//!   starts;
//! - [`raw`]: a blocking RESP connection that returns each reply's exact bytes;
//!   (the fault proxy that drives a faulty link is product code now, in
//!   `latchkey_plugin::fault_proxy`, since `latchkey lesson --against` uses it);
//! - [`tools`]: a test that needs a tool fails when it is missing, it never skips;
//! - [`topology`]: a real Redis Cluster and a real Sentinel, for the tests beyond one node.

#![warn(missing_docs)]

pub mod raw;
pub mod redis_proc;
pub mod tools;
pub mod topology;

pub use raw::RawConn;
pub use redis_proc::{free_port, RedisProcess};
pub use tools::{require_tool, tool_available};
pub use topology::{RedisCluster, RedisSentinel};
