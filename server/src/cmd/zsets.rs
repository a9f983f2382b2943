//! Sorted-set commands: fair locks and semaphores keep their queues and permit deadlines in
//! sorted sets scored by time.
//!
//! This module holds the one-key commands that add, remove, score and count, and the helpers
//! the other sorted-set modules share (reading and writing the value, storing a result, the
//! score range). The rest live next to it, one idea a file: [`super::zset_range`] (`ZRANGE`
//! and its spellings, `ZRANGESTORE`), [`super::zset_lex`] (lexicographic ranges),
//! [`super::zset_algebra`] (`ZUNION`, `ZINTER`, `ZDIFF` and their `STORE`s, `ZINTERCARD`),
//! [`super::zset_pop`] (`ZPOPMIN`/`ZPOPMAX`, `ZMPOP` and the blocking pops) and
//! [`super::zset_random`] (`ZRANDMEMBER`).

use crate::memory::EntryMut;
use bytes::Bytes;

use super::util::{
    container_mut, is, not_float, not_integer, parse_double, parse_i64, read_container,
    syntax_error, write_container,
};
use super::{spec, CommandSpec, Ctx, ADDS_ELEMENTS, DENYOOM, FAST, READONLY, WRITE};
use crate::command::WALKS_VALUE;
use crate::db::{Entry, Value};
use crate::frame::{Frame, Protocol};
use crate::notify::{GENERIC, ZSET};
use crate::zset::ZSet;

/// The sorted-set commands of this module.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec("zadd", -4, ADDS_ELEMENTS, 1, 1, 1, zadd),
    spec("zincrby", 4, WRITE | DENYOOM | FAST, 1, 1, 1, zincrby),
    spec("zrem", -3, WRITE | FAST, 1, 1, 1, zrem),
    spec("zscore", 3, READONLY | FAST, 1, 1, 1, zscore),
    spec("zmscore", -3, READONLY | FAST, 1, 1, 1, zmscore),
    spec("zcard", 2, READONLY | FAST, 1, 1, 1, zcard),
    spec("zcount", 4, READONLY | FAST, 1, 1, 1, zcount),
    spec("zrank", 3, READONLY | FAST, 1, 1, 1, zrank),
    spec("zrevrank", 3, READONLY | FAST, 1, 1, 1, zrevrank),
    spec("zscan", -3, READONLY, 1, 1, 1, zscan),
    spec(
        "zremrangebyscore",
        4,
        WRITE | WALKS_VALUE,
        1,
        1,
        1,
        zremrangebyscore,
    ),
    spec(
        "zremrangebyrank",
        4,
        WRITE | WALKS_VALUE,
        1,
        1,
        1,
        zremrangebyrank,
    ),
];

/// Runs `f` on the sorted set at `key`: `Ok(None)` when absent, WRONGTYPE for another type.
pub(super) fn read<R>(
    ctx: &Ctx<'_>,
    key: &[u8],
    f: impl FnOnce(&ZSet) -> R,
) -> Result<Option<R>, Frame> {
    read_container(ctx.db(), key, ctx.now_ms, ctx.lazy_delete(), f)
}

/// The sorted set at `key` for modification, created empty when absent and `create` is set.
pub(super) fn write<'a>(
    ctx: &Ctx<'a>,
    key: &Bytes,
    create: bool,
) -> Result<Option<EntryMut<'a>>, Frame> {
    write_container::<ZSet>(ctx.db(), key, ctx.now_ms, ctx.lazy_delete(), create)
}

/// The sorted set inside an entry returned by [`write`].
pub(super) fn zset_of<'e>(e: &'e mut EntryMut<'_>) -> &'e mut ZSet {
    container_mut(e)
}

/// Deletes the key if the sorted set became empty, then records the change and notifies
/// `event` (then `del`, when the key went).
pub(super) fn finish_write(
    ctx: &mut Ctx<'_>,
    key: &Bytes,
    empty: bool,
    changed: bool,
    event: &str,
) {
    if empty {
        ctx.db().remove_if_empty(key);
    }
    if changed {
        ctx.modified(key);
        ctx.notify_then_del_if_gone(ZSET, event, key);
    }
}

/// `ZADD`'s options (`GEOADD` passes its own `NX`/`XX`/`CH` through).
#[derive(Default)]
pub(super) struct AddFlags {
    pub(super) nx: bool,
    pub(super) xx: bool,
    pub(super) gt: bool,
    pub(super) lt: bool,
    pub(super) ch: bool,
    pub(super) incr: bool,
}

