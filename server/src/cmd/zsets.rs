//! Sorted-set commands: fair locks and semaphores keep their queues and permit deadlines in
//! sorted sets scored by time.

use crate::memory::EntryMut;
use bytes::Bytes;

use super::util::{
    container_mut, is, not_float, not_integer, parse_double, parse_i64, read_container,
    syntax_error, write_container,
};
use super::{spec, CommandSpec, Ctx, DENYOOM, FAST, READONLY, WRITE};
use crate::command::WALKS_VALUE;
use crate::frame::{Frame, Protocol};
use crate::zset::ZSet;

/// The sorted-set commands.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec("zadd", -4, WRITE | DENYOOM | FAST, 1, 1, 1, zadd),
    spec("zincrby", 4, WRITE | DENYOOM | FAST, 1, 1, 1, zincrby),
    spec("zrem", -3, WRITE | FAST, 1, 1, 1, zrem),
    spec("zscore", 3, READONLY | FAST, 1, 1, 1, zscore),
    spec("zmscore", -3, READONLY | FAST, 1, 1, 1, zmscore),
    spec("zcard", 2, READONLY | FAST, 1, 1, 1, zcard),
    spec("zcount", 4, READONLY | FAST, 1, 1, 1, zcount),
    spec("zrank", 3, READONLY | FAST, 1, 1, 1, zrank),
    spec("zrevrank", 3, READONLY | FAST, 1, 1, 1, zrevrank),
    spec("zrange", -4, READONLY | WALKS_VALUE, 1, 1, 1, zrange),
    spec("zrevrange", -4, READONLY | WALKS_VALUE, 1, 1, 1, zrevrange),
    spec(
        "zrangebyscore",
        -4,
        READONLY | WALKS_VALUE,
        1,
        1,
        1,
        zrangebyscore,
    ),
    spec(
        "zrevrangebyscore",
        -4,
        READONLY | WALKS_VALUE,
        1,
        1,
        1,
        zrevrangebyscore,
    ),
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
    spec("zpopmin", -2, WRITE | FAST, 1, 1, 1, zpopmin),
    spec("zpopmax", -2, WRITE | FAST, 1, 1, 1, zpopmax),
];

fn read<R>(ctx: &Ctx<'_>, key: &[u8], f: impl FnOnce(&ZSet) -> R) -> Result<Option<R>, Frame> {
    read_container(ctx.db(), key, ctx.now_ms, ctx.lazy_delete(), f)
}

fn write<'a>(ctx: &Ctx<'a>, key: &Bytes, create: bool) -> Result<Option<EntryMut<'a>>, Frame> {
    write_container::<ZSet>(ctx.db(), key, ctx.now_ms, ctx.lazy_delete(), create)
}

fn zset_of<'e>(e: &'e mut EntryMut<'_>) -> &'e mut ZSet {
    container_mut(e)
}

/// Deletes the key if the sorted set became empty, then records the change.
fn finish_write(ctx: &mut Ctx<'_>, key: &Bytes, empty: bool, changed: bool) {
    if empty {
        ctx.db().remove_if_empty(key);
    }
    if changed {
        ctx.modified(key);
    }
}

#[derive(Default)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
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

fn zadd_pairs(ctx: &mut Ctx<'_>, key: &Bytes, pairs: &[(f64, Bytes)], f: &AddFlags) -> Frame {
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
    finish_write(ctx, key, empty, added + updated > 0);
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
    finish_write(ctx, key, empty, n > 0);
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
struct Bound {
    value: f64,
    exclusive: bool,
}

fn parse_bound(arg: &[u8]) -> Option<Bound> {
    let (exclusive, raw) = match arg.first() {
        Some(b'(') => (true, &arg[1..]),
        _ => (false, arg),
    };
    let value = parse_double(raw)?;
    Some(Bound { value, exclusive })
}

fn parse_range(min: &[u8], max: &[u8]) -> Result<(Bound, Bound), Frame> {
    match (parse_bound(min), parse_bound(max)) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(Frame::error("ERR min or max is not a float")),
    }
}

