//! `XREAD [COUNT n] [BLOCK ms] STREAMS key [key ...] id [id ...]`: the entries after an ID in
//! each of several streams, waiting for new ones when asked to.
//!
//! `$` stands for the stream's last ID at the time of the call (so a blocked reader sees only
//! what arrives later). A reader that finds nothing and said `BLOCK` waits on its keys; an
//! `XADD` wakes every reader of the key at once (they all read the same entries, unlike pops
//! where one client takes what another would have), and each reader checks its own IDs again.
//! A blocked reader served without `COUNT` gets at most 1000 entries a stream, as in Redis.

use bytes::Bytes;

use super::blocking::block_until;
use super::stream_args::{entries_frame, parse_strict_id};
use super::util::{is, parse_i64, syntax_error, wrongtype};
use super::{spec, CommandSpec, Ctx, BLOCKING, MOVABLEKEYS, READONLY};
use crate::command::WALKS_VALUE;
use crate::db::Value;
use crate::frame::Frame;
use crate::state::Shared;
use crate::stream::StreamId;

/// `XREAD`.
pub(crate) const COMMANDS: &[CommandSpec] = &[spec(
    "xread",
    -4,
    READONLY | BLOCKING | MOVABLEKEYS | WALKS_VALUE,
    0,
    0,
    0,
    xread,
)
.with_keys_of(streams_keys)];

/// How many entries a blocked reader without `COUNT` gets per stream (Redis's
/// `XREAD_BLOCKED_DEFAULT_COUNT`).
const BLOCKED_DEFAULT_COUNT: usize = 1000;

/// The positions of the keys: the first half of what follows `STREAMS`.
pub(crate) fn streams_keys(args: &[Bytes]) -> Vec<usize> {
    let Some(at) = args.iter().skip(1).position(|a| is(a, "streams")) else {
        return Vec::new();
    };
    let first = at + 2;
    let n = args.len().saturating_sub(first);
    if n == 0 || n % 2 != 0 {
        return Vec::new();
    }
    (first..first + n / 2).collect()
}

/// Parses `BLOCK`'s milliseconds with Redis's errors; 0 means forever.
pub(super) fn parse_block(arg: &[u8]) -> Result<u64, Frame> {
    let ms = parse_i64(arg)
        .map_err(|_| Frame::error("ERR timeout is not an integer or out of range"))?;
    if ms < 0 {
        return Err(Frame::error("ERR timeout is negative"));
    }
    // A deadline past the clock's range waits forever (the deadline saturates).
    Ok(ms as u64)
}

/// What one `XREAD` asked for: its keys, the ID after which to read in each, and whether the
/// client speaks RESP3 (whose reply is a map).
struct Read {
    keys: Vec<Bytes>,
    after: Vec<StreamId>,
    resp3: bool,
}

/// The reply for the streams among `read.keys` that have entries after their ID:
/// `[[key, entries], ...]` (a map in RESP3), `None` when none has. `waiting`: a key of another
/// type is not an error but not ready.
fn serve(
    shared: &Shared,
    db_index: usize,
    read: &Read,
    count: usize,
    now_ms: u64,
    waiting: bool,
) -> Result<Option<Frame>, Frame> {
    let db = shared.keyspace.db(db_index);
    let lazy = shared.lazy_expire_deletes();
    let mut out = Vec::new();
    for (key, &gt) in read.keys.iter().zip(&read.after) {
        let Some(e) = db.get(key, now_ms, lazy) else {
            continue;
        };
        let Value::Stream(s) = &e.value else {
            if waiting {
                continue;
            }
            return Err(wrongtype());
        };
        let Some(start) = gt.next() else { continue };
        let entries = s.range(start, StreamId::MAX, false, count);
        if entries.is_empty() {
            continue;
        }
        out.push((Frame::Bulk(key.clone()), entries_frame(&entries)));
    }
    if out.is_empty() {
        return Ok(None);
    }
    Ok(Some(if read.resp3 {
        Frame::Map(out)
    } else {
        Frame::Array(
            out.into_iter()
                .map(|(k, v)| Frame::Array(vec![k, v]))
                .collect(),
        )
    }))
}

