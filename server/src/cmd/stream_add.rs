//! `XADD` and `XTRIM`: appending to a stream and cutting it down, with the trimming options
//! they share (`MAXLEN|MINID [=|~] threshold [LIMIT count]`).
//!
//! Neither command's effect follows from its arguments alone: `XADD *` takes the clock, and
//! `~` trims whole nodes only, as far as `LIMIT` lets it. So, like Redis, they propagate with
//! the generated ID written out and an approximate trim rewritten as the exact one it turned
//! out to be (`MAXLEN = <length left>` or `MINID = <first ID left>`), which a replica or the
//! AOF replays to the same stream. A replica (and the AOF) ignores `LIMIT`, as Redis does for
//! its master.

use crate::notify::STREAM;
use bytes::Bytes;

use super::stream_args::{parse_id_with, parse_strict_id, stream_of, write_stream};
use super::util::{is, parse_i64, syntax_error};
use super::{spec, CommandSpec, Ctx, DENYOOM, FAST, WRITE};
use crate::command::arity_error;
use crate::command::WALKS_VALUE;
use crate::db::Value;
use crate::frame::Frame;
use crate::stream::{Stream, StreamId, Trim};

/// `XADD` and `XTRIM`.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec("xadd", -5, WRITE | DENYOOM | FAST, 1, 1, 1, xadd),
    spec("xtrim", -4, WRITE | WALKS_VALUE, 1, 1, 1, xtrim),
];

/// What the options before `XADD`'s ID (or all of `XTRIM`'s) said.
struct AddTrimArgs {
    trim: Option<Trim>,
    approx: bool,
    /// At most this many entries trimmed (0: no bound).
    limit: u64,
    /// Where the trim threshold is in the arguments, to rewrite it for propagation.
    threshold_at: usize,
    no_mkstream: bool,
    /// `XADD`'s ID: `None` for `*`; `(ms, None)` for `ms-*`.
    id: Option<(u64, Option<u64>)>,
    /// Where the ID (or `*`) is.
    id_at: usize,
}

fn both_strategies() -> Frame {
    Frame::error("ERR syntax error, MAXLEN and MINID options at the same time are not compatible")
}

