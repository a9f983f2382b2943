//! Set commands (`SADD`, `SINTER`, `SPOP`, ...), with Redis 7.0's replies: whole sets are the
//! RESP3 set type (`~`, an array in RESP2), `SRANDMEMBER` with a count an array (it may
//! repeat members). The value itself, and the intset/hashtable shape that orders the
//! replies, is [`crate::set::Set`].
//!
//! Multi-key commands carry [`MULTI_KEY`], so they run alone: they read several keys and may
//! write one, as one step. `SPOP` picks at random, so it reaches replicas and the AOF as what
//! it did, in Redis 7.0's form: `SREM key member` for one, `MULTI`, one `SREM` per member and
//! `EXEC` for a count, `DEL key` when the count took the whole set.

use bytes::Bytes;
use rand::Rng;

use super::keys::parse_scan;
use super::util::{container_mut, parse_i64, read_container, syntax_error, write_container};
use super::{
    counted_keys, spec, CommandSpec, Ctx, ADDS_ELEMENTS, DENYOOM, FAST, MULTI_KEY, READONLY, WRITE,
};
use crate::command::WALKS_VALUE;
use crate::db::{Entry, Value};
use crate::frame::Frame;
use crate::memory::EntryMut;
use crate::notify::{GENERIC, SET};
use crate::set::Set;

/// The set commands.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec("sadd", -3, ADDS_ELEMENTS, 1, 1, 1, sadd),
    spec("srem", -3, WRITE | FAST, 1, 1, 1, srem),
    spec("smembers", 2, READONLY | WALKS_VALUE, 1, 1, 1, smembers),
    spec("sismember", 3, READONLY | FAST, 1, 1, 1, sismember),
    spec("smismember", -3, READONLY | FAST, 1, 1, 1, smismember),
    spec("scard", 2, READONLY | FAST, 1, 1, 1, scard),
    spec("spop", -2, WRITE | FAST, 1, 1, 1, spop),
    spec("srandmember", -2, READONLY, 1, 1, 1, srandmember),
    spec("smove", 4, WRITE | FAST | MULTI_KEY, 1, 2, 1, smove),
    spec(
        "sinter",
        -2,
        READONLY | MULTI_KEY | WALKS_VALUE,
        1,
        -1,
        1,
        sinter,
    ),
    // The keys follow a count (Redis's `movablekeys`): no fixed range to declare.
    spec("sintercard", -3, READONLY | MULTI_KEY, 0, 0, 0, sintercard)
        .with_keys_of(|args| counted_keys(args, 1)),
    spec(
        "sinterstore",
        -3,
        WRITE | DENYOOM | MULTI_KEY | WALKS_VALUE,
        1,
        -1,
        1,
        sinterstore,
    ),
    spec(
        "sunion",
        -2,
        READONLY | MULTI_KEY | WALKS_VALUE,
        1,
        -1,
        1,
        sunion,
    ),
    spec(
        "sunionstore",
        -3,
        WRITE | DENYOOM | MULTI_KEY | WALKS_VALUE,
        1,
        -1,
        1,
        sunionstore,
    ),
    spec(
        "sdiff",
        -2,
        READONLY | MULTI_KEY | WALKS_VALUE,
        1,
        -1,
        1,
        sdiff,
    ),
    spec(
        "sdiffstore",
        -3,
        WRITE | DENYOOM | MULTI_KEY | WALKS_VALUE,
        1,
        -1,
        1,
        sdiffstore,
    ),
    spec("sscan", -3, READONLY | WALKS_VALUE, 1, 1, 1, sscan),
];

/// The largest `SRANDMEMBER` negative count (members may repeat, so the reply does not shrink
/// to the set's size): the reply is built whole before it is sent, so an unbounded count
/// would be an unbounded allocation. Redis answers larger counts; latchkey refuses them.
const MAX_REPEATED_PICKS: u64 = 1 << 24;

fn max_intset(ctx: &Ctx<'_>) -> usize {
    ctx.shared.config.set_max_intset_entries()
}

