//! `XINFO STREAM|GROUPS|CONSUMERS|HELP`: what a stream holds and remembers.
//!
//! `XINFO STREAM key` gives the length, the node counts, the last ID, the greatest deleted
//! ID, `entries-added`, the first ID on record, the number of groups, and the first and last
//! entries; `FULL [COUNT n]` gives up to `n` entries (10 by default, all for 0) and the groups
//! in full instead. latchkey has no consumer groups yet: `GROUPS` is always empty and
//! `CONSUMERS` answers Redis's `NOGROUP` error.
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
        m.push((bulk("groups"), Frame::Array(Vec::new())));
    } else {
        m.push((bulk("groups"), Frame::Integer(0)));
        let (first, last) = match s.edges() {
            Some(((fi, ff), (li, lf))) => (entry_frame(*fi, ff), entry_frame(*li, lf)),
            None => (Frame::Null, Frame::Null),
        };
        m.push((bulk("first-entry"), first));
        m.push((bulk("last-entry"), last));
    }
    Frame::Map(m)
}

fn xinfo(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let sub = lower(&args[1]);
    match (sub.as_str(), args.len()) {
        ("help", 2) => Frame::Array(HELP.iter().map(|l| Frame::simple(l)).collect()),
        ("help", _) => arity_error("xinfo|help"),
        ("stream", n) if n >= 3 => stream_info(ctx, args),
        ("stream", _) => arity_error("xinfo|stream"),
        ("groups", 3) => match read_stream(ctx, &args[2], |_| ()) {
            Ok(Some(())) => Frame::Array(Vec::new()),
            Ok(None) => Frame::error("ERR no such key"),
            Err(e) => e,
        },
        ("groups", _) => arity_error("xinfo|groups"),
        ("consumers", 4) => match read_stream(ctx, &args[2], |_| ()) {
            Ok(Some(())) => Frame::error(format!(
                "NOGROUP No such consumer group '{}' for key name '{}'",
                String::from_utf8_lossy(&args[3]),
                String::from_utf8_lossy(&args[2])
            )),
            Ok(None) => Frame::error("ERR no such key"),
            Err(e) => e,
        },
        ("consumers", _) => arity_error("xinfo|consumers"),
        _ => unknown_subcommand(args, "xinfo"),
    }
}
