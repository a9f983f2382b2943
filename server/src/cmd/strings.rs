//! String commands: `GET`, `SET` and the rest of the string family.
//!
//! A lock is a string: `SET lock token NX PX 30000` takes it, and the release script compares
//! its value with the holder's token before deleting it.

use bytes::Bytes;

use super::util::{is, not_integer, parse_i64, syntax_error, wrongtype};
use super::{
    spec, CommandSpec, Ctx, Written, DENYOOM, EXCLUSIVE, FAST, MULTI_KEY, READONLY, WRITE,
};
use crate::codec::parse_int;
use crate::command::WALKS_VALUE;
use crate::db::{Entry, Str, Update, Value};
use crate::frame::Frame;
use crate::long_double::IncrError;
use crate::notify::{GENERIC, STRING};

/// The string commands.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec("get", 2, READONLY | FAST, 1, 1, 1, get),
    spec("set", -3, WRITE | DENYOOM, 1, 1, 1, set),
    spec("setnx", 3, WRITE | DENYOOM | FAST, 1, 1, 1, setnx),
    spec("setex", 4, WRITE | DENYOOM, 1, 1, 1, setex),
    spec("psetex", 4, WRITE | DENYOOM, 1, 1, 1, psetex),
    spec("getset", 3, WRITE | DENYOOM | FAST, 1, 1, 1, getset),
    spec("getdel", 2, WRITE | FAST, 1, 1, 1, getdel),
    spec("getex", -2, WRITE | FAST, 1, 1, 1, getex),
    spec("mget", -2, READONLY | FAST | MULTI_KEY, 1, -1, 1, mget),
    spec("mset", -3, WRITE | DENYOOM | EXCLUSIVE, 1, -1, 2, mset),
    spec("msetnx", -3, WRITE | DENYOOM | EXCLUSIVE, 1, -1, 2, msetnx),
    spec("incr", 2, WRITE | DENYOOM | FAST, 1, 1, 1, incr),
    spec("decr", 2, WRITE | DENYOOM | FAST, 1, 1, 1, decr),
    spec("incrby", 3, WRITE | DENYOOM | FAST, 1, 1, 1, incrby),
    spec("decrby", 3, WRITE | DENYOOM | FAST, 1, 1, 1, decrby),
    spec(
        "incrbyfloat",
        3,
        WRITE | DENYOOM | FAST,
        1,
        1,
        1,
        incrbyfloat,
    ),
    spec("append", 3, WRITE | DENYOOM | FAST, 1, 1, 1, append),
    spec("strlen", 2, READONLY | FAST, 1, 1, 1, strlen),
    spec("getrange", 4, READONLY | WALKS_VALUE, 1, 1, 1, getrange),
    spec("substr", 4, READONLY | WALKS_VALUE, 1, 1, 1, getrange),
    spec("setrange", 4, WRITE | DENYOOM, 1, 1, 1, setrange),
];

/// Reads a string key: `Ok(None)` when absent, `Err(WRONGTYPE)` when it holds another type.
pub(crate) fn read_string(ctx: &Ctx<'_>, key: &[u8]) -> Result<Option<Bytes>, Frame> {
    match ctx.db().get(key, ctx.now_ms, ctx.lazy_delete()) {
        None => Ok(None),
        Some(e) => match &e.value {
            Value::Str(s) => Ok(Some(s.to_bytes())),
            _ => Err(wrongtype()),
        },
    }
}

/// The string in an entry: `Ok(None)` for no entry, `Err(WRONGTYPE)` for another type.
fn string_of(current: Option<&Entry>) -> Result<Option<&Str>, Frame> {
    match current.map(|e| &e.value) {
        None => Ok(None),
        Some(Value::Str(s)) => Ok(Some(s)),
        Some(_) => Err(wrongtype()),
    }
}

/// A string entry.
fn string_entry(value: Bytes, expires_at: Option<u64>) -> Entry {
    Entry::with_expiry(Value::Str(Str::from(value)), expires_at)
}

/// The deadline a write with `expiry` leaves on a key whose current entry is `current`.
fn deadline(expiry: Expiry, current: Option<&Entry>) -> Option<u64> {
    match expiry {
        Expiry::None => None,
        Expiry::At(t) => Some(t),
        Expiry::Keep => current.and_then(|e| e.expires_at()),
    }
}

