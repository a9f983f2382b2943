//! Fuzz target `lua_eval`: see `latchkey_fuzz::lua` (fuzz/src/) for what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| latchkey_fuzz::lua::check(data));
