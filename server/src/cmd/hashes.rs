//! Hash commands (`HSET`, `HGET`, ...): the reentrant lock's `{owner: count}` lives in a hash.

use crate::memory::EntryMut;
use bytes::Bytes;
use indexmap::IndexMap;

use super::keys::parse_scan;
use super::util::{container_mut, not_integer, parse_i64, read_container, write_container};
use super::{arity_error, spec, CommandSpec, Ctx, ADDS_ELEMENTS, DENYOOM, FAST, READONLY, WRITE};
use crate::codec::parse_int;
use crate::command::WALKS_VALUE;
use crate::frame::Frame;
use crate::long_double::IncrError;
use crate::notify::HASH;

/// The hash commands.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec("hset", -4, ADDS_ELEMENTS, 1, 1, 1, hset),
    spec("hmset", -4, ADDS_ELEMENTS, 1, 1, 1, hmset),
    spec("hsetnx", 4, ADDS_ELEMENTS, 1, 1, 1, hsetnx),
    spec("hget", 3, READONLY | FAST, 1, 1, 1, hget),
    spec("hmget", -3, READONLY | FAST, 1, 1, 1, hmget),
    spec("hdel", -3, WRITE | FAST, 1, 1, 1, hdel),
    spec("hexists", 3, READONLY | FAST, 1, 1, 1, hexists),
    spec("hlen", 2, READONLY | FAST, 1, 1, 1, hlen),
    spec("hstrlen", 3, READONLY | FAST, 1, 1, 1, hstrlen),
    spec("hincrby", 4, WRITE | DENYOOM | FAST, 1, 1, 1, hincrby),
    spec(
        "hincrbyfloat",
        4,
        WRITE | DENYOOM | FAST,
        1,
        1,
        1,
        hincrbyfloat,
    ),
    spec("hgetall", 2, READONLY | WALKS_VALUE, 1, 1, 1, hgetall),
    spec("hkeys", 2, READONLY | WALKS_VALUE, 1, 1, 1, hkeys),
    spec("hvals", 2, READONLY | WALKS_VALUE, 1, 1, 1, hvals),
    spec("hscan", -3, READONLY | WALKS_VALUE, 1, 1, 1, hscan),
];

type Hash = IndexMap<Str, Str>;

use crate::value::Str;

/// Runs `f` on the hash at `key`: `Ok(None)` when the key is absent, WRONGTYPE for another type.
fn read<R>(ctx: &Ctx<'_>, key: &[u8], f: impl FnOnce(&Hash) -> R) -> Result<Option<R>, Frame> {
    read_container(ctx.db(), key, ctx.now_ms, ctx.lazy_delete(), f)
}

/// The hash at `key` for modification, created empty when absent and `create` is set.
fn write<'a>(ctx: &Ctx<'a>, key: &Bytes, create: bool) -> Result<Option<EntryMut<'a>>, Frame> {
    write_container::<Hash>(ctx.db(), key, ctx.now_ms, ctx.lazy_delete(), create)
}

fn hash_of<'e>(e: &'e mut EntryMut<'_>) -> &'e mut Hash {
    container_mut(e)
}

/// A field or value as the hash stores it, from an argument of `HSET`, `HMSET` or `HSETNX`
/// (flagged `COPIES_ARGS`: the argument may be a view of the connection's read buffer): a
/// short one inline, a longer one in an allocation of its own (see
/// [`crate::memory::detached`]).
fn stored(arg: &Bytes) -> Str {
    if arg.len() <= crate::string::INLINE {
        Str::copy_from_slice(arg)
    } else {
        Str::from(crate::memory::detached(arg))
    }
}

