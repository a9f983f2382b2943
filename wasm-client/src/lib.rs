//! latchkey-client: the lock algorithms (simple, watchdog, waiting, reentrant, fair, read-write,
//! semaphore, multi-lock, RedLock, fencing, WAIT-confirmed), written once over a small transport
//! trait so that the same code runs natively on tokio and inside a WebAssembly component.
//!
//! The algorithms arrive with the lock-client issue; this crate currently only reserves its place
//! in the workspace.