/// What happened to one member in `ZADD`.
enum Outcome {
    Added(f64),
    Updated(f64),
    Unchanged(f64),
    Skipped,
}

fn add_one(z: &mut ZSet, member: &Bytes, score: f64, f: &AddFlags) -> Result<Outcome, Frame> {
    match z.score(member) {
        Some(cur) => {
            if f.nx {
                return Ok(Outcome::Skipped);
            }
            let new = if f.incr { cur + score } else { score };
            if new.is_nan() {
                return Err(Frame::error("ERR resulting score is not a number (NaN)"));
            }
            if (f.lt && new >= cur) || (f.gt && new <= cur) {
                return Ok(Outcome::Skipped);
            }
            if new == cur {
                return Ok(Outcome::Unchanged(new));
            }
            z.insert(member.clone(), new);
            Ok(Outcome::Updated(new))
        }
        None => {
            if f.xx {
                return Ok(Outcome::Skipped);
            }
            z.insert(member.clone(), score);
            Ok(Outcome::Added(score))
        }
    }
}

fn zadd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let mut f = AddFlags::default();
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        if is(a, "nx") {
            f.nx = true;
        } else if is(a, "xx") {
            f.xx = true;
        } else if is(a, "gt") {
            f.gt = true;
        } else if is(a, "lt") {
            f.lt = true;
        } else if is(a, "ch") {
            f.ch = true;
        } else if is(a, "incr") {
            f.incr = true;
        } else {
            break;
        }
        i += 1;
    }
    let rest = &args[i..];
    if rest.is_empty() || rest.len() % 2 == 1 {
        return syntax_error();
    }
    if f.nx && f.xx {
        return Frame::error("ERR XX and NX options at the same time are not compatible");
    }
    if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
        return Frame::error("ERR GT, LT, and/or NX options at the same time are not compatible");
    }
    if f.incr && rest.len() > 2 {
        return Frame::error("ERR INCR option supports a single increment-element pair");
    }
    let mut pairs = Vec::with_capacity(rest.len() / 2);
    for p in rest.chunks(2) {
        match parse_double(&p[0]) {
            Some(s) => pairs.push((s, p[1].clone())),
            None => return not_float(),
        }
    }
    zadd_pairs(ctx, &args[1], &pairs, &f)
}

/// Adds `(score, member)` pairs to the sorted set at `key` as `ZADD` does, with its reply.
pub(super) fn zadd_pairs(
    ctx: &mut Ctx<'_>,
    key: &Bytes,
    pairs: &[(f64, Bytes)],
    f: &AddFlags,
) -> Frame {
    let nothing = || {
        if f.incr {
            Frame::Null
        } else {
            Frame::Integer(0)
        }
    };
    let mut e = match write(ctx, key, !f.xx) {
        Ok(Some(e)) => e,
        Ok(None) => return nothing(),
        Err(err) => return err,
    };
    let z = zset_of(&mut e);
    let (mut added, mut updated) = (0, 0);
    let mut last = None;
    let mut error = None;
    for (score, member) in pairs {
        match add_one(z, member, *score, f) {
            Ok(Outcome::Added(s)) => {
                added += 1;
                last = Some(s);
            }
            Ok(Outcome::Updated(s)) => {
                updated += 1;
                last = Some(s);
            }
            Ok(Outcome::Unchanged(s)) => last = Some(s),
            Ok(Outcome::Skipped) => {}
            Err(err) => {
                error = Some(err);
                break;
            }
        }
    }
    let empty = z.is_empty();
    drop(e);
    let event = if f.incr { "zincr" } else { "zadd" };
    finish_write(ctx, key, empty, added + updated > 0, event);
    if added + updated > 0 {
        // A client blocked in `BZPOPMIN`/`BZMPOP` on this key may now be served.
        ctx.db().signal_ready(key);
    }
    if let Some(err) = error {
        return err;
    }
    if f.incr {
        return last.map_or(Frame::Null, Frame::Double);
    }
    Frame::Integer(if f.ch { added + updated } else { added })
}

fn zincrby(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let Some(by) = parse_double(&args[2]) else {
        return not_float();
    };
    let f = AddFlags {
        incr: true,
        ..Default::default()
    };
    zadd_pairs(ctx, &args[1], &[(by, args[3].clone())], &f)
}

