//! The checks behind latchkey's fuzz targets, one module per door an attacker can knock on.
//!
//! Each target in the repository's `fuzz/fuzz_targets/` is one line handing libFuzzer's bytes
//! to a function here. The same functions replay the minimized findings checked in under
//! `fuzz/regressions/` in the normal (stable) test suite (`tests/tests/fuzz_regressions.rs`),
//! so a finding is replayed through exactly the code that found it.
//!
//! Every check panics (which libFuzzer reports as a crash) when an invariant breaks; a hang is
//! caught by libFuzzer's `-timeout`, unbounded memory by `-rss_limit_mb` and by the allocation
//! [`Meter`] the fuzz binary installs.

pub mod dispatch;
pub mod hll;
pub mod loaders;
pub mod lua;
pub mod resp;
pub mod restore;
pub mod rt;

use std::sync::OnceLock;

/// How a check measures the memory a parse allocated: the fuzz binary (or a test) counts
/// allocations with its own global allocator and hands its counters over with [`set_meter`].
/// Without a meter, every measurement is zero and the memory bounds are not checked.
#[derive(Clone, Copy, Debug)]
pub struct Meter {
    /// Starts a measurement: returns the bytes live now and resets the peak to them.
    pub start: fn() -> usize,
    /// The most bytes live at once since `start` returned the given base, beyond it.
    pub peak_since: fn(usize) -> usize,
}

static METER: OnceLock<Meter> = OnceLock::new();

/// Installs the allocation meter the checks use (the first call wins).
pub fn set_meter(meter: Meter) {
    let _ = METER.set(meter);
}

/// Starts a measurement with the installed meter.
fn alloc_start() -> usize {
    METER.get().map_or(0, |m| (m.start)())
}

/// The peak since `base` with the installed meter.
fn alloc_peak_since(base: usize) -> usize {
    METER.get().map_or(0, |m| (m.peak_since)(base))
}