/// Runs `f` on the set at `key`: `Ok(None)` when absent, WRONGTYPE for another type.
fn read<R>(ctx: &Ctx<'_>, key: &[u8], f: impl FnOnce(&Set) -> R) -> Result<Option<R>, Frame> {
    read_container(ctx.db(), key, ctx.now_ms, ctx.lazy_delete(), f)
}

/// The set at `key` for modification, created empty when absent and `create` is set.
fn write<'a>(ctx: &Ctx<'a>, key: &Bytes, create: bool) -> Result<Option<EntryMut<'a>>, Frame> {
    write_container::<Set>(ctx.db(), key, ctx.now_ms, ctx.lazy_delete(), create)
}

fn set_reply(members: Vec<Bytes>) -> Frame {
    Frame::Set(members.into_iter().map(Frame::Bulk).collect())
}

/// Adds a member as `SADD` received it: the set stores a copy of its own (`SADD` is flagged
/// `COPIES_ARGS`, so the argument may be a view of the connection's read buffer), made only
/// when the member is new. An integer going into an intset is stored as a number, no copy.
fn add_arg(s: &mut Set, member: &Bytes, max_intset: usize) -> bool {
    let into_intset = s.ints().is_some() && crate::codec::parse_int(member).is_some();
    if into_intset {
        return s.insert(member.clone(), max_intset);
    }
    if s.ints().is_none() && s.contains(member) {
        return false;
    }
    s.insert(crate::memory::detached(member), max_intset)
}

fn sadd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let key = &args[1];
    let max = max_intset(ctx);
    let mut e = match write(ctx, key, true) {
        Ok(e) => e.expect("created"),
        Err(err) => return err,
    };
    let s: &mut Set = container_mut(&mut e);
    let added = args[2..].iter().filter(|m| add_arg(s, m, max)).count();
    drop(e);
    if added > 0 {
        ctx.modified(key);
        ctx.notify(SET, "sadd", key);
    }
    Frame::Integer(added as i64)
}

fn srem(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let key = &args[1];
    let mut e = match write(ctx, key, false) {
        Ok(Some(e)) => e,
        Ok(None) => return Frame::Integer(0),
        Err(err) => return err,
    };
    let s: &mut Set = container_mut(&mut e);
    let removed = args[2..].iter().filter(|m| s.remove(m)).count();
    let empty = s.is_empty();
    drop(e);
    if empty {
        ctx.db().remove_if_empty(key);
    }
    if removed > 0 {
        ctx.modified(key);
        ctx.notify_then_del_if_gone(SET, "srem", key);
    }
    Frame::Integer(removed as i64)
}

fn smembers(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    match read(ctx, &args[1], |s| s.members()) {
        Ok(m) => set_reply(m.unwrap_or_default()),
        Err(e) => e,
    }
}

fn sismember(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    match read(ctx, &args[1], |s| s.contains(&args[2])) {
        Ok(v) => Frame::Integer(v.unwrap_or(false) as i64),
        Err(e) => e,
    }
}

fn smismember(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let members = &args[2..];
    let found = |s: Option<&Set>| {
        members
            .iter()
            .map(|m| Frame::Integer(s.is_some_and(|s| s.contains(m)) as i64))
            .collect()
    };
    match read(ctx, &args[1], |s| found(Some(s))) {
        Ok(Some(v)) => Frame::Array(v),
        Ok(None) => Frame::Array(found(None)),
        Err(e) => e,
    }
}

fn scard(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    match read(ctx, &args[1], |s| s.len()) {
        Ok(v) => Frame::Integer(v.unwrap_or(0) as i64),
        Err(e) => e,
    }
}

/// Removes one member at random.
fn pop_one(s: &mut Set) -> Option<Bytes> {
    if s.is_empty() {
        return None;
    }
    let i = rand::rng().random_range(0..s.len());
    s.remove_index(i)
}

fn spop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    match args.len() {
        2 => spop_one(ctx, &args[1]),
        3 => spop_count(ctx, &args[1], &args[2]),
        _ => syntax_error(),
    }
}

