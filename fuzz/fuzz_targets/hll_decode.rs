//! Fuzz target `hll_decode`: see `latchkey_server::internals::fuzz::hll` (server/src/internals/fuzz/) for what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(init: latchkey_fuzz::init(), |data: &[u8]| latchkey_fuzz::hll::check(data));
