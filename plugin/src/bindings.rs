//! The host-side bindings wasmtime generates from the WIT world `lock-client`
//! (`wasm-client/wit`): the `redis` imports the host implements ([`crate::state`]) and the
//! lock interfaces the component exports. The crate root re-exports them whole. Generated
//! code carries no doc comments.

#![allow(missing_docs)]

wasmtime::component::bindgen!({
    world: "lock-client",
    path: "../wasm-client/wit",
    imports: { default: async | trappable },
    exports: { default: async },
});
