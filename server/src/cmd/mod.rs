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

pub(crate) use crate::command::*;
pub(crate) use crate::dispatch::{call_spec, execute};

pub(crate) mod acl;
pub(crate) mod appendonly;
pub(crate) mod bgrewriteaof;
pub(crate) mod bitfield;
pub(crate) mod bitmaps;
pub(crate) mod bitstring;
pub(crate) mod blocking;
pub(crate) mod client;
pub(crate) mod cluster;
pub(crate) mod command_info;
mod command_meta;
pub(crate) mod connection;
pub(crate) mod debug_digest;
pub(crate) mod debug_object;
pub(crate) mod debug_reload;
pub(crate) mod dump;
pub(crate) mod function_dump;
pub(crate) mod function_help;
pub(crate) mod geo;
pub(crate) mod geo_search;
pub(crate) mod hashes;
pub(crate) mod hll;
pub(crate) mod hll_debug;
pub(crate) mod hrandfield;
pub(crate) mod keys;
pub(crate) mod latency;
pub(crate) mod lcs;
pub(crate) mod list_multi;
pub(crate) mod lists;
pub(crate) mod memory;
pub(crate) mod memory_stats;
pub(crate) mod migrate;
mod migrate_link;
pub(crate) mod object;
pub(crate) mod populate;
pub(crate) mod pubsub;
pub(crate) mod relocate;
pub(crate) mod replication;
pub(crate) mod save;
pub(crate) mod save_points;
pub(crate) mod scripting;
pub(crate) mod server;
pub(crate) mod sets;
pub(crate) mod slowlog;
pub(crate) mod sort;
pub(crate) mod sort_keys;
pub(crate) mod stream_add;
pub(crate) mod stream_args;
pub(crate) mod stream_claim;
pub(crate) mod stream_edit;
pub(crate) mod stream_group;
pub(crate) mod stream_info;
pub(crate) mod stream_pending;
pub(crate) mod stream_range;
pub(crate) mod stream_read;
pub(crate) mod stream_readgroup;
pub(crate) mod strings;
pub(crate) mod swapdb;
pub(crate) mod tracking;
pub(crate) mod transactions;
pub(crate) mod util;
pub(crate) mod zset_algebra;
pub(crate) mod zset_lex;
pub(crate) mod zset_pop;
pub(crate) mod zset_random;
pub(crate) mod zset_range;
pub(crate) mod zsets;

/// Every command table, in the order `COMMAND` lists them.
fn tables() -> [&'static [CommandSpec]; 50] {
    [
        acl::COMMANDS,
        replication::COMMANDS,
        cluster::COMMANDS,
        connection::COMMANDS,
        client::COMMANDS,
        server::COMMANDS,
        save::COMMANDS,
        bgrewriteaof::COMMANDS,
        command_info::COMMANDS,
        strings::COMMANDS,
        bitmaps::COMMANDS,
        bitfield::COMMANDS,
        lcs::COMMANDS,
        keys::COMMANDS,
        object::COMMANDS,
        memory::COMMANDS,
        slowlog::COMMANDS,
        latency::COMMANDS,
        geo::COMMANDS,
        geo_search::COMMANDS,
        relocate::COMMANDS,
        dump::COMMANDS,
        migrate::COMMANDS,
        swapdb::COMMANDS,
        hashes::COMMANDS,
        hrandfield::COMMANDS,
        lists::COMMANDS,
        list_multi::COMMANDS,
        sets::COMMANDS,
        sort::COMMANDS,
        zsets::COMMANDS,
        zset_range::COMMANDS,
        zset_lex::COMMANDS,
        zset_algebra::COMMANDS,
        zset_pop::COMMANDS,
        zset_random::COMMANDS,
        hll::COMMANDS,
        hll_debug::COMMANDS,
        stream_add::COMMANDS,
        stream_range::COMMANDS,
        stream_edit::COMMANDS,
        stream_read::COMMANDS,
        stream_info::COMMANDS,
        stream_group::COMMANDS,
        stream_readgroup::COMMANDS,
        stream_pending::COMMANDS,
        stream_claim::COMMANDS,
        pubsub::COMMANDS,
        transactions::COMMANDS,
        scripting::COMMANDS,
    ]
}

/// Registers the command table with the dispatcher (see [`crate::command::install`]), and
/// the AOF's switch a replica's full sync uses ([`crate::command::AofSwitch`]); a server does
/// this when it starts.
pub(crate) fn install() {
    crate::command::install(|| tables().to_vec());
    crate::command::install_aof_switch(crate::command::AofSwitch {
        off: appendonly::turn_off,
        on: appendonly::turn_on,
    });
}

/// Looks a command up by name, case-insensitively.
pub(crate) fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    install();
    crate::command::lookup(name)
}

/// Every command, for `COMMAND` and `COMMAND COUNT`.
pub(crate) fn all_commands() -> Vec<&'static CommandSpec> {
    tables().iter().flat_map(|t| t.iter()).collect()
}
