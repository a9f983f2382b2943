//! Fuzz target `lua_eval`: see `latchkey_fuzz::lua` (fuzz/src/) for what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(init: latchkey_fuzz::init(), |data: &[u8]| latchkey_fuzz::lua::check(data));
