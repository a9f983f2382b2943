//! List commands, including the blocking `BLPOP`/`BRPOP` that some lock libraries wait with.
//!
//! `BLPOP`/`BRPOP` wait through [`block_until`] (`cmd/blocking.rs`); the pop happens only when
//! the reply is about to be produced, so a client that disconnects while blocked takes nothing.

use crate::list::List;
use crate::memory::EntryMut;
use bytes::Bytes;

use super::blocking::{block_until, parse_timeout};
use super::util::{
    container_mut, is, not_integer, parse_i64, read_container, syntax_error, write_container,
};
use super::{
    lookup, spec, CommandSpec, Ctx, ADDS_ELEMENTS, BLOCKING, DENYOOM, EXCLUSIVE, FAST, NOSCRIPT,
    READONLY, WRITE,
};
use crate::command::WALKS_VALUE;
use crate::db::Db;
use crate::frame::Frame;
use crate::notify::LIST;
use crate::state::Shared;

/// The list commands.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec("lpush", -3, ADDS_ELEMENTS, 1, 1, 1, lpush),
    spec("rpush", -3, ADDS_ELEMENTS, 1, 1, 1, rpush),
    spec("lpushx", -3, ADDS_ELEMENTS, 1, 1, 1, lpushx),
    spec("rpushx", -3, ADDS_ELEMENTS, 1, 1, 1, rpushx),
    spec("lpop", -2, WRITE | FAST, 1, 1, 1, lpop),
    spec("rpop", -2, WRITE | FAST, 1, 1, 1, rpop),
    spec("llen", 2, READONLY | FAST, 1, 1, 1, llen),
    spec("lrange", 4, READONLY | WALKS_VALUE, 1, 1, 1, lrange),
    spec("lindex", 3, READONLY, 1, 1, 1, lindex),
    spec("lset", 4, WRITE | DENYOOM, 1, 1, 1, lset),
    spec("lrem", 4, WRITE | WALKS_VALUE, 1, 1, 1, lrem),
    spec("ltrim", 4, WRITE | WALKS_VALUE, 1, 1, 1, ltrim),
    spec(
        "linsert",
        5,
        WRITE | DENYOOM | WALKS_VALUE,
        1,
        1,
        1,
        linsert,
    ),
    spec("lpos", -3, READONLY | WALKS_VALUE, 1, 1, 1, lpos),
    spec(
        "rpoplpush",
        3,
        WRITE | DENYOOM | EXCLUSIVE,
        1,
        2,
        1,
        rpoplpush,
    ),
    spec("lmove", 5, WRITE | DENYOOM | EXCLUSIVE, 1, 2, 1, lmove),
    spec("blpop", -3, WRITE | NOSCRIPT | BLOCKING, 1, -2, 1, blpop),
    spec("brpop", -3, WRITE | NOSCRIPT | BLOCKING, 1, -2, 1, brpop),
];

fn read<R>(ctx: &Ctx<'_>, key: &[u8], f: impl FnOnce(&List) -> R) -> Result<Option<R>, Frame> {
    read_container(ctx.db(), key, ctx.now_ms, ctx.lazy_delete(), f)
}

/// The list at `key` for writing. `create`: when the key is absent, make a list there with
/// these options (`list-max-listpack-size`, `list-compress-depth`, read from the
/// configuration when the command runs: see [`List::set_options`]); `None` leaves it absent.
pub(super) fn write_in<'a>(
    db: &'a Db,
    key: &Bytes,
    now_ms: u64,
    lazy: bool,
    create: Option<(i64, i64)>,
) -> Result<Option<EntryMut<'a>>, Frame> {
    let mut e = write_container::<List>(db, key, now_ms, lazy, create.is_some())?;
    if let (Some(e), Some((fill, depth))) = (e.as_mut(), create) {
        let l = list_of(e);
        // No list in the keyspace is empty: an empty one was made just now.
        if l.is_empty() {
            l.set_options(fill, depth);
        }
    }
    Ok(e)
}