fn zrem(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let key = &args[1];
    let mut e = match write(ctx, key, false) {
        Ok(Some(e)) => e,
        Ok(None) => return Frame::Integer(0),
        Err(err) => return err,
    };
    let z = zset_of(&mut e);
    let n = args[2..].iter().filter(|m| z.remove(m).is_some()).count();
    let empty = z.is_empty();
    drop(e);
    finish_write(ctx, key, empty, n > 0, "zrem");
    Frame::Integer(n as i64)
}

fn zscore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    match read(ctx, &args[1], |z| z.score(&args[2])) {
        Ok(Some(Some(s))) => Frame::Double(s),
        Ok(_) => Frame::Null,
        Err(e) => e,
    }
}

fn zmscore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let members = &args[2..];
    match read(ctx, &args[1], |z| {
        members
            .iter()
            .map(|m| z.score(m).map_or(Frame::Null, Frame::Double))
            .collect::<Vec<_>>()
    }) {
        Ok(Some(v)) => Frame::Array(v),
        Ok(None) => Frame::Array(members.iter().map(|_| Frame::Null).collect()),
        Err(e) => e,
    }
}

fn zcard(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    match read(ctx, &args[1], |z| z.len()) {
        Ok(v) => Frame::Integer(v.unwrap_or(0) as i64),
        Err(e) => e,
    }
}

/// One end of a score range: a value and whether it is exclusive (`(1.5`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Bound {
    /// The score.
    pub(super) value: f64,
    /// `(score`: the score itself is outside the range.
    pub(super) exclusive: bool,
}

fn parse_bound(arg: &[u8]) -> Option<Bound> {
    let (exclusive, raw) = match arg.first() {
        Some(b'(') => (true, &arg[1..]),
        _ => (false, arg),
    };
    let value = parse_double(raw)?;
    Some(Bound { value, exclusive })
}

/// Parses a `min max` score range, with Redis's error for either end.
pub(super) fn parse_range(min: &[u8], max: &[u8]) -> Result<(Bound, Bound), Frame> {
    match (parse_bound(min), parse_bound(max)) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(Frame::error("ERR min or max is not a float")),
    }
}

/// Whether score `s` lies within `[min, max]` (each end possibly exclusive).
pub(super) fn in_range(s: f64, min: Bound, max: Bound) -> bool {
    let above = if min.exclusive {
        s > min.value
    } else {
        s >= min.value
    };
    let below = if max.exclusive {
        s < max.value
    } else {
        s <= max.value
    };
    above && below
}

fn zcount(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let (min, max) = match parse_range(&args[2], &args[3]) {
        Ok(r) => r,
        Err(e) => return e,
    };
    match read(ctx, &args[1], |z| {
        z.iter().filter(|(_, s)| in_range(*s, min, max)).count()
    }) {
        Ok(v) => Frame::Integer(v.unwrap_or(0) as i64),
        Err(e) => e,
    }
}

fn rank_generic(ctx: &mut Ctx<'_>, args: &[Bytes], rev: bool) -> Frame {
    match read(ctx, &args[1], |z| {
        z.rank(&args[2])
            .map(|r| if rev { z.len() - 1 - r } else { r })
    }) {
        Ok(Some(Some(r))) => Frame::Integer(r as i64),
        Ok(_) => Frame::Null,
        Err(e) => e,
    }
}

fn zrank(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    rank_generic(ctx, args, false)
}

fn zrevrank(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    rank_generic(ctx, args, true)
}

/// `ZSCAN key cursor [MATCH p] [COUNT n]`: pages of `member, score` pairs. A sorted set small
/// enough for Redis's listpack encoding comes back whole with cursor 0, as Redis does; the
/// scores are bulk strings under both protocols, as Redis 7.0 sends them.
fn zscan(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let (cursor, opts) = match super::keys::parse_scan(&args[1..], false) {
        Ok(x) => x,
        Err(e) => return e,
    };
    let enc = &ctx.shared.config.encodings;
    // A sorted set within the listpack limits comes back whole, in score order as Redis's
    // listpack holds it; a larger one a page at a time from its member table.
    let paged = read(ctx, &args[1], |z| {
        let small = z.len() <= enc.zset_max_entries()
            && enc.zset_encoding(z.len(), z.iter().map(|(m, _)| m.len()).max().unwrap_or(0))
                == "listpack";
        if small {
            (
                z.iter().map(|(m, s)| (m.to_bytes(), s)).collect::<Vec<_>>(),
                0,
            )
        } else {
            let (positions, next) = crate::scan::index_page(z.len(), cursor, opts.count);
            let page = positions
                .rev()
                .filter_map(|i| z.at_position(i).map(|(m, s)| (m.to_bytes(), s)))
                .collect();
            (page, next)
        }
    });
    let (page, next) = match paged {
        Ok(v) => v.unwrap_or_default(),
        Err(e) => return e,
    };
    let mut out = Vec::with_capacity(page.len() * 2);
    for (m, score) in page {
        if opts
            .pattern
            .as_ref()
            .is_none_or(|p| crate::glob::matches(p, &m, false))
        {
            out.push(Frame::Bulk(m));
            out.push(Frame::Bulk(Bytes::from(crate::frame::format_double(score))));
        }
    }
    Frame::Array(vec![
        Frame::Bulk(Bytes::from(next.to_string())),
        Frame::Array(out),
    ])
}

