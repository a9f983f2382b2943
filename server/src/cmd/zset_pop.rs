//! Popping the lowest or highest members of sorted sets: `ZPOPMIN`, `ZPOPMAX`, `ZMPOP`, and
//! the blocking `BZPOPMIN`, `BZPOPMAX`, `BZMPOP`.
//!
//! The blocking forms wait as the blocking list commands do (see [`super::list_multi`]): a
//! notifier under each key, woken by a `ZADD` or a `*STORE` onto it, the attempt retried under
//! the gate; inside `MULTI` or a script they answer at once as if their timeout had passed.
//! What replicas and the AOF get is what happened, as Redis 7.0 sends it: `ZPOPMIN key` for a
//! `BZPOPMIN`, `ZPOPMIN key n` (`n`: how many were there to take, up to the count) for
//! `ZMPOP`/`BZMPOP` and a `BZPOPMIN` served with a count.
//!
//! Replies: `ZPOPMIN` is a flat `[member, score, ...]` array, nested `[[member, score], ...]`
//! under RESP3 when a count was given; `BZPOPMIN` is `[key, member, score]`; `ZMPOP` is
//! `[key, [[member, score], ...]]` in both protocols, a null array when nothing was found.

use crate::notify::ZSET;
use bytes::Bytes;

use super::blocking::parse_timeout;
use super::list_multi::{serve_now, serve_or_wait, Served};
use super::util::{container_mut, is, parse_i64, syntax_error, write_container};
use super::zsets::with_scores;
use super::{counted_keys, spec, CommandSpec, Ctx, BLOCKING, FAST, NOSCRIPT, WRITE};
use crate::db::Db;
use crate::frame::{Frame, Protocol};
use crate::state::Shared;
use crate::zset::ZSet;

/// The pop commands.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec("zpopmin", -2, WRITE | FAST, 1, 1, 1, zpopmin),
    spec("zpopmax", -2, WRITE | FAST, 1, 1, 1, zpopmax),
    // The keys follow a count (Redis's `movablekeys`): no fixed range to declare.
    spec("zmpop", -4, WRITE, 0, 0, 0, zmpop).with_keys_of(|args| counted_keys(args, 1)),
    spec("bzmpop", -5, WRITE | BLOCKING, 0, 0, 0, bzmpop)
        .with_keys_of(|args| counted_keys(args, 2)),
    spec(
        "bzpopmin",
        -3,
        WRITE | NOSCRIPT | BLOCKING | FAST,
        1,
        -2,
        1,
        bzpopmin,
    ),
    spec(
        "bzpopmax",
        -3,
        WRITE | NOSCRIPT | BLOCKING | FAST,
        1,
        -2,
        1,
        bzpopmax,
    ),
];

/// Removes up to `count` of the lowest (or, with `max`, highest) members of the sorted set at
/// `key`, deleting the key when it empties. `Ok(None)` when the key does not exist;
/// WRONGTYPE when it holds another type.
fn pop_from(
    db: &Db,
    key: &Bytes,
    now: u64,
    lazy: bool,
    max: bool,
    count: usize,
) -> Result<Option<Vec<(Bytes, f64)>>, Frame> {
    let Some(mut e) = write_container::<ZSet>(db, key, now, lazy, false)? else {
        return Ok(None);
    };
    let z: &mut ZSet = container_mut(&mut e);
    let picked: Vec<(Bytes, f64)> = if max {
        z.iter()
            .rev()
            .take(count)
            .map(|(m, s)| (m.to_bytes(), s))
            .collect()
    } else {
        z.iter()
            .take(count)
            .map(|(m, s)| (m.to_bytes(), s))
            .collect()
    };
    for (m, _) in &picked {
        z.remove(m);
    }
    let empty = z.is_empty();
    drop(e);
    if empty {
        db.remove_if_empty(key);
    }
    if !picked.is_empty() {
        db.signal_modified(key);
    }
    Ok(Some(picked))
}

/// The command replicas and the AOF get for a pop: `ZPOPMIN key [n]`.
fn effect(key: &Bytes, max: bool, n: Option<usize>) -> Vec<Bytes> {
    let name: &'static [u8] = if max { b"ZPOPMAX" } else { b"ZPOPMIN" };
    let mut cmd = vec![Bytes::from_static(name), key.clone()];
    if let Some(n) = n {
        cmd.push(Bytes::from(n.to_string()));
    }
    cmd
}

// ---------------------------------------------------------------------------------------------
// ZPOPMIN, ZPOPMAX

fn pop_command(ctx: &mut Ctx<'_>, args: &[Bytes], max: bool) -> Frame {
    if args.len() > 3 {
        return syntax_error();
    }
    let count = match args.get(2) {
        None => None,
        // Redis's text for a count that is negative or not a number at all.
        Some(c) => match parse_i64(c) {
            Ok(n) if n >= 0 => Some(n as u64),
            _ => return Frame::error("ERR value is out of range, must be positive"),
        },
    };
    let n = count.map_or(1, |c| usize::try_from(c).unwrap_or(usize::MAX));
    let popped = match pop_from(ctx.db(), &args[1], ctx.now_ms, ctx.lazy_delete(), max, n) {
        Ok(p) => p.unwrap_or_default(),
        Err(e) => return e,
    };
    if !popped.is_empty() {
        ctx.changed();
        let event = if max { "zpopmax" } else { "zpopmin" };
        ctx.notify_then_del_if_gone(ZSET, event, &args[1]);
    }
    // Nested pairs only under RESP3 and with a count.
    let proto = match count {
        Some(_) => ctx.client.protocol,
        None => Protocol::Resp2,
    };
    with_scores(popped, true, proto)
}