fn get(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    match read_string(ctx, &args[1]) {
        Ok(Some(v)) => Frame::Bulk(v),
        Ok(None) => Frame::Null,
        Err(e) => e,
    }
}

/// When a key set by `SET`-like commands should expire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Expiry {
    /// No TTL: any previous TTL is cleared.
    None,
    /// Keep the key's existing TTL (`KEEPTTL`).
    Keep,
    /// Expire at this Unix time in milliseconds.
    At(u64),
}

/// Turns a relative or absolute expire argument into an absolute deadline, with Redis's
/// `invalid expire time` error for non-positive or overflowing values.
pub(crate) fn expire_deadline(
    ctx: &Ctx<'_>,
    raw: &[u8],
    unit_ms: i64,
    absolute: bool,
    cmd: &str,
) -> Result<u64, Frame> {
    let v = parse_i64(raw)?;
    let invalid = || Frame::error(format!("ERR invalid expire time in '{cmd}' command"));
    if v <= 0 || (unit_ms == 1000 && v > i64::MAX / 1000) {
        return Err(invalid());
    }
    let ms = v * unit_ms;
    let at = if absolute {
        ms
    } else {
        ms.checked_add(ctx.now_ms as i64).ok_or_else(invalid)?
    };
    Ok(at as u64)
}

fn set(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let (mut nx, mut xx, mut get_old) = (false, false, false);
    let mut expiry_arg: Option<(&[u8], i64, bool)> = None;
    let mut keepttl = false;
    let mut i = 3;
    while i < args.len() {
        let a = &args[i];
        let next = args.get(i + 1);
        if is(a, "nx") && !xx {
            nx = true;
        } else if is(a, "xx") && !nx {
            xx = true;
        } else if is(a, "get") {
            get_old = true;
        } else if is(a, "keepttl") && expiry_arg.is_none() {
            keepttl = true;
        } else if let (Some(n), false) = (next, keepttl) {
            let (unit, abs) = if is(a, "ex") {
                (1000, false)
            } else if is(a, "px") {
                (1, false)
            } else if is(a, "exat") {
                (1000, true)
            } else if is(a, "pxat") {
                (1, true)
            } else {
                return syntax_error();
            };
            // As in Redis, the same option may come again (the last value counts), but two
            // different ones contradict each other.
            if expiry_arg.is_some_and(|(_, u, ab)| (u, ab) != (unit, abs)) {
                return syntax_error();
            }
            expiry_arg = Some((n, unit, abs));
            i += 1;
        } else {
            return syntax_error();
        }
        i += 1;
    }
    let expiry = match expiry_arg {
        Some((raw, unit, abs)) => match expire_deadline(ctx, raw, unit, abs, "set") {
            Ok(at) => Expiry::At(at),
            Err(e) => return e,
        },
        None if keepttl => Expiry::Keep,
        None => Expiry::None,
    };
    let value = args[2].clone();
    let reply = ctx.update_key(&args[1], |current| {
        // SET ... GET on a key of another type is refused, and changes nothing. The old
        // value is copied only for `GET`, which replies with it: a plain SET leaves the old
        // value's memory untouched.
        let reply = match get_old {
            false => Frame::ok(),
            true => match string_of(current) {
                Ok(Some(v)) => Frame::Bulk(v.to_bytes()),
                Ok(None) => Frame::Null,
                Err(e) => return (Update::Keep, e),
            },
        };
        let exists = current.is_some();
        if (nx && exists) || (xx && !exists) {
            let skipped = if get_old { reply } else { Frame::Null };
            return (Update::Keep, skipped);
        }
        let entry = string_entry(value, deadline(expiry, current));
        (Update::Put(entry), reply)
    });
    notify_set(ctx, &args[1], expiry);
    reply
}

/// The notifications of a stored string: `set`, and `expire` when it was given a TTL.
fn notify_set(ctx: &Ctx<'_>, key: &[u8], expiry: Expiry) {
    if ctx.last_update == Written::Put {
        ctx.notify(STRING, "set", key);
        if matches!(expiry, Expiry::At(_)) {
            ctx.notify(GENERIC, "expire", key);
        }
    }
}

