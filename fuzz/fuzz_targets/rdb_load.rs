//! Fuzz target `rdb_load`: see `latchkey_server::internals::fuzz::loaders` (server/src/internals/fuzz/) for what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(init: latchkey_fuzz::init(), |data: &[u8]| latchkey_fuzz::loaders::check_rdb(data));
