//! `DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE]`: writes the snapshot file, empties the server and
//! loads the file back, as Redis 7.0 does. Redis's own tests use it to check that every type
//! and encoding survives a round trip through the RDB format; a user can do the same with
//! their data.
//!
//! The options, as in Redis:
//! - `NOSAVE` loads the file already on disk instead of writing one first;
//! - `NOFLUSH` keeps what is in memory (keys and function libraries) and adds the file's;
//! - `MERGE` lets the file's keys and libraries replace those of the same name.
//!
//! It runs with the execution gate held exclusively (see `debug_flags`), so no other command
//! sees the keyspace half loaded.

use bytes::Bytes;

use super::util::is;
use super::Ctx;
use crate::frame::Frame;
use crate::rdb::{file, read};

/// Redis's answer when the file cannot be loaded.
const LOAD_FAILED: &str = "ERR Error trying to load the RDB dump";

/// `DEBUG RELOAD [option ...]`.
pub(crate) fn reload(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let (mut merge, mut flush, mut save) = (false, true, true);
    for opt in &args[2..] {
        if is(opt, "merge") {
            merge = true;
        } else if is(opt, "noflush") {
            flush = false;
        } else if is(opt, "nosave") {
            save = false;
        } else {
            return Frame::error(
                "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.",
            );
        }
    }
    // Emptying the keyspace and the function libraries under a running script (which a
    // script could ask for with `DEBUG SET-DISABLE-DENY-SCRIPTS 1`) would pull them from
    // under it.
    if ctx.in_script {
        return Frame::error("ERR This Redis command is not allowed from script");
    }
    let shared = ctx.shared;
    let path = file::path(shared);
    if save {
        let taken = file::take(shared);
        if let Err(e) = file::write(&path, &taken.data) {
            tracing::warn!("DEBUG RELOAD could not save {}: {e}", path.display());
            // Redis answers a bare `-ERR` and says why in its log, as for `SAVE`.
            return Frame::error("ERR");
        }
        file::saved(shared, taken.dirty);
    }
    let data = match std::fs::read(&path) {
        Ok(data) => data,
        Err(e) => {
            tracing::warn!("DEBUG RELOAD could not read {}: {e}", path.display());
            return Frame::error(LOAD_FAILED);
        }
    };
    // The whole file is parsed (and its checksum checked) before anything changes.
    let (loaded, mut keys) = match read::read_all(&data) {
        Ok(read) => read,
        Err(e) => {
            tracing::warn!("DEBUG RELOAD could not load {}: {e:?}", path.display());
            return Frame::error(LOAD_FAILED);
        }
    };
    let scripting = shared.scripting();
    if !flush && !merge {
        // Without MERGE, a library or a key the server already has is a conflict. Redis fails
        // the load on such a library and stops the whole server on such a key; latchkey
        // refuses both before it changes anything.
        let names = loaded
            .functions
            .iter()
            .filter_map(|code| crate::scripting::functions::parse_shebang(code).ok());
        let clash = names.into_iter().any(|name| scripting.has_library(&name))
            || keys
                .iter()
                .any(|(db, key, _)| shared.keyspace.db(*db).contains(key, ctx.now_ms));
        if clash {
            return Frame::error(LOAD_FAILED);
        }
    }
    if flush {
        // Redis empties the keys of every database and the function libraries (not the
        // `EVAL` script cache).
        shared.keyspace.clear_all();
        scripting.flush_libraries();
    }
    for code in &loaded.functions {
        if let Err(e) = scripting.load_library(code, merge, false) {
            tracing::warn!("DEBUG RELOAD could not load a function library: {e:?}");
            return Frame::error(LOAD_FAILED);
        }
    }
    // A master drops the keys whose time is already up, as Redis's loader does; a replica
    // keeps them for its master's `DEL`.
    if !shared.is_replica() {
        keys.retain(|(_, _, entry)| entry.expires_at().is_none_or(|at| at > ctx.now_ms));
    }
    read::insert_keys(shared, keys);
    tracing::warn!("DB reloaded by DEBUG RELOAD");
    Frame::ok()
}
