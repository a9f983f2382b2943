//! `XCLAIM` and `XAUTOCLAIM`: taking pending entries over from another consumer (one that
//! stopped, say) once they have been idle long enough.
//!
//! `XCLAIM key group consumer min-idle id... [IDLE ms] [TIME ms] [RETRYCOUNT n] [FORCE]
//! [JUSTID] [LASTID id]` claims the listed IDs; `XAUTOCLAIM key group consumer min-idle start
//! [COUNT n] [JUSTID]` walks the pending entries from `start` and claims up to `COUNT` (100 by
//! default) of them, looking at no more than ten times that many, and answers where to go on
//! from. A pending entry whose stream entry was deleted is dropped from the list instead
//! (`XAUTOCLAIM` names them). A claim counts as a delivery unless `JUSTID` says otherwise.
//!
//! Each claim reaches replicas and the AOF as the `XCLAIM ... FORCE JUSTID LASTID` that
//! recreates the pending entry exactly (Redis's `streamPropagateXCLAIM`), between `MULTI` and
//! `EXEC` when there are several; a `LASTID` that moved the group with nothing claimed goes as
//! `XGROUP SETID`.

use bytes::Bytes;

use super::stream_args::{entry_frame, parse_strict_id, stream_of, write_stream};
use super::stream_group::{as_one_step, no_key_or_group, setid_effect, xclaim_effect};
use super::stream_range::interval_id;
use super::util::{is, parse_i64, syntax_error};
use super::{spec, CommandSpec, Ctx, FAST, WRITE};
use crate::frame::Frame;
use crate::notify::STREAM;
use crate::stream::StreamId;
use crate::stream_group::Group;

/// `XCLAIM` and `XAUTOCLAIM`.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec("xclaim", -6, WRITE | FAST, 1, 1, 1, xclaim),
    spec("xautoclaim", -6, WRITE | FAST, 1, 1, 1, xautoclaim),
];

/// The most `XAUTOCLAIM`'s `COUNT` may be (Redis's bound, so that ten times it fits).
const MAX_AUTOCLAIM_COUNT: i64 = i64::MAX / 16;

/// Looks up (refreshing its seen time) or creates the claiming consumer, once per command;
/// a creation is notified.
fn claimer(ctx: &Ctx<'_>, g: &mut Group, name: &Bytes, key: &[u8], now: u64, done: &mut bool) {
    if *done {
        return;
    }
    *done = true;
    let (c, created) = g.consumer(name, now);
    c.seen_time = now;
    if created {
        ctx.notify(STREAM, "xgroup-createconsumer", key);
    }
}

/// What `XCLAIM`'s options said.
struct ClaimOptions {
    delivery_time: Option<i64>,
    retry_count: Option<i64>,
    force: bool,
    justid: bool,
    last_id: Option<StreamId>,
}

/// Parses `XCLAIM`'s options from `args[j]` on.
fn parse_claim_options(args: &[Bytes], mut j: usize, now: i64) -> Result<ClaimOptions, Frame> {
    let mut o = ClaimOptions {
        delivery_time: None,
        retry_count: None,
        force: false,
        justid: false,
        last_id: None,
    };
    let int = |a: &[u8], what: &str| {
        parse_i64(a)
            .map_err(|_| Frame::error(format!("ERR Invalid {what} option argument for XCLAIM")))
    };
    while j < args.len() {
        let more = j + 1 < args.len();
        let opt = &args[j];
        if is(opt, "force") {
            o.force = true;
        } else if is(opt, "justid") {
            o.justid = true;
        } else if is(opt, "idle") && more {
            j += 1;
            o.delivery_time = Some(now.wrapping_sub(int(&args[j], "IDLE")?));
        } else if is(opt, "time") && more {
            j += 1;
            o.delivery_time = Some(int(&args[j], "TIME")?);
        } else if is(opt, "retrycount") && more {
            j += 1;
            o.retry_count = Some(int(&args[j], "RETRYCOUNT")?);
        } else if is(opt, "lastid") && more {
            j += 1;
            o.last_id = Some(parse_strict_id(&args[j])?);
        } else {
            return Err(Frame::error(format!(
                "ERR Unrecognized XCLAIM option '{}'",
                String::from_utf8_lossy(opt)
            )));
        }
        j += 1;
    }
    Ok(o)
}

