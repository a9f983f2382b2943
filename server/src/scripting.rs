//! Lua scripting state: the interpreter and the cache of scripts by SHA1.

/// The server's scripting engine.
#[derive(Debug, Default)]
pub struct Scripting {}