/// Formats `(member, score)` results: flat under RESP2, `[member, score]` pairs under RESP3
/// (Redis does not use a map there: the order matters).
pub(super) fn with_scores(items: Vec<(Bytes, f64)>, scores: bool, proto: Protocol) -> Frame {
    if !scores {
        return Frame::bulks(items.into_iter().map(|(m, _)| m));
    }
    if proto == Protocol::Resp3 {
        return Frame::Array(
            items
                .into_iter()
                .map(|(m, s)| Frame::Array(vec![Frame::Bulk(m), Frame::Double(s)]))
                .collect(),
        );
    }
    let mut out = Vec::with_capacity(items.len() * 2);
    for (m, s) in items {
        out.push(Frame::Bulk(m));
        out.push(Frame::Double(s));
    }
    Frame::Array(out)
}

/// Stores `result` at `dst` as Redis's `*STORE` commands do: replaces whatever was there (TTL
/// included) and wakes clients blocked on it, or, when `result` is empty, deletes `dst`.
/// Replies with the size stored.
pub(super) fn store(ctx: &mut Ctx<'_>, dst: &Bytes, result: ZSet, event: &str) -> Frame {
    let n = result.len();
    if n == 0 {
        if ctx.db().remove(dst).is_some() {
            ctx.modified(dst);
            ctx.notify(GENERIC, "del", dst);
        }
        return Frame::Integer(0);
    }
    ctx.db().insert_new(
        dst.clone(),
        Entry::new(Value::ZSet(Box::new(result))),
        ctx.now_ms,
    );
    ctx.modified(dst);
    ctx.notify(ZSET, event, dst);
    ctx.db().signal_ready(dst);
    Frame::Integer(n as i64)
}

/// Removes the members `pick` chooses from the sorted set at `key`; replies with how many.
pub(super) fn remove_picked(
    ctx: &mut Ctx<'_>,
    key: &Bytes,
    event: &str,
    pick: impl FnOnce(&ZSet) -> Vec<Bytes>,
) -> Frame {
    let mut e = match write(ctx, key, false) {
        Ok(Some(e)) => e,
        Ok(None) => return Frame::Integer(0),
        Err(err) => return err,
    };
    let z = zset_of(&mut e);
    let doomed = pick(z);
    for m in &doomed {
        z.remove(m);
    }
    let empty = z.is_empty();
    drop(e);
    finish_write(ctx, key, empty, !doomed.is_empty(), event);
    Frame::Integer(doomed.len() as i64)
}

fn zremrangebyscore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let (min, max) = match parse_range(&args[2], &args[3]) {
        Ok(r) => r,
        Err(e) => return e,
    };
    remove_picked(ctx, &args[1], "zremrangebyscore", |z| {
        z.iter()
            .filter(|(_, s)| in_range(*s, min, max))
            .map(|(m, _)| m.to_bytes())
            .collect()
    })
}

fn zremrangebyrank(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let (Ok(a), Ok(b)) = (parse_i64(&args[2]), parse_i64(&args[3])) else {
        return not_integer();
    };
    remove_picked(ctx, &args[1], "zremrangebyrank", |z| {
        let len = z.len() as i64;
        let a = if a < 0 { (len + a).max(0) } else { a };
        let b = if b < 0 { len + b } else { b.min(len - 1) };
        if a > b || a >= len {
            return Vec::new();
        }
        z.iter()
            .skip(a as usize)
            .take((b - a + 1) as usize)
            .map(|(m, _)| m.to_bytes())
            .collect()
    })
}
