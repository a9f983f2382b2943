//! `COPY` and `MOVE`: a key's value (with its TTL) copied to another name or database, or
//! moved to another database. Both touch two keys, possibly in two databases, so they run
//! alone ([`MULTI_KEY`]: they always have more than one argument after the name).

use bytes::Bytes;

use super::util::{is, parse_i64, syntax_error};
use super::{spec, CommandSpec, Ctx, DENYOOM, FAST, MULTI_KEY, WRITE};
use crate::db::{Entry, NUM_DBS};
use crate::frame::Frame;
use crate::notify::GENERIC;

/// `COPY` and `MOVE`.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec("copy", -3, WRITE | DENYOOM | MULTI_KEY, 1, 2, 1, copy),
    spec("move", 3, WRITE | FAST | MULTI_KEY, 1, 1, 1, move_cmd),
];

/// A database index argument: Redis's errors for text and for an index out of range.
fn db_index(arg: &[u8]) -> Result<usize, Frame> {
    let i = parse_i64(arg)?;
    if !(0..NUM_DBS as i64).contains(&i) {
        return Err(Frame::error("ERR DB index is out of range"));
    }
    Ok(i as usize)
}

fn same_objects() -> Frame {
    Frame::error("ERR source and destination objects are the same")
}

/// The live entry at `key` of database `db`, copied: value, TTL and access stamp. `MOVE`
/// keeps the stamp (Redis moves the object itself); `COPY` stamps its new key afresh.
fn live_copy(ctx: &Ctx<'_>, db: usize, key: &[u8]) -> Option<Entry> {
    let e = ctx
        .shared
        .keyspace
        .db(db)
        .get(key, ctx.now_ms, ctx.lazy_delete())?;
    let mut copy = Entry::with_expiry(e.value.clone(), e.expires_at());
    copy.access = e.access.clone();
    Some(copy)
}

/// Stores a copied or moved entry (noted as created, whether or not it replaced a key); a
/// list or a sorted set wakes the clients blocked on its new key, as a push would. A copy
/// (`stamp_at` given) is a new object to Redis, used now whatever the original's idle time;
/// a moved key keeps its stamp.
fn store(db: &crate::db::Db, key: &Bytes, entry: Entry, stamp_at: Option<u64>) {
    let blockable = entry.value.wakes_blocked_clients();
    // A stream wakes all its readers (each reads the same entries), a list or sorted set the
    // first client in line.
    let readers = matches!(entry.value, crate::db::Value::Stream(_));
    // Redis deletes a key it replaces and adds the copy anew (a `new` event either way).
    let replaced = match stamp_at {
        Some(now_ms) => db.insert_new(key.clone(), entry, now_ms),
        None => db.insert(key.clone(), entry),
    };
    if replaced {
        db.note_created(key);
    }
    if readers {
        db.signal_all(key);
    } else if blockable {
        db.signal_ready(key);
    }
}

fn copy(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let (src, dst) = (&args[1], &args[2]);
    let mut target = ctx.client.db;
    let mut replace = false;
    let mut i = 3;
    while i < args.len() {
        if is(&args[i], "replace") {
            replace = true;
            i += 1;
        } else if is(&args[i], "db") && i + 1 < args.len() {
            target = match db_index(&args[i + 1]) {
                Ok(d) => d,
                Err(e) => return e,
            };
            i += 2;
        } else {
            return syntax_error();
        }
    }
    if target == ctx.client.db && src == dst {
        return same_objects();
    }
    let Some(entry) = live_copy(ctx, ctx.client.db, src) else {
        return Frame::Integer(0);
    };
    let to = ctx.shared.keyspace.db(target);
    if to.get(dst, ctx.now_ms, ctx.lazy_delete()).is_some() && !replace {
        return Frame::Integer(0);
    }
    store(to, dst, entry, Some(ctx.now_ms));
    ctx.changed();
    ctx.shared.keyspace_event(GENERIC, "copy_to", dst, target);
    Frame::Integer(1)
}

fn move_cmd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let key = &args[1];
    let target = match db_index(&args[2]) {
        Ok(d) => d,
        Err(e) => return e,
    };
    if target == ctx.client.db {
        return same_objects();
    }
    let Some(entry) = live_copy(ctx, ctx.client.db, key) else {
        return Frame::Integer(0);
    };
    let to = ctx.shared.keyspace.db(target);
    if to.get(key, ctx.now_ms, ctx.lazy_delete()).is_some() {
        return Frame::Integer(0);
    }
    store(to, key, entry, None);
    ctx.db().remove(key);
    ctx.changed();
    ctx.notify(GENERIC, "move_from", key);
    ctx.shared.keyspace_event(GENERIC, "move_to", key, target);
    Frame::Integer(1)
}