/// Stores a string value with the given expiry, as `SET` does (whatever type was there).
pub(crate) fn set_string(ctx: &mut Ctx<'_>, key: Bytes, value: Bytes, expiry: Expiry) {
    ctx.update_key(&key, |current| {
        let entry = string_entry(value, deadline(expiry, current));
        (Update::Put(entry), Frame::ok())
    });
    notify_set(ctx, &key, expiry);
}

fn setnx(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let value = args[2].clone();
    let reply = ctx.update_key(&args[1], |current| match current {
        Some(_) => (Update::Keep, Frame::Integer(0)),
        None => (Update::Put(string_entry(value, None)), Frame::Integer(1)),
    });
    notify_set(ctx, &args[1], Expiry::None);
    reply
}

fn setex_generic(ctx: &mut Ctx<'_>, args: &[Bytes], unit_ms: i64, cmd: &str) -> Frame {
    match expire_deadline(ctx, &args[2], unit_ms, false, cmd) {
        Ok(at) => {
            set_string(ctx, args[1].clone(), args[3].clone(), Expiry::At(at));
            Frame::ok()
        }
        Err(e) => e,
    }
}

fn setex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    setex_generic(ctx, args, 1000, "setex")
}

fn psetex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    setex_generic(ctx, args, 1, "psetex")
}

fn getset(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let value = args[2].clone();
    let reply = ctx.update_key(&args[1], |current| match string_of(current) {
        Ok(old) => {
            let reply = old.map_or(Frame::Null, |v| Frame::Bulk(v.to_bytes()));
            (Update::Put(string_entry(value, None)), reply)
        }
        Err(e) => (Update::Keep, e),
    });
    notify_set(ctx, &args[1], Expiry::None);
    reply
}

fn getdel(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let reply = ctx.update_key(&args[1], |current| match string_of(current) {
        Ok(Some(v)) => (Update::Remove, Frame::Bulk(v.to_bytes())),
        Ok(None) => (Update::Keep, Frame::Null),
        Err(e) => (Update::Keep, e),
    });
    ctx.notify_update(STRING, "del", &args[1]);
    reply
}

fn getex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    // Syntax first, then the key, then the expire value: the order Redis checks them in.
    let mut persist = false;
    let mut expire: Option<(&[u8], i64, bool)> = None;
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        if is(a, "persist") && expire.is_none() {
            persist = true;
            i += 1;
            continue;
        }
        let unit = if is(a, "ex") {
            (1000, false)
        } else if is(a, "px") {
            (1, false)
        } else if is(a, "exat") {
            (1000, true)
        } else if is(a, "pxat") {
            (1, true)
        } else {
            return syntax_error();
        };
        // The same option may come again (the last value counts), as in Redis; two different
        // ones, or one with PERSIST, contradict each other.
        let (Some(raw), false) = (args.get(i + 1), persist) else {
            return syntax_error();
        };
        if expire.is_some_and(|(_, u, ab)| (u, ab) != unit) {
            return syntax_error();
        }
        expire = Some((raw, unit.0, unit.1));
        i += 2;
    }
    // The expire value is checked after the key: computed now, reported in that order.
    let change = match expire {
        Some((raw, unit, absolute)) => {
            Some(expire_deadline(ctx, raw, unit, absolute, "getex").map(Some))
        }
        None if persist => Some(Ok(None)),
        None => None,
    };
    let is_replica = ctx.shared.is_replica();
    let now = ctx.now_ms;
    let persisting = matches!(change, Some(Ok(None)));
    let reply = ctx.update_key(&args[1], |current| {
        let value = match string_of(current) {
            Ok(Some(v)) => v.to_bytes(),
            Ok(None) => return (Update::Keep, Frame::Null),
            Err(e) => return (Update::Keep, e),
        };
        // None: leave the TTL alone; Some(None): PERSIST; Some(Some(t)): expire at t.
        let ttl = match change {
            None => return (Update::Keep, Frame::Bulk(value)),
            Some(Err(e)) => return (Update::Keep, e),
            Some(Ok(ttl)) => ttl,
        };
        // An expiry is always a change, even to the deadline the key had (Redis counts it
        // and propagates its `PEXPIREAT`); `PERSIST` only when there was a TTL to remove.
        let update = match ttl {
            Some(at) if at <= now && !is_replica => Update::Remove,
            None if current.and_then(|e| e.expires_at()).is_none() => Update::Keep,
            ttl => Update::Expire(ttl),
        };
        (update, Frame::Bulk(value))
    });
    match ctx.last_update {
        Written::Expire if persisting => ctx.notify(GENERIC, "persist", &args[1]),
        Written::Expire => ctx.notify(GENERIC, "expire", &args[1]),
        Written::Removed => ctx.notify(GENERIC, "del", &args[1]),
        Written::Put | Written::Nothing => {}
    }
    reply
}

