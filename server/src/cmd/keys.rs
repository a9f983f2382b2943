//! Key-space commands: existence, deletion, type, iteration, renaming and expiry.
//!
//! Expiry is what makes a lock safe against a crashed holder: `PEXPIRE` and `PTTL` are what
//! lock libraries call to extend and inspect a lease.

use crate::notify::GENERIC;
use bytes::Bytes;

use super::util::{is, parse_i64, syntax_error};
use super::{spec, CommandSpec, Ctx, Written, EXCLUSIVE, FAST, MULTI_KEY, READONLY, WRITE};
use crate::codec::parse_int;
use crate::command::WALKS_KEYSPACE;
use crate::db::Update;
use crate::frame::Frame;
use crate::glob;

/// The key-space commands.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec("del", -2, WRITE | MULTI_KEY, 1, -1, 1, del),
    spec("unlink", -2, WRITE | FAST | MULTI_KEY, 1, -1, 1, del),
    spec("exists", -2, READONLY | FAST | MULTI_KEY, 1, -1, 1, exists),
    spec("touch", -2, READONLY | FAST | MULTI_KEY, 1, -1, 1, exists),
    spec("type", 2, READONLY | FAST, 1, 1, 1, type_cmd),
    spec("keys", 2, READONLY | WALKS_KEYSPACE, 0, 0, 0, keys),
    spec("scan", -2, READONLY | WALKS_KEYSPACE, 0, 0, 0, scan),
    spec(
        "randomkey",
        1,
        READONLY | WALKS_KEYSPACE,
        0,
        0,
        0,
        randomkey,
    ),
    spec("rename", 3, WRITE | EXCLUSIVE, 1, 2, 1, rename),
    spec("renamenx", 3, WRITE | FAST | EXCLUSIVE, 1, 2, 1, renamenx),
    spec("expire", -3, WRITE | FAST, 1, 1, 1, expire),
    spec("pexpire", -3, WRITE | FAST, 1, 1, 1, pexpire),
    spec("expireat", -3, WRITE | FAST, 1, 1, 1, expireat),
    spec("pexpireat", -3, WRITE | FAST, 1, 1, 1, pexpireat),
    spec("ttl", 2, READONLY | FAST, 1, 1, 1, ttl),
    spec("pttl", 2, READONLY | FAST, 1, 1, 1, pttl),
    spec("expiretime", 2, READONLY | FAST, 1, 1, 1, expiretime),
    spec("pexpiretime", 2, READONLY | FAST, 1, 1, 1, pexpiretime),
    spec("persist", 2, WRITE | FAST, 1, 1, 1, persist),
];

fn del(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let mut n = 0;
    for k in &args[1..] {
        // An expired key counts as absent; removing it still tidies the map.
        let live = ctx.db().contains(k, ctx.now_ms);
        if let Some(entry) = ctx.db().remove(k) {
            if live {
                // A big value is freed in the background (as `UNLINK` promises; `DEL` too).
                crate::lazyfree::free_entry(entry);
            } else {
                // An expired one, where expiry frees it (`lazyfree-lazy-expire`).
                crate::lazyfree::free_expired(entry, ctx.shared.config.limits.lazy_expire());
            }
            if live {
                n += 1;
                ctx.changed();
                ctx.notify(GENERIC, "del", k);
            } else if ctx.lazy_delete() {
                // Gone by expiry, not by this DEL: replicas learn it as an expiry.
                ctx.db().note_lazily_expired(k.clone());
            }
        }
    }
    Frame::Integer(n)
}

/// `EXISTS` and `TOUCH`: how many of the named keys exist (a key named twice counts twice).
fn exists(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let n = args[1..]
        .iter()
        .filter(|k| ctx.db().get(k, ctx.now_ms, ctx.lazy_delete()).is_some())
        .count();
    Frame::Integer(n as i64)
}

fn type_cmd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let name = ctx
        .db()
        .get(&args[1], ctx.now_ms, ctx.lazy_delete())
        .map_or("none", |e| e.value.type_name());
    Frame::simple(name)
}

fn keys(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let pattern = &args[1];
    let all = pattern.as_ref() == b"*";
    let keys = ctx
        .db()
        .keys(ctx.now_ms)
        .into_iter()
        .filter(|k| all || glob::matches(pattern, k, false));
    Frame::bulks(keys)
}

