//! latchkey-plugin: the wasmtime host that runs tenants built on the latchkey-client component.
//!
//! - [`Host`] ([`host`]): one engine, components compiled once and cached on disk, the pooling
//!   allocator (on-demand when the pool cannot be reserved), the epoch ticker;
//! - [`Tenant`] and [`Instance`] ([`tenant`]): a namespace and rate limit; a running copy of a
//!   component in its own store, dropped for good when it traps;
//! - [`Namespace`] ([`namespace`]): keys and channels rewritten under the tenant (hash-tag
//!   aware), commands allow-listed, scripts only the lock client's own, by SHA1;
//! - [`Backend`] ([`backend`]): the latchkey server in-process, or real Redis (single node,
//!   Sentinel, Cluster) through redis-rs; a host may also be given several independent
//!   backends for tenants' RedLocks ([`Host::with_nodes`]);
//! - [`Limits`] ([`limits`]): every bound a tenant runs under: CPU per call into the guest and
//!   per second ([`cpu`]), memory over all of an instance's memories, host calls and bytes
//!   sent by token buckets, and quotas on what a tenant hands the host (kept leases,
//!   subscriptions, argument lists, blocking time, random bytes; [`quota`] for commands,
//!   [`storage`] for what the lock client's scripts leave on the server);
//! - the lease keeper ([`keeper`]): renews the leases tenants hand it, interrupts a tenant
//!   whose lease was lost;
//! - [`lesson`]: `latchkey lesson`, how a failover loses a lock and what each defence
//!   changes, played with real tenants and told from what was measured;
//! - [`fault_proxy`]: a TCP proxy that delays, holds or drops a real `redis-server`'s
//!   replication stream (the lessons' `--against` mode, and the failover tests);
//! - [`state`]: the host functions (`redis` imports) themselves, all `async`: a guest that
//!   waits is suspended and holds no thread;
//! - [`keyvalue`]: the standard `wasi:keyvalue` (0.2.0-draft2) for tenants written against it,
//!   each bucket in the tenant's namespace, and the `latchkey:lease` proposal beside it;
//! - [`run_cli`]: `latchkey run`, which runs such tenants (`docs/TENANTS.md`).

pub mod backend;
pub mod bindings;
pub(crate) mod budget;
pub(crate) mod cpu;
pub mod fault_proxy;
pub mod guest;
pub mod host;
pub mod keeper;
pub mod keyvalue;
pub mod lesson;
pub mod limits;
pub mod namespace;
pub(crate) mod quota;
#[cfg(feature = "cli")]
pub mod run_cli;
pub mod state;
pub(crate) mod storage;
pub mod tenant;
pub(crate) mod unknown_imports;

pub use bindings::*;

pub use backend::Backend;
pub use exports::latchkey::locks::locks::{Extended, Lease, RedLease, Released};
pub use guest::component_path;
pub use host::{Host, HostConfig, Plugin};
pub use limits::Limits;
pub use namespace::Namespace;
pub use tenant::{Instance, Parts, Tenant, Trapped};
