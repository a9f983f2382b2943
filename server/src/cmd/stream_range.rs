//! `XLEN`, `XRANGE` and `XREVRANGE`: reading a stream by length and by ID range.
//!
//! A range end is an ID (`ms` alone means the lowest sequence as a start, the highest as an
//! end), `-` or `+`, or, prefixed with `(`, an exclusive bound: `(5-3` as a start means from
//! the ID right after `5-3`. The B-tree finds the start in O(log n); the walk then goes as far
//! as `COUNT` allows.

use bytes::Bytes;

use super::stream_args::{entries_frame, parse_id, parse_strict_id, read_stream};
use super::util::{is, parse_i64, syntax_error};
use super::{spec, CommandSpec, Ctx, FAST, READONLY};
use crate::command::WALKS_VALUE;
use crate::frame::Frame;
use crate::stream::StreamId;

/// The range commands.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec("xlen", 2, READONLY | FAST, 1, 1, 1, xlen),
    spec("xrange", -4, READONLY | WALKS_VALUE, 1, 1, 1, xrange),
    spec("xrevrange", -4, READONLY | WALKS_VALUE, 1, 1, 1, xrevrange),
];

/// `XLEN key`: how many entries, 0 for a missing key.
fn xlen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    match read_stream(ctx, &args[1], |s| s.len()) {
        Ok(n) => Frame::Integer(n.unwrap_or(0) as i64),
        Err(e) => e,
    }
}

/// Parses one end of an interval: `(id` exclusive, else inclusive; `ms` alone takes
/// `missing_seq`. Returns the ID and whether it was exclusive.
pub(crate) fn interval_id(arg: &[u8], missing_seq: u64) -> Result<(StreamId, bool), Frame> {
    if arg.len() > 1 && arg[0] == b'(' {
        let id = parse_strict_id_with_seq(&arg[1..], missing_seq)?;
        Ok((id, true))
    } else {
        Ok((parse_id(arg, missing_seq)?, false))
    }
}

/// A strict ID (no `-`/`+`) whose missing sequence is `missing_seq`.
fn parse_strict_id_with_seq(arg: &[u8], missing_seq: u64) -> Result<StreamId, Frame> {
    if arg.contains(&b'-') {
        parse_strict_id(arg)
    } else {
        let id = parse_strict_id(arg)?;
        Ok(StreamId::new(id.ms, missing_seq))
    }
}

/// The inclusive bounds an interval's two arguments stand for, with Redis's errors for an
/// exclusive bound past either end of the ID space.
pub(crate) fn interval(start: &[u8], end: &[u8]) -> Result<(StreamId, StreamId), Frame> {
    let (mut s, ex) = interval_id(start, 0)?;
    if ex {
        s = s
            .next()
            .ok_or_else(|| Frame::error("ERR invalid start ID for the interval"))?;
    }
    let (mut e, ex) = interval_id(end, u64::MAX)?;
    if ex {
        e = e
            .prev()
            .ok_or_else(|| Frame::error("ERR invalid end ID for the interval"))?;
    }
    Ok((s, e))
}

fn range(ctx: &mut Ctx<'_>, args: &[Bytes], rev: bool) -> Frame {
    let (start_arg, end_arg) = if rev {
        (&args[3], &args[2])
    } else {
        (&args[2], &args[3])
    };
    let (start, end) = match interval(start_arg, end_arg) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let mut count: i64 = -1;
    let mut j = 4;
    while j < args.len() {
        if is(&args[j], "count") && j + 1 < args.len() {
            count = match parse_i64(&args[j + 1]) {
                Ok(n) => n.max(0),
                Err(e) => return e,
            };
            j += 2;
        } else {
            return syntax_error();
        }
    }
    let reply = read_stream(ctx, &args[1], |s| {
        if count == 0 {
            return Frame::NullArray;
        }
        let limit = if count < 0 {
            usize::MAX
        } else {
            count as usize
        };
        entries_frame(&s.range(start, end, rev, limit))
    });
    match reply {
        Ok(Some(f)) => f,
        Ok(None) => Frame::Array(Vec::new()),
        Err(e) => e,
    }
}

/// `XRANGE key start end [COUNT n]`: entries from `start` to `end`, oldest first.
fn xrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    range(ctx, args, false)
}

/// `XREVRANGE key end start [COUNT n]`: entries from `end` down to `start`, newest first.
fn xrevrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    range(ctx, args, true)
}
