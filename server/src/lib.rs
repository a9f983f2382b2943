//! latchkey-server: an embeddable Redis-protocol server with the command set distributed locks
//! use — strings with `SET NX PX`, expiry, hashes, lists, sorted sets, Lua scripting, pub/sub,
//! transactions — answering byte for byte like Redis 7.
//!
//! Start one in-process with [`Server::builder`], talk to it over TCP with any Redis client or
//! in-process with [`LocalClient`], and move its [`Clock`] by hand in tests.
//!
//! The tree mirrors the architecture: [`codec`] parses requests, [`frame`] encodes replies,
//! [`net`] serves a TCP connection, [`cmd`] holds one module per command family, [`db`] is the
//! keyspace, [`gate`] makes scripts and transactions atomic, [`server`] starts and stops it all.

#![warn(missing_docs)]

pub mod aof;
pub mod client;
pub mod clock;
pub mod cmd;
pub mod codec;
pub mod config;
pub(crate) mod cpu_usage;
pub mod db;
pub mod evict;
pub mod expire;
pub(crate) mod expiry_index;
pub mod frame;
pub mod gate;
pub mod glob;
pub mod lazyfree;
pub mod long_double;
pub mod memory;
pub mod net;
pub mod outbuf;
pub(crate) mod pause;
pub mod pubsub;
pub mod rdb;
pub mod replication;
pub mod restart;
pub mod scripting;
pub mod server;
pub mod zset;

pub use clock::Clock;
pub use frame::{Frame, Protocol};
pub use server::{BlockingServer, Builder, LocalClient, PushStream, Server, ServerHandle};

/// The Redis release whose behaviour this server follows: its commands, replies, errors and
/// test suite. The one place the version is said (`HELLO`, `INFO server`): clients choose
/// features by it, so it names the release the differential tests compare with.
pub const REDIS_VERSION: &str = "7.0.15";