fn spop_one(ctx: &mut Ctx<'_>, key: &Bytes) -> Frame {
    let mut e = match write(ctx, key, false) {
        Ok(Some(e)) => e,
        Ok(None) => return Frame::Null,
        Err(err) => return err,
    };
    let s: &mut Set = container_mut(&mut e);
    let Some(member) = pop_one(s) else {
        return Frame::Null;
    };
    let empty = s.is_empty();
    drop(e);
    if empty {
        ctx.db().remove_if_empty(key);
    }
    ctx.modified(key);
    ctx.notify_then_del_if_gone(SET, "spop", key);
    ctx.propagate_as(vec![vec![
        Bytes::from_static(b"SREM"),
        key.clone(),
        member.clone(),
    ]]);
    Frame::Bulk(member)
}

fn spop_count(ctx: &mut Ctx<'_>, key: &Bytes, count: &[u8]) -> Frame {
    let count = match parse_i64(count) {
        Ok(n) if n >= 0 => n as u64,
        _ => return Frame::error("ERR value is out of range, must be positive"),
    };
    let mut e = match write(ctx, key, false) {
        Ok(Some(e)) if count > 0 => e,
        Ok(_) => return Frame::Set(vec![]),
        Err(err) => return err,
    };
    let s: &mut Set = container_mut(&mut e);
    if count >= s.len() as u64 {
        // The whole set: the key goes, and replicas are told so with one `DEL`.
        let members = s.members();
        drop(e);
        ctx.db().remove(key);
        ctx.modified(key);
        ctx.notify_then_del_if_gone(SET, "spop", key);
        ctx.propagate_as(vec![vec![Bytes::from_static(b"DEL"), key.clone()]]);
        return set_reply(members);
    }
    let popped: Vec<Bytes> = (0..count).filter_map(|_| pop_one(s)).collect();
    drop(e);
    ctx.modified(key);
    ctx.notify(SET, "spop", key);
    // As Redis 7.0 does: one `SREM` per member, in a `MULTI`/`EXEC` so a replica applies the
    // pop as one step (inside a transaction or a script, which is one step already, without).
    let wrap = !ctx.in_exec && !ctx.in_script;
    let mut effects = Vec::with_capacity(popped.len() + 2);
    if wrap {
        effects.push(vec![Bytes::from_static(b"MULTI")]);
    }
    for m in &popped {
        effects.push(vec![Bytes::from_static(b"SREM"), key.clone(), m.clone()]);
    }
    if wrap {
        effects.push(vec![Bytes::from_static(b"EXEC")]);
    }
    ctx.propagate_as(effects);
    set_reply(popped)
}

fn srandmember(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    if args.len() > 3 {
        return syntax_error();
    }
    if args.len() == 2 {
        return match read(ctx, &args[1], |s| {
            (!s.is_empty()).then(|| s.get_index(rand::rng().random_range(0..s.len())))
        }) {
            Ok(Some(Some(Some(m)))) => Frame::Bulk(m),
            Ok(_) => Frame::Null,
            Err(e) => e,
        };
    }
    let count = match parse_i64(&args[2]) {
        Ok(i64::MIN) => return Frame::error(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ),
        Ok(n) => n,
        Err(e) => return e,
    };
    let (n, distinct) = (count.unsigned_abs(), count >= 0);
    if !distinct && n > MAX_REPEATED_PICKS {
        return Frame::error(format!(
            "ERR value is out of range, latchkey answers SRANDMEMBER counts down to -{MAX_REPEATED_PICKS}"
        ));
    }
    let picked = read(ctx, &args[1], |s| {
        let len = s.len();
        if n == 0 || len == 0 {
            return vec![];
        }
        let mut rng = rand::rng();
        if !distinct {
            return (0..n)
                .filter_map(|_| s.get_index(rng.random_range(0..len)))
                .collect();
        }
        if n >= len as u64 {
            return s.members();
        }
        rand::seq::index::sample(&mut rng, len, n as usize)
            .into_iter()
            .filter_map(|i| s.get_index(i))
            .collect()
    });
    match picked {
        Ok(m) => Frame::bulks(m.unwrap_or_default()),
        Err(e) => e,
    }
}

