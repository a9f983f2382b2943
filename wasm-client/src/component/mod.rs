//! The WebAssembly component: the interfaces of the WIT package in `wit/`, implemented with the
//! same lock code as the native crate, over a [`crate::Transport`] made of the host's `redis`
//! imports.
//!
//! Host calls are synchronous from the component's side (the host suspends it while a call is
//! pending), so every future the locks create is ready as soon as it is polled; a minimal
//! executor drives them.
//!
//! - [`transport`]: the transport over the host's imports;
//! - [`locks`]: the exported `locks` interface;
//! - [`watchdog`]: the exported `watchdog` interface (leases kept alive by the host);
//! - `alloc`: the component's memory allocator (small blocks from per-size free lists).

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

mod alloc;
pub mod locks;
pub mod transport;
pub mod watchdog;

/// Every allocation of the component goes through the size-class lists of [`alloc`].
#[global_allocator]
static ALLOCATOR: alloc::SizeClasses = alloc::SizeClasses::new();

/// The bindings wit-bindgen generates from the WIT world `lock-client` (`wit/`): the host's
/// `redis` imports and the interfaces this component exports. Generated code carries no doc
/// comments, and its items are public only to this module.
#[allow(missing_docs, unreachable_pub)]
mod bindings {
    wit_bindgen::generate!({
        world: "lock-client",
        path: "wit",
    });
}

use bindings::{export, exports, latchkey};
use exports::latchkey::locks::locks as api;
use latchkey::locks::redis as host;

/// Runs a future whose every await is a (synchronous) host call.
fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

/// The type the generated bindings export the component's interfaces through.
struct Component;

export!(Component with_types_in bindings);