fn xclaim(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let (key, group, name) = (&args[1], &args[2], &args[3]);
    let mut e = match write_stream(ctx, key) {
        Ok(Some(e)) => e,
        Ok(None) => return no_key_or_group(key, group),
        Err(err) => return err,
    };
    if !stream_of(&mut e).groups().contains_key(group) {
        return no_key_or_group(key, group);
    }
    let Ok(min_idle) = parse_i64(&args[4]) else {
        return Frame::error("ERR Invalid min-idle-time argument for XCLAIM");
    };
    let min_idle = min_idle.max(0);
    let mut j = 5;
    let mut ids = Vec::new();
    while j < args.len() {
        match parse_strict_id(&args[j]) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let now = ctx.now_ms as i64;
    let o = match parse_claim_options(args, j, now) {
        Ok(o) => o,
        Err(err) => return err,
    };
    // A delivery time before the epoch or in the future is taken as now, as Redis does.
    let delivery_time = match o.delivery_time {
        Some(t) if (0..=now).contains(&t) => t as u64,
        _ => now as u64,
    };
    let (entries, groups) = stream_of(&mut e).entries_and_groups();
    let g = groups.get_mut(group).expect("the group was just found");
    let mut effects = Vec::new();
    let mut moved = false;
    if let Some(last) = o.last_id {
        if last > g.last_id {
            g.last_id = last;
            moved = true;
        }
    }
    let mut replies = Vec::new();
    let mut seen = false;
    for id in ids {
        let pending = g.pel.get(&id).cloned();
        let Some(fields) = entries.get(&id) else {
            // The entry is gone: its pending entry goes too.
            if let Some(n) = pending {
                effects.push(xclaim_effect(key, group, id, &n, g.last_id));
                g.remove(id);
                moved = false;
            }
            continue;
        };
        if pending.is_none() && !o.force {
            continue;
        }
        if let Some(n) = &pending {
            let idle = now - n.delivery_time as i64;
            if min_idle != 0 && idle < min_idle {
                continue;
            }
        }
        claimer(ctx, g, name, key, now as u64, &mut seen);
        let last_id = g.last_id;
        let n = g.assign(id, name);
        n.delivery_time = delivery_time;
        match o.retry_count {
            Some(r) if r >= 0 => n.delivery_count = r as u64,
            _ if !o.justid => n.delivery_count += 1,
            _ => {}
        }
        effects.push(xclaim_effect(key, group, id, n, last_id));
        moved = false;
        replies.push(if o.justid {
            Frame::Bulk(id.to_bytes())
        } else {
            entry_frame(id, fields)
        });
    }
    if moved {
        effects.push(setid_effect(key, group, g));
    }
    drop(e);
    if !effects.is_empty() {
        ctx.changed();
        let nested = ctx.in_exec || ctx.in_script;
        ctx.propagate_as(as_one_step(effects, nested));
    }
    Frame::Array(replies)
}

fn xautoclaim(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let (key, group, name) = (&args[1], &args[2], &args[3]);
    let Ok(min_idle) = parse_i64(&args[4]) else {
        return Frame::error("ERR Invalid min-idle-time argument for XAUTOCLAIM");
    };
    let min_idle = min_idle.max(0);
    let start = match interval_id(&args[5], 0) {
        Ok((id, false)) => id,
        Ok((id, true)) => match id.next() {
            Some(id) => id,
            None => return Frame::error("ERR invalid start ID for the interval"),
        },
        Err(err) => return err,
    };
    let mut count: i64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < args.len() {
        let more = j + 1 < args.len();
        if is(&args[j], "count") && more {
            match parse_i64(&args[j + 1]) {
                Ok(n) if (1..=MAX_AUTOCLAIM_COUNT).contains(&n) => count = n,
                _ => return Frame::error("ERR COUNT must be > 0"),
            }
            j += 1;
        } else if is(&args[j], "justid") {
            justid = true;
        } else {
            return syntax_error();
        }
        j += 1;
    }
    let mut e = match write_stream(ctx, key) {
        Ok(Some(e)) => e,
        Ok(None) => return no_key_or_group(key, group),
        Err(err) => return err,
    };
    let (entries, groups) = stream_of(&mut e).entries_and_groups();
    let Some(g) = groups.get_mut(group) else {
        return no_key_or_group(key, group);
    };
    let now = ctx.now_ms;
    let mut attempts = count.saturating_mul(10);
    let mut left = count;
    let mut cursor = Some(start);
    let mut claimed = Vec::new();
    let mut deleted = Vec::new();
    let mut effects = Vec::new();
    let mut seen = false;
    while attempts > 0 && left > 0 {
        attempts -= 1;
        let Some(from) = cursor else { break };
        let Some((&id, n)) = g.pel.range(from..).next() else {
            cursor = None;
            break;
        };
        cursor = id.next();
        let Some(fields) = entries.get(&id) else {
            effects.push(xclaim_effect(key, group, id, n, g.last_id));
            g.remove(id);
            deleted.push(Frame::Bulk(id.to_bytes()));
            left -= 1;
            continue;
        };
        if min_idle != 0 && (now as i64 - n.delivery_time as i64) < min_idle {
            continue;
        }
        claimer(ctx, g, name, key, now, &mut seen);
        let last_id = g.last_id;
        let n = g.assign(id, name);
        n.delivery_time = now;
        if !justid {
            n.delivery_count += 1;
        }
        effects.push(xclaim_effect(key, group, id, n, last_id));
        claimed.push(if justid {
            Frame::Bulk(id.to_bytes())
        } else {
            entry_frame(id, fields)
        });
        left -= 1;
    }
    // Where the next call goes on from: the pending entry after the last one looked at.
    let next = cursor
        .and_then(|c| g.pel.range(c..).next().map(|(id, _)| *id))
        .unwrap_or(StreamId::MIN);
    drop(e);
    if !effects.is_empty() {
        ctx.changed();
        let nested = ctx.in_exec || ctx.in_script;
        ctx.propagate_as(as_one_step(effects, nested));
    }
    Frame::Array(vec![
        Frame::Bulk(next.to_bytes()),
        Frame::Array(claimed),
        Frame::Array(deleted),
    ])
}