fn write<'a>(ctx: &Ctx<'a>, key: &Bytes, create: bool) -> Result<Option<EntryMut<'a>>, Frame> {
    let options = create.then(|| ctx.shared.config.encodings.list_options());
    write_in(ctx.db(), key, ctx.now_ms, ctx.lazy_delete(), options)
}

pub(super) fn list_of<'e>(e: &'e mut EntryMut<'_>) -> &'e mut List {
    container_mut(e)
}

fn push(ctx: &mut Ctx<'_>, args: &[Bytes], left: bool, only_existing: bool) -> Frame {
    let key = &args[1];
    let mut e = match write(ctx, key, !only_existing) {
        Ok(Some(e)) => e,
        Ok(None) => return Frame::Integer(0),
        Err(err) => return err,
    };
    let l = list_of(&mut e);
    for v in &args[2..] {
        if left {
            l.push_front(v);
        } else {
            l.push_back(v);
        }
    }
    let len = l.len();
    drop(e);
    ctx.modified(key);
    notify_push(ctx.shared, ctx.client.db, key, left);
    ctx.db().signal_ready(key);
    Frame::Integer(len as i64)
}

/// The keyspace notification of a push onto `key` (`lpush` or `rpush`).
pub(super) fn notify_push(shared: &Shared, db_index: usize, key: &[u8], left: bool) {
    let event = if left { "lpush" } else { "rpush" };
    shared.keyspace_event(LIST, event, key, db_index);
}

/// The keyspace notifications of a pop from `key`, in Redis's order: `lpop` or `rpop`, then
/// `del` when the pop emptied (and so deleted) the list.
pub(super) fn notify_pop(shared: &Shared, db_index: usize, key: &[u8], left: bool) {
    let event = if left { "lpop" } else { "rpop" };
    shared.keyspace_event_then_del_if_gone(LIST, event, key, db_index);
}

fn lpush(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    push(ctx, args, true, false)
}

fn rpush(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    push(ctx, args, false, false)
}

fn lpushx(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    push(ctx, args, true, true)
}

fn rpushx(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    push(ctx, args, false, true)
}

/// Pops up to `count` elements from one end of a list, deleting the key when it empties.
/// `Ok(None)` when the key does not exist.
pub(super) fn pop_from(
    db: &Db,
    key: &Bytes,
    now_ms: u64,
    lazy: bool,
    left: bool,
    count: usize,
) -> Result<Option<Vec<Bytes>>, Frame> {
    let Some(mut e) = write_in(db, key, now_ms, lazy, None)? else {
        return Ok(None);
    };
    let l = list_of(&mut e);
    let mut out = Vec::with_capacity(count.min(l.len()));
    for _ in 0..count {
        let v = if left { l.pop_front() } else { l.pop_back() };
        match v {
            Some(v) => out.push(v),
            None => break,
        }
    }
    let empty = l.is_empty();
    drop(e);
    if empty {
        db.remove_if_empty(key);
    }
    db.signal_modified(key);
    Ok(Some(out))
}

fn pop(ctx: &mut Ctx<'_>, args: &[Bytes], left: bool) -> Frame {
    if args.len() > 3 {
        return super::arity_error(if left { "lpop" } else { "rpop" });
    }
    let count = match args.get(2) {
        None => None,
        Some(c) => match parse_i64(c) {
            Ok(n) if n >= 0 => Some(n as usize),
            Ok(_) => return Frame::error("ERR value is out of range, must be positive"),
            Err(e) => return e,
        },
    };
    let key = &args[1];
    let popped = match pop_from(
        ctx.db(),
        key,
        ctx.now_ms,
        ctx.lazy_delete(),
        left,
        count.unwrap_or(1),
    ) {
        Ok(p) => p,
        Err(e) => return e,
    };
    match (popped, count) {
        (None, None) => Frame::Null,
        (None, Some(_)) => Frame::NullArray,
        (Some(v), None) => {
            ctx.changed();
            if !v.is_empty() {
                notify_pop(ctx.shared, ctx.client.db, key, left);
            }
            v.into_iter().next().map_or(Frame::Null, Frame::Bulk)
        }
        (Some(v), Some(_)) => {
            if !v.is_empty() {
                ctx.changed();
                notify_pop(ctx.shared, ctx.client.db, key, left);
            }
            Frame::bulks(v)
        }
    }
}