/// Parses the options from `args[2]` on, in Redis's order of checks.
fn parse(ctx: &Ctx<'_>, args: &[Bytes], xadd: bool) -> Result<AddTrimArgs, Frame> {
    let mut a = AddTrimArgs {
        trim: None,
        approx: false,
        limit: 0,
        threshold_at: 0,
        no_mkstream: false,
        id: None,
        id_at: 0,
    };
    let mut limit_given = false;
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = &args[i];
        if xadd && &opt[..] == b"*" {
            a.id_at = i;
            break;
        } else if (is(opt, "maxlen") || is(opt, "minid")) && more > 0 {
            if a.trim.is_some() {
                return Err(both_strategies());
            }
            a.approx = false;
            let next = &args[i + 1][..];
            if more >= 2 && next == b"~" {
                a.approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            if is(opt, "maxlen") {
                let n = parse_i64(&args[i + 1])?;
                if n < 0 {
                    return Err(Frame::error("ERR The MAXLEN argument must be >= 0."));
                }
                a.trim = Some(Trim::MaxLen(n as u64));
            } else {
                a.trim = Some(Trim::MinId(parse_strict_id(&args[i + 1])?));
            }
            i += 1;
            a.threshold_at = i;
        } else if is(opt, "limit") && more > 0 {
            let n = parse_i64(&args[i + 1])?;
            if n < 0 {
                return Err(Frame::error("ERR The LIMIT argument must be >= 0."));
            }
            a.limit = n as u64;
            limit_given = true;
            i += 1;
        } else if xadd && is(opt, "nomkstream") {
            a.no_mkstream = true;
        } else if xadd {
            let p = parse_id_with(opt, 0, true, true)?;
            a.id = Some((p.ms, p.seq));
            a.id_at = i;
            break;
        } else {
            return Err(syntax_error());
        }
        i += 1;
    }
    if a.limit != 0 && a.trim.is_none() {
        return Err(Frame::error(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && a.trim.is_none() {
        return Err(Frame::error(
            "ERR syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    if ctx.client.is_replication_link {
        a.limit = 0;
    } else if limit_given {
        if !a.approx {
            return Err(Frame::error(
                "ERR syntax error, LIMIT cannot be used without the special ~ option",
            ));
        }
    } else if a.approx {
        // Redis bounds an unlimited `~` trim to a hundred nodes' worth of entries (10000
        // when nodes are unbounded, a million at most).
        let per_node = ctx.shared.config.stream_node_limits().max_entries;
        a.limit = match per_node.saturating_mul(100) {
            0 => 10_000,
            n => n.min(1_000_000),
        };
    }
    if xadd && a.id_at == 0 {
        // The options ran to the end without an ID: the field/value pairs are missing.
        a.id_at = args.len();
    }
    Ok(a)
}

/// Trims `s` as `a` says; when the trim was approximate, rewrites `args` so that it replays
/// exactly: `~` becomes `=`, the threshold what the trim left.
fn trim_and_rewrite(s: &mut Stream, a: &AddTrimArgs, args: &mut [Bytes]) -> u64 {
    let Some(how) = a.trim else { return 0 };
    let removed = s.trim(how, a.approx, a.limit);
    if a.approx {
        args[a.threshold_at - 1] = Bytes::from_static(b"=");
        args[a.threshold_at] = match how {
            Trim::MaxLen(_) => Bytes::from(s.len().to_string()),
            Trim::MinId(_) => s.first_id().to_bytes(),
        };
    }
    removed
}

/// `XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id field value
/// [field value ...]`: the new entry's ID, or a null reply when `NOMKSTREAM` finds no key.
fn xadd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let a = match parse(ctx, args, true) {
        Ok(a) => a,
        Err(e) => return e,
    };
    let field_at = a.id_at + 1;
    let pairs = args.len().saturating_sub(field_at);
    if pairs < 2 || pairs % 2 == 1 {
        return arity_error("xadd");
    }
    if a.id == Some((0, Some(0))) {
        return Frame::error("ERR The ID specified in XADD must be greater than 0-0");
    }
    let key = &args[1];
    let mut e = match write_stream(ctx, key) {
        Ok(Some(e)) => e,
        Ok(None) if a.no_mkstream => return Frame::Null,
        Ok(None) => {
            let db = ctx.db();
            let e = db.get_or_create(key, ctx.now_ms, ctx.lazy_delete(), || {
                Value::Stream(Box::default())
            });
            if !matches!(e.value, Value::Stream(_)) {
                return super::util::wrongtype();
            }
            e
        }
        Err(err) => return err,
    };
    let s = stream_of(&mut e);
    if s.last_id() == StreamId::MAX {
        return Frame::error(
            "ERR The stream has exhausted the last possible ID, unable to add more items",
        );
    }
    let id = match a.id {
        None => s.next_auto_id(ctx.now_ms),
        Some((ms, None)) => s.next_id_in(ms),
        Some((ms, Some(seq))) => Some(StreamId::new(ms, seq)).filter(|&id| id > s.last_id()),
    };
    let Some(id) = id else {
        // (A stream created just now has last ID 0-0, which any ID here is past: only an
        // existing stream gets here, so nothing changed.)
        return Frame::error(
            "ERR The ID specified in XADD is equal or smaller than the target stream top item",
        );
    };
    s.append(
        id,
        args[field_at..].to_vec(),
        ctx.shared.config.stream_node_limits(),
    );
    let mut rewritten = args.to_vec();
    if a.id.is_none_or(|(_, seq)| seq.is_none()) {
        rewritten[a.id_at] = id.to_bytes();
    }
    let trimmed = trim_and_rewrite(s, &a, &mut rewritten);
    drop(e);
    ctx.modified(key);
    ctx.notify(STREAM, "xadd", key);
    if trimmed > 0 {
        ctx.notify(STREAM, "xtrim", key);
    }
    // Every reader waiting on the key gets the new entry.
    ctx.db().signal_all(key);
    ctx.propagate_as(vec![rewritten]);
    Frame::Bulk(id.to_bytes())
}

/// `XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]`: how many entries went.
fn xtrim(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let a = match parse(ctx, args, false) {
        Ok(a) => a,
        Err(err) => return err,
    };
    let key = &args[1];
    let mut e = match write_stream(ctx, key) {
        Ok(Some(e)) => e,
        Ok(None) => return Frame::Integer(0),
        Err(err) => return err,
    };
    let mut rewritten = args.to_vec();
    let removed = trim_and_rewrite(stream_of(&mut e), &a, &mut rewritten);
    drop(e);
    if removed > 0 {
        ctx.modified(key);
        ctx.notify(STREAM, "xtrim", key);
        ctx.propagate_as(vec![rewritten]);
    }
    Frame::Integer(removed as i64)
}