/// The options of `XREAD` and `XREADGROUP`, read as Redis's `xreadCommand` reads both.
pub(super) struct ReadArgs {
    /// `BLOCK ms`.
    pub(super) block: Option<u64>,
    /// `COUNT n` (0: no limit).
    pub(super) count: usize,
    /// `NOACK` (`XREADGROUP` only).
    pub(super) noack: bool,
    /// `GROUP group consumer` (`XREADGROUP` only).
    pub(super) group: Option<(Bytes, Bytes)>,
    /// Where the keys start, after `STREAMS`.
    pub(super) streams_at: usize,
}

/// Reads the options before `STREAMS`; `GROUP` and `NOACK` are refused unless `group_ok`
/// (`XREADGROUP`), and `BLOCK` when `in_script` (a script cannot wait), with Redis's texts, in
/// Redis's order.
pub(super) fn parse_read_args(
    args: &[Bytes],
    group_ok: bool,
    in_script: bool,
) -> Result<ReadArgs, Frame> {
    let mut r = ReadArgs {
        block: None,
        count: 0,
        noack: false,
        group: None,
        streams_at: 0,
    };
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - i - 1;
        let o = &args[i];
        if is(o, "block") && more > 0 {
            if in_script {
                // Redis names the command as the script spelled it.
                return Err(Frame::error(format!(
                    "ERR {} command is not allowed with BLOCK option from scripts",
                    String::from_utf8_lossy(&args[0])
                )));
            }
            r.block = Some(parse_block(&args[i + 1])?);
            i += 2;
        } else if is(o, "count") && more > 0 {
            r.count = parse_i64(&args[i + 1])?.max(0) as usize;
            i += 2;
        } else if is(o, "streams") && more > 0 {
            r.streams_at = i + 1;
            if !(args.len() - r.streams_at).is_multiple_of(2) {
                return Err(Frame::error(
                    "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
                ));
            }
            break;
        } else if is(o, "group") && more >= 2 {
            if !group_ok {
                return Err(Frame::error(
                    "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            r.group = Some((args[i + 1].clone(), args[i + 2].clone()));
            i += 3;
        } else if is(o, "noack") {
            if !group_ok {
                return Err(Frame::error(
                    "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            r.noack = true;
            i += 1;
        } else {
            return Err(syntax_error());
        }
    }
    if r.streams_at == 0 {
        return Err(syntax_error());
    }
    Ok(r)
}

fn xread(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let ReadArgs {
        block,
        count,
        streams_at,
        ..
    } = match parse_read_args(args, false, ctx.in_script) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let n = (args.len() - streams_at) / 2;
    let keys: Vec<Bytes> = args[streams_at..streams_at + n].to_vec();
    let mut after = Vec::with_capacity(n);
    let (db, now, lazy) = (ctx.db(), ctx.now_ms, ctx.lazy_delete());
    for (key, id) in keys.iter().zip(&args[streams_at + n..]) {
        let last = match db.get(key, now, lazy) {
            None => None,
            Some(e) => match &e.value {
                Value::Stream(s) => Some(s.last_id()),
                _ => return wrongtype(),
            },
        };
        if &id[..] == b"$" {
            after.push(last.unwrap_or_default());
            continue;
        }
        if &id[..] == b">" {
            return Frame::error(
                "ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.",
            );
        }
        match parse_strict_id(id) {
            Ok(id) => after.push(id),
            Err(e) => return e,
        }
    }
    let resp3 = ctx.client.protocol == crate::frame::Protocol::Resp3;
    let limit = if count == 0 { usize::MAX } else { count };
    let read = Read { keys, after, resp3 };
    match serve(ctx.shared, ctx.client.db, &read, limit, now, false) {
        Ok(Some(f)) => return f,
        Ok(None) => {}
        Err(e) => return e,
    }
    let Some(timeout_ms) = block else {
        return Frame::NullArray;
    };
    if !ctx.may_block() {
        return Frame::NullArray;
    }
    let limit = if count == 0 {
        BLOCKED_DEFAULT_COUNT
    } else {
        count
    };
    let waiting_keys = read.keys.clone();
    block_until(
        ctx,
        waiting_keys,
        timeout_ms,
        false,
        move |shared, db, now| serve(shared, db, &read, limit, now, true),
    );
    Frame::NullArray
}