fn lpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    pop(ctx, args, true)
}

fn rpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    pop(ctx, args, false)
}

fn llen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    match read(ctx, &args[1], |l| l.len()) {
        Ok(v) => Frame::Integer(v.unwrap_or(0) as i64),
        Err(e) => e,
    }
}

/// Resolves Redis's inclusive `start`/`stop` (negative from the end) to a range in `0..len`.
fn range_of(start: i64, stop: i64, len: usize) -> Option<std::ops::RangeInclusive<usize>> {
    let len = len as i64;
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let stop = if stop < 0 {
        len + stop
    } else {
        stop.min(len - 1)
    };
    if start > stop || start >= len || stop < 0 {
        None
    } else {
        Some(start as usize..=stop as usize)
    }
}

fn lrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let (Ok(start), Ok(stop)) = (parse_i64(&args[2]), parse_i64(&args[3])) else {
        return not_integer();
    };
    match read(ctx, &args[1], |l| match range_of(start, stop, l.len()) {
        Some(r) => Frame::bulks(l.copy_range(r)),
        None => Frame::Array(vec![]),
    }) {
        Ok(v) => v.unwrap_or(Frame::Array(vec![])),
        Err(e) => e,
    }
}

fn index_of(i: i64, len: usize) -> Option<usize> {
    let i = if i < 0 { len as i64 + i } else { i };
    (0..len as i64).contains(&i).then_some(i as usize)
}

fn lindex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let Ok(i) = parse_i64(&args[2]) else {
        return not_integer();
    };
    match read(ctx, &args[1], |l| {
        index_of(i, l.len()).and_then(|i| l.get(i).map(Bytes::copy_from_slice))
    }) {
        Ok(Some(Some(v))) => Frame::Bulk(v),
        Ok(_) => Frame::Null,
        Err(e) => e,
    }
}

fn lset(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let Ok(i) = parse_i64(&args[2]) else {
        return not_integer();
    };
    let key = &args[1];
    let mut e = match write(ctx, key, false) {
        Ok(Some(e)) => e,
        Ok(None) => return Frame::error("ERR no such key"),
        Err(err) => return err,
    };
    let l = list_of(&mut e);
    let Some(i) = index_of(i, l.len()) else {
        return Frame::error("ERR index out of range");
    };
    l.set(i, &args[3]);
    drop(e);
    ctx.modified(key);
    ctx.notify(LIST, "lset", key);
    Frame::ok()
}

fn lrem(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let Ok(count) = parse_i64(&args[2]) else {
        return not_integer();
    };
    let key = &args[1];
    let mut e = match write(ctx, key, false) {
        Ok(Some(e)) => e,
        Ok(None) => return Frame::Integer(0),
        Err(err) => return err,
    };
    let l = list_of(&mut e);
    let target = &args[3];
    let limit = if count == 0 {
        usize::MAX
    } else {
        count.unsigned_abs() as usize
    };
    let removed = l.remove_matching(target, limit, count < 0);
    let empty = l.is_empty();
    drop(e);
    if empty {
        ctx.db().remove_if_empty(key);
    }
    if removed > 0 {
        ctx.modified(key);
        ctx.notify_then_del_if_gone(LIST, "lrem", key);
    }
    Frame::Integer(removed as i64)
}

