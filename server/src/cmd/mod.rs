//! Commands: the table of every command the server knows, one module per family. What a
//! command is lives in [`crate::command`]; running one in [`crate::dispatch`].
//!
//! Each command family lives in its own module and exports a `COMMANDS` table of
//! [`CommandSpec`]s. A spec names the command, its arity (Redis's convention: `N` exactly,
//! `-N` at least), its flags, where its keys are, and the handler that runs it.
//!
//! A handler is a plain function from a [`Ctx`] and the arguments (the command name first) to a
//! reply [`Frame`]. It runs while the dispatcher holds the execution [gate](crate::gate): shared
//! for ordinary commands, exclusive for those flagged [`EXCLUSIVE`]. A handler that must wait
//! (`BLPOP`, `WAIT`, `DEBUG SLEEP`) hands a future to [`Ctx::block`] instead of waiting itself.

pub use crate::command::*;
pub use crate::dispatch::{call, call_spec, execute, execute_spec};

pub mod connection;
pub mod hashes;
pub mod keys;
pub mod list_multi;
pub mod lists;
pub mod memory;
pub mod object;
pub mod pubsub;
pub mod relocate;
pub mod replication;
pub mod scripting;
pub mod server;
pub mod sets;
pub mod strings;
pub(crate) mod tracking;
pub mod transactions;
pub mod util;
pub mod zsets;

/// Every command table, in the order `COMMAND` lists them.
fn tables() -> [&'static [CommandSpec]; 16] {
    [
        replication::COMMANDS,
        connection::COMMANDS,
        server::COMMANDS,
        strings::COMMANDS,
        keys::COMMANDS,
        object::COMMANDS,
        memory::COMMANDS,
        relocate::COMMANDS,
        hashes::COMMANDS,
        lists::COMMANDS,
        list_multi::COMMANDS,
        sets::COMMANDS,
        zsets::COMMANDS,
        pubsub::COMMANDS,
        transactions::COMMANDS,
        scripting::COMMANDS,
    ]
}

/// Registers the command table with the dispatcher (see [`crate::command::install`]); a
/// server does this when it starts.
pub fn install() {
    crate::command::install(|| tables().to_vec());
}

/// Looks a command up by name, case-insensitively.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    install();
    crate::command::lookup(name)
}

/// Every command, for `COMMAND` and `COMMAND COUNT`.
pub fn all_commands() -> Vec<&'static CommandSpec> {
    tables().iter().flat_map(|t| t.iter()).collect()
}