fn in_range(s: f64, min: Bound, max: Bound) -> bool {
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

/// Formats `(member, score)` results: flat under RESP2, `[member, score]` pairs under RESP3.
fn with_scores(items: Vec<(Bytes, f64)>, scores: bool, proto: Protocol) -> Frame {
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

#[derive(Clone, Copy, PartialEq, Eq)]
enum RangeBy {
    Rank,
    Score,
}

/// The shared engine of `ZRANGE` and its older spellings.
#[allow(clippy::too_many_arguments)]
fn range_generic(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    start: &[u8],
    stop: &[u8],
    by: RangeBy,
    rev: bool,
    limit: Option<(i64, i64)>,
    scores: bool,
) -> Frame {
    let proto = ctx.client.protocol;
    match by {
        RangeBy::Rank => {
            let (Ok(a), Ok(b)) = (parse_i64(start), parse_i64(stop)) else {
                return not_integer();
            };
            let r = read(ctx, key, |z| {
                let len = z.len() as i64;
                let a = if a < 0 { (len + a).max(0) } else { a };
                let b = if b < 0 { len + b } else { b.min(len - 1) };
                if a > b || a >= len {
                    return Vec::new();
                }
                let items: Box<dyn Iterator<Item = (&Bytes, f64)>> = if rev {
                    Box::new(z.iter().rev())
                } else {
                    Box::new(z.iter())
                };
                items
                    .skip(a as usize)
                    .take((b - a + 1) as usize)
                    .map(|(m, s)| (m.clone(), s))
                    .collect()
            });
            match r {
                Ok(v) => with_scores(v.unwrap_or_default(), scores, proto),
                Err(e) => e,
            }
        }
        RangeBy::Score => {
            // With REV the first bound is the maximum.
            let (min_arg, max_arg) = if rev { (stop, start) } else { (start, stop) };
            let (min, max) = match parse_range(min_arg, max_arg) {
                Ok(r) => r,
                Err(e) => return e,
            };
            let (offset, count) = limit.unwrap_or((0, -1));
            let r = read(ctx, key, |z| {
                if offset < 0 {
                    return Vec::new();
                }
                let items: Box<dyn Iterator<Item = (&Bytes, f64)>> = if rev {
                    Box::new(z.iter().rev())
                } else {
                    Box::new(z.iter())
                };
                let matching = items
                    .filter(|(_, s)| in_range(*s, min, max))
                    .skip(offset as usize)
                    .map(|(m, s)| (m.clone(), s));
                if count < 0 {
                    matching.collect()
                } else {
                    matching.take(count as usize).collect()
                }
            });
            match r {
                Ok(v) => with_scores(v.unwrap_or_default(), scores, proto),
                Err(e) => e,
            }
        }
    }
}

/// `(BYSCORE?, REV, LIMIT offset count, WITHSCORES)` as parsed from a range command.
type RangeOptions = (Option<RangeBy>, bool, Option<(i64, i64)>, bool);

/// Parses the trailing `[WITHSCORES] [LIMIT offset count]` (and, for `ZRANGE`, `BYSCORE REV`).
fn range_options(opts: &[Bytes], allow_by: bool, allow_limit: bool) -> Result<RangeOptions, Frame> {
    let (mut by, mut rev, mut limit, mut scores) = (None, false, None, false);
    let mut i = 0;
    while i < opts.len() {
        let a = &opts[i];
        if is(a, "withscores") {
            scores = true;
        } else if allow_by && by.is_none() && is(a, "byscore") {
            // `BYSCORE` and `REV` may each be given once (Redis refuses a second one).
            by = Some(RangeBy::Score);
        } else if allow_by && !rev && is(a, "rev") {
            rev = true;
        } else if allow_limit && is(a, "limit") && i + 2 < opts.len() {
            let (Ok(o), Ok(c)) = (parse_i64(&opts[i + 1]), parse_i64(&opts[i + 2])) else {
                return Err(not_integer());
            };
            limit = Some((o, c));
            i += 2;
        } else {
            return Err(syntax_error());
        }
        i += 1;
    }
    Ok((by, rev, limit, scores))
}

fn zrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let (by, rev, limit, scores) = match range_options(&args[4..], true, true) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let by = by.unwrap_or(RangeBy::Rank);
    if limit.is_some() && by == RangeBy::Rank {
        return Frame::error(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        );
    }
    range_generic(ctx, &args[1], &args[2], &args[3], by, rev, limit, scores)
}

fn zrevrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let (_, _, limit, scores) = match range_options(&args[4..], false, true) {
        Ok(o) => o,
        Err(e) => return e,
    };
    if limit.is_some() {
        return Frame::error(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        );
    }
    range_generic(
        ctx,
        &args[1],
        &args[2],
        &args[3],
        RangeBy::Rank,
        true,
        None,
        scores,
    )
}

