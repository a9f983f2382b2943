//! The list commands that pop from the first non-empty of several lists (`LMPOP`, `BLMPOP`)
//! and the blocking moves (`BLMOVE`, `BRPOPLPUSH`). They wait as `BLPOP` does (see
//! [`super::lists`]): a notifier under each key, woken by a push, the attempt retried under the
//! gate. What replicas and the AOF get is what happened, as Redis 7.0 sends it: `LPOP`/`RPOP`
//! with the number of elements taken, `LMOVE` or `RPOPLPUSH`.

use bytes::Bytes;

use super::blocking::{block_until, parse_timeout};
use super::lists::{list_of, notify_pop, notify_push, pop_from, write_in};
use super::util::{is, parse_i64, syntax_error};
use super::{counted_keys, spec, CommandSpec, Ctx, BLOCKING, DENYOOM, EXCLUSIVE, NOSCRIPT, WRITE};
use crate::frame::Frame;
use crate::state::Shared;

/// `LMPOP`, `BLMPOP`, `BLMOVE`, `BRPOPLPUSH`.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    // The keys follow a count (Redis's `movablekeys`): no fixed range to declare.
    spec("lmpop", -4, WRITE, 0, 0, 0, lmpop).with_keys_of(|args| counted_keys(args, 1)),
    spec("blmpop", -5, WRITE | BLOCKING, 0, 0, 0, blmpop)
        .with_keys_of(|args| counted_keys(args, 2)),
    spec(
        "blmove",
        6,
        WRITE | DENYOOM | NOSCRIPT | BLOCKING | EXCLUSIVE,
        1,
        2,
        1,
        blmove,
    ),
    spec(
        "brpoplpush",
        4,
        WRITE | DENYOOM | NOSCRIPT | BLOCKING | EXCLUSIVE,
        1,
        2,
        1,
        brpoplpush,
    ),
];

/// What a served attempt did: the reply, and the commands replicas and the AOF get for it.
pub(super) type Served = (Frame, Vec<Vec<Bytes>>);

/// One attempt of a blocked command, at a time: what it did when it could be served, `None` to
/// keep waiting.
pub(super) type Attempt =
    Box<dyn Fn(&Shared, usize, u64) -> Result<Option<Served>, Frame> + Send + Sync>;

/// Runs one attempt of a blocked client and records its effect, as one step for the stream
/// (the caller holds the gate).
fn attempt_and_record(
    attempt: &Attempt,
    shared: &Shared,
    db: usize,
) -> Result<Option<Frame>, Frame> {
    let _order = shared.order_guard();
    let now = shared.clock.now_ms();
    let Some((frame, effects)) = attempt(shared, db, now)? else {
        return Ok(None);
    };
    shared.propagate_lazy_expired();
    shared.after_write_as(db, &effects, 1);
    Ok(Some(frame))
}

/// Serves a command at once if it can be: its effect goes to replicas and the AOF with the
/// command's own write (see [`Ctx::propagate_as`]).
pub(super) fn serve_now(ctx: &mut Ctx<'_>, served: Result<Option<Served>, Frame>) -> Option<Frame> {
    match served {
        Ok(Some((frame, effects))) => {
            ctx.changed();
            ctx.propagate_as(effects);
            Some(frame)
        }
        Ok(None) => None,
        Err(e) => Some(e),
    }
}

/// Waits until `attempt` serves the client or `timeout_ms` passes (0: forever), woken by
/// pushes onto `keys`, as `BLPOP` waits ([`block_until`]); what a served attempt did goes to
/// replicas and the AOF. `exclusive`: the attempt touches two keys and runs alone.
pub(super) fn wait_for(
    ctx: &mut Ctx<'_>,
    keys: Vec<Bytes>,
    timeout_ms: u64,
    exclusive: bool,
    attempt: Attempt,
) {
    block_until(ctx, keys, timeout_ms, exclusive, move |shared, db, _now| {
        attempt_and_record(&attempt, shared, db)
    });
}

