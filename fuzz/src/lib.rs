//! latchkey's fuzz targets, run with cargo-fuzz (libFuzzer) on nightly: `scripts/fuzz`.
//!
//! The checks live in the server crate (`latchkey_server::internals::fuzz`, behind its
//! `internals` feature), beside the code they check; the regression tests replay the findings
//! through the same functions. This crate adds what only a fuzz binary may have: a counting
//! global allocator ([`alloc`]) whose counters the checks read for their memory bounds, handed
//! over by [`init`] before the first input.

pub mod alloc;

pub use latchkey_server::internals::fuzz::{dispatch, hll, loaders, lua, resp, restore};

/// Hands the counting allocator's meter to the checks; every target runs it once at start.
pub fn init() {
    latchkey_server::internals::fuzz::set_meter(latchkey_server::internals::fuzz::Meter {
        start: alloc::start,
        peak_since: alloc::peak_since,
    });
}