fn ltrim(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let (Ok(start), Ok(stop)) = (parse_i64(&args[2]), parse_i64(&args[3])) else {
        return not_integer();
    };
    let key = &args[1];
    let mut e = match write(ctx, key, false) {
        Ok(Some(e)) => e,
        Ok(None) => return Frame::ok(),
        Err(err) => return err,
    };
    let l = list_of(&mut e);
    match range_of(start, stop, l.len()) {
        Some(r) => l.retain_range(r),
        None => l.clear(),
    }
    let empty = l.is_empty();
    drop(e);
    if empty {
        ctx.db().remove_if_empty(key);
    }
    ctx.modified(key);
    ctx.notify_then_del_if_gone(LIST, "ltrim", key);
    Frame::ok()
}

fn linsert(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let before = if is(&args[2], "before") {
        true
    } else if is(&args[2], "after") {
        false
    } else {
        return syntax_error();
    };
    let key = &args[1];
    let mut e = match write(ctx, key, false) {
        Ok(Some(e)) => e,
        Ok(None) => return Frame::Integer(0),
        Err(err) => return err,
    };
    let l = list_of(&mut e);
    let Some(len) = l.insert_at_pivot(&args[3], &args[4], before) else {
        return Frame::Integer(-1);
    };
    drop(e);
    ctx.modified(key);
    ctx.notify(LIST, "linsert", key);
    Frame::Integer(len as i64)
}

fn lpos(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let (mut rank, mut count, mut maxlen) = (1i64, None::<i64>, 0i64);
    let mut i = 3;
    while i < args.len() {
        let Some(v) = args.get(i + 1) else {
            return syntax_error();
        };
        let Ok(n) = parse_i64(v) else {
            return not_integer();
        };
        if is(&args[i], "rank") {
            if n == 0 || n == i64::MIN {
                return Frame::error("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list");
            }
            rank = n;
        } else if is(&args[i], "count") {
            if n < 0 {
                return Frame::error("ERR COUNT can't be negative");
            }
            count = Some(n);
        } else if is(&args[i], "maxlen") {
            if n < 0 {
                return Frame::error("ERR MAXLEN can't be negative");
            }
            maxlen = n;
        } else {
            return syntax_error();
        }
        i += 2;
    }
    let found = read(ctx, &args[1], |l| {
        let want = count.map_or(1, |c| if c == 0 { usize::MAX } else { c as usize });
        let mut skip = rank.unsigned_abs() - 1;
        let mut out = Vec::new();
        let len = l.len();
        let walk: Box<dyn Iterator<Item = (usize, &[u8])>> = if rank > 0 {
            Box::new(l.iter().enumerate())
        } else {
            Box::new(l.iter().rev().enumerate().map(|(k, e)| (len - 1 - k, e)))
        };
        for (scanned, (i, el)) in walk.enumerate() {
            if maxlen > 0 && scanned as i64 >= maxlen {
                break;
            }
            if el == &args[2][..] {
                if skip > 0 {
                    skip -= 1;
                    continue;
                }
                out.push(i as i64);
                if out.len() >= want {
                    break;
                }
            }
        }
        out
    });
    match (found, count) {
        (Err(e), _) => e,
        (Ok(v), Some(_)) => Frame::Array(
            v.unwrap_or_default()
                .into_iter()
                .map(Frame::Integer)
                .collect(),
        ),
        (Ok(v), None) => v
            .and_then(|v| v.first().copied())
            .map_or(Frame::Null, Frame::Integer),
    }
}