/// A blocking pop (`BLMPOP`, `BZMPOP`): served at once when `attempt` can (it is told whether
/// the client had to wait), else — outside `MULTI` and scripts, which never block — waits on
/// `keys` until it can or `timeout_ms` passes. The null reply is Redis's for a timeout and for
/// a pop that may not block.
pub(super) fn serve_or_wait<F>(
    ctx: &mut Ctx<'_>,
    keys: Vec<Bytes>,
    timeout_ms: u64,
    attempt: F,
) -> Frame
where
    F: Fn(&Shared, usize, u64, bool) -> Result<Option<Served>, Frame> + Send + Sync + 'static,
{
    let served = attempt(ctx.shared, ctx.client.db, ctx.now_ms, false);
    if let Some(f) = serve_now(ctx, served) {
        return f;
    }
    if !ctx.may_block() {
        return Frame::NullArray;
    }
    wait_for(
        ctx,
        keys,
        timeout_ms,
        false,
        Box::new(move |shared, db, now| attempt(shared, db, now, true)),
    );
    Frame::NullArray
}

// ---------------------------------------------------------------------------------------------
// LMPOP, BLMPOP

/// The parsed `numkeys key... LEFT|RIGHT [COUNT n]` of `[B]LMPOP`.
struct MPop {
    keys: Vec<Bytes>,
    left: bool,
    count: usize,
}

fn parse_mpop(args: &[Bytes]) -> Result<MPop, Frame> {
    let numkeys = match parse_i64(&args[0]) {
        Ok(n) if n > 0 => n as usize,
        _ => return Err(Frame::error("ERR numkeys should be greater than 0")),
    };
    // The keys, then LEFT or RIGHT: too large a count leaves no room for the direction.
    if numkeys >= args.len() - 1 {
        return Err(syntax_error());
    }
    let keys = args[1..1 + numkeys].to_vec();
    let rest = &args[1 + numkeys..];
    let left = match rest.first() {
        Some(w) if is(w, "left") => true,
        Some(w) if is(w, "right") => false,
        _ => return Err(syntax_error()),
    };
    let count = match &rest[1..] {
        [] => 1,
        [c, n] if is(c, "count") => match parse_i64(n) {
            Ok(n) if n > 0 => n as usize,
            _ => return Err(Frame::error("ERR count should be greater than 0")),
        },
        _ => return Err(syntax_error()),
    };
    Ok(MPop { keys, left, count })
}

/// Pops up to `count` elements from the first non-empty list of `keys`: `[key, [elements]]`.
/// A key of another type is an error, except for a client already `waiting`, for which it is
/// not ready (as Redis leaves a blocked client blocked on it).
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
        let popped = match pop_from(db, key, now, lazy, p.left, p.count) {
            Err(_) if waiting => continue,
            r => r?,
        };
        let Some(popped) = popped else {
            continue;
        };
        if popped.is_empty() {
            continue;
        }
        notify_pop(shared, db_index, key, p.left);
        let name: &'static [u8] = if p.left { b"LPOP" } else { b"RPOP" };
        let n = Bytes::from(popped.len().to_string());
        let effect = vec![Bytes::from_static(name), key.clone(), n];
        let reply = Frame::Array(vec![Frame::Bulk(key.clone()), Frame::bulks(popped)]);
        return Ok(Some((reply, vec![effect])));
    }
    Ok(None)
}

fn lmpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let p = match parse_mpop(&args[1..]) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let served = try_mpop(ctx.shared, ctx.client.db, ctx.now_ms, &p, false);
    serve_now(ctx, served).unwrap_or(Frame::NullArray)
}

fn blmpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let timeout_ms = match parse_timeout(&args[1]) {
        Ok(t) => t,
        Err(e) => return e,
    };
    let p = match parse_mpop(&args[2..]) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let keys = p.keys.clone();
    serve_or_wait(ctx, keys, timeout_ms, move |shared, db, now, blocked| {
        try_mpop(shared, db, now, &p, blocked)
    })
}

// ---------------------------------------------------------------------------------------------
// BLMOVE, BRPOPLPUSH