fn zrangebyscore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let (_, _, limit, scores) = match range_options(&args[4..], false, true) {
        Ok(o) => o,
        Err(e) => return e,
    };
    range_generic(
        ctx,
        &args[1],
        &args[2],
        &args[3],
        RangeBy::Score,
        false,
        limit,
        scores,
    )
}

fn zrevrangebyscore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let (_, _, limit, scores) = match range_options(&args[4..], false, true) {
        Ok(o) => o,
        Err(e) => return e,
    };
    range_generic(
        ctx,
        &args[1],
        &args[2],
        &args[3],
        RangeBy::Score,
        true,
        limit,
        scores,
    )
}

/// Removes the members `pick` chooses from the sorted set at `key`; replies with how many.
fn remove_picked(ctx: &mut Ctx<'_>, key: &Bytes, pick: impl FnOnce(&ZSet) -> Vec<Bytes>) -> Frame {
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
    finish_write(ctx, key, empty, !doomed.is_empty());
    Frame::Integer(doomed.len() as i64)
}

fn zremrangebyscore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let (min, max) = match parse_range(&args[2], &args[3]) {
        Ok(r) => r,
        Err(e) => return e,
    };
    remove_picked(ctx, &args[1], |z| {
        z.iter()
            .filter(|(_, s)| in_range(*s, min, max))
            .map(|(m, _)| m.clone())
            .collect()
    })
}

fn zremrangebyrank(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let (Ok(a), Ok(b)) = (parse_i64(&args[2]), parse_i64(&args[3])) else {
        return not_integer();
    };
    remove_picked(ctx, &args[1], |z| {
        let len = z.len() as i64;
        let a = if a < 0 { (len + a).max(0) } else { a };
        let b = if b < 0 { len + b } else { b.min(len - 1) };
        if a > b || a >= len {
            return Vec::new();
        }
        z.iter()
            .skip(a as usize)
            .take((b - a + 1) as usize)
            .map(|(m, _)| m.clone())
            .collect()
    })
}

fn pop_generic(ctx: &mut Ctx<'_>, args: &[Bytes], max: bool) -> Frame {
    if args.len() > 3 {
        return syntax_error();
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
    let mut e = match write(ctx, key, false) {
        Ok(Some(e)) => e,
        Ok(None) => return Frame::Array(vec![]),
        Err(err) => return err,
    };
    let z = zset_of(&mut e);
    let n = count.unwrap_or(1);
    let picked: Vec<(Bytes, f64)> = if max {
        z.iter()
            .rev()
            .take(n)
            .map(|(m, s)| (m.clone(), s))
            .collect()
    } else {
        z.iter().take(n).map(|(m, s)| (m.clone(), s)).collect()
    };
    for (m, _) in &picked {
        z.remove(m);
    }
    let empty = z.is_empty();
    drop(e);
    finish_write(ctx, key, empty, !picked.is_empty());
    let proto = if count.is_some() {
        ctx.client.protocol
    } else {
        Protocol::Resp2
    };
    with_scores(picked, true, proto)
}

fn zpopmin(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    pop_generic(ctx, args, false)
}

fn zpopmax(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    pop_generic(ctx, args, true)
}
