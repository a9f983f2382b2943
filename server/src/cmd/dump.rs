//! `DUMP` and `RESTORE`: a key's value serialized in Redis's format, and a key made from such
//! a payload, so that values move between latchkey and redis-server in either direction.
//!
//! The payload itself is built and checked in [`crate::rdb::dump`]; here are the commands
//! around it, with Redis 7.0's options, error texts and their order (`restoreCommand`), and
//! what reaches replicas and the AOF: a relative TTL becomes an absolute one (`ABSTTL`), so a
//! replica that applies the command later still expires the key at the same moment, and a TTL
//! already in the past deletes the key instead of creating it (a `DEL` when `REPLACE` removed
//! an old value, nothing otherwise).

use bytes::Bytes;

use super::util::{is, parse_i64, syntax_error};
use super::{spec, CommandSpec, Ctx, DENYOOM, READONLY, WRITE};
use crate::db::{Entry, Update};
use crate::frame::Frame;
use crate::rdb::dump;

/// `DUMP` and `RESTORE`.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec("dump", 2, READONLY, 1, 1, 1, dump_cmd),
    spec("restore", -4, WRITE | DENYOOM, 1, 1, 1, restore),
];

/// `BUSYKEY Target key name already exists.`
fn busy_key() -> Frame {
    Frame::error("BUSYKEY Target key name already exists.")
}

fn dump_cmd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    match ctx.db().get(&args[1], ctx.now_ms, ctx.lazy_delete()) {
        Some(e) => Frame::Bulk(dump::payload(&e.value)),
        None => Frame::Null,
    }
}

/// `RESTORE`'s options after the payload.
#[derive(Default)]
struct Options {
    replace: bool,
    absttl: bool,
    idle_s: Option<u64>,
    freq: Option<u8>,
}

/// Parses the options as Redis does: `IDLETIME` and `FREQ` exclude each other (the second
/// one is a syntax error), and a bad number is refused as soon as it is met.
fn options(args: &[Bytes]) -> Result<Options, Frame> {
    let mut o = Options::default();
    let mut j = 4;
    while j < args.len() {
        let has_value = j + 1 < args.len();
        if is(&args[j], "replace") {
            o.replace = true;
        } else if is(&args[j], "absttl") {
            o.absttl = true;
        } else if is(&args[j], "idletime") && has_value && o.freq.is_none() {
            let idle = parse_i64(&args[j + 1])?;
            if idle < 0 {
                return Err(Frame::error("ERR Invalid IDLETIME value, must be >= 0"));
            }
            o.idle_s = Some(idle as u64);
            j += 1;
        } else if is(&args[j], "freq") && has_value && o.idle_s.is_none() {
            let freq = parse_i64(&args[j + 1])?;
            if !(0..=255).contains(&freq) {
                return Err(Frame::error(
                    "ERR Invalid FREQ value, must be >= 0 and <= 255",
                ));
            }
            o.freq = Some(freq as u8);
            j += 1;
        } else {
            return Err(syntax_error());
        }
        j += 1;
    }
    Ok(o)
}

fn restore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let key = &args[1];
    let o = match options(args) {
        Ok(o) => o,
        Err(e) => return e,
    };
    // Redis's order of checks: the key, then the TTL, then the payload. An expired key does
    // not count (this read deletes it, as Redis's `lookupKeyWrite` does).
    if !o.replace && ctx.db().get(key, ctx.now_ms, ctx.lazy_delete()).is_some() {
        return busy_key();
    }
    let ttl = match parse_i64(&args[2]) {
        Ok(t) if t < 0 => return Frame::error("ERR Invalid TTL value, must be >= 0"),
        Ok(t) => t as u64,
        Err(e) => return e,
    };
    let max_intset = ctx.shared.config.set_max_intset_entries();
    let mut value = match dump::decode(&args[3], max_intset) {
        Ok(v) => v,
        Err(e) => return Frame::error(e.message()),
    };
    // A restored list is a new quicklist in Redis, made with the current options.
    if let crate::db::Value::List(l) = &mut value {
        let (fill, depth) = ctx.shared.config.encodings.list_options();
        l.set_options(fill, depth);
    }
    // The deadline in Unix milliseconds (none for a TTL of 0).
    let deadline = match (ttl, o.absttl) {
        (0, _) => None,
        (t, true) => Some(t),
        (t, false) => match t.checked_add(ctx.now_ms).filter(|d| *d <= i64::MAX as u64) {
            Some(d) => Some(d),
            None => return Frame::error("ERR invalid expire time in 'restore' command"),
        },
    };
    // A replica keeps what its master sends even when the deadline has passed: the master's
    // `DEL` removes it (Redis's `checkAlreadyExpired` is false on a replica).
    let expired = deadline.is_some_and(|d| d <= ctx.now_ms) && ctx.lazy_delete();
    let wakes = value.wakes_blocked_clients();
    // Checked again under the key's lock: another client may have created it since.
    // `Ok(true)`: a live key was there (deleted, or replaced).
    let outcome = ctx.update_key(key, |current| match (current, o.replace, expired) {
        (Some(_), false, _) => (Update::Keep, Err(busy_key())),
        (Some(_), true, true) => (Update::Remove, Ok(true)),
        (None, _, true) => (Update::Keep, Ok(false)),
        (current, _, false) => (
            Update::Put(Entry::with_expiry(value, deadline)),
            Ok(current.is_some()),
        ),
    });
    let deleted = match outcome {
        Ok(deleted) => deleted,
        Err(e) => return e,
    };
    if deleted && !expired {
        // `REPLACE` deletes the key and adds it anew, as Redis does: a `new` event.
        ctx.db().note_created(key);
    }
    if expired {
        if deleted {
            ctx.notify(crate::notify::GENERIC, "del", key);
            ctx.propagate_as(vec![vec![Bytes::from_static(b"DEL"), key.clone()]]);
        }
        return Frame::ok();
    }
    ctx.notify(crate::notify::GENERIC, "restore", key);
    if let Some(e) = ctx.db().get(key, 0, false) {
        e.access
            .restore(o.idle_s, o.freq, ctx.now_ms, &ctx.shared.config.limits);
    }
    if wakes {
        ctx.db().signal_ready(key);
    }
    if let (Some(d), false) = (deadline, o.absttl) {
        // Replicas and the AOF get the absolute deadline, `ABSTTL` appended as Redis appends it.
        let mut propagated = args.to_vec();
        propagated[2] = Bytes::from(d.to_string());
        propagated.push(Bytes::from_static(b"ABSTTL"));
        ctx.propagate_as(vec![propagated]);
    }
    Frame::ok()
}
