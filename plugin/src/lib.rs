//! latchkey-plugin: the wasmtime host that will run tenants built on the latchkey-client
//! component, each in its own namespace with CPU and memory bounds, against the embedded server
//! or a real Redis.
//!
//! Nothing is implemented here yet: the lock client it will host (`latchkey-client`) exists and
//! builds for `wasm32-wasip2`; the WIT contract and this host are the next piece of work.
