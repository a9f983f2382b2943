//! `XACK` and `XPENDING`: acknowledging delivered entries, and listing those still pending.
//!
//! `XACK key group id...` removes the IDs from the group's pending entries list (and from the
//! consumers holding them) and answers how many were pending; every ID is checked first, so a
//! bad one acknowledges nothing. A missing key or group acknowledges nothing either.
//!
//! `XPENDING key group` sums the list up: how many entries, the lowest and highest ID, and how
//! many each consumer holds. `XPENDING key group [IDLE ms] start end count [consumer]` lists
//! them: ID, consumer, milliseconds since the last delivery, and deliveries so far.

use bytes::Bytes;

use super::stream_args::{parse_strict_id, read_stream, stream_of, write_stream};
use super::stream_group::no_key_or_group;
use super::stream_range::interval_id;
use super::util::{is, parse_i64, syntax_error};
use super::{spec, CommandSpec, Ctx, FAST, READONLY, WRITE};
use crate::frame::Frame;
use crate::stream::StreamId;
use crate::stream_group::Group;

/// `XACK` and `XPENDING`.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec("xack", -4, WRITE | FAST, 1, 1, 1, xack),
    spec("xpending", -3, READONLY, 1, 1, 1, xpending),
];

/// `XACK key group id [id ...]`: how many of the IDs were pending.
fn xack(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let key = &args[1];
    let mut e = match write_stream(ctx, key) {
        Ok(Some(e)) => e,
        Ok(None) => return Frame::Integer(0),
        Err(err) => return err,
    };
    if !stream_of(&mut e).groups().contains_key(&args[2]) {
        return Frame::Integer(0);
    }
    let ids = match args[3..]
        .iter()
        .map(|a| parse_strict_id(a))
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(ids) => ids,
        Err(err) => return err,
    };
    let Some(g) = stream_of(&mut e).groups_mut().get_mut(&args[2]) else {
        return Frame::Integer(0);
    };
    let acked = ids.into_iter().filter(|&id| g.remove(id)).count();
    drop(e);
    if acked > 0 {
        ctx.modified(key);
    }
    Frame::Integer(acked as i64)
}

/// The arguments of the extended form.
struct Extended {
    min_idle: i64,
    start: StreamId,
    end: StreamId,
    count: usize,
    consumer: Option<Bytes>,
}

/// Parses `[IDLE ms] start end count [consumer]` (from `args[3]`), in Redis's order of
/// checks: the count before the IDs.
fn parse_extended(args: &[Bytes]) -> Result<Extended, Frame> {
    let mut at = 3;
    let mut min_idle = 0;
    if is(&args[3], "idle") {
        min_idle = parse_i64(&args[4])?;
        if args.len() < 8 {
            return Err(syntax_error());
        }
        at += 2;
    }
    let count = parse_i64(&args[at + 2])?.max(0) as usize;
    let (start, start_ex) = interval_id(&args[at], 0)?;
    let start = if start_ex {
        start
            .next()
            .ok_or_else(|| Frame::error("ERR invalid start ID for the interval"))?
    } else {
        start
    };
    let (end, end_ex) = interval_id(&args[at + 1], u64::MAX)?;
    let end = if end_ex {
        end.prev()
            .ok_or_else(|| Frame::error("ERR invalid end ID for the interval"))?
    } else {
        end
    };
    Ok(Extended {
        min_idle,
        start,
        end,
        count,
        consumer: args.get(at + 3).cloned(),
    })
}

/// The summary form's reply.
fn summary(g: &Group) -> Frame {
    let (Some((first, _)), Some((last, _))) = (g.pel.first_key_value(), g.pel.last_key_value())
    else {
        return Frame::Array(vec![
            Frame::Integer(0),
            Frame::Null,
            Frame::Null,
            Frame::NullArray,
        ]);
    };
    let holders = g
        .consumers
        .iter()
        .filter(|(_, c)| !c.pel.is_empty())
        .map(|(name, c)| {
            Frame::Array(vec![
                Frame::Bulk(name.clone()),
                Frame::Bulk(Bytes::from(c.pel.len().to_string())),
            ])
        })
        .collect();
    Frame::Array(vec![
        Frame::Integer(g.pel.len() as i64),
        Frame::Bulk(first.to_bytes()),
        Frame::Bulk(last.to_bytes()),
        Frame::Array(holders),
    ])
}

/// The extended form's reply.
fn extended(g: &Group, x: &Extended, now: u64) -> Frame {
    let ids: Box<dyn Iterator<Item = &StreamId>> = match &x.consumer {
        Some(name) => match g.consumers.get(name) {
            Some(c) => Box::new(c.pel.range(x.start..)),
            None => return Frame::Array(Vec::new()),
        },
        None => Box::new(g.pel.range(x.start..).map(|(id, _)| id)),
    };
    let mut out = Vec::new();
    if x.start > x.end {
        return Frame::Array(out);
    }
    for id in ids.take_while(|&&id| id <= x.end) {
        if out.len() >= x.count {
            break;
        }
        let Some(n) = g.pel.get(id) else { continue };
        let idle = now as i64 - n.delivery_time as i64;
        if x.min_idle != 0 && idle < x.min_idle {
            continue;
        }
        out.push(Frame::Array(vec![
            Frame::Bulk(id.to_bytes()),
            Frame::Bulk(n.consumer.clone()),
            Frame::Integer(idle.max(0)),
            Frame::Integer(n.delivery_count as i64),
        ]));
    }
    Frame::Array(out)
}

/// `XPENDING key group [[IDLE ms] start end count [consumer]]`.
fn xpending(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    if args.len() != 3 && !(6..=9).contains(&args.len()) {
        return syntax_error();
    }
    let x = if args.len() >= 6 {
        match parse_extended(args) {
            Ok(x) => Some(x),
            Err(e) => return e,
        }
    } else {
        None
    };
    let now = ctx.now_ms;
    let reply = read_stream(ctx, &args[1], |s| {
        let g = s.groups().get(&args[2])?;
        Some(match &x {
            None => summary(g),
            Some(x) => extended(g, x, now),
        })
    });
    match reply {
        Ok(Some(Some(f))) => f,
        Ok(_) => no_key_or_group(&args[1], &args[2]),
        Err(e) => e,
    }
}