fn mget(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let db = ctx.db();
    Frame::Array(
        args[1..]
            .iter()
            .map(|k| match db.get(k, ctx.now_ms, ctx.lazy_delete()) {
                Some(e) => match &e.value {
                    Value::Str(s) => Frame::Bulk(s.to_bytes()),
                    _ => Frame::Null,
                },
                None => Frame::Null,
            })
            .collect(),
    )
}

fn mset_pairs(args: &[Bytes], name: &str) -> Result<(), Frame> {
    if args.len().is_multiple_of(2) {
        return Err(super::arity_error(name));
    }
    Ok(())
}

fn mset(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    if let Err(e) = mset_pairs(args, "mset") {
        return e;
    }
    for pair in args[1..].chunks(2) {
        set_string(ctx, pair[0].clone(), pair[1].clone(), Expiry::None);
    }
    Frame::ok()
}

fn msetnx(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    if let Err(e) = mset_pairs(args, "msetnx") {
        return e;
    }
    let (db, lazy) = (ctx.db(), ctx.lazy_delete());
    if args[1..]
        .chunks(2)
        .any(|p| db.get(&p[0], ctx.now_ms, lazy).is_some())
    {
        return Frame::Integer(0);
    }
    for pair in args[1..].chunks(2) {
        set_string(ctx, pair[0].clone(), pair[1].clone(), Expiry::None);
    }
    Frame::Integer(1)
}

/// Adds `by` to the integer stored at `key` (0 when absent), keeping its TTL.
fn incr_by(ctx: &mut Ctx<'_>, key: &Bytes, by: i64) -> Frame {
    let reply = ctx.update_key(key, |current| {
        let n = match string_of(current) {
            Ok(Some(v)) => match parse_int(v) {
                Some(n) => n,
                None => return (Update::Keep, not_integer()),
            },
            Ok(None) => 0,
            Err(e) => return (Update::Keep, e),
        };
        let Some(n) = n.checked_add(by) else {
            let e = Frame::error("ERR increment or decrement would overflow");
            return (Update::Keep, e);
        };
        // The digits go straight into the value, inline (an i64 has at most 20 of them):
        // no allocation, unlike a `Bytes` made first.
        let digits = Str::copy_from_slice(itoa::Buffer::new().format(n).as_bytes());
        let entry = Entry::with_expiry(Value::Str(digits), deadline(Expiry::Keep, current));
        (Update::Put(entry), Frame::Integer(n))
    });
    ctx.notify_update(STRING, "incrby", key);
    reply
}

fn incr(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    incr_by(ctx, &args[1], 1)
}

fn decr(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    incr_by(ctx, &args[1], -1)
}

fn incrby(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    match parse_i64(&args[2]) {
        Ok(by) => incr_by(ctx, &args[1], by),
        Err(e) => e,
    }
}

fn decrby(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    match parse_i64(&args[2]) {
        Ok(i64::MIN) => Frame::error("ERR decrement would overflow"),
        Ok(by) => incr_by(ctx, &args[1], -by),
        Err(e) => e,
    }
}

