//! Fuzz target `restore_payload`: see `latchkey_server::internals::fuzz::restore` (server/src/internals/fuzz/) for what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(init: latchkey_fuzz::init(), |data: &[u8]| latchkey_fuzz::restore::check(data));