fn set_pairs(ctx: &mut Ctx<'_>, args: &[Bytes], name: &str) -> Result<i64, Frame> {
    if args.len() % 2 == 1 {
        return Err(arity_error(name));
    }
    let key = &args[1];
    let mut e = write(ctx, key, true)?.expect("created");
    let h = hash_of(&mut e);
    let mut added = 0;
    for pair in args[2..].chunks(2) {
        if h.insert(stored(&pair[0]), stored(&pair[1])).is_none() {
            added += 1;
        }
    }
    drop(e);
    ctx.modified(key);
    ctx.notify(HASH, "hset", key);
    Ok(added)
}

fn hset(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    set_pairs(ctx, args, "hset").map_or_else(|e| e, Frame::Integer)
}

fn hmset(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    set_pairs(ctx, args, "hmset").map_or_else(|e| e, |_| Frame::ok())
}

fn hsetnx(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let key = &args[1];
    let mut e = match write(ctx, key, true) {
        Ok(e) => e.expect("created"),
        Err(err) => return err,
    };
    let h = hash_of(&mut e);
    if h.contains_key(&args[2]) {
        return Frame::Integer(0);
    }
    h.insert(stored(&args[2]), stored(&args[3]));
    drop(e);
    ctx.modified(key);
    ctx.notify(HASH, "hset", key);
    Frame::Integer(1)
}

fn hget(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    match read(ctx, &args[1], |h| h.get(&args[2]).map(Str::to_bytes)) {
        Ok(Some(Some(v))) => Frame::Bulk(v),
        Ok(_) => Frame::Null,
        Err(e) => e,
    }
}

fn hmget(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let fields = &args[2..];
    match read(ctx, &args[1], |h| {
        fields
            .iter()
            .map(|f| h.get(f).map_or(Frame::Null, |v| Frame::Bulk(v.to_bytes())))
            .collect::<Vec<_>>()
    }) {
        Ok(Some(v)) => Frame::Array(v),
        Ok(None) => Frame::Array(fields.iter().map(|_| Frame::Null).collect()),
        Err(e) => e,
    }
}

fn hdel(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let key = &args[1];
    let listpack_max = ctx.shared.config.encodings.hash_max_entries();
    let mut e = match write(ctx, key, false) {
        Ok(Some(e)) => e,
        Ok(None) => return Frame::Integer(0),
        Err(err) => return err,
    };
    let h = hash_of(&mut e);
    // A hash Redis keeps as a listpack keeps its remaining fields in insertion order:
    // shift_remove does the same, at the listpack's cost (its length). A bigger one is a hash
    // table in Redis, in no order: swap_remove is O(1) a field, so deleting many fields of a
    // big hash is not quadratic.
    let removed = args[2..]
        .iter()
        .filter(|f| {
            if h.len() <= listpack_max {
                h.shift_remove(*f).is_some()
            } else {
                h.swap_remove(*f).is_some()
            }
        })
        .count();
    let empty = h.is_empty();
    drop(e);
    if empty {
        ctx.db().remove_if_empty(key);
    }
    if removed > 0 {
        ctx.modified(key);
        ctx.notify_then_del_if_gone(HASH, "hdel", key);
    }
    Frame::Integer(removed as i64)
}

fn hexists(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    match read(ctx, &args[1], |h| h.contains_key(&args[2])) {
        Ok(v) => Frame::Integer(v.unwrap_or(false) as i64),
        Err(e) => e,
    }
}

fn hlen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    match read(ctx, &args[1], |h| h.len()) {
        Ok(v) => Frame::Integer(v.unwrap_or(0) as i64),
        Err(e) => e,
    }
}

fn hstrlen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    match read(ctx, &args[1], |h| h.get(&args[2]).map_or(0, |v| v.len())) {
        Ok(v) => Frame::Integer(v.unwrap_or(0) as i64),
        Err(e) => e,
    }
}