fn smove(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let (src, dst, member) = (&args[1], &args[2], &args[3]);
    // Redis looks both keys up first, answers 0 for a missing source, then checks both types.
    let src_has = match read(ctx, src, |s| s.contains(member)) {
        Ok(None) => return Frame::Integer(0),
        Ok(Some(has)) => has,
        Err(e) => return e,
    };
    if let Err(e) = read(ctx, dst, |_| ()) {
        return e;
    }
    if src == dst {
        return Frame::Integer(src_has as i64);
    }
    if !src_has {
        return Frame::Integer(0);
    }
    let mut e = match write(ctx, src, false) {
        Ok(Some(e)) => e,
        Ok(None) => return Frame::Integer(0),
        Err(err) => return err,
    };
    let s: &mut Set = container_mut(&mut e);
    s.remove(member);
    let empty = s.is_empty();
    drop(e);
    if empty {
        ctx.db().remove_if_empty(src);
    }
    ctx.modified(src);
    ctx.notify_then_del_if_gone(SET, "srem", src);
    let max = max_intset(ctx);
    let mut e = match write(ctx, dst, true) {
        Ok(e) => e.expect("created"),
        Err(err) => return err,
    };
    let added = container_mut::<Set>(&mut e).insert(member.clone(), max);
    drop(e);
    if added {
        ctx.modified(dst);
        ctx.notify(SET, "sadd", dst);
    }
    Frame::Integer(1)
}

/// The sets at `keys` for an intersection: WRONGTYPE when one holds another type (every key
/// is checked, as Redis 7.0.15 does), else `Ok(None)` when one is missing (the intersection
/// is empty).
fn sets_for_inter(ctx: &Ctx<'_>, keys: &[Bytes]) -> Result<Option<Vec<Set>>, Frame> {
    let Some(mut sets) = sets_for_union(ctx, keys)?
        .into_iter()
        .collect::<Option<Vec<Set>>>()
    else {
        return Ok(None);
    };
    // Smallest first: its members are the candidates, in its order.
    sets.sort_by_key(|s| s.len());
    Ok(Some(sets))
}

/// The members of the intersection, in the order of the smallest set, at most `limit` of
/// them (0: all).
fn intersect(sets: &[Set], limit: usize) -> Vec<Bytes> {
    let Some((first, rest)) = sets.split_first() else {
        return vec![];
    };
    let mut out = Vec::new();
    for m in first.members() {
        if rest.iter().all(|s| s.contains(&m)) {
            out.push(m);
            if out.len() == limit {
                break;
            }
        }
    }
    out
}

fn sinter(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    match sets_for_inter(ctx, &args[1..]) {
        Ok(Some(sets)) => set_reply(intersect(&sets, 0)),
        Ok(None) => Frame::Set(vec![]),
        Err(e) => e,
    }
}

fn sintercard(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let numkeys = match parse_i64(&args[1]) {
        Ok(n) if n > 0 => n as u64,
        _ => return Frame::error("ERR numkeys should be greater than 0"),
    };
    if numkeys > (args.len() - 2) as u64 {
        return Frame::error("ERR Number of keys can't be greater than number of args");
    }
    let keys = &args[2..2 + numkeys as usize];
    let mut limit = 0usize;
    let mut i = 2 + numkeys as usize;
    while i < args.len() {
        if super::util::is(&args[i], "limit") && i + 1 < args.len() {
            match parse_i64(&args[i + 1]) {
                Ok(n) if n >= 0 => limit = n as usize,
                _ => return Frame::error("ERR LIMIT can't be negative"),
            }
            i += 2;
        } else {
            return syntax_error();
        }
    }
    match sets_for_inter(ctx, keys) {
        Ok(Some(sets)) => Frame::Integer(intersect(&sets, limit).len() as i64),
        Ok(None) => Frame::Integer(0),
        Err(e) => e,
    }
}