/// A blocking move: from which end of `src` to which end of `dst`, and the command its effect
/// is recorded as.
struct Move {
    src: Bytes,
    dst: Bytes,
    from_left: bool,
    to_left: bool,
    /// The directions as the client spelled them (`BLMOVE`), or `None` for `BRPOPLPUSH`.
    sides: Option<(Bytes, Bytes)>,
}

/// Moves one element if `src` has one: the element, or `None` to keep waiting. As in Redis,
/// an empty source waits whatever the destination holds; a destination of the wrong type is
/// refused before anything is popped, so nothing is lost.
///
/// `later`: the client waited. Redis then records `LMOVE` with the directions in lowercase;
/// served at once, with the directions as the client sent them.
fn try_move(
    shared: &Shared,
    db_index: usize,
    now: u64,
    m: &Move,
    later: bool,
) -> Result<Option<Served>, Frame> {
    let db = shared.keyspace.db(db_index);
    let lazy = shared.lazy_expire_deletes();
    // A source of another type leaves a waiting client waiting, as in Redis.
    let src = match write_in(db, &m.src, now, lazy, None) {
        Err(_) if later => return Ok(None),
        r => r?,
    };
    let has = src.is_some_and(|mut e| !list_of(&mut e).is_empty());
    if !has {
        return Ok(None);
    }
    drop(write_in(db, &m.dst, now, lazy, None)?);
    let Some(el) =
        pop_from(db, &m.src, now, lazy, m.from_left, 1)?.and_then(|v| v.into_iter().next())
    else {
        return Ok(None);
    };
    let options = shared.config.encodings.list_options();
    let mut e = write_in(db, &m.dst, now, lazy, Some(options))?.expect("created");
    let l = list_of(&mut e);
    if m.to_left {
        l.push_front(&el);
    } else {
        l.push_back(&el);
    }
    drop(e);
    db.signal_modified(&m.dst);
    notify_push(shared, db_index, &m.dst, m.to_left);
    notify_pop(shared, db_index, &m.src, m.from_left);
    db.signal_ready(&m.dst);
    let effect = match &m.sides {
        None => vec![
            Bytes::from_static(b"RPOPLPUSH"),
            m.src.clone(),
            m.dst.clone(),
        ],
        Some((from, to)) => {
            let end = |left: bool| Bytes::from_static(if left { b"left" } else { b"right" });
            let (from, to) = if later {
                (end(m.from_left), end(m.to_left))
            } else {
                (from.clone(), to.clone())
            };
            vec![
                Bytes::from_static(b"LMOVE"),
                m.src.clone(),
                m.dst.clone(),
                from,
                to,
            ]
        }
    };
    Ok(Some((Frame::Bulk(el), vec![effect])))
}

fn blocking_move(ctx: &mut Ctx<'_>, m: Move, timeout: &[u8]) -> Frame {
    let timeout_ms = match parse_timeout(timeout) {
        Ok(t) => t,
        Err(e) => return e,
    };
    let served = try_move(ctx.shared, ctx.client.db, ctx.now_ms, &m, false);
    if let Some(f) = serve_now(ctx, served) {
        return f;
    }
    if !ctx.may_block() {
        // Inside MULTI or a script: what an empty `LMOVE` answers (a timeout answers a null
        // array instead, as in Redis).
        return Frame::Null;
    }
    let keys = vec![m.src.clone()];
    wait_for(
        ctx,
        keys,
        timeout_ms,
        true,
        Box::new(move |shared, db, now| try_move(shared, db, now, &m, true)),
    );
    Frame::NullArray
}

fn blmove(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let valid = |a: &[u8]| is(a, "left") || is(a, "right");
    if !valid(&args[3]) || !valid(&args[4]) {
        return syntax_error();
    }
    let m = Move {
        src: args[1].clone(),
        dst: args[2].clone(),
        from_left: is(&args[3], "left"),
        to_left: is(&args[4], "left"),
        sides: Some((args[3].clone(), args[4].clone())),
    };
    blocking_move(ctx, m, &args[5])
}

fn brpoplpush(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let m = Move {
        src: args[1].clone(),
        dst: args[2].clone(),
        from_left: false,
        to_left: true,
        sides: None,
    };
    blocking_move(ctx, m, &args[3])
}