fn hincrby(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let Ok(by) = parse_i64(&args[3]) else {
        return not_integer();
    };
    let key = &args[1];
    let mut e = match write(ctx, key, true) {
        Ok(e) => e.expect("created"),
        Err(err) => return err,
    };
    let h = hash_of(&mut e);
    let current = match h.get(&args[2]) {
        Some(v) => match parse_int(v) {
            Some(n) => n,
            None => return Frame::error("ERR hash value is not an integer"),
        },
        None => 0,
    };
    let Some(n) = current.checked_add(by) else {
        return Frame::error("ERR increment or decrement would overflow");
    };
    h.insert(args[2].clone().into(), super::util::int_bytes(n).into());
    drop(e);
    ctx.modified(key);
    ctx.notify(HASH, "hincrby", key);
    Frame::Integer(n)
}

fn hincrbyfloat(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    // The increment is checked before the key is looked at.
    match crate::long_double::check_increment(&args[3]) {
        Err(IncrError::ByInfinite) => return Frame::error("ERR value is NaN or Infinity"),
        Err(_) => return super::util::not_float(),
        Ok(()) => {}
    }
    let key = &args[1];
    let mut e = match write(ctx, key, true) {
        Ok(e) => e.expect("created"),
        Err(err) => return err,
    };
    let h = hash_of(&mut e);
    let text = match crate::long_double::incr(h.get(&args[2]).map(|v| &v[..]), &args[3]) {
        Ok(t) => Bytes::from(t),
        Err(IncrError::Current) => return Frame::error("ERR hash value is not a float"),
        Err(_) => return Frame::error("ERR increment would produce NaN or Infinity"),
    };
    h.insert(args[2].clone().into(), text.clone().into());
    drop(e);
    ctx.modified(key);
    ctx.notify(HASH, "hincrbyfloat", key);
    Frame::Bulk(text)
}

fn hgetall(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    match read(ctx, &args[1], |h| {
        h.iter()
            .map(|(k, v)| (Frame::Bulk(k.to_bytes()), Frame::Bulk(v.to_bytes())))
            .collect::<Vec<_>>()
    }) {
        Ok(v) => Frame::Map(v.unwrap_or_default()),
        Err(e) => e,
    }
}

fn hkeys(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    match read(ctx, &args[1], |h| Frame::bulks(h.keys().cloned())) {
        Ok(v) => v.unwrap_or(Frame::Array(vec![])),
        Err(e) => e,
    }
}

fn hvals(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    match read(ctx, &args[1], |h| Frame::bulks(h.values().cloned())) {
        Ok(v) => v.unwrap_or(Frame::Array(vec![])),
        Err(e) => e,
    }
}

/// Hashes up to this many fields are returned whole by one `HSCAN` call, as Redis does for
/// its compact (listpack) encoding.
const SMALL_HASH: usize = 128;

fn hscan(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let (cursor, opts) = match parse_scan(&args[1..], false) {
        Ok(x) => x,
        Err(e) => return e,
    };
    // A small hash comes back whole, as Redis returns its listpack; a large one a page at a
    // time, copying only that page.
    let paged = read(ctx, &args[1], |h| {
        let pair = |i: usize| h.get_index(i).map(|(k, v)| (k.clone(), v.clone()));
        if h.len() <= SMALL_HASH {
            ((0..h.len()).filter_map(pair).collect::<Vec<_>>(), 0)
        } else {
            let (positions, next) = crate::scan::index_page(h.len(), cursor, opts.count);
            (positions.rev().filter_map(pair).collect(), next)
        }
    });
    let (page, next) = match paged {
        Ok(v) => v.unwrap_or_default(),
        Err(e) => return e,
    };
    let mut out = Vec::new();
    for (k, v) in page {
        if opts
            .pattern
            .as_ref()
            .is_none_or(|p| crate::glob::matches(p, &k, false))
        {
            out.push(Frame::Bulk(k.into()));
            out.push(Frame::Bulk(v.into()));
        }
    }
    Frame::Array(vec![
        Frame::Bulk(Bytes::from(next.to_string())),
        Frame::Array(out),
    ])
}
