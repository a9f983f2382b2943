//! `XINFO STREAM|GROUPS|CONSUMERS|HELP`: what a stream holds and remembers.
//!
//! `XINFO STREAM key` gives the length, the node counts, the last ID, the greatest deleted
//! ID, `entries-added`, the first ID on record, the number of groups, and the first and last
//! entries; `FULL [COUNT n]` gives up to `n` entries (10 by default, all for 0) and the groups
//! in full instead (each group with up to `n` of its pending entries, each consumer with up to
//! `n` of its own). `GROUPS` lists the groups (consumers, pending entries, last delivered ID,
//! `entries-read`, lag), `CONSUMERS` a group's consumers (pending entries, idle time).
//!
//! `radix-tree-nodes` counts the inner nodes of Redis's radix tree, which latchkey does not
//! build: it answers one more than the number of listpack nodes (Redis's count for one node
//! and for none), an estimate past that.

use bytes::Bytes;

use super::stream_args::{entries_frame, entry_frame, read_stream};
use super::util::{lower, parse_i64, subcommand_syntax_error, unknown_subcommand};
use super::{arity_error, spec, CommandSpec, Ctx, CONTAINER, READONLY};
use crate::command::WALKS_VALUE;
use crate::frame::Frame;
use crate::stream::{Stream, StreamId};
use crate::stream_group::{lag, Group, INVALID_ENTRIES_READ};

/// `XINFO`.
pub(crate) const COMMANDS: &[CommandSpec] = &[spec(
    "xinfo",
    -2,
    READONLY | CONTAINER | WALKS_VALUE,
    2,
    2,
    1,
    xinfo,
)];

const HELP: &[&str] = &[
    "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
    "HELP",
    "    Prints this help.",
];

fn bulk(s: &'static str) -> Frame {
    Frame::Bulk(Bytes::from_static(s.as_bytes()))
}

fn id(i: StreamId) -> Frame {
    Frame::Bulk(i.to_bytes())
}

/// The fields every `XINFO STREAM` reply opens with.
fn head(s: &Stream) -> Vec<(Frame, Frame)> {
    vec![
        (bulk("length"), Frame::Integer(s.len() as i64)),
        (
            bulk("radix-tree-keys"),
            Frame::Integer(s.node_count() as i64),
        ),
        (
            bulk("radix-tree-nodes"),
            Frame::Integer(s.node_count() as i64 + 1),
        ),
        (bulk("last-generated-id"), id(s.last_id())),
        (bulk("max-deleted-entry-id"), id(s.max_deleted())),
        (
            bulk("entries-added"),
            Frame::Integer(s.entries_added() as i64),
        ),
        (bulk("recorded-first-entry-id"), id(s.first_id())),
    ]
}

/// `XINFO STREAM key [FULL [COUNT n]]`. The key is looked up before the options are read,
/// as Redis does (a missing key is the error whatever the options say).
fn stream_info(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let reply = read_stream(ctx, &args[2], |s| stream_reply(s, args));
    match reply {
        Ok(Some(f)) => f,
        Ok(None) => Frame::error("ERR no such key"),
        Err(e) => e,
    }
}

fn stream_reply(s: &Stream, args: &[Bytes]) -> Frame {
    let opts = &args[3..];
    let (full, count) = match opts.len() {
        0 => (false, 0),
        1 | 3 if lower(&opts[0]) == "full" => {
            let mut count = 10usize;
            if opts.len() == 3 {
                if lower(&opts[1]) != "count" {
                    return subcommand_syntax_error(args, "xinfo");
                }
                match parse_i64(&opts[2]) {
                    Ok(n) if n < 0 => count = 10,
                    Ok(n) => count = n as usize,
                    Err(e) => return e,
                }
            }
            (true, count)
        }
        _ => return subcommand_syntax_error(args, "xinfo"),
    };
    let mut m = head(s);
    if full {
        let limit = if count == 0 { usize::MAX } else { count };
        let entries = s.range(StreamId::MIN, StreamId::MAX, false, limit);
        m.push((bulk("entries"), entries_frame(&entries)));
        let limit = if count == 0 { usize::MAX } else { count };
        let groups = s
            .groups()
            .iter()
            .map(|(name, g)| full_group(s, name, g, limit))
            .collect();
        m.push((bulk("groups"), Frame::Array(groups)));
    } else {
        m.push((bulk("groups"), Frame::Integer(s.groups().len() as i64)));
        let (first, last) = match s.edges() {
            Some(((fi, ff), (li, lf))) => (entry_frame(*fi, ff), entry_frame(*li, lf)),
            None => (Frame::Null, Frame::Null),
        };
        m.push((bulk("first-entry"), first));
        m.push((bulk("last-entry"), last));
    }
    Frame::Map(m)
}