/// Moves one element between lists (`LMOVE`, `RPOPLPUSH`).
fn move_element(
    ctx: &mut Ctx<'_>,
    src: &Bytes,
    dst: &Bytes,
    from_left: bool,
    to_left: bool,
) -> Frame {
    // Check the destination's type first so a wrong type loses nothing.
    if let Err(e) = read(ctx, dst, |_| ()) {
        return e;
    }
    let popped = match pop_from(ctx.db(), src, ctx.now_ms, ctx.lazy_delete(), from_left, 1) {
        Ok(Some(v)) if !v.is_empty() => v.into_iter().next().expect("one"),
        Ok(_) => return Frame::Null,
        Err(e) => return e,
    };
    let mut e = match write(ctx, dst, true) {
        Ok(e) => e.expect("created"),
        Err(err) => return err,
    };
    let l = list_of(&mut e);
    if to_left {
        l.push_front(&popped);
    } else {
        l.push_back(&popped);
    }
    drop(e);
    ctx.modified(src);
    ctx.modified(dst);
    notify_push(ctx.shared, ctx.client.db, dst, to_left);
    notify_pop(ctx.shared, ctx.client.db, src, from_left);
    ctx.db().signal_ready(dst);
    Frame::Bulk(popped)
}

fn rpoplpush(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    move_element(ctx, &args[1], &args[2], false, true)
}

fn lmove(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let side = |a: &Bytes| {
        if is(a, "left") {
            Some(true)
        } else if is(a, "right") {
            Some(false)
        } else {
            None
        }
    };
    match (side(&args[3]), side(&args[4])) {
        (Some(from), Some(to)) => move_element(ctx, &args[1], &args[2], from, to),
        _ => syntax_error(),
    }
}

/// Tries each key in order; the first non-empty list gives `[key, element]`. A key of another
/// type is an error for a client that just arrived; for one already `waiting` it is not ready
/// yet (Redis serves a blocked client only from a list: a key deleted and recreated as a
/// string leaves it blocked).
fn try_pop_any(
    shared: &Shared,
    db_index: usize,
    keys: &[Bytes],
    left: bool,
    now_ms: u64,
    waiting: bool,
) -> Result<Option<Frame>, Frame> {
    let db = shared.keyspace.db(db_index);
    let lazy = shared.lazy_expire_deletes();
    // The pop and its feed are one step for the stream (see `order_guard`).
    let _order = shared.order_guard();
    for key in keys {
        let popped = match pop_from(db, key, now_ms, lazy, left, 1) {
            Err(_) if waiting => continue,
            r => r?,
        };
        if let Some(v) = popped {
            if let Some(el) = v.into_iter().next() {
                notify_pop(shared, db_index, key, left);
                // Replicas and the AOF see the pop that happened, not the blocking command.
                let name: &[u8] = if left { b"lpop" } else { b"rpop" };
                if let Some(spec) = lookup(name) {
                    let args = [Bytes::from_static(name), key.clone()];
                    shared.propagate_lazy_expired();
                    shared.after_write(db_index, spec.name, &args, 1);
                }
                return Ok(Some(Frame::Array(vec![
                    Frame::Bulk(key.clone()),
                    Frame::Bulk(el),
                ])));
            }
        }
    }
    Ok(None)
}

fn blocking_pop(ctx: &mut Ctx<'_>, args: &[Bytes], left: bool) -> Frame {
    let timeout_ms = match parse_timeout(&args[args.len() - 1]) {
        Ok(t) => t,
        Err(e) => return e,
    };
    let keys: Vec<Bytes> = args[1..args.len() - 1].to_vec();
    match try_pop_any(ctx.shared, ctx.client.db, &keys, left, ctx.now_ms, false) {
        Ok(Some(f)) => {
            ctx.changed();
            return f;
        }
        Ok(None) => {}
        Err(e) => return e,
    }
    if !ctx.may_block() {
        return Frame::NullArray;
    }
    let waiting_keys = keys.clone();
    block_until(
        ctx,
        waiting_keys,
        timeout_ms,
        false,
        move |shared, db, now| try_pop_any(shared, db, &keys, left, now, true),
    );
    Frame::NullArray
}

fn blpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    blocking_pop(ctx, args, true)
}

fn brpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    blocking_pop(ctx, args, false)
}
