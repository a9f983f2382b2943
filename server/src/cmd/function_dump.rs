//! `FUNCTION DUMP` and `FUNCTION RESTORE`: every function library serialized in Redis 7.0's
//! format (a `FUNCTION2` record per library: its code; then the footer of a `DUMP` payload),
//! and libraries loaded back from such a payload, so they move between latchkey and
//! redis-server.
//!
//! `RESTORE` is all or nothing, as in Redis: with `APPEND` (the default) a library that
//! already exists is an error, with `REPLACE` it is replaced, with `FLUSH` every library goes
//! first. When any library of the payload fails to load, the libraries that were there before
//! are put back as they were.

use bytes::Bytes;

use super::util::{is, subcommand_syntax_error};
use crate::frame::Frame;
use crate::rdb::{dump, write};
use crate::scripting::Scripting;
use crate::state::Shared;

/// What happens to the libraries already loaded.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Policy {
    /// Keep them; a library of the same name is an error.
    Append,
    /// Keep them, replacing those of the same names.
    Replace,
    /// Drop them all first.
    Flush,
}

/// `FUNCTION DUMP`.
pub(crate) fn dump(shared: &Shared) -> Frame {
    Frame::Bulk(dump::functions_payload(&write::function_libraries(shared)))
}

/// `FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE]`. With `limited`, each library's code
/// may run for a bounded time while it loads (a client's restore; not our master's, nor the
/// AOF's).
pub(crate) fn restore(shared: &Shared, args: &[Bytes], limited: bool) -> Frame {
    if args.len() > 4 {
        return subcommand_syntax_error(args, "function");
    }
    let policy =
        match args.get(3) {
            None => Policy::Append,
            Some(p) if is(p, "append") => Policy::Append,
            Some(p) if is(p, "replace") => Policy::Replace,
            Some(p) if is(p, "flush") => Policy::Flush,
            Some(_) => return Frame::error(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            ),
        };
    let codes = match dump::decode_functions(&args[2]) {
        Ok(c) => c,
        Err(e) => return Frame::error(format!("ERR {e}")),
    };
    let scripting = shared.scripting();
    if policy == Policy::Append {
        // Redis's words for a clash with a loaded library (`libraryJoin`).
        for code in &codes {
            if let Ok(name) = crate::scripting::functions::parse_shebang(code) {
                if scripting.has_library(&name) {
                    return Frame::error(format!("ERR Library {name} already exists"));
                }
            }
        }
    }
    let before = write::function_libraries(shared);
    if policy == Policy::Flush {
        scripting.flush_libraries();
    }
    for code in &codes {
        if let Err(e) = scripting.load_library(code, policy == Policy::Replace, limited) {
            put_back(scripting, &before);
            return e;
        }
    }
    Frame::ok()
}

/// Puts the libraries back as they were before a failed restore: each of them loaded once
/// already, so each loads again.
fn put_back(scripting: &Scripting, before: &[Bytes]) {
    scripting.flush_libraries();
    for code in before {
        let _ = scripting.load_library(code, false, false);
    }
}