/// `entries-read`: the count, or a null when it is unknown.
fn entries_read(g: &Group) -> Frame {
    match g.entries_read {
        INVALID_ENTRIES_READ => Frame::Null,
        n => Frame::Integer(n),
    }
}

/// The lag, or a null when it is unknown.
fn lag_frame(s: &Stream, g: &Group) -> Frame {
    lag(&s.counters(), g).map_or(Frame::Null, Frame::Integer)
}

/// One group as `XINFO STREAM ... FULL` gives it, with up to `limit` pending entries (for the
/// group and for each consumer).
fn full_group(s: &Stream, name: &Bytes, g: &Group, limit: usize) -> Frame {
    let pending = g
        .pel
        .iter()
        .take(limit)
        .map(|(id, n)| {
            Frame::Array(vec![
                id_frame(*id),
                Frame::Bulk(n.consumer.clone()),
                Frame::Integer(n.delivery_time as i64),
                Frame::Integer(n.delivery_count as i64),
            ])
        })
        .collect();
    let consumers = g
        .consumers
        .iter()
        .map(|(cname, c)| {
            let pending = c
                .pel
                .iter()
                .take(limit)
                .filter_map(|pid| g.pel.get(pid).map(|n| (pid, n)))
                .map(|(pid, n)| {
                    Frame::Array(vec![
                        id_frame(*pid),
                        Frame::Integer(n.delivery_time as i64),
                        Frame::Integer(n.delivery_count as i64),
                    ])
                })
                .collect();
            Frame::Map(vec![
                (bulk("name"), Frame::Bulk(cname.clone())),
                (bulk("seen-time"), Frame::Integer(c.seen_time as i64)),
                (bulk("pel-count"), Frame::Integer(c.pel.len() as i64)),
                (bulk("pending"), Frame::Array(pending)),
            ])
        })
        .collect();
    Frame::Map(vec![
        (bulk("name"), Frame::Bulk(name.clone())),
        (bulk("last-delivered-id"), id_frame(g.last_id)),
        (bulk("entries-read"), entries_read(g)),
        (bulk("lag"), lag_frame(s, g)),
        (bulk("pel-count"), Frame::Integer(g.pel.len() as i64)),
        (bulk("pending"), Frame::Array(pending)),
        (bulk("consumers"), Frame::Array(consumers)),
    ])
}

fn id_frame(i: StreamId) -> Frame {
    Frame::Bulk(i.to_bytes())
}

/// `XINFO GROUPS key`.
fn groups_reply(s: &Stream) -> Frame {
    Frame::Array(
        s.groups()
            .iter()
            .map(|(name, g)| {
                Frame::Map(vec![
                    (bulk("name"), Frame::Bulk(name.clone())),
                    (bulk("consumers"), Frame::Integer(g.consumers.len() as i64)),
                    (bulk("pending"), Frame::Integer(g.pel.len() as i64)),
                    (bulk("last-delivered-id"), id_frame(g.last_id)),
                    (bulk("entries-read"), entries_read(g)),
                    (bulk("lag"), lag_frame(s, g)),
                ])
            })
            .collect(),
    )
}

/// `XINFO CONSUMERS key group`, `None` when there is no such group.
fn consumers_reply(s: &Stream, group: &[u8], now: u64) -> Option<Frame> {
    let g = s.groups().get(group)?;
    Some(Frame::Array(
        g.consumers
            .iter()
            .map(|(name, c)| {
                Frame::Map(vec![
                    (bulk("name"), Frame::Bulk(name.clone())),
                    (bulk("pending"), Frame::Integer(c.pel.len() as i64)),
                    (
                        bulk("idle"),
                        Frame::Integer((now as i64 - c.seen_time as i64).max(0)),
                    ),
                ])
            })
            .collect(),
    ))
}

fn xinfo(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let sub = lower(&args[1]);
    match (sub.as_str(), args.len()) {
        ("help", 2) => Frame::Array(HELP.iter().map(|l| Frame::simple(l)).collect()),
        ("help", _) => arity_error("xinfo|help"),
        ("stream", n) if n >= 3 => stream_info(ctx, args),
        ("stream", _) => arity_error("xinfo|stream"),
        ("groups", 3) => match read_stream(ctx, &args[2], groups_reply) {
            Ok(Some(f)) => f,
            Ok(None) => Frame::error("ERR no such key"),
            Err(e) => e,
        },
        ("groups", _) => arity_error("xinfo|groups"),
        ("consumers", 4) => {
            match read_stream(ctx, &args[2], |s| consumers_reply(s, &args[3], ctx.now_ms)) {
                Ok(Some(Some(f))) => f,
                Ok(Some(None)) => super::stream_group::no_group(&args[2], &args[3]),
                Ok(None) => Frame::error("ERR no such key"),
                Err(e) => e,
            }
        }
        ("consumers", _) => arity_error("xinfo|consumers"),
        _ => unknown_subcommand(args, "xinfo"),
    }
}
