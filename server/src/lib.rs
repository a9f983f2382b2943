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
pub(crate) mod batch_remove;
pub mod client;
pub mod clock;
pub mod cmd;
pub mod codec;
pub mod command;
pub mod config;
pub(crate) mod cpu_usage;
pub mod db;
pub mod dispatch;
pub mod encodings;
pub mod evict;
pub mod expire;
pub(crate) mod expiry_index;
pub mod frame;
pub mod gate;
pub mod glob;
pub(crate) mod hand_off;
pub mod lazyfree;
pub mod long_double;
pub mod master;
pub mod memory;
pub mod net;
pub(crate) mod oom;
pub mod outbuf;
pub(crate) mod pause;
pub mod promote;
pub mod propagate;
pub mod pubsub;
pub mod rdb;
pub mod replica;
pub mod replication;
pub mod restart;
pub mod scripting;
pub mod server;
pub mod set;
pub mod state;
pub mod tracking;
pub mod value;
pub(crate) mod walk;
pub mod zset;

pub use clock::Clock;
pub use frame::{Frame, Protocol};
pub use server::{BlockingServer, Builder, LocalClient, PushStream, Server, ServerHandle};

pub use config::REDIS_VERSION;
