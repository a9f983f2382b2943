//! `XDEL` and `XSETID`: deleting entries by ID, and setting what a stream remembers of its
//! history (its last ID, `entries-added`, `max-deleted-entry-id`).

use crate::notify::STREAM;
use bytes::Bytes;

use super::stream_args::{parse_strict_id, stream_of, write_stream};
use super::util::{is, parse_i64, syntax_error};
use super::{spec, CommandSpec, Ctx, DENYOOM, FAST, WRITE};
use crate::frame::Frame;

/// `XDEL` and `XSETID`.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec("xdel", -3, WRITE | FAST, 1, 1, 1, xdel),
    spec("xsetid", -3, WRITE | DENYOOM | FAST, 1, 1, 1, xsetid),
];

/// `XDEL key id [id ...]`: how many of the IDs were there. Every ID is checked before any
/// entry goes, so a bad ID deletes nothing.
fn xdel(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let ids = match args[2..]
        .iter()
        .map(|a| parse_strict_id(a))
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(ids) => ids,
        Err(e) => return e,
    };
    let key = &args[1];
    let mut e = match write_stream(ctx, key) {
        Ok(Some(e)) => e,
        Ok(None) => return Frame::Integer(0),
        Err(err) => return err,
    };
    let s = stream_of(&mut e);
    let deleted = ids.into_iter().filter(|&id| s.delete(id)).count();
    drop(e);
    if deleted > 0 {
        ctx.modified(key);
        ctx.notify(STREAM, "xdel", key);
    }
    Frame::Integer(deleted as i64)
}

/// `XSETID key last-id [ENTRIESADDED n] [MAXDELETEDID id]`.
fn xsetid(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let id = match parse_strict_id(&args[2]) {
        Ok(id) => id,
        Err(e) => return e,
    };
    let mut added = None;
    let mut deleted = None;
    let mut i = 3;
    while i < args.len() {
        let more = i + 1 < args.len();
        if is(&args[i], "entriesadded") && more {
            match parse_i64(&args[i + 1]) {
                Ok(n) if n < 0 => return Frame::error("ERR entries_added must be positive"),
                Ok(n) => added = Some(n as u64),
                Err(e) => return e,
            }
        } else if is(&args[i], "maxdeletedid") && more {
            match parse_strict_id(&args[i + 1]) {
                Ok(d) if id < d => {
                    return Frame::error(
                        "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                    )
                }
                Ok(d) => deleted = Some(d),
                Err(e) => return e,
            }
        } else {
            return syntax_error();
        }
        i += 2;
    }
    let key = &args[1];
    let mut e = match write_stream(ctx, key) {
        Ok(Some(e)) => e,
        Ok(None) => return Frame::error("ERR no such key"),
        Err(err) => return err,
    };
    let s = stream_of(&mut e);
    if let Some(((_, _), (&top, _))) = s.edges() {
        if id < top {
            return Frame::error(
                "ERR The ID specified in XSETID is smaller than the target stream top item",
            );
        }
        if added.is_some_and(|a| (s.len() as u64) > a) {
            return Frame::error(
                "ERR The entries_added specified in XSETID is smaller than the target stream length",
            );
        }
    }
    s.set_id(id, added, deleted);
    drop(e);
    ctx.modified(key);
    ctx.notify(STREAM, "xsetid", key);
    Frame::ok()
}