fn incrbyfloat(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let reply = ctx.update_key(&args[1], |current| {
        let now = match string_of(current) {
            Ok(v) => v,
            Err(e) => return (Update::Keep, e),
        };
        let text = match crate::long_double::incr(now.map(|v| &v[..]), &args[2]) {
            Ok(t) => Bytes::from(t),
            Err(IncrError::Sum) => {
                let e = Frame::error("ERR increment would produce NaN or Infinity");
                return (Update::Keep, e);
            }
            Err(_) => return (Update::Keep, super::util::not_float()),
        };
        let entry = string_entry(text.clone(), deadline(Expiry::Keep, current));
        (Update::Put(entry), Frame::Bulk(text))
    });
    ctx.notify_update(STRING, "incrbyfloat", &args[1]);
    reply
}

/// Redis's refusal of a string that would grow past `proto-max-bulk-len`.
fn too_long() -> Frame {
    Frame::error("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
}

/// The largest string a command of this client may make: `proto-max-bulk-len`, except on
/// the master's link (Redis obeys its master whatever its own limit).
fn max_string(ctx: &Ctx<'_>) -> u64 {
    if ctx.client.is_replication_link {
        u64::MAX
    } else {
        ctx.shared.config.proto_max_bulk_len()
    }
}

fn append(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let max = max_string(ctx);
    let reply = ctx.update_key(&args[1], |current| {
        let mut v = match string_of(current) {
            Ok(old) => old.map(|b| b.to_vec()).unwrap_or_default(),
            Err(e) => return (Update::Keep, e),
        };
        if (v.len() + args[2].len()) as u64 > max {
            return (Update::Keep, too_long());
        }
        v.extend_from_slice(&args[2]);
        let len = v.len() as i64;
        let entry = string_entry(Bytes::from(v), deadline(Expiry::Keep, current));
        (Update::Put(entry), Frame::Integer(len))
    });
    ctx.notify_update(STRING, "append", &args[1]);
    reply
}

fn strlen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    match read_string(ctx, &args[1]) {
        Ok(v) => Frame::Integer(v.map_or(0, |b| b.len() as i64)),
        Err(e) => e,
    }
}

fn getrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let (Ok(mut start), Ok(mut end)) = (parse_i64(&args[2]), parse_i64(&args[3])) else {
        return not_integer();
    };
    let v = match read_string(ctx, &args[1]) {
        Ok(v) => v.unwrap_or_default(),
        Err(e) => return e,
    };
    let len = v.len() as i64;
    if start < 0 && end < 0 && start > end {
        return Frame::bulk("");
    }
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    start = start.max(0);
    end = end.max(0).min(len - 1);
    if start > end || len == 0 {
        return Frame::bulk("");
    }
    Frame::Bulk(v.slice(start as usize..=end as usize))
}

fn setrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let Ok(offset) = parse_i64(&args[2]) else {
        return not_integer();
    };
    if offset < 0 {
        return Frame::error("ERR offset is out of range");
    }
    let max = max_string(ctx);
    let value = &args[3];
    // What the padding would add, checked against `maxmemory` before anything is copied
    // (see `crate::oom::check_growth`): a one-byte SETRANGE at offset 500 MB is 500 MB.
    let end = offset as u64 + value.len() as u64;
    if end <= max && !value.is_empty() {
        let now = match read_string(ctx, &args[1]) {
            Ok(v) => v.map_or(0, |v| v.len() as u64),
            Err(e) => return e,
        };
        if let Err(e) = crate::oom::check_growth(ctx, end.saturating_sub(now) as usize) {
            return e;
        }
    }
    let reply = ctx.update_key(&args[1], |current| {
        let mut v = match string_of(current) {
            Ok(old) => old.map(|b| b.to_vec()).unwrap_or_default(),
            Err(e) => return (Update::Keep, e),
        };
        if value.is_empty() {
            return (Update::Keep, Frame::Integer(v.len() as i64));
        }
        if end > max {
            return (Update::Keep, too_long());
        }
        let end = end as usize;
        if v.len() < end {
            v.resize(end, 0);
        }
        v[offset as usize..end].copy_from_slice(value);
        let len = v.len() as i64;
        let entry = string_entry(Bytes::from(v), deadline(Expiry::Keep, current));
        (Update::Put(entry), Frame::Integer(len))
    });
    ctx.notify_update(STRING, "setrange", &args[1]);
    reply
}
