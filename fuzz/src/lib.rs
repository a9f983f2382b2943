//! The checks behind latchkey's fuzz targets, one module per door an attacker can knock on.
//!
//! Each target in `fuzz_targets/` is one line handing libFuzzer's bytes to a function here.
//! The same functions replay the minimized findings checked in under `fuzz/regressions/` in
//! the normal (stable) test suite: `tests/tests/fuzz_regressions.rs` includes this file with
//! `#[path]`, so a finding is replayed through exactly the code that found it.
//!
//! Every check panics (which libFuzzer reports as a crash) when an invariant breaks; a hang is
//! caught by libFuzzer's `-timeout`, unbounded memory by `-rss_limit_mb` and by the counting
//! allocator in [`alloc`].

pub mod alloc;
pub mod dispatch;
pub mod loaders;
pub mod lua;
pub mod resp;
pub mod rt;
