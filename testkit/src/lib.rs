//! latchkey-testkit: the one copy of the helpers the workspace's tests share, so that every
//! crate spawns `redis-server`, picks a port and drives a faulty link the same way.
//!
//! - [`redis_proc`]: a real `redis-server` on a free port, in a directory of its own, killed
//!   (and its directory removed) on drop; [`redis_proc::free_port`] for any server a test
//!   starts;
//! - [`raw`]: a blocking RESP connection that returns each reply's exact bytes;
//! - [`fault_proxy`]: a TCP proxy that delays, pauses, drops or cuts a link, to give real
//!   servers the failures latchkey's own controls drive;
//! - [`tools`]: a test that needs a tool fails when it is missing, it never skips.

#![warn(missing_docs)]

pub mod fault_proxy;
pub mod raw;
pub mod redis_proc;
pub mod tools;

pub use fault_proxy::FaultProxy;
pub use raw::RawConn;
pub use redis_proc::{free_port, RedisProcess};
pub use tools::{require_tool, tool_available};