/// The sets at `keys` for a union or difference: every key's type is checked; a missing key
/// is an empty set.
fn sets_for_union(ctx: &Ctx<'_>, keys: &[Bytes]) -> Result<Vec<Option<Set>>, Frame> {
    keys.iter().map(|k| read(ctx, k, |s| s.clone())).collect()
}

/// The union or (with `diff`) the difference of `sets`, shaped as Redis shapes the set it
/// builds for the reply (an intset when it can be one, which orders the reply).
fn combine(ctx: &Ctx<'_>, sets: &[Option<Set>], diff: bool) -> Set {
    let max = max_intset(ctx);
    let mut out = Set::new();
    if diff {
        let Some(Some(first)) = sets.first() else {
            return out;
        };
        for m in first.members() {
            if !sets[1..].iter().flatten().any(|s| s.contains(&m)) {
                out.insert(m, max);
            }
        }
    } else {
        for s in sets.iter().flatten() {
            for m in s.members() {
                out.insert(m, max);
            }
        }
    }
    out
}

fn sunion_or_diff(ctx: &mut Ctx<'_>, args: &[Bytes], diff: bool) -> Frame {
    match sets_for_union(ctx, &args[1..]) {
        Ok(sets) => set_reply(combine(ctx, &sets, diff).members()),
        Err(e) => e,
    }
}

fn sunion(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    sunion_or_diff(ctx, args, false)
}

fn sdiff(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    sunion_or_diff(ctx, args, true)
}

/// Stores `result` at `dst` (replacing whatever was there, TTL included), or deletes `dst`
/// when it is empty, as Redis's `*STORE` commands do. Replies with the size.
/// Stores a `S*STORE` result at `dst` (an empty one deletes it), notifying `event`.
fn store(ctx: &mut Ctx<'_>, dst: &Bytes, result: Set, event: &str) -> Frame {
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
        Entry::new(Value::Set(Box::new(result))),
        ctx.now_ms,
    );
    ctx.modified(dst);
    ctx.notify(SET, event, dst);
    Frame::Integer(n as i64)
}

fn sinterstore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let result = match sets_for_inter(ctx, &args[2..]) {
        Ok(Some(sets)) => Set::from_members(intersect(&sets, 0), max_intset(ctx)),
        Ok(None) => Set::new(),
        Err(e) => return e,
    };
    store(ctx, &args[1], result, "sinterstore")
}

fn store_union_or_diff(ctx: &mut Ctx<'_>, args: &[Bytes], diff: bool) -> Frame {
    match sets_for_union(ctx, &args[2..]) {
        Ok(sets) => {
            let result = combine(ctx, &sets, diff);
            let event = if diff { "sdiffstore" } else { "sunionstore" };
            store(ctx, &args[1], result, event)
        }
        Err(e) => e,
    }
}

fn sunionstore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    store_union_or_diff(ctx, args, false)
}

fn sdiffstore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    store_union_or_diff(ctx, args, true)
}

fn sscan(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let (cursor, opts) = match parse_scan(&args[1..], false) {
        Ok(x) => x,
        Err(e) => return e,
    };
    // An intset is returned whole by one call, as Redis does for its compact encodings; a
    // hashtable a page at a time, copying only that page.
    let paged = read(ctx, &args[1], |s| {
        if s.ints().is_some() {
            (s.members(), 0)
        } else {
            let (positions, next) = crate::scan::index_page(s.len(), cursor, opts.count);
            (
                positions.rev().filter_map(|i| s.get_index(i)).collect(),
                next,
            )
        }
    });
    let (page, next) = match paged {
        Ok(v) => v.unwrap_or_default(),
        Err(e) => return e,
    };
    let out = page
        .into_iter()
        .filter(|m| {
            opts.pattern
                .as_ref()
                .is_none_or(|p| crate::glob::matches(p, m, false))
        })
        .map(Frame::Bulk)
        .collect();
    Frame::Array(vec![
        Frame::Bulk(Bytes::from(next.to_string())),
        Frame::Array(out),
    ])
}
