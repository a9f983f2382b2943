//! latchkey-server: an embeddable Redis-protocol server with the command set distributed locks
//! use — strings with `SET NX PX`, expiry, hashes, lists, sets, sorted sets, Lua scripting,
//! pub/sub, transactions, replication — answering byte for byte like Redis 7.0.
//!
//! The public API is what an embedding application calls:
//!
//! - [`Server::builder`] configures and starts a server ([`Builder`]), in a tokio runtime or on
//!   its own thread ([`BlockingServer`]); [`ServerHandle`] is the running server: its address,
//!   shutdown (and the clean one a signal asks for, [`ServerHandle::stop_on_signal`] with a
//!   [`StopSignal`]), and the fault controls a failover test drives (crash, restart,
//!   replication lag, promotion).
//! - [`LocalClient`] talks to it in-process, with no socket, and [`Connector`] opens such
//!   clients later; any Redis client talks to it over TCP at [`ServerHandle::addr`].
//! - [`Clock`] is the server's time: real, or virtual and moved by hand in tests.
//! - [`Frame`] is a reply as the protocol carries it, [`Protocol`] the RESP version.
//! - [`commands`] reads the command table (which arguments of a command are keys).
//! - [`CountingAllocator`] makes `INFO memory` and `maxmemory` count every byte.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use latchkey_server::{Frame, Server};
//!
//! let server = Server::builder().no_listener().virtual_clock().start().await.unwrap();
//! let mut c = server.client();
//! assert_eq!(c.cmd(["SET", "lock", "me", "NX", "PX", "1000"]).await, Frame::ok());
//! server.clock().advance(std::time::Duration::from_millis(1001));
//! assert_eq!(c.cmd(["GET", "lock"]).await, Frame::Null);
//! server.shutdown().await;
//! # }
//! ```
//!
//! Everything else is the server's inside, described for contributors in the repository's
//! `docs/ARCHITECTURE.md`: `codec` parses requests, `frame` encodes replies, `net` serves a
//! TCP connection, `cmd` holds one module per command family, `db` is the keyspace, `gate`
//! makes scripts and transactions atomic, `server` starts and stops it all.

#![warn(missing_docs)]

pub(crate) mod acl;
pub(crate) mod aof;
pub(crate) mod aof_rewrite;
pub(crate) mod batch_remove;
pub(crate) mod client;
pub(crate) mod clients_cron;
pub(crate) mod clock;
pub(crate) mod cmd;
pub(crate) mod cmdstats;
pub(crate) mod codec;
pub(crate) mod command;
pub mod commands;
pub(crate) mod config;
pub(crate) mod cpu_usage;
pub(crate) mod db;
pub(crate) mod dispatch;
pub(crate) mod durability;
pub(crate) mod encodings;
pub(crate) mod errorstats;
pub(crate) mod evict;
pub(crate) mod expire;
pub(crate) mod expiry_index;
pub(crate) mod failover;
pub(crate) mod frame;
pub(crate) mod gate;
pub(crate) mod geo;
pub(crate) mod glob;
pub(crate) mod hand_off;
pub(crate) mod hll;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod internals;
pub(crate) mod latency;
pub(crate) mod lazyfree;
pub(crate) mod list;
pub(crate) mod long_double;
pub(crate) mod master;
pub(crate) mod memory;
pub(crate) mod net;
pub(crate) mod notify;
pub(crate) mod oom;
pub(crate) mod outbuf;
pub(crate) mod pause;
pub(crate) mod promote;
pub(crate) mod propagate;
pub(crate) mod pubsub;
pub(crate) mod querybuf;
pub(crate) mod rdb;
pub(crate) mod replica;
pub(crate) mod replication;
pub(crate) mod restart;
pub(crate) mod save_params;
pub(crate) mod scan;
pub(crate) mod scripting;
pub(crate) mod server;
pub(crate) mod set;
pub(crate) mod shrink;
pub(crate) mod slowlog;
pub(crate) mod state;
pub(crate) mod stream;
pub(crate) mod stream_group;
pub(crate) mod stream_id;
pub(crate) mod string;
pub(crate) mod thin;
pub(crate) mod tracking;
pub(crate) mod value;
pub(crate) mod walk;
pub(crate) mod zset;

pub use clock::Clock;
pub use durability::PowerLoss;
pub use frame::{Frame, Protocol};
pub use memory::CountingAllocator;
pub use server::{
    BlockingServer, Builder, Connector, LocalClient, PushStream, Server, ServerHandle, StopSignal,
};

pub use config::REDIS_VERSION;