fn zpopmin(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    pop_command(ctx, args, false)
}

fn zpopmax(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    pop_command(ctx, args, true)
}

// ---------------------------------------------------------------------------------------------
// The multi-key pops

/// A parsed multi-key pop: which keys, which end, how many, and how to answer.
struct MPop {
    keys: Vec<Bytes>,
    max: bool,
    /// `None`: `BZPOPMIN`'s single pop.
    count: Option<usize>,
}

/// Pops from the first key of `p.keys` that holds a sorted set: the reply and the effect. A
/// key of another type is an error, except for a client already `waiting`, for which it is
/// not ready (as Redis leaves a blocked client blocked on it). `Ok(None)`: nothing to pop.
fn try_mpop(
    shared: &Shared,
    db_index: usize,
    now: u64,
    p: &MPop,
    waiting: bool,
) -> Result<Option<Served>, Frame> {
    let db = shared.keyspace.db(db_index);
    let lazy = shared.lazy_expire_deletes();
    for key in &p.keys {
        let popped = match pop_from(db, key, now, lazy, p.max, p.count.unwrap_or(1)) {
            Err(_) if waiting => continue,
            r => r?,
        };
        let Some(popped) = popped.filter(|v| !v.is_empty()) else {
            continue;
        };
        let event = if p.max { "zpopmax" } else { "zpopmin" };
        shared.keyspace_event_then_del_if_gone(ZSET, event, key, db_index);
        let n = popped.len();
        let reply = match p.count {
            // BZPOPMIN: `[key, member, score]`, flat in both protocols.
            None => {
                let (m, s) = popped.into_iter().next().expect("one popped");
                Frame::Array(vec![
                    Frame::Bulk(key.clone()),
                    Frame::Bulk(m),
                    Frame::Double(s),
                ])
            }
            Some(_) => Frame::Array(vec![
                Frame::Bulk(key.clone()),
                with_scores(popped, true, Protocol::Resp3),
            ]),
        };
        let served = (reply, vec![effect(key, p.max, p.count.map(|_| n))]);
        return Ok(Some(served));
    }
    Ok(None)
}

/// Parses `numkeys key... MIN|MAX [COUNT n]` (from `args[0]`), with Redis's errors.
fn parse_mpop(args: &[Bytes]) -> Result<MPop, Frame> {
    let numkeys = match parse_i64(&args[0]) {
        Ok(n) if n > 0 => n as u64,
        _ => return Err(Frame::error("ERR numkeys should be greater than 0")),
    };
    // The keys, then MIN or MAX: too large a count leaves no room for it.
    if numkeys >= (args.len() - 1) as u64 {
        return Err(syntax_error());
    }
    let numkeys = numkeys as usize;
    let keys = args[1..1 + numkeys].to_vec();
    let rest = &args[1 + numkeys..];
    let max = if is(&rest[0], "min") {
        false
    } else if is(&rest[0], "max") {
        true
    } else {
        return Err(syntax_error());
    };
    let mut count = None;
    let mut j = 1;
    while j < rest.len() {
        if count.is_none() && is(&rest[j], "count") && j + 1 < rest.len() {
            count = match parse_i64(&rest[j + 1]) {
                Ok(n) if n > 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
                _ => return Err(Frame::error("ERR count should be greater than 0")),
            };
            j += 2;
        } else {
            return Err(syntax_error());
        }
    }
    Ok(MPop {
        keys,
        max,
        count: Some(count.unwrap_or(1)),
    })
}

fn zmpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let p = match parse_mpop(&args[1..]) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let served = try_mpop(ctx.shared, ctx.client.db, ctx.now_ms, &p, false);
    serve_now(ctx, served).unwrap_or(Frame::NullArray)
}

/// Serves a blocking pop at once if a key has members, else (outside `MULTI` and scripts)
/// waits until one has or `timeout_ms` passes.
fn blocking(ctx: &mut Ctx<'_>, p: MPop, timeout_ms: u64) -> Frame {
    let keys = p.keys.clone();
    serve_or_wait(ctx, keys, timeout_ms, move |shared, db, now, blocked| {
        try_mpop(shared, db, now, &p, blocked)
    })
}

fn bzmpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    // Redis reads the keys and options before the timeout.
    let p = match parse_mpop(&args[2..]) {
        Ok(p) => p,
        Err(e) => return e,
    };
    match parse_timeout(&args[1]) {
        Ok(t) => blocking(ctx, p, t),
        Err(e) => e,
    }
}

fn bzpop(ctx: &mut Ctx<'_>, args: &[Bytes], max: bool) -> Frame {
    let timeout_ms = match parse_timeout(&args[args.len() - 1]) {
        Ok(t) => t,
        Err(e) => return e,
    };
    let p = MPop {
        keys: args[1..args.len() - 1].to_vec(),
        max,
        count: None,
    };
    blocking(ctx, p, timeout_ms)
}

fn bzpopmin(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    bzpop(ctx, args, false)
}

fn bzpopmax(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    bzpop(ctx, args, true)
}