/// Picks a key at random: a random bucket of the table, then the first key from there (as
/// the eviction sampler does), so the cost does not grow with the number of keys. As Redis's
/// `dbRandomKey` does, a master deletes an expired key it picks (lazy expiry, propagated as a
/// `DEL`) and picks again, so each retry takes one expired key away for good; a replica,
/// which may not delete, gives up after [`RANDOMKEY_REPLICA_TRIES`] expired picks and returns
/// the last one, as Redis's replicas do.
fn randomkey(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Frame {
    let (now, lazy_delete) = (ctx.now_ms, ctx.lazy_delete());
    let db = ctx.db();
    let mut expired_picks = 0;
    loop {
        let Some((key, expired)) = crate::evict::random_key(db.map(), now) else {
            return Frame::Null;
        };
        if !expired {
            return Frame::Bulk(key);
        }
        if lazy_delete {
            db.expire_lazily(&key, now);
            continue;
        }
        expired_picks += 1;
        if expired_picks >= RANDOMKEY_REPLICA_TRIES {
            return Frame::Bulk(key);
        }
    }
}

/// How many expired keys `RANDOMKEY` picks on a replica before it returns one anyway (Redis's
/// `maxtries`).
const RANDOMKEY_REPLICA_TRIES: usize = 100;

/// The options shared by `SCAN`, `HSCAN` and friends.
#[derive(Debug, Default)]
pub(crate) struct ScanOptions {
    /// `MATCH pattern`.
    pub pattern: Option<Bytes>,
    /// `COUNT n` (default 10).
    pub count: usize,
    /// `TYPE name` (`SCAN` only).
    pub type_name: Option<String>,
}

/// Parses `cursor [MATCH p] [COUNT n] [TYPE t]` starting at `args[1]`, the cursor.
pub(crate) fn parse_scan(args: &[Bytes], allow_type: bool) -> Result<(u64, ScanOptions), Frame> {
    // Like C's strtoul, which Redis uses: a leading sign is accepted and `-1` wraps around.
    let cursor = std::str::from_utf8(&args[1])
        .ok()
        .and_then(|s| {
            let digits = s.strip_prefix('+').unwrap_or(s);
            match digits.strip_prefix('-') {
                Some(d) => d.parse::<u64>().ok().map(|v| v.wrapping_neg()),
                None => digits.parse::<u64>().ok(),
            }
        })
        .ok_or_else(|| Frame::error("ERR invalid cursor"))?;
    let mut opts = ScanOptions {
        count: 10,
        ..Default::default()
    };
    let mut i = 2;
    while i < args.len() {
        let Some(v) = args.get(i + 1) else {
            return Err(syntax_error());
        };
        if is(&args[i], "count") {
            let n = parse_i64(v)?;
            if n < 1 {
                return Err(syntax_error());
            }
            opts.count = n as usize;
        } else if is(&args[i], "match") {
            opts.pattern = Some(v.clone());
        } else if allow_type && is(&args[i], "type") {
            opts.type_name = Some(String::from_utf8_lossy(v).to_ascii_lowercase());
        } else {
            return Err(syntax_error());
        }
        i += 2;
    }
    Ok((cursor, opts))
}

/// `SCAN`: one page of keys from the keyspace's cursor (see [`crate::scan`]), its cost
/// bounded by `COUNT` rather than by the size of the database. As in Redis, `COUNT` is how
/// many keys to look at; `MATCH` and `TYPE` filter what was looked at, so a page can come back
/// short or empty with the iteration not yet over.
fn scan(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let (cursor, opts) = match parse_scan(args, true) {
        Ok(x) => x,
        Err(e) => return e,
    };
    let now = ctx.now_ms;
    let page = crate::scan::scan(ctx.db().map(), cursor, opts.count, |k, e| {
        (!e.is_expired(now)).then(|| (crate::db::key_bytes(k), e.value.type_name()))
    });
    let keys: Vec<Bytes> = page
        .items
        .into_iter()
        .filter(|(_, t)| opts.type_name.as_deref().is_none_or(|want| want == *t))
        .map(|(k, _)| k)
        .filter(|k| {
            opts.pattern
                .as_ref()
                .is_none_or(|p| glob::matches(p, k, false))
        })
        .collect();
    Frame::Array(vec![
        Frame::Bulk(Bytes::from(page.next.to_string())),
        Frame::bulks(keys),
    ])
}

fn rename_generic(ctx: &mut Ctx<'_>, args: &[Bytes], nx: bool) -> Frame {
    let (src, dst) = (&args[1], &args[2]);
    let db = ctx.db();
    if db.get(src, ctx.now_ms, ctx.lazy_delete()).is_none() {
        return Frame::error("ERR no such key");
    }
    if src == dst {
        return if nx { Frame::Integer(0) } else { Frame::ok() };
    }
    if nx && db.contains(dst, ctx.now_ms) {
        return Frame::Integer(0);
    }
    // Moved, not copied (RENAME holds the gate exclusively: nothing changed `src` since the
    // check); a value `dst` held is freed off the hot path when big.
    let Some(entry) = db.remove(src) else {
        return Frame::error("ERR no such key");
    };
    let blockable = entry.value.wakes_blocked_clients();
    // A stream wakes all its readers (each reads the same entries), a list or sorted set the
    // first client in line.
    let readers = matches!(entry.value, crate::db::Value::Stream(_));
    // Redis deletes a destination it replaces and adds the key anew (a `new` event either way).
    if db.insert(dst.clone(), entry) {
        db.note_created(dst);
    }
    ctx.notify(GENERIC, "rename_from", src);
    ctx.notify(GENERIC, "rename_to", dst);
    if readers {
        db.signal_all(dst);
    } else if blockable {
        // A list or sorted set moved into place serves the clients blocked on its new name
        // (`BLPOP`, `BZPOPMIN`), as a push would (Redis's `dbAdd` signals both).
        db.signal_ready(dst);
    }
    ctx.changed();
    if nx {
        Frame::Integer(1)
    } else {
        Frame::ok()
    }
}

fn rename(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    rename_generic(ctx, args, false)
}

fn renamenx(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    rename_generic(ctx, args, true)
}

/// `EXPIRE`, `PEXPIRE`, `EXPIREAT`, `PEXPIREAT` with `NX XX GT LT`, as Redis 7 defines them.
fn expire_generic(ctx: &mut Ctx<'_>, args: &[Bytes], unit_ms: i64, absolute: bool) -> Frame {
    let name = super::util::lower(&args[0]);
    let invalid = || Frame::error(format!("ERR invalid expire time in '{name}' command"));
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in &args[3..] {
        if is(opt, "nx") {
            nx = true;
        } else if is(opt, "xx") {
            xx = true;
        } else if is(opt, "gt") {
            gt = true;
        } else if is(opt, "lt") {
            lt = true;
        } else {
            return Frame::error(format!(
                "ERR Unsupported option {}",
                String::from_utf8_lossy(opt)
            ));
        }
    }
    if nx && (xx || gt || lt) {
        return Frame::error("ERR NX and XX, GT or LT options at the same time are not compatible");
    }
    if gt && lt {
        return Frame::error("ERR GT and LT options at the same time are not compatible");
    }
    let Some(mut when) = parse_int(&args[2]) else {
        return super::util::not_integer();
    };
    if unit_ms == 1000 {
        if !(i64::MIN / 1000..=i64::MAX / 1000).contains(&when) {
            return invalid();
        }
        when *= 1000;
    }
    if !absolute {
        let base = ctx.now_ms as i64;
        if when > i64::MAX - base {
            return invalid();
        }
        when += base;
    }
    let is_replica = ctx.shared.is_replica();
    let now = ctx.now_ms;
    // Checked and changed in one step: the TTL the options compare against is the one changed.
    let reply = ctx.update_key(&args[1], |current| {
        let Some(current) = current.map(|e| e.expires_at()) else {
            return (Update::Keep, Frame::Integer(0));
        };
        // A key without a TTL counts as an infinite TTL for GT and LT.
        let refused = (nx && current.is_some())
            || (xx && current.is_none())
            || (gt && current.is_none_or(|c| when <= c as i64))
            || (lt && current.is_some_and(|c| when >= c as i64));
        if refused {
            (Update::Keep, Frame::Integer(0))
        } else if when <= now as i64 && !is_replica {
            // A deadline already in the past deletes the key (and replicates as a DEL).
            (Update::Remove, Frame::Integer(1))
        } else {
            (Update::Expire(Some(when.max(0) as u64)), Frame::Integer(1))
        }
    });
    match ctx.last_update {
        Written::Expire => ctx.notify(GENERIC, "expire", &args[1]),
        Written::Removed => ctx.notify(GENERIC, "del", &args[1]),
        Written::Put | Written::Nothing => {}
    }
    reply
}

fn expire(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    expire_generic(ctx, args, 1000, false)
}

fn pexpire(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    expire_generic(ctx, args, 1, false)
}

fn expireat(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    expire_generic(ctx, args, 1000, true)
}

fn pexpireat(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    expire_generic(ctx, args, 1, true)
}

/// `TTL`, `PTTL`, `EXPIRETIME`, `PEXPIRETIME`: -2 for a missing key, -1 for no TTL.
fn ttl_generic(ctx: &mut Ctx<'_>, key: &[u8], in_ms: bool, absolute: bool) -> Frame {
    let Some(expires_at) = ctx
        .db()
        .get(key, ctx.now_ms, ctx.lazy_delete())
        .map(|e| e.expires_at())
    else {
        return Frame::Integer(-2);
    };
    let Some(at) = expires_at else {
        return Frame::Integer(-1);
    };
    let v = if absolute {
        at as i128
    } else {
        (at as i128 - ctx.now_ms as i128).max(0)
    };
    let v = if in_ms { v } else { (v + 500) / 1000 };
    Frame::Integer(v as i64)
}

fn ttl(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    ttl_generic(ctx, &args[1], false, false)
}

fn pttl(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    ttl_generic(ctx, &args[1], true, false)
}

fn expiretime(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    ttl_generic(ctx, &args[1], false, true)
}

fn pexpiretime(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    ttl_generic(ctx, &args[1], true, true)
}

fn persist(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let reply = ctx.update_key(&args[1], |current| {
        match current.and_then(|e| e.expires_at()) {
            Some(_) => (Update::Expire(None), Frame::Integer(1)),
            None => (Update::Keep, Frame::Integer(0)),
        }
    });
    if ctx.last_update == Written::Expire {
        ctx.notify(GENERIC, "persist", &args[1]);
    }
    reply
}
