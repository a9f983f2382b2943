//! String commands: `GET`, `SET` and the rest of the string family.
//!
//! A lock is a string: `SET lock token NX PX 30000` takes it, and the release script compares
//! its value with the holder's token before deleting it.

use bytes::Bytes;

use super::util::{is, parse_i64, syntax_error, wrongtype};
use super::{spec, CommandSpec, Ctx, DENYOOM, FAST, READONLY, WRITE};
use crate::db::{Entry, Value};
use crate::frame::Frame;

/// The string commands.
pub const COMMANDS: &[CommandSpec] = &[
    spec("get", 2, READONLY | FAST, 1, 1, 1, get),
    spec("set", -3, WRITE | DENYOOM, 1, 1, 1, set),
];

/// Reads a string key: `Ok(None)` when absent, `Err(WRONGTYPE)` when it holds another type.
pub fn read_string(ctx: &Ctx<'_>, key: &[u8]) -> Result<Option<Bytes>, Frame> {
    match ctx.db().get(key, ctx.now_ms, ctx.lazy_delete()) {
        None => Ok(None),
        Some(e) => match &e.value {
            Value::Str(s) => Ok(Some(s.clone())),
            _ => Err(wrongtype()),
        },
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
pub enum Expiry {
    /// No TTL: any previous TTL is cleared.
    None,
    /// Keep the key's existing TTL (`KEEPTTL`).
    Keep,
    /// Expire at this Unix time in milliseconds.
    At(u64),
}

/// Turns a relative or absolute expire argument into an absolute deadline, with Redis's
/// `invalid expire time` error for non-positive or overflowing values.
pub fn expire_deadline(
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
        } else if let (Some(n), false, None) = (next, keepttl, expiry_arg) {
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
    let key = &args[1];
    let old = if get_old {
        match read_string(ctx, key) {
            Ok(v) => Some(v),
            Err(e) => return e,
        }
    } else {
        None
    };
    let exists = match &old {
        Some(v) => v.is_some(),
        None if nx || xx => ctx.db().contains(key, ctx.now_ms),
        None => false,
    };
    let reply_skip = || match &old {
        Some(Some(v)) => Frame::Bulk(v.clone()),
        Some(None) => Frame::Null,
        None => Frame::Null,
    };
    if (nx && exists) || (xx && !exists) {
        return reply_skip();
    }
    set_string(ctx, key.clone(), args[2].clone(), expiry);
    match old {
        Some(Some(v)) => Frame::Bulk(v),
        Some(None) => Frame::Null,
        None => Frame::ok(),
    }
}

/// Stores a string value with the given expiry, as `SET` does.
pub fn set_string(ctx: &mut Ctx<'_>, key: Bytes, value: Bytes, expiry: Expiry) {
    let db = ctx.db();
    let expires_at = match expiry {
        Expiry::None => None,
        Expiry::At(t) => Some(t),
        Expiry::Keep => db
            .get(&key, ctx.now_ms, ctx.lazy_delete())
            .and_then(|e| e.expires_at),
    };
    db.insert(
        key,
        Entry {
            value: Value::Str(value),
            expires_at,
        },
    );
    ctx.changed();
}
