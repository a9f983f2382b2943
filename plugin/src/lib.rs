//! latchkey-plugin: the wasmtime host that runs tenants built on the latchkey-client component,
//! each in its own namespace with CPU and memory bounds, against the embedded server or a real
//! Redis.
//!
//! The host arrives with the wasm issue; this crate currently only reserves its place in the
//! workspace.
